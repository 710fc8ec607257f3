"""Layouts of the hybrid linear-attention pools (MambaPool, HybridReqToTokenPool, HybridLinearKVPool).

* ``MambaPool`` (2): per-slot recurrent state stacked over this rank's Mamba layers,
  ``size + 1`` slots (slot 0 is the dummy slot): ``mamba.conv[i]`` ``(Lm, size + 1) + conv[i]``,
  ``mamba.temporal`` ``(Lm, size + 1) + temporal``; with speculative decoding also the
  per-draft-token scratch of ``spec_state_size + 1`` slots.
* ``HybridReqToTokenPool`` (3): the request table plus ``req_index_to_mamba_index_mapping``
  ``(rows,)`` int32 (and the ping-pong track mapping with the Mamba extra buffer).
* ``HybridLinearKVPool`` (10): allocates nothing itself; one dense ``full.`` sub-pool over the
  softmax-attention layers, addressed through ``full_attention_layer_id_mapping``.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.dtypes import DType
from .basic import req_to_token_layout
from .layout import BufferRole, BufferSpec, PoolLayout, ViewOf, combine


def mamba_pool_layout(
    *,
    size: int,
    spec_state_size: int,
    conv_shapes: tuple[tuple[int, int], ...],
    temporal_shape: tuple[int, int, int],
    mamba_layer_ids: tuple[int, ...],
    conv_dtype: DType,
    ssm_dtype: DType,
    num_draft_tokens: int | None = None,
    conv_window_dedup: bool = False,
    conv_window_axis: int = 1,
    npu_conv: bool = False,
    device_free_slots: bool = False,
    single_conv: bool = False,
) -> PoolLayout:
    """``MambaPool(size, spec_state_size, ...)`` named ``mamba.*`` (MambaPool).

    Bytes: ``(size + 1) * Lm * per_layer_slot_bytes`` for the persistent state; with
    ``num_draft_tokens = Dd`` also ``intermediate_ssm`` ``(Lm, S + 1, Dd) + temporal`` and one
    conv-window tensor per conv shape, either dedup ``(Lm, S + 1, c, Dd + K - 2)`` (one shared
    window per slot, the window axis widened; CUDA, top-k <= 1, not KDA) or dense
    ``(Lm, S + 1, Dd) + conv``, with ``S = spec_state_size``.

    ``npu_conv`` (Ascend, mamba_utils state shapes): each conv tensor is ``(Lm, size + 1, window + extra,
    channels)`` (window axis first, ``extra = Dd - 1`` with speculative decoding, else 0) and a
    KDA dense conv window has its two conv axes swapped.

    ``single_conv``: one conv shape kept as one tensor, ``conv`` / ``intermediate_conv_window`` (no list index;
    SGLang up to 0.5.5 for every family but KDA).

    ``device_free_slots``: the free-slot list is a device tensor ``mamba_pool.free_slots`` ``(size,)`` int64
    (``torch.arange(1, size + 1)``; SGLang up to 0.5.12), not a host list.
    """
    layers = len(mamba_layer_ids)
    slots = size + 1
    buffers: list[BufferSpec] = []
    if single_conv and len(conv_shapes) != 1:
        raise ValueError(f"single_conv needs one conv shape, got {len(conv_shapes)}")

    def conv_name(base: str, index: int) -> str:
        return base if single_conv else f"{base}[{index}]"

    for index, shape in enumerate(conv_shapes):
        state: tuple[int, ...] = shape
        if npu_conv:
            extra = num_draft_tokens - 1 if num_draft_tokens is not None else 0
            state = (shape[conv_window_axis] + extra, shape[1 - conv_window_axis])
        buffers.append(BufferSpec(conv_name("conv", index), (layers, slots, *state), conv_dtype, role=BufferRole.STATE))
    buffers.append(BufferSpec("temporal", (layers, slots, *temporal_shape), ssm_dtype, role=BufferRole.STATE))
    if num_draft_tokens is not None:
        spec_slots = spec_state_size + 1
        buffers.append(
            BufferSpec(
                "intermediate_ssm",
                (layers, spec_slots, num_draft_tokens, *temporal_shape),
                ssm_dtype,
                role=BufferRole.STATE,
            )
        )
        for index, shape in enumerate(conv_shapes):
            if conv_window_dedup:
                widened = list(shape)
                # one window of Dd + K - 2 columns per slot; draft step t reads [t, t + K - 1):
                # SGLang allocates _intermediate_conv_window_phys[i] and hands engines an
                # overlapping as_strided view (layers, S + 1, Dd, *conv) of it
                widened[conv_window_axis] = num_draft_tokens + shape[conv_window_axis] - 1
                phys = f"_intermediate_conv_window_phys[{index}]"
                buffers.append(BufferSpec(phys, (layers, spec_slots, *widened), conv_dtype, role=BufferRole.STATE,
                                          engine_facing=False))  # fmt: skip
                buffers.append(BufferSpec(
                    conv_name("intermediate_conv_window", index), (layers, spec_slots, num_draft_tokens, *shape),
                    conv_dtype,
                    role=BufferRole.STATE, view=ViewOf(phys, window_axis=2 + conv_window_axis),
                ))  # fmt: skip
                continue
            if npu_conv and conv_window_axis == 0:
                window = (layers, spec_slots, num_draft_tokens, shape[1], shape[0])  # NPU + KDA: axes swapped
            else:
                window = (layers, spec_slots, num_draft_tokens, *shape)
            buffers.append(
                BufferSpec(conv_name("intermediate_conv_window", index), window, conv_dtype, role=BufferRole.STATE)
            )
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("spec_state_size", spec_state_size),
        ("num_mamba_layers", layers),
        ("mamba_layer_ids", ",".join(str(i) for i in mamba_layer_ids)),
        ("speculative_num_draft_tokens", num_draft_tokens),
        ("conv_window_dedup", int(conv_window_dedup and num_draft_tokens is not None)),
        *((("npu_conv", 1),) if npu_conv else ()),
    )
    layout = PoolLayout("MambaPool", tuple(buffers), attributes).prefixed("mamba")
    if not device_free_slots:
        return layout
    free = BufferSpec("mamba_pool.free_slots", (size,), DType.INT64, role=BufferRole.INDEX)
    return replace(layout, buffers=(*layout.buffers, free))


def hybrid_req_to_token_layout(
    *,
    max_running_requests: int,
    max_context_len: int,
    mamba_size: int,
    pre_alloc_size: int = 0,
    ping_pong_track_buffer_size: int | None = None,
    pool_class: str = "HybridReqToTokenPool",
    generation_counter: bool = True,
    ping_pong_dtype: DType = DType.INT64,
    padding_row: bool = True,
    mapping_rows: int | None = None,
) -> PoolLayout:
    """``HybridReqToTokenPool``: the request table plus the row -> Mamba-slot mapping (HybridReqToTokenPool).

    ``req_index_to_mamba_index_mapping`` has one int32 entry per request row
    (``R + pre_alloc + 1``); with the Mamba extra buffer the ping-pong mapping adds
    ``(rows, S)`` ``ping_pong_dtype`` (int64; int32 up to 0.5.12) with ``S = 2`` under the overlap scheduler,
    else 1. ``mapping_rows`` sizes both mappings where they are not indexed by request row (up to
    0.5.10: the Mamba slot count); ``padding_row`` as :func:`.basic.req_to_token_layout`.
    """
    table = req_to_token_layout(
        max_running_requests=max_running_requests,
        max_context_len=max_context_len,
        pre_alloc_size=pre_alloc_size,
        pool_class=pool_class,
        generation_counter=generation_counter,
        padding_row=padding_row,
    )
    rows = max_running_requests + pre_alloc_size + int(padding_row) if mapping_rows is None else mapping_rows
    buffers = [
        *table.buffers,
        BufferSpec("req_index_to_mamba_index_mapping", (rows,), DType.INT32, role=BufferRole.INDEX),
    ]
    if ping_pong_track_buffer_size is not None:
        buffers.append(
            BufferSpec(
                "req_index_to_mamba_ping_pong_track_buffer_mapping",
                (rows, ping_pong_track_buffer_size),
                ping_pong_dtype,
                role=BufferRole.INDEX,
            )
        )
    attributes = (*table.attributes, ("mamba_size", mamba_size), ("mamba_spec_state_size", max_running_requests))
    return PoolLayout(pool_class, tuple(buffers), attributes)


def hybrid_linear_kv_layout(full: PoolLayout, full_attention_layer_ids: tuple[int, ...]) -> PoolLayout:
    """``HybridLinearKVPool``: ``full.*`` buffers of a dense sub-pool over the attention layers.

    ``full_attention_layer_id_mapping[g] = i`` maps global layer ``g`` to sub-pool layer ``i``.
    """
    combined = combine("HybridLinearKVPool", {"full": full})
    mapping = tuple(
        (f"full_attention_layer_id_mapping[{layer}]", index) for index, layer in enumerate(full_attention_layer_ids)
    )
    return PoolLayout(combined.pool_class, combined.buffers, (*combined.attributes, *mapping))
