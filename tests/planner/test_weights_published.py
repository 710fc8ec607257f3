"""The weight estimate against published checkpoints' own tensor listings and configs.

Configs and listings live in ``tests/fixtures/published/`` with their origin; every expectation
is computed by hand from them and the SGLang 0.5.23 code named in the docstring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.weights import ParamKind, estimate_weights, moonvit_groups
from kvstrategies.sglang.load_refusals import request_layout
from kvstrategies.sglang.resident import resident_extras

PUBLISHED = Path(__file__).parents[1] / "fixtures" / "published"


def published(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((PUBLISHED / f"{name}.json").read_text())
    assert doc["origin"]  # every published file says where it came from
    return doc


KIMI = published("kimi-k2.5")
KIMI_CFG = KIMI["config"]


def by_name(est: Any, layer: int) -> dict[str, float]:
    return {g.name: float(est.fmt.bytes_for(g)) for g in est.layers[layer]}


def test_kimi_k25_ignore_regexes_leave_only_the_routed_experts_int4() -> None:
    """compressed-tensors matches ``re:.*shared_experts.*`` with ``re.match`` against SGLang's module
    names (compressed_tensors/utils.py, ``should_ignore_layer``): it names
    ``model.layers.1.mlp.shared_experts.gate_up_proj`` but not the routed experts, whose unfused names
    ``model.layers.1.mlp.experts.0.gate_proj`` (``get_moe_scheme``) match only the ``Linear`` target:
    INT4 in groups of 32 with a bf16 scale, 0.5 + 2/32 bytes per weight. Attention (``re:.*self_attn.*``)
    and layer 0's dense MLP (``re:.*mlp\\.(gate|up|gate_up|down)_proj.*``) stay bf16."""
    est = estimate_weights(KIMI_CFG)
    moe = by_name(est, 1)
    assert moe["experts"] == 0.5 + 2 / 32
    assert moe["shared_experts.gate_up_proj"] == moe["shared_experts.down_proj"] == 2
    assert moe["q_b_proj"] == moe["o_proj"] == moe["kv_b_proj"] == moe["q_a_proj"] == 2
    dense = by_name(est, 0)
    assert dense["mlp.gate_up_proj"] == dense["mlp.down_proj"] == 2


def test_moonvit_tower_and_projector_count() -> None:
    """MoonViT (sglang/srt/models/kimi_k25.py): 27 blocks of wqkv 3456 x 1152 + 3456, wo 1152 x 1152 +
    1152, fc0 4304 x 1152 + 4304, fc1 1152 x 4304 + 1152 and two LayerNorms (4 x 1152): 15,239,504 each;
    patch embedding 1152 x 3 x 14 x 14 + 1152 = 678,528; position table 64 x 64 x 1152 = 4,718,592;
    final LayerNorm 2,304; projector LayerNorm 2,304 + 4608 x 4608 + 4608 + 7168 x 4608 + 7168 =
    54,277,888."""
    blocks = 27 * (3456 * 1152 + 3456 + 1152 * 1152 + 1152 + 4304 * 1152 + 4304 + 1152 * 4304 + 1152 + 4 * 1152)
    expected = blocks + 678_528 + 4_718_592 + 2_304 + 54_277_888
    assert expected == 471_143_920
    assert sum(g.count for g in moonvit_groups(KIMI_CFG)) == expected


def test_kimi_k25_estimate_equals_the_published_tensor_listing() -> None:
    """The checkpoint listing sums to 595,148,192,736 bytes. The estimate prices the same tensors;
    the only tensors it leaves out are compressed-tensors' ``weight_shape`` (int32[2] per packed
    projection: 60 layers x 384 experts x 3 x 8 bytes = 552,960)."""
    est = estimate_weights(KIMI_CFG)
    tower = sum(g.count for g in moonvit_groups(KIMI_CFG)) * 2
    shapes = 60 * 384 * 3 * 2 * 4
    assert est.weight_bytes() + tower + shapes == KIMI["checkpoint_tensors"]["total_bytes"]


