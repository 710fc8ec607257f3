"""Published configs whose field names the estimate once missed: Qwen2-VL's vision tower, ChatGLM / GLM-4
(``num_layers``, ``padded_vocab_size``, ``multi_query_group_num``) and Phi-3-small (``ff_intermediate_size``,
biases everywhere, tied embeddings).

Every expectation is worked out by hand from the published config (Qwen/Qwen2-VL-7B-Instruct, THUDM/glm-4-9b,
microsoft/Phi-3-small-8k-instruct; the fields the count reads are copied below) and the SGLang 0.5.23 module
named in each docstring; SGLang's own model built on ``meta`` (tools/record_weights.py's bridge) gave the same
parameters.
"""

from __future__ import annotations

from typing import Any

from kvstrategies.models.parse import parse_hf_config
from kvstrategies.planner.weights import estimate_weights, vision_tower_params
from kvstrategies.sglang.budget import vision_tower_bytes
from kvstrategies.sglang.launch.defaults.facts import model_facts_from_hf_config

QWEN2_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "torch_dtype": "bfloat16",
    "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
    "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
                      "temporal_patch_size": 2},
}  # fmt: skip

GLM_4_9B: dict[str, Any] = {
    "architectures": ["ChatGLMModel"], "model_type": "chatglm", "torch_dtype": "bfloat16",
    "add_bias_linear": False, "add_qkv_bias": True, "ffn_hidden_size": 13696, "hidden_size": 4096,
    "kv_channels": 128, "multi_query_attention": True, "multi_query_group_num": 2, "num_attention_heads": 32,
    "num_layers": 40, "padded_vocab_size": 151552, "post_layer_norm": True, "rmsnorm": True, "seq_length": 8192,
    "tie_word_embeddings": False,
}  # fmt: skip

PHI_3_SMALL: dict[str, Any] = {
    "architectures": ["Phi3SmallForCausalLM"], "model_type": "phi3small", "torch_dtype": "bfloat16",
    "blocksparse_block_size": 64, "blocksparse_homo_head_pattern": False, "blocksparse_num_local_blocks": 16,
    "blocksparse_triton_kernel_block_size": 64, "blocksparse_vert_stride": 8, "dense_attention_every_n_layers": 2,
    "ff_dim_multiplier": None, "ff_intermediate_size": 14336, "gegelu_limit": 20.0, "gegelu_pad_to_256": True,
    "hidden_act": "gegelu", "hidden_size": 4096, "layer_norm_epsilon": 1e-05, "max_position_embeddings": 8192,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 100352,
    "attention_bias": False,
}  # fmt: skip


def test_qwen2_vl_vision_tower_by_hand() -> None:
    """sglang/srt/models/qwen2_vl.py, ``Qwen2VisionTransformer``: width ``embed_dim`` e = 1,280, ``depth`` 32
    ``Qwen2VisionBlock`` of a ``VisionAttention`` (qkv 3e x e, proj e x e: 4 e^2) and a ``Qwen2VisionMLP``
    (fc1 / fc2 of ``mlp_ratio`` 4 x e = 5,120: 2 x e x 5,120), the ``Qwen2VisionPatchEmbed`` Conv3d
    (``in_chans`` 3 x ``temporal_patch_size`` 2 x 14 x 14 x e = 1,505,280) and the ``Qwen2VisionPatchMerger``
    ((4e)^2 + 4e x ``hidden_size`` 3,584 = 44,564,480): 32 x 19,660,800 + 1,505,280 + 44,564,480 = 675,215,360
    (norms and biases, 543,744 more in SGLang's build, left out as for every tower). Before, the tower read
    ``intermediate_size`` (absent) and counted 0. Per rank at TP 2: half the bytes, 675,215,360 (SGLang's
    vision_tower group: 677,516,368 B, its patch embed, norms and row biases replicated)."""
    e = 1280
    expected = 32 * (4 * e * e + 2 * e * 4 * e) + 3 * 2 * 14 * 14 * e + (4 * e) ** 2 + 4 * e * 3584
    assert expected == 675_215_360
    assert vision_tower_params(QWEN2_VL_7B) == expected
    assert vision_tower_bytes(QWEN2_VL_7B, 1, 1, 2.0)[0] == 2 * expected
    assert vision_tower_bytes(QWEN2_VL_7B, 2, 2, 2.0)[0] == expected
    # a vision_config with both embed_dim and intermediate_size keeps hidden_size as the width
    both = {**QWEN2_VL_7B, "vision_config": {**QWEN2_VL_7B["vision_config"], "intermediate_size": 5120}}
    assert vision_tower_params(both) == 32 * (4 * 3584**2 + 2 * 3584 * 5120) + 3 * 2 * 14 * 14 * 3584 + (
        4 * 3584
    ) ** 2 + 4 * 3584 * 3584


