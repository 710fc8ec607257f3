"""Every rule that differs between SGLang releases, with a hand-computed number on each side.

Each test plans the same deployment for the last release without the rule and the first with it
and checks both against arithmetic written out here, citing the SGLang function that changed.
The recorded answers of every release (``tests/sglang/test_sglang_golden.py``) check the same rules
against SGLang itself; these tests say which rule moves which number, and by how much.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.case import load_case, parse_case
from kvstrategies.cli.releases import RULE_MODULES, load_rule_modules
from kvstrategies.context import (
    stage_layer_range,
)
from kvstrategies.core.releases import (
    NEWEST_SGLANG,
    ByRelease,
    all_rules,
    parse_release,
    rules_differing,
)
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.golden.snapshot import plan_case
from kvstrategies.pools.dsv4 import c4_indexer_pages, physical_pages
from kvstrategies.pools.fp4 import fixed_fp4_cell_bytes
from kvstrategies.strategies import select_configurator
from kvstrategies.strategies.layer_setup import check_layer_setup
from kvstrategies.strategies.request_math import req_to_token_extra_context_len

from ..helpers import case_settings

CASES = Path(__file__).resolve().parents[2] / "cases"
ROOT = CASES.parent
GIB = 2**30


def _case(name: str, version: str) -> Any:
    return load_case(CASES / f"{name}.json", sglang_version=version)


def _configurator(case: dict[str, Any], version: str) -> Any:
    return select_configurator(parse_case({"available_bytes": 40 * GIB, **case}, sglang_version=version).settings)


def _buffer_names(plan: Any) -> set[str]:
    return {b.name.split("[")[0] for layout in plan.layout.pools for b in layout.buffers}


def _shapes(plan: Any) -> dict[str, tuple[int, ...]]:
    return {b.name: tuple(b.shape) for layout in plan.layout.pools for b in layout.buffers}


# ---- the rule registry itself ---------------------------------------------------------------------------------------


def test_every_module_that_defines_a_release_rule_is_loaded_by_the_listing() -> None:
    """``kvstrategies releases A B`` must see every rule: each defining module is in RULE_MODULES."""
    defining = set()
    for path in (ROOT / "kvstrategies").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "releases.py" and ("ReleaseRule(" in text or "ByRelease(" in text):
            defining.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert defining <= set(RULE_MODULES), sorted(defining - set(RULE_MODULES))
    assert len(load_rule_modules()) == len(all_rules()) > 25


def test_by_release_values_and_their_rules() -> None:
    value = ByRelease("test-step-value", (("0.5.1", 1), ("0.5.19", 2)), "a test value", "nowhere", topic="test")
    assert [value.at(parse_release(v)) for v in ("0.5.15", "0.5.18", "0.5.19", "0.5.23")] == [1, 1, 2, 2]
    keys = {r.key for r in rules_differing(parse_release("0.5.18"), parse_release("0.5.19"))}
    assert {"test-step-value=1", "test-step-value=2"} <= keys
    assert not {"test-step-value=1"} & {r.key for r in rules_differing(parse_release("0.5.19"), NEWEST_SGLANG)}
    with pytest.raises(ValueError, match="ascend"):
        ByRelease("test-bad-steps", (("0.5.19", 1), ("0.5.15", 2)), "x", "y")


@pytest.mark.parametrize("text", ["0.5.0", "0.6.0", "0.5.x", "", "0.5.23.1"])
def test_an_unsupported_release_names_the_supported_ones(text: str) -> None:
    with pytest.raises(KVCacheConfigError, match=r"supported: 0\.5\.1, 0\.5\.2.*0\.5\.23"):
        parse_release(text)


def test_a_post_build_is_its_release_line() -> None:
    assert parse_release("0.5.15.post1") == parse_release("0.5.15") == parse_release("v0.5.15")


# ---- sizing rules ---------------------------------------------------------------------------------------------------


def test_dsa_indexer_dcp_factor_from_0_5_22() -> None:
    """``DefaultPoolConfigurator._compute_dsa_indexer_cell_size`` (0.5.22: ``indexer_cell_size *=
    dcp_size``): DeepSeek-V3.2 TP 8 DCP 2 fp8, 61 layers: latent 656 x 61 = 40,016 B plus the
    indexer 132 x 61 = 8,052 B (0.5.21) or x 2 = 16,104 B (0.5.22)."""
    old = plan_case(_case("dsa-deepseek-v3.2-tp8-dcp2-fp8-p64", "0.5.21"))
    new = plan_case(_case("dsa-deepseek-v3.2-tp8-dcp2-fp8-p64", "0.5.22"))
    assert (old.cell_size_bytes, new.cell_size_bytes) == (40_016 + 8_052, 40_016 + 16_104)


def test_dsa_index_keys_by_layer_from_0_5_18() -> None:
    """0.5.18 prices (and allocates) index keys only on the layers that run the indexer
    (``_compute_dsa_indexer_cell_size``): index_topk_freq 4 over 61 layers keeps 16 (layers 0, 1,
    5, 9, ... 57); before, all 61. fp8 latent 656 x 61 = 40,016 B."""
    old = plan_case(_case("dsa-deepseek-v3.2-freq4-fp8-p64", "0.5.17"))
    new = plan_case(_case("dsa-deepseek-v3.2-freq4-fp8-p64", "0.5.18"))
    assert old.cell_size_bytes == 40_016 + 132 * 61
    assert new.cell_size_bytes == 40_016 + 132 * 16
    rows = [b.shape[0] for b in old.layout.token_to_kv.buffers if b.name.startswith("index_k_with_scale")]
    assert 0 not in rows  # every layer holds its keys before 0.5.18
    rows = [b.shape[0] for b in new.layout.token_to_kv.buffers if b.name.startswith("index_k_with_scale")]
    assert rows.count(0) == 45


def test_dsa_index_keys_by_layer_with_a_draft_and_a_stage() -> None:
    """0.5.18's EAGLE draft adds one latent row and one indexer row (656 + 132 B) to the 16-indexer-layer
    target (40,016 + 132 x 16 = 42,128 B): 42,916 B; 0.5.17 scales the all-layer cell,
    ``int(48,068 x (1 + 1/61))`` = 48,856 B. PP 2 rank 1 (layers 30-60, bf16 latent 1,152 B) holds 7
    indexer layers (33, 37, ... 57) from 0.5.18: 31 x 1,152 + 7 x 132 = 36,636 B against 31 x 1,284."""
    name = "release-dsa-layers-deepseek-v3.2-freq4-tp8-fp8-p64-mtp"
    assert plan_case(_case(name, "0.5.17")).cell_size_bytes == 48_856
    assert plan_case(_case(name, "0.5.18")).cell_size_bytes == 40_016 + 132 * 16 + 656 + 132
    stage = "release-dsa-layers-deepseek-v3.2-freq4-tp4-pp2-rank1-bf16-p64"
    assert plan_case(_case(stage, "0.5.17")).cell_size_bytes == 31 * (1_152 + 132)
    assert plan_case(_case(stage, "0.5.18")).cell_size_bytes == 31 * 1_152 + 7 * 132


def test_mla_cell_row_from_0_5_17() -> None:
    """0.5.17's ``_compute_cell_size`` prices ``calculate_mla_kv_cache_dim`` (656 for the packed fp8
    DSA row); 0.5.16 the raw ``kv_lora_rank + qk_rope_head_dim`` = 576: (656 - 576) x 61 = 4,880 B less."""
    old = plan_case(_case("dsa-deepseek-v3.2-tp8-fp8-p64", "0.5.16"))
    new = plan_case(_case("dsa-deepseek-v3.2-tp8-fp8-p64", "0.5.17"))
    assert new.cell_size_bytes - old.cell_size_bytes == 4_880
    assert old.cell_size_bytes == 576 * 61 + 132 * 61


def test_npu_dsa_indexer_in_the_cache_dtype_from_0_5_20() -> None:
    """0.5.20: a non-fp8 Ascend cache prices the indexer at ``index_head_dim x es(kv)`` = 128 x 2 =
    256 B per layer instead of 132: (256 - 132) x 61 = 7,564 B more on DeepSeek-V3.2 bf16."""
    old = plan_case(_case("npu-deepseek-v3.2-tp8-bf16-p64-t1024", "0.5.19"))
    new = plan_case(_case("npu-deepseek-v3.2-tp8-bf16-p64-t1024", "0.5.20"))
    assert new.cell_size_bytes - old.cell_size_bytes == 7_564


def test_eagle_draft_cell_added_from_0_5_22() -> None:
    """``DefaultPoolConfigurator.__init__``: 0.5.22 adds ``int(cell * D / L)``; before,
    ``int(cell * (1 + D / L))``, one float product: cell 1,457 B, D 1, L 47 gives 1,487 before and
    1,488 after (1,457 / 47 = 31 exactly; 1 + 1/47 rounds down)."""
    from kvstrategies.core.releases import parse_release as release
    from kvstrategies.strategies.default import DefaultPoolConfigurator

    class _Fixed(DefaultPoolConfigurator):
        def __init__(self, version: str) -> None:
            settings = parse_case({"preset": "llama-3.1-8b", "available_bytes": 1, "speculative_algorithm": "EAGLE",
                                   "eagle_draft_num_layers": 1, "speculative_num_draft_tokens": 2},
                                  sglang_version=version).settings  # fmt: skip
            super().__init__(settings)
            self.__dict__["num_layers"] = 47

    assert release("0.5.21") < release("0.5.22")
    assert 1_457 + _Fixed("0.5.21").draft_cell_bytes(1_457) == 1_487
    assert 1_457 + _Fixed("0.5.22").draft_cell_bytes(1_457) == 1_488


@pytest.mark.parametrize(
    ("name", "layers", "per_layer", "draft_layers"),
    [
        # Qwen3-235B-A22B TP 4: 94 layers x 1 KV head x 128 x 2 (K, V) x 2 B
        ("release-eagle-cell-qwen3-235b-a22b-tp4-bf16-p64-d2", 94, 512, 2),
        # Falcon-H1-7B: 44 attention layers x 2 KV heads x 128 x 2 x 2 B
        ("release-eagle-cell-falcon-h1-7b-tp1-bf16-p16-d5", 44, 1_024, 5),
        # Kimi-Linear: 7 MLA layers x (512 + 64) x 1 B (fp8)
        ("release-eagle-cell-kimi-linear-48b-a3b-tp2-fp8-p64-d2", 7, 576, 2),
    ],
)
def test_eagle_draft_cell_added_on_real_models(name: str, layers: int, per_layer: int, draft_layers: int) -> None:
    """``DefaultPoolConfigurator.__init__`` on targets whose draft adds whole layers: 0.5.22 gives
    ``L x b + D x b``; 0.5.21's ``int(L x b x (1 + D / L))`` rounds one byte below it. Qwen3-235B at
    49,151 x 873,856 B: 873,856 tokens (0.5.21) against 873,792 (0.5.22, page 64)."""
    cell = layers * per_layer
    old, new = plan_case(_case(name, "0.5.21")), plan_case(_case(name, "0.5.22"))
    assert new.cell_size_bytes == cell + draft_layers * per_layer
    assert old.cell_size_bytes == int(cell * (1 + draft_layers / layers)) == new.cell_size_bytes - 1
    if name.startswith("release-eagle-cell-qwen3"):
        assert (old.sizes.max_total_num_tokens, new.sizes.max_total_num_tokens) == (873_856, 873_792)


def test_fixed_fp4_cell_before_0_5_21() -> None:
    """Before 0.5.21 every FP4 MHA cell is ``H (D + Dv) L // 2 + (H D L 2) // 16 + H D 2``: Llama-3.1-8B,
    8 heads of 128, 32 layers: 32,768 + 4,096 + 2,048 = 38,912 B for nvfp4 and fp4_mx_block16 alike;
    0.5.21's nvfp4 with no backend is the packed 32,768 B alone."""
    assert fixed_fp4_cell_bytes(8, 128, 128, 32) == 32_768 + 4_096 + 2_048
    assert plan_case(_case("fp4-llama-3.1-8b-tp1-nvfp4-p16", "0.5.20")).cell_size_bytes == 38_912
    assert plan_case(_case("fp4-llama-3.1-8b-tp1-fp4-mx-block16-p16", "0.5.20")).cell_size_bytes == 38_912
    assert plan_case(_case("fp4-llama-3.1-8b-tp1-nvfp4-p16", "0.5.21")).cell_size_bytes == 32_768
    # nvfp4 pools before 0.5.21 always hold the linear scales and the fp8 dequant workspace
    nvfp4_pools = _buffer_names(plan_case(_case("fp4-llama-3.1-8b-tp1-nvfp4-p16", "0.5.20")))
    assert {"k_scale_buffer", "dq_k_buffer"} <= nvfp4_pools


def test_dsv4_ratio_only_sizing_up_to_0_5_20() -> None:
    """``DSV4PoolConfigurator._get_bytes_per_full_token`` (0.5.20): V4-Flash TP 8, 43 stage layers
    (21 of ratio 4, 20 of ratio 128), kv 448 + 2 x 64 + 8 = 584. No ratio given: the launch's model
    override (``_deepseek_v4_overrides``) sets 0.1 (``dsv4-launch-sets-swa-ratio``):
    0.1 x 584 x 43 + 584 x 21 / 4 + 584 x 20 / 128 + 132 x 21 / 4 + 0.1 x (8 / 128) x (8,192 + 2,048) x 21
    = 2,511.2 + 3,066 + 91.25 + 693 + 1,344 = 7,705.45 B per full token (at the field's fallback 0.8,
    which no launch leaves there: 34,691.85)."""

    def bpft(ratio: float) -> float:
        return ratio * 584 * 43 + 584 * 21 / 4 + 584 * 20 / 128 + 132 * 21 / 4 + ratio * (8 / 128) * 10_240 * 21

    old = plan_case(_case("dsv4-deepseek-v4-flash-tp8-p256", "0.5.20"))
    assert type(old.configurator).__name__ == "RatioOnlyDSV4PoolConfigurator"
    assert old.configurator.sglang_class_name() == "DSV4PoolConfigurator"
    assert old.cell_size_bytes == pytest.approx(bpft(0.1)) and round(bpft(0.1), 2) == 7_705.45
    assert round(bpft(0.8), 2) == 34_691.85
    data = json.loads((CASES / "dsv4-deepseek-v4-flash-tp8-p256.json").read_text(encoding="utf-8"))
    given = plan_case(parse_case({**data, "swa_full_tokens_ratio": 0.8}, sglang_version="0.5.20"))
    assert given.cell_size_bytes == pytest.approx(bpft(0.8))
    new = plan_case(_case("dsv4-deepseek-v4-flash-tp8-p256", "0.5.21"))
    assert type(new.configurator).__name__ == "DSV4PoolConfigurator" and new.cell_size_bytes < old.cell_size_bytes


