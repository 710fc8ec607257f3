"""Storage dtypes and KV-cache dtype resolution, without importing torch.

Planning works on :class:`DType`, the library's own small enum: a name as torch spells it, an
element size in bytes, and a lazy way to get the torch dtype when a pool is built. The one
place that maps SGLang's ``--kv-cache-dtype`` strings to dtypes is :func:`resolve_kv_cache_dtype`
(sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype); nothing else compares dtype strings.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..errors import KVCacheConfigError, UnsupportedConfigurationError
from .releases import EngineRelease, ReleaseRule, span


class DType(enum.Enum):
    """A tensor element type: ``value`` is the torch attribute name, ``itemsize`` its bytes."""

    BFLOAT16 = ("bfloat16", 2)
    FLOAT16 = ("float16", 2)
    FLOAT32 = ("float32", 4)
    FLOAT8_E4M3FN = ("float8_e4m3fn", 1)
    FLOAT8_E4M3FNUZ = ("float8_e4m3fnuz", 1)
    FLOAT8_E5M2 = ("float8_e5m2", 1)
    FLOAT8_E8M0FNU = ("float8_e8m0fnu", 1)
    # One storage element packs two FP4 values; SGLang's sizing relies on itemsize 1.
    FLOAT4_E2M1FN_X2 = ("float4_e2m1fn_x2", 1)
    UINT8 = ("uint8", 1)
    INT8 = ("int8", 1)
    INT32 = ("int32", 4)
    INT64 = ("int64", 8)
    UINT64 = ("uint64", 8)

    @property
    def torch_name(self) -> str:
        """The attribute name in the ``torch`` module, e.g. ``"bfloat16"``."""
        return str(self.value[0])

    @property
    def itemsize(self) -> int:
        """Bytes per storage element."""
        return int(self._value_[1])

    @property
    def is_fp8(self) -> bool:
        return self in _FP8

    @property
    def is_fp4(self) -> bool:
        return self is DType.FLOAT4_E2M1FN_X2

    @property
    def kv_store_dtype(self) -> DType:
        """SGLang's base ``KVCache`` storage rule (KVCache.__init__ store dtype): fp8 is stored as uint8."""
        return DType.UINT8 if self.is_fp8 else self

    def __str__(self) -> str:
        """As torch prints it: ``torch.bfloat16``."""
        return f"torch.{self.torch_name}"

    def to_torch(self) -> Any:
        """The ``torch.dtype`` (imports torch; only pool building calls this)."""
        from .torch_import import import_torch

        torch = import_torch()
        try:
            return getattr(torch, self.torch_name)
        except AttributeError as exc:  # e.g. float4_e2m1fn_x2 on an old torch
            raise UnsupportedConfigurationError(
                f"this torch ({torch.__version__}) has no torch.{self.torch_name}; "
                "install a newer torch to build pools of this dtype"
            ) from exc

    @classmethod
    def from_name(cls, name: str) -> DType:
        """Parse ``"bfloat16"``, ``"torch.bfloat16"``, ``"bf16"``, ``"fp32"``, ..."""
        if not isinstance(name, str):
            raise KVCacheConfigError(f"a dtype name must be a string such as 'bfloat16', got {name!r:.40}")
        key = name.strip().lower().removeprefix("torch.")
        key = _ALIASES.get(key, key)
        for member in cls:
            if member.torch_name == key:
                return member
        allowed = ", ".join(sorted({m.torch_name for m in cls} | set(_ALIASES)))
        raise KVCacheConfigError(f"unknown dtype {name!r}; use one of: {allowed}")


_FP8 = frozenset({DType.FLOAT8_E4M3FN, DType.FLOAT8_E4M3FNUZ, DType.FLOAT8_E5M2})
_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
}


class KVRecipe(enum.Enum):
    """How a quantized KV cache stores its values beyond the plain element dtype."""

    NONE = "none"
    MXFP8 = "mxfp8"  # fp8 e4m3 data + one UE8M0 scale per 32 values
    NVFP4 = "nvfp4"  # two-level FP4: per-16 fp8 block scales + per-layer fp32 global scale
    FP4_MX_BLOCK16 = "fp4_mx_block16"  # FP4 with one exponent byte per 16 values


