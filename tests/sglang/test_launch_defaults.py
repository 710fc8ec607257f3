"""Launch defaults of SGLang 0.5.23 (ServerArgs.resolve_once): worked launches and the rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.sglang.launch.defaults import (
    LaunchModelFacts,
    LaunchSettings,
    capacity_tier,
    estimate_kv_budget,
    float32_round,
    kv_budget_bytes,
    model_facts_from_hf_config,
    prefill_graph_batch_sizes,
    resolve_launch_defaults,
    vlm_fraction_factor,
)

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
LLAMA = LaunchModelFacts(architectures=("LlamaForCausalLM",), context_length=131072)
MLA = LaunchModelFacts(architectures=("DeepseekV3ForCausalLM",), is_mla=True)


def facts(name: str) -> LaunchModelFacts:
    cfg: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return model_facts_from_hf_config(cfg)


# worked launches: (#, fixture, GPU, TP, chunk, dmb, R, mfs, backend, page, KV dtype,
# effective SWA ratio, max running requests). "—" SWA cells are the 0.8 field fallback.
WORKED = [
    (1, "meta-llama--Llama-3.1-8B", "H100", 1, 8192, 256, 13904, 0.830, "fa3", 1, "auto", 0.8, None),
    (2, "meta-llama--Llama-3.1-8B", "B200", 1, 16384, 512, 26832, 0.854, "trtllm_mha", 64, "auto", 0.8, None),
    (3, "meta-llama--Llama-3.1-70B", "H200", 8, 8192, 512, 15312, 0.893, "fa3", 1, "auto", 0.8, None),
    (4, "meta-llama--Llama-3.1-70B", "H100", 4, 8192, 512, 14800, 0.819, "fa3", 1, "auto", 0.8, None),
    (5, "deepseek-ai--DeepSeek-V3", "H200", 8, 8192, 512, 16384, 0.886, "fa3", 1, "auto", 0.8, None),
    (6, "deepseek-ai--DeepSeek-V3", "B200", 8, 16384, 512, 28672, 0.844, "trtllm_mla", 64, "auto", 0.8, None),
    (7, "deepseek-ai--DeepSeek-V3.2", "B200", 8, 16384, 512, 28672, 0.844, "dsa", 64, "fp8_e4m3", 0.8, None),
    (8, "deepseek-ai--DeepSeek-V3.2", "H200", 8, 8192, 512, 16384, 0.886, "dsa", 64, "bfloat16", 0.8, None),
    (9, "deepseek-ai--DeepSeek-V4-Flash", "H200", 8, 8192, 512, 14848, 0.897, "dsv4", 256, "fp8_e4m3", 0.1, 256),
    (10, "deepseek-ai--DeepSeek-V4-Flash", "B200", 8, 16384, 512, 27136, 0.852, "dsv4", 256, "fp8_e4m3", 0.1, 256),
    (11, "openai--gpt-oss-120b", "H100", 1, 8192, 256, 13904, 0.830, "fa3", 1, "auto", 0.8, None),
    (12, "openai--gpt-oss-120b", "H100", 4, 8192, 512, 14800, 0.819, "fa3", 1, "auto", 0.8, None),
    (13, "openai--gpt-oss-120b", "B200", 1, 16384, 512, 26832, 0.854, "trtllm_mha", 64, "auto", 0.8, None),
    (14, "Qwen--Qwen3-Next-80B-A3B-Instruct", "H100", 4, 8192, 512, 14800, 0.819, "fa3", 1, "auto", 0.8, None),
    (15, "Qwen--Qwen3-Next-80B-A3B-Instruct", "B200", 4, 16384, 512, 27216, 0.852, "triton", 1, "auto", 0.8, None),
    (16, "XiaomiMiMo--MiMo-V2-Flash", "H200", 8, 8192, 512, 15312, 0.893, "fa3", 1, "auto", 0.8, None),
    (17, "XiaomiMiMo--MiMo-V2-Flash", "B200", 8, 16384, 512, 27728, 0.849, "fa4", 128, "auto", 0.8, None),
    (18, "meta-llama--Llama-4-Scout-17B-16E-Instruct", "H100", 8, 8192, 512, 15312, 0.812, "fa3", 1, "auto", 0.8, None),
    (19, "moonshotai--Kimi-K2-Instruct", "H200", 16, 8192, 512, 17408, 0.879, "fa3", 1, "auto", 0.8, None),
    (20, "zai-org--GLM-5", "H200", 8, 8192, 512, 16384, 0.886, "dsa", 64, "bfloat16", 0.8, None),
    (21, "google--gemma-3-27b-it", "H100", 1, 8192, 256, 13904, 0.830, "fa3", 1, "auto", 0.8, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("num", "name", "gpu", "tp", "chunk", "dmb", "reserve", "mfs", "backend", "page", "kv", "swa", "mrr"),
    WORKED,
    ids=[f"#{row[0]}" for row in WORKED],
)
def test_worked_launch(
    num: int,
    name: str,
    gpu: str,
    tp: int,
    chunk: int,
    dmb: int,
    reserve: int,
    mfs: float,
    backend: str,
    page: int,
    kv: str,
    swa: float,
    mrr: int | None,
) -> None:
    res = resolve_launch_defaults(facts(name), lookup_gpu(gpu), tp_size=tp)
    assert res.chunked_prefill_size == chunk
    assert res.cuda_graph_max_bs == dmb
    assert res.reserved_mib == reserve
    assert res.mem_fraction_static == mfs
    assert res.attention_backend == backend
    assert res.page_size == page
    assert res.kv_cache_dtype == kv
    assert res.swa_full_tokens_ratio == swa
    assert res.max_running_requests == mrr
    assert res.speculative_algorithm is None


def test_worked_launch_details() -> None:
    h100, h200, b200 = lookup_gpu("H100"), lookup_gpu("H200"), lookup_gpu("B200")
    # the prefill graph is disabled after the reserve counted it (SGLang's order).
    v3 = resolve_launch_defaults(facts("deepseek-ai--DeepSeek-V3"), b200, tp_size=8)
    assert v3.prefill_cuda_graph == "disabled" and v3.reserved_mib == 28672
    # DSA split backends.
    v32 = facts("deepseek-ai--DeepSeek-V3.2")
    on_b200 = resolve_launch_defaults(v32, b200, tp_size=8)
    assert (on_b200.dsa_prefill_backend, on_b200.dsa_decode_backend) == ("trtllm", "trtllm")
    on_h200 = resolve_launch_defaults(v32, h200, tp_size=8)
    assert (on_h200.dsa_prefill_backend, on_h200.dsa_decode_backend) == ("flashmla_sparse", "fa3")
    glm5 = resolve_launch_defaults(facts("zai-org--GLM-5"), h200, tp_size=8)
    assert (glm5.dsa_prefill_backend, glm5.dsa_decode_backend) == ("flashmla_sparse", "fa3")
    # DSV4's model-declared 0.1 counts as explicit -> ratio mode.
    v4 = resolve_launch_defaults(facts("deepseek-ai--DeepSeek-V4-Flash"), h200, tp_size=8)
    assert v4.swa_full_tokens_ratio_explicit and v4.prefill_cuda_graph == "disabled"
    assert v4.dsv4_attn_backend == "flashmla"
    # Mamba extra_buffer on both; SM100 got triton before it was resolved (SGLang's order).
    for gpu in (h100, b200):
        qn = resolve_launch_defaults(facts("Qwen--Qwen3-Next-80B-A3B-Instruct"), gpu, tp_size=4)
        assert qn.mamba_radix_cache_strategy == "extra_buffer" and not qn.disable_overlap_schedule
    # multimodal off by default, no VLM cut, breakable prefill graph kept.
    scout = resolve_launch_defaults(facts("meta-llama--Llama-4-Scout-17B-16E-Instruct"), h100, tp_size=8)
    assert scout.prefill_cuda_graph == "breakable"
    gemma = resolve_launch_defaults(facts("google--gemma-3-27b-it"), h100)
    assert gemma.disable_hybrid_swa_memory and not facts("meta-llama--Llama-3.1-8B").is_hybrid_swa
    assert v4.swa_full_tokens_ratio is not None and not gemma.swa_full_tokens_ratio_explicit


def test_applied_defaults_reproduce_the_log() -> None:
    res = resolve_launch_defaults(facts("meta-llama--Llama-3.1-8B"), lookup_gpu("H100"))
    assert [(a.setting, a.value) for a in res.applied] == [
        ("chunked_prefill_size", 8192),
        ("cuda_graph_max_bs", 256),
        ("mem_fraction_static", 0.83),
        ("attention_backend", "fa3"),
        ("page_size", 1),
        ("swa_full_tokens_ratio", 0.8),
    ]
    assert "13904" in res.reasons("mem_fraction_static")[0].reason
    assert res.explain().splitlines()[0].startswith("chunked_prefill_size = 8192  # capacity tier")


@pytest.mark.parametrize(
    ("gpu", "tp", "facts_", "prefill_on", "reserve", "mfs"),
    [  # memory_hook.handle_gpu_memory_settings quick reference
        ("H100", 8, LLAMA, True, 15312, 0.812),
        ("H200", 8, LLAMA, False, 14848, 0.897),
        ("H200", 16, MLA, True, 17408, 0.879),
        ("B200", 4, LLAMA, True, 27216, 0.852),
        ("B200", 8, LLAMA, False, 27136, 0.852),
        ("A100-40GB", 1, LLAMA, True, 7248, 0.823),
    ],
)
def test_quick_reference(
    gpu: str, tp: int, facts_: LaunchModelFacts, prefill_on: bool, reserve: int, mfs: float
) -> None:
    settings = LaunchSettings(disable_prefill_cuda_graph=not prefill_on)
    res = resolve_launch_defaults(facts_, lookup_gpu(gpu), tp_size=tp, settings=settings)
    assert (res.reserved_mib, res.mem_fraction_static) == (reserve, mfs)


def test_capacity_tier_and_prefill_list() -> None:
    assert capacity_tier(15360, 1) == (2048, 8)
    assert capacity_tier(24564, 1) == (4096, 48) and capacity_tier(24564, 4) == (4096, 160)
    assert capacity_tier(46068, 2) == (4096, 32)
    assert capacity_tier(97871, 4) == (8192, 512)
    assert capacity_tier(196592, 1) == (16384, 512)
    assert capacity_tier(None, 8) == (4096, 160)
    assert [len(prefill_graph_batch_sizes(b)) for b in (2048, 4096, 8192, 16384)] == [42, 50, 58, 74]


def test_ten_gib_floor_and_user_values() -> None:
    h100 = lookup_gpu("H100")
    small = resolve_launch_defaults(LLAMA, h100, settings=LaunchSettings(chunked_prefill_size=2048))
    assert (small.reserved_mib, small.mem_fraction_static) == (10240, 0.874)  # 4560 raised to 10 GiB
    user = resolve_launch_defaults(LLAMA, h100, settings=LaunchSettings(mem_fraction_static=0.9, page_size=16))
    assert user.mem_fraction_static == 0.9 and user.reserved_mib is None and user.page_size == 16
    assert not user.reasons("mem_fraction_static") and not user.reasons("page_size")
    # A user request cap lowers the table max_bs seen by the reserve: 13904 - 2*(256-64).
    capped = resolve_launch_defaults(LLAMA, h100, settings=LaunchSettings(max_running_requests=64))
    assert (capped.cuda_graph_max_bs, capped.reserved_mib, capped.mem_fraction_static) == (64, 13520, 0.834)
    unknown = resolve_launch_defaults(LLAMA, h100.with_capacity(None))
    assert (unknown.mem_fraction_static, unknown.chunked_prefill_size, unknown.cuda_graph_max_bs) == (0.95, 4096, 160)


def test_speculative_defaults() -> None:
    eagle = LaunchSettings(speculative_algorithm="EAGLE")
    h100, b200 = lookup_gpu("H100"), lookup_gpu("B200")
    llama = facts("meta-llama--Llama-3.1-8B")
    on_h100 = resolve_launch_defaults(llama, h100, settings=eagle)
    # the fraction and the graph batch are taken before the speculative default of 48 requests
    assert on_h100.mem_fraction_static == 0.830 and on_h100.cuda_graph_max_bs == 256
    assert on_h100.max_running_requests == 48 and on_h100.attention_backend == "fa3"
    steps = (on_h100.speculative_num_steps, on_h100.speculative_eagle_topk, on_h100.speculative_num_draft_tokens)
    assert steps == (5, 4, 8)
    on_b200 = resolve_launch_defaults(llama, b200, settings=eagle)
    assert (on_b200.attention_backend, on_b200.page_size) == ("flashinfer", 1)  # topk unset then
    v3 = resolve_launch_defaults(
        facts("deepseek-ai--DeepSeek-V3"), b200, tp_size=8, settings=LaunchSettings(speculative_algorithm="NEXTN")
    )
    assert v3.speculative_algorithm == "EAGLE" and v3.max_running_requests == 48
    assert (v3.speculative_num_steps, v3.speculative_eagle_topk, v3.speculative_num_draft_tokens) == (3, 1, 4)
    v4_eagle = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1)
    v4 = resolve_launch_defaults(facts("deepseek-ai--DeepSeek-V4-Flash"), b200, tp_size=8, settings=v4_eagle)
    assert v4.max_running_requests == 256 and v4.mem_fraction_static == 0.852
    ngram = resolve_launch_defaults(llama, h100, settings=LaunchSettings(speculative_algorithm="NGRAM"))
    assert ngram.speculative_num_draft_tokens == 12 and ngram.max_running_requests == 48
    user_topk1 = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=2, speculative_eagle_topk=1)
    assert resolve_launch_defaults(llama, h100, settings=user_topk1).speculative_num_draft_tokens == 3


def test_rejected_settings() -> None:
    v4, b200 = facts("deepseek-ai--DeepSeek-V4-Flash"), lookup_gpu("B200")
    wide = LaunchSettings(speculative_algorithm="EAGLE", speculative_eagle_topk=4, speculative_num_steps=3)
    with pytest.raises(KVCacheConfigError, match="apply_deepseek_v4_defaults"):
        resolve_launch_defaults(v4, b200, tp_size=8, settings=wide)
    with pytest.raises(KVCacheConfigError, match="fp8_e4m3 or bfloat16"):
        resolve_launch_defaults(v4, b200, tp_size=8, settings=LaunchSettings(kv_cache_dtype="fp8_e5m2"))
    with pytest.raises(KVCacheConfigError, match="trtllm_mha backend only supports topk = 1"):
        resolve_launch_defaults(
            LLAMA, b200, settings=LaunchSettings(attention_backend="trtllm_mha", speculative_algorithm="EAGLE")
        )
    with pytest.raises(KVCacheConfigError, match="DSA models accept"):
        resolve_launch_defaults(
            facts("deepseek-ai--DeepSeek-V3.2"), b200, settings=LaunchSettings(kv_cache_dtype="fp8_e5m2")
        )
    with pytest.raises(KVCacheConfigError, match="divisible"):
        resolve_launch_defaults(LLAMA, b200, tp_size=8, attn_dp_size=3)
    with pytest.raises(KVCacheConfigError, match="swa_full_tokens_ratio"):
        resolve_launch_defaults(LLAMA, b200, settings=LaunchSettings(swa_full_tokens_ratio=1.5))
    with pytest.raises(KVCacheConfigError, match="speculative_algorithm"):
        resolve_launch_defaults(LLAMA, b200, settings=LaunchSettings(speculative_algorithm="MEDUSA"))
    with pytest.raises(KVCacheConfigError, match="architectures"):
        model_facts_from_hf_config({"model_type": "llama"})
    bf16 = resolve_launch_defaults(v4, b200, tp_size=8, settings=LaunchSettings(kv_cache_dtype="bfloat16"))
    assert bf16.kv_cache_dtype == "bfloat16"


def test_dp_attention() -> None:
    res = resolve_launch_defaults(facts("deepseek-ai--DeepSeek-V3"), lookup_gpu("H200"), tp_size=8, attn_dp_size=8)
    # 512 + 1.5*8192 + 1024 + 2*512 + 3*512*8 + 1.5*512*8 + 1536 (undivided chunk,
    # parallel_hook.handle_data_parallelism)
    assert (res.reserved_mib, res.mem_fraction_static) == (34816, 0.758)
    assert res.chunked_prefill_size == 1024 and res.prefill_graph_max_bs == 1024


def test_pd_roles() -> None:
    h200 = lookup_gpu("H200")
    decode = resolve_launch_defaults(LLAMA, h200, tp_size=8, settings=LaunchSettings(disaggregation_mode="decode"))
    # tokens = max(512 * 1, 2048); 512 + 3072 + 1024 + 2*512 = 5632 -> 10 GiB floor; no prefill graph.
    assert (decode.reserved_mib, decode.mem_fraction_static) == (10240, 0.929)
    assert decode.disable_radix_cache and decode.prefill_cuda_graph == "disabled"
    prefill = resolve_launch_defaults(LLAMA, h200, tp_size=8, settings=LaunchSettings(disaggregation_mode="prefill"))
    assert (prefill.reserved_mib, prefill.mem_fraction_static, prefill.decode_cuda_graph) == (14288, 0.901, "disabled")


def test_multimodal_cut() -> None:
    assert vlm_fraction_factor(None, None) == 0.95
    assert vlm_fraction_factor(None, 1152) == pytest.approx(0.92477, abs=1e-5)  # `depth` is not read: 24
    qwen35 = resolve_launch_defaults(facts("Qwen--Qwen3.5-35B-A3B"), lookup_gpu("H200"), tp_size=2)
    assert qwen35.reserved_mib == 14032 and qwen35.prefill_cuda_graph == "breakable"  # allow-list
    assert qwen35.mem_fraction_static == pytest.approx(0.902 * 0.95 * 0.9734375, abs=1e-12)
    gemma = resolve_launch_defaults(
        facts("google--gemma-3-27b-it"), lookup_gpu("H100"), settings=LaunchSettings(enable_multimodal=True)
    )
    # prefill graph off (not on the allow-list): R = 13904 - 464; then x 0.95 * f(27 layers, 1152).
    assert gemma.reserved_mib == 13440
    assert gemma.mem_fraction_static == pytest.approx(0.835 * 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1)))


def test_hip_aiter_cut() -> None:
    mi300 = lookup_gpu("MI300X")
    res = resolve_launch_defaults(LLAMA, mi300)
    # 196592 MiB: chunk 16384, no prefill graph off CUDA: R = 512 + 24576 + 128 + 1024 = 26240.
    assert (res.attention_backend, res.reserved_mib, res.prefill_cuda_graph) == ("aiter", 26240, "disabled")
    assert res.mem_fraction_static == pytest.approx(0.867 * 0.85)
    user = LaunchSettings(mem_fraction_static=0.9)
    # the aiter cut scales a user's fraction too
    assert resolve_launch_defaults(LLAMA, mi300, settings=user).mem_fraction_static == pytest.approx(0.765)
    honored = LaunchSettings(mem_fraction_static=0.9, aiter_honor_explicit_mem_fraction=True)
    assert resolve_launch_defaults(LLAMA, mi300, settings=honored).mem_fraction_static == 0.9
    short = LaunchSettings(context_length=8192)
    assert resolve_launch_defaults(LLAMA, mi300, settings=short).mem_fraction_static == 0.867


def test_hybrid_linear_overrides() -> None:
    h100, b200 = lookup_gpu("H100"), lookup_gpu("B200")
    nemo = facts("nvidia--Nemotron-H-8B-Base-8K")
    default = resolve_launch_defaults(nemo, b200)
    assert (default.attention_backend, default.page_size, default.mamba_radix_cache_strategy) == (
        "trtllm_mha",
        64,
        "extra_buffer",
    )
    spec = resolve_launch_defaults(nemo, b200, settings=LaunchSettings(speculative_algorithm="EAGLE"))
    assert (spec.attention_backend, spec.page_size, spec.mamba_radix_cache_strategy) == (
        "trtllm_mha",
        64,
        "extra_buffer",
    )
    assert resolve_launch_defaults(facts("tiiuae--Falcon-H1-7B-Instruct"), b200).attention_backend == "triton"
    no_overlap = LaunchSettings(disable_overlap_schedule=True)
    qn = resolve_launch_defaults(facts("Qwen--Qwen3-Next-80B-A3B-Instruct"), h100, tp_size=4, settings=no_overlap)
    assert qn.mamba_radix_cache_strategy == "no_buffer" and qn.disable_overlap_schedule
    keep = LaunchSettings(mamba_radix_cache_strategy="extra_buffer")
    qn_b200 = resolve_launch_defaults(facts("Qwen--Qwen3-Next-80B-A3B-Instruct"), b200, tp_size=4, settings=keep)
    # attention_hook.handle_attention_backend_compatibility keeps SM100 default
    assert (qn_b200.attention_backend, qn_b200.page_size) == ("trtllm_mha", 64)
    assert resolve_launch_defaults(facts("ai21labs--Jamba-v0.1"), h100).mamba_radix_cache_strategy == "auto"
    radix_off = resolve_launch_defaults(nemo, h100, settings=LaunchSettings(disable_radix_cache=True))
    assert radix_off.mamba_radix_cache_strategy == "auto"


def test_platform_rules() -> None:
    npu = resolve_launch_defaults(facts("deepseek-ai--DeepSeek-V4-Flash"), lookup_gpu("Ascend-910B"), tp_size=16)
    assert (npu.attention_backend, npu.prefill_attention_backend, npu.page_size, npu.kv_cache_dtype) == (
        "dsv4",
        "dsv4",
        128,
        "bfloat16",
    )
    assert (npu.chunked_prefill_size, npu.cuda_graph_max_bs, npu.prefill_cuda_graph) == (8192, 256, "disabled")
    ampere = resolve_launch_defaults(facts("openai--gpt-oss-20b"), lookup_gpu("A100-80GB"))
    assert ampere.attention_backend == "triton"  # gpt-oss override off Hopper/Blackwell/HIP
    assert resolve_launch_defaults(LLAMA, lookup_gpu("A100-80GB")).attention_backend == "flashinfer"
    assert resolve_launch_defaults(MLA, lookup_gpu("B200"), tp_size=8).attention_backend == "trtllm_mla"
    rtx = resolve_launch_defaults(LLAMA, lookup_gpu("RTX-5090"))
    assert (rtx.attention_backend, rtx.chunked_prefill_size, rtx.cuda_graph_max_bs) == ("flashinfer", 4096, 48)
    assert resolve_launch_defaults(LLAMA, lookup_gpu("H100"), pp_size=2).prefill_cuda_graph == "disabled"


def test_kv_budget_worked_example() -> None:
    # KVCacheConfigurator._profile_available_bytes: Llama-3.1-70B bf16 on H200 TP8, mfs 0.893, P0 = 139.5 GiB, weights
    # 70.55e9 * 2 / 8 B.
    weights_gib = 70.55e9 * 2 / 8 / 2**30
    budget = kv_budget_bytes(139.5, 139.5 - weights_gib, 0.893)
    assert budget / 2**30 == pytest.approx(108.1, abs=0.05)
    est = estimate_kv_budget(143771, int(70.55e9 * 2 / 8), 0.893, overhead_gib=143771 / 1024 - 139.5)
    assert est.pre_gib == pytest.approx(139.5) and est.slack_gib == pytest.approx(14.9265)
    assert est.available_bytes == pytest.approx(budget, abs=2)
    with pytest.raises(InsufficientMemoryError, match=r"above 0\.500 .*= 0\.5000\)"):
        kv_budget_bytes(100.0, 50.0, 0.4)


def test_float32_all_reduce_rounding() -> None:
    assert float32_round(68_182_618_169) == 68_182_618_112  # KVCacheConfigurator._profile_available_bytes
    one = estimate_kv_budget(81559, 16_000_000_123, 0.83)
    many = estimate_kv_budget(81559, 16_000_000_123, 0.83, world_size=8)
    assert one.available_bytes != many.available_bytes
    assert abs(one.available_bytes - many.available_bytes) < 2**13


def test_planning_does_not_import_torch() -> None:
    code = (
        "import json, sys\n"
        "from kvstrategies.planner.gpus import lookup_gpu\n"
        "from kvstrategies.sglang.launch.defaults import model_facts_from_hf_config, resolve_launch_defaults\n"
        "from kvstrategies.planner.weights import estimate_weights\n"
        f"cfg = json.load(open({str(CONFIGS / 'deepseek-ai--DeepSeek-V3.json')!r}))\n"
        "resolve_launch_defaults(model_facts_from_hf_config(cfg), lookup_gpu('H200'), tp_size=8)\n"
        "estimate_weights(cfg).weight_bytes_per_rank(8)\n"
        "assert 'torch' not in sys.modules, 'planning imported torch'\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=60)


# ---- launch-default rules at their edges, by hand (ServerArgs and memory_hook of SGLang 0.5.23) ------------
# backend choices, page snaps, the KV budget, the graph and prefill reserves, speculative checks


LLAMA_KV8 = LaunchModelFacts(architectures=("LlamaForCausalLM",), context_length=131072, num_kv_heads=8)


DEEPSEEK = LaunchModelFacts(architectures=("DeepseekV3ForCausalLM",), is_mla=True, num_kv_heads=128)


def test_eagle_top1_at_page_1_keeps_fa3_on_hopper() -> None:
    """``is_no_spec_infer_or_topk_one``: EAGLE with top-k 1 at page 1 still takes fa3 on sm90
    (sglang.srt.server_args.ServerArgs.get_default_attn_backend); top-k 2 does not."""
    h100 = lookup_gpu("H100")
    top1 = LaunchSettings(speculative_algorithm="EAGLE", speculative_eagle_topk=1, page_size=1,
                          speculative_num_steps=3, speculative_num_draft_tokens=4)  # fmt: skip
    assert resolve_launch_defaults(LLAMA_KV8, h100, settings=top1).attention_backend == "fa3"
    top2 = LaunchSettings(speculative_algorithm="EAGLE", speculative_eagle_topk=2, page_size=1,
                          speculative_num_steps=3, speculative_num_draft_tokens=4)  # fmt: skip
    assert resolve_launch_defaults(LLAMA_KV8, h100, settings=top2).attention_backend != "fa3"


def test_hip_mla_backend_counts_kv_heads_over_attention_tp() -> None:
    """On HIP an MLA model takes aiter when ``max(1, kv_heads // max(1, tp // attn_dp))`` is 16 or
    128 (get_default_attn_backend): DeepSeek-V3's 128 heads at TP 1 -> 128 -> aiter; at TP 2 -> 64
    -> triton; at TP 8 -> 16 -> aiter."""
    mi300 = lookup_gpu("MI300X")
    backends = [resolve_launch_defaults(DEEPSEEK, mi300, tp_size=tp).attention_backend for tp in (1, 2, 8)]
    assert backends == ["aiter", "triton", "aiter"]


def test_flashmla_and_trtllm_mla_page_snaps() -> None:
    """flashmla forces page 64; trtllm_mla keeps 32 or 64 and snaps anything else to 64
    (ServerArgs._handle_attention_backend_compatibility)."""
    h200, b200 = lookup_gpu("H200"), lookup_gpu("B200")
    flash = LaunchSettings(attention_backend="flashmla", page_size=16)
    assert resolve_launch_defaults(DEEPSEEK, h200, tp_size=8, settings=flash).page_size == 64
    for page, snapped in ((32, 32), (64, 64), (65, 64), (16, 64)):
        trt = LaunchSettings(attention_backend="trtllm_mla", page_size=page)
        assert resolve_launch_defaults(DEEPSEEK, b200, tp_size=8, settings=trt).page_size == snapped, page


def test_trtllm_mha_keeps_16_to_128_and_snaps_the_rest_to_64() -> None:
    """trtllm_mha keeps page 16, 32, 64 or 128 and snaps others to 64
    (ServerArgs._handle_attention_backend_compatibility)."""
    b200 = lookup_gpu("B200")
    for page, snapped in ((16, 16), (32, 32), (128, 128), (17, 64), (8, 64)):
        settings = LaunchSettings(attention_backend="trtllm_mha", page_size=page)
        assert resolve_launch_defaults(LLAMA_KV8, b200, settings=settings).page_size == snapped, page


def test_max_prefill_tokens_defaults_to_16384() -> None:
    """ServerArgs.max_prefill_tokens = 16384 unless given."""
    h100 = lookup_gpu("H100")
    assert resolve_launch_defaults(LLAMA_KV8, h100).max_prefill_tokens == 16384
    given = LaunchSettings(max_prefill_tokens=8192)
    assert resolve_launch_defaults(LLAMA_KV8, h100, settings=given).max_prefill_tokens == 8192


def test_every_pre_0_5_19_source_names_a_server_args_function() -> None:
    """Before 0.5.19 each launch step cites the ServerArgs method (or helper) that ran it: a full
    ``sglang.srt.<module>.<function>`` path, never a bare module or a bare method name."""
    import re

    from kvstrategies.core.releases import parse_release
    from kvstrategies.sglang.launch.defaults import core

    hooks = {name: hook for name, hook in vars(core).items() if isinstance(hook, core.SglangHook)}
    assert len(hooks) >= 10
    for name, hook in hooks.items():
        source = hook.at(parse_release("0.5.18"))
        assert source == hook.server_args and hook.at(parse_release("0.5.19")) == hook.arg_groups
        assert re.match(r"^sglang\.srt\.[A-Za-z_.]+\.[A-Za-z_]\w*( \(.*\))?$", source), (name, source)


def test_dp_attention_2_turns_the_breakable_prefill_graph_off_until_0_5_16() -> None:
    """SGLang 0.5.16 disables the breakable prefill cuda graph under DP attention (attn DP 2 is
    enough: ServerArgs._handle_cuda_graph_config); 0.5.17 keeps it."""
    from kvstrategies.core.releases import parse_release

    h100 = lookup_gpu("H100")
    old = resolve_launch_defaults(LLAMA_KV8, h100, tp_size=2, attn_dp_size=2, release=parse_release("0.5.16"))
    new = resolve_launch_defaults(LLAMA_KV8, h100, tp_size=2, attn_dp_size=2, release=parse_release("0.5.17"))
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "breakable")


def test_kv_budget_keeps_half_a_gib() -> None:
    """``int((avail - pre x (1 - mfs)) x 2**30)``: 5.5 - 10 x 0.5 = 0.5 GiB -> 536,870,912 B
    (sglang.srt.model_executor.model_runner.ModelRunner.profile_max_num_token)."""
    from kvstrategies.sglang.launch.defaults import kv_budget_bytes

    assert kv_budget_bytes(10.0, 5.5, 0.5) == 536_870_912


def test_dp_attention_graph_reserve_adds_the_wide_term_above_300() -> None:
    """DP attention reserves ``3 x dmb x dp`` MiB, plus ``1.5 x dmb x dp`` when dmb > 300
    (ServerArgs._handle_gpu_memory_settings): TP 2, attn DP 2: dmb 299 -> 300 adds 2 + 3 x 2 = 8 MiB,
    300 -> 301 adds 8 + 1.5 x 301 x 2 = 911 MiB."""
    h100 = lookup_gpu("H100")
    reserve = {
        dmb: resolve_launch_defaults(
            LLAMA_KV8, h100, tp_size=2, attn_dp_size=2, settings=LaunchSettings(cuda_graph_max_bs=dmb)
        ).reserved_mib  # fmt: skip
        for dmb in (299, 300, 301)
    }
    assert (reserve[300] - reserve[299], reserve[301] - reserve[300]) == (8, 8 + 1.5 * 301 * 2)


def test_speculative_checks_accept_their_boundary_cases() -> None:
    """STANDALONE without DP attention and DFLASH at PP 1 resolve; EAGLE top-k 2 on trtllm_mha is
    refused (speculative_hook._handle_eagle_family / _handle_dflash)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    b200 = lookup_gpu("B200")
    standalone = LaunchSettings(speculative_algorithm="STANDALONE", speculative_draft_model_path="draft")
    assert resolve_launch_defaults(LLAMA_KV8, b200, settings=standalone).speculative_num_steps == 3
    dflash = LaunchSettings(speculative_algorithm="DFLASH", speculative_draft_model_path="draft")
    assert resolve_launch_defaults(LLAMA_KV8, b200, pp_size=1, settings=dflash).speculative_num_steps == 1
    top2 = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=2,
                          speculative_num_draft_tokens=4, attention_backend="trtllm_mha")  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="trtllm_mha backend only supports topk = 1"):
        resolve_launch_defaults(LLAMA_KV8, b200, settings=top2)


