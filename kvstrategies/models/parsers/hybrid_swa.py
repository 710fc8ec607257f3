"""Family parser: hybrid sliding-window models (which layers are full / SWA, the engine's window).

``parse_hybrid_swa`` is a family parser (``(root, text, geometry) -> geometry``). It does two
independent things:

* **Gemma-4 config rewrite** (ModelConfig._derive_model_shapes, KVCacheConfigurator.__init__): a
  Gemma-4-family HF config states the *sliding* layers' shape in its base attributes and the
  full-attention shape as overrides; SGLang flips that so the base fields are the full-attention
  shape and ``swa_*`` the sliding one. Applied whether or not hybrid-SWA memory is enabled (it is
  a config rewrite).
* **Hybrid-SWA detection** (model_config.is_hybrid_swa_model, get_hybrid_layer_ids): for an
  architecture in SGLang's hybrid-SWA set, or a text config with ``is_hybrid_swa: true``, attach
  a :class:`HybridSWAGeometry` with the global full / SWA layer ids (get_hybrid_layer_ids) and the
  engine's sliding window.

Gemma-2 and Gemma-3 are **not** in SGLang 0.5.23's set: they keep the Default strategy over all
their layers although their configs carry a ``sliding_window``.

Decisions of this library (SGLang's hybrid-SWA list names some families without their
architecture strings):

* Architecture names for Granite SWA (``GraniteSWAForCausalLM``, ``GraniteMoeSWAForCausalLM``),
  IQuest-Q1 (``IQuestQ1ForCausalLM``), MuseGlimmer (``MuseGlimmerForCausalLM``), Beam
  (``BeamForCausalLM``), Inkling (``InklingForCausalLM``, ``InklingForConditionalGeneration``
  (+``MTP``)) and UnlimitedOCR (``UnlimitedOCRForCausalLM``) are taken from their public
  model code; any other spelling still works through the text config's ``is_hybrid_swa``.
* A root ``model_type`` of ``gemma4_text`` (a text-only Gemma-4 checkpoint, architecture
  ``Gemma4ForCausalLM``, which *is* in the hybrid-SWA set) gets the Gemma-4 rewrite with the
  ``gemma4`` gate, although SGLang lists only the wrapper model types.
* A generic ``is_hybrid_swa`` config without ``hybrid_layer_pattern`` falls back to
  ``layer_types``; with neither it is a :class:`KVCacheConfigError`.
* MXFP8 scale bytes of an MLA hybrid-SWA model (HybridSWAPoolConfigurator._full_cell_bytes) use
  SGLang's per-layer head dims of the MHA formula, which for MLA models are SGLang's forced dummy ``head_dim``
  (256 for the DeepSeek-style list, 128 MiniCPM3, 72 Kimi-Linear, the config's for Bailing,
  else the config's / ``hidden // heads``) and the config's ``v_head_dim``; the SWA side uses
  the config's ``swa_head_dim`` (default: the raw head dim) and ``swa_v_head_dim``.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import KVCacheConfigError
from ..architectures import (
    Gemma4KVHeads,
    HybridSWAGate,
    SWALayerSplit,
    SWAWindow,
    any_row,
    first_row,
    model_type_row,
    rows_for,
)
from ..geometry import ModelGeometry
from ..hf import ConfigDict, as_int, get_int, get_opt_int, int_list, str_list

# ---- the Gemma-4 config rewrite (ModelConfig._derive_model_shapes) ----------------------------------------------


def _gemma4_full_kv_heads(rule: Gemma4KVHeads, text: ConfigDict, sliding_heads: int) -> int:
    """Total KV heads of the full-attention layers: the global override when its gate opens."""
    global_heads = get_opt_int(text, "num_global_key_value_heads", minimum=1)
    if rule is Gemma4KVHeads.GLOBAL_OR_ONE:
        return 1 if global_heads is None else global_heads
    if rule is Gemma4KVHeads.GLOBAL_OR_SLIDING:
        return sliding_heads if global_heads is None else global_heads
    if rule is Gemma4KVHeads.GLOBAL_IF_K_EQ_V and global_heads is not None and text.get("attention_k_eq_v") is True:
        return global_heads
    return sliding_heads


def rewrite_gemma4(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Base fields := full-attention shape, ``swa_*`` := sliding shape (Gemma-4 family only).

    Full layers: ``head_dim = v_head_dim = global_head_dim`` (default 512); KV heads the global
    override when gated in, else ``num_key_value_heads``. Sliding layers: the config's
    ``head_dim`` and ``num_key_value_heads``. ``attention_k_eq_v`` does not halve the cache.
    """
    conventions = model_type_row(root.get("model_type") or "")
    if conventions.gemma4_kv_heads is None:
        return geometry
    sliding_dim = geometry.head_dim
    sliding_heads = geometry.total_num_kv_heads
    global_dim = get_int(text, "global_head_dim", 512, minimum=1)
    context = geometry.context_len
    if conventions.max_context_len is not None:
        context = min(context, conventions.max_context_len)
    return replace(
        geometry,
        head_dim=global_dim,
        v_head_dim=global_dim,
        total_num_kv_heads=_gemma4_full_kv_heads(conventions.gemma4_kv_heads, text, sliding_heads),
        swa_head_dim=sliding_dim,
        swa_v_head_dim=sliding_dim,
        swa_total_num_kv_heads=sliding_heads,
        context_len=context,
    )


