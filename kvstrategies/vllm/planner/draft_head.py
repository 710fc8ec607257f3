"""An EAGLE / EAGLE3 draft head with vLLM: its shape for the KV cache and the weights it keeps resident (bytes a rank).

vLLM builds the head beside the target on the last stage while the worker loads the model, inside the load's memory
profile (``vllm/v1/worker/gpu/model_runner.py GPUModelRunner.load_model`` -> ``speculator.load_model`` ->
``spec_decode/eagle/utils.py load_eagle_model``), then hands it the target's input embedding
(``maybe_share_target_embed``: the head's own is freed, and the profile reads the allocated bytes after) and, for an
EAGLE head, the target's LM head (``share_target_lm_head``: ``EagleLlamaForCausalLM`` loads no ``lm_head``). What
stays, in the model dtype, each tensor-parallel matrix split over TP as the target's:

* **EAGLE3** (``llama_eagle3.py Eagle3LlamaForCausalLM``): per layer ``qkv_proj`` reading ``2h`` on the first layer
  (the embedding and the fused feature) and ``h`` after, ``o_proj``, the MLP (``3 x h x intermediate``), three norms
  (``input_layernorm``, ``hidden_norm``, ``post_attention_layernorm``); ``fc`` (``target_hidden x aux -> h``,
  replicated; ``aux`` = ``num_aux_hidden_states``, else the capture layer ids, else 3); the final norm; its own LM
  head of ``draft_vocab_size`` rows (padded as ``ParallelLMHead`` pads them) and, where that vocabulary is not the
  target's, ``draft_id_to_target_id`` (int64 a row);
* **EAGLE** (``llama_eagle.py EagleLlamaForCausalLM``): Llama decoder layers (the first without its input norm) and
  ``fc`` (``2h -> h``, replicated);
* **DFlash** (``qwen3_dflash.py DFlashQwen3ForCausalLM``): Qwen3 decoder layers, ``fc`` over the captured target
  layers, ``hidden_norm``, the final norm and ``mask_embedding`` (:func:`_dflash_params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.dtypes import DType
from ...errors import KVCacheConfigError
from ...models.hf import text_config
from ...sglang.draft_model import vocab_rows_per_rank


@dataclass(frozen=True)
class DraftHead:
    """A draft head's shape: ``num_layers`` decoder layers of ``num_kv_heads`` KV heads (in all) of ``head_dim``."""

    method: str
    num_layers: int
    num_kv_heads: int
    head_dim: int

    def case_fields(self) -> dict[str, int]:
        """The case keys the vLLM strategies read the head from
        (:func:`kvstrategies.vllm.strategies.drafts.vllm_draft`)."""
        return {"eagle_draft_num_layers": self.num_layers, "eagle_draft_num_kv_heads": self.num_kv_heads,
                "eagle_draft_head_dim": self.head_dim}  # fmt: skip


