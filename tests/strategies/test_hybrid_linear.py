"""HybridLinear strategy: hand-computed examples (Qwen3-Next MTP draft, Qwen3-Next GDN in both variants, the zero-KV PP
stage, the Qwen3.5-35B-A3B GDN bf16 T=1024 P=1 layout), every family's state shapes, the Mamba budget branches and the
hybrid pools.

Every expected number is a literal computed by hand from SGLang's rules (KVCacheConfigurator._handle_max_mamba_cache,
sglang.srt.configs.mamba_utils, MambaPool, HybridReqToTokenPool, HybridLinearKVPool), not read back from the library.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import build
from kvstrategies.case import load_case
from kvstrategies.cli.app import main
from kvstrategies.core.dtypes import DType
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.document import plan_document
from kvstrategies.errors import (
    InsufficientMemoryError,
    KVCacheConfigError,
)
from kvstrategies.models import parse_hf_config
from kvstrategies.pools.mamba import hybrid_req_to_token_layout, mamba_pool_layout
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies import DefaultPoolConfigurator
from kvstrategies.strategies.hybrid_linear import HybridLinearPoolConfigurator
from kvstrategies.strategies.resolve import resolve
from tests.helpers import buffer_shapes

from ..helpers import GIB, case_settings

QWEN3_NEXT = "qwen3-next-80b-a3b"
QWEN35 = "qwen3.5-35b-a3b"
CASES = Path(__file__).parents[2] / "cases"
# Jamba's case is named for its architecture; SGLang (and so the project) sizes it through the generic path
HYBRID_CASES = sorted(p for p in CASES.glob("hybrid-linear-*.json") if "jamba" not in p.stem)
# worked example Qwen3-Next GDN: rest = 60.0 - 140.0 * (1 - 0.9) = 46.0 GiB before the Mamba step
REST_46 = 46 * GIB


def configurator(preset: str | dict[str, Any], **fields: Any) -> HybridLinearPoolConfigurator:
    cfg = select_configurator(case_settings(preset, **fields))
    assert isinstance(cfg, HybridLinearPoolConfigurator)
    return cfg


# ---- selection and layer ids (sglang.srt.configs.mamba_utils, create_memory_pool_configurator) -----------------------


@pytest.mark.parametrize(
    ("preset", "full_ids", "num_mamba"),
    [
        (QWEN3_NEXT, (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47), 36),
        (QWEN35, (3, 7, 11, 15, 19, 23, 27, 31, 35, 39), 30),
        ("nemotron-h-8b", (7, 18, 29, 40), 24),
        ("nemotron-h-56b", (7, 18, 29, 40, 51, 62, 73, 84, 95, 106), 54),
        ("falcon-h1-7b", tuple(range(44)), 44),
        # kda_layers is 1-based: [1, 2, 3, 5, ...] -> full layers are the 1-based 4, 8, ..., 24, 27
        ("kimi-linear-48b-a3b", (3, 7, 11, 15, 19, 23, 26), 20),
    ],
)
def test_layer_ids_per_family(preset: str, full_ids: tuple[int, ...], num_mamba: int) -> None:
    cfg = configurator(preset)
    assert cfg.mamba.full_attention_layer_ids == full_ids
    assert len(cfg.mamba.mamba_layer_ids) == num_mamba
    assert cfg.num_layers == len(full_ids)
    assert cfg.ctx.geometry.family == "hybrid-linear"


def test_non_mamba_models_stay_default() -> None:
    assert type(select_configurator(case_settings("llama-3.1-8b"))) is DefaultPoolConfigurator


def test_qwen35_uses_the_interval_rule_not_layer_types() -> None:
    config = load_preset_config(QWEN35)
    text = dict(config["text_config"])
    text["layer_types"] = ["full_attention"] * 40  # a lie SGLang never reads
    geometry = parse_hf_config({**config, "text_config": text})
    assert geometry.mamba is not None
    assert geometry.mamba.full_attention_layer_ids == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39)


# ---- state shapes per family (mamba_utils state shapes), hand-computed ---------------------------------------


@pytest.mark.parametrize(
    ("preset", "tp", "conv", "temporal"),
    [
        # GDN: conv_dim = 128*32 + 2*16*128 = 8192
        (QWEN3_NEXT, 1, (8192, 3), (32, 128, 128)),
        (QWEN3_NEXT, 2, (4096, 3), (16, 128, 128)),
        (QWEN3_NEXT, 4, (2048, 3), (8, 128, 128)),
        (QWEN35, 1, (8192, 3), (32, 128, 128)),
        # Nemotron-H 8B: 128 heads x 64, 8 groups, state 128: conv_dim = 8192 + 2*8*128 = 10240
        ("nemotron-h-8b", 1, (10240, 3), (128, 64, 128)),
        ("nemotron-h-8b", 2, (5120, 3), (64, 64, 128)),
        # Nemotron-H 56B: 256 heads x 64, state 256: conv_dim = 16384 + 2*8*256 = 20480
        ("nemotron-h-56b", 4, (5120, 3), (64, 64, 256)),
        # Falcon-H1 7B: d_ssm 3072, 1 group, state 256; TP2/TP4 replicate the group to 2/4
        ("falcon-h1-7b", 1, (3584, 3), (24, 128, 256)),
        ("falcon-h1-7b", 2, (2048, 3), (12, 128, 256)),  # (3072 + 2*2*256) / 2
        ("falcon-h1-7b", 4, (1280, 3), (6, 128, 256)),  # (3072 + 2*4*256) / 4
        # KDA: conv (K-1, 32*128/tp + 2 * 32*128/tp), window axis first
        ("kimi-linear-48b-a3b", 1, (3, 12288), (32, 128, 128)),
        ("kimi-linear-48b-a3b", 4, (3, 3072), (8, 128, 128)),
    ],
)
def test_state_shapes(preset: str, tp: int, conv: tuple[int, int], temporal: tuple[int, int, int]) -> None:
    shapes = configurator(preset, tp_size=tp).state_shapes
    assert shapes.conv == (conv,)
    assert shapes.temporal == temporal


@pytest.mark.parametrize(
    ("preset", "tp", "per_req"),
    [
        (QWEN3_NEXT, 4, 19_316_736),  # (6144 * 2 + 131072 * 4) * 36
        ("nemotron-h-8b", 1, 102_137_856),  # (30720 * 2 + 1048576 * 4) * 24
        ("falcon-h1-7b", 1, 139_358_208),  # (10752 * 2 + 786432 * 4) * 44
        ("kimi-linear-48b-a3b", 1, 43_417_600),  # (36864 * 2 + 524288 * 4) * 20
    ],
)
def test_mamba_cache_per_req(preset: str, tp: int, per_req: int) -> None:
    assert configurator(preset, tp_size=tp).mamba_cache_per_req == per_req


def test_state_dtype_knobs() -> None:
    # conv 6144 values, temporal 131072 values per layer at TP4, 36 layers
    bf16_ssm = configurator(QWEN3_NEXT, tp_size=4, env={"SGLANG_MAMBA_SSM_DTYPE": "bfloat16"})
    assert bf16_ssm.mamba_cache_per_req == (6144 * 2 + 131072 * 2) * 36 == 9_879_552
    fp32_conv = configurator(QWEN3_NEXT, tp_size=4, env={"SGLANG_MAMBA_CONV_DTYPE": "float32"})
    assert fp32_conv.mamba_cache_per_req == (6144 * 4 + 131072 * 4) * 36 == 19_759_104
    odd_conv = configurator(QWEN3_NEXT, tp_size=4, env={"SGLANG_MAMBA_CONV_DTYPE": "float8"})
    assert odd_conv.mamba_cache_per_req == 19_316_736  # falls back to bfloat16


def test_indivisible_tp_is_a_config_error() -> None:
    # 16 key groups at TP3 become 16 + 3 - 16 = 3; conv_dim 4096 + 2*3*128 = 4864 is not divisible by 3
    cfg = configurator(QWEN3_NEXT, tp_size=3)
    with pytest.raises(KVCacheConfigError, match="conv_dim = 4864"):
        _ = cfg.state_shapes


# ---- worked example: Qwen3-Next GDN -------------------------------------------------------------------------------


def test_example_15_qwen3_next_tp4_auto_fit() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, page_size=64)
    assert cfg.cell_size_bytes == 12_288  # 1 head * 512 * 12 layers * 2 B
    assert cfg.mamba_ratio == 3
    budget = cfg.mamba_budget(REST_46)
    assert budget.branch == "C"
    assert budget.max_mamba_cache_size == 1_210  # int((23,396,269,217.68421 - per) // per)
    assert budget.rest_gib_after == 24.213973999023438
    assert budget.kv_available_bytes == 25_999_556_608
    # available_bytes is SGLang's KV budget. Two budgets leave exactly these bytes (1,209 and 1,210
    # slots: one more slot eats 19.3 MB while 0.47 of each extra byte goes to the state); the
    # inverse takes the smaller budget's count
    result = resolve(cfg.ctx, budget.kv_available_bytes)
    smaller = cfg.budget_leaving(budget.kv_available_bytes)
    assert smaller.kv_available_bytes == budget.kv_available_bytes
    assert smaller.rest_gib_before < budget.rest_gib_before
    assert result.sizes.max_total_num_tokens == 2_115_840
    assert result.sizes.max_mamba_cache_size == smaller.max_mamba_cache_size == 1_209
    assert result.sizes.max_running_requests == 403  # 4096 capped by 1209 // 3


def test_example_15_variant_b_radix_off_mrr_256() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, page_size=64, disable_radix_cache=True, max_running_requests=256)
    assert cfg.mamba_ratio == 1
    budget = cfg.mamba_budget(REST_46)
    assert (budget.branch, budget.max_mamba_cache_size) == ("B", 256)
    assert budget.rest_gib_after == 41.37654113769531
    assert budget.kv_available_bytes == 44_427_722_752
    sizes = resolve(cfg.ctx, budget.kv_available_bytes).sizes
    assert (sizes.max_total_num_tokens, sizes.max_running_requests) == (3_615_488, 256)


# ---- worked example: the zero-KV PP stage ----------------------------------------------------------------------------


def test_example_16_zero_kv_pp_stage() -> None:
    fields = {"tp_size": 4, "pp_size": 2, "page_size": 64, "env": {"SGLANG_PP_LAYER_PARTITION": "3,45"}}
    stage0 = configurator(QWEN3_NEXT, pp_rank=0, **fields)
    stage1 = configurator(QWEN3_NEXT, pp_rank=1, **fields)
    assert stage0.layer_range == (0, 3) and stage0.cell_size_bytes == 0
    assert stage1.layer_range == (3, 48) and stage1.cell_size_bytes == 12_288
    assert stage0.local_mamba_layer_ids == (0, 1, 2)
    assert len(stage1.local_mamba_layer_ids) == 33
    for stage in (stage0, stage1):
        assert stage.stage_mamba_cache_per_req == 17_707_008  # int(19,316,736 * 33/36)
        budget = stage.mamba_budget(REST_46)
        assert budget.max_mamba_cache_size == 1_320
        assert budget.kv_available_bytes == 26_001_166_336
    assert stage0.calculate_pool_sizes(26_001_166_336, 64).max_total_num_tokens == 9_223_372_036_854_775_744
    assert stage1.calculate_pool_sizes(26_001_166_336, 64).max_total_num_tokens == 2_115_968
    for stage in (stage0, stage1):
        result = resolve(stage.ctx, 26_001_166_336)  # the KV budget the 46 GiB leave
        assert result.pp_min_tokens == 2_115_968
        assert result.sizes.max_total_num_tokens == 2_115_968
        # the smallest budget leaving these bytes holds 1,319 slots (1,320 above): 4096 capped by 1319 // 3
        assert result.sizes.max_mamba_cache_size == 1_319
        assert result.sizes.max_running_requests == 439
    # stage 0's KV pool has no layers, its Mamba pool holds layers 0-2
    layout = stage0.layout(PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24))
    assert layout.token_to_kv.buffers == ()
    assert layout.extra[0].buffers[0].shape == (3, 25, 2048, 3)


def test_pp_scaling_with_the_default_split() -> None:
    # 48 layers over 2 stages: [0, 24) and [24, 48), 18 GDN layers each -> scale 18/36
    cfg = configurator(QWEN3_NEXT, tp_size=4, pp_size=2, pp_rank=1)
    assert cfg.stage_mamba_cache_per_req == 9_658_368  # int(19,316,736 * 0.5)
    assert cfg.num_layers == 6


def test_pure_state_model_uses_the_context_len() -> None:
    # no attention layer anywhere: the 2**63 - 1 rule does not apply, even under PP
    # (DefaultPoolConfigurator.calculate_pool_sizes)
    config = dict(load_preset_config("nemotron-h-8b"), hybrid_override_pattern="M-M-", num_hidden_layers=4)
    for fields in ({}, {"pp_size": 2, "pp_rank": 1}):
        cfg = configurator(config, **fields)
        assert cfg.cell_size_bytes == 0
        assert cfg.calculate_pool_sizes(40 * GIB, 1).max_total_num_tokens == 8_192
    assert configurator(config, max_tokens=5_000).calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 4_992


# ---- worked example: Qwen3-Next MTP draft, and the speculative branches --------------------------------------------

MTP = {
    "speculative_algorithm": "EAGLE",
    "eagle_draft_num_layers": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "max_running_requests": 64,
}


def test_example_12_qwen3_next_mtp_cell() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, page_size=64, **MTP)
    assert cfg.base_cell_size_bytes == 12_288
    assert cfg.cell_size_bytes == 13_312  # 12,288 + int(12,288 * 1 / 12)


def test_spec_branch_c() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, page_size=64, **MTP)
    budget = cfg.mamba_budget(REST_46)
    # K = int((bb - per * 5) // (per * (1 + 4/3))) = int(23,299,685,537.68 // 45,072,384.0) = 516
    assert (budget.branch, budget.max_mamba_cache_size) == ("C", 516)
    # capped = min(64, 516 // 3) = 64; scratch = per * 65 * 4 B
    assert int(budget.spec_scratch_gib * GIB) == 5_022_351_360
    assert budget.kv_available_bytes == 34_383_020_032
    sizes = resolve(cfg.ctx, budget.kv_available_bytes).sizes
    assert (sizes.max_total_num_tokens, sizes.max_running_requests) == (2_582_848, 64)


def test_spec_branch_a_and_b() -> None:
    given = configurator(QWEN3_NEXT, tp_size=4, page_size=64, max_mamba_cache_size=600, **MTP)
    budget = given.mamba_budget(REST_46)
    # rest = 46 - per * 65 * 4 / 2**30 - 601 * per / 2**30
    assert (budget.branch, budget.max_mamba_cache_size, budget.kv_available_bytes) == ("A", 600, 32_760_414_208)
    radix_off = configurator(QWEN3_NEXT, tp_size=4, page_size=64, disable_radix_cache=True, **MTP)
    budget = radix_off.mamba_budget(REST_46)
    # K = 64; rest = 46 - per * 65 * 4 / 2**30 - 65 * per / 2**30
    assert (budget.branch, budget.max_mamba_cache_size, budget.kv_available_bytes) == ("B", 64, 43_114_184_704)


def test_spec_needs_draft_tokens_and_max_running_requests() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, speculative_algorithm="EAGLE", eagle_draft_num_layers=1)
    with pytest.raises(KVCacheConfigError, match="speculative_num_draft_tokens.*max_running_requests"):
        cfg.reserve_state_bytes(REST_46)


def test_pd_prefill_role_reserves_no_spec_state() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, page_size=64, disaggregation_mode="prefill", **MTP)
    assert cfg.mamba_budget(REST_46).spec_scratch_gib == 0.0
    assert cfg.spec_num_draft_tokens is None


# ---- Mamba ratio (KVCacheConfigurator._calculate_mamba_ratio) and the request cap ------------------------------------


@pytest.mark.parametrize(
    ("fields", "ratio"),
    [
        ({}, 3),
        ({"disable_radix_cache": True}, 1),
        ({"mamba_radix_cache_strategy": "no_buffer"}, 3),
        ({"mamba_radix_cache_strategy": "extra_buffer"}, 5),
        ({"mamba_radix_cache_strategy": "extra_buffer", "disable_overlap_schedule": True}, 4),
        ({"mamba_radix_cache_strategy": "extra_buffer_lazy"}, 4),
        ({"mamba_radix_cache_strategy": "extra_buffer", "disable_radix_cache": True}, 1),
        ({"env": {"SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": "1"}}, 3),  # 2 + 1
        ({"env": {"SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": "1"}, "mamba_radix_cache_strategy": "extra_buffer"}, 4),
    ],
)
def test_mamba_ratio(fields: dict[str, object], ratio: int) -> None:
    assert configurator(QWEN3_NEXT, **fields).mamba_ratio == ratio


def test_mamba_ratio_errors() -> None:
    lazy = configurator(QWEN3_NEXT, mamba_radix_cache_strategy="extra_buffer_lazy", disable_overlap_schedule=True)
    with pytest.raises(KVCacheConfigError, match="overlap"):
        _ = lazy.mamba_ratio
    with pytest.raises(KVCacheConfigError, match="mamba_radix_cache_strategy"):
        _ = configurator(QWEN3_NEXT, mamba_radix_cache_strategy="double_buffer").mamba_ratio


def test_request_cap_and_its_errors() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4)
    sizes = PoolSizes(max_total_num_tokens=1_000_000, max_mamba_cache_size=1_210)
    assert cfg.cap_max_running_requests(4_096, sizes) == 403
    assert cfg.cap_max_running_requests(100, sizes) == 100
    with pytest.raises(InsufficientMemoryError, match="mamba_ratio=3"):
        cfg.cap_max_running_requests(4_096, sizes.replace(max_mamba_cache_size=2))


def test_too_small_budget_is_insufficient_memory() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4)
    with pytest.raises(InsufficientMemoryError, match="state cache"):
        cfg.reserve_before_kv(30_000_000)  # 0.028 GiB: budget share below one 19 MB slot + dummy
    radix_off = configurator(QWEN3_NEXT, tp_size=4, disable_radix_cache=True, max_running_requests=4000)
    with pytest.raises(InsufficientMemoryError, match="no memory for the KV"):
        radix_off.reserve_before_kv(REST_46)  # 4001 slots * 19.3 MB > 46 GiB


# ---- worked layout: Qwen3.5-35B-A3B GDN bf16 T=1024 P=1 ------------------------------------------------------------

SIZES_15C = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24)


def test_layout_15c_qwen35_gdn() -> None:
    cfg = configurator(QWEN35, kv_cache_dtype="bf16")
    layout = cfg.layout(SIZES_15C)
    kv = layout.token_to_kv
    assert kv.pool_class == "HybridLinearKVPool"
    allocs = kv.allocations
    assert len(allocs) == 10
    assert {(b.name.split("[")[0], b.shape, b.nbytes) for b in allocs} == {
        ("full.kv_storage", (2, 1025, 2, 256), 2_099_200)
    }
    views = {b.name: b.shape for b in kv.buffers if b.is_view}
    assert views["full.k_buffer[9]"] == views["full.v_buffer[0]"] == (1025, 2, 256)
    assert kv.planned_bytes == 20_992_000  # (T + 1) * cell 20,480
    assert dict(kv.attributes)["full_attention_layer_id_mapping[39]"] == 9
    req = layout.req_to_token
    assert req.pool_class == "HybridReqToTokenPool"
    assert {b.name: (b.shape, b.nbytes) for b in req.allocations} == {
        "req_to_token": ((9, 262_148), 9_437_328),
        "req_generation": ((9,), 72),
        "req_index_to_mamba_index_mapping": ((9,), 36),
    }
    (mamba,) = layout.extra
    assert mamba.pool_class == "MambaPool"
    assert {b.name: (b.shape, str(b.dtype), b.nbytes) for b in mamba.allocations} == {
        "mamba.conv[0]": ((30, 25, 8192, 3), "torch.bfloat16", 36_864_000),
        "mamba.temporal": ((30, 25, 32, 128, 128), "torch.float32", 1_572_864_000),
    }
    assert cfg.mamba_cache_per_req == 64_389_120
    assert mamba.planned_bytes == 1_609_728_000  # (24 + 1) * 64,389,120
    built = cfg.build(SIZES_15C, "meta")
    assert built.allocated_bytes == layout.planned_bytes == 20_992_000 + 9_437_436 + 1_609_728_000


def test_layout_15c_qwen3_next_counts() -> None:
    layout = configurator(QWEN3_NEXT).layout(SIZES_15C)
    assert len(layout.token_to_kv.allocations) == 12
    shapes = [b.shape for b in layout.extra[0].allocations]
    assert shapes == [(36, 25, 8192, 3), (36, 25, 32, 128, 128)]


def test_kimi_linear_mla_sub_pool() -> None:
    layout = configurator("kimi-linear-48b-a3b", page_size=64).layout(SIZES_15C)
    kv = layout.token_to_kv
    assert dict(kv.attributes)["full.pool_class"] == "MLATokenToKVPool"
    assert [b.shape for b in kv.allocations] == [(1088, 1, 576)] * 7  # T + P rows, 512 + 64 latent
    assert dict(kv.attributes)["full_attention_layer_id_mapping[26]"] == 6
    assert [b.shape for b in layout.extra[0].allocations] == [(20, 25, 3, 12288), (20, 25, 32, 128, 128)]


def test_fp4_mla_hybrid_keeps_the_plain_mla_class() -> None:
    cfg = configurator("kimi-linear-48b-a3b", kv_cache_dtype="nvfp4", page_size=64)
    kv = cfg.layout(SIZES_15C).token_to_kv
    assert dict(kv.attributes)["full.pool_class"] == "MLATokenToKVPool"
    assert {(b.shape, str(b.dtype)) for b in kv.allocations} == {((1088, 1, 576), "torch.float4_e2m1fn_x2")}


def test_spec_state_buffers_dedup_and_dense() -> None:
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24)
    dedup = configurator(QWEN3_NEXT, tp_size=4, **MTP).layout(sizes).extra[0]
    assert {b.name: b.shape for b in dedup.allocations} == {
        "mamba.conv[0]": (36, 25, 2048, 3),
        "mamba.temporal": (36, 25, 8, 128, 128),
        "mamba.intermediate_ssm": (36, 9, 4, 8, 128, 128),
        "mamba._intermediate_conv_window_phys[0]": (36, 9, 2048, 6),  # Dd + K - 2 = 4 + 4 - 2
    }
    # engines address it through an overlapping window view: step t reads columns [t, t + K - 1)
    views = {b.name: b for b in dedup.buffers if b.is_view}
    window = views["mamba.intermediate_conv_window[0]"]
    assert window.shape == (36, 9, 4, 2048, 3) and window.view is not None
    assert (window.view.source, window.view.window_axis) == ("mamba._intermediate_conv_window_phys[0]", 3)
    tree = configurator(QWEN3_NEXT, tp_size=4, **{**MTP, "speculative_eagle_topk": 2}).layout(sizes).extra[0]
    assert dict((b.name, b.shape) for b in tree.allocations)["mamba.intermediate_conv_window[0]"] == (
        36,
        9,
        4,
        2048,
        3,
    )
    kda = configurator("kimi-linear-48b-a3b", **MTP).layout(sizes).extra[0]
    assert dict((b.name, b.shape) for b in kda.allocations)["mamba.intermediate_conv_window[0]"] == (
        20,
        9,
        4,
        3,
        12288,
    )


def test_extra_buffer_adds_the_ping_pong_mapping() -> None:
    overlap = configurator("nemotron-h-8b", mamba_radix_cache_strategy="extra_buffer").layout(SIZES_15C)
    shapes = {b.name: (b.shape, str(b.dtype)) for b in overlap.req_to_token.allocations}
    assert shapes["req_index_to_mamba_ping_pong_track_buffer_mapping"] == ((9, 2), "torch.int64")
    single = configurator(
        "nemotron-h-8b", mamba_radix_cache_strategy="extra_buffer", disable_overlap_schedule=True
    ).layout(SIZES_15C)
    shapes = {b.name: b.shape for b in single.req_to_token.allocations}
    assert shapes["req_index_to_mamba_ping_pong_track_buffer_mapping"] == (9, 1)


def test_decode_role_widens_the_request_rows() -> None:
    cfg = configurator(QWEN3_NEXT, disaggregation_mode="decode", max_running_requests=8)
    req = cfg.layout(SIZES_15C).req_to_token
    assert req.pool_class == "HybridMambaDecodeReqToTokenPool"
    # pre_alloc = 2 * max(1, 8 // 1) = 16 -> 8 + 16 + 1 rows
    assert {b.name: b.shape for b in req.allocations}["req_index_to_mamba_index_mapping"] == (25,)


def test_v_head_dim_quirk_and_npu() -> None:
    config = dict(load_preset_config(QWEN3_NEXT), v_head_dim=128)
    cfg = configurator(config)
    assert cfg.cell_size_bytes == 2 * (256 + 128) * 12 * 2  # the cell prices D + Dv
    kv = cfg.layout(SIZES_15C).token_to_kv
    # V is built with head_dim, so K and V share one fused (2, N, H, 256) allocation per layer
    assert {b.shape for b in kv.allocations} == {(2, 1025, 2, 256)}
    assert {b.shape for b in kv.buffers if b.name.startswith("full.v_buffer")} == {(1025, 2, 256)}
    npu = configurator(QWEN3_NEXT, device="npu")
    assert npu.cell_size_bytes == 24_576  # sizing works; NPU pools: tests/strategies/test_ascend.py
    assert dict(npu.layout(SIZES_15C).token_to_kv.attributes)["full.pool_class"] == "NPUMHATokenToKVPool"


def test_draft_worker_holds_one_kv_layer_and_no_state() -> None:
    cfg = configurator(QWEN3_NEXT, tp_size=4, is_draft_worker=True, **MTP)
    assert cfg.cache_layer_ids == (0,)
    assert cfg.reserve_state_bytes(REST_46).kv_available_bytes == REST_46
    layout = cfg.layout(PoolSizes(max_total_num_tokens=1024, max_running_requests=8))
    assert layout.extra == ()
    assert len(layout.token_to_kv.allocations) == 1


def test_mtp_draft_prices_the_target_pattern_in_its_own_range() -> None:
    # The draft's range is [0, 1) of Qwen3-Next's pattern; layer 0 is linear attention
    # ((0 + 1) % 4 != 0), so the cell prices 0 layers and the zero-KV rule gives the context
    # length (262,144), page-aligned: what SGLang 0.5.23's DefaultPoolConfigurator answers.
    cfg = configurator(QWEN3_NEXT, tp_size=4, is_draft_worker=True, **MTP)
    assert cfg.num_layers == 0 and cfg.cell_size_bytes == 0
    assert cfg.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 262_144
    assert cfg.pool_layer_num == 1  # the pool still holds the draft's one attention layer


# ---- Jamba, reporting, CLI ---------------------------------------------------------------------------


def test_jamba_geometry_is_its_mamba_hybrid() -> None:
    """The parsed geometry keeps Jamba's hybrid (read by the weights and by vLLM): attention layers 4, 12, 20, 28,
    28 Mamba-1 layers; at TP 2 the conv state is (2 x 4096 / 2, 3) = (4096, 3), the SSM state (4096, 1, 16), and one
    request holds (12,288 x 2 + 65,536 x 4) x 28 = 8,028,160 B (as a hybrid-linear strategy would price it)."""
    ctx = case_settings("jamba-v0.1", tp_size=2)
    mamba = ctx.geometry.mamba
    assert mamba is not None and mamba.sglang_generic_fallback
    assert mamba.full_attention_layer_ids == (4, 12, 20, 28) and len(mamba.mamba_layer_ids) == 28
    direct = HybridLinearPoolConfigurator(ctx)
    assert direct.state_shapes.conv == ((4096, 3),) and direct.state_shapes.temporal == (4096, 1, 16)
    assert direct.mamba_cache_per_req == (12_288 * 2 + 65_536 * 4) * 28 == 8_028_160


def test_jamba_is_sized_through_sglangs_generic_path() -> None:
    """SGLang has no Mamba-ish config for JambaForCausalLM: every one of its 32 layers holds attention KV and no state
    is reserved (DefaultPoolConfigurator): 4 heads x (128 + 128) x 32 layers x 2 B = 65,536 B a token."""
    ctx = case_settings("jamba-v0.1", tp_size=2)
    planned = plan(ctx, 40 * GIB, pool_max_tokens=1024)
    assert not isinstance(planned.configurator, HybridLinearPoolConfigurator)
    assert planned.configurator.sglang_class_name() == "DefaultPoolConfigurator"
    assert planned.cell_size_bytes == 4 * 256 * 32 * 2
    assert planned.sizes.max_mamba_cache_size is None and plan_document(planned)["notes"] == []
    assert len(planned.layout.token_to_kv.allocations) == 32


def test_cli_reports_state_pool_and_request_cap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", QWEN3_NEXT, "--tp", "4", "--page-size", "64", "--available-bytes", str(REST_46)]) == 0
    out = capsys.readouterr().out
    assert "max_mamba_cache_size 1,210" in out
    assert "requests capped by the Mamba state cache: 4,096 -> 403" in out
    assert "MambaPool" in out and "HybridLinearKVPool" in out and "HybridReqToTokenPool" in out


def test_cli_json_has_state_pool_in_pools(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--case", str(CASES / "hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64.json"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    names = {p["name"] for p in document["pools"]}
    assert {"mamba.conv[0]", "mamba.temporal", "full.k_buffer[0]"} <= names
    # available_bytes is SGLang's KV budget (reservation already out): 2,299 slots, 2299 // 3 requests
    assert document["sizes"]["max_mamba_cache_size"] == 2_299
    assert document["sizes"]["max_running_requests"] == 766
    assert document["pool_sizes"]["max_mamba_cache_size"] == 24


# ---- catalog: every case plans and builds exactly on meta ---------------------------------------------


def test_catalog_has_the_hybrid_cases() -> None:
    assert len(HYBRID_CASES) >= 15


@pytest.mark.parametrize("path", HYBRID_CASES, ids=lambda p: p.stem)
def test_case_builds_exactly_on_meta(path: Path) -> None:
    case = load_case(path)
    planned = plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
        pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
    )
    assert isinstance(planned.configurator, HybridLinearPoolConfigurator)
    built = build(planned, "meta")
    assert built.allocated_bytes == planned.layout.planned_bytes  # KV + state + request table
    assert len(built.extra) == 1
    document = plan_document(planned, measure=True)
    assert document["planned_bytes"] == document["allocated_bytes"]
    final = planned.resolution.sizes
    assert final.max_running_requests is not None and final.max_mamba_cache_size is not None
    assert final.max_running_requests <= final.max_mamba_cache_size // planned.configurator.mamba_ratio


def test_plan_is_deterministic_and_frozen() -> None:
    ctx = case_settings(QWEN3_NEXT, tp_size=4, page_size=64)
    first = plan(ctx, REST_46).sizes
    second = plan(dataclasses.replace(ctx), REST_46).sizes
    assert first == second


def test_decode_role_gives_the_pre_allocated_rows_state_slots() -> None:
    # HybridMambaDecodeReqToTokenPool: slots = max(K, (R + pre_alloc) * (1 + tracking)); no extra
    # buffer -> tracking 0; R 8, pre_alloc 2 * max(1, 8 // 1) = 16: max(10, 24 * 1) = 24 slots,
    # + 1 dummy = 25 rows (the prefill role keeps K: 10 + 1 = 11)
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=10)
    decode = configurator(QWEN3_NEXT, disaggregation_mode="decode", max_running_requests=8).layout(sizes)
    plain = configurator(QWEN3_NEXT, max_running_requests=8).layout(sizes)
    assert {b.name: b.shape for b in decode.extra[0].buffers}["mamba.conv[0]"][:2] == (36, 25)
    assert {b.name: b.shape for b in plain.extra[0].buffers}["mamba.conv[0]"][:2] == (36, 11)


@pytest.mark.parametrize(("overlap_off", "tracking", "slots"), [(False, 2, 72), (True, 1, 48)])
def test_decode_role_with_the_extra_buffer_gives_tracking_slots_per_row(
    overlap_off: bool, tracking: int, slots: int
) -> None:
    # HybridMambaDecodeReqToTokenPool with the extra buffer: tracking slots per row, 2 with the overlap
    # scheduler and 1 without: max(10, (8 + 16) * (1 + tracking)) = 72 / 48 slots, + 1 dummy row
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=10)
    cfg = configurator(QWEN3_NEXT, disaggregation_mode="decode", max_running_requests=8,
                       mamba_radix_cache_strategy="extra_buffer", disable_overlap_schedule=overlap_off)  # fmt: skip
    assert (8 + 16) * (1 + tracking) == slots
    assert {b.name: b.shape for b in cfg.layout(sizes).extra[0].buffers}["mamba.conv[0]"][:2] == (36, slots + 1)


def test_a_budget_below_one_reservation_walks_up_to_the_smallest_that_leaves_it() -> None:
    """``budget_leaving(A)``: the smallest ``R`` whose Mamba reservation (KVCacheConfigurator._handle_max_mamba_cache)
    leaves ``A``. Nemotron-H-8B at 64 slots holds 64 + 1 padding slots of 102,137,856 B = 6,638,960,640 B,
    so ``A`` = 2 GiB needs ``R = 2 GiB + 6,638,960,640 B``: the walk starts below one reservation (``R = A``
    is refused), climbs in steps of ``A / 16``, then lands on ``R`` exactly."""
    cfg = select_configurator(load_case(CASES / "bridge-odd-budget-nemotron-h-8b-tp1-bf16-p1-mamba64.json").settings)
    assert isinstance(cfg, HybridLinearPoolConfigurator)
    with pytest.raises(InsufficientMemoryError):
        cfg.mamba_budget(2 * GIB)
    budget = cfg.budget_leaving(2 * GIB)
    assert budget.mamba_cache_per_req == 102_137_856 and budget.max_mamba_cache_size == 64
    assert budget.rest_gib_before * GIB == 2 * GIB + 65 * 102_137_856
    assert budget.kv_available_bytes == 2 * GIB


# ---- Mamba budgets and state pools by hand: speculative scratch, slot counts, the request cap --------------


# Qwen3-Next TP4 Mamba state per request (mamba_utils mamba_cache_per_req): conv (8192 / 4, 3) bf16 = 12,288 B and
# temporal (32 / 4, 128, 128) fp32 = 524,288 B per layer, times 36 linear-attention layers
QWEN3_NEXT_TP4_PER_REQ = 36 * (2048 * 3 * 2 + 8 * 128 * 128 * 4)  # 19,316,736


MTP_DRAFT: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "eagle_draft_num_layers": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
}


def hybrid_linear(preset: str | dict[str, Any], **fields: Any) -> HybridLinearPoolConfigurator:
    cfg = select_configurator(case_settings(preset, **fields))
    assert isinstance(cfg, HybridLinearPoolConfigurator)
    return cfg


# ---- Mamba budget with speculative state (KVCacheConfigurator._handle_max_mamba_cache) -------------------------------


def test_spec_scratch_for_a_single_request_branch_c() -> None:
    # C: capped = min(max(1, 1 // 1), K // 3) = 1; scratch = per * (1 + 1) * Dt = per * 2 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=1, **MTP_DRAFT)
    budget = cfg.mamba_budget(46 * GIB)
    assert budget.stage_mamba_cache_per_req == QWEN3_NEXT_TP4_PER_REQ == 19_316_736
    assert budget.branch == "C"
    assert budget.spec_scratch_gib * GIB == 154_533_888.0


def test_spec_scratch_for_a_single_request_branch_a() -> None:
    # A: K = 600; capped = min(max(1, 1 // 1), 600 // 3) = 1; scratch = per * 2 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=1, max_mamba_cache_size=600,
                        **MTP_DRAFT)
    budget = cfg.mamba_budget(46 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("A", 600)
    assert budget.spec_scratch_gib * GIB == 154_533_888.0


# ---- zero-KV stages (DefaultPoolConfigurator.calculate_pool_sizes) ---------------------------------------------------


@pytest.mark.parametrize(("page", "tokens"), [(1, 9_223_372_036_854_775_807), (64, 9_223_372_036_854_775_744)])
def test_zero_attention_stage_of_an_mtp_target_reports_int64_max(page: int, tokens: int) -> None:
    # Qwen3-Next PP16 rank 0 holds layers 0-2: all linear attention (the first full layer is 3);
    # the KV lives on other stages, so 2**63 - 1 tokens page-floored; 5.8 never scales 0 layers
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, pp_size=16, pp_rank=0, page_size=page, max_running_requests=64,
                        **MTP_DRAFT)
    assert (cfg.num_layers, cfg.cell_size_bytes) == (0, 0)
    assert cfg.calculate_pool_sizes(40 * GIB, page).max_total_num_tokens == tokens


# ---- Mamba state (KVCacheConfigurator._handle_max_mamba_cache) -------------------------------------------------------


def test_mamba_state_pool_bytes_include_the_dummy_slot() -> None:
    # _handle_max_mamba_cache "rest -= (K + 1) * per": Qwen3-Next TP4, 46 GiB, no spec: K = int((bb - per) // per) with
    # bb = 46 * 0.9 / 1.9 GiB = 23,395,863,838.3 B -> K = 1,210 (as in test_hybrid_linear.py); (1,210 + 1) *
    # per
    budget = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64).mamba_budget(46 * GIB)
    assert budget.max_mamba_cache_size == 1_210
    assert budget.state_bytes == 1_211 * QWEN3_NEXT_TP4_PER_REQ == 23_392_567_296


def test_pp_scale_of_a_model_with_a_single_mamba_layer() -> None:
    # the PP scale of the Mamba state: scale = max_stage / max(len(mamba_layers), 1) = 1 / 1; Qwen3-Next cut to 2 layers
    # (interval 2: layer 0 linear, layer 1 full), PP2: stage 0 holds the only Mamba layer
    config = dict(load_preset_config(QWEN3_NEXT))
    config.update(num_hidden_layers=2, full_attention_interval=2)
    cfg = hybrid_linear(config, tp_size=4, pp_size=2, pp_rank=1)
    assert cfg.stage_mamba_cache_per_req == cfg.mamba_cache_per_req == 2_048 * 3 * 2 + 8 * 128 * 128 * 4


def test_spec_scratch_branch_a_under_attention_dp() -> None:
    # attn DP 2 at TP4: attention TP 2, per = 36 * ((8192 / 2) * 3 * 2 + 16 * 128 * 128 * 4) = 38,633,472;
    # A: K = 600 // 2 = 300; capped = min(max(1, 64 // 2), 300 // 3) = 32; scratch = per * 33 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=2, page_size=64, max_running_requests=64,
                        max_mamba_cache_size=600, **MTP_DRAFT)
    budget = cfg.mamba_budget(46 * GIB)
    assert (budget.stage_mamba_cache_per_req, budget.max_mamba_cache_size) == (38_633_472, 300)
    assert budget.spec_scratch_gib * GIB == 5_099_618_304.0


def test_spec_scratch_branch_a_capped_by_the_state_slots() -> None:
    # A: capped = min(max(1, 64), 60 // 3) = 20 slots get per-draft-token state: per * 21 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=64, max_mamba_cache_size=60,
                        **MTP_DRAFT)
    assert cfg.mamba_budget(46 * GIB).spec_scratch_gib * GIB == 21 * 4 * QWEN3_NEXT_TP4_PER_REQ == 1_622_605_824


def test_spec_branch_c_slot_count_at_44_gib() -> None:
    # C: bb = 44 * 0.9 / 1.9 * 2**30 = 22,379,040,121.26 B; K = int((bb - per * (1 + 4)) // (per * (1 + 4 / 3)))
    # = int(494.37) = 494 (one more per subtracted would give 493.9 -> 493)
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=64, **MTP_DRAFT)
    budget = cfg.mamba_budget(44 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("C", 494)
    assert budget.spec_scratch_gib * GIB == 65 * 4 * QWEN3_NEXT_TP4_PER_REQ  # capped = min(64, 494 // 3)


def test_spec_branch_c_under_attention_dp() -> None:
    # per 38,633,472 (attention TP 2): K = int((bb - per * 5) // (per * 7 / 3)) = 246;
    # capped = min(max(1, 64 // 2), 246 // 3) = 32: scratch = per * 33 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=2, page_size=64, max_running_requests=64, **MTP_DRAFT)
    budget = cfg.mamba_budget(44 * GIB)
    assert budget.max_mamba_cache_size == 246
    assert budget.spec_scratch_gib * GIB == 5_099_618_304.0


@pytest.mark.parametrize(("requests", "dp", "slots"), [(1, 1, 1), (64, 2, 32)])
def test_branch_b_slots_are_the_requests_per_dp_worker(requests: int, dp: int, slots: int) -> None:
    # B (radix cache off, max_running_requests given): K = max(1, mrr // dp)
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=dp, page_size=64, max_running_requests=requests,
                        disable_radix_cache=True)
    budget = cfg.mamba_budget(44 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("B", slots)


def test_spec_branch_c_capped_by_the_state_slots() -> None:
    # C at 44 GiB: K = 494 whatever mrr is; capped = min(max(1, 256), 494 // 3 = 164): scratch per * 165 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=256, **MTP_DRAFT)
    budget = cfg.mamba_budget(44 * GIB)
    assert budget.max_mamba_cache_size == 494
    assert budget.spec_scratch_gib * GIB == 165 * 4 * QWEN3_NEXT_TP4_PER_REQ == 12_749_045_760


@pytest.mark.parametrize(("available", "slots"), [(61_169_664, 0), (101_949_440, 1)])
def test_auto_fit_needs_at_least_one_mamba_slot(available: int, slots: int) -> None:
    # C without spec: bb = available * 0.9 / 1.9 = 1.5 * per -> K = int((bb - per) // per) = 0 (error);
    # 2.5 * per -> K = 1, and rest - 2 * per > 0 leaves KV memory
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64)
    if slots == 0:
        with pytest.raises(InsufficientMemoryError, match="max_mamba_cache_size=0"):
            cfg.mamba_budget(available)
    else:
        budget = cfg.mamba_budget(available)
        assert budget.max_mamba_cache_size == 1
        assert budget.kv_available_bytes == available - 2 * QWEN3_NEXT_TP4_PER_REQ == 63_315_968


# ---- hybrid linear: request cap and the Mamba pool (KVCacheConfigurator._handle_max_mamba_cache,
# KVCacheConfigurator.resolve_max_num_reqs; MambaPool)


def test_mamba_slots_for_exactly_one_request() -> None:
    # KVCacheConfigurator.resolve_max_num_reqs: min(64, 3 // 3) = 1 request is served; 2 // 3 = 0 is an error
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4)
    assert cfg.mamba_ratio == 3
    assert cfg.cap_max_running_requests(64, PoolSizes(max_total_num_tokens=1024, max_mamba_cache_size=3)) == 1
    with pytest.raises(InsufficientMemoryError, match="max_running_requests=0"):
        cfg.cap_max_running_requests(64, PoolSizes(max_total_num_tokens=1024, max_mamba_cache_size=2))


def test_given_mamba_cache_that_takes_the_whole_budget_is_an_error() -> None:
    # A: K = 600 without spec; rest = 601 * per / 2**30 - 601 * per / 2**30 = 0.0 -> no KV memory left
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, max_mamba_cache_size=600)
    with pytest.raises(InsufficientMemoryError, match="leaves no memory for the KV cache"):
        cfg.mamba_budget(601 * QWEN3_NEXT_TP4_PER_REQ)


def test_spec_state_without_a_topk_uses_the_dedup_conv_layout() -> None:
    # MambaPool: the dedup conv window needs eagle_topk <= 1; an unset topk counts as 1 (compute_swa_request_cap `k`)
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24)
    spec = {key: value for key, value in MTP_DRAFT.items() if key != "speculative_eagle_topk"}
    mamba = hybrid_linear(QWEN3_NEXT, tp_size=4, **spec).layout(sizes).extra[0]
    shapes = {b.name: b.shape for b in mamba.allocations}
    assert shapes["mamba._intermediate_conv_window_phys[0]"] == (36, 9, 2048, 6)  # Dd + K - 2 = 4 + 4 - 2


# ---- Mamba pool functions (MambaPool, HybridReqToTokenPool) ------------------------------------------------


def test_npu_conv_state_puts_the_window_first_for_mamba2_shapes() -> None:
    # MambaPool (Ascend): Mamba2/GDN conv (channels 2048, window 3) -> (Lm, size + 1, 3 + 0, 2048) without spec
    layout = mamba_pool_layout(size=24, spec_state_size=8, conv_shapes=((2048, 3),), temporal_shape=(8, 128, 128),
                               mamba_layer_ids=(0, 1, 2), conv_dtype=DType.BFLOAT16, ssm_dtype=DType.FLOAT32,
                               npu_conv=True)
    assert buffer_shapes(layout)["mamba.conv[0]"] == (3, 25, 3, 2048)
    assert dict(layout.attributes)["npu_conv"] == 1


def test_hybrid_request_table_maps_every_row_without_preallocation() -> None:
    # HybridReqToTokenPool: R + 1 rows in both the table and the row -> Mamba slot mapping
    layout = hybrid_req_to_token_layout(max_running_requests=8, max_context_len=100, mamba_size=24)
    found = buffer_shapes(layout)
    assert (found["req_to_token"], found["req_index_to_mamba_index_mapping"]) == ((9, 100), (9,))
