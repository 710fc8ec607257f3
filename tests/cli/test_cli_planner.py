"""``kvstrategies plan`` / ``sweep`` / ``presets`` as a user runs them (planner features)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvstrategies.api import plan
from kvstrategies.case import load_case
from kvstrategies.cli.app import main
from kvstrategies.document import plan_document
from kvstrategies.presets import preset_names

CASES = Path(__file__).parents[2] / "cases"
ROOT = Path(__file__).resolve().parents[2]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["plan", *argv, "--json"]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def test_every_preset_plans_without_importing_torch() -> None:
    presets = list(preset_names())
    code = (
        "import contextlib, io, sys\n"
        "from kvstrategies.cli.app import main\n"
        f"for model in {presets!r}:\n"
        "    for argv in (['--gpu', 'H200', '--tp', '8'], ['--gpu', 'H100', '--tp', '8', '--json'],\n"
        "                 ['--available-bytes', '40GiB']):\n"
        "        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "            main(['plan', model, *argv])\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['sweep', 'llama-3.1-8b', '--tp', '1,2', '--gpu', 'H100,B200', '--kv-cache-dtype', 'bf16,fp8'])\n"
        "    main(['presets'])\n"
        "assert 'torch' not in sys.modules, 'planning imported torch'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr


def test_json_carries_the_planner_section(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "llama-3.1-8b", "--gpu", "H100-80GB", "--request-length", "1000")
    assert document["sizes"]["max_total_num_tokens"] == 410_721  # type: ignore[index]
    planner = document["planner"]
    assert isinstance(planner, dict)
    assert planner["mode"] == "gpu" and planner["gpu"] == "H100-80GB"
    assert planner["defaults"][2] == {
        "setting": "mem_fraction_static",
        "value": 0.83,
        "reason": "round((81559 - R 13904) / 81559, 3) (sglang.srt.arg_groups.memory_hook."
        "handle_gpu_memory_settings)",
    }
    assert planner["budget"]["available_bytes"] == 53_834_079_312
    assert planner["launch"]["reserved_mib"] == 13904
    # 410,721 // 1000 = 410 requests of 1000 tokens (page 1)
    assert planner["fit"]["concurrency"] == [
        {"request_length": 1000, "requests": 410, "limited_by": "token pool", "tokens_per_request": 1000,
         "served": True}
    ]
    assert planner["fit"]["context_fits"] is True and planner["fixes"] == []
    rows = planner["breakdown"]["rows"]
    assert [row["kind"] for row in rows] == ["overhead", "weights", "kv", "index", "index", "slack"]
    assert sum(row["bytes"] for row in rows) == 85_520_809_984


def test_available_bytes_mode_is_unchanged_apart_from_the_planner(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "llama-3.1-8b", "--available-bytes", "40GiB")
    planner = document.pop("planner")
    assert document.pop("version")  # kvstrategies --version's number, on top of the case document
    assert isinstance(planner, dict) and planner["mode"] == "given" and planner["launch"] is None
    assert [d["setting"] for d in planner["defaults"]] == [
        "head_dim",  # the preset's config omits it
        "kv_cache_dtype",
        "page_size",
        "kv_cache_dtype",
        "max_running_requests",
    ]
    case = {"preset": "llama-3.1-8b", "available_bytes": 40 * 2**30}
    from kvstrategies.case import parse_case

    parsed = parse_case(case)
    assert document == plan_document(plan(parsed.settings, parsed.available_bytes))


def test_case_json_has_no_planner_key(capsys: pytest.CaptureFixture[str]) -> None:
    path = CASES / "default-deepseek-v3-tp1-bf16-p64.json"
    document = run_json(capsys, "--case", str(path))
    assert "planner" not in document
    from kvstrategies import __version__

    assert document.pop("version") == __version__
    case = load_case(path)
    planned = plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
        pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
    )
    assert document == plan_document(planned)


def test_human_output_sections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "gpt-oss-120b", "--gpu", "H100", "--context-length-request", "8192"]) == 0
    out = capsys.readouterr().out
    for text in (
        "defaults applied (SGLang 0.5.23 launch for H100-80GB, tp 1, pp 1",
        "mem_fraction_static           0.83",
        "budget step    H100-80GB",
        "breakdown (one rank)",
        "SWAKVPool full (MHATokenToKVPool) [kv]",
        "SWAKVPool swa (MHATokenToKVPool) [kv]",
        "does NOT fit",
        "--kv-cache-dtype fp8_e4m3",
        "--tp 2",
        "--mem-fraction-static 0.",
        "--context-length ",
    ):
        assert text in out, text


def test_case_human_output_has_the_planner_sections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--case", str(CASES / "default-deepseek-v3-tp1-bf16-p64.json")]) == 0
    out = capsys.readouterr().out
    assert "budget step    skipped" in out and "breakdown (one rank)" in out and "fit  " in out


def test_gpu_memory_alone_is_a_generic_cuda_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    planner = run_json(capsys, "llama-3.1-8b", "--gpu-memory", "80GiB")["planner"]
    assert isinstance(planner, dict)
    assert planner["launch"]["gpu_mem_mib"] == 81920
    assert planner["launch"]["attention_backend"] == "flashinfer"  # no SM90/SM100 probe
    assert planner["budget"]["capacity_bytes"] == 80 * 2**30


def test_gpu_memory_overrides_a_named_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    planner = run_json(capsys, "llama-3.1-8b", "--gpu", "H100", "--gpu-memory", "81559MiB")["planner"]
    assert isinstance(planner, dict) and planner["launch"]["mem_fraction_static"] == 0.83


def test_sweep_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "llama-3.1-8b", "--tp", "1,2", "--kv-cache-dtype", "bf16,fp8_e4m3", "--page-size", "1,64"]
    assert main([*argv, "--gpu", "H100-80GB,B200"]) == 0
    title, *table = capsys.readouterr().out.splitlines()
    from kvstrategies.core.releases import NEWEST_SGLANG

    assert title == f"{NEWEST_SGLANG.label} launch defaults"
    assert table[0].split()[:4] == ["gpu", "tp", "kv", "page"] and len(table) == 1 + 16
    assert any("B200" in line and "1->64" in line for line in table)  # trtllm_mha snaps page 1 to 64
    assert main([*argv, "--available-bytes", "40GiB", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9
    assert lines[1].startswith(",1,bf16,1,bf16,1,,42949672960,327680,")


def test_presets_list_family_and_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["presets", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(preset_names())
    assert rows["deepseek-v4-flash"]["strategy"] == "DSV4PoolConfigurator"
    assert rows["gpt-oss-120b"]["strategy"] == "HybridSWAPoolConfigurator"
    assert rows["qwen3-next-80b-a3b"] == {
        "name": "qwen3-next-80b-a3b",
        "hf_id": "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "family": "hybrid-linear",
        "strategy": "HybridLinearPoolConfigurator",
    }
    assert main(["presets"]) == 0
    assert "DefaultPoolConfigurator" in capsys.readouterr().out


def test_plot_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "b.png"
    assert main(["plan", "llama-3.1-8b", "--gpu", "H100", "--plot", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "llama-3.1-8b"],  # no budget
        ["plan", "llama-3.1-8b", "--gpu", "Z100"],
        ["plan", "llama-3.1-8b", "--gpu", "H100", "--mem-fraction-static", "1.5"],
        ["plan", "llama-3.1-405b", "--gpu", "H100", "--tp", "8"],  # weights do not fit
        ["plan", "llama-3.1-8b", "--gpu-memory", "lots"],
        ["plan", "llama-3.1-8b", "--gpu", "H100", "--request-length", "0"],
        ["sweep", "llama-3.1-8b", "--tp", "1,x", "--gpu", "H100"],
        ["sweep", "llama-3.1-8b", "--tp", "1"],  # no budget
    ],
)
def test_user_errors_are_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstrategies: error: ")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_plot_without_matplotlib_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'kvstrategies[plot]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--gpu-overhead", "-1", "must be >= 0"), ("--weight-bytes", "1.5B", "whole number"),
     ("--available-bytes", "lots", "not a byte size")],
)  # fmt: skip
def test_a_bad_byte_size_names_its_flag(flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--gpu", "H100", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: " in err and says in err and len(err.strip().splitlines()) == 1


def test_pp_is_the_pipeline_size_as_tp_is_the_tensor_size(capsys: pytest.CaptureFixture[str]) -> None:
    """``--pp 3`` was ambiguous (a prefix of --pp-size and --pp-rank) while ``--tp`` worked: it is
    the pipeline-parallel size now, as ``--pp-size`` is."""
    from kvstrategies.cli.app import main as run_cli

    answers = []
    for flag in ("--pp", "--pp-size"):
        assert run_cli(["plan", "llama-3.1-70b", "--gpu", "H100", "--tp", "2", flag, "2", "--json"]) == 0
        answers.append(json.loads(capsys.readouterr().out)["sizes"]["max_total_num_tokens"])
    assert answers[0] == answers[1] > 0