@dataclass(frozen=True)
class KVCacheDtype:
    """A resolved ``--kv-cache-dtype``: the logical dtype sizing uses and the resolved string.

    ``name`` is SGLang's ``kv_cache_dtype_str`` (the resolved string, e.g. ``"fp8_e4m3"`` when
    ``auto`` resolved to FP8 through the checkpoint), ``dtype`` the logical torch dtype.
    """

    name: str
    dtype: DType
    recipe: KVRecipe = KVRecipe.NONE

    @property
    def itemsize(self) -> int:
        """``es(kv_cache_dtype)``, the element size DefaultPoolConfigurator._compute_cell_size multiplies by."""
        return self.dtype.itemsize

    @property
    def is_fp8(self) -> bool:
        return self.dtype.is_fp8

    @property
    def is_fp4(self) -> bool:
        return self.dtype.is_fp4

    @property
    def store_dtype(self) -> DType:
        """The dtype tensors are allocated in (KVCache.__init__ store dtype): uint8 for fp8 and fp4."""
        if self.recipe is KVRecipe.MXFP8:
            return DType.FLOAT8_E4M3FN
        if self.dtype.is_fp8 or self.dtype.is_fp4:
            return DType.UINT8
        return self.dtype

    @property
    def base_store_dtype(self) -> DType:
        """SGLang's base ``KVCache`` rule, recipes aside: uint8 for fp8, else the dtype itself.

        What pools without their own quantized layout (MLA, DSA, MiniMax sub-pools) allocate.
        """
        return self.dtype.kv_store_dtype


KV_CACHE_DTYPE_NAMES = (
    "auto",
    "bf16",
    "bfloat16",
    "fp16",
    "float16",
    "fp32",
    "float32",
    "fp8_e4m3",
    "fp8_e5m2",
    "mxfp8",
    "nvfp4",
    "fp4_mx_block16",
)


#: the KV recipes by name: ``mxfp8``, ``nvfp4`` and ``fp4_mx_block16`` (before: only the bare
#: ``fp4_e2m1`` storage dtype, whose ``MHATokenToKVPoolFP4`` pool kvstrategies does not model)
KV_RECIPE_NAMES = ReleaseRule(
    "kv-recipe-names",
    span("0.5.16"),
    "--kv-cache-dtype accepts the recipes mxfp8, nvfp4 and fp4_mx_block16",
    "sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype (0.5.15: ModelRunner.configure_kv_cache_dtype)",
)
_RECIPE_NAMES = ("mxfp8", "nvfp4", "fp4_mx_block16")


#: ``--kv-cache-dtype bf16`` / ``bfloat16`` (0.5.4); before, the choices are ``auto``, ``fp8_e5m2`` and ``fp8_e4m3``
KV_BF16_NAMES = ReleaseRule(
    "kv-bf16-names",
    span("0.5.4"),
    "--kv-cache-dtype accepts bf16 and bfloat16",
    "sglang.srt.server_args.ServerArgs.add_cli_args (--kv-cache-dtype choices)",
)


def require_release_kv_cache_dtype(name: str, release: EngineRelease) -> None:
    """Refuse a ``--kv-cache-dtype`` name ``release`` does not accept (or accepts in a pool not modelled)."""
    key = str(name).strip().lower()
    if key in ("bf16", "bfloat16") and not KV_BF16_NAMES.holds(release):
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {name!r}: {release.label}'s --kv-cache-dtype has no such choice (choices auto, fp8_e5m2, "
            f"fp8_e4m3; {KV_BF16_NAMES.source}); use auto with a bf16 model, or SGLang {KV_BF16_NAMES.span.describe()}"
        )
    if KV_RECIPE_NAMES.holds(release):
        return
    if key in _RECIPE_NAMES:
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {name!r}: {release.label} has no such KV cache dtype (\"Unsupported kv_cache_dtype\", "
            "sglang.srt.model_executor.model_runner.ModelRunner.configure_kv_cache_dtype); the recipes exist from "
            f"SGLang {KV_RECIPE_NAMES.span.describe()}"
        )
    if key in ("fp4_e2m1", "float4_e2m1fn_x2"):
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {name!r} under {release.label} selects its MHATokenToKVPoolFP4 pool, which kvstrategies "
            "does not model; use fp8_e4m3 or bf16, or a later release with nvfp4 / fp4_mx_block16"
        )


