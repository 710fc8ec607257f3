"""The weights one vLLM worker holds ("Model loading took X GiB"), per pipeline stage, in bytes.

vLLM's ``model_memory_usage`` (``vllm/v1/worker/gpu/model_runner.py``, logged as "Model loading
took") is the torch memory after ``load_model``: the stage's parameters at their loaded dtypes plus
its buffers. The parameters come from the project's weight estimate
(:mod:`kvstrategies.planner.weights`, which prices FP8 / MXFP4 / NVFP4 / AWQ / GPTQ checkpoints),
or the checkpoint's safetensors headers when a folder is given (:mod:`kvstrategies.planner.checkpoint`),
or ``--weight-bytes``. The buffer added here is the rotary embedding's ``cos_sin_cache``
(``vllm/model_executor/layers/rotary_embedding/base.py RotaryEmbedding.__init__``: ``max_position x
rotary_dim`` in the model dtype, one per process as ``get_rope`` caches it). Not modelled: a
kernel's repacking at load (Marlin, MXFP4 MoE padding, ``mxfp4_round_up_hidden_size_and_intermediate_size``
in ``vllm/model_executor/layers/fused_moe/oracle/mxfp4.py``) and MLA's absorbed projections.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.dtypes import DType
from ...models.hf import text_config
from ...planner.checkpoint import ShardingFacts, rank_bytes, read_checkpoint
from ...planner.weights import estimate_weights

GIB = 2**30


@dataclass(frozen=True)
class VLLMWeights:
    """Bytes each pipeline stage's worker holds after loading (rank 0 of the stage), and their source."""

    per_stage: tuple[int, ...]
    source: str

    @property
    def fullest(self) -> int:
        return max(self.per_stage)


def rope_buffer_bytes(config: Mapping[str, Any], dtype: DType) -> int:
    """``max_position_embeddings x rotary_dim x dtype`` bytes of the shared ``cos_sin_cache``."""
    t = text_config(config)

    def num(key: str) -> float:
        value = t.get(key, config.get(key))
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    heads, hidden = num("num_attention_heads"), num("hidden_size")
    if not heads or not hidden:
        return 0
    rotary = num("qk_rope_head_dim") or (num("head_dim") or hidden / heads) * (num("partial_rotary_factor") or 1.0)
    return int(int(num("max_position_embeddings")) * int(rotary) * dtype.itemsize)


def vllm_weights(
    config: Mapping[str, Any],
    *,
    tp: int,
    pp: int,
    dtype: DType,
    quantization: str | None = None,
    weight_bytes: int | None = None,
    checkpoint: str | None = None,
    mtp: bool = False,
) -> VLLMWeights:
    """Each stage's resident weight bytes (see the module doc); ``mtp``: the last stage also holds the MTP
    draft's layers (its embedding and head are the target's: ``maybe_share_target_embed``,
    ``share_target_lm_head`` in ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py``)."""
    rope = rope_buffer_bytes(config, dtype)
    rope_text = f" + {rope / 2**20:.1f} MiB RoPE cos_sin_cache" if rope else ""
    if weight_bytes is not None:
        return VLLMWeights((weight_bytes,) * pp, "given per rank (--weight-bytes)")
    ckpt = read_checkpoint(checkpoint) if checkpoint is not None and quantization is None else None
    if ckpt is not None and ckpt.source == "headers":
        facts = ShardingFacts.from_config(config, serve_bytes=dtype.itemsize)
        stages = tuple(rank_bytes(ckpt, facts, tp=tp, pp=pp, pp_rank=r, include_mtp=mtp) + rope for r in range(pp))
        draft_text = ""
        if mtp:
            draft = stages[-1] - rope - rank_bytes(ckpt, facts, tp=tp, pp=pp, pp_rank=pp - 1)
            draft_text = f"; + {draft / GIB:.2f} GiB of MTP draft layers on the last stage"
        return VLLMWeights(stages, f"from the {ckpt.label}, split over TP {tp} x PP {pp}{rope_text}{draft_text}")
    estimate = estimate_weights(config, dtype=dtype.torch_name, quantization=quantization)
    stages = tuple(estimate.stage_bytes(tp, pp, r, include_mtp=mtp) + rope for r in range(pp))
    notes = "".join(f"; note: {n}" for n in estimate.fmt.notes)
    if mtp:
        draft = estimate.stage_bytes(tp, pp, pp - 1, include_mtp=True) - estimate.stage_bytes(tp, pp, pp - 1)
        notes += f"; + {draft / GIB:.2f} GiB of MTP draft layers on the last stage"
    return VLLMWeights(
        stages,
        f"estimated from the config: {estimate.main_params / 1e9:.2f}B parameters, {estimate.fmt.name}, "
        f"split over TP {tp} x PP {pp}{rope_text}{notes}",
    )