# ---- hybrid-SWA detection, layer ids, window --------------------------------------------------


def _gates(archs: tuple[str, ...]) -> set[HybridSWAGate]:
    return {row.hybrid_swa for row in rows_for(archs) if row.hybrid_swa is not None}


def _splits(archs: tuple[str, ...]) -> set[SWALayerSplit]:
    return {row.swa_layer_split for row in rows_for(archs) if row.swa_layer_split is not None}


def _is_gemma4_family(root: ConfigDict, archs: tuple[str, ...]) -> bool:
    return any_row(archs, lambda r: r.gemma4_family) or model_type_row(root.get("model_type") or "").gemma4_family


def is_hybrid_swa_config(root: ConfigDict, text: ConfigDict, archs: tuple[str, ...]) -> bool:
    """SGLang's ``is_hybrid_swa_model`` (model_config.is_hybrid_swa_model, get_hybrid_layer_ids), before
    ``--disable-hybrid-swa-memory``."""
    if text.get("is_hybrid_swa") is True:
        return True
    gates = _gates(archs)
    if HybridSWAGate.IF_SLIDING_WINDOW in gates and not text.get("sliding_window"):
        return False  # Laguna is hybrid only with a non-zero sliding_window
    if HybridSWAGate.IF_SLIDING_LAYER in gates:
        types = str_list(text, "layer_types") or ()
        if "sliding_attention" not in types:
            return False
    return bool(gates) or _is_gemma4_family(root, archs)


