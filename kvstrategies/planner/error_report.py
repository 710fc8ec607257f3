"""How the CLI reports a refusal, for people and for scripts.

Every user error is one line on stderr (``kvstrategies: error: ...``) and exit code 2. With
``--json`` the same error is also one JSON object on stdout::

    {"error": "<the line>", "flag": "--tp" | null, "fix": "<what to change>" | null}

``flag`` is the first flag the message names; ``fix`` the clause of the message that says what
to change (messages read "what is wrong; what to do"). A deployment that does not fit
(:class:`~kvstrategies.planner.replan.DoesNotFitError`) adds ``"options"``: every change with
which it plans, each planned again, with its cost and launch command; without ``--json`` they
are printed on stdout, the answer to "what does fit?".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import KVCacheConfigError

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: first words of a clause that says what to do
_IMPERATIVE = frozenset({
    "use", "give", "pass", "add", "leave", "name", "set", "unset", "raise", "lower", "point", "download",
    "install", "pip", "plan", "drop", "keep", "remove", "check", "try", "narrow", "spell", "paste", "fix",
    "allow", "serve", "run", "choose", "pick", "put", "move", "split", "reduce", "increase", "shorten", "see",
    "did", "`kvstrategies",
})  # fmt: skip
#: where a message's clauses end: "; ", a sentence end, or an opening "(see ...)"
_CLAUSE = re.compile(r";\s+|\.\s+(?=[A-Z`])|\s\((?=see )")


class UsageError(KVCacheConfigError):
    """A command line argparse cannot read (unknown flag, bad value)."""


def json_requested(argv: Sequence[str]) -> bool:
    """``--json`` among kvstrategies' own arguments (before a pasted command's ``--``)."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def error_flag(message: str) -> str | None:
    match = _FLAG.search(message)
    return match.group(0) if match else None


def error_fix(message: str) -> str | None:
    """The first clause after the first that starts with what to do, else ``None``."""
    for clause in _CLAUSE.split(message)[1:]:
        words = clause.strip().split()
        if words and words[0].lower().strip("'\"(") in _IMPERATIVE:
            return clause.strip().removesuffix(")") if clause.startswith("see ") else clause.strip()
    return None


def error_document(exc: BaseException, message: str) -> dict[str, Any]:
    """The ``--json`` object for an error (see the module doc)."""
    from .replan import DoesNotFitError

    document: dict[str, Any] = {"error": message, "flag": error_flag(message), "fix": error_fix(message)}
    if isinstance(exc, DoesNotFitError):
        from .report import fix_document

        document["options"] = [fix_document(option, exc.request) for option in exc.options]
        if exc.options:
            document["fix"] = f"{exc.options[0].flag} ({exc.options[0].cost})"
    return document


def error_json(exc: BaseException, message: str) -> str:
    return json.dumps(error_document(exc, message), indent=2)


def options_text(exc: BaseException) -> str | None:
    """The re-planned options of a deployment that does not fit, for stdout; ``None`` otherwise."""
    from .replan import DoesNotFitError

    if not isinstance(exc, DoesNotFitError):
        return None
    from .report import fix_lines

    if not exc.options:
        return (
            "no single change tried makes it plan (FP8 KV, FP8 weights, --mem-fraction-static up to 0.95, "
            "TP up to 8 x PP 2, a larger GPU): give --weight-bytes / --available-bytes by hand to explore"
        )
    lines = ["options that fit, each planned again (cheapest first):"]
    for option in exc.options:
        lines += fix_lines(option, exc.request, None, "  ")
    return "\n".join(lines)