def _int(t: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = t.get(key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31:
        raise KVCacheConfigError(
            f"the draft head's config.json: {key} must be a positive integer, got {value!r:.40}; give the head's own "
            "config (--speculative-config model)"
        )
    return value


def draft_head(config: Mapping[str, Any], method: str) -> DraftHead:
    """The head's layers, KV heads and head size from its config.json (``head_dim`` else ``hidden / heads``)."""
    t = text_config(config)
    hidden, heads = _int(t, "hidden_size"), _int(t, "num_attention_heads")
    return DraftHead(method, _int(t, "num_hidden_layers"), _int(t, "num_key_value_heads", heads),
                     _int(t, "head_dim", max(1, hidden // heads)))  # fmt: skip


def is_latent_head(config: Mapping[str, Any], method: str) -> bool:
    """An EAGLE head of MLA layers (a DeepSeek MTP-style head: ``kv_lora_rank`` in its config), whose layers keep
    the target's latent (``deepseek_eagle.py EagleDeepseekV3ForCausalLM``)."""
    return method == "eagle" and "kv_lora_rank" in text_config(config)


def draft_model_shape(config: Mapping[str, Any]) -> DraftHead:
    """A separate draft model's shape (``method`` ``draft_model``): its layers, KV heads and head size, as for a head;
    only a model of full-attention layers alone is planned (its layers join the target's groups as a head's do)."""
    from ...models.parse import parse_hf_config

    geometry = parse_hf_config(config)
    others = [name for name, value in (("MLA", geometry.use_mla), ("sliding-window", geometry.hybrid_swa is not None
              or geometry.config_sliding_window is not None), ("state (Mamba / linear)", geometry.mamba is not None),
              ("sparse", geometry.dsa is not None or geometry.dsv4 is not None
               or geometry.minimax_sparse is not None)) if value]  # fmt: skip
    if others:
        raise KVCacheConfigError(
            f"the draft model's config.json ({geometry.model_type}) has {others[0]} layers: a draft model of "
            "full-attention layers alone is planned with vLLM; give such a draft, or plan without --speculative-config"
        )
    return draft_head(config, "draft_model")


def draft_head_bytes(config: Mapping[str, Any], method: str, *, tp: int, dtype: DType) -> int:
    """Bytes one rank of the head keeps resident (module doc)."""
    t = text_config(config)
    shape = draft_head(config, method)
    h, inter = _int(t, "hidden_size"), _int(t, "intermediate_size", 4 * _int(t, "hidden_size"))
    heads = _int(t, "num_attention_heads")
    q_rank = max(1, heads // tp) * shape.head_dim
    kv_rank = max(1, shape.num_kv_heads // tp) * shape.head_dim  # a KV head is replicated when TP exceeds them
    mlp = 3 * h * -(-inter // tp)
    if method == "eagle3":
        first_in = 2 * h
        layers = sum((first_in if i == 0 else h) * (q_rank + 2 * kv_rank) + q_rank * h + mlp + 3 * h
                     for i in range(shape.num_layers))  # fmt: skip
        eagle = t.get("eagle_config") if isinstance(t.get("eagle_config"), Mapping) else {}
        capture = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
        aux = _int(t, "num_aux_hidden_states", len(capture) if isinstance(capture, list) and capture else 3)
        vocab = _int(t, "vocab_size")
        draft_vocab = _int(t, "draft_vocab_size", vocab)
        params = layers + _int(t, "target_hidden_size", h) * aux * h + h + vocab_rows_per_rank(draft_vocab, tp) * h
        id_map = 8 * draft_vocab if draft_vocab != vocab else 0
        return params * dtype.itemsize + id_map
    if method == "dflash":
        return _dflash_params(t, shape, h, q_rank, kv_rank, mlp, tp) * dtype.itemsize
    layers = sum(h * (q_rank + 2 * kv_rank) + q_rank * h + mlp + (h if i == 0 else 2 * h)
                 for i in range(shape.num_layers))  # fmt: skip
    return (layers + 2 * h * h) * dtype.itemsize


def _dflash_params(t: Mapping[str, Any], shape: DraftHead, h: int, q_rank: int, kv_rank: int, mlp: int,
                   tp: int) -> int:  # fmt: skip
    """A DFlash draft's resident parameters (``qwen3_dflash.py DFlashQwen3Model``): per layer ``qkv_proj``,
    ``o_proj``, the MLP, two norms and the per-head ``q_norm`` / ``k_norm``; ``fc`` (``target_hidden x aux -> h``,
    replicated; ``aux`` the capture layers: ``eagle_aux_hidden_state_layer_ids``, else ``dflash_config``'s
    ``target_layer_ids``, else every draft layer, as ``_get_dflash_fc_input_size`` counts them), ``hidden_norm``,
    the final norm and ``mask_embedding``; its embedding and LM head are the target's unless the config says the
    draft has its own (``has_own_embed_tokens``, ``has_own_lm_head``)."""
    layers = shape.num_layers * (h * (q_rank + 2 * kv_rank) + q_rank * h + mlp + 2 * h + 2 * shape.head_dim)
    dflash = t.get("dflash_config") if isinstance(t.get("dflash_config"), Mapping) else {}
    capture = t.get("eagle_aux_hidden_state_layer_ids") or (dflash.get("target_layer_ids") if dflash else None)
    aux = len(capture) if isinstance(capture, list) and capture else shape.num_layers
    own = (t.get("has_own_embed_tokens") is True) + (t.get("has_own_lm_head") is True)
    vocab = _int(t, "draft_vocab_size", _int(t, "vocab_size")) if own else 0
    return layers + _int(t, "target_hidden_size", h) * aux * h + 3 * h + own * vocab_rows_per_rank(vocab, tp) * h
