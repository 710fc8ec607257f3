"""Hand-worked edges of the SGLang comparison: which known difference applies where, the lines
``verify --against sglang`` prints, the launch grid's fallbacks and messages (no SGLang needed)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.integrations.sglang import engine, runtime
from kvstrategies.integrations.sglang import launch as bridge
from kvstrategies.integrations.sglang import verify as verify_module
from kvstrategies.integrations.sglang.compare import explain
from kvstrategies.integrations.sglang.launch_grid import (
    attention_heads,
    check_grid_flag,
    default_grid,
    spec_from_dict,
    valid_tps,
)
from kvstrategies.integrations.sglang.verify import CaseVerdict, VerifyReport, format_report, verdict_for

ALL_SWA = {"model_type": "gemma3_text", "layer_types": ["sliding_attention"] * 4}
ZERO_KV_REFUSAL = (
    "kvstrategies: refused: SGLang 0.5.15 cannot size a rank without attention layers of its own (layers [2, 3])"
)


@pytest.mark.parametrize(("page", "known"), [(None, False), (1, False), (2, True), (64, True)])
def test_all_swa_page_difference_starts_at_page_2(page: int | None, known: bool) -> None:
    # sglang.srt.mem_cache.allocator.swa.PureSWATokenToKVPoolAllocator.__init__ asserts page_size == 1:
    # page 2 is the smallest page SGLang cannot lay out for an all-SWA model, page 1 (SGLang's default when
    # the case names none) it can (no excuse)
    line = "layout_error: added (kvstrategies refuses the layout)"
    case = {"_hf_config": ALL_SWA} | ({} if page is None else {"page_size": page})
    used, left = explain(case, [line])
    assert ([k.kind for k in used], left) == ((["all-swa-page-size"], []) if known else ([], [line]))


@pytest.mark.parametrize(
    ("case", "known"),
    [
        ({"sglang_version": "0.5.15"}, False),  # no pp_size: one stage, nothing on another stage to excuse
        ({"pp_size": 1, "sglang_version": "0.5.15"}, False),
        ({"pp_size": 2, "sglang_version": "0.5.15"}, True),  # before the zero-KV rule (0.5.17)
        ({"pp_size": 2, "sglang_version": "0.5.16"}, True),
        ({"pp_size": 2, "sglang_version": "0.5.17"}, False),  # the rule holds: SGLang sizes the zero-cell stage
    ],
)
def test_zero_cell_stage_difference_needs_two_stages_before_the_zero_kv_rule(
    case: dict[str, object], known: bool
) -> None:
    # sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.calculate_pool_sizes divides by the
    # zero cell before 0.5.17; only with pp_size >= 2 can another stage be the one without attention layers
    used, left = explain(case, [ZERO_KV_REFUSAL])
    assert ([k.kind for k in used], left) == ((["pp-zero-cell-stage"], []) if known else ([], [ZERO_KV_REFUSAL]))


def _report() -> VerifyReport:
    diff = ("cell_size: 36864 -> 73728", "sizes.max_total_num_tokens: 1000 -> 500", "pools.token_to_kv: removed")
    return VerifyReport(
        verdicts=[
            CaseVerdict("a", "match"),
            CaseVerdict("b", "match"),
            CaseVerdict("bb", "known", kinds=("npu-pools-not-buildable",), lines=("x",)),
            CaseVerdict("c", "DIFF", lines=diff, unexplained=diff),
        ],
        timings={"import": 2.0, "total": 8.0},
        version="0.5.23",
    )


def test_format_report_lines_by_hand() -> None:
    from kvstrategies.integrations.sglang.compare import KNOWN_DIFFERENCES

    npu = next(k.reason for k in KNOWN_DIFFERENCES if k.kind == "npu-pools-not-buildable")
    # names padded to the longest (2), statuses to 5; a DIFF shows its first line and "+N more", then every
    # unexplained line indented by 2 + 4; per case = (8.0 - 2.0) / 4 cases = 1.50 s
    assert format_report(_report()) == [
        "kvstrategies vs SGLang 0.5.23: 4 cases",
        "a   match",
        "b   match",
        "bb  known  npu-pools-not-buildable",
        "c   DIFF   cell_size: 36864 -> 73728; +2 more",
        "      cell_size: 36864 -> 73728",
        "      sizes.max_total_num_tokens: 1000 -> 500",
        "      pools.token_to_kv: removed",
        "known differences:",
        f"  npu-pools-not-buildable (1 cases): {npu}",
        "total: 4 cases: 2 match, 1 known, 1 unexplained (SGLang import 2.0 s, 1.50 s per case, 8.0 s in all)",
    ]


def test_format_report_cuts_a_long_detail_to_the_width() -> None:
    # "cell_size: 36864 -> 73728; +2 more" is 25 + 9 = 34 characters; at width 20 it keeps the first
    # 20 - 3 = 17 ("cell_size: 36864 ") and adds "..."; at width 34 it fits whole
    assert format_report(_report(), width=20)[4] == "c   DIFF   cell_size: 36864 ..."
    assert format_report(_report(), width=33)[4] == "c   DIFF   cell_size: 36864 -> 73728; +2 ..."  # 30 kept
    assert format_report(_report(), width=34)[4] == "c   DIFF   cell_size: 36864 -> 73728; +2 more"


def test_verify_total_time_adds_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [10.0]

    def import_sglang() -> str:
        clock[0] = 13.5  # the import takes 3.5 s
        return "0.5.23"

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(runtime, "import_sglang", import_sglang)
    monkeypatch.setattr(engine, "run_cases", lambda paths: ({}, {"total": 2.0}))
    report = verify_module.verify([])
    assert report.timings == {"import": 3.5, "total": 5.5}  # 3.5 s import + 2.0 s of cases
    assert report.version == "0.5.23" and report.verdicts == []


def test_show_equal_names_each_equal_launch(tmp_path: Path) -> None:
    refused = "deepseek-v3/B200/tp8/kv-cache-dtype=fp8_e5m2"  # both refuse: TRT-LLM MLA needs fp8_e4m3
    specs = [s for s in default_grid(["deepseek-v3"]) if s.name == refused] + list(default_grid(["qwen3-8b"])[:2])
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([s.to_dict() for s in specs]))
    shown: list[str] = []
    assert bridge.run_verify_launch(grid, recorded=True, show_equal=True, out=shown.append) == 0
    assert shown[:3] == [
        f"{refused}: equal (both refuse)",
        "qwen3-8b/H100-80GB/tp1: equal",
        "qwen3-8b/H100-80GB/tp2: equal",
    ]
    quiet: list[str] = []
    assert bridge.run_verify_launch(grid, recorded=True, out=quiet.append) == 0
    assert quiet == shown[3:]  # without --show-equal only the summary


def test_attention_heads_falls_back_to_one_head() -> None:
    assert attention_heads({"text_config": {"num_attention_heads": 40}, "num_attention_heads": 8}) == 40
    assert attention_heads({"llm_config": {"num_attention_heads": 28}}) == 28
    assert attention_heads({"architectures": ["LlamaForCausalLM"]}) == 1
    assert valid_tps({"architectures": ["LlamaForCausalLM"]}) == (1,)  # 1 head divides only TP 1
    assert valid_tps({"num_attention_heads": 12}) == (1, 2, 4)  # 12 % 8 != 0


@pytest.mark.parametrize(
    ("key", "wanted"),
    [("page_size", "a positive integer"), ("chunked_prefill_size", "a positive integer or -1")],
)
def test_grid_flag_message_names_the_accepted_integers(key: str, wanted: str) -> None:
    with pytest.raises(KVCacheConfigError, match=f"^launch 'x': flag {key} must be {wanted}, got 0$"):
        check_grid_flag("'x'", key, 0)


@pytest.mark.parametrize(("key", "value"), [("name", "x"), ("preset", "p"), ("gpu", "g")])
def test_a_one_character_launch_string_is_accepted(key: str, value: str) -> None:
    item = {"name": "n", "preset": "qwen3-8b", "gpu": "H200", key: value}
    assert getattr(spec_from_dict(item), key) == value  # 1 to 256 characters
    assert getattr(spec_from_dict({**item, key: "y" * 256}), key) == "y" * 256
    with pytest.raises(KVCacheConfigError, match=f"{key} must be a non-empty string"):
        spec_from_dict({**item, key: "y" * 257})
    with pytest.raises(KVCacheConfigError, match=f"^launch .*: {key} must be a non-empty string, got ''$"):
        spec_from_dict({**item, key: ""})


@pytest.mark.parametrize(("allowed", "workers"), [(3, 3), (8, 8), (16, 8)])
def test_default_workers_are_this_process_cpus_at_most_8(
    monkeypatch: pytest.MonkeyPatch, allowed: int, workers: int
) -> None:
    # os.sched_getaffinity(0) is this process (a taskset or cgroup may narrow it); pid 1 may hold more CPUs
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(allowed if pid == 0 else 32)))
    assert bridge.default_workers() == workers


def test_default_workers_without_affinity_or_cpu_count_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # os.cpu_count() is None when undeterminable
    assert bridge.default_workers() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert bridge.default_workers() == 8


def test_grid_integers_are_bounded_at_2_to_the_40() -> None:
    check_grid_flag("'x'", "max_running_requests", 2**40)  # the largest accepted
    check_grid_flag("'x'", "max_running_requests", 1)  # the smallest
    with pytest.raises(KVCacheConfigError, match=f"max_running_requests must be a positive integer, got {2**40 + 1}"):
        check_grid_flag("'x'", "max_running_requests", 2**40 + 1)
    check_grid_flag("'x'", "chunked_prefill_size", -1)  # SGLang's "no chunking"
    with pytest.raises(KVCacheConfigError, match="must be a positive integer or -1, got -2"):
        check_grid_flag("'x'", "chunked_prefill_size", -2)


@pytest.mark.parametrize(("lines", "detail"), [(1, "l0"), (2, "l0; +1 more"), (3, "l0; +2 more")])
def test_a_diff_counts_the_lines_after_its_first(lines: int, detail: str) -> None:
    diff = tuple(f"l{i}" for i in range(lines))
    report = VerifyReport(verdicts=[CaseVerdict("c", "DIFF", lines=diff, unexplained=diff)], version="0.5.23")
    assert format_report(report)[1] == f"c  DIFF   {detail}"


def test_recorded_report_times_the_whole_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([10.0, 12.5])
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks))
    report = verify_module.recorded_report([], Path("golden/sglang-0.5.23"), "SGLang", "0.5.23", dict, verdict_for)
    assert report.timings == {"import": 0.0, "total": 2.5}  # no import: 12.5 - 10.0 s reading the recording
    assert report.version == "0.5.23 (recorded in golden/sglang-0.5.23)"


def test_kind_counts_count_each_case_using_a_kind() -> None:
    known = [CaseVerdict(n, "known", kinds=("a", "b") if n == "x" else ("a",)) for n in ("x", "y", "z")]
    assert VerifyReport(verdicts=[*known, CaseVerdict("m", "match")]).kind_counts() == {"a": 3, "b": 1}
