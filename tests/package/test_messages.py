"""Messages say what the user wrote and a fix that works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.cli.app import main
from kvstrategies.presets import load_preset_config


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvstrategies: error: ")
    return lines[0]


def test_plot_of_a_model_whose_name_holds_dollars(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """matplotlib reads ``$...$`` as mathtext: ``m$_{$x`` made it raise while drawing the title."""
    pytest.importorskip("matplotlib")
    folder = tmp_path / "m$_{$x"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(load_preset_config("llama-3.1-8b")))
    out = tmp_path / "plan.png"
    assert main(["plan", str(folder), "--gpu", "H100", "--plot", str(out)]) == 0
    assert out.stat().st_size > 1000 and "wrote the memory breakdown plot" in capsys.readouterr().err


def test_a_budget_error_names_the_flag_not_the_case_field(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "plan", "llama-3.1-8b", "--available-bytes", "0")
    assert "--available-bytes must be >= 1" in line and "case field" not in line


def test_plan_flags_sglang_refuses_are_refused_with_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    """``--attention-backend bogus`` was planned; the fix names SGLang's own choices."""
    line = _error(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--attention-backend", "bogus")
    assert "--attention-backend 'bogus' is not one of SGLang's choices (triton, torch_native" in line
    line = _error(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--kv-cache-dtype", "float32")
    assert "(auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16)" in line
    assert main(["plan", "llama-3.1-8b", "--gpu", "H100", "--kv-cache-dtype", "fp8_e4m3", "--json"]) == 0


def test_a_pasted_draft_path_that_does_not_exist_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pasted ``--speculative-draft-model-path`` is planned (its weights: sglang/draft_model.py); one
    that does not exist is named with what SGLang would do, and the draft's own folder plans."""
    launch = ["sglang", "serve", "--model-path", "llama-3.1-8b", "--speculative-algorithm", "EAGLE"]
    line = _error(capsys, "plan", "--gpu", "H100", "--", *launch, "--speculative-draft-model-path", "d")
    assert "--speculative-draft-model-path 'd': no such file or folder; SGLang could not load the draft model" in line
    draft = tmp_path / "config.json"
    draft.write_text((Path(__file__).parents[2] / "kvstrategies" / "presets" / "llama-3.1-8b.json").read_text())
    assert main(["plan", "--gpu", "H100", "--", *launch, "--speculative-draft-model-path", str(tmp_path)]) == 0


@pytest.mark.parametrize("argv", [["sweep", "deepseek-v2-lite", "--gpu", "H100", "--pp-rank", "\r"],
                                  ["plan", "a\nb", "--gpu", "H100"]])  # fmt: skip
def test_a_control_character_the_user_typed_stays_on_the_one_error_line(capsys: pytest.CaptureFixture[str],
                                                                        argv: list[str]) -> None:  # fmt: skip
    """Found by the thorough fuzz: argparse echoed ``\\r`` and the error became two lines."""
    line = _error(capsys, *argv)
    assert "\\r" in line or "\\n" in line
