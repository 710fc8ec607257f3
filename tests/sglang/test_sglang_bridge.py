"""The SGLang bridge: comparison rules without SGLang; a few live cases when SGLang 0.5.23 is installed."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from kvstrategies.errors import MissingDependencyError
from kvstrategies.sglang.bridge import engine, runtime
from kvstrategies.sglang.bridge import verify as verify_module
from kvstrategies.sglang.bridge.bridge import (
    decode_extra_slots,
    launch_set_swa_ratio,
    project_name,
    sanitized_config,
    view_bases,
    walk_tensors,
)
from kvstrategies.sglang.bridge.compare import difference_lines, explain
from kvstrategies.sglang.bridge.runtime import SUPPORTED_VERSIONS, check_version
from kvstrategies.sglang.bridge.verify import CaseVerdict, VerifyReport, format_report, verdict_for

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "cases"
SIZES = {"max_total_num_tokens": 1024, "max_running_requests": 8}


def _doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "configurator": "DefaultPoolConfigurator",
        "cell_size": 131072,
        "sizes": dict(SIZES),
        "sizes_from_max_tokens": None,
        "pool_sizes": dict(SIZES),
        "token_to_kv_pool_class": "MHATokenToKVPool",
        "pools": [{"name": "k_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.bfloat16", "view_of": "kv[0]"},
                  {"name": "v_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.bfloat16"}],
        "req_to_token_pool": {"pool_class": "ReqToTokenPool",
                              "buffers": [{"name": "req_to_token", "shape": [9, 4100], "dtype": "torch.int32"}]},
    }
    doc.update(changes)
    return doc


def test_version_check_names_the_supported_versions() -> None:
    assert SUPPORTED_VERSIONS[0] == "0.5.1" and SUPPORTED_VERSIONS[-1] == "0.5.23"
    assert check_version("0.5.15.post1").line == "0.5.15"  # a .postN build is its release line
    assert check_version("0.5.20").line == "0.5.20"
    for unsupported in ("0.5.0", "0.5.24", "garbage"):
        with pytest.raises(MissingDependencyError, match=r"supports 0\.5\.1, 0\.5\.2, .*0\.5\.23"):
            check_version(unsupported)


def test_sglang_attribute_paths_map_to_the_project_names() -> None:
    assert project_name("full_kv_pool.k_buffer[3]") == "full.k_buffer[3]"
    assert project_name("mamba_pool.mamba_cache.conv[0]") == "mamba.conv[0]"
    assert project_name("index_key_cache.buffer[7]") == "index_k_with_scale_buffer[7]"
    assert project_name("kv_buffer[1]") == "kv_buffer[1]"


def test_config_is_loadable_offline() -> None:
    config = {"auto_map": {"AutoConfig": "x.Y"}, "quantization_config": {"quant_method": "mxfp4"}, "a": 1}
    assert sanitized_config(config) == {"a": 1}
    assert sanitized_config({"quantization_config": {"quant_method": "fp8"}})["quantization_config"]


def test_decode_extra_slots_follow_the_resolution_hook() -> None:
    base = {"disaggregation_mode": "decode", "disaggregation_decode_extra_slots": None, "attn_dp_size": 1}
    assert decode_extra_slots({**base, "max_running_requests": 16}) == 32
    assert decode_extra_slots({**base, "max_running_requests": 64}) == 0
    assert decode_extra_slots({**base, "disaggregation_mode": "null", "max_running_requests": 16}) is None


def test_the_launch_ratio_is_asked_only_where_the_configurator_reads_the_launchs_value() -> None:
    """DeepSeek-V4 without a ratio up to 0.5.20 runs the release's own launch (needs SGLang); an explicit ratio,
    another model or 0.5.21 (the configurator's own default) never do: None, without importing SGLang."""
    from kvstrategies.sglang.bridge.bridge_releases import bridge_release

    dsv4 = {"preset": "deepseek-v4-flash", "swa_full_tokens_ratio": None, "tp_size": 1, "pp_size": 1, "platform": {}}
    assert launch_set_swa_ratio(bridge_release("0.5.21"), dsv4, "unused") is None
    assert launch_set_swa_ratio(bridge_release("0.5.15"), {**dsv4, "swa_full_tokens_ratio": 0.5}, "unused") is None
    assert launch_set_swa_ratio(bridge_release("0.5.15"), {**dsv4, "preset": "gpt-oss-20b"}, "unused") is None


def test_equal_documents_have_no_difference_and_order_and_pointer_tables_do_not_count() -> None:
    theirs = _doc(pools=[{"name": "v_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.bfloat16"},
                         {"name": "k_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.bfloat16"},
                         {"name": "k_data_ptrs", "shape": [1], "dtype": "torch.uint64"},
                         {"name": "full.data_strides", "shape": [2], "dtype": "torch.int64"}])
    assert difference_lines(_doc(), theirs) == []


def test_differences_name_the_field_and_the_buffer() -> None:
    theirs = _doc(sizes={**SIZES, "max_total_num_tokens": 2048},
                  pools=[{"name": "k_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.float8_e4m3fn"},
                         {"name": "v_buffer[0]", "shape": [1025, 8, 128], "dtype": "torch.bfloat16"}])
    lines = difference_lines(_doc(), theirs)
    assert lines[0].startswith("sizes.max_total_num_tokens: 1024 -> 2048")
    assert lines[1] == "pools.token_to_kv: k_buffer[0]: dtype torch.bfloat16 -> torch.float8_e4m3fn"


def test_storage_behind_views_is_compared_by_shape_and_dtype() -> None:
    """A deduplicated conv window is a view: its bytes live in a private backing tensor, which
    SGLang's document lists as a pool attribute and ours as an allocation (names differ)."""
    phys = {"name": "mamba._intermediate_conv_window_phys[0]", "shape": [20, 9, 3, 3075], "dtype": "torch.bfloat16"}
    plain = [{k: v for k, v in e.items() if k != "view_of"} for e in _doc()["pools"]]  # type: ignore[attr-defined]
    kv = {"name": "kv[0]", "shape": [2], "dtype": "torch.bfloat16"}  # no buffer is a view of it: not backing
    ours = {**_doc(pools=plain), "allocations": [{**phys, "nbytes": 2}, kv]}
    theirs = _doc(pools=[*plain, {**phys, "name": "mamba_pool._intermediate_conv_window_phys[0]"}])
    assert difference_lines(ours, theirs) == []
    assert difference_lines(_doc(pools=plain, allocations=[]), theirs) == [
        "backing: [] -> [[20, 9, 3, 3075] torch.bfloat16]"
    ]


def test_the_fused_kv_tensor_behind_k_and_v_is_compared() -> None:
    """K and V as views of one ``(2, ceil_align(T + P, P), H, D)`` tensor (MHATokenToKVPool.
    _create_buffers_normal): SGLang's document names it after its first view (``k_buffer[0]._base``),
    ours lists the allocation the views name; T = 1024, P = 16: 1040 rows, K and V address 1040."""
    views = [{"name": f"{kv}_buffer[0]", "shape": [1040, 8, 128], "dtype": "torch.bfloat16", "view_of": "kv_storage[0]"}
             for kv in "kv"]  # fmt: skip
    storage = {"name": "kv_storage[0]", "shape": [2, 1040, 8, 128], "dtype": "torch.bfloat16"}
    ours = _doc(pools=views, allocations=[storage])
    theirs = _doc(pools=[*views, {**storage, "name": "k_buffer[0]._base"}])
    assert difference_lines(ours, theirs) == []
    other_rows = _doc(pools=[*views, {**storage, "name": "k_buffer[0]._base", "shape": [2, 1025, 8, 128]}])
    assert difference_lines(ours, other_rows) == [
        "backing: [[2, 1040, 8, 128] torch.bfloat16] -> [[2, 1025, 8, 128] torch.bfloat16]"
    ]
    separate = _doc(pools=[{k: v for k, v in e.items() if k != "view_of"} for e in views])
    assert difference_lines(ours, separate) == ["backing: [[2, 1040, 8, 128] torch.bfloat16] -> []"]
    # a pool SGLang did not build has no storage to compare: "not built" says it once
    assert difference_lines(ours, _doc(pools=None)) == ["pools.token_to_kv: not built by SGLang"]


def test_the_walk_lists_each_base_of_views_once_unless_an_attribute_holds_it() -> None:
    """``walk_tensors`` + ``view_bases``: one fused base for K and V, named after the first view;
    a private attribute's views (a conv window's ``_phys``) add nothing, the base is listed already."""
    import torch

    class Pool:
        def __init__(self) -> None:
            fused = torch.zeros((2, 32, 2, 4), device="meta")
            self.k_buffer = [fused[0, :20]]
            self.v_buffer = [fused[1, :20]]
            self._phys = torch.zeros((3, 5), device="meta")
            self.conv = [self._phys[1:]]
            self.req = torch.zeros((4,), device="meta")

    seen: set[int] = set()
    views: dict[int, tuple[str, object]] = {}
    listed = walk_tensors(Pool(), seen=seen, views=views)
    assert [e["name"] for e in listed] == ["k_buffer[0]", "v_buffer[0]", "conv[0]", "req", "_phys"]
    assert view_bases(views, seen) == [{"name": "k_buffer[0]._base", "shape": [2, 32, 2, 4], "dtype": "torch.float32"}]


def test_a_strategy_is_compared_by_the_sglang_class_it_reproduces() -> None:
    ours = {**_doc(), "configurator": "HybridLinearPoolConfigurator", "sglang_configurator": "DefaultPoolConfigurator"}
    theirs = {**_doc(), "configurator": "DefaultPoolConfigurator"}
    assert difference_lines(ours, theirs) == []
    wrong = {**ours, "sglang_configurator": "HybridSWAPoolConfigurator"}
    assert difference_lines(wrong, theirs) == ["configurator: HybridSWAPoolConfigurator -> DefaultPoolConfigurator"]


def test_known_differences_cover_only_their_cases_and_lines() -> None:
    line = "configurator: HybridLinearPoolConfigurator -> DefaultPoolConfigurator"
    assert explain({"_hf_config": {}}, [line])[1] == [line]  # names are compared as SGLang's classes
    jamba = {"_hf_config": {"architectures": ["JambaForCausalLM"]}}  # planned as SGLang's generic path plans it
    assert explain(jamba, ["sizes.max_total_num_tokens: 1 -> 2"])[1] == ["sizes.max_total_num_tokens: 1 -> 2"]
    npu_line = "pools.token_to_kv: not built by SGLang"
    assert explain({"device": "npu", "_hf_config": {}}, [npu_line])[1] == []
    assert explain({"device": "cuda", "_hf_config": {}}, [npu_line])[1] == [npu_line]


# ---- live: SGLang 0.5.23 itself ---------------------------------------------------------------

LIVE_CASES = (
    "default-llama-3.1-8b-tp1-bf16-p64-max-tokens",
    "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64",
    "swa-gpt-oss-120b-tp1-bf16-p64-chunkcap",
    "dsa-deepseek-v3.2-tp8-fp8-mtp-draft-p64",
)


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="SGLang is not installed")
@pytest.mark.parametrize("name", LIVE_CASES)
def test_live_sglang_agrees(name: str) -> None:
    from kvstrategies.sglang.bridge.engine import run_one
    from kvstrategies.sglang.bridge.verify import verdict_for

    path = CASES / f"{name}.json"
    verdict = verdict_for(path, run_one(path))
    assert verdict.unexplained == (), "\n".join(verdict.unexplained)


