"""Parameter counts against published figures, weight bytes by format, per-rank sharding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.weights import ParamKind, count_params, estimate_weights, get_pp_indices

CONFIGS = Path(__file__).parent / "fixtures" / "configs"


def load(name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())  # some hold Infinity
    return cfg


# (fixture, published parameter count of the main model (no MTP, no vision tower), source)
PUBLISHED = [
    ("meta-llama--Llama-3.1-8B", 8.03e9, "model card 8B; HF 8,030,261,248"),
    ("meta-llama--Llama-3.1-70B", 70.6e9, "HF 70,553,706,496"),
    ("meta-llama--Llama-3.1-405B", 405.9e9, "HF 405,853,388,800"),
    ("mistralai--Mistral-7B-v0.1", 7.24e9, "HF 7,241,732,096"),
    ("mistralai--Mixtral-8x7B-v0.1", 46.7e9, "HF 46.7B"),
    ("Qwen--Qwen3-8B", 8.2e9, "model card 8.2B"),
    ("Qwen--Qwen2.5-7B", 7.61e9, "model card 7.61B"),
    ("Qwen--Qwen3-30B-A3B", 30.5e9, "model card 30.5B"),
    ("Qwen--Qwen3-235B-A22B", 235e9, "model card 235B"),
    ("Qwen--Qwen3-Next-80B-A3B-Instruct", 80e9, "model card 80B"),
    ("microsoft--Phi-3-mini-4k-instruct", 3.82e9, "HF 3.82B"),
    ("google--gemma-2-9b-it", 9.24e9, "HF 9.24B"),
    ("openai--gpt-oss-120b", 116.8e9, "model card 116.8B"),
    ("openai--gpt-oss-20b", 20.9e9, "model card 20.9B"),
    ("deepseek-ai--DeepSeek-V3", 671e9, "model card 671B main + 14B MTP"),
    ("deepseek-ai--DeepSeek-V3.2", 671e9, "as V3 (+ DSA indexer, ~0.85B)"),
    ("deepseek-ai--DeepSeek-V2-Lite", 15.7e9, "model card 15.7B"),
    ("moonshotai--Kimi-K2-Instruct", 1026.5e9, "HF 1026.5B (model card: 1T)"),
    ("MiniMaxAI--MiniMax-M2.5", 230e9, "MiniMax-M2 family: 230B total"),
    ("zai-org--GLM-4.5", 355e9, "model card 355B (HF 358B with MTP)"),
    ("zai-org--GLM-5", 744e9, "744B total"),
    ("ai21labs--Jamba-v0.1", 52e9, "model card 52B (HF 51.6B)"),
    ("XiaomiMiMo--MiMo-V2-Flash", 309e9, "model card 309B"),
]


@pytest.mark.parametrize(("name", "published", "source"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_main_params_within_one_percent(name: str, published: float, source: str) -> None:
    est = estimate_weights(load(name))
    assert est.main_params == pytest.approx(published, rel=0.01), source


@pytest.mark.parametrize(
    ("name", "exact"),
    [
        ("meta-llama--Llama-3.1-8B", 8_030_261_248),
        ("meta-llama--Llama-3.1-70B", 70_553_706_496),
        ("meta-llama--Llama-3.1-405B", 405_853_388_800),
        ("mistralai--Mistral-7B-v0.1", 7_241_732_096),
        ("mistralai--Mixtral-8x7B-v0.1", 46_702_792_704),
        ("Qwen--Qwen3-8B", 8_190_735_360),
    ],
)
def test_dense_counts_are_exact(name: str, exact: int) -> None:
    assert count_params(load(name)) == (exact, 0)


def test_mtp_is_counted_separately() -> None:
    v3 = estimate_weights(load("deepseek-ai--DeepSeek-V3"))
    # One MoE layer (~11.5B) + eh_proj + its embedding/head copies: the "14B MTP" of 685B.
    assert v3.mtp_params == pytest.approx(13.46e9, rel=0.01)
    assert v3.total_params == pytest.approx(685e9, rel=0.01)
    glm = estimate_weights(load("zai-org--GLM-4.5"))
    assert glm.total_params == pytest.approx(358e9, rel=0.01)  # HF count includes the MTP layer
    assert estimate_weights(load("Qwen--Qwen3.5-35B-A3B")).mtp_params > 0  # mtp_num_hidden_layers
    assert estimate_weights(load("MiniMaxAI--MiniMax-M2.5")).mtp_params > 0  # num_mtp_modules
    assert estimate_weights(load("moonshotai--Kimi-K2-Instruct")).mtp_params == 0


def test_deepseek_v4_is_approximate() -> None:
    flash = estimate_weights(load("deepseek-ai--DeepSeek-V4-Flash"))
    pro = estimate_weights(load("deepseek-ai--DeepSeek-V4-Pro"))
    assert flash.main_params == pytest.approx(284e9, rel=0.03)
    assert pro.total_params == pytest.approx(1.6e12, rel=0.03)
    assert flash.fmt.expert_bytes == 0.5 + 1 / 32  # expert_dtype fp4
    assert flash.fmt.attention_bytes == 1 + 4 / 128**2  # fp8 128x128 blocks


def test_hybrid_linear_families() -> None:
    nemotron = estimate_weights(load("nvidia--Nemotron-H-8B-Base-8K"))  # file holds Infinity
    assert nemotron.main_params == pytest.approx(8.1e9, rel=0.02)
    assert sum(1 for layer in nemotron.layers if any(g.name == "in_proj" for g in layer)) == 24
    falcon_h1 = estimate_weights(load("tiiuae--Falcon-H1-7B-Instruct"))
    assert all({"q_proj", "in_proj", "mlp.gate_up_proj"} <= {g.name for g in layer} for layer in falcon_h1.layers)
    qwen_next = estimate_weights(load("Qwen--Qwen3-Next-80B-A3B-Instruct"))
    attn = [i for i, layer in enumerate(qwen_next.layers) if any(g.name == "q_proj" for g in layer)]
    assert attn == list(range(3, 48, 4))  # (i + 1) % full_attention_interval == 0


def test_tied_embeddings_count_once() -> None:
    cfg = load("tiiuae--falcon-7b")  # no tie key: FalconConfig default ties them
    tied = estimate_weights(cfg)
    assert tied.tied and tied.main_params == pytest.approx(6.92e9, rel=0.005)
    untied = estimate_weights({**cfg, "tie_word_embeddings": False})
    assert untied.main_params - tied.main_params == 65024 * 4544


def test_weight_formats() -> None:
    v3 = estimate_weights(load("deepseek-ai--DeepSeek-V3"))
    assert v3.fmt.name == "fp8-block"
    assert v3.fmt.bytes_per_param(ParamKind.EXPERT) == 1 + 4 / 16384
    assert v3.fmt.bytes_per_param(ParamKind.EMBEDDING) == 2
    assert v3.fmt.bytes_per_param(ParamKind.ROUTER) == 2
    assert 670e9 < v3.weight_bytes() < 680e9
    oss = estimate_weights(load("openai--gpt-oss-120b"))  # no torch_dtype; mxfp4 experts only
    assert oss.fmt.name == "mxfp4-experts"
    assert oss.fmt.expert_bytes == 0.53125 and oss.fmt.attention_bytes == 2
    assert 60e9 < oss.weight_bytes() < 70e9  # fits one 80 GB GPU, as published
    assert 12e9 < estimate_weights(load("openai--gpt-oss-20b")).weight_bytes() < 16e9
    kimi = estimate_weights(load("moonshotai--Kimi-K2-Instruct"))
    assert kimi.weight_bytes() == pytest.approx(1.029e12, rel=0.005)


def test_dtype_and_quantization_overrides() -> None:
    cfg = load("meta-llama--Llama-3.1-8B")
    assert estimate_weights(cfg).weight_bytes() == 2 * 8_030_261_248
    assert estimate_weights(cfg, dtype="float32").weight_bytes() == 4 * 8_030_261_248
    fp8 = estimate_weights(cfg, quantization="fp8").weight_bytes()
    embed_head, norms = 2 * 128256 * 4096, 2 * 4096 * 32 + 4096
    linear = 8_030_261_248 - embed_head - norms
    # --quantization fp8 on a 16-bit checkpoint quantizes at load: one fp8 byte per linear weight
    # (sglang/srt/layers/quantization/fp8.py, Fp8LinearMethod.process_weights_after_loading with
    # is_checkpoint_fp8_serialized False; the fp32 per-channel scale is 4 bytes per output row)
    assert fp8 == pytest.approx(2 * (embed_head + norms) + linear * 1, abs=1)
    gemma2 = load("google--gemma-2-9b-it")
    assert (
        estimate_weights({**gemma2, "torch_dtype": "float32"}).weight_bytes() == estimate_weights(gemma2).weight_bytes()
    )  # SGLang's `auto` serves float32 checkpoints in 16 bits
    assert estimate_weights(cfg, quantization="w4a16").fmt.dense_bytes == pytest.approx(0.5 + 2.5 / 128)
    with pytest.raises(KVCacheConfigError, match="unsupported quantization"):
        estimate_weights({**cfg, "quantization_config": {"quant_method": "bitsandbytes"}})


def test_per_rank_tensor_parallel() -> None:
    est = estimate_weights(load("meta-llama--Llama-3.1-70B"))
    total = est.weight_bytes()
    replicated = 2 * (2 * 8192 * 80 + 8192)  # norms, bf16, on every rank
    assert est.weight_bytes_per_rank(8) * 8 - total == pytest.approx(7 * replicated, abs=8)
    # 8 KV heads at TP16: one head per rank, replicated, not 1/16 of the KV projections.
    big = estimate_weights(load("meta-llama--Llama-3.1-405B"))
    kv = next(g for g in big.layers[0] if g.name == "kv_proj")
    assert kv.per_rank(16) == kv.per_rank(8) == kv.count / 8
    # MLA down-projections (q_a, kv_a) are replicated: 8 ranks hold more than one copy.
    v3 = estimate_weights(load("deepseek-ai--DeepSeek-V3"))
    assert v3.weight_bytes_per_rank(8) * 8 > v3.weight_bytes()


def test_per_rank_pipeline_parallel() -> None:
    assert [get_pp_indices(61, r, 4) for r in range(4)] == [(0, 15), (15, 30), (30, 45), (45, 61)]
    est = estimate_weights(load("meta-llama--Llama-3.1-8B"))
    stages = [est.stage_bytes(1, 2, r) for r in range(2)]
    assert sum(stages) == pytest.approx(est.weight_bytes(), abs=2)
    assert est.weight_bytes_per_rank(1, 2) == max(stages)
    tied = estimate_weights(load("google--gemma-2-9b-it"))  # the last stage needs its own head
    split = sum(tied.stage_bytes(1, 2, r) for r in range(2))
    assert split - tied.weight_bytes() == pytest.approx(2 * 256000 * 3584, abs=2)
    mtp = estimate_weights(load("deepseek-ai--DeepSeek-V3"))
    with_draft = mtp.weight_bytes_per_rank(8, include_mtp=True) - mtp.weight_bytes_per_rank(8)
    assert 11e9 / 8 < with_draft < 13e9 / 8  # the MTP layer, sharing the target's embed/head
    with pytest.raises(KVCacheConfigError):
        est.stage_bytes(1, 2, 2)