def test_mamba_no_buffer_needs_page_1() -> None:
    """A Mamba radix cache without the extra-buffer strategy takes no_buffer at page 1 (or unset)
    and refuses page 2 (sglang.srt.arg_groups.mamba_hook.validate_mamba_no_buffer)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    nemotron = LaunchModelFacts(architectures=("NemotronHForCausalLM",), is_mamba_radix=True)
    h100 = lookup_gpu("H100")
    for page in (None, 1):
        res = resolve_launch_defaults(nemotron, h100, settings=LaunchSettings(page_size=page))
        assert res.mamba_radix_cache_strategy == "no_buffer"
    with pytest.raises(KVCacheConfigError, match="validate_mamba_no_buffer"):
        resolve_launch_defaults(nemotron, h100, settings=LaunchSettings(page_size=2))


def test_qwen3_vl_on_a_large_hopper_lifts_the_decode_graph_to_512_requests() -> None:
    """Qwen3-VL on a >= 60 GiB Hopper: the decode graph batch follows --max-running-requests up to
    512 (arg_groups.model_overrides.qwen3_vl.expand_multimodal_decode_graph); 513 keeps the tier's 256."""
    qwen3_vl = LaunchModelFacts(
        architectures=("Qwen3VLForConditionalGeneration",), model_type="qwen3_vl", is_multimodal=True,
        context_length=131072,
    )  # fmt: skip
    h200 = lookup_gpu("H200")
    graphs = [
        resolve_launch_defaults(qwen3_vl, h200, settings=LaunchSettings(max_running_requests=mrr)).cuda_graph_max_bs
        for mrr in (300, 512, 513)
    ]
    assert graphs == [300, 512, 256]


