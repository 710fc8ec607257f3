"""Case files are checked before anything runs; a child process's environment is an allow-list.

The defect reproduced here: ``verify --against sglang CASE`` started SGLang's child process with
the case's ``env`` merged into its environment before the case was checked, so ``"env":
{"PYTHONPATH": dir}`` ran ``dir/sitecustomize.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvstrategies.cli.app as cli
from kvstrategies.case import load_case
from kvstrategies.case_validation import child_environment, validate_case_files
from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.sglang.knobs import check_case_env


def _case(tmp_path: Path, env: Any, name: str = "case") -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"preset": "llama-3.1-8b", "available_bytes": 2**34, "env": env}), encoding="utf-8")
    return path


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any child process or SGLang import fails the test (and is recorded)."""
    started: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        started.append(repr(args)[:80])
        raise AssertionError(f"a process started: {args!r:.120}")

    from kvstrategies.sglang.bridge import engine

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(engine, "import_sglang", refuse)
    return started


def test_a_case_env_carrying_pythonpath_is_refused_before_any_child_process_starts(
    tmp_path: Path, no_processes: list[str]
) -> None:
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "sitecustomize.py").write_text("open('PWNED', 'w').write('x')\n", encoding="utf-8")
    good = _case(tmp_path, {"SGLANG_SWA_EVICTION_INTERVAL": "64"}, "good")
    bad = _case(tmp_path, {"PYTHONPATH": str(payload)}, "bad")
    from kvstrategies.sglang.bridge.engine import run_cases

    with pytest.raises(KVCacheConfigError, match=r"bad\.json.*unknown env knob 'PYTHONPATH' \(not an SGLang knob\)"):
        run_cases([good, bad])
    assert no_processes == []
    assert not (tmp_path / "PWNED").exists()


def test_verify_refuses_the_case_in_one_line_before_sglang_is_imported(
    tmp_path: Path, no_processes: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _case(tmp_path, {"LD_PRELOAD": "/tmp/x.so"})
    assert cli.main(["verify", "--against", "sglang", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "LD_PRELOAD" in err[0] and err[0].startswith("kvstrategies: error: ")
    assert no_processes == []


def test_the_child_environment_is_an_allow_list_plus_the_checked_knobs() -> None:
    parent = {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/opt/ok", "LD_PRELOAD": "/evil.so",
              "LC_ALL": "C", "HF_HOME": "/hf", "SGLANG_MAMBA_SSM_DTYPE": "float16", "SGLANG_PORT": "1",
              "AWS_SECRET_ACCESS_KEY": "s"}  # fmt: skip
    env = child_environment({"SGLANG_SWA_EVICTION_INTERVAL": "64"}, parent)
    assert env == {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/opt/ok", "LC_ALL": "C", "HF_HOME": "/hf",
                   "SGLANG_MAMBA_SSM_DTYPE": "float16", "SGLANG_SWA_EVICTION_INTERVAL": "64"}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="PYTHONPATH"):
        child_environment({"PYTHONPATH": "/tmp/evil"}, parent)


@pytest.mark.parametrize(
    ("env", "error", "match"),
    [
        ({"PYTHONPATH": "x"}, KVCacheConfigError, "not an SGLang knob"),
        ({"SGLANG_NOT_A_KNOB": "1"}, KVCacheConfigError, "unknown env knob"),
        ({"SGLANG_PORT": "1"}, KVCacheConfigError, "does not change KV sizing"),
        ({"SGLANG_MOE_PADDING": "1"}, KVCacheConfigError, "weights' format or size"),
        ({"SGLANG_USE_HND_KVCACHE": "1"}, UnsupportedConfigurationError, "out of scope"),
        ({"SGLANG_SWA_EVICTION_INTERVAL": {"a": 1}}, KVCacheConfigError, "must be a string"),
        ({"SGLANG_SWA_EVICTION_INTERVAL": "1\0"}, KVCacheConfigError, "NUL"),
        ({"SGLANG_SWA_EVICTION_INTERVAL": "9" * 5000}, KVCacheConfigError, "at most 4096"),
        ({"SGLANG_SWA_EVICTION_INTERVAL": float("nan")}, KVCacheConfigError, "finite"),
        ({1: "x"}, KVCacheConfigError, "knob names are strings"),
        (["SGLANG_SWA_EVICTION_INTERVAL"], KVCacheConfigError, "must be an object"),
    ],
)
def test_case_env_entries_are_checked(env: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        check_case_env(env)


def test_a_planned_knob_keeps_its_value_as_sglang_reads_it() -> None:
    assert check_case_env({"SGLANG_SWA_EVICTION_INTERVAL": 64, "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": True}) == {
        "SGLANG_SWA_EVICTION_INTERVAL": "64", "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": "True",
    }  # fmt: skip
    assert check_case_env(None) == {}


def test_plan_case_and_the_validator_share_the_env_check(tmp_path: Path) -> None:
    bad = _case(tmp_path, {"PYTHONPATH": "x"})
    with pytest.raises(KVCacheConfigError, match="not an SGLang knob"):
        load_case(bad)
    with pytest.raises(KVCacheConfigError, match="not an SGLang knob"):
        validate_case_files([bad])


def test_the_shipped_catalog_passes_the_validator() -> None:
    cases = sorted((Path(__file__).parents[1] / "cases").glob("*.json"))
    assert len(validate_case_files(cases)) == len(cases) > 300


def test_the_child_process_in_a_subprocess_gets_no_case_variable(tmp_path: Path) -> None:
    """End to end: the environment handed to ``subprocess.run`` has no case-supplied name."""
    seen: dict[str, Any] = {}

    def fake_run(command: list[str], env: dict[str, str], **kwargs: Any) -> Any:
        seen.update(env)
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps({}) + "\n", stderr="")

    from kvstrategies.sglang.bridge import engine

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(engine.subprocess, "run", fake_run)
        mp.setenv("LD_PRELOAD", "/should/not/pass.so")
        engine._child([tmp_path / "c.json"], {"SGLANG_SWA_EVICTION_INTERVAL": "64"})
    finally:
        mp.undo()
    assert seen["SGLANG_SWA_EVICTION_INTERVAL"] == "64"
    assert "LD_PRELOAD" not in seen
    assert sys.executable  # the child runs this interpreter
