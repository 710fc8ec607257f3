"""``MHATokenToKVPoolMXFP8``: fp8-e4m3 K/V with one UE8M0 scale per 32 values (MHATokenToKVPoolMXFP8).

Per layer: ``k_buffer[l]`` ``(m, H, D)`` and ``v_buffer[l]`` ``(m, H, Dv)`` in float8_e4m3fn
(separate allocations, no fused storage, no uint8 detour) and their float8_e8m0fnu scales, with
``m = T + P``. Page 128 stores scales in the interleaved atom the FA4 block-scaled kernels read,
``(m / 128, H, 32, 4, D / 32)``; any other page stores them flat, ``(m, H, D / 32)``. Scales are
zero-filled (e8m0 byte 0 is 2^-127; 0xFF would be NaN).

Bytes per token and layer: ``H * (D + Dv) + H * (D + Dv) / 32``.
"""

from __future__ import annotations

from ..core.dtypes import DType
from ..errors import KVCacheConfigError
from .layout import BufferSpec, PoolLayout

#: values per UE8M0 scale
MXFP8_BLOCK = 32
#: the page size whose scales use the interleaved (BlockScaledBasicChunk) layout
INTERLEAVED_PAGE = 128


def mxfp8_scale_cell_bytes(head_num: int, head_dim: int, v_head_dim: int, layer_num: int) -> int:
    """Scale bytes per token slot: ``(H * (D + Dv) * L) // 32``.

    SGLang's DefaultPoolConfigurator._compute_cell_size floors the whole product once; HybridSWA floors per layer.
    """
    return (head_num * (head_dim + v_head_dim) * layer_num) // MXFP8_BLOCK


def mxfp8_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    v_head_dim: int,
    layer_num: int,
) -> PoolLayout:
    """The MXFP8 pool for ``size`` tokens; raises when a head dim is not a multiple of 32."""
    for name, dim in (("head_dim", head_dim), ("v_head_dim", v_head_dim)):
        if dim % MXFP8_BLOCK:
            raise KVCacheConfigError(
                f"mxfp8 KV cache needs {name} to be a multiple of {MXFP8_BLOCK}, got {dim}; "
                "use fp8_e4m3 or bf16 for this model"
            )
    rows = size + page_size
    interleaved = page_size == INTERLEAVED_PAGE
    if interleaved and rows % INTERLEAVED_PAGE:
        raise KVCacheConfigError(
            f"mxfp8 with page_size 128 needs T + P to be a multiple of 128, got {rows} rows; "
            "size the pool in whole pages"
        )
    sides = (("k", head_dim), ("v", v_head_dim))
    buffers: list[BufferSpec] = []
    for layer in range(layer_num):
        for side, dim in sides:
            buffers.append(BufferSpec(f"{side}_buffer[{layer}]", (rows, head_num, dim), DType.FLOAT8_E4M3FN))
        for side, dim in sides:
            if interleaved:
                shape: tuple[int, ...] = (rows // INTERLEAVED_PAGE, head_num, 32, 4, dim // MXFP8_BLOCK)
            else:
                shape = (rows, head_num, dim // MXFP8_BLOCK)
            buffers.append(BufferSpec(f"{side}_scale_buffer[{layer}]", shape, DType.FLOAT8_E8M0FNU))
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("page_size", page_size),
        ("head_num", head_num),
        ("head_dim", head_dim),
        ("v_head_dim", v_head_dim),
        ("layer_num", layer_num),
        ("scale_layout", "interleaved" if interleaved else "flat"),
    )
    return PoolLayout("MHATokenToKVPoolMXFP8", tuple(buffers), attributes)
