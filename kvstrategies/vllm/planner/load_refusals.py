"""What vLLM refuses while it creates the weights of a block-FP8 checkpoint, refused here before planning.

A ``quant_method: fp8`` checkpoint with ``weight_block_size [block_n, block_k]`` stores one scale
per block, so each tensor-parallel rank must hold whole blocks. vLLM checks it when the layers are
built (``vllm/model_executor/layers/quantization/utils/fp8_utils.py``), before any weight is read:

* routed experts (``Fp8MoEMethod.create_weights`` -> ``validate_fp8_block_shape_moe``): the
  per-rank intermediate size ``ispp = moe_intermediate_size / tp`` a multiple of ``block_n``, and
  of ``block_k`` when ``tp > 1``. Before refusing, vLLM refines the scale grid
  (``vllm/model_executor/layers/fused_moe/oracle/fp8.py refine_fp8_moe_block_shape``): with
  ``g = gcd(block_n, block_k, ispp, hidden_size) >= 32`` the experts load with ``[g, g]`` blocks
  (Qwen3-235B-A22B-FP8 at TP 8: ``ispp`` 192, ``g`` 64, loaded); below 32 it refuses (TP 32: 48,
  ``g`` 16);
* linear layers (``Fp8LinearMethod.create_weights`` -> ``validate_fp8_block_shape``): a
  row-parallel layer's (``o_proj``, ``down_proj``) input per rank a multiple of ``block_k`` when
  ``tp > 1``; a column-parallel one's (MLA ``q_b_proj``, ``kv_b_proj``) output per rank a multiple
  of ``block_n``. Merged layers (``qkv_proj``, ``gate_up_proj``) with a partition that is not whole
  blocks are let through (``vllm/model_executor/layers/linear.py
  ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch``).

Checked against vLLM 0.33.0 through the bridge (``kvstrategies.vllm.bridge``, which builds the model):
Qwen3-30B-A3B-FP8 refused at TP 16 and 32, planned at TP 8; Qwen3-32B-FP8 refused at TP 16
(``down_proj`` input 1,600), planned at TP 8; Qwen3-235B-A22B-FP8 planned at TP 8 and 16, refused
at TP 32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.releases import VLLM, ReleaseRule, parse_release, span
from ...errors import UnsupportedConfigurationError
from ...models.hf import get_int, text_config

#: ``refine_fp8_moe_block_shape``: the smallest refined block vLLM's Triton MoE kernels take
MIN_REFINED_BLOCK = 32
_FP8_UTILS = "vllm/model_executor/layers/quantization/utils/fp8_utils.py"


#: from vLLM 0.29.0 routed experts whose per-rank width is not whole blocks load on a refined ``[g, g]``
#: grid when ``g >= 32``; 0.28.0 refuses every such split (``Fp8MoEMethod.create_weights``)
MOE_BLOCK_REFINEMENT = ReleaseRule(
    "vllm-fp8-moe-block-refinement",
    span("0.29.0", engine=VLLM),
    "block-FP8 experts split into partial blocks load on a refined [g, g] scale grid (g = gcd >= 32)",
    "vllm/model_executor/layers/fused_moe/oracle/fp8.py refine_fp8_moe_block_shape",
    topic="weights",
)


#: from vLLM 0.14.1 a merged column-parallel layer whose per-rank outputs are not whole blocks (a dense MLP's
#: ``gate_up_proj``) may load (``allow_fp8_block_shape_mismatch``, which ``validate_fp8_block_shape`` skips); 0.13.0's
#: checks every output partition, so ``gate_up_proj``, built before ``down_proj``, is the first refusal
FP8_MERGED_MISMATCH_ALLOWED = ReleaseRule(
    "vllm-fp8-merged-block-mismatch",
    span("0.14.1", engine=VLLM),
    "a merged block-FP8 layer (gate_up_proj) whose per-rank outputs are not whole blocks is let through (before: "
    "refused: Weight output_partition_size ... block_n)",
    "vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape (0.13.0: no allowance)",
    topic="weights",
)


@dataclass(frozen=True)
class BlockFP8:
    """``weight_block_size`` of a ``quant_method: fp8`` checkpoint."""

    block_n: int
    block_k: int


def block_fp8(config: Mapping[str, Any], quantization: str | None = None) -> BlockFP8 | None:
    """The checkpoint's FP8 blocks (``None``: not block-FP8, or ``--quantization`` names another method)."""
    if quantization not in (None, "fp8"):
        return None
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not isinstance(qcfg, Mapping) or str(qcfg.get("quant_method") or "").lower() != "fp8":
        return None
    block = qcfg.get("weight_block_size")
    if not (isinstance(block, (list, tuple)) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):  # fmt: skip
        return None
    return BlockFP8(int(block[0]), int(block[1]))


