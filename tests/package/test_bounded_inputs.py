"""Every input is bounded: devices and FIFOs are never read, counts have upper bounds, repeats are
planned once, and a build never asks the host for more memory than it has."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

import kvstrategies
import kvstrategies.cli.app as cli
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError
from kvstrategies.presets import load_preset_config


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def one_error(code: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("kvstrategies: error: "), err[-500:]
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_draft_model_path_at_a_device_is_never_read() -> None:
    """Read without bound before: 7 GB in 20 s."""
    started = time.perf_counter()
    code, _, err = run("plan", "llama-3.1-8b", "--gpu", "H100", "--speculative-algorithm", "DFLASH",
                       "--speculative-draft-model-path", "/dev/zero")  # fmt: skip
    one_error(code, err, "--speculative-draft-model-path", "not a regular file")
    assert time.perf_counter() - started < 10


def test_a_mistyped_draft_model_path_is_refused_not_ignored() -> None:
    code, _, err = run("plan", "llama-3.1-8b", "--gpu", "H100", "--speculative-algorithm", "EAGLE",
                       "--speculative-draft-model-path", "/no/such/draft")  # fmt: skip
    one_error(code, err, "/no/such/draft", "no such file or folder")


def test_verify_launch_reads_only_regular_bounded_files(tmp_path: Path) -> None:
    code, _, err = run("verify", "--against", "sglang", "--launch", "/dev/zero", "--recorded")
    one_error(code, err, "not a regular file")
    (tmp_path / "empty.json").write_text("[]")
    code, _, err = run("verify", "--against", "sglang", "--launch", str(tmp_path / "empty.json"), "--recorded")
    one_error(code, err, "holds no launches")


@pytest.mark.parametrize("jobs", ["0", "65", str(10**6)])
def test_jobs_has_an_upper_bound(jobs: str) -> None:
    code, _, err = run("verify", "--against", "sglang", "--launch", "--jobs", jobs)
    one_error(code, err, "--jobs must be an integer in [1, 64]")


def test_record_with_recorded_says_it_would_be_ignored(tmp_path: Path) -> None:
    code, _, err = run("verify", "--against", "sglang", "--launch", "--recorded", "--record", str(tmp_path))
    one_error(code, err, "--record writes SGLang's live answers", "pass one of them")


def test_recorded_answers_match_launches_by_their_whole_content(tmp_path: Path) -> None:
    """A changed launch under an old name passed before: its recorded answer is another launch's."""
    from kvstrategies.sglang.bridge.launch_check import load_golden

    specs, _ = load_golden()
    first = specs[0].to_dict()
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([first]))
    assert run("verify", "--against", "sglang", "--launch", str(grid), "--recorded")[0] == 0
    grid.write_text(json.dumps([{**first, "flags": {**first.get("flags", {}), "page_size": 64}}]))
    code, _, err = run("verify", "--against", "sglang", "--launch", str(grid), "--recorded")
    one_error(code, err, "differ from the recorded launch of the same name", first["name"])


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"page_size": "64"}, "flag page_size must be a positive integer"),
        ({"page_size": True}, "flag page_size must be a positive integer"),
        ({"chunked_prefill_size": -2}, "positive integer or -1"),
        ({"disable_radix_cache": "yes"}, "flag disable_radix_cache must be true or false"),
        ({"kv_cache_dtype": 8}, "flag kv_cache_dtype must be a string"),
        ({"kv_cache_dtype": "float32"}, "not one of SGLang's choices"),
        ({"max_running_requests": 2**80}, "positive integer"),
    ],
)
def test_grid_flag_types_are_checked(flags: dict[str, Any], match: str) -> None:
    from kvstrategies.sglang.bridge.launch_grid import spec_from_dict

    with pytest.raises(KVCacheConfigError, match=match):
        spec_from_dict({"preset": "llama-3.1-8b", "gpu": "H200", "flags": flags})


def test_sweep_plans_each_distinct_cell_once() -> None:
    """1,000 identical rows in 10 s before."""
    started = time.perf_counter()
    code, out, err = run("sweep", "llama-3.1-8b", "--gpu", ",".join(["H100"] * 30), "--tp", ",".join(["1"] * 40),
                         "--page-size", "1,1,16,16", "--json")  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["gpu"], r["tp"], r["page_request"]) for r in rows] == [("H100-80GB", 1, 1), ("H100-80GB", 1, 16)]
    assert time.perf_counter() - started < 10


def test_a_three_million_entry_architectures_list_is_a_short_error(tmp_path: Path) -> None:
    config = {**load_preset_config("llama-3.1-8b"), "architectures": ["LlamaForCausalLM"] * 3_000_000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    started = time.perf_counter()
    code, _, err = run("plan", str(path), "--gpu", "H100")
    one_error(code, err, "lists 3,000,000 names")
    assert len(err) < 400 and time.perf_counter() - started < 15


def test_a_cpu_build_larger_than_the_host_is_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30 GiB plan on a host with 1 GiB available: refused, nothing allocated (was the OOM killer)."""
    from kvstrategies.case import parse_case
    from kvstrategies.core import host_memory
    from kvstrategies.pools.runtime import factory

    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 30 * 2**30})
    planned = kvstrategies.plan(case.settings, case.available_bytes)
    assert planned.planned_bytes > 29 * 2**30

    def no_allocation(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("allocated")

    monkeypatch.setattr(host_memory, "available_host_bytes", lambda: 2**30)
    monkeypatch.setattr(factory, "build_typed_pools", no_allocation)
    with pytest.raises(InsufficientMemoryError, match=r"planned [0-9,]+ bytes \(3[01]\.0 GiB\) but this host has 1\.0"):
        kvstrategies.build(planned, "cpu")


def test_the_host_memory_figure_is_positive_here() -> None:
    from kvstrategies.core.host_memory import available_host_bytes

    room = available_host_bytes()
    assert room is None or room > 0


# ---- the host's memory as read (kvstrategies/core/host_memory.py) -----------------------------------------------


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``/proc/meminfo`` and the cgroup folders moved under ``tmp_path`` (all absent until written)."""
    from kvstrategies.core import host_memory

    monkeypatch.setattr(host_memory, "_MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(host_memory, "_CGROUP_V2", tmp_path / "v2")
    monkeypatch.setattr(host_memory, "_CGROUP_V1", tmp_path / "v1")
    for folder in ("v2", "v1"):
        (tmp_path / folder).mkdir()
    return tmp_path


@pytest.mark.parametrize("line", ["MemAvailable:    2048 kB", "MemAvailable: 2048"])
def test_memavailable_is_read_in_kib(fake_host: Path, line: str) -> None:
    from kvstrategies.core.host_memory import available_host_bytes

    (fake_host / "meminfo").write_text(f"MemTotal:  999999 kB\n{line}\n")
    assert available_host_bytes() == 2048 * 1024  # 2,097,152 B


def test_a_cgroup_limit_of_2_to_the_60_or_more_is_no_limit(fake_host: Path) -> None:
    from kvstrategies.core.host_memory import _cgroup_room

    (fake_host / "v2" / "memory.current").write_text("1000\n")
    (fake_host / "v2" / "memory.max").write_text(f"{2**60}\n")
    assert _cgroup_room() is None  # v1 absent too
    (fake_host / "v2" / "memory.max").write_text(f"{2**60 - 1}\n")
    assert _cgroup_room() == 2**60 - 1 - 1000
