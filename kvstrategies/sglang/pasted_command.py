"""Read a pasted SGLang launch command into ``kvstrategies plan`` flags.

``kvstrategies plan [--gpu H100 ...] -- python -m sglang.launch_server --model-path X --tp-size 8 ...``
(also ``python3 -m sglang.launch_server``, ``sglang serve``, a leading ``VAR=value`` environment,
or the whole command as one quoted string, split as a POSIX shell splits it). Every server flag of
the SGLang release planned for (``--sglang-version`` before the ``--``; default the newest) is in
exactly one class of :mod:`.launch_flag_classes` (flag names from :mod:`.sglang_flags` for the
newest release and ``kvstrategies/sglang/tables/flag_releases.py`` for what each older release lacks or has on top;
abbreviations resolved as SGLang's argparse does): planned (passed on to ``plan``), refused by
name (it changes memory in a way not modelled; ``--config FILE`` too, as the planner does not read
the YAML file it names), or reviewed as not changing memory (listed as ignored). Every value is
checked as SGLang's argparse checks it (:mod:`.launch_values`): a value SGLang refuses is refused.

The environment in front of the command is read the same way (:mod:`kvstrategies.sglang.knobs`):
``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` becomes ``--allow-context-length-override``;
any other ``SGLANG_*`` knob that changes memory is refused by name (a case file's ``env`` plans
the sizing knobs); knobs that do not change memory, names SGLang does not read, and other
variables are listed as ignored.

A flag the release does not have (named with the releases that have it), an empty
``--model-path``, a switch given a value, a command longer than :data:`MAX_COMMAND_CHARS`
characters or :data:`MAX_COMMAND_TOKENS` words, and text a shell could not split (an unbalanced
quote, a trailing backslash) are errors too.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from ..core.quantization_names import QUANTIZATION, quantization_for
from ..core.releases import NEWEST_SGLANG, EngineRelease, supported_releases
from ..errors import KVCacheConfigError
from .flag_classes import (
    CONFIG_FLAG,
    GRAPH_RESERVE_FLAGS,
    MODELLED,
    NO_EFFECT,
    NOT_MODELLED,
    OLDER_GRAPH_RESERVE_FLAGS,
    OLDER_NO_EFFECT,
    OLDER_NOT_MODELLED,
    OLDER_RENAMED,
    REFUSED_UNLESS,
)
from .flag_values import check_flag_value
from .knobs import REFUSED_KNOBS, SIZING_KNOBS, knob_class
from .tables.flags import SGLANG_SERVER_FLAGS

#: the classes over every release's flags (the newest release's and the older ones' own)
_NOT_MODELLED = {**NOT_MODELLED, **OLDER_NOT_MODELLED}
_GRAPH_RESERVE = GRAPH_RESERVE_FLAGS | OLDER_GRAPH_RESERVE_FLAGS
_NO_EFFECT = NO_EFFECT | OLDER_NO_EFFECT

__all__ = ["GRAPH_RESERVE_FLAGS", "MODELLED", "NO_EFFECT", "NOT_MODELLED", "QUANTIZATION", "REFUSED_UNLESS",
           "LaunchCommand", "canonical_flag", "flag_values", "next_option", "release_flags",
           "releases_with_flag", "strip_environment", "translate"]  # fmt: skip

#: the longest pasted command read (characters) and the most words; real commands have < 200 words
MAX_COMMAND_CHARS = 64 * 1024
MAX_COMMAND_TOKENS = 4096

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LAUNCHERS = ("sglang.launch_server", "sglang.launch_server.py")
OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
AITER_ENV = "SGLANG_USE_AITER"  # SGLang's ROCm images set it to 1; =0 turns the aiter MoE padding off


@dataclass(frozen=True)
class LaunchCommand:
    """A translated launch command: the ``plan`` arguments, what was ignored, and notes."""

    plan_args: tuple[str, ...]
    ignored: tuple[str, ...]
    notes: tuple[str, ...]


def strip_environment(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``(the VAR=value words in front, the rest)`` of a pasted command (``env VAR=1 ...`` too)."""
    env = []
    while tokens and _ENV.match(tokens[0]):
        env.append(tokens.pop(0))
    if tokens and tokens[0] == "env":  # `env VAR=1 python -m ...`
        tokens.pop(0)
        while tokens and _ENV.match(tokens[0]):
            env.append(tokens.pop(0))
    return env, tokens


