"""vLLM 0.33.0's budget rule, hand-computed (``vllm/v1/worker/gpu_worker.py Worker.determine_available_memory``,
``vllm/v1/worker/utils.py request_memory``, ``vllm/utils/mem_utils.py memory_profiling``) and the pieces it
takes: the CUDA total, the weights, the modelled profile overhead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.dtypes import DType
from kvstrategies.core.releases import parse_release
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError
from kvstrategies.presets import load_preset_config
from kvstrategies.vllm.planner import overhead
from kvstrategies.vllm.planner.budget import format_gib, given_budget, requested_memory
from kvstrategies.vllm.planner.deployment import plan_vllm
from kvstrategies.vllm.planner.gpu_memory import MEDIAN_RESERVED_MIB, cuda_total
from kvstrategies.vllm.planner.overhead import ProfileSettings, ProfileShape, profile_overhead
from kvstrategies.vllm.planner.request import VLLMPlanRequest
from kvstrategies.vllm.planner.weights import rope_buffer_bytes, vllm_weights
from tests.planner.test_checkpoint import write_safetensors

GIB = 2**30
LLAMA_8B = load_preset_config("llama-3.1-8b")
#: Llama-3.1-8B: 8,030,261,248 parameters in bf16, its RoPE cache 131,072 positions x 128 x 2 B, and each of the
#: 32 attention layers' four float32 scales (16 B; recorded: golden/vllm-0.34.0-weights/llama-3.1-8b-h100-tp1.json)
LLAMA_8B_WEIGHTS = 8_030_261_248 * 2 + 131_072 * 128 * 2 + 32 * 16


def req(**kw: object) -> VLLMPlanRequest:
    fields: dict[str, object] = {"model": "llama-3.1-8b", "source": {"preset": "llama-3.1-8b"}, "config": LLAMA_8B,
                                 "gpu": "H100-80GB"}  # fmt: skip
    fields.update(kw)
    fields.setdefault("release", parse_release("0.33.0", "vllm"))  # the hand-computed numbers are 0.33.0's
    return VLLMPlanRequest(**fields)  # type: ignore[arg-type]


def test_requested_memory_is_the_ceiling_of_total_times_utilization() -> None:
    """``math.ceil(init_snapshot.total_memory * gpu_memory_utilization)``: 85,094,039,552 B (79.25 GiB) x 0.92."""
    assert requested_memory(85_094_039_552, 0.92) == 78_286_516_388
    with pytest.raises(KVCacheConfigError, match="gpu-memory-utilization must be in"):
        requested_memory(85_094_039_552, 1.5)


def test_the_cuda_total_is_the_logged_one_else_nvidia_smi_minus_the_median_reservation() -> None:
    assert cuda_total("H100-80GB").total_bytes == round(79.18 * GIB) == 85_018_877_624
    assert cuda_total("H200").total_bytes == round(139.8 * GIB)
    h20 = cuda_total("H20")  # no vLLM log of its total: 97,871 MiB (nvidia-smi) less the median reservation
    assert h20.total_bytes == int((97_871 - MEDIAN_RESERVED_MIB) * 2**20)
    assert "median driver reservation" in h20.source
    assert 450 < MEDIAN_RESERVED_MIB < 650  # H100 479, A100-40GB 522, L40S 582 MiB ...


def test_weights_are_the_estimate_plus_the_rope_buffer() -> None:
    """``RotaryEmbedding`` registers ``cos_sin_cache``: max_position x rotary_dim in the model dtype; every
    attention layer its four float32 scales."""
    assert rope_buffer_bytes(LLAMA_8B, DType.BFLOAT16) == 131_072 * 128 * 2
    weights = vllm_weights(LLAMA_8B, tp=1, pp=1, dtype=DType.BFLOAT16)
    assert weights.per_stage == (LLAMA_8B_WEIGHTS,)
    assert format_gib(weights.fullest) == "14.99"  # what vLLM logs as "Model loading took 14.99 GiB"
    assert vllm_weights(LLAMA_8B, tp=1, pp=2, dtype=DType.BFLOAT16, weight_bytes=7).per_stage == (7, 7)


def test_profile_shape_reads_dense_and_moe_widths() -> None:
    assert ProfileShape.from_config(LLAMA_8B, 2) == ProfileShape(128_256, 4096, 14_336, 2)
    qwen_moe = ProfileShape.from_config(load_preset_config("qwen3-30b-a3b"), 2)
    assert (qwen_moe.vocab_size, qwen_moe.mlp_width) == (151_936, 8 * 768)  # top-8 of 768-wide experts
    assert ProfileShape.from_config(load_preset_config("gpt-oss-120b"), 2).mlp_width == 4 * 2880


def test_profile_overhead_llama_8b_h100_defaults() -> None:
    """8,192 batched tokens and 1,024 requests (an H100's server defaults): hidden states 8,192 x 4,096 x 2 B,
    sampler 38.32 B x 1,024 x 128,256, forward MLP 8,192 x 3 x 14,336 x 2 B (smaller, so not counted)."""
    shape = ProfileShape(128_256, 4096, 14_336, 2)
    got = profile_overhead(shape, ProfileSettings(8192, 1024))
    assert (got.hidden_states, got.sampler, got.forward) == (67_108_864, 5_032_724_398, 704_643_072)
    assert got.transient == 67_108_864 + 5_032_724_398
    assert got.resident == overhead.RESIDENT_WITH_GRAPHS_BYTES and got.multi_gpu == 0
    assert got.total == 5_099_833_262 + 483_910_537
    eager = profile_overhead(shape, ProfileSettings(8192, 1024, cuda_graphs=False))
    assert eager.resident == overhead.RESIDENT_NO_GRAPHS_BYTES
    old = profile_overhead(shape, ProfileSettings(8192, 1024, graphs_deducted=False))  # before vLLM 0.21
    assert old.resident == overhead.RESIDENT_NO_GRAPHS_BYTES
    tp2 = profile_overhead(shape, ProfileSettings(8192, 1024, tp_size=2, world_size=2))
    assert tp2.multi_gpu == overhead.MULTI_GPU_EXTRA_BYTES and tp2.forward == 8192 * 3 * 7168 * 2
    first_stage = profile_overhead(shape, ProfileSettings(8192, 1024, world_size=2, last_stage=False))
    assert (first_stage.sampler, first_stage.hidden_states) == (0, 0)  # the last stage samples
    few = profile_overhead(shape, ProfileSettings(8192, 8))  # 8 requests: the forward pass is the peak
    assert few.transient == 67_108_864 + 704_643_072


def test_the_budget_llama_8b_h100_by_hand() -> None:
    """requested ceil(85,018,877,624 x 0.92) = 78,217,367,415; minus the weights 16,094,076,928 and the
    overhead 5,583,743,799 (above) leaves 56,539,546,688 B: 26,960 blocks of 32 layers x 16 tokens x 8 heads
    x 256 B, 26,960 x 16 = 431,360 tokens at 131,072."""
    plan = plan_vllm(req())
    assert plan.budget.requested_bytes == 78_217_367_415
    assert plan.budget.available_bytes == 78_217_367_415 - LLAMA_8B_WEIGHTS - 5_583_743_799 == 56_539_546_176
    assert plan.answer.bytes_per_block == 2_097_152
    assert plan.answer.num_gpu_blocks == 56_539_546_176 // 2_097_152 == 26_960
    assert plan.answer.capacity.tokens == 431_360
    assert plan.answer.capacity.log_line.endswith("Maximum concurrency for 131,072 tokens per request: 3.29x")


def test_kv_cache_memory_bytes_is_exact_and_skips_the_profile() -> None:
    """40 GiB / 2,097,152 B a block = 20,480 blocks, 327,680 tokens; no weights or overhead enter."""
    plan = plan_vllm(req(kv_cache_memory_bytes=40 * GIB))
    assert plan.budget == given_budget(40 * GIB) and plan.weights is None
    assert (plan.answer.num_gpu_blocks, plan.answer.capacity.tokens) == (20_480, 327_680)


def test_pipeline_stages_size_by_the_smallest_budget() -> None:
    plan = plan_vllm(req(pipeline_parallel_size=2))
    stages = plan.budget.stages
    assert len(stages) == 2 and plan.budget.available_bytes == min(s.available for s in stages)
    assert stages[0].overhead.sampler == 0 < stages[1].overhead.sampler


def test_vllm_refuses_a_request_above_the_free_memory() -> None:
    with pytest.raises(InsufficientMemoryError, match=r"Free memory on device \(78\.57/79\.18 GiB\)"):
        plan_vllm(req(gpu_memory_utilization=0.995))


def test_vllm_refuses_weights_that_leave_no_cache() -> None:
    with pytest.raises(InsufficientMemoryError, match="No available memory for the cache blocks"):
        plan_vllm(req(model="llama-3.1-70b", source={"preset": "llama-3.1-70b"},
                      config=load_preset_config("llama-3.1-70b")))  # fmt: skip


def test_bad_requests_are_named() -> None:
    with pytest.raises(KVCacheConfigError, match="gpu-memory-utilization"):
        req(gpu_memory_utilization=0.0)
    with pytest.raises(KVCacheConfigError, match="name a GPU"):
        req(gpu=None)
    with pytest.raises(KVCacheConfigError, match="--max-num-seqs"):
        req(max_num_seqs=0)


def test_given_budget_refuses_zero() -> None:
    with pytest.raises(KVCacheConfigError, match="kv-cache-memory-bytes must be positive"):
        given_budget(0)


# ---- the weights' rope cache and the own-budget table, by hand ---------------------------------------------


def test_checkpoint_headers_add_the_rope_cache(tmp_path: Path) -> None:
    # a replicated norm of 16 bf16 = 32 B; RoPE cos_sin_cache: max_position 32 x rotary (16 / 2 heads = 8) x 2 B
    # = 512 B on every stage (vllm/model_executor/layers/rotary_embedding: a buffer beside the weights)
    write_safetensors(tmp_path / "model.safetensors", {"model.norm.weight": ("BF16", (16,))})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16,
              "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 64,
              "intermediate_size": 32, "max_position_embeddings": 32}  # fmt: skip
    weights = vllm_weights(config, tp=1, pp=1, dtype=DType.BFLOAT16, checkpoint=str(tmp_path))
    assert weights.per_stage == (32 + 512,) and "RoPE" in weights.source


def _own_budget_lines(argv: list[str], capsys: pytest.CaptureFixture[str], model: str = "llama-3.1-8b") -> list[str]:
    assert main(["compare", model, "--gpu", "H100", "--request-length", "8192", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("each engine on its own budget")) :]


def test_own_budget_row_starts_with_sglangs_columns(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-8B bf16: 131,072 B a token; 10 GiB given to SGLang: 81,920 tokens, 81,920 // 8,192 = 10 requests
    lines = _own_budget_lines(["--available-bytes", "10GiB", "--own-budgets"], capsys)
    assert lines[2].split()[:5] == ["8,192", "81,920", "10", lines[2].split()[3], "GiB"]
    assert lines[2].startswith(f"{8192:>14,}  {81920:>13,}  {10:>15,}  ")


def _gib_terms(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"([\d.]+) GiB", line)]


def test_why_the_budgets_differ_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3.5-35B-A3B (vision tower) at TP 2: SGLang subtracts its multimodal reservation, vLLM adds a multi-GPU term
    lines = _own_budget_lines(["--tp", "2", "--vllm-version", "0.33.0"], capsys, "qwen3.5-35b-a3b")
    why = next(i for i, line in enumerate(lines) if line.startswith("why the budgets differ"))
    sglang, vllm = lines[why + 1], lines[why + 2]
    assert sglang.startswith("  - SGLang: ") and sglang.endswith("(the planner's SGLang budget, docs/validation.md)")
    assert " multimodal = " in sglang
    # capacity - held - weights - slack - multimodal = budget, each printed to 0.01 GiB
    capacity, held, weights, slack, multimodal, budget = _gib_terms(sglang)
    assert abs(capacity - held - weights - slack - multimodal - budget) <= 0.03
    assert vllm.startswith("  - vLLM: ceil(") and vllm.endswith(
        "(vllm/v1/worker/gpu_worker.py Worker.determine_available_memory)"
    )
    # total, requested, weights, profile (= peak + resident + multi-GPU), budget = requested - weights - profile
    _, requested, weights, profile, peak, resident, multi_gpu, available = _gib_terms(vllm)
    assert multi_gpu > 0 and abs(peak + resident + multi_gpu - profile) <= 0.02
    assert abs(requested - weights - profile - available) <= 0.02


def test_the_rope_caches_get_rope_builds() -> None:
    """Each as vLLM 0.34.0's model on meta holds it (golden/vllm-0.34.0-weights): Gemma-3-27B a linear-scaling global
    cache of 131,072 x 8 rows and an unscaled local one, 128 wide, bf16: (1,048,576 + 131,072) x 128 x 2 =
    301,989,888 B; MiMo-V2-Flash two caches (its sliding-window layers' swa_rope_theta), 262,144 x 64 x 2 B each;
    gpt-oss a float32 cache, 131,072 x 64 x 4 B; DeepSeek-V4 two float32 caches; Falcon-7B the config class's
    2,048 rows x 64 x 2 B; YaRN's rows are original x factor (32,768 x 4 = 131,072 rows, not
    max_position_embeddings' 40,960)."""
    assert rope_buffer_bytes(load_preset_config("gemma-3-27b"), DType.BFLOAT16) == 301_989_888
    assert rope_buffer_bytes(load_preset_config("mimo-v2-flash"), DType.BFLOAT16) == 2 * 262_144 * 64 * 2
    assert rope_buffer_bytes(load_preset_config("gpt-oss-20b"), DType.BFLOAT16) == 131_072 * 64 * 4
    assert rope_buffer_bytes(load_preset_config("falcon-7b"), DType.BFLOAT16) == 2_048 * 64 * 2
    # DeepSeek-V4-Flash: DeepseekV4ScalingRotaryEmbedding keeps float32 caches, one for the sliding-window layers
    # (rope_theta, factor 1: 1,048,576 rows) and one for the compressed layers (compress_rope_theta, YaRN:
    # 65,536 x 16 rows), 64 wide: 536,870,912 B, the cos_sin_cache vLLM 0.34.0's model holds
    assert rope_buffer_bytes(load_preset_config("deepseek-v4-flash"), DType.BFLOAT16) == 2 * 1_048_576 * 64 * 4
    yarn = {**LLAMA_8B, "max_position_embeddings": 40_960,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32_768}}
    assert rope_buffer_bytes(yarn, DType.BFLOAT16) == 131_072 * 128 * 2
    dynamic = {**LLAMA_8B, "max_position_embeddings": 4_096, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    assert rope_buffer_bytes(dynamic, DType.BFLOAT16) == 8_192 * 128 * 2


def test_why_the_budgets_differ_under_the_extensible_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM 0.34.0: free after warmup - margin - peak = the measured KV bytes, each printed to 0.01 GiB."""
    lines = _own_budget_lines(["--tp", "2"], capsys, "qwen3.5-35b-a3b")
    why = next(i for i, line in enumerate(lines) if line.startswith("why the budgets differ"))
    vllm, outside = lines[why + 2], lines[why + 3]
    assert vllm.startswith("  - vLLM: free after warmup ") and "measure_kv_cache_bytes" in vllm
    free, margin, peak, available, weights, _resident = _gib_terms(vllm)
    assert abs(free - margin - peak - available) <= 0.02 and margin >= 1.0
    # outside weights and KV for vLLM: total - weights - the KV bytes; the weights differ by each engine's extras
    total = 79.18  # the H100's total vLLM logs (tests/fixtures/vllm_logs/gpu_totals.json)
    _, v_outside, s_weights, v_weights = _gib_terms(outside)
    assert abs(v_outside - (total - weights - available)) <= 0.03 and v_weights == weights != s_weights
    assert outside.endswith("(each engine's resident extras: RoPE cache, padding, copies)")


def test_rope_cache_of_a_partial_rotary_model() -> None:
    # vllm/model_executor/layers/rotary_embedding get_rope: rotary_dim = head_size x partial_rotary_factor;
    # cos_sin_cache is (max_position, rotary_dim): 4096 x (128 x 0.5 = 64) x 2 B = 524,288 B
    config = {"num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 4096,
              "partial_rotary_factor": 0.5}  # fmt: skip
    assert rope_buffer_bytes(config, DType.BFLOAT16) == 4096 * 64 * 2
    assert rope_buffer_bytes({**config, "partial_rotary_factor": 1.0}, DType.BFLOAT16) == 4096 * 128 * 2


def test_0_34_0s_extensible_kv_cache_measures_after_warmup() -> None:
    """``measure_kv_cache_bytes`` by hand, 100 GiB total, utilization unset (1.0), 20 GiB of weights, a 4 GiB
    profile peak (1 GiB hidden states + 3 GiB sampler), graphs on:
    non_kv = 20 GiB + 483,910,537 resident = 21,958,747,017; headroom = 107,374,182,400 - 654,982,513 held at start
    - non_kv = 84,760,452,870; peak = 4 GiB + the graph estimate 350,869,311 (483,910,537 - 133,041,226) =
    4,645,836,607; margin = int(0.75 x peak) = 3,484,377,455 (above the 1 GiB floor);
    kv = min(107,374,182,400 - non_kv, headroom - margin) - peak = 81,276,075,415 - 4,645,836,607."""
    from kvstrategies.vllm.planner.extensible import measure
    from kvstrategies.vllm.planner.overhead import ProfileOverhead

    profile = ProfileOverhead(GIB, 3 * GIB, GIB // 2, 483_910_537, 0)
    got = measure(100 * GIB, 100 * GIB, 20 * GIB, profile)
    assert (got.non_kv_used, got.headroom, got.peak, got.margin) == (
        21_958_747_017, 84_760_452_870, 4_645_836_607, 3_484_377_455)
    assert got.kv_bytes == 76_630_238_808
    # --gpu-memory-utilization 0.5: the request binds, 53,687,091,200 - non_kv - peak
    assert measure(100 * GIB, 53_687_091_200, 20 * GIB, profile).kv_bytes == 27_082_507_576
    # a small eager peak (no graph estimate): the 1 GiB floor is the margin
    eager = measure(100 * GIB, 100 * GIB, 20 * GIB, ProfileOverhead(GIB // 16, GIB // 32, GIB // 64, 133_041_226, 0))
    assert (eager.peak, eager.margin) == (GIB // 16 + GIB // 32, GIB)
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0: the graphs are still captured and measured, not kept in the peak
    assert measure(100 * GIB, 100 * GIB, 20 * GIB, profile, graph_estimate=False).peak == 4 * GIB
    # more than one GPU: the multi-GPU extra is used memory too (non_kv 21,958,747,017 + 1 GiB)
    multi = ProfileOverhead(GIB, 3 * GIB, GIB // 2, 483_910_537, GIB)
    assert measure(100 * GIB, 100 * GIB, 20 * GIB, multi).non_kv_used == 21_958_747_017 + GIB
    # weights that leave nothing: no negative cache
    assert measure(100 * GIB, 100 * GIB, 99 * GIB, profile).kv_bytes == 0


def test_the_extensible_budget_refuses_when_nothing_is_left() -> None:
    """95 GiB of weights on a 100 GiB GPU: the measured bytes are 0 (the floor), and vLLM has no cache blocks."""
    from kvstrategies.errors import InsufficientMemoryError
    from kvstrategies.vllm.planner.budget import extensible_budget
    from kvstrategies.vllm.planner.overhead import ProfileOverhead

    profile = ProfileOverhead(GIB, 3 * GIB, GIB // 2, 483_910_537, 0)
    with pytest.raises(InsufficientMemoryError, match="No available memory for the cache blocks"):
        extensible_budget(100 * GIB, None, [(95 * GIB, profile)], total_source="t", release="0.34.0")
    fits = extensible_budget(100 * GIB, None, [(20 * GIB, profile)], total_source="t", release="0.34.0")
    assert fits.available_bytes == 76_630_238_808 and fits.gpu_memory_utilization == 1.0


def test_the_extensible_cache_commits_whole_granules_per_segment() -> None:
    """``ExtensibleKVCache.blocks_within``: 3 segments of 1,000,000 B a block in 10 MiB: 3 blocks would map 2
    granules of 2 MiB per segment (12 MiB), 2 blocks map one each (6 MiB): 2; never above the capacity."""
    from kvstrategies.vllm.planner.extensible import blocks_within, physical_bytes, segment_strides
    from kvstrategies.vllm.strategies.sizing import KVCacheTensor

    assert physical_bytes(3, (1_000_000,) * 3) == 12 * 2**20
    assert blocks_within(10 * 2**20, (1_000_000,) * 3, 100) == 2
    assert blocks_within(10 * 2**20, (1_000_000,) * 3, 1) == 1
    assert blocks_within(6 * 2**20, (1_000_000,) * 3, 100) == 2  # an exact fit is kept
    assert blocks_within(3, (1, 1, 1), 100) == 0  # one block would map 3 granules
    assert blocks_within(4 * 2**20, (1,), 10) == 10  # 1-byte blocks: the capacity bounds them
    assert blocks_within(2**20, (), 10) == 0  # no segment, no block
    # 1,000 segments of 2-byte blocks in 1 TiB: each may map 2**40 / 1,000 / 2 MiB = 524.29 -> 524 granules, so
    # 524 x 2 MiB / 2 B = 549,453,824 blocks (of the 549,755,813 the bytes alone would hold)
    assert blocks_within(2**40, (2,) * 1_000, 10**12) == 549_453_824
    # layer-outermost, block-compact: one segment per distinct layer region (two groups alias from byte 0)
    a = KVCacheTensor(size=4_000, layers=(0, 2), layer_stride=1_000, block_stride=100)
    b = KVCacheTensor(size=4_000, layers=(1, 3), layer_stride=1_000, block_stride=100)
    assert segment_strides((a, b), "LBNHC", 10) == (100, 100)
    # a tensor's layers start at its offset: a region another tensor already holds keeps the first stride
    c = KVCacheTensor(size=2_000, layers=(0, 1), layer_stride=1_000, block_stride=100)
    d = KVCacheTensor(size=2_000, layers=(4,), layer_stride=1_000, block_stride=50, offset=1_000)
    e = KVCacheTensor(size=3_000, layers=(5,), layer_stride=1_000, block_stride=50, offset=2_000)
    assert segment_strides((c, d, e), "LBNHC", 10) == (100, 100, 50)
    # block-outermost: one stride, size // (capacity x stride) segments
    f = KVCacheTensor(size=6_000, layers=(0, 1, 2), layer_stride=200, block_stride=600)
    assert segment_strides((f,), "BLHNC", 10) == (600,)


def test_0_34_0_plans_the_extensible_kv_cache_end_to_end() -> None:
    """Llama-3.1-8B on an H100 under 0.34.0: the profiled figure (utilization 1.0) is logged and reserves the
    capacity; the measured 58,247,177,632 B hold 6,943 blocks of 8 MiB, but each of the 32 layer segments commits
    whole 2 MiB granules (8 blocks of 256 KiB): 6,936 blocks."""
    from kvstrategies.vllm.planner.budget import planning_release
    from kvstrategies.vllm.planner.deployment import plan_vllm

    plan = plan_vllm(req(release=parse_release("0.34.0", "vllm")))
    stage = plan.budget.limiting
    assert stage is not None and stage.measured is not None and stage.profiled is not None
    assert plan.budget.source == "extensible_kv_cache" and plan.budget.gpu_memory_utilization == 1.0
    assert stage.measured.kv_bytes == 58_247_177_632 and stage.measured.kv_bytes // 8_388_608 == 6_943
    assert plan.answer.num_gpu_blocks == 6_936
    assert plan.budget.logged_available_bytes == stage.profiled > stage.available
    given = plan_vllm(req(release=parse_release("0.34.0", "vllm"), kv_cache_memory_bytes=20 * GIB, max_model_len=8192))
    # 20 GiB // (32 layers x 64 tokens x 8 heads x 256 x 2 B = 8 MiB) = 2,560 blocks of 64 tokens
    assert (given.answer.block_size, given.answer.num_gpu_blocks) == (64, 2_560)
    assert planning_release(None).text == "0.34.0"
    assert planning_release("0.33.0").text == "0.33.0"

