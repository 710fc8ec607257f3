"""KV write-path kernels: Triton on CUDA, a pure-torch reference everywhere (write_path.md).

The public functions dispatch (see :mod:`.dispatch`); :mod:`.reference` holds the semantics and
the quantizers/dequantizers (``quantize_mxfp8``, ``quantize_fp4_block16``, ``quantize_nvfp4``,
``quantize_index_k``, ...). Importing this package imports torch but never triton.
"""

from . import reference
from .dispatch import (
    interpret_enabled,
    move_kv_cache,
    quantize_store_fp4_block16,
    quantize_store_index_k,
    quantize_store_mxfp8,
    quantize_store_nvfp4,
    store_index_k_scale,
    store_kv,
    store_mla_kv,
    store_rows,
    triton_available,
)

__all__ = [
    "interpret_enabled",
    "move_kv_cache",
    "quantize_store_fp4_block16",
    "quantize_store_index_k",
    "quantize_store_mxfp8",
    "quantize_store_nvfp4",
    "reference",
    "store_index_k_scale",
    "store_kv",
    "store_mla_kv",
    "store_rows",
    "triton_available",
]