def _strip_launcher(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``(environment assignments, server arguments)`` of a launch command."""
    env, tokens = strip_environment(tokens)
    if len(tokens) >= 3 and re.match(r"^(.*/)?python[\d.]*$", tokens[0]) and tokens[1] == "-m":
        if tokens[2] not in _LAUNCHERS:
            raise KVCacheConfigError(
                f"the pasted command runs `python -m {tokens[2]}`, not SGLang's server; paste a "
                "`python -m sglang.launch_server ...` or `sglang serve ...` command"
            )
        return env, tokens[3:]
    if len(tokens) >= 2 and re.match(r"^(.*/)?sglang$", tokens[0]) and tokens[1] == "serve":
        return env, tokens[2:]
    if tokens and re.match(r"^(.*/)?sglang$", tokens[0]):
        raise KVCacheConfigError("the pasted command runs `sglang` without `serve`; paste the server command")
    if tokens and not tokens[0].startswith("-"):
        raise KVCacheConfigError(
            f"the pasted command starts with {tokens[0]!r}; paste `python -m sglang.launch_server ...` or "
            "`sglang serve ...` (or only its flags)"
        )
    return env, tokens


@cache
def release_flags(release: EngineRelease = NEWEST_SGLANG) -> Mapping[str, tuple[str, str]]:
    """Every server flag of ``release``: option string -> ``(canonical option, arity)``."""
    if release == NEWEST_SGLANG:
        return SGLANG_SERVER_FLAGS
    from .tables.flag_releases import FLAGS_EXTRA, FLAGS_MISSING  # older releases only: loaded on first use

    if release.text not in FLAGS_MISSING:  # pragma: no cover - the table covers every supported release
        raise KVCacheConfigError(f"no flag list for {release.label}; run tools/list_sglang_flags.py --release-delta")
    missing = frozenset(FLAGS_MISSING[release.text])
    flags = {k: v for k, v in SGLANG_SERVER_FLAGS.items() if k not in missing}
    flags.update(FLAGS_EXTRA[release.text])
    return flags


def releases_with_flag(option: str) -> tuple[EngineRelease, ...]:
    """The supported releases that have server flag ``option`` (exact spelling)."""
    return tuple(r for r in supported_releases() if option in release_flags(r))


def canonical_flag(option: str, release: EngineRelease = NEWEST_SGLANG) -> tuple[str, str]:
    """``(canonical SGLang option, arity)`` of ``release`` for an option or a unique prefix of one."""
    flags = release_flags(release)
    if option in flags:
        return flags[option]
    matches = {flags[name] for name in flags if name.startswith(option)}
    if len(matches) == 1:
        return matches.pop()
    if matches:
        raise KVCacheConfigError(
            f"{option} is ambiguous among SGLang's flags ({', '.join(sorted(m[0] for m in matches)[:5])}); spell it out"
        )
    having = releases_with_flag(option)
    elsewhere = f" (SGLang {', '.join(r.text for r in having)} {'has' if len(having) == 1 else 'have'} it)"
    import difflib  # only on this error path

    close = [] if having else difflib.get_close_matches(option, list(flags), n=1, cutoff=0.8)
    guess = f" (did you mean {close[0]}?)" if close else ""
    raise KVCacheConfigError(
        f"{option} is not an {release.label} server flag{elsewhere if having else ''}, so SGLang would refuse the "
        f"command{guess}; kvstrategies' own flags (--gpu, --sglang-version, --request-length, --json, ...) go "
        "before the `--`"
    )


def split_command(command: Sequence[str]) -> list[str]:
    """The words of a pasted command: the tokens given, or one string split as a POSIX shell
    splits it (``shlex``); bounded by :data:`MAX_COMMAND_CHARS` and :data:`MAX_COMMAND_TOKENS`."""
    tokens = list(command)
    if len(tokens) > MAX_COMMAND_TOKENS or sum(len(t) for t in tokens) > MAX_COMMAND_CHARS:
        raise KVCacheConfigError(
            f"the pasted command has {len(tokens):,} words / {sum(len(t) for t in tokens):,} characters, more than "
            f"{MAX_COMMAND_TOKENS:,} words or {MAX_COMMAND_CHARS:,} characters; paste one launch command"
        )
    if any("\0" in t for t in tokens):
        raise KVCacheConfigError("the pasted command holds a NUL byte; paste it as text")
    if len(tokens) == 1 and " " in tokens[0].strip():
        try:
            tokens = shlex.split(tokens[0])
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise KVCacheConfigError(
                f"the pasted command cannot be split as a shell would ({str(exc).lower()}: an unbalanced quote or a "
                "trailing backslash); paste the complete command"
            ) from exc
        if len(tokens) > MAX_COMMAND_TOKENS:
            raise KVCacheConfigError(f"the pasted command has {len(tokens):,} words, more than {MAX_COMMAND_TOKENS:,}")
    return [t for t in tokens if t != "\\"]


def _environment(env: Sequence[str], out: list[str], ignored: list[str]) -> None:
    """The ``VAR=value`` words in front of the command: planned, refused or ignored (module doc)."""
    for assignment in env:
        name, _, value = assignment.partition("=")
        kind = knob_class(name) if name.startswith("SGLANG_") else "other"
        if name == OVERRIDE_ENV:
            if value.strip().lower() in ("1", "true", "yes", "y", "on"):
                out.append("--allow-context-length-override")
            continue
        if name == AITER_ENV:  # =1 is what SGLang's ROCm images set (the planner's default there)
            if value.strip().lower() in ("0", "false", "no", "n", "off"):
                out.append("--no-rocm-aiter")
            else:
                ignored.append(assignment)
            continue
        if kind == "planned":
            raise KVCacheConfigError(
                f"{name} in front of the command changes KV sizing, which a pasted command does not plan; plan it "
                f"from a case file whose env sets it (kvstrategies plan --case FILE; the env knobs a case plans: "
                f"{', '.join(sorted(SIZING_KNOBS))})"
            )
        if kind == "refused":
            raise KVCacheConfigError(
                f"{name} in front of the command {REFUSED_KNOBS[name]}, which kvstrategies does not model; plan "
                "without it and allow for it, or give the KV budget directly with --available-bytes"
            )
        ignored.append(assignment if kind != "unknown" else f"{assignment} (not an SGLang knob)")


def _check_refusals(canon: str, option: str, values: list[str], given: set[str]) -> None:
    """Refuse a flag of the refused class (module doc of :mod:`.launch_flag_classes`)."""
    if canon == CONFIG_FLAG:
        raise KVCacheConfigError(
            f"{option} {' '.join(values)} makes SGLang read further launch flags from a YAML file, which kvstrategies "
            "does not read; paste the flags the file holds instead of --config"
        )
    if canon in _NOT_MODELLED:
        hint = (
            "plan the target without it, with the draft's layers (--speculative-draft-layers, before `--`) "
            "and the draft's weights added to --weight-bytes"
            if canon.startswith("--speculative-draft")
            else "plan without it and allow for it, or give the KV budget directly with --available-bytes"
        )
        raise KVCacheConfigError(
            f"{option} changes GPU memory ({_NOT_MODELLED[canon]}) in a way kvstrategies does not model; {hint}"
        )
    if canon in REFUSED_UNLESS:
        what, harmless = REFUSED_UNLESS[canon]
        if any(value not in harmless for value in values):
            keep = f"; {' or '.join(harmless)} change nothing" if harmless else ""
            raise KVCacheConfigError(
                f"{option} {' '.join(values)} changes GPU memory ({what}) in a way kvstrategies does not model{keep}; "
                "plan without it and allow for it, or give the KV budget directly with --available-bytes"
            )
    if canon in _GRAPH_RESERVE and "--mem-fraction-static" not in given:
        raise KVCacheConfigError(
            f"{option} changes SGLang's default --mem-fraction-static (its CUDA-graph reserve) in a way "
            "kvstrategies does not model; add --mem-fraction-static (as SGLang logs it) to the command"
        )


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def looks_like_option(word: str) -> bool:
    """Whether argparse reads ``word`` as an option, so that it ends the values of the flag before
    it (``argparse.ArgumentParser._parse_optional``): it starts with ``-``, is longer than one
    character, is not a negative number (``-1``, ``-.5``; ``-1e+308`` is not one) and holds no
    space. SGLang's parser has no option that looks like a negative number."""
    return word.startswith("-") and len(word) > 1 and not _NEGATIVE_NUMBER.match(word) and " " not in word


def next_option(rest: list[str], i: int) -> tuple[str, str | None, int]:
    """``(option, its inline value after '=' or None, the next index)`` of the word ``rest[i]``, which
    must be an option (a bare value there has no flag to belong to)."""
    token = rest[i]
    if not token.startswith("-"):
        raise KVCacheConfigError(f"unexpected {token!r:.80} in the pasted command (a value without a flag)")
    option, eq, inline = token.partition("=")
    return option, inline if eq else None, i + 1


def flag_values(
    rest: list[str], i: int, option: str, arity: str, inline: str | None, engine: str = "SGLang"
) -> tuple[list[str], int]:
    """The values of the flag at ``rest[i - 1]`` as argparse takes them, and the next index."""
    if arity == "0":
        if inline is not None:
            raise KVCacheConfigError(
                f"{option} is a switch and takes no value, so {engine}'s argparse refuses {option}="
            )
        return [], i
    if inline is not None:
        return [inline], i
    values: list[str] = []
    while i < len(rest) and not looks_like_option(rest[i]):
        values.append(rest[i])
        i += 1
        if arity in ("1", "?"):
            break
    if arity in ("1", "+") and not values:
        raise KVCacheConfigError(f"{option} in the pasted command needs a value")
    return values, i


def translate(command: Sequence[str], release: EngineRelease = NEWEST_SGLANG) -> LaunchCommand:
    """Translate a launch command (tokens, or one string) into ``plan`` arguments for ``release``
    (whose flags it may use)."""
    env, rest = _strip_launcher(split_command(command))
    out: list[str] = []
    ignored: list[str] = []
    notes: list[str] = []
    _environment(env, out, ignored)
    given = {canonical_flag(t.split("=", 1)[0], release)[0] for t in rest if t.startswith("--")}
    i = 0
    while i < len(rest):
        option, inline, i = next_option(rest, i)
        canon, arity = canonical_flag(option, release)
        canon = OLDER_RENAMED.get(canon, canon)
        values, i = flag_values(rest, i, option, arity, inline)
        values = [check_flag_value(canon, option, value) for value in values]
        _check_refusals(canon, option, values, given)
        if canon == "--model-path" and not (values and values[0].strip()):
            raise KVCacheConfigError(
                f"{option} is empty in the pasted command; SGLang would have no model to load (give the model's "
                "path or HF id)"
            )
        if canon in _NO_EFFECT or canon in REFUSED_UNLESS or canon in _GRAPH_RESERVE:  # harmless as given
            ignored.append(option)
            continue
        if canon not in MODELLED:  # every flag is classified (tests/sglang/test_pasted_command.py); never planned blind
            raise KVCacheConfigError(f"{option} is not reviewed for its effect on memory; plan without it")
        if canon == "--quantization":
            out += ["--weight-quantization", quantization_for(values[0] if values else "")]
            continue
        out += [canon, *values]
    if ignored:
        notes.append(f"ignored from the launch command (no effect on the memory plan): {', '.join(ignored)}")
    return LaunchCommand(tuple(out), tuple(ignored), tuple(notes))
