"""Weight-estimate rules the published-log tests left unpinned (found by ``tools/mutation_check.py``)."""

from __future__ import annotations

from kvstrategies.planner.weights import _dsv4_ratio


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