def _gemma4_layer_types(text: ConfigDict, num_layers: int) -> tuple[str, ...]:
    types = str_list(text, "layer_types")
    if types is None:
        pattern = get_opt_int(text, "sliding_window_pattern", minimum=1)
        if pattern is None:
            raise KVCacheConfigError(
                "a Gemma-4 config needs 'layer_types' (or 'sliding_window_pattern') to tell sliding "
                "from full-attention layers; add it to config.json"
            )
        types = tuple("full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(num_layers))
    # the HF loader forces the last layer to full attention (ModelConfig._derive_model_shapes)
    return (*types[:-1], "full_attention") if types else types


def _ids_by_types(types: tuple[str, ...], limit: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(full, swa)`` from ``layer_types``: ``full_attention`` / ``sliding_attention`` entries."""
    n = len(types) if limit is None else min(limit, len(types))
    full = tuple(i for i in range(n) if types[i] == "full_attention")
    swa = tuple(i for i in range(n) if types[i] == "sliding_attention")
    return full, swa


def _ids_by_pattern(text: ConfigDict, num_layers: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``hybrid_layer_pattern[i] == 1`` is SWA, ``0`` is full (MiMo-V2 and the generic fallback)."""
    pattern = int_list(text, "hybrid_layer_pattern")
    if pattern is None or len(pattern) < num_layers:
        raise KVCacheConfigError(
            f"config field 'hybrid_layer_pattern' must list {num_layers} entries (1 = sliding window, "
            f"0 = full attention), got {None if pattern is None else len(pattern)}"
        )
    full = tuple(i for i in range(num_layers) if pattern[i] == 0)
    swa = tuple(i for i in range(num_layers) if pattern[i] == 1)
    return full, swa


def _required_layer_types(text: ConfigDict, family: str) -> tuple[str, ...]:
    types = str_list(text, "layer_types")
    if types is None:
        raise KVCacheConfigError(
            f"{family} config needs 'layer_types' (sliding_attention / full_attention per layer) to split "
            "its KV pools"
        )
    return types


def hybrid_layer_ids(
    root: ConfigDict, text: ConfigDict, archs: tuple[str, ...], num_layers: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(full_attention_layer_ids, swa_attention_layer_ids)``, global (get_hybrid_layer_ids).

    The architectures' split rules apply in :class:`SWALayerSplit` order; then the generic keys.
    """
    splits = _splits(archs)
    if SWALayerSplit.EVERY_FOURTH_FULL in splits:
        return (
            tuple(i for i in range(num_layers) if (i + 1) % 4 == 0),
            tuple(i for i in range(num_layers) if (i + 1) % 4 != 0),
        )
    if SWALayerSplit.DRAFT_ONE_SWA in splits:
        return (), (0,)
    if SWALayerSplit.HYBRID_LAYER_PATTERN in splits:
        return _ids_by_pattern(text, num_layers)
    if SWALayerSplit.LAYER_TYPES_CAPPED in splits:
        return _ids_by_types(_required_layer_types(text, "Step-3.5"), limit=num_layers)
    if _is_gemma4_family(root, archs):
        return _ids_by_types(_gemma4_layer_types(text, num_layers))
    if SWALayerSplit.LAYER_TYPES in splits:
        return _ids_by_types(_required_layer_types(text, archs[0] if archs else "this"))
    if SWALayerSplit.LOCAL_LAYER_IDS in splits:
        local = int_list(text, "local_layer_ids")
        if local is None:
            raise KVCacheConfigError("an Inkling config needs 'local_layer_ids' (its sliding-window layers)")
        return tuple(i for i in range(num_layers) if i not in local), tuple(sorted(set(local)))
    if SWALayerSplit.ALL_SWA in splits:
        return (), tuple(range(num_layers))
    if text.get("hybrid_layer_pattern") is not None:
        return _ids_by_pattern(text, num_layers)
    if text.get("layer_types") is not None:
        return _ids_by_types(_required_layer_types(text, "this hybrid-SWA"))
    raise KVCacheConfigError(
        f"config marks {archs or 'the model'} as hybrid SWA but gives no layer split; add "
        "'hybrid_layer_pattern' (1 = sliding window, 0 = full) or 'layer_types'"
    )


def engine_sliding_window(root: ConfigDict, text: ConfigDict, archs: tuple[str, ...]) -> int | None:
    """The window the engine hands to the configurators (model_config.is_hybrid_swa_model, get_hybrid_layer_ids).

    GPT-OSS, Gemma-4, Mellum: ``sliding_window - 1`` (HF's inclusive window made exclusive; a
    bidirectional Gemma first becomes ``sliding_window // 2 + 1``). DeepSeek-V4: the config value.
    Others: the first of ``sliding_window_size``, ``sliding_window``, ``window_size``; else
    ``attention_chunk_size`` (Llama-4's chunked attention).
    """
    windows = {row.swa_window for row in rows_for(archs)}
    if SWAWindow.CONFIG_VALUE in windows:
        return get_opt_int(text, "sliding_window", minimum=1)
    if SWAWindow.INCLUSIVE_MINUS_ONE in windows or _is_gemma4_family(root, archs):
        window = get_opt_int(text, "sliding_window", minimum=1)
        if window is None:
            return None
        if _is_gemma4_family(root, archs) and text.get("use_bidirectional_attention") == "all":
            window = window // 2 + 1
        return window - 1
    for key in ("sliding_window_size", "sliding_window", "window_size", "attention_chunk_size"):
        value = text.get(key)
        if value is not None and not (key.startswith("sliding") and value in (-1, 0)):  # -1 / 0: no window (Grok)
            return as_int(value, key, minimum=1)
    return None


def _raw_head_dim(text: ConfigDict) -> int:
    if text.get("head_dim") is not None:
        return get_int(text, "head_dim")
    hidden, heads = text.get("hidden_size"), text.get("num_attention_heads")
    if hidden is None or not heads:
        return 0
    return as_int(hidden, "hidden_size") // as_int(heads, "num_attention_heads", minimum=1)


def _mla_scale_dims(archs: tuple[str, ...], text: ConfigDict) -> tuple[int, int, int, int]:
    """SGLang's (head_dim, v_head_dim, swa_head_dim, swa_v_head_dim) of an MLA model: the dims
    ``HybridSWAPoolConfigurator._full_cell_bytes`` puts into its MHA scale formula, MLA or not."""
    raw = _raw_head_dim(text)
    forced = [row.mla_forced_head_dim for row in rows_for(archs) if row.mla_forced_head_dim is not None]
    # SGLang tests the 256 list first, then MiniCPM3 (128), then Kimi-Linear (72): the largest wins
    full = max(forced) if forced else raw
    v_dim = get_int(text, "v_head_dim", 0) or raw
    swa_dim = get_int(text, "swa_head_dim", 0) or raw
    swa_v_dim = get_int(text, "swa_v_head_dim", 0) or swa_dim
    return full, v_dim, swa_dim, swa_v_dim


def _ratio_default(archs: tuple[str, ...]) -> float:
    """The model's default ``swa_full_tokens_ratio`` (HybridSWAPoolConfigurator), else 0.8."""
    for row in rows_for(archs):
        if row.swa_full_tokens_ratio is not None:
            return row.swa_full_tokens_ratio
    from ..hybrid_swa import DEFAULT_SWA_FULL_TOKENS_RATIO

    return DEFAULT_SWA_FULL_TOKENS_RATIO


def _is_compress(archs: tuple[str, ...]) -> bool:
    """SWA layers keep their own KV heads / head dims; SGLang reads the first entry only."""
    first = first_row(archs[:1])
    return first is not None and first.swa_compress


def parse_hybrid_swa(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Family parser: the Gemma-4 rewrite, then :class:`HybridSWAGeometry` for hybrid-SWA models."""
    geometry = rewrite_gemma4(root, text, geometry)
    archs = geometry.architectures
    if not is_hybrid_swa_config(root, text, archs):
        return geometry
    from ..hybrid_swa import HybridSWAGeometry  # the family's values: only for a hybrid-SWA config

    window = engine_sliding_window(root, text, archs)
    if any_row(archs, lambda r: r.dsv4):
        ratio = _ratio_default(archs)
        hybrid = HybridSWAGeometry((), (), window, default_swa_full_tokens_ratio=ratio, is_deepseek_v4=True)
        return replace(geometry, hybrid_swa=hybrid)
    full, swa = hybrid_layer_ids(root, text, archs, geometry.num_hidden_layers)
    first = first_row(archs[:1])
    draft_arch = None if first is None else first.draft_architecture
    draft_ids = None if draft_arch is None else hybrid_layer_ids(root, text, (draft_arch,), geometry.num_hidden_layers)
    hybrid = HybridSWAGeometry(
        full_attention_layer_ids=full,
        swa_attention_layer_ids=swa,
        sliding_window_size=window,
        is_compress_model=_is_compress(archs),
        default_swa_full_tokens_ratio=_ratio_default(archs),
        mtp_local_layer_ids=int_list(text, "mtp_local_layer_ids"),
        mla_scale_dims=_mla_scale_dims(archs, text) if geometry.use_mla else None,
        draft_layer_ids=draft_ids,
    )
    return replace(geometry, hybrid_swa=hybrid)


__all__ = [
    "engine_sliding_window",
    "hybrid_layer_ids",
    "is_hybrid_swa_config",
    "parse_hybrid_swa",
    "rewrite_gemma4",
]

