"""FP4 KV pools: the MHA quantized recipes (MHATokenToKVPool FP4 quant_method) and ``MLATokenToKVPoolFP4``.

Two FP4 values share one uint8 byte (``float4_e2m1fn_x2`` has element size 1), so a row of
``D`` values is ``D / 2`` bytes. The recipes differ in their scales:

* ``fp4_mx_block16``: one exponent byte per 16 values, ``(m, H * D / 16)`` per layer; nothing else.
* ``nvfp4``: fp8-e4m3 block scales per 16 values in up to two layouts, chosen by the attention
  backends (:meth:`FP4KVRecipe.configure`), an optional shared fp8 dequant workspace, and two
  per-layer fp32 global-scale vectors.

``m = T + P`` rows (pool page ``P``); V is sized with ``D`` (the recipe ignores ``v_head_dim``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.dtypes import DType, KVRecipe
from ..core.releases import ReleaseRule, span
from ..errors import KVCacheConfigError
from .layout import BufferRole, BufferSpec, PoolLayout

#: values per block scale (both recipes)
FP4_BLOCK = 16
#: the attention backend that reads native FP4 KV (with its own swizzled scale layout)
NATIVE_FP4_BACKEND = "trtllm_mha"
#: the prefill backend that dequantizes FP4 KV into an fp8 workspace first
DEQUANT_PREFILL_BACKEND = "flashinfer"

#: FP4 KV priced and laid out by the recipe for the resolved attention backends. Before it every
#: FP4 MHA cell is the fixed formula of :func:`fixed_fp4_cell_bytes` (whatever the recipe), and
#: nvfp4 always lays out linear block scales and the dequant workspace.
FP4_RECIPE_BY_BACKEND = ReleaseRule(
    "fp4-kv-recipe-by-backend",
    span("0.5.21"),
    "FP4 KV cell and nvfp4 scale layouts follow the recipe and attention backends (before: one fixed cell, "
    "nvfp4 always linear scales + fp8 workspace)",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_cell_size; "
    "sglang.srt.layers.quantization.fp4_kv_cache_quant_method.get_kv_cache_quant_method",
)


def fixed_fp4_cell_bytes(head_num: int, head_dim: int, v_head_dim: int, layer_num: int) -> int:
    """The FP4 MHA cell before :data:`FP4_RECIPE_BY_BACKEND` (kv itemsize 1), for either recipe:

    ``H (D + Dv) L // 2 + (H D L 2) // 16 + H D 2``: packed K and V, one scale byte per 16 values
    of K-width on both sides, and one shared fp8 dequant workspace row of ``H x D`` for K and V.
    """
    h, d, n = head_num, head_dim, layer_num
    return h * (d + v_head_dim) * n // 2 + (h * d * n * 2) // FP4_BLOCK + h * d * 2


@dataclass(frozen=True)
class FP4KVRecipe:
    """An FP4 KV recipe as configured for the attention backends: which buffers exist.

    nvfp4 (fp4_kv_cache_quant_method compute_cell_size, MHATokenToKVPool FP4 quant_method): ``dq`` = prefill backend
    ``flashinfer``; ``nat`` = either backend ``trtllm_mha``; ``native = nat and SM100``; ``linear = dq or (nat and not
    SM100)``. With no backend (or backends matching neither rule) only the packed data and the
    global scales exist.
    """

    recipe: KVRecipe
    linear_scales: bool = False
    native_scales: bool = False
    dequant_workspace: bool = False

    @classmethod
    def configure(
        cls,
        recipe: KVRecipe,
        *,
        prefill_backend: str | None,
        decode_backend: str | None,
        is_sm100: bool,
        by_backend: bool = True,
    ) -> FP4KVRecipe:
        """The recipe named by ``kv_cache_dtype`` with the resolved (prefill, decode) backends.

        ``by_backend`` false (:data:`FP4_RECIPE_BY_BACKEND` not in the release): nvfp4 lays out
        linear scales and the workspace whatever the backends.
        """
        if recipe is KVRecipe.FP4_MX_BLOCK16:
            return cls(recipe)
        if recipe is KVRecipe.NVFP4 and not by_backend:
            return cls(recipe, linear_scales=True, dequant_workspace=True)
        if recipe is KVRecipe.NVFP4:
            dq = prefill_backend == DEQUANT_PREFILL_BACKEND
            nat = NATIVE_FP4_BACKEND in (prefill_backend, decode_backend)
            return cls(
                recipe,
                linear_scales=dq or (nat and not is_sm100),
                native_scales=nat and is_sm100,
                dequant_workspace=dq,
            )
        # SGLang's ValueError text (DefaultPoolConfigurator._compute_cell_size); 'mxfp4' is rejected earlier by
        # resolve_kv_cache_dtype
        raise KVCacheConfigError(
            "FP4 storage dtype requires an explicit KV recipe name: set kv_cache_dtype to 'nvfp4' or "
            f"'fp4_mx_block16' (got recipe {recipe.value!r})"
        )

    @property
    def name(self) -> str:
        return self.recipe.value

    @property
    def global_scales(self) -> bool:
        """nvfp4 keeps per-layer fp32 K/V global scales; fp4_mx_block16 keeps no per-layer state."""
        return self.recipe is KVRecipe.NVFP4

    @property
    def scale_layouts(self) -> str:
        """A label for plans: ``"linear+native+dq"``, ``"mx16"``, ``"none"``, ..."""
        if self.recipe is KVRecipe.FP4_MX_BLOCK16:
            return "mx16"
        parts = [n for n, on in (("linear", self.linear_scales), ("native", self.native_scales),
                                 ("dq", self.dequant_workspace)) if on]
        return "+".join(parts) or "none"

    def cell_bytes(self, head_num: int, head_dim: int, layer_num: int) -> int:
        """Bytes per token slot (fp4_kv_cache_quant_method compute_cell_size, kv itemsize 1).

        ``data = H * (D // 2) * L * 2``; mx16: ``+ (H * D // 16) * L * 2``; nvfp4:
        ``+ H * (D // 16) * L * 2 * (linear + native) + (H * D * 2 if dq)``. The workspace is one
        buffer shared by all layers, so it is per token but not per layer.
        """
        h, d, n = head_num, head_dim, layer_num
        data = h * (d // 2) * n * 2
        if self.recipe is KVRecipe.FP4_MX_BLOCK16:
            return data + (h * d // FP4_BLOCK) * n * 2
        one_scale = h * (d // FP4_BLOCK) * n * 2
        workspace = h * d * 2 if self.dequant_workspace else 0
        return data + one_scale * (int(self.linear_scales) + int(self.native_scales)) + workspace

    def layout(
        self,
        *,
        size: int,
        page_size: int,
        head_num: int,
        head_dim: int,
        layer_num: int,
        quant_page_size: int,
    ) -> PoolLayout:
        """``MHATokenToKVPool`` with this recipe's ``create_buffers(m = T + P, H, D, L)`` (fp4_kv_cache_quant_method).

        ``quant_page_size`` is the recipe's page size: the scheduler page size, not the pool's
        (they differ for a DCP draft). The native scale layout needs ``Pq % 4 == 0``,
        ``D % 64 == 0`` and ``m % Pq == 0``.
        """
        rows = size + page_size
        h, d = head_num, head_dim
        if self.native_scales:
            _check_native(rows, d, quant_page_size)
        buffers: list[BufferSpec] = []
        for layer in range(layer_num):
            for side in ("k", "v"):
                buffers.append(BufferSpec(f"{side}_buffer[{layer}]", (rows, h, d // 2), DType.UINT8))
            if self.recipe is KVRecipe.FP4_MX_BLOCK16:
                for side in ("k", "v"):
                    buffers.append(BufferSpec(f"{side}_scale_buffer[{layer}]", (rows, h * d // FP4_BLOCK), DType.UINT8))
                continue
            if self.linear_scales:
                for side in ("k", "v"):
                    buffers.append(
                        BufferSpec(f"{side}_scale_buffer[{layer}]", (rows, h, d // FP4_BLOCK), DType.UINT8)
                    )
            if self.native_scales:
                shape = (rows // quant_page_size, h, quant_page_size, d // FP4_BLOCK)
                for side in ("k", "v"):
                    buffers.append(BufferSpec(f"native_{side}_scale_buffer[{layer}]", shape, DType.UINT8))
        if self.dequant_workspace:
            for side in ("k", "v"):
                buffers.append(
                    BufferSpec(f"dq_{side}_buffer", (rows, h, d), DType.FLOAT8_E4M3FN, role=BufferRole.WORKSPACE)
                )
        if self.global_scales:
            # (L,) ones at build time; checkpoint loading may re-allocate them to max layer id + 1
            for side in ("k", "v"):
                buffers.append(BufferSpec(f"quant_method.{side}_scales_gpu", (layer_num,), DType.FLOAT32))
        attributes: tuple[tuple[str, int | str | None], ...] = (
            ("size", size),
            ("page_size", page_size),
            ("head_num", head_num),
            ("head_dim", head_dim),
            ("layer_num", layer_num),
            ("quant_method", self.name),
            ("scale_layouts", self.scale_layouts),
            ("quant_page_size", quant_page_size),
        )
        return PoolLayout("MHATokenToKVPool", tuple(buffers), attributes)


def _check_native(rows: int, head_dim: int, quant_page_size: int) -> None:
    problems = []
    if quant_page_size % 4:
        problems.append(f"page_size {quant_page_size} is not a multiple of 4")
    if head_dim % 64:
        problems.append(f"head_dim {head_dim} is not a multiple of 64")
    if quant_page_size and rows % quant_page_size:
        problems.append(f"the pool's {rows} rows are not a multiple of page_size {quant_page_size}")
    if problems:
        raise KVCacheConfigError(
            "nvfp4 native scale layout (trtllm_mha on SM100) cannot be built: " + "; ".join(problems)
            + ". Use a page size that is a multiple of 4 (e.g. 16 or 64) or another attention backend"
        )


def mla_fp4_cell_bytes(kv_cache_dim: int, layer_num: int) -> int:
    """``(dim * L) // 2 + (dim // 16) * L`` (DefaultPoolConfigurator._compute_cell_size, kv itemsize 1): 324 * L for
    576."""
    return (kv_cache_dim * layer_num) // 2 + (kv_cache_dim // FP4_BLOCK) * layer_num


def mla_fp4_layout(*, size: int, page_size: int, kv_cache_dim: int, layer_num: int) -> PoolLayout:
    """``MLATokenToKVPoolFP4``: per layer packed latent and exponent scales, uint8.

    ``kv_buffer[l]`` ``(T + P, 1, dim / 2)`` and ``kv_scale_buffer[l]`` ``(T + P, dim / 16)``
    (2-D): 288 + 36 = 324 bytes per token and layer for DeepSeek's 576.
    """
    rows = size + page_size
    buffers: list[BufferSpec] = []
    for layer in range(layer_num):
        buffers.append(BufferSpec(f"kv_buffer[{layer}]", (rows, 1, kv_cache_dim // 2), DType.UINT8))
        buffers.append(BufferSpec(f"kv_scale_buffer[{layer}]", (rows, kv_cache_dim // FP4_BLOCK), DType.UINT8))
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("page_size", page_size),
        ("kv_cache_dim", kv_cache_dim),
        ("layer_num", layer_num),
    )
    return PoolLayout("MLATokenToKVPoolFP4", tuple(buffers), attributes)
