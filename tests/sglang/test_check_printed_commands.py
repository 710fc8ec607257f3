"""``tools/check_printed_commands.py`` (issue #38): the printed commands go to the installed SGLang's
argparse in CI. Here, without SGLang, the tool's own steps: its draws plan with the project's CLI,
the server words are what follows ``-m sglang.launch_server``, and a parser's refusal (an unknown
flag, a bad choice, a bad integer) is reported with argparse's message."""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
from pathlib import Path
from types import ModuleType

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_SGLANG

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_tool_check_printed_commands",
                                                  ROOT / "tools" / "check_printed_commands.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_in_parser() -> argparse.ArgumentParser:
    """A parser shaped like SGLang's for the flags used below."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3"], default="auto")
    return parser


def test_refusals_carry_argparse_messages(tool: ModuleType) -> None:
    parser = _stand_in_parser()
    assert tool.refusal(parser, ["--model-path", "m", "--tp-size", "2"]) is None
    assert tool.refusal(parser, ["--model-path", "m", "--ep-size", "2"]) == "unrecognized arguments: --ep-size 2"
    assert "invalid choice: 'fp8'" in tool.refusal(parser, ["--model-path", "m", "--kv-cache-dtype", "fp8"])
    assert "invalid int value: 'two'" in tool.refusal(parser, ["--model-path", "m", "--tp-size", "two"])


def test_server_words_follow_the_module(tool: ModuleType) -> None:
    command = {"argv": ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "8"]}
    assert tool.server_words(command) == ["--model-path", "m", "--tp-size", "8"]


def test_draws_plan_and_print_commands_the_project_reads(
    tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every draw is a valid ``plan`` request (planned or refused by the planner, never a usage
    error), and a planned one prints a command with the server's words."""
    (tmp_path / "config.json").write_text(json.dumps(tool.EAGLE3_DRAFT), encoding="utf-8")
    rng = random.Random(1)
    planned = 0
    for _ in range(12):
        request = tool.draw(rng, NEWEST_SGLANG.text, str(tmp_path))
        assert request[:1] == ["plan"] and request[request.index("--sglang-version") + 1] == NEWEST_SGLANG.text
        main([*request, "--json"])
        err = capsys.readouterr().err
        assert not any(usage in err for usage in ("unrecognized arguments", "invalid choice", "expected one argument",
                                                  "invalid int value")), (request, err)  # fmt: skip
        document = tool.planned(request)
        if document is not None:
            planned += 1
            words = tool.server_words(document["planner"]["sglang_command"])
            assert words[0] == "--model-path"
    assert planned >= 3  # the draw is not met by refusals alone
