"""vLLM 0.11.0: each release rule that sets it apart from 0.12.0, against a hand-computed expectation.

Sources (vLLM 0.11.0's own code): ``vllm/platforms/cuda.py CudaPlatformBase.get_attn_backend_cls`` (one backend by an
if/else chain that checks no cache dtype but fp8: ``vllm-selector-if-else-chain``) and ``check_and_update_config``
(FlashMLA's block set to 64 whenever it differs: ``vllm-mla-config-block-multiples``); the backends'
``__init__`` (Triton MLA, FlexAttention and, off Hopper, FlashAttention refuse any cache dtype but ``auto``:
``vllm-impl-quantized-cache-refusals``); ``vllm/v1/worker/gpu_model_runner.py GPUModelRunner.get_kv_cache_spec``
(every layer at the runner's cache dtype: ``vllm-layer-own-cache-dtype``; attention layers, then Mamba layers, then
indexer caches: ``vllm-runner-spec-order``); ``vllm/v1/core/kv_cache_utils.py get_kv_cache_configs`` (tensors not
shrunk to the smallest stage's blocks: ``vllm-pp-tensors-at-min-blocks``); ``FlashMLASparseBackend.get_name``
(``vllm-flashmla-sparse-name``), ``Qwen3NextGatedDeltaNet.mamba_type`` (``vllm-gdn-layer-type``) and
``vllm/transformers_utils/config.py _CONFIG_REGISTRY`` (no ``kimi_linear``: ``vllm-config-registry-0.12.0``). 0.12.0's
rules hold in 0.11.0 too. Each expectation was also answered by vLLM 0.11.0 itself through the bridge
(``golden/vllm-0.11.0/``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import UnsupportedConfigurationError

GIB = 2**30
#: a DeepSeek-V3.2 layer's block of 64 tokens in fp8_ds_mla: the latent 64 x 656 B and the indexer's keys 64 x 132 B
DSA_LAYER_BLOCK = 64 * 656 + 64 * 132


def _vllm(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_0_11_takes_a_bfloat16_cache() -> None:
    # golden/vllm-0.11.0/default-llama-3.1-8b-tp1-bf16-p1.json: FLASH_ATTN on H200, block 16; a layer's page is
    # 16 x 8 KV heads x 128 x 2 (K, V) x 2 B = 65,536 B, 32 layers 2,097,152 B a block: 40 GiB // that = 20,480
    # (0.12.0 finds no backend for kv_cache_dtype bfloat16)
    plan_11 = _vllm("llama-3.1-8b", "0.11.0", kv_cache_dtype="bf16", page_size=1)
    assert (plan_11.backends, plan_11.block_size) == (("FLASH_ATTN",), 16)
    assert plan_11.num_gpu_blocks == 40 * GIB // (32 * 65_536) == 20_480
    with pytest.raises(UnsupportedConfigurationError, match="found for cuda with head_size: 128, "):
        _vllm("llama-3.1-8b", "0.12.0", kv_cache_dtype="bf16", page_size=1)
    # golden/vllm-0.11.0/default-phi-3-mini-tp1-bf16-p1.json: its FlashAttention lists head size 96 (not 80), so
    # Phi-3-mini's 96-wide heads run on FLASH_ATTN, not the FLEX_ATTENTION of the 80 row
    assert _vllm("phi-3-mini", "0.11.0", kv_cache_dtype="fp8_e4m3", page_size=1).backends == ("FLASH_ATTN",)


def test_0_11_backends_refuse_a_non_auto_cache_when_built() -> None:
    # golden/vllm-0.11.0/vllm-gpu-a100-llama-3.1-8b-tp1-bf16.json: on A100 the chain picks FLASH_ATTN, whose __init__
    # counts bfloat16 as quantized (anything but auto) and has no FlashAttention 3 there
    with pytest.raises(UnsupportedConfigurationError, match="FlashAttention does not support fp8 kv-cache on this"):
        _vllm("llama-3.1-8b", "0.11.0", gpu="A100-40GB", kv_cache_dtype="bf16", page_size=1)
    # golden/vllm-0.11.0/vllm-gpu-a100-deepseek-v2-lite-tp1-fp8.json: TRITON_MLA off Hopper and SM 10.0
    with pytest.raises(UnsupportedConfigurationError, match="TritonMLA V1 with FP8 KV cache not yet supported"):
        _vllm("deepseek-v2-lite", "0.11.0", gpu="A100-80GB", kv_cache_dtype="fp8_e4m3", page_size=1)
    # on H200 FlashAttention 3 stores it: planned, as 0.12.0 plans it
    assert _vllm("llama-3.1-8b", "0.11.0", kv_cache_dtype="fp8_e4m3", page_size=1).backends == ("FLASH_ATTN",)


def test_0_11_stores_every_layer_at_the_runner_cache_dtype() -> None:
    # golden/vllm-0.11.0/default-falcon-7b-tp1-fp8-p64.json: Falcon's rotary attention is built without the cache
    # config, yet 0.11.0's runner gives every layer its fp8 dtype: 64 x 1 KV head x 64 x 2 x 1 B = 8,192 B a layer,
    # 32 layers 262,144 B a block, 40 GiB // that = 163,840 (0.12.0: 16,384 B a layer in bf16, 81,920 blocks)
    assert _vllm("falcon-7b", "0.11.0", kv_cache_dtype="fp8_e4m3", page_size=64).num_gpu_blocks == 163_840
    assert _vllm("falcon-7b", "0.12.0", kv_cache_dtype="fp8_e4m3", page_size=64).num_gpu_blocks == 81_920


def test_0_11_keeps_each_stage_tensors_at_its_own_blocks() -> None:
    # golden/vllm-0.11.0/default-llama-3.1-70b-pp3-rank2-tp1-fp8-p64.json: PP 3 of 80 layers is 27 / 27 / 26; a layer's
    # page 64 x 8 x 128 x 2 x 1 B = 131,072 B; rank 0's block 27 x 131,072 = 3,538,944 B: 40 GiB // that = 12,136
    # blocks for every rank; rank 2's own 26 x 131,072 = 3,407,872 B: 12,603 blocks, which 0.11.0 keeps as its
    # tensors (12,603 x 131,072 = 1,651,900,416 B a layer) where 0.12.0 shrinks them to 12,136 (1,590,689,792 B)
    fields: dict[str, object] = {"pp_size": 3, "pp_rank": 2, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    for release, size in (("0.11.0", 12_603 * 131_072), ("0.12.0", 12_136 * 131_072)):
        staged = _vllm("llama-3.1-70b", release, **fields)
        assert staged.num_gpu_blocks == 12_136
        assert {t.size for t in staged.tensors} == {size}, release
    assert 12_603 * 131_072 == 1_651_900_416


def test_0_11_sets_flashmla_block_64_whatever_is_given() -> None:
    # golden/vllm-0.11.0/npu-deepseek-v3-tp8-fp8-p128-t1024-cuda.json (H200, --block-size 128): 0.11.0 sets 64;
    # a latent of 576 B a token in fp8, 61 layers: 64 x 576 x 61 = 2,248,704 B a block, 40 GiB // that = 19,099
    # blocks (1,222,336 tokens); 0.12.0 keeps 128: 4,497,408 B, 9,549 blocks (1,222,272 tokens)
    fields: dict[str, object] = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 128}
    plan_11 = _vllm("deepseek-v3", "0.11.0", **fields)
    assert (plan_11.backends, plan_11.block_size, plan_11.num_gpu_blocks) == (("FLASHMLA",), 64, 19_099)
    plan_12 = _vllm("deepseek-v3", "0.12.0", **fields)
    assert (plan_12.block_size, plan_12.num_gpu_blocks) == (128, 9_549)


def test_0_11_sparse_model_names_and_order() -> None:
    # golden/vllm-0.11.0/dsa-deepseek-v3.2-tp8-fp8-p64.json: FLASHMLA_SPARSE_VLLM_V1 in fp8_ds_mla, 61 x 50,432 =
    # 3,076,352 B a block, 13,961 blocks as 0.12.0; the runner lists every latent (656 B a token), then every indexer
    # cache (132 B), where 0.12.0 lists each layer's indexer cache before its latent
    fields: dict[str, object] = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    plan_11 = _vllm("deepseek-v3.2", "0.11.0", **fields)
    assert plan_11.backends == ("DEEPSEEK_V32_INDEXER", "FLASHMLA_SPARSE_VLLM_V1")  # the indexer's unnamed in 0.11.0
    assert plan_11.num_gpu_blocks == 40 * GIB // (61 * DSA_LAYER_BLOCK) == 13_961
    assert [spec.page_size_bytes for _, spec in plan_11.layer_specs] == [64 * 656, 64 * 132]
    assert [spec.page_size_bytes for _, spec in _vllm("deepseek-v3.2", "0.12.0", **fields).layer_specs] == [
        64 * 132, 64 * 656]
    # golden/vllm-0.11.0/dsa-deepseek-v3.2-tp8-fp8-trtllm-p64.json (B200): the chain takes FlashMLA sparse before it
    # reads the CUTLASS_MLA the config set, so 0.11.0 plans what 0.12.0 refuses
    b200: dict[str, object] = {**fields, "platform": {"is_blackwell": True, "is_sm100": True}}
    assert _vllm("deepseek-v3.2", "0.11.0", **b200).num_gpu_blocks == 13_961
    with pytest.raises(UnsupportedConfigurationError, match="CUTLASS_MLA is not valid .*'sparse not supported'"):
        _vllm("deepseek-v3.2", "0.12.0", **b200)


def test_0_11_hybrid_lists_attention_first_and_names_gdn_linear_attention() -> None:
    # golden/vllm-0.11.0/hybrid-linear-qwen3-next-80b-a3b-tp4-bf16-p64.json: the full-attention group (layers 3, 7,
    # ..., 47) comes first, then the three GDN groups, whose spec says mamba_type linear_attention
    fields: dict[str, object] = {"tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64}
    groups = _vllm("qwen3-next-80b-a3b", "0.11.0", **fields).groups
    assert groups[0].layers == tuple(range(3, 48, 4))
    assert {g.spec.mamba_type for g in groups[1:]} == {"linear_attention"}
    groups_12 = _vllm("qwen3-next-80b-a3b", "0.12.0", **{**fields, "kv_cache_dtype": "fp8_e4m3"}).groups
    assert groups_12[0].layers == tuple(range(0, 48, 4)) and groups_12[0].spec.mamba_type == "gdn_attention"


def test_0_11_reads_no_kimi_linear_config() -> None:
    # golden/vllm-0.11.0/hybrid-linear-kimi-linear-48b-a3b-tp4-fp8-p64.json: no kimi_linear in its config registry nor
    # in its transformers 4 (0.12.0 reads the config and fails building the model)
    fields: dict[str, object] = {"tp_size": 4, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    with pytest.raises(UnsupportedConfigurationError, match="model type `kimi_linear` but Transformers does not"):
        _vllm("kimi-linear-48b-a3b", "0.11.0", **fields)
    with pytest.raises(UnsupportedConfigurationError, match="missing 1 required positional argument: 'indexer_rotary"):
        _vllm("kimi-linear-48b-a3b", "0.12.0", **fields)


def test_0_11_rules_are_listed_against_0_12() -> None:
    keys = {rule.key for rule in rules_differing(parse_release("0.11.0", VLLM), parse_release("0.12.0", VLLM))}
    assert keys == {"vllm-selector-if-else-chain", "vllm-impl-quantized-cache-refusals", "vllm-layer-own-cache-dtype",
                    "vllm-pp-tensors-at-min-blocks", "vllm-mla-config-block-multiples", "vllm-flashmla-sparse-name",
                    "vllm-runner-spec-order", "vllm-gdn-layer-type", "vllm-config-registry-0.12.0"}