def test_dflash_refuses_dp_attention_2() -> None:
    """DFLASH with attention DP 2 needs --enable-dp-lm-head (speculative_hook._handle_dflash)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    dflash = LaunchSettings(speculative_algorithm="DFLASH", speculative_draft_model_path="draft")
    with pytest.raises(KVCacheConfigError, match="enable-dp-lm-head"):
        resolve_launch_defaults(LLAMA_KV8, lookup_gpu("B200"), tp_size=2, attn_dp_size=2, settings=dflash)


def test_nemotron_h_on_b200_takes_trtllm_mha_only_at_top_k_1() -> None:
    """Nemotron-H on sm100: trtllm_mha without speculation or with top-k 1, triton for top-k 2
    (arg_groups.model_overrides.nemotron_h._nemotron_h_overrides)."""
    nemotron = LaunchModelFacts(architectures=("NemotronHForCausalLM",), is_mamba_radix=True, num_kv_heads=8)
    b200 = lookup_gpu("B200")
    backends = [
        resolve_launch_defaults(
            nemotron, b200,
            settings=LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=k,
                                    speculative_num_draft_tokens=drafts),
        ).attention_backend
        for k, drafts in ((1, 4), (2, 6))
    ]  # fmt: skip
    assert backends == ["trtllm_mha", "triton"]


def test_dsa_dcp_refuses_index_kpool_2_on_cuda() -> None:
    """--dcp-size 2 with a DSA model: index_kpool 1 resolves, 2 is refused
    (arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    def dsa(kpool: int) -> LaunchModelFacts:
        return LaunchModelFacts(architectures=("DeepseekV32ForCausalLM",), is_mla=True, is_dsa=True,
                                index_kpool=kpool, num_kv_heads=128)  # fmt: skip

    h200 = lookup_gpu("H200")
    assert resolve_launch_defaults(dsa(1), h200, tp_size=8, dcp_size=2).attention_backend == "dsa"
    with pytest.raises(KVCacheConfigError, match="index_kpool=2"):
        resolve_launch_defaults(dsa(2), h200, tp_size=8, dcp_size=2)


def test_npu_table_boundary_at_32_gib() -> None:
    """Ascend, TP 1: up to 32,768 MiB chunk 4,096 and decode graph 16; above it 8,192 and 64
    (sglang.srt.arg_groups.platform_hook.handle_platform_defaults)."""
    from kvstrategies.planner.gpus import Accelerator

    rows = [
        (res.chunked_prefill_size, res.cuda_graph_max_bs)
        for res in (resolve_launch_defaults(LLAMA_KV8, Accelerator("npu", mem, "npu")) for mem in (32768, 32769))
    ]
    assert rows == [(4096, 16), (8192, 64)]


def test_dp_attention_does_not_reclamp_a_deepep_graph_list_at_its_own_size() -> None:
    """DeepEP fixes the prefill graph list to the 2,048 default's buckets aligned to 8 (38 sizes,
    cuda_graph_hook.apply_deepep_adjustments); DP attention 2 with chunk 4,096 halves the chunk to
    2,048, not above max_bs 2,048, so the list stays (parallel_hook re-clamps only a larger one)."""
    moe = LaunchModelFacts(architectures=("Qwen3MoeForCausalLM",), context_length=40960, num_kv_heads=4)
    settings = LaunchSettings(moe_a2a_backend="deepep", chunked_prefill_size=4096)
    res = resolve_launch_defaults(moe, lookup_gpu("H100"), tp_size=2, attn_dp_size=2, settings=settings)
    assert (res.chunked_prefill_size, res.prefill_graph_max_bs, res.prefill_graph_bs_count) == (2048, 2048, 38)


def test_reserve_counts_at_least_2048_prefill_tokens() -> None:
    """Chunked prefill off: ``tokens = max(max_prefill_tokens, 2048)`` in ``R = 512 + 1.5 tokens + ...``
    (memory_hook.handle_gpu_memory_settings); on a 46,068 MiB L40S (no 10,240 floor) 1,024 and
    2,048 reserve the same, 4,096 adds 1.5 x 2,048 = 3,072 MiB."""
    l40s = lookup_gpu("L40S")
    reserve = {
        tokens: resolve_launch_defaults(
            LLAMA_KV8, l40s, settings=LaunchSettings(chunked_prefill_size=-1, max_prefill_tokens=tokens)
        ).reserved_mib
        for tokens in (1024, 2048, 4096)
    }
    assert reserve[1024] == reserve[2048]
    assert reserve[4096] - reserve[2048] == 1.5 * 2048


def test_eagle_top_k_2_backend_check_applies_only_above_page_1() -> None:
    """Top-k > 1 at page > 1 needs flashinfer, fa3 or triton (speculative_hook._handle_eagle_family):
    torch_native passes with the page unset and is refused at page 2."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    def eagle(page: int | None) -> LaunchSettings:
        return LaunchSettings(
            speculative_algorithm="EAGLE",
            speculative_num_steps=3,
            speculative_eagle_topk=2,
            speculative_num_draft_tokens=6,
            page_size=page,
            attention_backend="torch_native",
        )

    h100 = lookup_gpu("H100")
    assert resolve_launch_defaults(LLAMA_KV8, h100, settings=eagle(None)).attention_backend == "torch_native"
    with pytest.raises(KVCacheConfigError, match="page_size > 1 needs"):
        resolve_launch_defaults(LLAMA_KV8, h100, settings=eagle(2))


def test_reserve_counts_no_decode_graph_as_zero_batches() -> None:
    """``reserved_memory_mib`` reads an unset decode-graph batch as 0: the DP-attention term
    ``3 x dmb x dp`` then adds nothing, exactly as dmb 0 (memory_hook.handle_gpu_memory_settings)."""
    from dataclasses import replace

    from kvstrategies.sglang.launch.defaults import reserved_memory_mib
    from kvstrategies.sglang.launch.defaults.core import LaunchInputs

    l40s = lookup_gpu("L40S")
    inp = LaunchInputs(LLAMA_KV8, l40s, 2, 1, 2)
    res = resolve_launch_defaults(LLAMA_KV8, l40s, tp_size=2, attn_dp_size=2)
    unset, zero = replace(res, cuda_graph_max_bs=None), replace(res, cuda_graph_max_bs=0)
    assert reserved_memory_mib(inp, unset) == reserved_memory_mib(inp, zero)
    assert reserved_memory_mib(inp, replace(res, cuda_graph_max_bs=1)) - reserved_memory_mib(inp, zero) == 2 + 3 * 2


def test_speculative_step_reads_an_unset_page_as_page_1() -> None:
    """``speculative_step`` on its own (it is public) treats an unset page as 1: top-k 2 with
    torch_native passes the page > 1 backend check."""
    from dataclasses import replace

    from kvstrategies.sglang.launch.defaults import speculative_step
    from kvstrategies.sglang.launch.defaults.core import LaunchInputs, ResolutionDraft

    h100 = lookup_gpu("H100")
    settings = LaunchSettings(
        speculative_algorithm="EAGLE",
        speculative_num_steps=3,
        speculative_eagle_topk=2,
        speculative_num_draft_tokens=6,
        attention_backend="torch_native",
    )
    res = ResolutionDraft.of(replace(resolve_launch_defaults(LLAMA_KV8, h100, settings=settings), page_size=None))
    speculative_step(LaunchInputs(LLAMA_KV8, h100, settings=settings), res)
    assert res.page_size is None


def test_the_draft_and_the_resolution_hold_the_same_settings() -> None:
    """``ResolutionDraft`` repeats :class:`LaunchResolution`'s fields (a frozen dataclass cannot
    share them with a mutable one): the same names, types and defaults, in the same order, so a
    setting added to one and not the other fails here, not in a plan."""
    from dataclasses import MISSING, fields

    from kvstrategies.sglang.launch.defaults.core import LaunchResolution, ResolutionDraft

    def settings(cls: type) -> list[tuple[str, object, object]]:
        return [(f.name, f.type, f.default) for f in fields(cls) if f.name != "applied"]

    assert settings(ResolutionDraft) == settings(LaunchResolution)
    assert [f.name for f in fields(ResolutionDraft)][-1] == "applied" and len(settings(LaunchResolution)) == 31
    assert fields(LaunchResolution)[0].default is MISSING  # the GPU's memory is always given
    draft = ResolutionDraft(gpu_mem_mib=80_000.0, page_size=64)
    assert ResolutionDraft.of(draft.freeze()) == draft