def test_kimi_k25_rocm_keeps_index_buffers_and_mla_copies() -> None:
    """At TP 8 each rank holds all 384 experts at 2048 / 8 = 256 columns. On ROCm the Triton W4A16 MoE
    keeps w13/w2 g_idx and their sort indices (compressed_tensors_wNa16_moe.py,
    ``CompressedTensorsWNA16MoE.create_weights``): 2 x 384 x (7168 + 256) x 4 bytes x 60 MoE layers =
    1,368,391,680. Every MLA layer keeps kv_b_proj's absorbed w_kc/w_vc (deepseek_weight_loader.py,
    ``post_load_weights``): 512 x 64 / 8 x (128 + 128) values x 2 bytes x 61 layers = 127,926,272. The
    CUDA Marlin path empties the index buffers."""
    req = DeploymentRequest("k", {"hf_config": KIMI_CFG}, tp_size=8, gpu=lookup_gpu("MI355X"))
    est = estimate_weights(KIMI_CFG)
    extras = {e.name: e.nbytes for e in resident_extras(req, KIMI_CFG, est, request_layout(req, KIMI_CFG))}
    assert extras == {"ROCm INT4 expert index buffers": 1_368_391_680, "MLA w_kc / w_vc": 127_926_272}
    cuda = DeploymentRequest("k", {"hf_config": KIMI_CFG}, tp_size=8, gpu=lookup_gpu("H200"))
    extras_cuda = {e.name for e in resident_extras(cuda, KIMI_CFG, est, request_layout(cuda, KIMI_CFG))}
    assert extras_cuda == {"MLA w_kc / w_vc"}


def test_vision_tower_per_rank_split() -> None:
    """wqkv and wo split over the 8 attention-TP ranks by heads (16 / 8 = 2 each), the MLP, embeddings
    and projector are replicated: 27 x (3456 x 1152 + 3456 + 1152 x 1152) / 8 + the rest."""
    groups = moonvit_groups(KIMI_CFG)
    per_rank = sum(g.per_rank(8) for g in groups)
    sharded = 27 * (3456 * 1152 + 3456 + 1152 * 1152)
    assert per_rank == pytest.approx(471_143_920 - sharded + sharded / 8)
    assert all(g.kind is ParamKind.SMALL for g in groups)  # the tower gets no quantization config


def test_kimi_k25_planned_weights_name_every_part() -> None:
    planned = plan_deployment(
        DeploymentRequest("k", {"hf_config": KIMI_CFG}, tp_size=8, gpu=lookup_gpu("MI355X"),
                          mem_fraction_static=0.8260405859375, attention_backend="triton"),
        suggest=False,
    )  # fmt: skip
    source = planned.budget.weight_source or ""
    assert "MoonViT" in source and "index buffers" in source and "w_kc" in source


K26 = published("kimi-k2.6-nvfp4")
GROK = published("grok-2")


def test_kimi_k26_nvfp4_exclusions_and_the_published_size() -> None:
    """ModelOpt NVFP4 with ``ignore = [lm_head, *self_attn*, *vision_tower*, *mm_projector*]``: SGLang's
    ``is_layer_excluded`` (modelopt_quant.py) matches each glob with fnmatch against the module name, so
    attention (``model.layers.1.self_attn.q_b_proj``), the head and the tower stay bf16; routed and
    shared experts and the dense MLP are NVFP4: 0.5 byte per weight + one fp8 scale per 16 weights =
    0.5625. The card gives ~590 GB (550 GiB) for the checkpoint; the estimate plus the bf16 tower is
    590.78 GB = 550.21 GiB, inside both roundings."""
    cfg = K26["config"]
    est = estimate_weights(cfg)
    layer = by_name(est, 1)
    assert layer["experts"] == layer["shared_experts.gate_up_proj"] == layer["shared_experts.down_proj"] == 0.5625
    assert layer["q_b_proj"] == layer["kv_b_proj"] == layer["o_proj"] == 2
    assert by_name(est, 0)["mlp.gate_up_proj"] == 0.5625
    total = est.weight_bytes() + sum(g.count for g in moonvit_groups(cfg)) * 2
    assert 590e9 <= total < 591e9
    assert 550 <= total / 2**30 < 551


