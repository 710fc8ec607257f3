"""The weights a separate draft model (``--speculative-draft-model-path``) holds per rank.

``Scheduler.init_model_worker`` builds the draft worker (``EAGLEWorkerV2``, ``StandaloneWorkerV2``,
the DFLASH worker), which loads the draft model, before ``Scheduler.init_memory_pools`` reads the
free memory to size the target's KV cache: the whole draft model is resident while the pool is
sized, its own embedding included (an EAGLE3 draft gives its embedding back for the target's only in
``alloc_memory_pool``, after the sizing).

* **EAGLE3** (``LlamaForCausalLMEagle3``, ``sglang/srt/models/llama_eagle3.py``): a
  ``VocabParallelEmbedding`` of the target's vocabulary, ``fc`` (``hidden_in x aux x hidden``,
  replicated ``nn.Linear``; ``aux`` = ``num_aux_hidden_states``, else the capture layer ids, else 3),
  per layer a ``LlamaDecoderLayer`` whose ``qkv_proj`` reads ``2 x hidden`` (the embedding and the
  fused feature), three RMSNorms (``input_layernorm``, ``hidden_norm``, ``post_attention_layernorm``),
  the final norm, and a ``ParallelLMHead`` of ``draft_vocab_size`` rows (the target's vocabulary when
  absent; none when the embeddings are tied). Everything in the model dtype.
* **any other draft** (EAGLE-1/2 heads, a small standalone model): its config through the
  planner's weight estimate (:mod:`kvstrategies.planner.weights`).

Bytes per rank; vocabulary rows as ``VocabParallelEmbedding`` pads them (:func:`vocab_rows_per_rank`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import KVCacheConfigError
from ..models.hf import text_config
from ..planner.weights import estimate_weights, weight_format_from_config


def _int(t: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = t.get(key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KVCacheConfigError(
            f"the draft model's config.json: {key} must be a positive integer, got {value!r:.40}; give the draft's "
            "own config (--speculative-draft-model-path) or its bytes with --weight-bytes"
        )
    return value


def vocab_rows_per_rank(vocab: int, tp: int) -> int:
    """Rows of a vocab-parallel table one rank holds: ``pad(vocab, 64) / tp``, padding to
    ``64 x tp`` when ``tp`` does not divide (``VocabParallelEmbedding.__init__``)."""
    padded = -(-vocab // 64) * 64
    if padded % tp:
        padded = -(-vocab // (64 * tp)) * (64 * tp)
    return padded // tp


def is_eagle3(config: Mapping[str, Any]) -> bool:
    """An EAGLE3 draft head (its architecture name says so)."""
    names = config.get("architectures") or ()
    return any("eagle3" in str(a).lower() for a in ([names] if isinstance(names, str) else names))


def eagle3_draft_bytes(config: Mapping[str, Any], *, tp: int) -> int:
    """Bytes one rank of an EAGLE3 draft holds (module doc), ``tp``-way sharded."""
    t = text_config(config)
    h, inter, layers = _int(t, "hidden_size"), _int(t, "intermediate_size"), _int(t, "num_hidden_layers")
    heads = _int(t, "num_attention_heads")
    kv_heads = _int(t, "num_key_value_heads", heads)
    head_dim = _int(t, "head_dim", h // heads)
    vocab = _int(t, "vocab_size")
    draft_vocab = _int(t, "draft_vocab_size", vocab)
    hidden_in = _int(t, "target_hidden_size", h)
    eagle = t.get("eagle_config") if isinstance(t.get("eagle_config"), Mapping) else {}
    capture = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    default_aux = len(capture) if isinstance(capture, list) and capture else 3
    aux = _int(t, "num_aux_hidden_states") if t.get("num_aux_hidden_states") is not None else default_aux
    tied = bool(t.get("tie_word_embeddings", False))

    q_rank = max(1, heads // tp) * head_dim
    kv_rank = max(1, kv_heads // tp) * head_dim  # a KV head is replicated when tp exceeds them
    per_layer = 2 * h * (q_rank + 2 * kv_rank) + q_rank * h + 3 * h * (-(-inter // tp)) + 3 * h
    params = (
        vocab_rows_per_rank(vocab, tp) * h
        + hidden_in * aux * h
        + layers * per_layer
        + h
        + (0 if tied else vocab_rows_per_rank(draft_vocab, tp) * h)
    )
    return math.ceil(params * weight_format_from_config(dict(config)).base_bytes)


def draft_model_bytes(config: Mapping[str, Any], *, tp: int, attn_tp: int) -> tuple[int, str]:
    """``(bytes per rank, how)`` of the draft model whose ``config.json`` is ``config``."""
    if is_eagle3(config):
        return eagle3_draft_bytes(config, tp=tp), "an EAGLE3 head, sglang/srt/models/llama_eagle3.py"
    estimate = estimate_weights(dict(config))
    return estimate.weight_bytes_per_rank(tp, 1, attn_tp=attn_tp), "estimated from its config"