def test_glm_4_9b_reads_chatglm_names() -> None:
    """SGLang's ChatGLMConfig (sglang/srt/configs/chatglm.py) maps ``num_hidden_layers`` to ``num_layers`` (40) and
    ``n_head_kv`` to ``multi_query_group_num`` (2), and sets ``vocab_size = padded_vocab_size``; ModelConfig's
    head_dim is hidden / heads = 4096 / 32 = 128. KV cell at TP 1: 40 layers x 2 heads x 128 x (K + V) x 2 B =
    40,960 B per token (SGLang 0.5.23 live: cell_size 40,960, 524,288 tokens in 20 GiB).

    Weights (sglang/srt/models/chatglm.py ``ChatGLMM``): embedding and output_layer 151,552 x 4,096 each; per
    ``GLMBlock`` two RMSNorms (2 x 4,096), ``query_key_value`` 4,096 x (4,096 + 2 x 2 x 128) = 18,874,368 + its
    bias 4,608 (``add_qkv_bias``), ``dense`` 4,096 x 4,096 (no bias: ``add_bias_linear`` false), the merged
    ``dense_h_to_4h`` 2 x 13,696 x 4,096 and ``dense_4h_to_h`` 13,696 x 4,096 = 168,296,448: 203,960,832 per
    layer; + the final RMSNorm 4,096: 40 x 203,960,832 + 2 x 620,756,992 + 4,096 = 9,399,951,360. At TP 2 a rank
    holds 40 x (2,304 x 4,096 + 2,304 + 4,096 x 2,048 + 3 x 4,096 x 6,848 + 8,192) + 2 x 75,776 x 4,096 + 4,096
    = 4,700,141,568 parameters, 9,400,283,136 B (SGLang's build: the same)."""
    geometry = parse_hf_config(GLM_4_9B)
    assert (geometry.num_hidden_layers, geometry.total_num_kv_heads, geometry.head_dim) == (40, 2, 128)
    assert geometry.num_hidden_layers * geometry.total_num_kv_heads * geometry.head_dim * 2 * 2 == 40_960
    assert geometry.context_len == 8192
    assert model_facts_from_hf_config(GLM_4_9B).num_hidden_layers == 40
    layer = 2 * 4096 + 4096 * (4096 + 2 * 2 * 128) + 4608 + 4096 * 4096 + 3 * 4096 * 13696
    assert layer == 203_960_832
    est = estimate_weights(GLM_4_9B)
    assert est.main_params == 40 * layer + 2 * 151552 * 4096 + 4096 == 9_399_951_360
    rank = 40 * (2304 * 4096 + 2304 + 4096 * 2048 + 3 * 4096 * 6848 + 8192) + 2 * 75776 * 4096 + 4096
    assert est.weight_bytes_per_rank(2) == 2 * rank == 9_400_283_136


def test_phi_3_small_counts_ff_intermediate_size_biases_and_tied_embeddings() -> None:
    """sglang/srt/models/phi3_small.py: ``Phi3SmallForCausalLM`` ties lm_head to embed_tokens unless the config
    says ``tie_word_embeddings: false`` (the remote-code Phi3SmallConfig keeps PretrainedConfig's True), so
    one 100,352 x 4,096 = 411,041,792 table. ``Phi3SmallMLP`` reads ``intermediate_size``, the config class's
    ``ff_intermediate_size`` 14,336 (before, the estimate fell back to 4h = 16,384 and counted a separate
    lm_head: 8.61B). Per ``Phi3SmallDecoderLayer``: ``query_key_value`` 4,096 x (4,096 + 2 x 8 x 128) + bias
    6,144, ``dense`` 4,096 x 4,096 + bias 4,096, ``up_proj`` 2 x 14,336 x 4,096 + bias 28,672, ``down_proj``
    14,336 x 4,096 + bias 4,096, two LayerNorms with bias 4 x 4,096 = 218,163,200; + the final LayerNorm
    2 x 4,096: 32 x 218,163,200 + 411,041,792 + 8,192 = 7,392,272,384 (the published ~7.4B; SGLang's build: the
    same). At TP 2: 32 x (3,072 x 4,096 + 3,072 + 4,096 x 2,048 + 4,096 + 14,336 x 4,096 + 14,336 + 4,096 x 7,168
    + 4,096 + 16,384) + 50,176 x 4,096 + 8,192 = 3,696,533,504 parameters, 7,393,067,008 B."""
    layer = 4096 * 6144 + 6144 + 4096 * 4096 + 4096 + 2 * 14336 * 4096 + 28672 + 14336 * 4096 + 4096 + 4 * 4096
    assert layer == 218_163_200
    est = estimate_weights(PHI_3_SMALL)
    assert est.main_params == 32 * layer + 100352 * 4096 + 2 * 4096 == 7_392_272_384
    rank = 32 * (3072 * 4096 + 3072 + 4096 * 2048 + 4096 + 14336 * 4096 + 14336 + 4096 * 7168 + 4096 + 16384)
    assert est.weight_bytes_per_rank(2) == 2 * (rank + 50176 * 4096 + 8192) == 7_393_067_008
    # a config that unties the head gets it back
    untied = estimate_weights({**PHI_3_SMALL, "tie_word_embeddings": False})
    assert untied.main_params == 7_392_272_384 + 100352 * 4096