def test_modelopt_without_an_exclusion_list_uses_modelopt_default_export() -> None:
    """A ModelOpt config that lists no ``exclude_modules`` is priced with ModelOpt's default export
    (``lm_head``, routers and MoE gates unquantized, every other linear quantized) and says so;
    MiniMax-M2.5's attention is then NVFP4 and its ``block_sparse_moe.gate`` router stays float32."""
    from kvstrategies.presets import load_preset_config

    cfg = {**load_preset_config("minimax-m2.5"),
           "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}}  # fmt: skip
    est = estimate_weights(cfg)
    layer = by_name(est, 0)
    assert layer["q_proj"] == layer["experts"] == 0.5625
    assert layer["router"] == 4
    assert any("no exclude_modules" in n for n in est.fmt.notes)


def test_minimax_m25_nvfp4_experts_bf16_attention_per_rank() -> None:
    """NVFP4 experts and bf16 attention (exclude ``*self_attn*``), TP 4 (EP 1): per rank and layer the
    experts hold 256 x 3 x 3072 x 1536 / 4 x 0.5625 B, attention (48 heads x 128 + 2 x 8 x 128) x 3072 +
    48 x 128 x 3072 over 4 ranks x 2 B; the float32 router (256 x 3072 x 4 B) and e_score_correction_bias
    (256 x 4 B) are replicated (minimax_m2.py: ``gate`` is a ReplicatedLinear in float32). The
    MiniMax-M2.5 NVFP4 checkpoints' own exclusion lists were not in the sources found."""
    from kvstrategies.presets import load_preset_config

    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
         "exclude_modules": ["lm_head", "*self_attn*", "*block_sparse_moe.gate*"]}  # fmt: skip
    cfg = {**load_preset_config("minimax-m2.5"), "quantization_config": q}
    est = estimate_weights(cfg)
    layer = by_name(est, 0)
    assert layer["experts"] == 0.5625 and layer["q_proj"] == layer["o_proj"] == 2
    experts = 256 * 3 * 3072 * 1536 / 4 * 0.5625
    attention = ((48 * 128 + 2 * 8 * 128) * 3072 + 48 * 128 * 3072) / 4 * 2
    router = 256 * 3072 * 4 + 256 * 4
    per_layer = est._bytes(est.layers[0], 4)
    norms = per_layer - experts - attention - router
    assert 0 < norms < 64 * 1024  # layer norms and q/k norms, bf16
    assert est.stage_bytes(4, 1, 0) == pytest.approx(62 * per_layer + 2 * 200064 * 3072 / 4 * 2 + 3072 * 2, abs=8)


def test_grok_2_online_fp8_per_rank() -> None:
    """Grok-2 with ``--quantization fp8`` on the bf16 checkpoint, TP 8: SGLang's Fp8LinearMethod /
    Fp8MoEMethod (quantization/fp8.py) create the weights in bf16 and quantize them to fp8 in
    ``process_weights_after_loading``: 1 byte per weight resident (scales, under 0.01 GiB, not counted).
    Per rank: experts 64 x 8 x 3 x 8192 x 16384 / 8 = 25,769,803,776; the residual dense MLP
    (grok.py, ``residual_moe``) 64 x 3 x 8192 x 32768 / 8 = 6,442,450,944; attention 64 x (8192 x (8 +
    2) x 128 + 8 x 128 x 8192) = 1,207,959,552; embedding and lm_head 2 x 131072 x 8192 / 8 x 2 B =
    536,870,912; 4 norms a layer + the final norm (64 x 4 + 1) x 8192 x 2 B = 4,210,688; the float32
    router 64 x 8 x 8192 x 4 B = 16,777,216: 33,978,073,088 B. The parameter count equals the
    269,515,497,472 published for the checkpoint."""
    cfg = GROK["config"]
    est = estimate_weights(cfg, quantization="fp8")
    assert est.main_params == GROK["published_parameters"]
    parts = (25_769_803_776, 6_442_450_944, 1_207_959_552, 536_870_912, 4_210_688, 16_777_216)
    assert sum(parts) == 33_978_073_088
    assert est.weight_bytes_per_rank(8) == sum(parts)
    layer = by_name(est, 0)
    assert layer["router"] == 4
    assert layer["experts"] == layer["mlp.gate_up_proj"] == layer["q_proj"] == layer["o_proj"] == 1