def test_missing_sglang_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from kvstrategies.cli.app import main
    from kvstrategies.sglang.bridge import runtime

    monkeypatch.setattr(runtime, "_IMPORTED", None)
    monkeypatch.setitem(sys.modules, "sglang", None)  # import sglang -> ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install --no-deps 'sglang==0\.5\.23'"):
        runtime.import_sglang()
    assert main(["verify", "--against", "sglang", str(CASES / "default-llama-3.1-8b-tp1-bf16-p1.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvstrategies: error: SGLang is not installed")


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="SGLang is not installed")
def test_verify_cli_one_line_per_case_and_a_total(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    names = ("default-llama-3.1-8b-tp1-bf16-p1", "npu-llama-3.1-8b-tp1-bf16-p128-t1024")
    cases = [str(CASES / f"{name}.json") for name in names]
    assert main(["verify", "--against", "sglang", *cases]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:2] == ["default-llama-3.1-8b-tp1-bf16-p1", "match"]
    assert out[2].split()[:2] == ["npu-llama-3.1-8b-tp1-bf16-p128-t1024", "known"]
    assert "npu-pools-not-buildable" in out[2]
    assert out[-1].startswith("total: 2 cases: 1 match, 1 known, 0 unexplained")


# ---- the comparison's edges, by hand: which known difference applies where, the report lines, the timings ----


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
    from kvstrategies.sglang.bridge.compare import KNOWN_DIFFERENCES

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


def test_server_args_keep_the_case_values_a_post_init_hook_rewrote() -> None:
    """0.5.14's ``ServerArgs.__post_init__`` runs ``handle_pd_disaggregation`` before its dummy-model return, turning a
    decode role's radix cache off; the bridge hands SGLang a case's values as resolved, so it puts them back (the
    pools then see the case's ``disable_radix_cache``, as every later release's bridge run does)."""
    from dataclasses import dataclass

    from kvstrategies.sglang.bridge.bridge_releases import bridge_release
    from kvstrategies.sglang.bridge.compat import make_server_args

    @dataclass
    class FakeServerArgs:
        model_path: str = ""
        dp_size: int = 1
        enable_dp_attention: bool = False
        disaggregation_mode: str = "null"
        disable_radix_cache: bool = False

        def __post_init__(self) -> None:
            if self.disaggregation_mode == "decode":
                self.disable_radix_cache = True

    args = make_server_args(bridge_release("0.5.14"), FakeServerArgs,
                            {"disaggregation_mode": "decode", "disable_radix_cache": False})  # fmt: skip
    assert (args.model_path, args.disaggregation_mode, args.disable_radix_cache) == ("dummy", "decode", False)


def test_server_args_of_0_5_3_skip_post_init() -> None:
    """0.5.3's ``ServerArgs.__post_init__`` has no dummy-model return (it would resolve the launch, reading the model's
    config): the bridge builds the resolved values without running it, and restores the class after."""
    from dataclasses import dataclass

    from kvstrategies.sglang.bridge.bridge_releases import bridge_release
    from kvstrategies.sglang.bridge.compat import make_server_args

    @dataclass
    class FakeServerArgs:
        model_path: str = ""
        dp_size: int = 1
        enable_dp_attention: bool = False
        page_size: int = 1

        def __post_init__(self) -> None:
            raise AssertionError("__post_init__ ran")

    post_init = FakeServerArgs.__post_init__
    args = make_server_args(bridge_release("0.5.3"), FakeServerArgs, {"page_size": 64, "attn_dp_size": 2})
    assert (args.model_path, args.page_size, args.dp_size, args.enable_dp_attention) == ("dummy", 64, 2, True)
    assert FakeServerArgs.__post_init__ is post_init
    with pytest.raises(AssertionError, match="__post_init__ ran"):
        make_server_args(bridge_release("0.5.4"), FakeServerArgs, {"page_size": 64})


def test_a_field_at_its_default_is_not_given() -> None:
    """A release without a ServerArgs field launches as if its default were given (0.5.3 has no
    ``--mamba-full-memory-ratio``; 0.9 is the default), so the bridge drops it there; another value is a refusal."""
    from kvstrategies.sglang.server_arguments import RENAMED_SERVER_ARGUMENTS, is_unset

    assert is_unset("mamba_full_memory_ratio", 0.9) and is_unset("dcp_size", 1) and is_unset("page_size", None)
    assert not is_unset("mamba_full_memory_ratio", 0.5) and not is_unset("page_size", 64)
    pairs = RENAMED_SERVER_ARGUMENTS
    assert ("dsa_prefill_backend", "nsa_prefill_backend") in pairs and ("dsa_prefill_backend", "nsa_prefill") in pairs
    assert pairs.index(("dsa_prefill_backend", "nsa_prefill_backend")) < pairs.index(("dsa_prefill_backend",
                                                                                         "nsa_prefill"))  # fmt: skip


def test_the_mamba_reservation_of_0_5_3() -> None:
    """0.5.3 has no ``handle_max_mamba_cache``: ``ModelRunner.__init__`` fixes the slots (given, else the request
    cap, else 512; over the DP width under DP attention) and ``profile_max_num_token`` takes ``slots x per`` off.
    Per 38,633,472 B, 10 GiB: 512 slots leave ``10 - 512 x per / 2**30`` GiB; a cap of 48 at DP 2 leaves 24 slots."""
    import types

    from kvstrategies.sglang.bridge.hosts import RunnerHost, hybrid_gdn_reservation

    per = 38_633_472

    class Runner:  # 0.5.3's ModelRunner: is_hybrid_gdn, no mambaish_config, no handle_max_mamba_cache
        is_hybrid_gdn = True

        def __init__(self, **args: object) -> None:
            self.server_args = types.SimpleNamespace(**args)
            self.model_config = types.SimpleNamespace(hf_config=types.SimpleNamespace(mamba_cache_per_req=per))

    runner = Runner(max_mamba_cache_size=None, max_running_requests=None, dp_size=1, enable_dp_attention=False)
    assert hybrid_gdn_reservation(runner, 10.0) == 10.0 - 512 * per / 2**30
    assert runner.server_args.max_mamba_cache_size == 512
    capped = Runner(max_mamba_cache_size=None, max_running_requests=48, dp_size=2, enable_dp_attention=True)
    host = RunnerHost(capped)
    assert host.mambaish_config is capped.model_config.hf_config
    assert host.handle_max_mamba_cache(10.0) == 10.0 - 24 * per / 2**30
    assert capped.server_args.max_mamba_cache_size == 24


def test_the_mamba_state_of_0_5_3_is_listed_with_the_kv_side() -> None:
    """0.5.3 holds its Mamba state in the request pool only, as a tuple (conv, temporal[, intermediate ssm, conv
    window]): the bridge lists it beside the KV pool under the names the later releases give the same tensors."""
    import types

    from kvstrategies.sglang.bridge.bridge import req_buffers_hold_state

    assert project_name("mamba_pool.mamba_cache[0]") == "mamba.conv"
    assert project_name("mamba_pool.mamba_cache[1]") == "mamba.temporal"
    assert project_name("mamba_pool.mamba_cache[2]") == "mamba.intermediate_ssm"
    assert project_name("mamba_pool.mamba_cache[3]") == "mamba.intermediate_conv_window"
    req, kv = types.SimpleNamespace(mamba_pool=object()), types.SimpleNamespace()
    assert req_buffers_hold_state(req, kv)
    assert not req_buffers_hold_state(req, types.SimpleNamespace(mamba_pool=req.mamba_pool))  # 0.5.4 on: both hold it
    assert not req_buffers_hold_state(types.SimpleNamespace(), kv)


def test_kernel_stubs_answer_the_named_module_only() -> None:
    """``install_kernel_stubs``: a dotted name (0.5.7's vLLM CPU fallbacks) gets a module that answers every name,
    its parent packages stay empty, so a sibling import fails as it does without the package; a package that is
    installed is never stubbed."""
    import importlib
    import sys

    from kvstrategies.sglang.bridge.runtime import install_kernel_stubs

    name = "kvs_test_absent_pkg.model_executor.layers.activation"
    try:
        install_kernel_stubs((name, "kvs_test_absent_pkg.model_executor.layers.layernorm", "json.kvs_not_stubbed"))
        stub = importlib.import_module(name)
        assert stub.SiluAndMul is not None
        assert sys.modules["kvs_test_absent_pkg"].model_executor.layers.activation is stub
        assert importlib.import_module("kvs_test_absent_pkg.model_executor.layers.layernorm").RMSNorm is not None
        with pytest.raises(ImportError):
            importlib.import_module("kvs_test_absent_pkg._custom_ops")
        assert "json.kvs_not_stubbed" not in sys.modules  # json is installed: nothing stubbed under it
    finally:
        for key in [k for k in sys.modules if k.startswith("kvs_test_absent_pkg")]:
            del sys.modules[key]


def test_the_weight_recorder_places_a_rank_as_initialize_model_parallel_does() -> None:
    """Up to 0.5.20 the recorder states the rank's place in ``parallel_state``'s group globals
    (``distributed/parallel_state.py``, ``initialize_model_parallel``: TP groups of ``tp`` consecutive
    ranks, one per pipeline stage; ``moe_tp = tp / ep``; attention TP ``tp / attn_dp``). TP 8, EP 4,
    PP 2, attention DP 4, world rank 13: stage 1, TP rank 5, attention-TP rank 5 % 2 = 1, expert-parallel
    rank 5 // 2 = 2, expert-TP rank 5 % 2 = 1."""
    from kvstrategies.sglang.bridge.model_on_meta import Deployment, rank_places

    places = rank_places(Deployment("unused", tp=8, ep=4, pp=2, attn_dp=4), 13)
    assert places["_WORLD"] == (16, 13) and places["_TP"] == (8, 5) and places["_PP"] == (2, 1)
    assert places["_ATTN_TP"] == (2, 1) and places["_MOE_EP"] == (4, 2) and places["_MOE_TP"] == (2, 1)
    assert places["_ATTN_CP"] == places["_DCP"] == places["_MOE_DP"] == (1, 0)


def test_the_releases_that_publish_the_process_and_its_ranks() -> None:
    """``runtime_context.publish(server_args, role=...)`` appears in 0.5.17 and takes ``ranks=SpawnRanks``
    in 0.5.21 (``sglang/srt/runtime_context.py`` of each release); before 0.5.17 the ``ServerArgs`` setter
    publishes the process (``context_server_args`` / ``global_server_args``)."""
    from kvstrategies.sglang.bridge.bridge_releases import BRIDGE_RELEASES

    publish = [row.line for row in BRIDGE_RELEASES if row.publish]
    ranks = [row.line for row in BRIDGE_RELEASES if row.spawn_ranks]
    assert publish[0] == "0.5.17" and ranks[0] == "0.5.21"
    assert set(ranks) <= set(publish) and publish[-1] == ranks[-1] == "0.5.23"
    assert len(publish) == 7 and len(ranks) == 3
