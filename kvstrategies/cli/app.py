"""``kvstrategies``: plan a deployment from the command line.

This module is the entry point (the console script and ``python -m kvstrategies``): the top-level
parser, a pasted launch command (``plan [flags] -- python -m sglang.launch_server ...``), the
dispatch to the command and the error report. Every user error is one line on stderr and exit
code 2 (no traceback). Each command is one module of this package that owns its subparser
(``add_parser``) and its handler (``run``), imported only when the command line names it (or
``--help`` lists every command): :mod:`.plan`, :mod:`.sweep`, :mod:`.compare`, :mod:`.fit`, :mod:`.verify`,
:mod:`.listings` (``presets``, ``checkpoints``, ``architectures``, ``gpus``) and :mod:`.releases`;
the flags ``plan``, ``sweep`` and ``compare`` share are :mod:`.arguments`.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import KVCacheConfigError

if TYPE_CHECKING:
    from ..sglang.pasted_command import LaunchCommand

#: the subcommands, in the order ``kvstrategies --help`` lists them, and the module of this
#: package that owns each (its ``add_parser`` and ``run``)
COMMAND_MODULES: dict[str, str] = {
    "plan": "plan",
    "sweep": "sweep",
    "compare": "compare",
    "fit": "fit",
    "verify": "verify",
    "presets": "listings",
    "checkpoints": "listings",
    "architectures": "listings",
    "gpus": "listings",
    "releases": "releases",
}
#: the subcommands, in the order ``kvstrategies --help`` lists them
COMMANDS = tuple(COMMAND_MODULES)


def _command_module(command: str) -> ModuleType:
    """The module that owns ``command``, imported on first use (a command loads only its own)."""
    return importlib.import_module(f"{__package__}.{COMMAND_MODULES[command]}")


class _OneLineErrors(argparse.ArgumentParser):
    """argparse, but a usage error is reported like every other user error (one stderr line,
    exit 2; with ``--json`` also a JSON object, :mod:`kvstrategies.planner.error_report`)."""

    def error(self, message: str) -> NoReturn:
        from ..planner.error_report import UsageError

        raise UsageError(f"{message}{_did_you_mean(self, message)} (see {self.prog} --help)")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--`` option string of ``parser`` and of the subcommands built into it."""
    found: set[str] = set()
    stack = [parser]
    while stack:
        current = stack.pop()
        found.update(o for o in current._option_string_actions if o.startswith("--"))
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return found


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """``; did you mean --kv-cache-dtype?`` for each unrecognized option close to a known one."""
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return ""
    import difflib

    options = sorted(_options(parser))
    guesses = []
    for word in message[len(prefix) :].split():
        name = word.split("=", 1)[0]
        if name.startswith("--"):
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.8)
            guesses += [f"{close[0]} for {name}"] if close else []
    return f"; did you mean {', '.join(guesses)}?" if guesses else ""


class _VersionAction(argparse.Action):
    """``--version``: the package and the SGLang releases it models (worked out only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from .. import __version__
        from ..core.releases import NEWEST_SGLANG, SGLANG_RELEASES

        span_text = f"SGLang {SGLANG_RELEASES[0].text}-{NEWEST_SGLANG.text} rules, default {NEWEST_SGLANG.text}"
        print(f"kvstrategies {__version__} ({span_text})")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``kvstrategies`` parser: every subcommand, or (``command``) only that one, which is
    all that parsing a command line starting with it needs (each subcommand costs its flags)."""
    parser = _OneLineErrors(
        prog="kvstrategies",
        description="Plan SGLang-compatible KV-cache pools: how many tokens and requests fit.",
        epilog="Paste a launch command: kvstrategies plan --gpu H100 -- python -m sglang.launch_server "
        "--model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 1",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS if command is None else (command,):
        _command_module(name).add_parser(sub, name)
    return parser


@functools.cache
def _parser(command: str | None) -> argparse.ArgumentParser:
    """:func:`build_parser`, built once per subcommand in a process (parsing leaves it unchanged)."""
    return build_parser(command)


def split_launch_command(argv: Sequence[str]) -> tuple[list[str], LaunchCommand | None]:
    """``plan [flags] -- <SGLang launch command>``: the ``plan`` arguments with the command's
    memory flags first (flags before ``--`` win, being later), and the translated command."""
    args = list(argv)
    if not args or args[0] != "plan" or "--" not in args:
        return args, None
    from ..core.releases import parse_release
    from ..sglang.pasted_command import translate
    from ..vllm.planner.command import is_vllm_command, translate_vllm

    cut = args.index("--")
    pasted = args[cut + 1 :]
    if is_vllm_command(pasted):
        command = translate_vllm(pasted)
    else:
        # the release as argparse reads it (a unique prefix such as --sglang-ver counts), so the pasted
        # command is read with the flags of the release that is planned
        release = _parser("plan").parse_known_args(["plan", *args[1:cut]])[0].sglang_version
        command = translate(pasted, parse_release(release))
    return ["plan", *command.plan_args, *args[1:cut]], command



def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; ``argv`` defaults to the process's own arguments."""
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in a name prints as \udcxx, never crashes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args: argparse.Namespace | None = None
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        argv_list, command = split_launch_command(raw)
        parser = _parser(argv_list[0] if argv_list and argv_list[0] in COMMANDS else None)
        args = parser.parse_args(argv_list)
        args.launch_command = command
        run: Callable[[argparse.Namespace], int] = _command_module(args.command).run
        return run(args)
    except KVCacheConfigError as exc:
        message = str(exc)
        if args is not None and args.command in ("plan", "sweep") and getattr(args, "case", None) is None:
            from ..planner.flag_names import flag_wording

            message = flag_wording(message)  # planned from flags: name the flags, not the case fields
        return _report_error(exc, message, raw)
    except BrokenPipeError:  # `kvstrategies plan ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # e.g. --plot into a folder that does not exist
        where = f"{exc.filename}: " if exc.filename else ""
        return _report_error(exc, f"{where}{exc.strerror or exc}", raw)


def one_line(message: str) -> str:
    """``message`` on one line: a control character the user typed (``--pp-rank $'\\r'``, a model
    name with a newline) is shown escaped instead of breaking the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def _report_error(exc: BaseException, message: str, argv: Sequence[str]) -> int:
    """One line on stderr; with ``--json`` the JSON object on stdout, else a does-not-fit's options."""
    from ..planner.error_report import error_json, json_requested, options_text

    message = one_line(message)
    print(f"kvstrategies: error: {message}", file=sys.stderr)
    if json_requested(argv):
        if not getattr(exc, "reported_as_json", False):
            print(error_json(exc, message))
    else:
        options = options_text(exc)
        if options is not None:
            print(options)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