def expert_refusal(moe_intermediate: int, hidden: int, tp: int, block: BlockFP8, *, refine: bool = True) -> str | None:
    """vLLM's words when the routed experts do not load at ``tp`` (``None``: they load); ``refine``: the
    release refines the block grid first (:data:`MOE_BLOCK_REFINEMENT`)."""
    ispp = moe_intermediate // tp
    if ispp % block.block_n == 0 and (tp == 1 or ispp % block.block_k == 0):
        return None
    if refine and math.gcd(block.block_n, block.block_k, ispp, hidden) >= MIN_REFINED_BLOCK:
        return None  # refine_fp8_moe_block_shape: loaded with [g, g] blocks
    if ispp % block.block_n:
        return (f"The output_size of gate's and up's weight = {ispp} is not divisible by weight quantization "
                f"block_n = {block.block_n}.")  # fmt: skip
    return (f"The input_size of down's weight = {ispp} is not divisible by weight quantization block_k = "
            f"{block.block_k}.")  # fmt: skip


def linear_refusal(config: Mapping[str, Any], tp: int, block: BlockFP8,
                   merged_allowed: bool = True) -> tuple[str, str] | None:  # fmt: skip
    """``(module, vLLM's words)`` of the first linear layer that does not load at ``tp`` (``None``: all load);
    ``merged_allowed``: a dense MLP's merged ``gate_up_proj`` may split into partial blocks
    (:data:`FP8_MERGED_MISMATCH_ALLOWED`)."""
    if tp == 1:
        return None
    t = text_config(config)
    hidden = get_int(t, "hidden_size", minimum=1)
    heads = int(t.get("num_attention_heads") or 1)
    head_dim = int(t.get("head_dim") or hidden // heads)
    rows: list[tuple[str, int]] = []  # row-parallel inputs per rank
    columns: list[tuple[str, int]] = []  # column-parallel (not merged) outputs per rank
    if t.get("kv_lora_rank"):
        nope, rope, v_dim = (get_int(t, key) for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        if t.get("q_lora_rank"):
            columns.append(("self_attn.q_b_proj", heads * (nope + rope) // tp))
        columns.append(("self_attn.kv_b_proj", heads * (nope + v_dim) // tp))
        rows.append(("self_attn.o_proj", heads * v_dim // tp))
    else:
        rows.append(("self_attn.o_proj", heads * head_dim // tp))
    if _has_dense_mlp(t):
        rows.append(("mlp.down_proj", get_int(t, "intermediate_size", minimum=1) // tp))
    shared = int(t.get("n_shared_experts") or 0) * int(t.get("moe_intermediate_size") or 0)
    shared = shared or int(t.get("shared_expert_intermediate_size") or 0)
    if shared:
        rows.append(("mlp.shared_experts.down_proj", shared // tp))
    if not merged_allowed and _has_dense_mlp(t):
        gate_up = get_int(t, "intermediate_size", minimum=1) // tp
        if gate_up % block.block_n:  # built after the attention, before down_proj
            for module, size in rows[:1]:
                if size % block.block_k:
                    return module, (f"Weight input_size_per_partition = {size} is not divisible by weight "
                                    f"quantization block_k = {block.block_k}.")  # fmt: skip
            return "mlp.gate_up_proj", (f"Weight output_partition_size = {gate_up} is not divisible by weight "
                                        f"quantization block_n = {block.block_n}.")  # fmt: skip
    for module, size in rows:
        if size % block.block_k:
            return module, (f"Weight input_size_per_partition = {size} is not divisible by weight quantization "
                            f"block_k = {block.block_k}.")  # fmt: skip
    for module, size in columns:
        if size % block.block_n:
            return module, (f"Weight output_partition_size = {size} is not divisible by weight quantization "
                            f"block_n = {block.block_n}.")  # fmt: skip
    return None


def _has_dense_mlp(t: Mapping[str, Any]) -> bool:
    """Whether some layer has a dense MLP of ``intermediate_size`` (every layer of a dense model; DeepSeek's
    first ``first_k_dense_replace``; Qwen-MoE's ``mlp_only_layers`` or a ``decoder_sparse_step`` above 1)."""
    if not _routed_experts(t):
        return t.get("intermediate_size") is not None
    if int(t.get("first_k_dense_replace") or 0) > 0:
        return True
    return bool(t.get("mlp_only_layers")) or int(t.get("decoder_sparse_step") or 1) > 1


def _routed_experts(t: Mapping[str, Any]) -> int:
    return int(t.get("n_routed_experts") or t.get("num_experts") or t.get("num_local_experts") or 0)


def load_refusal(
    config: Mapping[str, Any], tp: int, quantization: str | None = None, version: str | None = None,
    expert_parallel: bool = False, moe_tp: int | None = None,
) -> tuple[str, str] | None:
    """``(vLLM's check, its words)`` of the first weight-creation refusal at ``tp`` in vLLM ``version`` (the
    newest when ``None``); ``None``: the weights load. The routed experts are split over ``moe_tp`` ranks (DP x TP;
    ``tp`` when ``None``); under ``expert_parallel`` each rank holds whole experts (``FusedMoE``'s ``moe_tp_size``
    is 1), so only the linear layers' split is checked."""
    block = block_fp8(config, quantization)
    if block is None:
        return None
    t = text_config(config)
    # an expert's width: ``moe_intermediate_size``, else ``intermediate_size`` (Mixtral, MiniMax-M2: experts only)
    moe = t.get("moe_intermediate_size") or t.get("intermediate_size")
    refine = version is None or MOE_BLOCK_REFINEMENT.holds(parse_release(version, VLLM, field="--vllm-version"))
    if _routed_experts(t) and moe and not expert_parallel:
        words = expert_refusal(int(moe), get_int(t, "hidden_size", minimum=1), moe_tp or tp, block, refine=refine)
        if words is not None:
            if not refine:
                return "vllm/model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights", words
            return (f"{_FP8_UTILS} validate_fp8_block_shape_moe, from Fp8MoEMethod.create_weights; "
                    "vllm/model_executor/layers/fused_moe/oracle/fp8.py refine_fp8_moe_block_shape finds no block "
                    f"of {MIN_REFINED_BLOCK} or more"), words  # fmt: skip
    merged = version is None or FP8_MERGED_MISMATCH_ALLOWED.holds(parse_release(version, VLLM, field="--vllm-version"))
    linear = linear_refusal(config, tp, block, merged_allowed=merged)
    if linear is not None:
        module, words = linear
        return f"{_FP8_UTILS} validate_fp8_block_shape, from Fp8LinearMethod.create_weights ({module})", words
    return None


def check_weight_load(
    config: Mapping[str, Any], tp: int, version: str, quantization: str | None = None, expert_parallel: bool = False,
    dp: int = 1,
) -> None:
    """Refuse, as vLLM ``version`` does while building the model, a block-FP8 checkpoint that ``tp`` (the routed
    experts: ``dp`` x ``tp``) splits into partial blocks; the message names vLLM's check and the tensor-parallel
    sizes that load."""
    moe_tp = dp * tp if _routed_experts(text_config(config)) else tp
    refusal = load_refusal(config, tp, quantization, version, expert_parallel, moe_tp)
    if refusal is None:
        return
    check, words = refusal
    t = text_config(config)
    heads = int(t.get("num_attention_heads") or 1)
    loads = [size for size in (1, 2, 4, 8, 16, 32, 64) if heads % size == 0
             and load_refusal(config, size, quantization, version, expert_parallel, dp * size) is None]  # fmt: skip
    fix = ", ".join(map(str, loads)) if loads else "none of 1-64"
    if not expert_parallel and _routed_experts(t) \
            and load_refusal(config, tp, quantization, version, True, moe_tp) is None:  # fmt: skip
        fix += ", or --enable-expert-parallel (whole experts a rank)"
    split = f"--tensor-parallel-size {tp}" + (f" (experts: x --data-parallel-size {dp})" if moe_tp != tp else "")
    raise UnsupportedConfigurationError(
        f"vLLM {version} refuses at weight load: {words} ({check}; block-FP8 weights split over "
        f"{split}). Use a --tensor-parallel-size whose split loads: {fix}"
    )