def test_dsv4_unset_ratio_is_the_launchs_0_1_at_tp1() -> None:
    """#38's deployment: V4-Flash TP 1 (43 layers: 21 ratio-4, 20 ratio-128, 2 window-only), page 256,
    no ratio, 60 GiB + 12,345,678 B under 0.5.15: 7,705.45 B a full token and 2,802,176 tokens
    (SGLang 0.5.15's own launch and sizing, golden/sglang-0.5.15)."""
    plan = plan_case(_case("release-launch-ratio-deepseek-v4-flash-tp1-fp8-p256-no-ratio", "0.5.15"))
    assert round(plan.cell_size_bytes, 2) == 7_705.45
    assert plan.sizes.max_total_num_tokens == 2_802_176
    assert plan.sizes.swa_max_total_num_tokens == (int(2_802_176 * 0.1) // 256) * 256


def test_dsv4_page_counts() -> None:
    """``_num_dsv4_physical_kv_pages`` (0.5.21 for the KV pools, 0.5.22 for the c4 indexer):
    ``ceil((size + P) / p)``; before, ``(size + p + 1) // p``. 256 c4 tokens at P 256 (p 64):
    8 rows against 5; 2,048 indexer tokens: 36 against 33."""
    assert physical_pages(256, 256, 64, at_global_page=True) == 8
    assert physical_pages(256, 256, 64, at_global_page=False) == 5
    assert c4_indexer_pages(2_048, 256, at_global_page=True) == 36
    assert c4_indexer_pages(2_048, 256, at_global_page=False) == 33


def test_hybrid_swa_stage_layers_before_0_5_21() -> None:
    """``layer_setup.adjust_hybrid_swa_layer_ids`` (up to 0.5.20) trims the model's layer lists to
    ``range(start, end + 1)``: gpt-oss-120b PP 2 rank 0 holds layers [0, 18) but prices 19 (layer 18
    is rank 1's first)."""
    old = _configurator({"preset": "gpt-oss-120b", "tp_size": 2, "pp_size": 2, "pp_rank": 0}, "0.5.20")
    new = _configurator({"preset": "gpt-oss-120b", "tp_size": 2, "pp_size": 2, "pp_rank": 0}, "0.5.21")
    assert (new.full_layers + new.swa_layers, old.full_layers + old.swa_layers) == (18, 19)
    assert max(old.full_layer_ids + old.swa_layer_ids) == 18
    # Llama-4-Scout PP 2 rank 0: layers [0, 24) (18 chunked, 6 full); 0.5.20 adds layer 24, a chunked one
    scout = {"preset": "llama-4-scout", "tp_size": 4, "pp_size": 2, "pp_rank": 0, "context_length": 131_072}
    old, new = _configurator(scout, "0.5.20"), _configurator(scout, "0.5.21")
    assert (new.full_layers, new.swa_layers, old.full_layers, old.swa_layers) == (6, 18, 6, 19)


@pytest.mark.parametrize(
    ("name", "before", "after"),
    [
        ("swa-gpt-oss-120b-tp8-dcp2-bf16-p64", 1, 2),  # 8 // 8; max(1, 8 // (8 / 2))
        ("release-swa-dcp-heads-gpt-oss-20b-tp4-dcp2-fp8-p64", 2, 4),  # 8 // 4; 8 // (4 / 2)
        ("release-swa-dcp-heads-gpt-oss-120b-tp2-dcp2-bf16-p1", 4, 8),  # 8 // 2; 8 // (2 / 2)
        ("release-swa-dcp-heads-llama-4-scout-tp8-dcp4-bf16-p16", 1, 4),  # 8 // 8; 8 // (8 / 4)
    ],
)
def test_swa_pool_dcp_heads_from_0_5_18(name: str, before: int, after: int) -> None:
    """``_build_hybrid_swa_kv_pool`` (0.5.18) passes ``attn_dcp_size`` to ``get_num_kv_heads``: the
    full and SWA sub-pools (8 KV heads in each model) hold ``max(1, H // (attn_tp / dcp))`` heads;
    0.5.17 holds ``H // attn_tp``."""
    heads = {}
    for version in ("0.5.17", "0.5.18"):
        plan = plan_case(_case(name, version))
        heads[version] = {b.shape[1] for b in plan.layout.token_to_kv.buffers
                          if b.name.startswith(("full.k_buffer", "swa.k_buffer"))}  # fmt: skip
    assert heads == {"0.5.17": {before}, "0.5.18": {after}}


def test_swa_request_cap_applicability_from_0_5_22() -> None:
    """``SWARequestCapPoolConfigurator.is_applicable`` (0.5.22): the PD decode role needs no chunked
    prefill, and a chunk of -1 no longer qualifies; 0.5.21's SWAChunkCap asked only that the chunk is
    not None. Its class name changed with it."""
    decode = {"preset": "gpt-oss-120b", "max_running_requests": 64, "disable_radix_cache": True,
              "disaggregation_mode": "decode"}  # fmt: skip
    off = {"preset": "gpt-oss-120b", "max_running_requests": 64, "disable_radix_cache": True,
           "chunked_prefill_size": -1}  # fmt: skip
    assert type(_configurator(decode, "0.5.21")).__name__ == "HybridSWAPoolConfigurator"
    assert type(_configurator(decode, "0.5.22")).__name__ == "SWAChunkCapPoolConfigurator"
    assert type(_configurator(off, "0.5.21")).__name__ == "SWAChunkCapPoolConfigurator"
    assert type(_configurator(off, "0.5.22")).__name__ == "HybridSWAPoolConfigurator"
    assert _configurator(off, "0.5.21").sglang_class_name() == "SWAChunkCapPoolConfigurator"
    assert _configurator(decode, "0.5.22").sglang_class_name() == "SWARequestCapPoolConfigurator"


def test_mamba_reservation_padding_slot_and_stage_share_from_0_5_17() -> None:
    """``_handle_max_mamba_cache``: 0.5.17 prices the pool's padding slot, ``K = int((B - per) // per)``
    and ``(K + 1) x per`` reserved; 0.5.16 ``K = int(B // per)`` and ``K x per``."""
    case = {"preset": "qwen3-next-80b-a3b", "tp_size": 4}
    for version, pad in (("0.5.16", 0), ("0.5.17", 1)):
        configurator = _configurator(case, version)
        per = configurator.stage_mamba_cache_per_req
        budget = (40 * GIB / GIB) * 0.9 / 1.9 * GIB
        slots = int((budget - per * pad) // per)
        assert configurator.mamba_budget(40 * GIB).max_mamba_cache_size == slots
    # PP: 0.5.17 scales the per-request bytes to the largest stage's share; 0.5.16 charges all layers
    pp = {"preset": "qwen3-next-80b-a3b", "tp_size": 2, "pp_size": 2, "pp_rank": 1}
    assert _configurator(pp, "0.5.16").stage_mamba_cache_per_req == _configurator(pp, "0.5.16").mamba_cache_per_req
    assert _configurator(pp, "0.5.17").stage_mamba_cache_per_req == _configurator(pp, "0.5.17").mamba_cache_per_req // 2


@pytest.mark.parametrize(
    "name",
    [
        "bridge-pd-prefill-mtp-qwen3-next-80b-a3b-tp4-bf16-p64-mrr32",
        "release-pd-prefill-qwen3.5-35b-a3b-tp2-bf16-p64-mtp",
        "release-pd-prefill-kimi-linear-48b-a3b-tp4-fp8-p64-mtp",
        "release-pd-prefill-nemotron-h-8b-tp1-bf16-p1-eagle",
    ],
)
def test_mamba_pd_prefill_speculative_state(name: str) -> None:
    """A PD prefill role never verifies: 0.5.18 drops the pool's per-draft-token state
    (``_build_req_to_token_pool``), 0.5.22 also its reservation (``_pd_prefill_skips_mamba_spec_state``):
    ``K = int((B - per) // per)`` against 0.5.21's ``int((B - per (1 + D)) // (per (1 + D / ratio)))``, D = 4."""
    assert "mamba.intermediate_ssm" in _buffer_names(plan_case(_case(name, "0.5.17")))
    assert "mamba.intermediate_ssm" not in _buffer_names(plan_case(_case(name, "0.5.18")))
    reserved = {}
    for version in ("0.5.21", "0.5.22"):
        configurator = plan_case(_case(name, version)).configurator
        reserved[version] = configurator.mamba_budget(40 * GIB).max_mamba_cache_size
    per, ratio = configurator.stage_mamba_cache_per_req, configurator.mamba_ratio
    budget = 40 * GIB / GIB * 0.9 / 1.9 * GIB
    assert reserved["0.5.22"] == int((budget - per) // per)
    assert reserved["0.5.21"] == int((budget - per * (1 + 4)) // (per * (1 + 4 / ratio)))


def test_kda_conv_window_dense_from_0_5_16() -> None:
    """``conv_window_dedup_enabled``: 0.5.16 keeps KDA's speculative conv window dense; 0.5.15
    deduplicated it like any CUDA linear chain, widening the tuple's second axis.

    Kimi-Linear at TP 4: conv tuple ``(K - 1, c) = (3, 3072)``, 20 KDA layers, 8 running requests
    (the case's 1,024-token pool) + 1 = 9 speculative slots, D = 4 draft tokens.
    0.5.15 backing: ``(20, 9, 3, D + 3072 - 1) = (20, 9, 3, 3075)``; 0.5.16: none, window ``(20, 9, 4, 3, 3072)``.
    """
    for name, channels, drafts in (
        ("bridge-spec-mtp-kimi-linear-48b-a3b-tp4-bf16-p64-mrr32", 3072, 4),
        ("release-kda-window-kimi-linear-48b-a3b-tp1-bf16-p1-eagle", 4 * 3072, 4),  # TP 1: every channel
        ("release-kda-window-kimi-linear-48b-a3b-tp2-fp8-p64-eagle-d6", 2 * 3072, 6),
    ):
        old, new = (_shapes(plan_case(_case(name, v))) for v in ("0.5.15", "0.5.16"))
        assert old["mamba._intermediate_conv_window_phys[0]"] == (20, 9, 3, drafts + channels - 1)
        window = (20, 9, drafts, 3, channels)
        assert old["mamba.intermediate_conv_window[0]"] == new["mamba.intermediate_conv_window[0]"] == window
        assert not any("._intermediate" in key for key in new)


def test_zero_kv_rule_from_0_5_17() -> None:
    """A PP stage without attention layers: 0.5.17 answers ``2**63 - 1`` tokens (page-aligned); 0.5.16's
    DefaultPoolConfigurator divides by the zero cell (refused here, naming it)."""
    for name, page in (
        ("hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-pp2-rank0", 64),
        ("release-zero-kv-nemotron-h-8b-tp1-pp2-rank0-bf16-p1", 1),  # layers [0, 7): Mamba only
        ("release-zero-kv-kimi-linear-48b-a3b-tp2-pp2-rank0-fp8-p64", 64),  # layers [0, 3): KDA only
    ):
        plan = plan_case(_case(name, "0.5.17"))
        assert (plan.cell_size_bytes, plan.sizes.max_total_num_tokens) == (0, (2**63 - 1) // page * page)
        with pytest.raises(UnsupportedConfigurationError, match="ZeroDivisionError"):
            plan_case(_case(name, "0.5.16"))


def test_draft_dcp_location_space_from_0_5_17() -> None:
    """``KVCacheConfigurator.loc_space_scale`` (0.5.17): a DCP 2 draft pool spans 2 x the target's
    tokens (the what-if 4,096 -> 8,192 slots); 0.5.16 builds the target's 4,096."""
    for name, tokens, dcp in (
        ("bridge-dcp2-deepseek-v3-tp8-bf16-p64-eagle-draft", 4_096, 2),
        ("release-draft-dcp-kimi-k2-tp8-dcp4-bf16-p32-eagle-draft", 4_096, 4),
        ("release-draft-dcp-gpt-oss-20b-tp2-dcp2-bf16-p16-eagle3-draft", 8_192, 2),
    ):
        assert plan_case(_case(name, "0.5.16")).pool_sizes.max_total_num_tokens == tokens
        assert plan_case(_case(name, "0.5.17")).pool_sizes.max_total_num_tokens == tokens * dcp


def test_pp_with_an_mtp_model_refused_up_to_0_5_20() -> None:
    """``layer_setup._assert_pp_mtp_compat`` (up to 0.5.20): GLM-4.5 (1 MTP layer) PP 2 rank 1 with a
    STANDALONE draft holds 46 of 92 layers: "PP is not compatible with MTP models"."""
    for name in (
        "bridge-standalone-glm-4.5-tp8-pp2r1-p64-mtp-default",
        "release-pp-mtp-deepseek-v3-tp8-pp2-rank0-fp8-p64-eagle",  # layers [0, 30) of 61
        "release-pp-mtp-glm-4.5-tp4-pp2-rank1-bf16-p16-eagle",
    ):
        with pytest.raises(UnsupportedConfigurationError, match="PP is not compatible with MTP models"):
            plan_case(_case(name, "0.5.20"))
        assert plan_case(_case(name, "0.5.21")).sizes.max_total_num_tokens > 0
    # DeepSeek-V3 fp8 rank 0: 30 layers x 576 B plus the MTP layer at the stage's per-layer bytes,
    # 17,280 + int(17,280 x 1 / 30) (DefaultPoolConfigurator.__init__ scales by the stage's layer count)
    cell = plan_case(_case("release-pp-mtp-deepseek-v3-tp8-pp2-rank0-fp8-p64-eagle", "0.5.21")).cell_size_bytes
    assert cell == 30 * 576 + 576


# ---- request table rules --------------------------------------------------------------------------------------------


def test_request_row_headroom_and_generation_counter() -> None:
    """``get_req_to_token_extra_context_len``: EAGLE top-1, 3 steps, 4 drafts, page 16. 0.5.15 adds
    4 + 4 = 8 columns (its reserve needs top-k > 1); 0.5.16 ``max(8, 2 x max(3, 4) + 16 - 1)`` = 23.
    ``req_generation`` joins the request pool in 0.5.16."""
    case = {"preset": "llama-3.1-8b", "available_bytes": 1, "speculative_algorithm": "EAGLE", "page_size": 16,
            "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
            "eagle_draft_num_layers": 1}  # fmt: skip
    assert req_to_token_extra_context_len(parse_case(case, sglang_version="0.5.15").settings) == 8
    assert req_to_token_extra_context_len(parse_case(case, sglang_version="0.5.16").settings) == 23
    assert "req_generation" not in _buffer_names(plan_case(_case("default-llama-3.1-8b-tp1-bf16-p64", "0.5.15")))
    assert "req_generation" in _buffer_names(plan_case(_case("default-llama-3.1-8b-tp1-bf16-p64", "0.5.16")))


def test_alloc_page_spans_dcp_from_0_5_19() -> None:
    """``get_alloc_page_size`` (0.5.19) = page x attn_dcp: DeepSeek-V3 TP 8 DCP 2, EAGLE top-1,
    4 drafts, page 64: headroom ``max(8, 2 x 4 + 128 - 1)`` = 135 against 0.5.18's 2 x 4 + 64 - 1 = 71."""
    case = {"preset": "deepseek-v3", "available_bytes": 1, "tp_size": 8, "dcp_size": 2, "page_size": 64,
            "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4}  # fmt: skip
    assert req_to_token_extra_context_len(parse_case(case, sglang_version="0.5.18").settings) == 71
    assert req_to_token_extra_context_len(parse_case(case, sglang_version="0.5.19").settings) == 135
    name = "release-alloc-dcp-deepseek-v3-tp8-dcp2-bf16-p64-eagle"
    widths = [_shapes(plan_case(_case(name, v)))["req_to_token"] for v in ("0.5.18", "0.5.19")]
    assert widths == [(9, 163_840 + 71), (9, 163_840 + 135)]


def test_alloc_page_spans_dcp_in_the_swa_request_cap() -> None:
    """``compute_swa_request_cap`` prices ``2 x get_alloc_len_per_decode()`` per request: gpt-oss-120b
    TP 4 DCP 2, EAGLE top-2, 3 steps, page 16. 0.5.19 pages at 32: ``((31 + 3 + 31) // 32) x 32 x 2`` = 128
    tokens a step, 0.5.18 at 16: ``((15 + 3 + 15) // 16) x 16 x 2`` = 64; 32 requests: 32 x 2 x 64 = 4,096
    more SWA slots (page-aligned either way)."""
    name = "release-alloc-dcp-gpt-oss-120b-tp4-dcp2-bf16-p16-eagle-topk2-reqcap"
    old, new = (plan_case(_case(name, v)).sizes.swa_max_total_num_tokens for v in ("0.5.18", "0.5.19"))
    assert new - old == 32 * 2 * (128 - 64)


# ---- what a release accepts -----------------------------------------------------------------------------------------


def test_kv_recipe_names_from_0_5_16() -> None:
    for name in ("nvfp4", "fp4_mx_block16", "mxfp8"):
        with pytest.raises(UnsupportedConfigurationError, match="has no such KV cache dtype"):
            parse_case({"preset": "llama-3.1-8b", "available_bytes": 1, "kv_cache_dtype": name},
                       sglang_version="0.5.15")  # fmt: skip
        parse_case({"preset": "llama-3.1-8b", "available_bytes": 1, "kv_cache_dtype": name}, sglang_version="0.5.16")


def test_server_arguments_a_release_lacks_are_refused() -> None:
    """``ServerArgs`` has ``dsv4_attn_backend`` from 0.5.20 and ``swa_prefix_tails`` from 0.5.21 (the
    field ``sglang.srt.arg_groups.fields.schedule.swa_prefix_tails``, read by
    ``DSV4PoolConfigurator._resolve_swa_prefix_tails``, both new in 0.5.21)."""
    tails = {"preset": "deepseek-v4-flash", "available_bytes": 1, "page_size": 256, "swa_prefix_tails": 0}
    for version in ("0.5.19", "0.5.20"):
        with pytest.raises(UnsupportedConfigurationError, match="has no --swa-prefix-tails"):
            parse_case(tails, sglang_version=version)
    parse_case(tails, sglang_version="0.5.21")
    backend = {"preset": "deepseek-v4-flash", "available_bytes": 1, "page_size": 256, "kv_cache_dtype": "fp8_e4m3",
               "dsv4_attn_backend": "trtllm"}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="has no --dsv4-attn-backend"):
        parse_case(backend, sglang_version="0.5.19")
    parse_case(backend, sglang_version="0.5.20")


def test_config_loadability_follows_the_pinned_transformers() -> None:
    """transformers 5.12.1 (SGLang 0.5.15-0.5.21) has no mimo_v2_flash config class; 5.19.0 does."""
    with pytest.raises(UnsupportedConfigurationError, match="neither its transformers 5.12.1 nor"):
        parse_case({"preset": "mimo-v2-flash", "available_bytes": 1}, sglang_version="0.5.21")
    parse_case({"preset": "mimo-v2-flash", "available_bytes": 1}, sglang_version="0.5.22")


def test_the_plan_document_names_its_release() -> None:
    from kvstrategies.document import plan_document

    document = plan_document(plan_case(_case("default-llama-3.1-8b-tp1-bf16-p64", "0.5.18")))
    assert document["release"] == {"engine": "sglang", "version": "0.5.18", "label": "SGLang 0.5.18"}
    assert json.dumps(document)


# ---- PP with MTP up to SGLang 0.5.20 (kvstrategies/strategies/layer_setup.py), by hand ------------------------------


EAGLE: dict[str, Any] = {"speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1,
                         "speculative_num_draft_tokens": 4, "speculative_num_steps": 3}  # fmt: skip


def test_a_middle_pp_stage_of_an_mtp_model_is_refused_up_to_0_5_20() -> None:
    # layer_setup._assert_pp_mtp_compat (0.5.20): DeepSeek-V3, 61 layers, SGLANG_PP_LAYER_PARTITION 20,21,20: rank 1
    # holds [20, 41), 41 - 20 = 21 of 61 layers: "PP is not compatible with MTP models"
    ctx = case_settings("deepseek-v3", tp_size=8, pp_size=3, pp_rank=1, env={"SGLANG_PP_LAYER_PARTITION": "20,21,20"},
                        sglang_version="0.5.20", speculative_eagle_topk=1, **EAGLE)  # fmt: skip
    assert stage_layer_range(ctx) == (20, 41)
    with pytest.raises(UnsupportedConfigurationError, match="PP is not compatible with MTP models"):
        check_layer_setup(ctx)


# ---- #38: older releases answered as they answer ----------------------------------------------------------------


def test_kv_heads_dcp_replicated_from_0_5_18() -> None:
    """``ModelConfig.get_num_kv_heads(tp, dcp)`` (0.5.18): Llama-3.1-70B (8 KV heads, 80 layers, head 128) at TP 8,
    DCP 2 holds 8 // (8 / 2) = 2 heads, 2 x 256 x 80 x 2 = 81,920 B a token; 0.5.17 splits over TP alone:
    8 // 8 = 1 head, 40,960 B."""
    name = "release-dcp-heads-llama-3.1-70b-tp8-dcp2-bf16-p64"
    old, new = plan_case(_case(name, "0.5.17")), plan_case(_case(name, "0.5.18"))
    assert (old.cell_size_bytes, new.cell_size_bytes) == (1 * 256 * 80 * 2, 2 * 256 * 80 * 2) == (40_960, 81_920)
    assert old.sizes.max_total_num_tokens == (40 * GIB // 40_960) // 64 * 64 == 1_048_576
    heads = {b.shape[1] for b in old.layout.token_to_kv.buffers if b.name.startswith("k_buffer")}
    assert heads == {1}


def test_dflash_draft_layers_dcp_from_0_5_17() -> None:
    """``DefaultPoolConfigurator.__init__`` (0.5.17) hands ``draft_num_layers * dcp_size`` to
    ``scale_kv_cell_size_per_token_for_dflash``: Llama-3.1-8B TP 2, DCP 2 (4 heads before 0.5.18: 4 x 256 x 32 x 2
    = 65,536 B), 5 draft layers: ceil(65,536 x (32 + 5 x 2) / 32) = 86,016; 0.5.16 ceil(65,536 x 37 / 32) = 75,776."""
    name = "release-dflash-dcp-llama-3.1-8b-tp2-dcp2-bf16-d5-p1"
    assert plan_case(_case(name, "0.5.16")).cell_size_bytes == 65_536 * 37 // 32 == 75_776
    assert plan_case(_case(name, "0.5.17")).cell_size_bytes == 65_536 * 42 // 32 == 86_016
    # 0.5.18 also doubles the heads (kv-heads-dcp-replicated): 131,072 x 42 / 32
    assert plan_case(_case(name, "0.5.18")).cell_size_bytes == 131_072 * 42 // 32 == 172_032


def test_dflash_draft_cell_added_from_0_5_18() -> None:
    """``pool_configurator._dflash_draft_cell_size`` (0.5.18) adds a DFLASH draft's own cell times DCP; 0.5.17's
    ``DefaultPoolConfigurator.__init__`` gives ``scale_kv_cell_size_per_token_for_dflash`` no draft cell, so the
    layer scaling holds. Llama-3.1-8B TP 2, DCP 2, 5 draft layers, draft cell 16,384: 0.5.17 ceil(65,536 x (32 + 5 x
    2) / 32) = 86,016; 0.5.18 (8 heads under DCP: 131,072 B) 131,072 + 16,384 x 2 = 163,840, not the layer scaling's
    131,072 x 42 / 32 = 172,032."""
    name = "edge-dflash-cell-dcp-llama-3.1-8b-tp2-dcp2-bf16-d5-p1"
    assert plan_case(_case(name, "0.5.17")).cell_size_bytes == 65_536 * 42 // 32 == 86_016
    assert plan_case(_case(name, "0.5.18")).cell_size_bytes == 131_072 + 16_384 * 2 == 163_840


def test_hybrid_swa_dflash_draft_cell_from_0_5_18() -> None:
    """0.5.17's ``HybridSWAPoolConfigurator`` prices no DFLASH draft; 0.5.18 adds its cell (``_draft_cell_size``).
    GPT-OSS-20B (12 full + 12 SWA layers, 2,048 B a layer), ratio 0.8: 24,576 + 0.8 x 24,576 = 44,236.8, + 1,000."""
    case = {"preset": "gpt-oss-20b", "page_size": 64, "kv_cache_dtype": "bf16", "speculative_algorithm": "DFLASH",
            "eagle_draft_num_layers": 2, "dflash_draft_cell_size_per_token": 1_000, "speculative_num_draft_tokens": 16}
    assert _configurator(case, "0.5.17").cell_size_bytes == pytest.approx(2_048 * 12 * 1.8)
    assert _configurator(case, "0.5.18").cell_size_bytes == pytest.approx(2_048 * 12 * 1.8 + 1_000)


def test_swa_admission_floor_from_0_5_16() -> None:
    """``HybridSWAPoolConfigurator`` (0.5.16) refuses an SWA pool of ``W + P`` tokens or fewer. GPT-OSS-20B (12 full +
    12 SWA layers, 8 heads of 64: 2,048 B a layer), ratio 0.01, 384 MiB: cell 2,048 x 12 x 1.01 = 24,821.76,
    M = int(402,653,184 / 24,821.76) = 16,221 -> 16,192 full tokens, SWA align(161, 64) = 128 <= 127 + 64."""
    name = "release-swa-floor-gpt-oss-20b-tp1-bf16-p64-ratio0.01"
    old = plan_case(_case(name, "0.5.15"))
    assert old.cell_size_bytes == pytest.approx(2_048 * 12 * 1.01)
    assert (old.sizes.full_max_total_num_tokens, old.sizes.swa_max_total_num_tokens) == (16_192, 128)
    with pytest.raises(KVCacheConfigError, match=r"SWA pool \(128 tokens\) cannot hold even one request"):
        plan_case(_case(name, "0.5.16"))


def test_dsv4_swa_admission_floor_from_0_5_20() -> None:
    """``DSV4PoolConfigurator._compute_dsv4_sizes`` (0.5.20) checks the SWA floor ``W + P`` (128 + 256); 0.5.19 plans
    an SWA pool below it. V4-Flash TP 8, ratio 0.05, 8 requests, 160 MiB: bpft = 0.05 x (584 x 43 + 0.0625 x
    10,240 x 21) + 3,066 + 91.25 + 693 = 5,777.85; c128 state ceil((9 x 128 + 129) / 128) x 128 = 1,408 rows
    x 2 x 512 x 4 B x 20 layers = 115,343,360 B; full align(int(52,428,800 / 5,777.85), 256) = 8,960, SWA
    align(448, 256) = 256."""
    case = {"preset": "deepseek-v4-flash", "tp_size": 8, "page_size": 256, "kv_cache_dtype": "fp8_e4m3",
            "swa_full_tokens_ratio": 0.05, "max_running_requests": 8, "available_bytes": 160 * 2**20}  # fmt: skip
    old = plan_case(parse_case(case, sglang_version="0.5.19"))
    assert old.cell_size_bytes == pytest.approx(0.05 * (584 * 43 + 0.0625 * 10_240 * 21) + 3_066 + 91.25 + 693)
    assert old.configurator.fixed_bytes(8) == 1_408 * 2 * 512 * 4 * 20 == 115_343_360
    assert (old.sizes.max_total_num_tokens, old.sizes.swa_max_total_num_tokens) == (8_960, 256)
    with pytest.raises(KVCacheConfigError, match="leaves the SWA pool 256 tokens, at or below its floor"):
        plan_case(parse_case(case, sglang_version="0.5.20"))


@pytest.mark.parametrize(("version", "full", "swa"), [("0.5.18", 3, 0), ("0.5.19", 2, 1)])
def test_hybrid_swa_draft_swa_layers_from_0_5_19(version: str, full: int, swa: int) -> None:
    """``HybridSWAPoolConfigurator.__init__`` (0.5.19) puts ``eagle_draft_swa_num_layers`` draft layers in the SWA
    pool. GPT-OSS-120B (18 + 18 layers, 2,048 B each), ratio 0.8, 3 draft layers, 1 of them SWA:
    0.5.19 2,048 x 20 + 0.8 x 2,048 x 19 = 72,089.6; 0.5.18 2,048 x 21 + 0.8 x 2,048 x 18 = 72,499.2."""
    plan = plan_case(_case("release-swa-draft-split-gpt-oss-120b-tp1-bf16-p64-eagle-d3-swa1", version))
    layers = plan.configurator.draft_layers
    assert (layers.full, layers.swa, layers.swa_full) == (full, swa, 0)
    assert plan.cell_size_bytes == pytest.approx(2_048 * (18 + full) + 0.8 * 2_048 * (18 + swa))


def test_hybrid_swa_draft_mtp_local_layers_for_any_model_from_0_5_19() -> None:
    """0.5.19: draft layers named in any model's ``mtp_local_layer_ids`` are SWA-geometry rings of full length (0.5.16
    to 0.5.18: only Inkling's). GPT-OSS-120B with 4 SWA heads (1,024 B an SWA layer), local ids [1], 2 draft layers:
    0.5.19 2,048 x 19 + 1,024 x 1 + 0.8 x 1,024 x 18 = 54,681.6; 0.5.18 2,048 x 20 + 0.8 x 1,024 x 18 = 55,705.6."""
    name = "release-swa-draft-local-gpt-oss-120b-mtp-local-tp1-bf16-p64-eagle-d2"
    old, new = plan_case(_case(name, "0.5.18")), plan_case(_case(name, "0.5.19"))
    assert old.cell_size_bytes == pytest.approx(2_048 * 20 + 0.8 * 1_024 * 18)
    assert new.cell_size_bytes == pytest.approx(2_048 * 19 + 1_024 + 0.8 * 1_024 * 18)


def test_hybrid_swa_draft_mtp_local_layers_of_inkling_from_0_5_16() -> None:
    """0.5.16 (``banded_depths`` for ``InklingForConditionalGeneration``): a 4-layer Inkling shape (local layers
    [0, 1, 2], full layer 3), MTP local ids [0], 2 draft layers: (full, swa_full) = (1, 1); 0.5.15 (2, 0)."""
    inkling = {
        "architectures": ["InklingForConditionalGeneration"], "num_hidden_layers": 4, "hidden_size": 1024,
        "num_attention_heads": 8, "num_key_value_heads": 2, "swa_num_key_value_heads": 4, "head_dim": 128,
        "sliding_window": 512, "local_layer_ids": [0, 1, 2], "mtp_local_layer_ids": [0],
    }  # fmt: skip
    draft = {"hf_config": inkling, "page_size": 16, "speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 2,
             "speculative_num_draft_tokens": 4, "speculative_num_steps": 3, "speculative_eagle_topk": 1}  # fmt: skip
    layers = {v: _configurator(draft, v).draft_layers for v in ("0.5.15", "0.5.16")}
    assert (layers["0.5.15"].full, layers["0.5.15"].swa_full) == (2, 0)
    assert (layers["0.5.16"].full, layers["0.5.16"].swa_full) == (1, 1)


def test_mamba_requests_at_least_one_from_0_5_23() -> None:
    """``_handle_max_mamba_cache`` (0.5.23): without radix cache the state slots are ``max(1, mrr // attn_dp)``;
    1 request over 2 replicas gave 0 slots before, which SGLang refuses ("state cache is too small")."""
    name = "release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-noradix-mrr1"
    assert plan_case(_case(name, "0.5.23")).sizes.max_mamba_cache_size == max(1, 1 // 2) == 1
    with pytest.raises(KVCacheConfigError, match="max_mamba_cache_size=0"):
        plan_case(_case(name, "0.5.22"))


def test_undercounted_pools_are_planned_with_their_overshoot() -> None:
    """Before 0.5.17 SGLang prices GLM-5's packed fp8 DSA row at 576 + 132 = 708 B a layer (78 layers: 55,224 B a
    token) and stores 656 + 132 = 788 (61,464 B): 40 GiB // 55,224 -> 777,728 tokens, whose pools (777,728 + 64 rows)
    take 47,806,207,488 B, 4,856,534,528 B over the budget. SGLang plans them; so does the plan, with a note."""
    old = plan_case(_case("release-undercount-glm-5-tp8-fp8-p64", "0.5.16"))
    assert old.cell_size_bytes == 708 * 78 == 55_224
    assert old.sizes.max_total_num_tokens == (40 * GIB // 55_224) // 64 * 64 == 777_728
    assert 777_792 * 788 * 78 - 40 * GIB == 4_856_534_528
    assert len(old.notes) == 1 and "4,856,534,528 B" in old.notes[0] and "mla-cell-prices-pool-row" in old.notes[0]
    new = plan_case(_case("release-undercount-glm-5-tp8-fp8-p64", "0.5.17"))
    assert new.cell_size_bytes == 788 * 78 and new.notes == ()


def test_jamba_is_served_through_sglangs_generic_path() -> None:
    """SGLang has no native JambaForCausalLM: ``ModelConfig`` sees no Mamba-ish config and its generic path prices
    every layer as attention: 8 KV heads / TP 2 = 4, head 128, 32 layers, bf16: 4 x 256 x 32 x 2 = 65,536 B."""
    for version in ("0.5.15", "0.5.23"):
        plan = plan_case(_case("hybrid-linear-jamba-v0.1-tp2-bf16-p1", version))
        assert plan.configurator.sglang_class_name() == "DefaultPoolConfigurator"
        assert plan.cell_size_bytes == 4 * 256 * 32 * 2 == 65_536


def test_dsv4_c128_state_per_swa_token_up_to_0_5_14() -> None:
    """``DSV4PoolConfigurator._get_bytes_per_full_token`` (0.5.14) prices the ratio-128 compression state per SWA
    token: ``0.1 x (128 / 128) x (2 x 512 x 4) x 20 = 8,192`` B more a full token than 0.5.15's 7,705.45, so
    15,897.45; ``_compute_dsv4_sizes`` sizes its pool ``swa // 128 x 128`` and the pool builder
    (``DeepSeekV4TokenToKVPool.__init__``) takes it as given (0.5.15: at least ``(R + 1) x 128`` rows, from
    ``_get_c128_state_fixed_bytes`` and ``finalize_with_max_running_requests``). V4-Flash TP 4, 1 request."""
    name = "release-dsv4-state-rows-deepseek-v4-flash-tp4-fp8-p256-mrr1"
    old, new = plan_case(_case(name, "0.5.14")), plan_case(_case(name, "0.5.15"))
    assert round(old.cell_size_bytes, 2) == round(7_705.45 + 0.1 * 1 * 4_096 * 20, 2) == 15_897.45
    assert round(new.cell_size_bytes, 2) == 7_705.45
    # 0.5.15's request-scoped state: ceil((1 + 1) x 128 + 128 + 1, 128) = 512 rows of 2 x 512 fp32 per layer
    assert old.configurator.fixed_bytes(1) == 0 and new.configurator.fixed_bytes(1) == 512 * 4_096 * 20
    swa = old.sizes.swa_max_total_num_tokens
    assert swa is not None and old.sizes.c128_state_pool_size == swa // 128 * 128
    assert new.sizes.c128_state_pool_size == (1 + 1) * 128
    rows = {b.shape[0] for layout in old.layout.pools for b in layout.buffers if b.name == "state[3].kv_score"}
    pool = old.pool_sizes.c128_state_pool_size if old.pool_sizes is not None else old.sizes.c128_state_pool_size
    assert rows == {-(-(pool + 128 + 1) // 128) * 128}


def test_hybrid_swa_draft_layers_priced_from_0_5_15() -> None:
    """``HybridSWAPoolConfigurator.__init__`` (0.5.15, ``_draft_full_layers_num``) prices an EAGLE draft's layers at
    full-layer bytes per full token. GPT-OSS-120B (18 full + 18 SWA layers, 2,048 B each), ratio 0.8, 1 draft layer:
    0.5.15 2,048 x 19 + 0.8 x 2,048 x 18 = 68,403.2; 0.5.14 2,048 x 18 + 0.8 x 2,048 x 18 = 66,355.2."""
    name = "swa-gpt-oss-120b-tp1-bf16-p64-eagle3"
    old, new = plan_case(_case(name, "0.5.14")), plan_case(_case(name, "0.5.15"))
    assert old.cell_size_bytes == pytest.approx(2_048 * 18 + 0.8 * 2_048 * 18) == 66_355.2
    assert new.cell_size_bytes == pytest.approx(2_048 * 19 + 0.8 * 2_048 * 18) == 68_403.2


def test_dcp_is_refused_before_0_5_15() -> None:
    """0.5.14's ``ServerArgs`` has no ``dcp_size`` (decode context parallelism arrived in 0.5.15): a case or a
    planned deployment with DCP > 1 is refused naming the flag; DCP 1 is the default and plans."""
    from kvstrategies.planner import DeploymentRequest
    from kvstrategies.planner.gpus import lookup_gpu

    case = {"preset": "llama-3.1-70b", "available_bytes": GIB, "tp_size": 8, "dcp_size": 2}
    with pytest.raises(UnsupportedConfigurationError, match=r"SGLang 0\.5\.14 has no --dcp-size server argument"):
        parse_case(case, sglang_version="0.5.14")
    parse_case(case, sglang_version="0.5.15")
    parse_case({**case, "dcp_size": 1}, sglang_version="0.5.14")
    with pytest.raises(UnsupportedConfigurationError, match=r"--dcp 2: SGLang 0\.5\.14 has no --dcp-size"):
        DeploymentRequest(model="llama-3.1-70b", source={"preset": "llama-3.1-70b"}, tp_size=8, dcp_size=2,
                          gpu=lookup_gpu("H100"), release="0.5.14")  # fmt: skip


def test_model_types_transformers_5_8_1_does_not_know_are_refused_by_0_5_14() -> None:
    """SGLang 0.5.14 pins transformers 5.8.1, whose ``AutoConfig`` has no ``unlimited-ocr``, ``diffusion_gemma`` or
    ``gemma4_unified`` (0.5.15 pins 5.12.1, which has them)."""
    from kvstrategies.models.architectures import require_loadable

    for model_type in ("unlimited-ocr", "diffusion_gemma", "gemma4_unified", "gemma4_unified_assistant"):
        with pytest.raises(UnsupportedConfigurationError, match=r"neither its transformers 5\.8\.1 nor"):
            require_loadable(model_type, parse_release("0.5.14"))
        require_loadable(model_type, parse_release("0.5.15"))


# ---- SGLang 0.5.13 -> 0.5.14 ----------------------------------------------------------------------------------------


def test_eagle_draft_cell_priced_from_0_5_14() -> None:
    """``DefaultPoolConfigurator.__init__`` (0.5.14) adds an EAGLE-family draft's layers to the cell:
    Llama-3.1-8B bf16 (32 layers x 8 KV heads x 128 x 2 x 2 B = 131,072) with one EAGLE3 draft layer gets
    ``int(131072 x 1 / 32) = 4,096`` more, 135,168; 0.5.13 prices the target's own layers only."""
    name = "bridge-spec-eagle3-llama-3.1-8b-tp1-bf16-p16"
    old, new = plan_case(_case(name, "0.5.13")), plan_case(_case(name, "0.5.14"))
    assert old.cell_size_bytes == 32 * 8 * 128 * 2 * 2 == 131_072
    assert new.cell_size_bytes == 131_072 + 131_072 // 32 == 135_168


def test_conv_window_dedup_from_0_5_14() -> None:
    """``MambaPool.__init__`` (0.5.14, ``memory_pool.conv_window_dedup_enabled``) gives a CUDA linear draft chain with
    top-k <= 1 one shared conv buffer of ``K - 1 + D = 3 + 4 - 1 = 6`` columns per slot, viewed per draft token;
    0.5.13 holds a dense ``(D, channels, K - 1)`` window per slot. Qwen3-Next TP 4, 4 draft tokens, 9 slots:
    channels 8,192 / 4 = 2,048."""
    name = "edge-mamba-topk-unset-qwen3-next-80b-a3b-tp4-bf16-p64-mtp"
    old, new = _shapes(plan_case(_case(name, "0.5.13"))), _shapes(plan_case(_case(name, "0.5.14")))
    assert "mamba._intermediate_conv_window_phys[0]" not in old
    assert old["mamba.intermediate_conv_window[0]"] == (36, 9, 4, 2_048, 3)
    assert new["mamba._intermediate_conv_window_phys[0]"] == (36, 9, 2_048, 3 + 4 - 1)


def test_user_requests_capped_at_half_tokens_from_0_5_14() -> None:
    """An explicit ``--max-running-requests 4096`` on a 6,000-token pool: 0.5.14's ``KVCacheConfigurator``
    caps it at ``6000 // 2 = 3,000``; 0.5.13 at the clamped estimate ``max(min(int(6000 / 131072 x 512), 4096),
    2048) = 2,048``."""
    name = "edge-mrr-cap-llama-3.1-8b-tp1-bf16-p1-mrr4096"
    old, new = plan_case(_case(name, "0.5.13")), plan_case(_case(name, "0.5.14"))
    assert old.sizes.max_total_num_tokens == new.sizes.max_total_num_tokens == 6_000
    assert (old.sizes.max_running_requests, new.sizes.max_running_requests) == (2_048, 3_000)


def test_decode_extra_slots_from_the_flag_from_0_5_14() -> None:
    """PD decode, no ``--max-running-requests``, a 60-token pool (60 x 131,072 B + 1,000): ``R = min(2048, 60 // 2)
    = 30``. 0.5.13's ``init_memory_pool`` pre-allocates ``2 R = 60`` rows for ``R <= 32`` -> 30 + 1 + 60 = 91 rows;
    0.5.14 takes ``--disaggregation-decode-extra-slots``, which the launch leaves 0 without a request cap -> 31."""
    case = {"preset": "llama-3.1-8b", "available_bytes": 60 * 131_072 + 1_000, "disaggregation_mode": "decode",
            "page_size": 1}  # fmt: skip
    old = plan_case(parse_case(case, sglang_version="0.5.13"))
    new = plan_case(parse_case(case, sglang_version="0.5.14"))
    assert old.sizes.max_running_requests == new.sizes.max_running_requests == 30
    assert _shapes(old)["req_to_token"][0] == 30 + 1 + 2 * 30 == 91
    assert _shapes(new)["req_to_token"][0] == 30 + 1


def test_swa_request_cap_from_0_5_14() -> None:
    """GPT-OSS-120B, 64 requests, radix cache off, chunk 8192: 0.5.14's ``create_memory_pool_configurator`` picks
    ``SWAChunkCapPoolConfigurator`` (the SWA pool holds the request cap); 0.5.13 has no such class and splits at the
    ratio: 66,355.2 B a full token (2,048 x 18 + 0.8 x 2,048 x 18) -> 53,687,091,200 / 66,355.2 = 809,081 -> 809,024
    (page 64); SWA 0.8 x 809,024 = 647,219 -> 647,168."""
    name = "swa-gpt-oss-120b-tp1-bf16-p64-chunkcap"
    old, new = plan_case(_case(name, "0.5.13")), plan_case(_case(name, "0.5.14"))
    assert type(old.configurator).__name__ == "HybridSWAPoolConfigurator"
    assert type(new.configurator).__name__ == "SWAChunkCapPoolConfigurator"
    assert (old.sizes.max_total_num_tokens, old.sizes.swa_max_total_num_tokens) == (809_024, 647_168)
    swa = new.sizes.swa_max_total_num_tokens
    assert swa is not None and swa < 647_168


def test_dsv4_state_dtype_knob_from_0_5_14() -> None:
    """``SGLANG_DSV4_COMPRESS_STATE_DTYPE=bfloat16``: 0.5.14's ``_get_dsv4_compress_state_dtype_sizes`` reads it
    (11,129.45 B a full token on V4-Flash TP 8); 0.5.13 keeps the states float32, the default's 15,897.45."""
    name = "dsv4-deepseek-v4-flash-tp8-p256-state-bf16"
    old, new = plan_case(_case(name, "0.5.13")), plan_case(_case(name, "0.5.14"))
    assert str(old.configurator.state_dtype) == "torch.float32"
    assert str(new.configurator.state_dtype) == "torch.bfloat16"
    assert round(old.cell_size_bytes, 2) == 15_897.45 and round(new.cell_size_bytes, 2) == 11_129.45


def test_config_without_head_dim_is_refused_before_0_5_14() -> None:
    """Mixtral's config.json has no ``head_dim`` and transformers 5.8.1's ``MixtralConfig`` leaves it None: 0.5.13's
    ``ModelConfig._derive_model_shapes`` derives head_dim but leaves ``v_head_dim`` None and
    ``DefaultPoolConfigurator._compute_cell_size`` raises TypeError; 0.5.14 sets ``v_head_dim = head_dim`` (4,096 /
    32 = 128): 32 layers x 8 KV heads x 128 x 2 x 2 B = 131,072."""
    name = "default-mixtral-8x7b-tp1-bf16-p1"
    with pytest.raises(UnsupportedConfigurationError, match=r"SGLang 0\.5\.13 cannot size a 'mixtral' config"):
        _case(name, "0.5.13")
    assert plan_case(_case(name, "0.5.14")).cell_size_bytes == 32 * 8 * 128 * 2 * 2 == 131_072


# ---- SGLang 0.5.12 -> 0.5.13 (0.5.11 sizes as 0.5.12) ----------------------------------------------------------------


def test_mamba_spec_state_reserved_first_up_to_0_5_12() -> None:
    """Qwen3-Next TP 4 with MTP (4 draft tokens, 64 requests, ratio 3, 19,316,736 B a slot), a 46 GiB budget:
    0.5.12's ``handle_max_mamba_cache`` takes ``per x 64 x 4`` (4,945,084,416 B) off first, then splits the rest
    0.9 : 1 -> ``int((rest - spec) x 0.9 / 1.9 x 2**30 // per) = 1,089`` slots; 0.5.13 solves
    ``K x per x (1 + 4 / 3) = rest x 0.9 / 1.9`` -> 519 slots, then takes ``min(64, 519 // 3) = 64`` draft rows."""
    name, gib, per, budget = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-mtp", 2**30, 19_316_736, 49_392_123_904
    old = plan_case(_case(name, "0.5.12")).configurator.mamba_budget(budget)
    new = plan_case(_case(name, "0.5.13")).configurator.mamba_budget(budget)
    rest = budget / gib
    assert old.stage_mamba_cache_per_req == per
    assert old.max_mamba_cache_size == int((rest - per * 64 * 4 / gib) * 0.9 / 1.9 * gib // per) == 1_089
    assert new.max_mamba_cache_size == int(rest * 0.9 / 1.9 * gib // (per * (1 + 4 / 3))) == 519
    assert round(old.spec_scratch_gib * gib) == round(new.spec_scratch_gib * gib) == per * 64 * 4
    # attention DP 2 (38,633,472 B a slot on its TP-2 attention group), 5 requests: 5 // 2 = 2 draft rows a replica
    dp_case = "release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-mrr5-mtp"
    dp_old = plan_case(_case(dp_case, "0.5.12")).configurator.mamba_budget(40 * gib)
    assert round(dp_old.spec_scratch_gib * gib) == 38_633_472 * (5 // 2) * 4


def test_mamba_free_slots_on_the_device_up_to_0_5_12() -> None:
    """0.5.12's ``MambaPool.__init__`` keeps ``free_slots = torch.arange(1, size + 1)`` int64 on the device; 0.5.13 a
    host list. The what-if pool of 8 requests x 3 slots has 24 slots."""
    name = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-mtp"
    old, new = _shapes(plan_case(_case(name, "0.5.12"))), _shapes(plan_case(_case(name, "0.5.13")))
    assert old["mamba_pool.free_slots"] == (8 * 3,) and "mamba_pool.free_slots" not in new


def test_ping_pong_mapping_is_int32_up_to_0_5_12() -> None:
    """``HybridReqToTokenPool.__init__``: the extra buffer's ping-pong mapping is int32 in 0.5.12, int64 from
    0.5.13 (``(rows, 2)`` with the overlap scheduler)."""
    name = "hybrid-linear-nemotron-h-8b-tp2-bf16-p64-extra-buffer"
    dtypes = {v: {b.name: str(b.dtype) for layout in plan_case(_case(name, v)).layout.pools for b in layout.buffers}
              for v in ("0.5.12", "0.5.13")}  # fmt: skip
    key = "req_index_to_mamba_ping_pong_track_buffer_mapping"
    assert (dtypes["0.5.12"][key], dtypes["0.5.13"][key]) == ("torch.int32", "torch.int64")


def test_request_row_tree_headroom_from_0_5_13() -> None:
    """EAGLE top-k 2 at page 16, 6 draft tokens: 0.5.12's ``init_memory_pool`` gives the request table ``4 + 6 = 10``
    extra columns (131,082); 0.5.13's ``get_req_to_token_extra_context_len`` ``max(10, 2 x alloc_len)`` = 128
    (131,200)."""
    name = "rounding-alloc-pages-llama-3.1-8b-tp1-bf16-p16-eagle-topk2"
    old, new = _shapes(plan_case(_case(name, "0.5.12"))), _shapes(plan_case(_case(name, "0.5.13")))
    assert old["req_to_token"][1] == 131_072 + 4 + 6
    assert new["req_to_token"][1] == 131_072 + 128


def test_dsv4_prices_every_compress_ratio_entry_up_to_0_5_12() -> None:
    """V4-Flash (43 layers, 44 ``compress_ratios`` entries, the MTP layer's a 0): 0.5.12's
    ``DSV4PoolConfigurator.__init__`` counts all 44 (``r x kv x T`` one layer more: 0.1 x 584 = 58.4 B a full
    token), 0.5.13 this stage's 43."""
    name = "dsv4-deepseek-v4-flash-tp8-p256"
    old, new = plan_case(_case(name, "0.5.12")), plan_case(_case(name, "0.5.13"))
    assert old.configurator.priced_layers == (44, 21, 20) and new.configurator.priced_layers == (43, 21, 20)
    assert round(old.cell_size_bytes - new.cell_size_bytes, 6) == round(0.1 * 584, 6)


def test_dsa_pool_is_nsa_up_to_0_5_12() -> None:
    """SGLang 0.5.12 names the DSA pool class ``NSATokenToKVPool`` (0.5.13: ``DSATokenToKVPool``), same layout."""
    name = "dsa-deepseek-v3.2-tp8-fp8-p64"
    old, new = plan_case(_case(name, "0.5.12")), plan_case(_case(name, "0.5.13"))
    assert (old.layout.token_to_kv.pool_class, new.layout.token_to_kv.pool_class) == ("NSATokenToKVPool",
                                                                                      "DSATokenToKVPool")
    assert _shapes(old) == _shapes(new)


def test_qwen3_moe_draft_is_not_renamed_up_to_0_5_12() -> None:
    """A Qwen3-MoE draft worker with 3 EAGLE draft layers: 0.5.13's ``ModelConfig._config_draft_model`` renames it
    ``Qwen3MoeForCausalLMMTP`` (one layer); 0.5.12 does not, so the draft holds its 3 layers."""
    name = "bridge-draft-eagle-qwen3-235b-a22b-tp4-p16-d3-mtp-head"
    old, new = _shapes(plan_case(_case(name, "0.5.12"))), _shapes(plan_case(_case(name, "0.5.13")))
    assert sorted(k for k in old if k.startswith("k_buffer")) == ["k_buffer[0]", "k_buffer[1]", "k_buffer[2]"]
    assert sorted(k for k in new if k.startswith("k_buffer")) == ["k_buffer[0]"]


def test_configs_0_5_11_cannot_load() -> None:
    """0.5.12 registers ``deepseek_v4`` and ``kimi_k2`` as DeepseekV3Config aliases (its hf_transformers config
    registry); 0.5.11 with the same transformers 5.6.0 cannot load them."""
    from kvstrategies.models.architectures import require_loadable

    for model_type in ("deepseek_v4", "kimi_k2"):
        with pytest.raises(UnsupportedConfigurationError, match=r"neither its transformers 5\.6\.0 nor"):
            require_loadable(model_type, parse_release("0.5.11"))
        require_loadable(model_type, parse_release("0.5.12"))


def test_extra_buffer_lazy_is_refused_before_0_5_13() -> None:
    """``--mamba-radix-cache-strategy extra_buffer_lazy`` is not among 0.5.12's argparse choices
    (``MAMBA_SCHEDULER_STRATEGY_CHOICES``): a case or a deployment naming it is refused for 0.5.12."""
    case = {"preset": "qwen3-next-80b-a3b", "available_bytes": 40 * GIB, "tp_size": 4,
            "mamba_radix_cache_strategy": "extra_buffer_lazy"}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="has no choice 'extra_buffer_lazy'"):
        parse_case(case, sglang_version="0.5.12")
    parse_case(case, sglang_version="0.5.13")


def test_decode_extra_slots_flag_is_refused_before_0_5_14() -> None:
    """0.5.14 added ``--disaggregation-decode-extra-slots``; 0.5.13's argparse has no such flag (its decode pool sizes
    the extra rows itself), so a case that gives it is refused for 0.5.13 naming the flag, and plans for 0.5.14."""
    case = {"preset": "llama-3.1-8b", "available_bytes": GIB, "disaggregation_mode": "decode",
            "disaggregation_decode_extra_slots": 8}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match=r"SGLang 0\.5\.13 has no --disaggregation-decode-extra"):
        parse_case(case, sglang_version="0.5.13")
    parse_case(case, sglang_version="0.5.14")
    parse_case({**case, "disaggregation_decode_extra_slots": None}, sglang_version="0.5.13")


# ---- SGLang 0.5.10 -> 0.5.11 (the sizing moved into pool_configurator.py) --------------------------------------------


def _overridden(name: str, version: str, **fields: Any) -> Any:
    data = json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))
    return plan_case(parse_case({**data, **fields}, sglang_version=version, base_dir=CASES))


def test_plans_name_the_model_runner_mixin_up_to_0_5_10() -> None:
    """0.5.11's ``create_memory_pool_configurator`` picks a configurator class; 0.5.10 sizes inline in
    ``ModelRunnerKVCacheMixin._resolve_memory_pool_config``, the class a 0.5.10 plan names (every family)."""
    for name in ("default-llama-3.1-8b-tp1-bf16-p64", "swa-gpt-oss-120b-tp1-bf16-p64",
                 "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64"):  # fmt: skip
        assert plan_case(_case(name, "0.5.10")).configurator.engine_class_name() == "ModelRunnerKVCacheMixin"
    assert plan_case(_case("default-llama-3.1-8b-tp1-bf16-p64", "0.5.11")).configurator.engine_class_name() == (
        "DefaultPoolConfigurator"
    )
    assert plan_case(_case("swa-gpt-oss-120b-tp1-bf16-p64", "0.5.11")).configurator.engine_class_name() == (
        "HybridSWAPoolConfigurator"
    )


def test_request_table_has_no_padding_row_up_to_0_5_10() -> None:
    """``ReqToTokenPool.__init__``: 0.5.10 allocates ``(R, context + 4)`` rows, 0.5.11 one more for the padding
    row 0. Llama-3.1-8B at 2,048 requests: 2,048 rows, then 2,049 (131,072 + 4 columns each)."""
    name = "default-llama-3.1-8b-tp1-bf16-p64"
    old, new = plan_case(_case(name, "0.5.10")), plan_case(_case(name, "0.5.11"))
    assert old.sizes.max_running_requests == new.sizes.max_running_requests == 2048
    assert _shapes(old)["req_to_token"] == (2048, 131_072 + 4)
    assert _shapes(new)["req_to_token"] == (2049, 131_072 + 4)


def test_mamba_mappings_are_sized_by_the_slots_up_to_0_5_10() -> None:
    """``HybridReqToTokenPool._init_mamba_pool``: 0.5.10 sizes ``req_index_to_mamba_index_mapping`` by the Mamba
    slot count it is handed, 0.5.11 by the request rows. Qwen3-Next TP 4 attention DP 2, the what-if pool of
    8 requests and 24 slots: 24 entries in 0.5.10 (8 table rows), 8 + 1 = 9 in 0.5.11."""
    name = "bridge-attn-dp2-qwen3-next-80b-a3b-tp4-bf16-p64"
    old, new = _shapes(plan_case(_case(name, "0.5.10"))), _shapes(plan_case(_case(name, "0.5.11")))
    assert old["req_index_to_mamba_index_mapping"] == (24,) and old["req_to_token"][0] == 8
    assert new["req_index_to_mamba_index_mapping"] == (9,) and new["req_to_token"][0] == 9
    assert old["mamba_pool.free_slots"] == new["mamba_pool.free_slots"] == (24,)


def test_decode_mamba_slots_are_capped_at_the_rows_up_to_0_5_10() -> None:
    """``HybridMambaDecodeReqToTokenPool.__init__``: 16 requests + 32 pre-allocated rows (16 <= 32: twice the
    requests) = 48 rows, 100 slots reserved. 0.5.10: ``min(100, 48) = 48`` slots (49 with the padding slot in
    the state tensors), mappings of 48; 0.5.11: ``max(100, 48 x 1) = 100`` (101), mappings of 48 + 1 rows."""
    name = "bridge-pd-decode-qwen3-next-80b-a3b-tp4-bf16-p64-mrr16"
    old = _shapes(_overridden(name, "0.5.10", pool_max_mamba_cache_size=100))
    new = _shapes(_overridden(name, "0.5.11", pool_max_mamba_cache_size=100))
    assert old["mamba_pool.free_slots"] == (48,) and old["mamba.temporal"][1] == 49
    assert old["req_index_to_mamba_index_mapping"] == (48,) and old["req_to_token"][0] == 48
    assert new["mamba_pool.free_slots"] == (100,) and new["mamba.temporal"][1] == 101
    assert new["req_index_to_mamba_index_mapping"] == (49,) and new["req_to_token"][0] == 49


def test_hybrid_swa_resplits_the_capacity_up_to_0_5_10() -> None:
    """gpt-oss-120b TP 2 bf16 (18 full + 18 SWA layers, 4 KV heads x 128 B: F = S = 1,024 B a layer), ratio 0.8,
    page 64, 40 GiB. 0.5.10 (``get_cell_size_per_token``, ``_resolve_hybrid_swa_tokens``): cell ``F*18 + S*18 =
    36,864``; capacity ``align(40 GiB // 36,864) = 1,165,056``, full ``align(int(1,165,056 x 36,864 / (18,432 + 0.8
    x 1,024 x 18))) = 1,294,464``, SWA ``align(int(full x 0.8)) = 1,035,520``. 0.5.11 (HybridSWAPoolConfigurator):
    cell 33,177.6, full ``align(int(40 GiB // 33,177.6)) = 1,294,528``. ``--max-total-tokens 200,001``: 0.5.10
    re-splits the 200,000 aligned tokens into ``align(int(200,000 x 36,864 / 33,177.6)) = 222,208`` full tokens,
    more than asked; 0.5.11 keeps 200,000."""
    name = "rounding-swa-split-gpt-oss-120b-tp2-bf16-p64-max-tokens"
    old, new = plan_case(_case(name, "0.5.10")), plan_case(_case(name, "0.5.11"))
    assert old.cell_size_bytes == 1024 * 18 + 1024 * 18 == 36_864
    capacity = 40 * GIB // 36_864 // 64 * 64
    full = int(capacity * 36_864 / (18_432 + 0.8 * 1024 * 18)) // 64 * 64
    assert (old.sizes.full_max_total_num_tokens, old.sizes.swa_max_total_num_tokens) == (full, 1_035_520)
    assert full == 1_294_464 and capacity == 1_165_056
    assert new.sizes.full_max_total_num_tokens == 1_294_528
    old_cap = old.configurator.calculate_pool_sizes_from_max_tokens(200_001, 64)
    new_cap = new.configurator.calculate_pool_sizes_from_max_tokens(200_001, 64)
    assert old_cap.full_max_total_num_tokens == int(200_000 * 36_864 / 33_177.6) // 64 * 64 == 222_208
    assert (new_cap.full_max_total_num_tokens, new_cap.swa_max_total_num_tokens) == (200_000, 160_000)


def test_dflash_is_refused_up_to_0_5_10() -> None:
    """0.5.10's ``SpeculativeAlgorithm`` has no DFLASH (``from_string`` raises "Unknown speculative algorithm
    name"); 0.5.11 added it. The refusal names SGLang's function and the flag."""
    name = "dflash-llama-3.1-8b-tp1-bf16-d5-p1"
    with pytest.raises(UnsupportedConfigurationError, match=r"algorithm has no choice .DFLASH.*from_string"):
        _case(name, "0.5.10")
    data = json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))
    with pytest.raises(UnsupportedConfigurationError, match="no choice 'dflash'"):
        parse_case({**data, "speculative_algorithm": "dflash"}, sglang_version="0.5.10", base_dir=CASES)
    assert plan_case(_case(name, "0.5.11")).sizes.max_total_num_tokens > 0


def test_gemma4_configs_load_from_0_5_11() -> None:
    """transformers 5.3.0 (0.5.10's pin) has no ``gemma4`` config class; 5.6.0 (0.5.11's) has it."""
    name = "swa-gemma4-synthetic-tp2-bf16-p16"
    with pytest.raises(UnsupportedConfigurationError, match=r"model_type 'gemma4'.*transformers 5\.3\.0"):
        _case(name, "0.5.10")
    assert plan_case(_case(name, "0.5.11")).sizes.max_total_num_tokens > 0


# ---- SGLang 0.5.9 -> 0.5.10 (init_memory_pool sizes and builds in one method) ----------------------------------------


def test_swa_pool_from_the_unaligned_full_count_up_to_0_5_9() -> None:
    """gpt-oss-20b bf16, page 16, 1 GiB + 1 B (12 full + 12 SWA layers, 2,048 B a layer each): capacity
    ``align(1,073,741,825 // 49,152) = 21,840``, full count ``int(21,840 x 49,152 / (24,576 + 0.8 x 2,048 x 12)) =
    24,266``. 0.5.9's ``set_num_tokens_hybrid_swa`` takes the SWA pool from that count, ``align(int(24,266 x 0.8)) =
    19,408``; 0.5.10's ``_resolve_hybrid_swa_tokens`` from the aligned full pool, ``align(int(24,256 x 0.8)) =
    19,392``. Both keep ``align(24,266) = 24,256`` full tokens."""
    name = "bridge-small-budget-gpt-oss-20b-tp1-bf16-p16"
    old, new = plan_case(_case(name, "0.5.9")), plan_case(_case(name, "0.5.10"))
    capacity = 1_073_741_825 // 49_152 // 16 * 16
    count = int(capacity * 49_152 / (24_576 + 0.8 * 2048 * 12))
    assert (capacity, count) == (21_840, 24_266)
    assert old.sizes.full_max_total_num_tokens == new.sizes.full_max_total_num_tokens == count // 16 * 16
    assert old.sizes.swa_max_total_num_tokens == int(count * 0.8) // 16 * 16 == 19_408
    assert new.sizes.swa_max_total_num_tokens == int(24_256 * 0.8) // 16 * 16 == 19_392


def test_requests_from_the_profiled_count_up_to_0_5_9() -> None:
    """0.5.9's ``init_memory_pool`` sizes the request pool from the profiled count, before the hybrid split:
    gpt-oss-120b TP 1, 50 GiB, cell 73,728 (0.5.9: ``F*18 + S*18``, 2,048 B each): ``50 GiB // 73,728 = 728,177``
    -> ``int(728,177 / 131,072 x 512) = 2,844`` (within [2048, 4096]); 0.5.10 from the split full pool
    (809,024 tokens): ``int(809,024 / 131,072 x 512) = 3,160``. An explicit 4,096 with 6,000 tokens (Llama-3.1-8B):
    0.5.9 takes it as it is, 0.5.10 caps it at the clamped estimate 2,048."""
    name = "swa-gpt-oss-120b-tp1-bf16-p64"
    old, new = plan_case(_case(name, "0.5.9")), plan_case(_case(name, "0.5.10"))
    profiled = 50 * GIB // 73_728
    assert old.cell_size_bytes == new.cell_size_bytes == 73_728
    assert old.sizes.max_running_requests == int(profiled / 131_072 * 512) == 2_844
    assert new.sizes.max_running_requests == int(809_024 / 131_072 * 512) == 3_160
    capped = "edge-mrr-cap-llama-3.1-8b-tp1-bf16-p1-mrr4096"
    assert plan_case(_case(capped, "0.5.9")).sizes.max_running_requests == 4096
    assert plan_case(_case(capped, "0.5.10")).sizes.max_running_requests == 2048


def test_mamba_pool_holds_every_mamba_layer_up_to_0_5_9() -> None:
    """Qwen3-Next (36 linear-attention layers of 48) PP 2, rank 1: 0.5.9's ``HybridReqToTokenPool`` gets no
    ``mamba_layer_ids`` and holds all 36; 0.5.10 this stage's 18."""
    name = "bridge-pp2-rank1-qwen3-next-80b-a3b-tp2-bf16-p64"
    old, new = _shapes(plan_case(_case(name, "0.5.9"))), _shapes(plan_case(_case(name, "0.5.10")))
    assert old["mamba.conv[0]"][0] == 36 and new["mamba.conv[0]"][0] == 18
    assert old["mamba.temporal"][0] == 36 and new["mamba.temporal"][0] == 18


def test_speculative_attention_dp_caps_the_request_pool_up_to_0_5_9() -> None:
    """Qwen3-Next TP 4, attention DP 2, MTP: 0.5.9's ``init_memory_pool`` also caps the request pool at
    ``--max-running-requests // dp``. The what-if pool of 8 requests: ``min(8, 24 // 3, 8 // 2) = 4`` in 0.5.9, 8 in
    0.5.10 (which sizes a given count as it is)."""
    name = "release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-mrr5-mtp"
    assert plan_case(_case(name, "0.5.9")).pool_sizes.max_running_requests == 4
    assert plan_case(_case(name, "0.5.10")).pool_sizes.max_running_requests == 8


def test_hybrid_swa_draft_resplits_the_target_count_up_to_0_5_9() -> None:
    """gpt-oss-20b EAGLE draft (one full, one SWA layer, fp8 TP 4: 4 x 128 x 1 B = 512 B a layer each), the target's
    what-if full pool 4,544 tokens: 0.5.9's draft takes it as ``draft_runner_cache_size`` and re-splits it with its
    own layers, ``int(4,544 x 1,024 / (512 + 0.8 x 512)) = 5,048`` -> 4,992 full (page 64) and ``int(5,048 x 0.8) =
    4,038`` -> 4,032 SWA; 0.5.10 adopts the target's 4,544 / 3,584."""
    name = "bridge-swa-draft-eagle-gpt-oss-20b-tp4-fp8-p64-d2"
    old, new = plan_case(_case(name, "0.5.9")), plan_case(_case(name, "0.5.10"))
    count = int(4544 * 1024 / (512 + 0.8 * 512))
    assert count == 5048
    assert (old.pool_sizes.full_max_total_num_tokens, old.pool_sizes.swa_max_total_num_tokens) == (
        count // 64 * 64, int(count * 0.8) // 64 * 64)
    assert (new.pool_sizes.full_max_total_num_tokens, new.pool_sizes.swa_max_total_num_tokens) == (4544, 3584)


def test_kda_conv_state_is_three_tensors_up_to_0_5_9() -> None:
    """Kimi-Linear TP 4 (32 heads x 128 for q, k and v): 0.5.9's ``KimiLinearStateShape.create`` keeps three conv
    states of ``(K - 1, 4,096 / 4)`` = (3, 1,024) a layer; 0.5.10 one of (3, 3 x 1,024). The bytes are the same."""
    name = "hybrid-linear-kimi-linear-48b-a3b-tp4-fp8-p64"
    old, new = _shapes(plan_case(_case(name, "0.5.9"))), _shapes(plan_case(_case(name, "0.5.10")))
    assert [old[f"mamba.conv[{i}]"][2:] for i in range(3)] == [(3, 1024)] * 3
    assert new["mamba.conv[0]"][2:] == (3, 3072) and "mamba.conv[1]" not in new


def test_decode_mamba_pool_adds_the_pre_allocated_rows_up_to_0_5_9() -> None:
    """PD decode, 16 requests, 48 slots reserved: 0.5.9's ``HybridMambaDecodeReqToTokenPool`` holds ``48 + 32``
    pre-allocated rows = 80 slots (81 with the padding slot), its mapping sized by them; 0.5.10 ``min(48, 48) = 48``."""
    name = "bridge-pd-decode-qwen3-next-80b-a3b-tp4-bf16-p64-mrr16"
    old, new = _shapes(plan_case(_case(name, "0.5.9"))), _shapes(plan_case(_case(name, "0.5.10")))
    assert old["mamba.temporal"][1] == 48 + 32 + 1 and old["req_index_to_mamba_index_mapping"] == (80,)
    assert new["mamba.temporal"][1] == 48 + 1 and new["req_index_to_mamba_index_mapping"] == (48,)


def test_extra_buffer_tracking_follows_speculation_up_to_0_5_9() -> None:
    """Nemotron-H 8B with the Mamba extra buffer and the overlap scheduler off: 0.5.10 keeps 1 ping-pong slot a
    request (overlap off), ratio ``3 + 1 = 4``; 0.5.9 keys the slots on speculation (none: 2), ratio ``3 + 2 = 5``,
    so its what-if pool of 8 requests and 24 slots serves ``24 // 5 = 4``."""
    name = "hybrid-linear-nemotron-h-8b-tp2-bf16-p64-extra-buffer"
    old = _overridden(name, "0.5.9", disable_overlap_schedule=True)
    new = _overridden(name, "0.5.10", disable_overlap_schedule=True)
    assert (old.configurator.tracking_slots, old.configurator.mamba_ratio) == (2, 5)
    assert (new.configurator.tracking_slots, new.configurator.mamba_ratio) == (1, 4)
    assert _shapes(old)["req_index_to_mamba_ping_pong_track_buffer_mapping"][1] == 2
    assert old.pool_sizes.max_running_requests == 24 // 5
    # with speculation (Qwen3-Next MTP, overlap on) it goes the other way: 0.5.9 keeps 1 slot (ratio 4), 0.5.10 2 (5)
    mtp = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-mtp"
    old_s = _overridden(mtp, "0.5.9", mamba_radix_cache_strategy="extra_buffer")
    new_s = _overridden(mtp, "0.5.10", mamba_radix_cache_strategy="extra_buffer")
    assert (old_s.configurator.tracking_slots, old_s.configurator.mamba_ratio) == (1, 4)
    assert (new_s.configurator.tracking_slots, new_s.configurator.mamba_ratio) == (2, 5)
    assert _shapes(old_s)["req_index_to_mamba_ping_pong_track_buffer_mapping"] == (24, 1)


def test_dsa_pool_asserts_page_64_up_to_0_5_9() -> None:
    """0.5.9's ``NSATokenToKVPool.__init__`` asserts ``page_size == 64`` (built while sizing): page 128 is refused in
    the sizing; 0.5.10 sizes it (its layout then needs the index page SGLang's launch forces)."""
    from kvstrategies.api import size_plan

    case = _case("edge-dsa-kpool-compress-deepseek-v3.2-tp8-fp8-p128", "0.5.9")
    with pytest.raises(UnsupportedConfigurationError, match=r"NSATokenToKVPool asserts page_size == 64"):
        size_plan(case.settings, case.available_bytes)
    newer = _case("edge-dsa-kpool-compress-deepseek-v3.2-tp8-fp8-p128", "0.5.10")
    assert size_plan(newer.settings, newer.available_bytes).sizes.max_total_num_tokens > 0


def test_nemotron_h_mtp_draft_is_mamba_ish_up_to_0_5_9() -> None:
    """Nemotron-H's MTP draft has no Mamba layers: 0.5.10's ``ModelRunner.mamba2_config`` returns None for it (plain
    ``MHATokenToKVPool``); 0.5.9 still builds a ``HybridLinearKVPool`` over the same buffers."""
    name = "bridge-draft-eagle-nemotron-h-56b-tp2-pp3-fp8-p256-mtp-attention"
    old, new = plan_case(_case(name, "0.5.9")), plan_case(_case(name, "0.5.10"))
    assert old.layout.pools[-1].pool_class == "HybridLinearKVPool"
    assert new.layout.pools[-1].pool_class == "MHATokenToKVPool"


def test_transformers_4_configs_up_to_0_5_9() -> None:
    """transformers 4.57.1 (0.5.9's pin): Gemma 3 keeps its top-level rope factor 8, so the context is 131,072 x 8
    (request rows of 1,048,576 + 4); Mistral's config class leaves head_dim None (refused as SGLang's TypeError);
    MiniMax-M2 configs do not load."""
    gemma = "default-gemma-3-27b-tp1-bf16-p1"
    assert _shapes(plan_case(_case(gemma, "0.5.9")))["req_to_token"][1] == 131_072 * 8 + 4
    assert _shapes(plan_case(_case(gemma, "0.5.10")))["req_to_token"][1] == 131_072 + 4
    with pytest.raises(UnsupportedConfigurationError, match=r"'mistral' config.json without head_dim.*4\.57\.1"):
        _case("default-mistral-7b-tp1-bf16-p1", "0.5.9")
    with pytest.raises(UnsupportedConfigurationError, match=r"model_type 'minimax_m2'"):
        _case("default-minimax-m2.5-tp1-bf16-p1", "0.5.9")
    assert plan_case(_case("default-mistral-7b-tp1-bf16-p1", "0.5.10")).sizes.max_total_num_tokens > 0


# ---- SGLang 0.5.8 -> 0.5.9 -------------------------------------------------------------------------------------------


def test_hybrid_swa_prices_every_layer_as_full_up_to_0_5_8() -> None:
    """gpt-oss-20b PP 2, rank 1 (layers [12, 24); the trimmed lists hold 6 full + 6 SWA layers), 40 GiB, page 64:
    0.5.8's ``get_cell_size_per_token`` prices the stage's 12 layers as full attention, 12 x 2,048 = 24,576 B, and
    ``set_num_tokens_hybrid_swa`` re-splits the aligned capacity by the model's 24 layers,
    ``int(1,747,584 x 24 / (0.8 x 6 + 6))`` -> 3,883,456 full tokens; 0.5.9 prices full and SWA layers by their
    bytes (the same 24,576 here) and re-splits by bytes: 1,941,696. An all-SWA draft (gpt-oss-120b EAGLE3, one SWA
    layer) goes the same way in 0.5.8: ``int(1,024 x 1 / 0.8) = 1,280`` full, 1,024 SWA."""
    name = "swa-gpt-oss-20b-pp2-bf16-p64"
    old, new = plan_case(_case(name, "0.5.8")), plan_case(_case(name, "0.5.9"))
    assert old.cell_size_bytes == 12 * 2048 == new.cell_size_bytes
    capacity = 40 * GIB // 24_576 // 64 * 64
    assert old.sizes.full_max_total_num_tokens == int(capacity * 24 / (0.8 * 6 + 6)) // 64 * 64 == 3_883_456
    assert new.sizes.full_max_total_num_tokens == 1_941_696
    draft = plan_case(_case("bridge-swa-draft-eagle3-gpt-oss-120b-tp2-bf16-p16-d1", "0.5.8")).pool_sizes
    assert (draft.full_max_total_num_tokens, draft.swa_max_total_num_tokens) == (int(1024 / 0.8), 1024)


def test_draft_caps_the_profiled_count_it_is_handed_up_to_0_5_8() -> None:
    """0.5.8's target hands its draft the profiled count (``draft_runner_cache_size`` before the cap), and the draft
    applies the what-if cap 4,096 itself before re-splitting with its own two layers: ``int(4,096 x 2 / 1.8) =
    4,551`` -> 4,544 full, ``int(4,551 x 0.8) = 3,640`` -> 3,584 SWA; 0.5.9 hands the target's full pool 4,544:
    ``int(4,544 x 1,024 / 921.6) = 5,048`` -> 4,992."""
    name = "bridge-swa-draft-eagle-gpt-oss-20b-tp4-fp8-p64-d2"
    old = plan_case(_case(name, "0.5.8")).pool_sizes
    assert (old.full_max_total_num_tokens, old.swa_max_total_num_tokens) == (
        int(4096 * 2 / 1.8) // 64 * 64, int(int(4096 * 2 / 1.8) * 0.8) // 64 * 64)
    assert plan_case(_case(name, "0.5.9")).pool_sizes.full_max_total_num_tokens == 4992


def test_mamba_ssm_dtype_is_the_server_argument_up_to_0_5_8() -> None:
    """0.5.8's ``ServerArgs._handle_environment_variables`` writes ``--mamba-ssm-dtype`` (default float32) over
    ``SGLANG_MAMBA_SSM_DTYPE``: a bfloat16 variable is not read (0.5.9 reads it)."""
    name = "hybrid-linear-nemotron-h-8b-tp1-bf16-p1"
    env = {"SGLANG_MAMBA_SSM_DTYPE": "bfloat16"}
    assert _overridden(name, "0.5.8", env=env).configurator.ssm_dtype.torch_name == "float32"
    assert _overridden(name, "0.5.9", env=env).configurator.ssm_dtype.torch_name == "bfloat16"


def test_hybrid_linear_kv_pool_holds_every_attention_layer_up_to_0_5_8() -> None:
    """Qwen3-Next (12 full-attention layers) PP 2, rank 1: 0.5.8's ``HybridLinearKVPool`` holds all 12, 0.5.9 this
    stage's 6."""
    name = "bridge-pp2-rank1-qwen3-next-80b-a3b-tp2-bf16-p64"
    count = {v: sum(1 for k in _shapes(plan_case(_case(name, v))) if k.startswith("full.k_buffer")) for v in
             ("0.5.8", "0.5.9")}  # fmt: skip
    assert count == {"0.5.8": 12, "0.5.9": 6}


def test_decode_mamba_pool_is_the_request_rows_up_to_0_5_8() -> None:
    """PD decode, 16 requests + 32 pre-allocated rows: 0.5.8's ``HybridMambaDecodeReqToTokenPool`` sizes its Mamba pool
    by the 48 rows (the 48 reserved slots are not read; 49 with the padding slot); 0.5.9 ``48 + 32 = 80``."""
    name = "bridge-pd-decode-qwen3-next-80b-a3b-tp4-bf16-p64-mrr16"
    assert _shapes(plan_case(_case(name, "0.5.8")))["mamba.temporal"][1] == 16 + 32 + 1
    assert _shapes(plan_case(_case(name, "0.5.9")))["mamba.temporal"][1] == 48 + 32 + 1


def test_configs_and_choices_0_5_8_lacks() -> None:
    """0.5.8 registers no Qwen3.5 config class (0.5.9 does) and its NSA backend choices have no trtllm."""
    with pytest.raises(UnsupportedConfigurationError, match=r"model_type 'qwen3_5_moe'"):
        _case("hybrid-linear-qwen3.5-35b-a3b-tp1-bf16-p1", "0.5.8")
    with pytest.raises(UnsupportedConfigurationError, match=r"no choice 'trtllm'"):
        _case("dsa-deepseek-v3.2-tp8-fp8-trtllm-p64", "0.5.8")
    assert plan_case(_case("dsa-deepseek-v3.2-tp8-fp8-trtllm-p64", "0.5.9")).sizes.max_total_num_tokens > 0


# ---- SGLang 0.5.7 -> 0.5.8 -------------------------------------------------------------------------------------------


def test_gpt_oss_is_not_hybrid_swa_up_to_0_5_7() -> None:
    """0.5.7's ``is_hybrid_model`` names MiMo-V2 alone (Llama-4 only under ``--hybrid-kvcache-ratio``), so GPT-OSS-120B
    gets one MHA pool over its 36 layers: ``36 x 8 heads x (64 + 64) x 2 B = 73,728`` B a token, and 50 GiB hold
    ``53,687,091,200 // 73,728 = 728,177`` tokens, 728,128 at page 64. 0.5.8's ``is_hybrid_swa_model`` lists it."""
    name = "swa-gpt-oss-120b-tp1-bf16-p64"
    old, new = plan_case(_case(name, "0.5.7")), plan_case(_case(name, "0.5.8"))
    assert old.configurator.family == "default" and new.configurator.family == "hybrid-swa"
    assert old.configurator.cell_size_bytes == 36 * 8 * (64 + 64) * 2 == 73_728
    assert old.sizes.max_total_num_tokens == 53_687_091_200 // 73_728 // 64 * 64 == 728_128
    assert old.sizes.full_max_total_num_tokens is None
    scout = "swa-llama-4-scout-tp4-bf16-p16"
    assert plan_case(_case(scout, "0.5.7")).sizes.swa_max_total_num_tokens is None
    assert plan_case(_case(scout, "0.5.8")).sizes.swa_max_total_num_tokens is not None


def test_mamba_requests_count_two_extra_slots_up_to_0_5_7() -> None:
    """0.5.7's ``init_memory_pool`` adds ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2`` to every radix-cache request
    (``NO_OVERLAP = 1`` only with the extra buffer under speculation): Qwen3-Next's 2,300 slots serve ``2,300 // 5 =
    460`` requests, 0.5.8's ``2,300 // 3 = 766``; the what-if pool's 24 slots ``24 // 5 = 4`` (0.5.8: 8)."""
    name = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64"
    old, new = plan_case(_case(name, "0.5.7")), plan_case(_case(name, "0.5.8"))
    assert (old.configurator.mamba_ratio, new.configurator.mamba_ratio) == (3 + 2, 3)
    assert old.sizes.max_mamba_cache_size == new.sizes.max_mamba_cache_size == 2_300
    assert (old.sizes.max_running_requests, new.sizes.max_running_requests) == (2_300 // 5, 2_300 // 3)
    assert (old.pool_sizes.max_running_requests, new.pool_sizes.max_running_requests) == (24 // 5, 24 // 3)
    mtp = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-mtp"
    assert _overridden(mtp, "0.5.7", mamba_radix_cache_strategy="extra_buffer").configurator.mamba_ratio == 3 + 1
    assert plan_case(_case(mtp, "0.5.7")).configurator.mamba_ratio == 3 + 2
    skip = "bridge-skip-lock-qwen3-next-80b-a3b-tp4-bf16-p64"  # 0.5.7 has no SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK
    assert plan_case(_case(skip, "0.5.7")).configurator.mamba_ratio == 3 + 2


def test_mamba_speculative_state_reserved_on_the_ratio_branch_only_up_to_0_5_7() -> None:
    """0.5.7's ``handle_max_mamba_cache`` reserves the per-draft-token state only where the slots follow from the
    memory ratio, for ``max_running_requests`` rows; 0.5.8 on every branch, for ``mrr // dp`` rows.
    Given 300 slots (48 requests, 4 draft tokens, 19,316,736 B a slot): 0.5.7 nothing, 0.5.8 ``per x 48 x 4``.
    Attention DP 2 (38,633,472 B a slot, 5 requests): 0.5.7 ``per x 5 x 4`` = 772,669,440 B, 0.5.8 ``per x 2 x 4``."""
    given = "bridge-spec-mtp-qwen3-next-80b-a3b-tp4-fp8-p64-mamba300"
    old, new = (plan_case(_case(given, v)).configurator.mamba_budget(40 * GIB) for v in ("0.5.7", "0.5.8"))
    assert (old.branch, old.spec_scratch_gib) == ("A", 0.0)
    assert round(new.spec_scratch_gib * GIB) == 19_316_736 * 48 * 4
    dp = "release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-mrr5-mtp"
    old, new = (plan_case(_case(dp, v)).configurator.mamba_budget(40 * GIB) for v in ("0.5.7", "0.5.8"))
    assert round(old.spec_scratch_gib * GIB) == 38_633_472 * 5 * 4 == 772_669_440
    assert round(new.spec_scratch_gib * GIB) == 38_633_472 * (5 // 2) * 4
    assert old.max_mamba_cache_size == int((40 * GIB - 772_669_440) * 0.9 / 1.9 // 38_633_472) == 517


def test_speculative_attention_dp_request_cap_from_0_5_8() -> None:
    """The ``max_running_requests // dp`` cap of a Mamba hybrid under speculation and attention DP came in 0.5.8:
    0.5.7's what-if pool of 8 requests is ``min(8, 24 // 5) = 4`` (its ratio), 0.5.8's ``min(8, 24 // 3, 8 // 2) = 4``,
    and with 5 requests given (``5 // 2 = 2``) the sizes differ: 0.5.7 keeps the Mamba cap."""
    name = "release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-mrr5-mtp"
    old, new = plan_case(_case(name, "0.5.7")), plan_case(_case(name, "0.5.8"))
    assert new.sizes.max_running_requests == 5 // 2
    assert old.sizes.max_running_requests == min(5, old.sizes.max_mamba_cache_size // 5) == 5


def test_mamba_profile_prices_every_attention_layer_up_to_0_5_7() -> None:
    """0.5.7's ``profile_max_num_token`` counts ``len(mambaish.full_attention_layer_ids)``, every full-attention layer
    of the model; 0.5.8 those of the stage. Qwen3-Next (12 full-attention layers, 1,024 B each at TP 2) PP 2, rank 1:
    0.5.7 ``12 x 1,024 = 12,288`` B a token, 0.5.8 ``6 x 1,024 = 6,144``. A stage without attention layers
    (Nemotron-H-8B PP 2, rank 0) still has a cell in 0.5.7, so it plans where 0.5.8 divides by zero."""
    name = "bridge-pp2-rank1-qwen3-next-80b-a3b-tp2-bf16-p64"
    old, new = plan_case(_case(name, "0.5.7")), plan_case(_case(name, "0.5.8"))
    assert (old.configurator.cell_size_bytes, new.configurator.cell_size_bytes) == (12 * 1_024, 6 * 1_024)
    zero = "release-zero-kv-nemotron-h-8b-tp1-pp2-rank0-bf16-p1"
    assert plan_case(_case(zero, "0.5.7")).sizes.max_total_num_tokens > 0
    with pytest.raises(UnsupportedConfigurationError, match="cannot size a rank without attention layers"):
        plan_case(_case(zero, "0.5.8"))


# ---- SGLang 0.5.6 -> 0.5.7 -------------------------------------------------------------------------------------------


def test_cell_prices_two_head_dims_up_to_0_5_6() -> None:
    """0.5.6's ``profile_max_num_token`` prices ``heads x head_dim x 2`` and never reads ``v_head_dim``, so a Mistral
    config without ``head_dim`` (its transformers 4.57.1 class leaves ``v_head_dim`` None for 0.5.7 to 0.5.13) is
    sized: 32 layers x 8 heads x 128 x 2 x 2 B = 131,072 B a token; 0.5.7 raises TypeError (refused)."""
    name = "default-mistral-7b-tp1-bf16-p1"
    assert plan_case(_case(name, "0.5.6")).configurator.cell_size_bytes == 32 * 8 * 128 * 2 * 2 == 131_072
    with pytest.raises(UnsupportedConfigurationError, match="without head_dim"):
        _case(name, "0.5.7")


def test_mamba_requests_count_three_slots_up_to_0_5_6() -> None:
    """0.5.6's ``init_memory_pool`` caps the requests at ``max_mamba_cache_size // 3`` (no extra slots): Qwen3-Next's
    2,300 slots serve 766 (0.5.7: ``2,300 // 5 = 460``)."""
    name = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64"
    old, new = plan_case(_case(name, "0.5.6")), plan_case(_case(name, "0.5.7"))
    assert (old.configurator.mamba_ratio, new.configurator.mamba_ratio) == (3, 5)
    assert (old.sizes.max_running_requests, new.sizes.max_running_requests) == (2_300 // 3, 2_300 // 5)


def test_mamba_slots_carry_their_draft_states_up_to_0_5_6() -> None:
    """0.5.6's ``handle_max_mamba_cache``: each slot carries ``1 + D`` states. Qwen3-Next TP 4 MTP (D = 4, 19,316,736 B
    a slot), 46 GiB: ``int(46 x 0.9 / 1.9 x 2**30 // per // 5) = 242`` slots, ``242 x per x 5`` B reserved (0.5.7: 1,089
    slots and ``per x 64 x 4`` for the draft rows). A given ``--max-mamba-cache-size 300`` with the radix cache on is
    overwritten (0.5.7 keeps it); attention DP 2 divides a GDN model's slots: ``int(...// 38,633,472 // 5) // 2 = 60``.
    The per-draft-token state has a row per slot: ``K + 1`` (0.5.7: ``R + 1``)."""
    rest, per = 46 * GIB, 19_316_736
    mtp = "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-mtp"
    old = plan_case(_case(mtp, "0.5.6")).configurator.mamba_budget(rest)
    assert old.max_mamba_cache_size == int(46 * 0.9 / 1.9 * GIB // per // 5) == 242
    assert round((old.rest_gib_before - old.rest_gib_after) * GIB) == 242 * per * 5
    assert round(old.spec_scratch_gib * GIB) == 242 * per * 4
    given = plan_case(_case("bridge-spec-mtp-qwen3-next-80b-a3b-tp4-fp8-p64-mamba300", "0.5.6")).configurator
    assert given.mamba_budget(rest).max_mamba_cache_size == 242
    dp = plan_case(_case("release-mamba-dp-qwen3-next-80b-a3b-tp4-dp2-bf16-p64-mrr5-mtp", "0.5.6")).configurator
    assert dp.mamba_budget(rest).max_mamba_cache_size == int(46 * 0.9 / 1.9 * GIB // 38_633_472 // 5) // 2 == 60
    plain = plan_case(_case("hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64", "0.5.6")).configurator
    assert plain.mamba_budget(rest).max_mamba_cache_size == int(46 * 0.9 / 1.9 * GIB // per) == 1_211  # D = 0
    noradix = _overridden("hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-noradix-mrr256", "0.5.6",
                          max_running_requests=None)  # fmt: skip
    assert noradix.configurator.mamba_budget(rest).max_mamba_cache_size == 512  # no size, no request count
    # 0.05 GiB: int(0.05 x 0.9 / 1.9 GiB // per) = 1 slot without speculation, 1 // 5 = 0 with D = 4: refused
    mtp_cfg = plan_case(_case(mtp, "0.5.6")).configurator
    with pytest.raises(InsufficientMemoryError, match="not enough memory for the hybrid"):
        mtp_cfg.mamba_budget(GIB // 20)
    # without the radix cache the slots are the requests: 80 x per = 1.44 GiB of 2 GiB leaves 0.56 GiB (fits);
    # 104 x per = 1.87 GiB fits too, 112 x per = 2.01 GiB does not
    for requests, fits in ((80, True), (104, True), (112, False)):
        cfg = _overridden("hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64-noradix-mrr256", "0.5.6",
                          max_running_requests=requests).configurator  # fmt: skip
        if fits:
            assert cfg.mamba_budget(2 * GIB).rest_gib_after == 2 - requests * per / GIB
        else:
            with pytest.raises(InsufficientMemoryError, match="leaves no memory for the KV cache"):
                cfg.mamba_budget(2 * GIB)
    pools_old, pools_new = _shapes(plan_case(_case(mtp, "0.5.6"))), _shapes(plan_case(_case(mtp, "0.5.7")))
    # the what-if pool: 24 slots; 0.5.7 serves min(8, 24 // 5) = 4 requests
    assert pools_old["mamba.intermediate_ssm"][1] == 24 + 1 and pools_new["mamba.intermediate_ssm"][1] == 4 + 1


def test_eagle_target_pool_adds_the_drafts_share_up_to_0_5_6() -> None:
    """0.5.6's ``init_memory_pool`` (``draft_runner_cache_size``): an EAGLE3 target's pool is the profiled count plus
    ``R x steps x topk + R x draft + 100``. Llama-3.1-8B, 40 GiB, 131,072 B a token: P = 327,680, R = 2,048
    (``clamp(int(P / 131,072 x 512), 2048, 4096)``), steps 3, top-k 1, 4 draft tokens: ``327,680 + 6,144 + 8,192 +
    100 = 342,116``, 342,080 at page 64; 0.5.7 keeps 327,680. The pools exceed the budget: the plan says so."""
    name = "rounding-row-headroom-llama-3.1-8b-tp1-bf16-p64-eagle3-s3"
    old, new = plan_case(_case(name, "0.5.6")), plan_case(_case(name, "0.5.7"))
    assert old.sizes.max_total_num_tokens == (327_680 + 2_048 * 3 * 1 + 2_048 * 4 + 100) // 64 * 64 == 342_080
    assert new.sizes.max_total_num_tokens == 327_680
    # a cap past the pool: min(P + headroom, cap) = P + headroom (SGLang caps after adding it)
    roomy = _overridden(name, "0.5.6", max_tokens=1_000_000).sizes_from_max_tokens
    assert roomy is not None and roomy.max_total_num_tokens == 342_080
    whole = _overridden(name, "0.5.6", pool_max_tokens=None)  # the pools at the plan's own sizes
    assert any("spec-target-pool-headroom" in note and "more than the KV budget" in note for note in whole.notes)


def test_mamba_strategy_argument_from_0_5_7() -> None:
    """0.5.6 has no ``--mamba-scheduler-strategy`` (its Mamba radix cache has no extra buffer): refused."""
    with pytest.raises(UnsupportedConfigurationError, match="no --mamba-radix-cache-strategy server argument"):
        _case("hybrid-linear-nemotron-h-8b-tp2-bf16-p64-extra-buffer", "0.5.6")


# ---- SGLang 0.5.5 -> 0.5.6 -------------------------------------------------------------------------------------------


def test_last_pipeline_stage_takes_the_rest_up_to_0_5_5() -> None:
    """0.5.5's ``get_pp_indices`` gives every stage ``80 // 3 = 26`` layers and the last one the rest (26, 26, 28);
    0.5.6 gives the last ``80 % 3 = 2`` stages one more each (26, 27, 27). Llama-3.1-70B TP 1 bf16 (4,096 B a layer)
    PP 3, rank 2: 0.5.5 ``28 x 4,096 = 114,688`` B a token, 0.5.6 ``27 x 4,096 = 110,592``."""
    name = "default-llama-3.1-70b-pp3-rank2-tp1-bf16-p1"
    old, new = plan_case(_case(name, "0.5.5")), plan_case(_case(name, "0.5.6"))
    assert (old.configurator.cell_size_bytes, new.configurator.cell_size_bytes) == (28 * 4_096, 27 * 4_096)
    assert old.configurator.layer_range == (52, 80) and new.configurator.layer_range == (53, 80)


def test_mamba_conv_state_is_one_tensor_up_to_0_5_5() -> None:
    """0.5.5's ``MambaPool`` keeps one conv tensor (``conv_state``), a list only for KDA; 0.5.6 a list for every
    family: Nemotron-H's ``mamba.conv`` becomes ``mamba.conv[0]`` (same shape); Kimi-Linear has ``conv[0..2]`` in
    both."""
    name = "hybrid-linear-nemotron-h-8b-tp1-bf16-p1"
    old, new = _shapes(plan_case(_case(name, "0.5.5"))), _shapes(plan_case(_case(name, "0.5.6")))
    assert "mamba.conv" in old and "mamba.conv[0]" not in old
    assert new["mamba.conv[0]"] == old["mamba.conv"]
    kda = _shapes(plan_case(_case("hybrid-linear-kimi-linear-48b-a3b-tp1-bf16-p1", "0.5.5")))
    assert {"mamba.conv[0]", "mamba.conv[1]", "mamba.conv[2]"} <= set(kda)


# ---- SGLang 0.5.1 -> 0.5.2 -------------------------------------------------------------------------------------------


def test_pipeline_stages_keep_their_own_tokens_up_to_0_5_1() -> None:
    """0.5.2's ``init_memory_pool`` takes the MIN of every stage's profiled tokens (an ``all_reduce`` over the world
    group); 0.5.1 keeps each stage's own. Llama-3.1-70B TP 1 bf16 PP 3, page 1, 40 GiB: the stages hold 26, 26 and
    28 layers (4,096 B each; 0.5.5's split), so stage 0 profiles ``40 GiB // (26 x 4,096) = 403,298`` tokens and
    stage 2 ``40 GiB // (28 x 4,096) = 374,491``: from 0.5.2 stage 0 resolves to 374,491 too (its profile, ``sizes``,
    is the same in both)."""
    name = "default-llama-3.1-70b-pp3-rank0-tp1-bf16-p1"  # bf16 spelled auto: 0.5.1's --kv-cache-dtype has no bf16
    old, new = (_overridden(name, version, kv_cache_dtype="auto") for version in ("0.5.1", "0.5.2"))
    assert old.configurator.cell_size_bytes == new.configurator.cell_size_bytes == 26 * 4_096
    assert old.sizes.max_total_num_tokens == new.sizes.max_total_num_tokens == 40 * GIB // (26 * 4_096) == 403_298
    assert old.resolution.sizes.max_total_num_tokens == 403_298  # the stage's own profile
    assert new.resolution.sizes.max_total_num_tokens == 40 * GIB // (28 * 4_096) == 374_491
    assert old.resolution.pp_min_tokens is None and new.resolution.pp_min_tokens == 374_491


def test_qwen3_next_and_standalone_arrive_in_0_5_2() -> None:
    """0.5.2 registers Qwen3-Next (its config class and ``--max-mamba-cache-size``) and STANDALONE speculative
    decoding; 0.5.1 refuses the config.json, the flag and the algorithm name (``SpeculativeAlgorithm.from_string``:
    KeyError)."""
    with pytest.raises(UnsupportedConfigurationError, match="model_type 'qwen3_next'"):
        _case("hybrid-linear-qwen3-next-80b-a3b-tp2-fp8-p64", "0.5.1")
    with pytest.raises(UnsupportedConfigurationError, match="no --max-mamba-cache-size server argument"):
        _case("hybrid-linear-falcon-h1-7b-tp2-fp8-p64-mamba512", "0.5.1")
    with pytest.raises(UnsupportedConfigurationError, match="no choice 'STANDALONE'"):
        _case("bridge-draft-standalone-mistral-7b-tp1-fp8-p256-no-draft-count", "0.5.1")
    assert plan_case(_case("hybrid-linear-qwen3-next-80b-a3b-tp2-fp8-p64", "0.5.2")).sizes.max_total_num_tokens > 0


# ---- SGLang 0.5.2 -> 0.5.3 -------------------------------------------------------------------------------------------


def test_hybrid_linear_full_pool_has_page_one_up_to_0_5_2() -> None:
    """0.5.2's ``HybridLinearKVPool`` builds its full-attention ``MHATokenToKVPool`` with ``page_size = 1``: the what-if
    pool of 1,024 tokens at page 64 has ``1,024 + 1`` rows (0.5.3: ``1,024 + 64``). Sizing does not move."""
    name = "hybrid-linear-qwen3-next-80b-a3b-tp2-fp8-p64"
    old, new = plan_case(_case(name, "0.5.2")), plan_case(_case(name, "0.5.3"))
    assert _shapes(old)["full.k_buffer[0]"][0] == 1_024 + 1 and _shapes(new)["full.k_buffer[0]"][0] == 1_024 + 64
    assert old.sizes == new.sizes


def test_falcon_h1_is_plain_attention_up_to_0_5_2() -> None:
    """0.5.2 has no Falcon-H1 class: the Transformers backend serves it, every one of its 44 layers priced and built as
    attention KV, no Mamba state and no request cap from slots (as Jamba); 0.5.3 keeps the state
    (``is_hybrid_gdn``). Falcon-H1-7B TP 2 fp8 (2 KV heads, one a rank): ``44 x (K + V) x 1 x 128 x 1 B = 11,264`` B
    a token either way."""
    name = "hybrid-linear-falcon-h1-7b-tp2-fp8-p64-mamba512"
    old, new = plan_case(_case(name, "0.5.2")), plan_case(_case(name, "0.5.3"))
    assert old.layout.token_to_kv.pool_class == "MHATokenToKVPool"
    assert new.layout.token_to_kv.pool_class == "HybridLinearKVPool"
    assert old.configurator.cell_size_bytes == new.configurator.cell_size_bytes == 44 * 2 * 1 * 128
    assert old.sizes.max_mamba_cache_size is None and new.sizes.max_mamba_cache_size == 512
    assert not {"mamba.conv", "mamba.temporal"} & set(_shapes(old))


def test_deepseek_v32_and_qwen3_vl_configs_load_from_0_5_3() -> None:
    """0.5.3 loads ``deepseek_v32`` as DeepSeek-V3 (``_load_deepseek_v32_model``) and its transformers 4.57.0 has the
    Qwen3-VL config classes; 0.5.2 (transformers 4.56.1) refuses both config.json files."""
    with pytest.raises(UnsupportedConfigurationError, match="model_type 'deepseek_v32'"):
        _case("dsa-deepseek-v3.2-tp8-fp8-p64", "0.5.2")
    vl = {"hf_config": str(ROOT / "kvstrategies/checkpoints/Qwen--Qwen3-VL-4B-Instruct/config.json"),
          "available_bytes": 40 * GIB, "kv_cache_dtype": "auto"}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="model_type 'qwen3_vl'"):
        parse_case(vl, sglang_version="0.5.2")
    assert plan_case(parse_case(vl, sglang_version="0.5.3")).sizes.max_total_num_tokens > 0


def test_ngram_is_refused_up_to_0_5_2() -> None:
    """0.5.2's ``SpeculativeAlgorithm.from_string`` has no NGRAM (KeyError); 0.5.3 added it."""
    ngram = {"preset": "qwen3-8b", "available_bytes": 40 * GIB, "kv_cache_dtype": "auto",
             "speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="no choice 'NGRAM'.*from_string"):
        parse_case(ngram, sglang_version="0.5.2")
    assert plan_case(parse_case(ngram, sglang_version="0.5.3")).sizes.max_total_num_tokens > 0


# ---- SGLang 0.5.3 -> 0.5.4 -------------------------------------------------------------------------------------------


def test_kv_cache_dtype_bf16_is_a_choice_from_0_5_4() -> None:
    """0.5.3's ``--kv-cache-dtype`` choices are auto, fp8_e5m2 and fp8_e4m3 (``ServerArgs.add_cli_args``): ``bf16`` is
    refused; ``auto`` on the bf16 Llama-3.1-8B is the same cache (32 layers x 8 heads x 128 x 2 x 2 B = 131,072 B)."""
    name = "default-llama-3.1-8b-tp1-bf16-p1"
    with pytest.raises(UnsupportedConfigurationError, match="has no such choice"):
        _case(name, "0.5.3")
    auto = _overridden(name, "0.5.3", kv_cache_dtype="auto")
    assert auto.configurator.cell_size_bytes == plan_case(_case(name, "0.5.4")).configurator.cell_size_bytes == 131_072
    assert auto.sizes.max_total_num_tokens == 40 * GIB // 131_072


def test_nemotron_h_configs_load_from_0_5_4() -> None:
    """0.5.4 registers the Nemotron-H config class (transformers 4.57.0 has none): 0.5.3 refuses the config.json."""
    name = "hybrid-linear-nemotron-h-56b-tp4-fp8-p64"
    with pytest.raises(UnsupportedConfigurationError, match="model_type 'nemotron_h'"):
        _case(name, "0.5.3")
    assert plan_case(_case(name, "0.5.4")).sizes.max_total_num_tokens > 0


def test_dsa_indexer_is_priced_from_0_5_4() -> None:
    """0.5.3's ``profile_max_num_token`` prices the 576-wide fp8 latent only; 0.5.4 adds the index keys (128 uint8 + one
    fp32 scale = 132 B a layer). DeepSeek-V3.2 TP 8 fp8, 61 layers, 40 GiB, page 64: 0.5.3 ``576 x 61 = 35,136`` B a
    token, ``40 GiB // 35,136 = 1,222,383`` -> 1,222,336; 0.5.4 ``(576 + 132) x 61 = 43,188`` B. 0.5.3's pool still
    allocates the index keys, which the profile did not price."""
    name = "dsa-deepseek-v3.2-tp8-fp8-p64"
    old, new = plan_case(_case(name, "0.5.3")), plan_case(_case(name, "0.5.4"))
    assert (old.configurator.cell_size_bytes, new.configurator.cell_size_bytes) == (576 * 61, (576 + 132) * 61)
    assert old.sizes.max_total_num_tokens == 40 * GIB // (576 * 61) // 64 * 64 == 1_222_336
    assert "index_k_with_scale_buffer" in _buffer_names(old)


def test_dsa_mtp_draft_is_plain_mla_up_to_0_5_3() -> None:
    """SGLang loads DeepSeek-V3.2 as ``DeepseekV3ForCausalLM`` and its draft as ``DeepseekV3ForCausalLMNextN``, which
    0.5.3's ``is_deepseek_nsa`` does not list: the draft's pool is ``MLATokenToKVPool`` with 576-wide fp8 rows and
    no index keys; 0.5.4 lists it (``NSATokenToKVPool``, 656-wide rows)."""
    name = "dsa-deepseek-v3.2-tp8-fp8-mtp-draft-p64"
    old, new = plan_case(_case(name, "0.5.3")), plan_case(_case(name, "0.5.4"))
    assert (old.layout.token_to_kv.pool_class, new.layout.token_to_kv.pool_class) == (
        "MLATokenToKVPool", "NSATokenToKVPool")  # fmt: skip
    assert _shapes(old)["kv_buffer[0]"][-1] == 576 and _shapes(new)["kv_buffer[0]"][-1] == 656
    assert "index_k_with_scale_buffer" not in _buffer_names(old)


def test_mamba_slots_are_fixed_without_radix_cache_up_to_0_5_3() -> None:
    """0.5.3's ``ModelRunner.__init__`` turns the radix cache off for Qwen3-Next and Falcon-H1 and fixes the slots:
    ``--max-mamba-cache-size``, else ``--max-running-requests``, else 512, over the DP width; ``profile_max_num_token``
    reserves ``slots x per`` (no padding slot, no draft state). Qwen3-Next TP 2 fp8: a slot is 36 layers x (4,096 x 3
    bf16 + 16 x 128 x 128 fp32) = 38,633,472 B; 512 slots take ``512 x 38,633,472`` B of 46 GiB (0.5.4 splits the
    rest by the 0.9 ratio: 1,089 slots). Requests: ``min(R, 512)`` (ratio 1). The Mamba pool has a slot per request
    row (the what-if pool: 8 requests -> 9 slots, an 8-row int32 mapping, free slots a host list)."""
    per = 36 * (4_096 * 3 * 2 + 16 * 128 * 128 * 4)
    assert per == 38_633_472
    name = "hybrid-linear-qwen3-next-80b-a3b-tp2-fp8-p64"
    old, new = plan_case(_case(name, "0.5.3")), plan_case(_case(name, "0.5.4"))
    budget = old.configurator.mamba_budget(46 * GIB)
    assert budget.max_mamba_cache_size == 512 and old.configurator.mamba_ratio == 1
    assert budget.rest_gib_after == 46 - 512 * per / GIB
    assert new.configurator.mamba_budget(46 * GIB).max_mamba_cache_size == int(46 * 0.9 / 1.9 * GIB // per)
    assert old.sizes.max_running_requests == min(512, old.sizes.max_running_requests) == 512
    shapes = _shapes(old)
    assert shapes["mamba.conv"] == (36, 9, 4_096, 3) and shapes["mamba.temporal"] == (36, 9, 16, 128, 128)
    assert shapes["req_index_to_mamba_index_mapping"] == (8,)
    assert "mamba_pool.free_slots" not in shapes and "mamba_pool.free_slots" in _shapes(new)
    given = plan_case(_case("bridge-spec-mtp-qwen3-next-80b-a3b-tp4-fp8-p64-mamba300", "0.5.3")).configurator
    assert given.mamba_budget(46 * GIB).max_mamba_cache_size == 300  # given, honoured; no draft state priced
    assert given.mamba_budget(46 * GIB).spec_scratch_gib == 0.0
    capped = _overridden(name, "0.5.3", max_running_requests=48, attn_dp_size=2)
    assert capped.configurator.mamba_budget(46 * GIB).max_mamba_cache_size == 48 // 2


def test_falcon_h1_ssm_state_is_state_major_up_to_0_5_3() -> None:
    """0.5.3's ``FalconH1Config.hybrid_gdn_params`` lays the SSM state ``(d_state, head_dim, heads / tp)``; 0.5.4's
    ``Mamba2StateShape`` ``(heads / tp, head_dim, d_state)``: Falcon-H1-7B TP 2 (24 heads of 128, d_state 256) holds
    ``(256, 128, 12)`` and ``(12, 128, 256)``, the same bytes."""
    name = "hybrid-linear-falcon-h1-7b-tp2-fp8-p64-mamba512"
    old, new = _shapes(plan_case(_case(name, "0.5.3"))), _shapes(plan_case(_case(name, "0.5.4")))
    assert old["mamba.temporal"][2:] == (256, 128, 12) and new["mamba.temporal"][2:] == (12, 128, 256)


# ---- SGLang 0.5.4 -> 0.5.5 -------------------------------------------------------------------------------------------


def test_kimi_linear_configs_load_from_0_5_5() -> None:
    """0.5.5 registers the Kimi-Linear config class (transformers 4.57.1 has none): 0.5.4 cannot load a
    ``kimi_linear`` config.json (refused as its ValueError), 0.5.5 sizes it."""
    name = "hybrid-linear-kimi-linear-48b-a3b-tp1-bf16-p1"
    with pytest.raises(UnsupportedConfigurationError, match="model_type 'kimi_linear'"):
        _case(name, "0.5.4")
    assert plan_case(_case(name, "0.5.5")).sizes.max_total_num_tokens > 0