def resolve_kv_cache_dtype(
    name: str,
    model_dtype: DType,
    *,
    checkpoint_kv_fp8: bool = False,
    is_hip: bool = False,
    is_cpu: bool = False,
) -> KVCacheDtype:
    """Resolve a ``--kv-cache-dtype`` string as SGLang 0.5.23 does
    (sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype).

    ``auto`` is the model dtype, or ``float8_e4m3fn`` (string ``fp8_e4m3``) when the checkpoint's
    quantization config sets ``kv_cache_quant_algo == "FP8"``. On HIP every fp8 name maps to the
    platform fp8 dtype (``float8_e4m3fnuz``). ``fp16``/``fp32`` are accepted as library
    extensions for models served in those dtypes.
    """
    if not isinstance(name, str):
        raise KVCacheConfigError(f"kv_cache_dtype must be a string such as 'auto' or 'fp8_e4m3', got {name!r:.40}")
    key = name.strip().lower()
    if not isinstance(model_dtype, DType):
        raise KVCacheConfigError(f"model_dtype must be a DType (DType.from_name('bfloat16')), got {model_dtype!r:.40}")
    for flag, value in (("checkpoint_kv_fp8", checkpoint_kv_fp8), ("is_hip", is_hip), ("is_cpu", is_cpu)):
        if not isinstance(value, bool):
            raise KVCacheConfigError(f"{flag} must be True or False, got {value!r:.40}")
    fp8 = DType.FLOAT8_E4M3FNUZ if is_hip else DType.FLOAT8_E4M3FN
    if key == "auto":
        if checkpoint_kv_fp8:
            return KVCacheDtype("fp8_e4m3", fp8)
        return KVCacheDtype("auto", model_dtype)
    if key in ("bf16", "bfloat16"):
        return KVCacheDtype(key, DType.BFLOAT16)
    if key in ("fp16", "float16"):
        return KVCacheDtype(key, DType.FLOAT16)
    if key in ("fp32", "float32"):
        return KVCacheDtype(key, DType.FLOAT32)
    if key == "fp8_e4m3":
        return KVCacheDtype(key, fp8)
    if key == "fp8_e5m2":
        if is_cpu:
            raise UnsupportedConfigurationError(
                "kv_cache_dtype 'fp8_e5m2' is not supported on CPU; use 'fp8_e4m3' or 'bf16'"
            )
        return KVCacheDtype(key, fp8 if is_hip else DType.FLOAT8_E5M2)
    if key == "mxfp8":
        return KVCacheDtype(key, DType.FLOAT8_E4M3FN, KVRecipe.MXFP8)
    if key == "nvfp4":
        return KVCacheDtype(key, DType.FLOAT4_E2M1FN_X2, KVRecipe.NVFP4)
    if key == "fp4_mx_block16":
        return KVCacheDtype(key, DType.FLOAT4_E2M1FN_X2, KVRecipe.FP4_MX_BLOCK16)
    if key == "mxfp4":
        raise UnsupportedConfigurationError(
            "kv_cache_dtype 'mxfp4' is reserved for true block-32 MXFP4 and is not a KV cache "
            "recipe in SGLang 0.5.23; use 'nvfp4' or 'fp4_mx_block16'"
        )
    if key in ("fp4_e2m1", "float4_e2m1fn_x2"):
        raise KVCacheConfigError(
            f"kv_cache_dtype {name!r} names an FP4 storage dtype without a recipe; FP4 KV is "
            "selected by recipe: use 'nvfp4' or 'fp4_mx_block16'"
        )
    raise KVCacheConfigError(
        f"unsupported kv_cache_dtype {name!r}; use one of: {', '.join(KV_CACHE_DTYPE_NAMES)}"
    )
