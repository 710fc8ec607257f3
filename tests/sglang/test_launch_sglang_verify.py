"""The launch grid, the comparison and ``kvstrategies verify --against sglang --launch`` (no SGLang)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kvstrategies.sglang.bridge.launch_check as bridge
from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.sglang.bridge.launch_grid import (
    DFLASH_DRAFT,
    SYNTHETIC_PREFIX,
    LaunchSpec,
    attention_heads,
    check_grid_flag,
    default_grid,
    grid_from_json,
    launch_config,
    spec_from_dict,
    synthetic_config_names,
    valid_tps,
)


def test_default_grid_covers_every_preset_gpu_and_feature() -> None:
    grid = default_grid()
    assert len(grid) >= 500 and len({s.name for s in grid}) == len(grid)
    assert {s.preset for s in grid} == set(preset_names()) | {SYNTHETIC_PREFIX + n for n in synthetic_config_names()}
    # every capacity tier of the launch's memory defaults: < 20, 20-35 (changed in 0.5.20), 35-60, 60-90, 90-160 and
    # >= 160 GiB
    assert {s.gpu for s in grid} == {"H100-80GB", "H200", "B200", "A100-80GB", "RTX-4090", "RTX-5090", "L4", "T4",
                                     "A100-40GB", "L40S", "H20", "RTX-PRO-6000", "B300"}  # fmt: skip
    assert {s.preset for s in grid if s.gpu == "RTX-4090" and s.flags.get("kv_cache_dtype") == "fp8_e4m3"}
    flags = [s.flags for s in grid]
    for algo in ("EAGLE", "NGRAM", "DFLASH"):
        assert any(f.get("speculative_algorithm") == algo for f in flags)
    assert any(f.get("kv_cache_dtype") == "fp8_e4m3" for f in flags) and any("page_size" in f for f in flags)
    assert any(s.attn_dp_size > 1 for s in grid) and any(s.dcp_size > 1 for s in grid)
    assert any(s.pp_size > 1 for s in grid)
    assert valid_tps(load_preset_config("falcon-7b")) == (1,)  # 71 heads
    assert valid_tps(load_preset_config("qwen2.5-7b")) == (1, 2, 4)  # 28 heads


def test_grid_files_round_trip_and_refuse_bad_input() -> None:
    spec = default_grid(["llama-3.1-8b"])[-1]
    assert spec_from_dict(spec.to_dict()) == spec
    named = spec_from_dict({"preset": "qwen3-8b", "gpu": "H200", "tp_size": 2, "flags": {"page_size": 16}})
    assert named.name == "qwen3-8b/H200/tp2/page-size=16"
    for bad in (
        {"preset": "qwen3-8b"},
        {"preset": "qwen3-8b", "gpu": "H200", "color": 1},
        {"preset": "qwen3-8b", "gpu": "H200", "flags": {"enable_mis": True}},
        {"preset": "qwen3-8b", "gpu": "H200", "tp_size": 0},
        "qwen3-8b",
    ):
        with pytest.raises(KVCacheConfigError):
            spec_from_dict(bad)  # type: ignore[arg-type]
    with pytest.raises(KVCacheConfigError, match="twice"):
        grid_from_json([spec.to_dict(), spec.to_dict()])
    with pytest.raises(KVCacheConfigError, match="JSON list"):
        grid_from_json({"launches": []})  # type: ignore[arg-type]
    with pytest.raises(KVCacheConfigError, match="unknown synthetic config"):
        launch_config("synthetic:nope")
    assert launch_config("synthetic:kimi-k2.5")["text_config"] == load_preset_config("kimi-k2")


def _sglang_like(spec: LaunchSpec, **changes: object) -> bridge.LaunchOutcome:
    planner = bridge.planner_outcome(spec, Path("unused"))
    return bridge.LaunchOutcome(fields={**planner.fields, **changes})


def test_comparison_reports_each_difference_readably() -> None:
    spec = spec_from_dict({"preset": "llama-3.1-8b", "gpu": "H200", "tp_size": 8})
    planner = bridge.planner_outcome(spec, Path("unused"))
    same = bridge.compare_launch(spec, _sglang_like(spec), planner)
    assert same.equal and not same.failed and bridge.diff_text(same) == []
    moved = bridge.compare_launch(spec, _sglang_like(spec, mem_fraction_static=0.9, page_size=64), planner)
    assert [d.field for d in moved.diffs] == ["mem_fraction_static", "page_size"] and moved.failed
    text = "\n".join(bridge.diff_text(moved))
    assert "llama-3.1-8b/H200/tp8:" in text and "sglang=0.9" in text and "planner=0.893" in text
    refused = bridge.compare_launch(spec, bridge.LaunchOutcome(refused="ValueError: no"), planner)
    assert refused.sglang_refuses_planner_plans and refused.failed
    assert "SGLang refuses (ValueError: no); the planner plans it" in bridge.diff_text(refused)[0]
    summary = bridge.summarize([same, moved, refused])
    assert (summary.launches, summary.equal, summary.sglang_refuses_planner_plans, summary.unexplained) == (3, 1, 1, 1)
    assert summary.per_field["page_size"] == (1, 2) and summary.field_total == 2 * len(bridge.COMPARED_FIELDS)


def test_a_known_difference_does_not_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_from_dict({"preset": "llama-3.1-8b", "gpu": "H200"})
    known = bridge.KnownDifference("page_size", "a test reason", lambda s: s.preset == "llama-3.1-8b")
    monkeypatch.setattr(bridge, "KNOWN_DIFFERENCES", (known,))
    c = bridge.compare_launch(spec, _sglang_like(spec, page_size=16), bridge.planner_outcome(spec, Path("x")))
    assert c.diffs[0].known == "a test reason" and not c.failed
    assert "(known: a test reason)" in bridge.diff_text(c)[1]


def test_planner_side_refuses_with_sglangs_check_named(tmp_path: Path) -> None:
    spec = spec_from_dict({"preset": "llama-3.1-8b", "gpu": "H200", "flags": {"speculative_algorithm": "DFLASH"}})
    assert "speculative_hook._handle_dflash" in str(bridge.planner_outcome(spec, Path("x")).refused)
    drafted = LaunchSpec("d", "llama-3.1-8b", "H200", flags={"speculative_algorithm": "DFLASH",
                                                             "speculative_draft_model_path": DFLASH_DRAFT})  # fmt: skip
    (tmp_path / "config.json").write_text('{"architectures": ["DFlashDraftModel"]}')
    out = bridge.planner_outcome(drafted, tmp_path)
    assert out.refused is None and out.fields["speculative_num_draft_tokens"] == 16  # no block size named: 16
    missing = bridge.planner_outcome(drafted, tmp_path / "no-such-folder")  # SGLang could not load that draft
    assert missing.refused is not None and "no such file or folder" in missing.refused


def test_golden_round_trip(tmp_path: Path) -> None:
    specs = default_grid(["qwen3-8b"])[:3]
    outcomes = {specs[0].name: bridge.LaunchOutcome(refused="ValueError: x")}
    outcomes.update({s.name: _sglang_like(s) for s in specs[1:]})
    bridge.save_golden(specs, outcomes, tmp_path)
    assert bridge.load_golden(tmp_path) == (specs, outcomes)
    (tmp_path / bridge.GOLDEN_FILE).write_text("{}\n")
    with pytest.raises(KVCacheConfigError, match="records SGLang"):
        bridge.load_golden(tmp_path)


def test_cli_verify_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([s.to_dict() for s in default_grid(["deepseek-v4-flash"])]))
    assert main(["verify", "--against", "sglang", "--launch", str(grid), "--recorded"]) == 0
    out = capsys.readouterr().out
    assert "launches compared" in out and "SGLang refuses, planner plans 0" in out
    assert main(["verify", "--against", "sglang", "--launch", str(grid), "--recorded", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["launches"] == doc["equal"] and doc["sglang_refuses_planner_plans"] == 0
    grid.write_text(json.dumps([{"preset": "qwen3-8b", "gpu": "H200", "tp_size": 2, "flags": {"page_size": 16}}]))
    assert main(["verify", "--against", "sglang", "--launch", str(grid), "--recorded"]) == 2
    assert "not recorded" in capsys.readouterr().err
    # without --launch, --recorded compares the catalog with a release's recorded answers
    assert main(["verify", "--against", "sglang", "--recorded", "--sglang-version", "0.5.0"]) == 2
    assert "supported: 0.5.1" in capsys.readouterr().err
    assert main(["verify", "--against", "sglang", "--recorded", "--show-equal"]) == 2  # launch-only flag
    assert "--launch" in capsys.readouterr().err


def test_workers_keep_the_launch_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvstrategies.sglang.bridge import _launch_probe as probe
    from kvstrategies.sglang.bridge.bridge_releases import bridge_release

    row = bridge_release("0.5.18")
    monkeypatch.setattr(
        probe, "resolve_forked", lambda r, facts, fields: {"ok": {"i": fields["i"], "pid": os.getpid(), "line": r.line}}
    )
    jobs = [(probe.GpuFacts(9, 0, 81559.0), {"i": i}) for i in range(7)]
    answers = probe.resolve_many_forked(row, jobs, workers=3)
    assert [a["ok"]["i"] for a in answers] == list(range(7)) and {a["ok"]["line"] for a in answers} == {"0.5.18"}
    assert len({a["ok"]["pid"] for a in answers}) == 3 and os.getpid() not in {a["ok"]["pid"] for a in answers}
    assert probe.resolve_many_forked(row, jobs[:2], workers=1) == [
        {"ok": {"i": i, "pid": os.getpid(), "line": "0.5.18"}} for i in range(2)
    ]
    facts = probe.GpuFacts(10, 0, 183359.0).platform_facts()
    assert facts["is_sm100"] and facts["is_blackwell"] and not facts["is_sm90"]
    assert facts["device_capability"] == (10, 0)


# ---- the launch grid's edges, by hand: fallbacks, flag messages, string and integer bounds, workers --------


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
