"""Each command imports what it uses, pinned module by module (a fresh interpreter per command).

``plan --case`` sizes a case with the core library alone: no planner module (launch defaults,
weight estimate, checkpoint reader, SGLang flag table). ``gpus`` reads the GPU table and nothing
else; ``presets`` parses the presets without the planner; planning from flags loads the planner
but not the SGLang flag table (only a pasted launch command needs it) nor the safetensors reader
(only a checkpoint does). Nothing imports torch, SGLang, matplotlib or huggingface_hub unless it
builds, plots or downloads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASE = str(ROOT / "cases" / "default-llama-3.1-8b-tp1-bf16-p1.json")
#: run the command with its output discarded, then print (exit code, every module loaded)
PROBE = (
    "import json, os, sys\n"
    "from kvstrategies.cli.app import main\n"
    "out, sys.stdout = sys.stdout, open(os.devnull, 'w')\n"
    "code = main(sys.argv[1:])\n"
    "out.write(json.dumps([code, sorted(sys.modules)]))\n"
)
HEAVY = ("torch", "sglang", "matplotlib", "huggingface_hub", "numpy")
PLANNER = "kvstrategies.planner"
FLAG_TABLE = {"kvstrategies.sglang.tables.flags", "kvstrategies.sglang.pasted_command"}
CHECKPOINT_READER = "kvstrategies.planner.checkpoint"


def loaded(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after ``kvstrategies ARGV`` (which must succeed)."""
    run = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    code, modules = json.loads(run.stdout)
    assert code == 0, run.stderr[-2000:]
    return set(modules)


def _under(modules: set[str], package: str) -> set[str]:
    return {m for m in modules if m == package or m.startswith(package + ".")}


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


def test_plan_case_loads_the_core_library_only() -> None:
    modules = loaded("plan", "--case", CASE, "--json")
    assert _under(modules, PLANNER) == set()
    # no bridge, no SGLang launch rule, no vLLM planning, and of the CLI only the plan command's modules
    for package in ("kvstrategies.sglang.bridge", "kvstrategies.vllm.bridge", "kvstrategies.sglang.launch",
                    "kvstrategies.vllm.planner"):  # fmt: skip
        assert _under(modules, package) == set(), package
    assert _under(modules, "kvstrategies.cli") == {
        "kvstrategies.cli", "kvstrategies.cli.app", "kvstrategies.cli.plan", "kvstrategies.cli.arguments"
    }
    assert {"kvstrategies.case", "kvstrategies.api", "kvstrategies.document"} <= modules
    assert "kvstrategies.pools.build" not in modules and "kvstrategies.pools.binding" not in modules  # building only
    other_families = {  # a dense model's plan: no other family's strategy, pools or geometry
        "kvstrategies.strategies.dsv4", "kvstrategies.strategies.hybrid_swa", "kvstrategies.strategies.hybrid_linear",
        "kvstrategies.strategies.ascend", "kvstrategies.pools.dsa", "kvstrategies.pools.fp4", "kvstrategies.pools.swa",
        "kvstrategies.models.mamba", "kvstrategies.models.dsv4", "kvstrategies.models.minimax",
        "kvstrategies.models.hybrid_swa",
    }  # fmt: skip
    assert modules & other_families == set()
    assert _heavy(modules) == set()


def test_gpus_loads_the_gpu_table_only() -> None:
    modules = _under(loaded("gpus"), "kvstrategies")
    assert modules == {
        "kvstrategies", "kvstrategies.core", "kvstrategies.core.lazy_exports", "kvstrategies.cli",
        "kvstrategies.cli.app", "kvstrategies.cli.listings", "kvstrategies.errors", "kvstrategies.planner",
        "kvstrategies.planner.gpus",
    }  # fmt: skip


def test_presets_parse_without_the_planner() -> None:
    modules = loaded("presets", "--json")
    assert _under(modules, PLANNER) == set()
    assert "kvstrategies.api" not in modules  # family and strategy only: nothing is planned
    assert _heavy(modules) == set()


@pytest.mark.parametrize(
    "argv",
    [
        ("plan", "llama-3.1-8b", "--gpu", "H200", "--tp", "8", "--json"),
        ("plan", "qwen3-235b-a22b", "--gpu", "H100", "--tp", "8"),
        ("sweep", "llama-3.1-8b", "--gpu", "H100,H200", "--tp", "1,8"),
    ],
)
def test_planning_from_flags_loads_the_planner_without_the_flag_table(argv: tuple[str, ...]) -> None:
    modules = loaded(*argv)
    assert {"kvstrategies.sglang.launch.defaults", "kvstrategies.planner.weights"} <= modules
    assert modules & FLAG_TABLE == set()
    assert CHECKPOINT_READER not in modules
    assert "kvstrategies.planner.plot" not in modules and "kvstrategies.planner.sweep_plot" not in modules
    assert _heavy(modules) == set()


def test_a_pasted_launch_command_loads_the_flag_table() -> None:
    modules = loaded("plan", "--gpu", "H100", "--json", "--", "python", "-m", "sglang.launch_server",
                     "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp-size", "2")  # fmt: skip
    assert modules >= FLAG_TABLE
    assert _heavy(modules) == set()


def test_verify_recorded_launch_defaults_loads_no_engine() -> None:
    """``verify --launch --recorded`` compares with SGLang's recorded answers: no SGLang, no torch,
    and no sizing (the launch defaults only)."""
    modules = loaded("verify", "--against", "sglang", "--launch", "--recorded")
    assert "kvstrategies.sglang.bridge.launch_check" in modules
    assert "kvstrategies.sglang.bridge.bridge" not in modules
    assert "kvstrategies.api" not in modules and "kvstrategies.planner.weights" not in modules
    assert _heavy(modules) == set()


def test_the_probe_sees_a_heavy_import() -> None:
    """Not vacuous: ``--build-check`` allocates on ``meta``, so torch is there."""
    assert "torch" in loaded("plan", "--case", CASE, "--json", "--build-check")


def test_python_m_kvstrategies_is_the_command() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kvstrategies", "plan", "--case", CASE, "--json"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["sizes"]["max_total_num_tokens"] > 0
    refused = subprocess.run([sys.executable, "-m", "kvstrategies", "plan", "--tp", "0"], capture_output=True,
                             text=True, cwd=ROOT, check=False)  # fmt: skip
    assert refused.returncode == 2 and refused.stderr.startswith("kvstrategies: error:")
