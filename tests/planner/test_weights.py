"""Parameter counts against published figures, weight bytes by format, per-rank sharding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.weights import ParamKind, _dsv4_ratio, count_params, estimate_weights, get_pp_indices

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


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
    # one RMSNorm of hidden_size (4,096) before each single-mixer layer (sglang.srt.models.nemotron_h: ``norm``)
    assert all(g.count == 4_096 for layer in nemotron.layers for g in layer if g.name == "layer_norms")
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
    # LlamaForCausalLM builds its untied lm_head on every stage (sglang/srt/models/llama.py,
    # LlamaForCausalLM.__init__): stage 0 holds a second 128,256 x 4,096 bf16 head
    assert sum(stages) == pytest.approx(est.weight_bytes() + 128256 * 4096 * 2, abs=2)
    assert est.weight_bytes_per_rank(1, 2) == max(stages)
    tied = estimate_weights(load("google--gemma-2-9b-it"))  # the last stage needs its own head
    split = sum(tied.stage_bytes(1, 2, r) for r in range(2))
    assert split - tied.weight_bytes() == pytest.approx(2 * 256000 * 3584, abs=2)
    mtp = estimate_weights(load("deepseek-ai--DeepSeek-V3"))
    with_draft = mtp.weight_bytes_per_rank(8, include_mtp=True) - mtp.weight_bytes_per_rank(8)
    assert 11e9 / 8 < with_draft < 13e9 / 8  # the MTP layer, sharing the target's embed/head
    with pytest.raises(KVCacheConfigError):
        est.stage_bytes(1, 2, 2)


# ---- parameter groups by hand: DeepSeek-V4, KDA/GDN, Mamba mixers, MTP layers, vision towers ---------------


def test_dsv4_layers_past_compress_ratios_have_no_compressor() -> None:
    """A layer index past ``compress_ratios`` (the MTP layer of a list that covers only the decoder)
    reads ratio 0: no compressor weights (sglang.srt.models.deepseek_v4 builds one only where the
    ratio is non-zero)."""
    ratios = {"compress_ratios": [0, 4, 128]}
    assert [_dsv4_ratio(ratios, i) for i in range(5)] == [0, 4, 128, 0, 0]
    assert _dsv4_ratio({}, 0) == 0


def _counts(groups: object) -> dict[str, int]:
    return {g.name: g.count for g in groups}  # type: ignore[attr-defined]


def test_dsv4_flash_attention_groups_by_hand() -> None:
    """DeepSeek-V4-Flash (h 4,096, 64 heads x 512, q LoRA 1,024, o LoRA 1,024 in 8 groups, hc_mult 4),
    the parameter shapes of sglang.srt.models.deepseek_v4's attention: wq_a 4,096 x 1,024; wq_b
    1,024 x 64 x 512; wkv 4,096 x 512; wo_a 64 x 512 x 1,024; wo_b 8 x 1,024 x 4,096; norms and
    sinks 1,024 + 512 + 64; two hyper-connection mixers of ``m h (2 + m) m + (2 + m) m + 3`` =
    4 x 4,096 x 24 + 24 + 3 = 393,243. Compressor ``2 h c d + r c d + d`` (wkv and wgate, ape, norm;
    c = 2 overlapping windows at ratio 4, else 1); the ratio-4 indexer ``q_lora x 64 x 128 + h x 64``."""
    from kvstrategies.planner.weights import _dsv4_attention, _hc_mixer
    from kvstrategies.presets import load_preset_config

    config = load_preset_config("deepseek-v4-flash")
    common = {"wq_a": 4096 * 1024, "wq_b": 1024 * 64 * 512, "wkv": 4096 * 512, "wo_a": 64 * 512 * 1024,
              "wo_b": 8 * 1024 * 4096, "attn_small": 1024 + 512 + 64, "hyper_connections": 2 * 393_243}  # fmt: skip
    assert _counts(_dsv4_attention(config, 2)) == {  # layer 2: ratio 4
        **common,
        "compressor": 2 * 4096 * 2 * 512 + 4 * 2 * 512 + 512,
        "indexer": 1024 * 64 * 128 + 4096 * 64,
        "indexer_compressor": 2 * 4096 * 2 * 128 + 4 * 2 * 128 + 128,
    }
    assert _counts(_dsv4_attention(config, 3)) == {**common, "compressor": 2 * 4096 * 512 + 128 * 512 + 512}
    assert _hc_mixer({}, 4096) == 0  # no hc_mult: no hyper-connections


def test_kda_and_gdn_groups_by_hand() -> None:
    """Kimi-Linear KDA (h 2,304, 32 heads x 128, conv 4): q/k/v 3 x 2,304 x 4,096; f and g gates
    ``2 (h d + d inner) + h heads``; convs, A, dt, norm ``3 x inner x 4 + 32 + 4,096 + 128``
    (sglang.srt.models.kimi_linear). Qwen3-Next GDN without linear_conv_kernel_dim takes kernel 4:
    ``(2 x 16 x 128 + 32 x 128) x 4 + 2 x 32 + 128`` (sglang.srt.models.qwen3_next)."""
    from kvstrategies.planner.weights import _gdn, _kda
    from kvstrategies.presets import load_preset_config

    assert _counts(_kda(load_preset_config("kimi-linear-48b-a3b"))) == {
        "qkv_proj": 3 * 2304 * 4096,
        "gates": 2 * (2304 * 128 + 128 * 4096) + 2304 * 32,
        "conv_A_dt_norm": 3 * 4096 * 4 + 32 + 4096 + 128,
        "o_proj": 4096 * 2304,
    }
    qwen = {k: v for k, v in load_preset_config("qwen3-next-80b-a3b").items() if k != "linear_conv_kernel_dim"}
    assert _counts(_gdn(qwen))["conv_A_dt_norm"] == (2 * 16 * 128 + 32 * 128) * 4 + 2 * 32 + 128


def test_kv_projection_counts_k_and_v_head_dims() -> None:
    """MiMo-V2-Flash: K 192 and V 128 per head, 4 KV heads: kv_proj 4,096 x 4 x (192 + 128)."""
    from kvstrategies.planner.weights import _attention
    from kvstrategies.presets import load_preset_config

    assert _counts(_attention(load_preset_config("mimo-v2-flash")))["kv_proj"] == 4096 * 4 * (192 + 128)


def test_mamba_mixer_groups_by_hand() -> None:
    """Nemotron-H 8B Mamba2 (h 4,096, 128 heads x 64 = inner 8,192, 8 groups, state 128, conv 4;
    sglang.srt.models.nemotron_h / layers.attention.mamba.mamba.MambaMixer2): in_proj
    ``h (2 inner + 2 ng ds + heads)``; conv over ``inner + 2 ng ds`` = 10,240 channels x 4 + its
    bias, A/D/dt 3 x 128, gated norm 8,192. Jamba Mamba1 (inner 2 x 4,096, state 16, dt rank 256;
    sglang.srt.models.jamba): x_proj ``inner (rank + 2 ds)`` + dt_proj ``rank inner``; conv, bias,
    A_log, D, dt bias and the dt/B/C norms ``inner x 4 + inner + inner + inner x 16 + inner + 256 + 32``."""
    from kvstrategies.planner.weights import _mamba1, _mamba2
    from kvstrategies.presets import load_preset_config

    assert _counts(_mamba2(load_preset_config("nemotron-h-8b"))) == {
        "in_proj": 4096 * (2 * 8192 + 2 * 8 * 128 + 128),
        "conv_A_D_dt_norm": 10_240 * 4 + 10_240 + 3 * 128 + 8192,
        "out_proj": 8192 * 4096,
    }
    inner = 8192
    assert _counts(_mamba1(load_preset_config("jamba-v0.1"))) == {
        "in_proj": 4096 * 2 * inner,
        "x_dt_proj": inner * (256 + 2 * 16) + 256 * inner,
        "conv_A_D_norms": inner * 4 + inner + inner + inner * 16 + inner + 256 + 2 * 16,
        "out_proj": inner * 4096,
    }


def test_mtp_layers_by_hand() -> None:
    """DeepSeek-V3's NextN layer adds enorm, hnorm and the shared head norm (3 x 7,168) and eh_proj
    (7,168 x 14,336) (sglang.srt.models.deepseek_nextn). A DeepSeek-V4 MTP layer ``j`` is
    checkpoint layer ``43 + j`` and reads that index's compress ratio: 43 -> 0 (the list's last
    entry), 44 -> past the list, 0: no compressor in either."""
    from kvstrategies.planner.weights import _mtp
    from kvstrategies.presets import load_preset_config

    v3 = load_preset_config("deepseek-v3")
    counts = _counts(_mtp(v3, 7168, int(v3["vocab_size"]), 61))
    assert (counts["mtp_norms"], counts["eh_proj"]) == (3 * 7168, 2 * 7168 * 7168)
    v4 = {**load_preset_config("deepseek-v4-flash"), "num_nextn_predict_layers": 2}
    names = [g.name for g in _mtp(v4, 4096, int(v4["vocab_size"]), 43)]
    assert names.count("eh_proj") == 2
    assert "compressor" not in names and "indexer" not in names


def test_qkv_bias_counts_k_and_v_head_dims() -> None:
    """With attention_bias the q/k/v biases hold ``heads x D + kv_heads x (D + Dv)``: Llama-3.1-8B
    with V 64 wide: 32 x 128 + 8 x (128 + 64) = 5,632."""
    from kvstrategies.planner.weights import _attention
    from kvstrategies.presets import load_preset_config

    config = {**load_preset_config("llama-3.1-8b"), "attention_bias": True, "v_head_dim": 64}
    assert _counts(_attention(config))["qkv_bias"] == 32 * 128 + 8 * (128 + 64)


def test_vision_towers_by_hand() -> None:
    """A ViT tower of 27 layers (h 1,152, MLP 4,304, patch 14, 3 channels) with a 2 x 2 merger into
    2,048: ``27 (4 h^2 + 2 h i) + 3 x 14^2 x h + (4 h)^2 + 4 h x 2,048``. MoonViT (Kimi-K2.5) without
    merge_kernel_size merges 2 x 2 (K2VLMultiModalProjector)."""
    from kvstrategies.planner.weights import moonvit_groups, vision_tower_params

    vision = {"hidden_size": 1152, "intermediate_size": 4304, "depth": 27, "patch_size": 14,
              "spatial_merge_size": 2, "out_hidden_size": 2048}  # fmt: skip
    h = 1152
    expected = 27 * (4 * h * h + 2 * h * 4304) + 3 * 14 * 14 * h + (4 * h) ** 2 + 4 * h * 2048
    assert vision_tower_params({"vision_config": vision, "hidden_size": 4096}) == expected
    moon = {"vt_hidden_size": h, "vt_intermediate_size": 4304, "vt_num_hidden_layers": 27,
            "vt_num_attention_heads": 16, "patch_size": 14, "text_hidden_size": 7168}  # fmt: skip
    projector = _counts(moonvit_groups({"vision_config": moon, "hidden_size": 7168}))["mm_projector"]
    assert projector == 2 * h + (h * 4) ** 2 + h * 4 + 7168 * h * 4 + 7168


def test_more_parameter_groups_by_hand() -> None:
    """Kimi-Linear's ``kda_layers`` are 1-based (KimiLinearConfig): layers 0-2 and 4 are KDA, 3 is
    MLA. Per-layer q/k norms hold ``(heads + kv_heads) x D``: (32 + 8) x 128. DeepSeek-V3.2's
    indexer: ``q_lora x 64 x 128 + h x 128 + h x 64`` and its k norm 2 x 128
    (sglang.srt.models.deepseek_v2 Indexer). Qwen3-Next's GDN in_proj ``h (2 nk dk + 2 nv dv + 2 nv)``.
    A ViT tower without spatial_merge_size projects ``h x out``."""
    from kvstrategies.planner.weights import _attention, _gdn, _mixer, _mla, vision_tower_params
    from kvstrategies.presets import load_preset_config

    kimi = load_preset_config("kimi-linear-48b-a3b")
    assert [_mixer(kimi, i) for i in range(5)] == ["kda", "kda", "kda", "mla", "kda"]
    llama = {**load_preset_config("llama-3.1-8b"), "qk_norm_type": "per_layer"}
    assert _counts(_attention(llama))["qk_norm"] == (32 + 8) * 128
    dsa = _counts(_mla(load_preset_config("deepseek-v3.2")))
    assert (dsa["indexer"], dsa["indexer_k_norm"]) == (1536 * 64 * 128 + 7168 * 128 + 7168 * 64, 2 * 128)
    qwen = _counts(_gdn(load_preset_config("qwen3-next-80b-a3b")))
    assert qwen["in_proj"] == 2048 * (2 * 16 * 128 + 2 * 32 * 128 + 2 * 32)
    vision = {"hidden_size": 1152, "intermediate_size": 4304, "depth": 27, "patch_size": 14, "out_hidden_size": 2048}
    h = 1152
    expected = 27 * (4 * h * h + 2 * h * 4304) + 3 * 14 * 14 * h + h * 2048
    assert vision_tower_params({"vision_config": vision, "hidden_size": 4096}) == expected
