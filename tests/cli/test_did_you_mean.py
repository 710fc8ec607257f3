"""A mistyped flag is answered with the closest flag of the same command (or of the pasted
engine's release), as a mistyped model name is; a word close to nothing gets no guess."""

from __future__ import annotations

import pytest

from kvstrategies.cli.app import main


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err


def test_plan_names_the_flag_a_typo_meant(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--kv-cahce-dtype", "fp8")
    assert "unrecognized arguments: --kv-cahce-dtype fp8; did you mean --kv-cache-dtype for --kv-cahce-dtype?" in err


def test_each_typo_of_a_command_gets_its_own_guess(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "sweep", "llama-3.1-8b", "--gpus", "H100", "--tpp", "2")
    assert "did you mean --gpu for --gpus, --tp for --tpp?" in err


def test_a_word_close_to_no_flag_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--zzz")
    assert "unrecognized arguments: --zzz (see kvstrategies --help)" in err
    assert "did you mean" not in err


def test_a_pasted_sglang_command_names_the_release_flag_a_typo_meant(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "plan", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path", "x",
                 "--mem-fraction-statc", "0.8")  # fmt: skip
    assert "--mem-fraction-statc is not an SGLang 0.5.23 server flag" in err
    assert "(did you mean --mem-fraction-static?)" in err


def test_a_pasted_vllm_command_names_the_flag_a_typo_meant(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "plan", "--gpu", "H100", "--", "vllm", "serve", "x", "--max-modl-len", "4096")
    assert "(did you mean --max-model-len?)" in err
