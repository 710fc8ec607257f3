"""Hybrid sliding-window strategies: ``HybridSWAPoolConfigurator`` and its request-capped variant.

Two sub-pools: ``full`` tokens for the full-attention layers and ``swa`` tokens for the
sliding-window layers (HybridSWAPoolConfigurator, SWARequestCapPoolConfigurator).

**HybridSWA** (:class:`~kvstrategies.core.cost.CacheCost`, float slope): with per-layer bytes
``full_pt`` / ``swa_pt`` (ints, no DCP), local layer counts ``full_layers`` / ``swa_layers`` and
an EAGLE draft's layers (:class:`DraftLayers`: ``draft.full``, ``draft.swa``, ``draft.swa_full``)::

    cell = full_pt*(full_layers + draft.full) + swa_pt*draft.swa_full
           + ratio * swa_pt*(swa_layers + draft.swa) + dflash_draft_cell        (B per full token)
    full = align(int(available // cell), P);  swa = align(int(full * ratio), P)

so ``available ~ full * cell`` and, inversely, a token count re-derives ``swa`` by the ratio.
SGLang counts an EAGLE draft's layers as layers of the two pools (HybridSWAPoolConfigurator.__init__),
so they stay in the pools' layer counts: splitting them out of the ratio product would round the
float cell differently. A DFLASH-family draft's cell is the :attr:`~HybridSWAPoolConfigurator.draft_cost`
added last, as SGLang adds it. All-SWA (no local full-attention layer): an int cell over every
layer, ``swa = align(available // cell, P)``, ``full = 0`` and no window-floor check
(``HybridSWAPoolConfigurator._solve_pool_sizes`` returns before it).

**SWAChunkCap** (SGLang ``SWARequestCapPoolConfigurator``, affine with a fixed part): the SWA pool
is the worst case of ``--max-running-requests`` in flight (compute_swa_request_cap),
``swa = ceil_align(cap, P)`` costing ``intercept = swa * swa_pt*(swa_layers + draft.swa)`` bytes;
the rest goes to the full pool at the int slope
``full_pt*(full_layers + draft.full) + swa_pt*draft.swa_full + dflash_draft_cell``. Its reported
cell is the inherited HybridSWA float value, ratio term included
(``HybridSWAPoolConfigurator._recompute_cell_size``).

Pools: ``SWAKVPool`` (:mod:`kvstrategies.pools.swa`) of two MHA / MXFP8 pools
(``KVCacheConfigurator._build_hybrid_swa_kv_pool``), two ``NPUMHATokenToKVPool`` on an Ascend NPU
(``_build_ascend_swa_kv_pool``), or, for MLA models, a DSA / MLA full pool and an MLA SWA pool at the scheduler page
size (``_build_hybrid_mla_swa_kv_pool``).

Draft workers (KVCacheConfigurator._derive_pool_sizes, KVCacheConfigurator._resolve_memory_pool_config draft branch): a
draft's own sizing prices only its own layers (``[0, D)`` of the
split, or the renamed MTP head's: MiMoV2MTP holds SWA layer 0) with no draft scaling; its pools
are built for the target's sizes (``adopted_sizes``) at ``page_size * loc_space_scale`` and register
the target allocator's ``full_to_swa_index_mapping`` (not listed as the draft's).

Decisions: FP4 KV dtypes are rejected (SGLang's hybrid-SWA builder passes no quant method); a
hybrid-SWA model with Mamba layers (Inkling with Mamba parameters) is rejected until the Mamba
state budget of KVCacheConfigurator._handle_max_mamba_cache is shared with this strategy; a DFLASH-family draft cell
counts whenever it is a positive int (the draft-layer conditions of DefaultPoolConfigurator.__init__'s
draft scaling are not re-checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from ..context import (
    DeviceKind,
    DisaggregationMode,
    KVCacheContext,
    draft_loc_space_scale,
    is_hybrid_swa,
    num_kv_heads_per_rank,
    stage_layer_range,
)
from ..core.cost import CacheCost, Rounding
from ..core.dtypes import KVRecipe
from ..core.releases import ByRelease, ReleaseRule, span
from ..core.sizing import PoolSizes, align_down, ceil_align, require_positive_tokens, validate_swa_pool_size
from ..errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from ..models.architectures import row_for
from ..models.hybrid_swa import HybridSWAGeometry
from ..pools.ascend import npu_mha_layout
from ..pools.basic import FUSED_KV_STORAGE, mla_layout
from ..pools.dsa import DSAIndexGeometry, dsa_layout
from ..pools.layout import PoolLayout
from ..pools.swa import mha_sub_pool, swa_kv_pool_layout
from .base import PoolConfigurator
from .checks import reject_fp4
from .mla_dims import calculate_mla_kv_cache_dim
from .request_math import known_dflash_draft_cell, swa_request_cap

_GIB = 2**30


@dataclass(frozen=True)
class DraftLayers:
    """Draft layers a speculative target pays for (HybridSWAPoolConfigurator.__init__ draft layers).

    ``full``: priced at full-layer bytes per full token; ``swa``: at SWA bytes per SWA token;
    ``swa_full``: at SWA bytes per full token (MTP depths in ``mtp_local_layer_ids``).
    """

    full: int = 0
    swa: int = 0
    swa_full: int = 0


def local_layer_ids(ctx: KVCacheContext, hybrid: HybridSWAGeometry) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(full, swa)`` global ids this rank holds: its stage's, or a draft worker's own layers.

    A draft holds ``[0, D)`` of the split, unless SGLang renames its architecture to an MTP head
    with a split of its own (``ModelConfig._config_draft_model``: MiMoV2MTP holds SWA layer 0).
    """
    if ctx.is_draft_worker and hybrid.draft_layer_ids is not None:
        return hybrid.draft_layer_ids
    start, end = stage_layer_range(ctx)
    if not ctx.is_draft_worker and not HYBRID_SWA_STAGE_LAYERS.holds(ctx.release):
        end += 1  # as SGLang does: it trimmed the model's layer lists to range(start, end + 1)
    return hybrid.local_full_attention_layer_ids(start, end), hybrid.local_swa_attention_layer_ids(start, end)


class HybridSWAPoolConfigurator(PoolConfigurator):
    """Full + sliding-window pools sized by ``swa_full_tokens_ratio`` (HybridSWAPoolConfigurator)."""

    family: ClassVar[str] = "hybrid-swa"

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        """Hybrid SWA (and not disabled), except DeepSeek-V4, which has its own strategy (:mod:`.dsv4`)."""
        hybrid = ctx.geometry.hybrid_swa
        return is_hybrid_swa(ctx) and hybrid is not None and not hybrid.is_deepseek_v4

    def __init__(self, ctx: KVCacheContext) -> None:
        super().__init__(ctx)
        hybrid = ctx.geometry.hybrid_swa
        if hybrid is None or hybrid.is_deepseek_v4:
            raise UnsupportedConfigurationError(
                f"{type(self).__name__} needs a hybrid sliding-window model (not DeepSeek-V4); "
                f"{ctx.geometry.architectures} is not one"
            )
        self.hybrid: HybridSWAGeometry = hybrid
        self._reject_unsupported()
        start, end = stage_layer_range(ctx)
        self.full_layer_ids, self.swa_layer_ids = local_layer_ids(ctx, hybrid)
        if not self.swa_layer_ids:
            raise KVCacheConfigError(
                f"hybrid SWA model must have at least one SWA layer on this stage; layers [{start}, {end}) "
                "hold none (change the PP split, or set disable_hybrid_swa_memory to price every layer "
                "as full attention)"
            )
        self.ratio = self._resolve_ratio()

    def _reject_unsupported(self) -> None:
        kv = self.ctx.kv_cache_dtype
        reject_fp4(self.ctx, f"hybrid sliding-window attention ({', '.join(self.ctx.geometry.architectures)})")
        if self.ctx.device is DeviceKind.NPU and kv.recipe is KVRecipe.MXFP8:
            raise UnsupportedConfigurationError(
                "kv_cache_dtype 'mxfp8' has no Ascend NPU pool; use 'auto'/'bf16' or 'fp8_e4m3' on device 'npu'"
            )
        if self.ctx.geometry.mamba is not None:
            raise UnsupportedConfigurationError(
                f"{self.ctx.geometry.architectures[:1]} is hybrid SWA with Mamba layers (Inkling-style): its "
                "Mamba state budget is not wired into the hybrid-SWA strategy yet, so it "
                "cannot be planned"
            )

    def _resolve_ratio(self) -> float:
        """``swa_full_tokens_ratio``: the user's, else the model's default (0.8; Inkling 0.1)."""
        given = self.ctx.scheduling.swa_full_tokens_ratio
        ratio = self.hybrid.default_swa_full_tokens_ratio if given is None else given
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise KVCacheConfigError(f"swa_full_tokens_ratio must be in (0, 1], got {ratio!r}")
        return float(ratio)

    # ---- per-layer bytes (_full_cell_bytes, _swa_cell_bytes) ---------------------------------------------------------
    @property
    def full_layers(self) -> int:
        """Full-attention layers this rank holds."""
        return len(self.full_layer_ids)

    @property
    def swa_layers(self) -> int:
        """Sliding-window layers this rank holds."""
        return len(self.swa_layer_ids)

    @property
    def is_all_swa(self) -> bool:
        """No local full-attention layer (UnlimitedOCR, or a PP stage of SWA layers only)."""
        return self.full_layers == 0

    @property
    def sliding_window_size(self) -> int | None:
        return self.hybrid.sliding_window_size

    @property
    def attn_tp(self) -> int:
        return self.ctx.parallel.attn_tp_size

    @property
    def is_mxfp8(self) -> bool:
        return self.ctx.kv_cache_dtype.recipe is KVRecipe.MXFP8

    @property
    def head_dims(self) -> tuple[int, int, int, int]:
        """``(D, Dv, Ds, Dsv)``: ``swa_head_dim`` defaults to D, ``swa_v_head_dim`` to Ds
        (ModelConfig._derive_model_shapes)."""
        geometry = self.ctx.geometry
        swa_dim = geometry.swa_head_dim or geometry.head_dim
        return geometry.head_dim, geometry.v_head_dim, swa_dim, geometry.swa_v_head_dim or swa_dim

    @cached_property
    def full_bytes_per_layer(self) -> int:
        """``full_pt``: MLA ``mla_dim * kv`` (+ DSA index key); MHA ``H * (D + Dv) * kv`` (+ MXFP8)."""
        geometry = self.ctx.geometry
        kv = self.ctx.kv_cache_dtype.itemsize
        if geometry.use_mla:
            per_layer = calculate_mla_kv_cache_dim(self.ctx) * kv
            if geometry.dsa is not None:
                # no skip elision, no HiSparse, no DCP here (HybridSWAPoolConfigurator._full_cell_bytes/_swa_cell_bytes)
                per_layer += geometry.dsa.index_k_bytes_per_token
        else:
            d, dv, _, _ = self.head_dims
            per_layer = geometry.num_kv_heads(self.attn_tp) * (d + dv) * kv
        return per_layer + self._mxfp8_scales(full=True)

    @cached_property
    def swa_bytes_per_layer(self) -> int:
        """``swa_pt``: MLA ``(swa_rank + swa_rope) * kv``; MHA ``H_swa * (Ds + Dsv) * kv`` (+ MXFP8)."""
        geometry = self.ctx.geometry
        kv = self.ctx.kv_cache_dtype.itemsize
        if geometry.mla is not None and geometry.use_mla:
            per_layer = (geometry.mla.swa_kv_lora_rank + geometry.mla.swa_qk_rope_head_dim) * kv
        else:
            _, _, ds, dsv = self.head_dims
            per_layer = geometry.num_swa_kv_heads(self.attn_tp) * (ds + dsv) * kv
        return per_layer + self._mxfp8_scales(full=False)

    def _mxfp8_scales(self, *, full: bool) -> int:
        """One UE8M0 byte per 32 values, floored per layer: ``(H * (D + Dv)) // 32``.

        SGLang (HybridSWAPoolConfigurator._full_cell_bytes) adds it for MLA models too, with the MHA head
        formula (SGLang's dummy MLA head_dim); kept so MXFP8 MLA-SWA cells match byte for byte.
        """
        if not self.is_mxfp8:
            return 0
        geometry = self.ctx.geometry
        if geometry.use_mla and self.hybrid.mla_scale_dims is not None:
            d, dv, ds, dsv = self.hybrid.mla_scale_dims
        else:
            d, dv, ds, dsv = self.head_dims
        if full:
            return (geometry.num_kv_heads(self.attn_tp) * (d + dv)) // 32
        return (geometry.num_swa_kv_heads(self.attn_tp) * (ds + dsv)) // 32

    # ---- draft layers (HybridSWAPoolConfigurator.__init__) -----------------------------------------------------------
    @cached_property
    def draft_layers(self) -> DraftLayers:
        """EAGLE-family / STANDALONE target with ``D`` draft layers: ``full = D - swa - swa_full``."""
        spec = self.ctx.speculative
        depth = spec.eagle_draft_num_layers
        release = self.ctx.release
        if self.ctx.is_draft_worker or not spec.algorithm.is_eagle_family or depth is None or depth <= 0:
            return DraftLayers()
        if not DRAFT_LAYERS_PRICED.holds(release):
            return DraftLayers()
        swa = swa_full = 0
        if self.hybrid.mtp_local_layer_ids is not None:
            first = row_for(self.ctx.geometry.architectures[0]) if self.ctx.geometry.architectures else None
            by_name = first is not None and first.mtp_local_draft_by_name  # Inkling
            if DRAFT_LAYER_KINDS.holds(release) or (by_name and DRAFT_MTP_LOCAL_INKLING.holds(release)):
                swa_full = sum(1 for d in range(depth) if d in self.hybrid.mtp_local_layer_ids)
        elif spec.eagle_draft_swa_num_layers is not None and DRAFT_LAYER_KINDS.holds(release):
            swa = min(max(spec.eagle_draft_swa_num_layers, 0), depth)
        return DraftLayers(full=depth - swa - swa_full, swa=swa, swa_full=swa_full)

    @cached_property
    def draft_cell(self) -> int:
        """A DFLASH-family target's draft bytes per full token: its known cell times DCP
        (:func:`.request_math.known_dflash_draft_cell`), else 0 (before 0.5.18 SGLang's
        HybridSWAPoolConfigurator priced none). EAGLE drafts are pool layers (:attr:`draft_layers`)."""
        return known_dflash_draft_cell(self.ctx)

    @cached_property
    def draft_cost(self) -> CacheCost:
        """The draft's cost: ``T * draft_cell`` bytes."""
        return CacheCost(self.draft_cell, rounding=Rounding.FLOOR)

    @property
    def full_cell(self) -> int:
        """``full_pt * (full_layers + draft.full)``: bytes per full-pool token."""
        return self.full_bytes_per_layer * (self.full_layers + self.draft_layers.full)

    @property
    def swa_cell(self) -> int:
        """``swa_pt * (swa_layers + draft.swa)``: bytes per SWA-pool token."""
        return self.swa_bytes_per_layer * (self.swa_layers + self.draft_layers.swa)

    # ---- cost (_recompute_cell_size) --------------------------------------------------------------------------
    @cached_property
    def pool_cost(self) -> CacheCost:
        """The two pools per full token, EAGLE draft layers included (all-SWA: per SWA token, an int).

        Evaluated left to right as SGLang does (a regrouped sum can move the token count by one):
        ``full_cell + swa_pt*draft.swa_full + ratio*swa_cell``.
        """
        full_pt, swa_pt = self.full_bytes_per_layer, self.swa_bytes_per_layer
        draft = self.draft_layers
        if not HYBRID_SWA_BYTE_SPLIT.holds(self.ctx.release):  # 0.5.8: every stage layer priced as full attention
            return CacheCost(full_pt * self.stage_layer_count, rounding=Rounding.FLOOR)
        if self.is_all_swa:
            all_swa: int = (
                swa_pt * self.swa_layers + full_pt * draft.full + swa_pt * draft.swa + swa_pt * draft.swa_full
            )
            return CacheCost(all_swa, rounding=Rounding.FLOOR)
        if not HYBRID_SWA_RATIO_CELL.holds(self.ctx.release):
            return CacheCost(self.full_cell + self.swa_cell, rounding=Rounding.FLOOR)
        return CacheCost(self.full_cell + swa_pt * draft.swa_full + self.ratio * self.swa_cell, rounding=Rounding.FLOOR)

    @cached_property
    def cost(self) -> CacheCost:
        """``pool_cost + draft_cost``, intercept 0; inverted as ``int(available // cell)``."""
        return self.pool_cost + self.draft_cost

    @property
    def cell_size_bytes(self) -> int | float:
        """Bytes per unit of ``max_total_num_tokens``: a float for hybrids, an int for all-SWA."""
        return self.cost.slope

    # ---- sizes (_solve_pool_sizes) --------------------------------------------------------------------------
    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        """``M = int(available // cell)`` (float floor division for hybrids), then :meth:`solve`."""
        return self.solve(self.cost.tokens_for_budget(available_bytes), page_size)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> PoolSizes:
        """A token cap re-applies the ratio and re-runs the window-floor check
        (``calculate_pool_sizes_from_max_tokens``)."""
        return self.solve(max_total_num_tokens, page_size)

    def derive_draft_sizes(self, target_sizes: PoolSizes, *, handed_tokens: int | None = None) -> PoolSizes:
        """The target's sizes; up to 0.5.9 (:data:`DRAFT_ADOPTS_TARGET_SPLIT`) the draft re-splits the count the
        target hands it with its own layers (:meth:`solve`): 0.5.9 hands its full count; 0.5.8 its profiled count,
        which the draft caps by the user's token cap first (``handed_tokens``: that capped count; default the
        target's full count)."""
        adopted = super().derive_draft_sizes(target_sizes)
        if DRAFT_ADOPTS_TARGET_SPLIT.holds(self.ctx.release) or not self.ctx.is_draft_worker:
            return adopted
        handed = adopted.max_total_num_tokens
        if handed_tokens is not None and not DRAFT_HANDED_RESOLVED_COUNT.holds(self.ctx.release):
            handed = handed_tokens
        split = self.solve(handed, self.ctx.page_size)
        return adopted.replace(
            max_total_num_tokens=split.max_total_num_tokens,
            full_max_total_num_tokens=split.full_max_total_num_tokens,
            swa_max_total_num_tokens=split.swa_max_total_num_tokens,
        )

    def solve(self, tokens: int, page_size: int) -> PoolSizes:
        """Split ``tokens`` (full tokens; SWA tokens when all-SWA) into the two pools.

        Hybrid: ``full = align(M, P)``, ``swa = align(int(full * ratio), P)``; the window-floor
        error (:data:`SWA_ADMISSION_FLOOR`) comes before the generic "not enough memory" one, as in
        SGLang's HybridSWAPoolConfigurator.
        """
        if self.is_all_swa and HYBRID_SWA_BYTE_SPLIT.holds(self.ctx.release):  # 0.5.8 splits all-SWA alike
            swa = align_down(tokens, page_size)
            require_positive_tokens(swa)
            return PoolSizes(max_total_num_tokens=swa, full_max_total_num_tokens=0, swa_max_total_num_tokens=swa)
        full = align_down(tokens, page_size)
        swa_of = full
        if not HYBRID_SWA_RATIO_CELL.holds(self.ctx.release):
            resplit = self.resplit_full_tokens(full)
            full = align_down(resplit, page_size)
            swa_of = full if SWA_FROM_ALIGNED_FULL.holds(self.ctx.release) else resplit
        swa = align_down(int(swa_of * self.ratio), page_size)
        if SWA_ADMISSION_FLOOR.holds(self.ctx.release):
            validate_swa_pool_size(swa, self.sliding_window_size, page_size)
        require_positive_tokens(full)
        return PoolSizes(max_total_num_tokens=full, full_max_total_num_tokens=full, swa_max_total_num_tokens=swa)

    def resplit_full_tokens(self, capacity: int) -> int:
        """Up to 0.5.10 (:data:`HYBRID_SWA_RATIO_CELL`): the full tokens of a page-aligned ``capacity``
        priced at ``F*n_full + S*n_swa`` bytes a token, ``int(capacity * (F*n_full + S*n_swa) /
        (F*n_full + r*S*n_swa))`` (ModelRunnerKVCacheMixin._resolve_hybrid_swa_tokens; float division)."""
        if not HYBRID_SWA_BYTE_SPLIT.holds(self.ctx.release):
            # 0.5.8: the capacity counts tokens of every layer alike; re-split by layer counts
            model_layers = self.stage_layer_count if self.ctx.is_draft_worker else self.ctx.geometry.num_hidden_layers
            return int(capacity * model_layers / (self.ratio * self.swa_layers + self.full_layers))
        full_pt, swa_pt = self.full_bytes_per_layer, self.swa_bytes_per_layer
        total = capacity * (full_pt * self.full_layers + swa_pt * self.swa_layers)
        return int(total / (full_pt * self.full_layers + self.ratio * swa_pt * self.swa_layers))

    @property
    def stage_layer_count(self) -> int:
        """The layers ``profile_max_num_token`` prices (``num_effective_layers``: the stage's, or the draft's)."""
        start, end = stage_layer_range(self.ctx)
        return end - start

    # ---- pools (KVCacheConfigurator._build_token_to_kv_pool, _build_hybrid_mla_swa_kv_pool, _build_hybrid_swa_kv_pool)
    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        full = sizes.full_max_total_num_tokens
        swa = sizes.swa_max_total_num_tokens
        if full is None or swa is None:
            raise KVCacheConfigError(
                "hybrid-SWA sizes need full_max_total_num_tokens and swa_max_total_num_tokens; "
                "use this strategy's calculate_pool_sizes / calculate_pool_sizes_from_max_tokens"
            )
        if self.ctx.device is DeviceKind.NPU and (self.ctx.geometry.use_mla or self.ctx.geometry.mamba is not None):
            raise UnsupportedConfigurationError(
                "hybrid SWA on an Ascend NPU is built only for MHA models without Mamba layers "
                "(as SGLang 0.5.23 builds it); this model is MLA or Mamba-hybrid"
            )
        if full == 0 and self.ctx.page_size != 1 and not self.ctx.is_draft_worker:
            # KVCacheConfigurator._build_token_to_kv_pool_allocator: an all-SWA pool gets PureSWATokenToKVPoolAllocator,
            # which SGLang asserts to page 1; the sizes stand, the pool cannot be served. A draft worker builds no
            # allocator (it registers with the target's): an all-SWA draft split (up to 0.5.9) is built.
            raise UnsupportedConfigurationError(
                f"an all-SWA model is served by SGLang's PureSWATokenToKVPoolAllocator, which needs "
                f"page_size 1 (got {self.ctx.page_size}); set page_size to 1"
            )
        mla = self.ctx.geometry.use_mla
        if mla:
            full_pool, swa_pool = self._mla_sub_pools(full, swa)
            pool_page = self.ctx.page_size  # the MLA-SWA pool takes the scheduler page (_build_hybrid_mla_swa_kv_pool)
        else:
            full_pool, swa_pool = self._mha_sub_pools(full, swa)  # built as full.* / swa.*
            pool_page = self.pool_page_size
        return swa_kv_pool_layout(
            full=full_pool,
            swa=swa_pool,
            size=full,
            size_swa=swa,
            page_size=pool_page,
            full_attention_layer_ids=self.full_layer_ids,
            swa_attention_layer_ids=self.swa_layer_ids,
            allocator_page_size=self.ctx.page_size,
            owns_mapping=not self.ctx.is_draft_worker,
            parts_prefixed=not mla,
        )

    @property
    def loc_space_scale(self) -> int:
        """A draft under DCP indexes the target allocator's DCP-widened ids (:func:`draft_loc_space_scale`)."""
        return draft_loc_space_scale(self.ctx)

    @property
    def pool_page_size(self) -> int:
        """The MHA pools' page: ``page_size * loc_space_scale`` (SGLang's ``pool_page_size``)."""
        return self.ctx.page_size * self.loc_space_scale

    def _mha_sub_pools(self, full: int, swa: int) -> tuple[PoolLayout, PoolLayout]:
        """``_build_hybrid_swa_kv_pool``: both sub-pools MHA (or MXFP8). Pool heads use DCP, unlike the
        sizing (as in SGLang).

        A "compress" model gives the SWA pool ``H_swa = max(1, swa_num_key_value_heads // tp)``
        and its own head dims; otherwise no ``v_head_dim`` is passed and V uses ``head_dim``.
        """
        geometry = self.ctx.geometry
        d, dv, ds, dsv = self.head_dims
        if SWA_POOL_DCP_HEADS.holds(self.ctx.release):
            heads = num_kv_heads_per_rank(self.ctx)
        else:
            heads = geometry.num_kv_heads(self.attn_tp, 1)
        if self.hybrid.is_compress_model:
            if geometry.swa_total_num_kv_heads is None:
                raise KVCacheConfigError(
                    f"{geometry.architectures[:1]} keeps its own SWA KV heads but the config has no "
                    "'swa_num_key_value_heads'; add it to config.json"
                )
            swa_geometry = (max(1, geometry.swa_total_num_kv_heads // self.attn_tp), ds, dsv)
            full_geometry = (heads, d, dv)
        else:
            full_geometry = swa_geometry = (heads, d, d)
        return (
            self._mha_sub_pool(full, full_geometry, self.full_layers, "full"),
            self._mha_sub_pool(swa, swa_geometry, self.swa_layers, "swa"),
        )

    def _mha_sub_pool(self, size: int, shape: tuple[int, int, int], layers: int, prefix: str) -> PoolLayout:
        """One sub-pool, its buffers named under ``prefix`` (``full`` / ``swa``)."""
        heads, k_dim, v_dim = shape
        if self.ctx.device is DeviceKind.NPU:
            # on NPU: SWAKVPool of two NPUMHATokenToKVPool (_build_ascend_*_kv_pool)
            return npu_mha_layout(
                size=size,
                page_size=self.pool_page_size,
                head_num=heads,
                head_dim=k_dim,
                v_head_dim=v_dim,
                layer_num=layers,
                store_dtype=self.ctx.kv_cache_dtype.base_store_dtype,
            ).prefixed(prefix)
        return mha_sub_pool(
            size=size,
            page_size=self.pool_page_size,
            head_num=heads,
            head_dim=k_dim,
            v_head_dim=v_dim,
            layer_num=layers,
            store_dtype=self.ctx.kv_cache_dtype.store_dtype,
            mxfp8=self.is_mxfp8,
            prefix=prefix,
            fused=FUSED_KV_STORAGE.holds(self.ctx.release),
        )

    def _mla_sub_pools(self, full: int, swa: int) -> tuple[PoolLayout, PoolLayout]:
        """``_build_hybrid_mla_swa_kv_pool``: full side DSA (or MLA) pool, SWA side MLA pool, scheduler page size."""
        geometry = self.ctx.geometry
        assert geometry.mla is not None
        page = self.ctx.page_size
        store = self.ctx.kv_cache_dtype.base_store_dtype
        if geometry.dsa is not None:
            full_pool = dsa_layout(
                size=full,
                page_size=page,
                kv_cache_dim=calculate_mla_kv_cache_dim(self.ctx),
                layer_num=self.full_layers,
                store_dtype=store,
                index=DSAIndexGeometry(size=full, page_size=page, index_head_dim=geometry.dsa.index_head_dim),
                is_hip=self.ctx.device is DeviceKind.HIP,
            )
        else:
            full_pool = mla_layout(
                size=full, page_size=page, kv_cache_dim=geometry.mla.latent_dim, layer_num=self.full_layers,
                store_dtype=store,
            )
        swa_dim = geometry.mla.swa_kv_lora_rank + geometry.mla.swa_qk_rope_head_dim
        swa_pool = mla_layout(
            size=swa, page_size=page, kv_cache_dim=swa_dim, layer_num=self.swa_layers, store_dtype=store
        )
        return full_pool, swa_pool


#: an EAGLE / STANDALONE target's draft layers are priced in the hybrid-SWA cell (its draft pool takes
#: the target's full-pool size); before, the hybrid-SWA cell holds the target's own layers only
DRAFT_LAYERS_PRICED = ReleaseRule(
    "hybrid-swa-draft-layers-priced",
    span("0.5.15"),
    "hybrid-SWA EAGLE / STANDALONE target: the draft's layers are priced in the cell (full_pt * D per full token) "
    "(before: the target's own layers only)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator.__init__ (_draft_full_layers_num)",
)
#: Inkling's EAGLE draft layers named local (``mtp_local_layer_ids``) are SWA-geometry rings of full
#: length (``swa_full``: SWA bytes per full token); before, every draft layer was a full-attention layer
DRAFT_MTP_LOCAL_INKLING = ReleaseRule(
    "hybrid-swa-draft-mtp-local-inkling",
    span("0.5.16"),
    "hybrid-SWA EAGLE draft of InklingForConditionalGeneration: layers in mtp_local_layer_ids priced at SWA bytes "
    "per full token (before: full)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator.__init__ (_draft_swa_full_layers_num, "
    "banded_depths for the Inkling architecture)",
)
#: every model's ``mtp_local_layer_ids`` (not only Inkling's) make ``swa_full`` draft layers, and an EAGLE draft's
#: ``eagle_draft_swa_num_layers`` sliding-window layers go to the SWA pool (before: that count does not exist and
#: the other draft layers are full attention)
DRAFT_LAYER_KINDS = ReleaseRule(
    "hybrid-swa-draft-layer-kinds",
    span("0.5.19"),
    "hybrid-SWA EAGLE draft: any model's mtp_local_layer_ids are swa_full layers and eagle_draft_swa_num_layers go "
    "to the SWA pool (before: Inkling's local layers only; the rest full)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator.__init__ (_draft_swa_layers_num; "
    "spec_aux_hidden_state.SpecAuxHiddenStateConfig.eagle_draft_swa_num_layers)",
)
#: the hybrid SWA split refuses an SWA pool of ``W + P`` tokens or fewer, which could never admit a
#: request (before: no check; the split is planned and the server cannot admit a prefill)
HYBRID_SWA_RATIO_CELL = ReleaseRule(
    "hybrid-swa-ratio-cell",
    span("0.5.11"),
    "hybrid SWA prices a full token at F*n_full + r*S*n_swa and the full pool is the page-aligned token count "
    "(before: the count is priced at F*n_full + S*n_swa and re-split, full = count*(F*n_full + S*n_swa) / "
    "(F*n_full + r*S*n_swa), so a --max-total-tokens cap yields more full tokens than asked when r < 1)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator "
    "(before: model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._resolve_hybrid_swa_tokens)",
)
HYBRID_SWA_BYTE_SPLIT = ReleaseRule(
    "hybrid-swa-byte-split",
    span("0.5.9"),
    "hybrid SWA prices the capacity by its full and SWA layers' bytes (F*n_full + S*n_swa) before the split "
    "(before: every stage layer priced as a full-attention layer, and the count re-split by layer counts: "
    "full = int(T * num_hidden_layers / (r * n_swa + n_full)))",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.set_num_tokens_hybrid_swa, "
    "get_cell_size_per_token",
)
SWA_FROM_ALIGNED_FULL = ReleaseRule(
    "swa-from-aligned-full",
    span("0.5.10"),
    "the SWA pool is the ratio of the page-aligned full pool (before: of the unaligned full count, "
    "swa = align(int(int(total / denominator) * r)))",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._resolve_hybrid_swa_tokens "
    "(before: set_num_tokens_hybrid_swa)",
)
#: a hybrid-SWA draft worker takes the target's full and SWA counts; before, it re-splits the count the target hands
#: it (``draft_runner_cache_size``) with its own layers (``set_num_tokens_hybrid_swa``)
DRAFT_ADOPTS_TARGET_SPLIT = ReleaseRule(
    "draft-adopts-target-split",
    span("0.5.10"),
    "a hybrid-SWA draft worker adopts the target's full / SWA pool sizes (before: it re-splits the count the "
    "target hands it with its own layers)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool "
    "(draft_runner_cache_size, set_num_tokens_hybrid_swa)",
)
#: the count a target hands its draft is its resolved count (after cap, alignment and split); before, the profiled
#: count, which the draft caps by the user's token cap itself
DRAFT_HANDED_RESOLVED_COUNT = ReleaseRule(
    "draft-handed-resolved-count",
    span("0.5.9"),
    "the target hands its draft its resolved token count (before: the profiled count, capped by the draft)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool "
    "(draft_runner_cache_size, set_num_tokens_hybrid_swa)",
)
SWA_ADMISSION_FLOOR = ReleaseRule(
    "swa-admission-floor",
    span("0.5.16"),
    "hybrid SWA: an SWA pool of sliding_window_size + page_size tokens or fewer is refused (before: planned)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator.calculate_pool_sizes_from_max_tokens "
    "(0.5.21: MemoryPoolConfigurator.validate_swa_pool_size)",
)

#: the MHA sub-pools take the DCP-replicated KV head count (before: attention TP alone)
SWA_POOL_DCP_HEADS = ReleaseRule(
    "swa-pool-dcp-heads",
    span("0.5.18"),
    "hybrid-SWA MHA sub-pools: max(1, H // (attn_tp / dcp)) heads (before: H // attn_tp)",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._build_hybrid_swa_kv_pool",
)

#: a PP stage holds its layers ``[start, end)``; before, the model's layer lists were trimmed to
#: ``range(start, end + 1)``, so every stage but the last also priced and built the next stage's
#: first layer
HYBRID_SWA_STAGE_LAYERS = ReleaseRule(
    "hybrid-swa-stage-layers",
    span("0.5.21"),
    "hybrid-SWA PP stage layers [start, end) (before: [start, end], one layer of the next stage too)",
    "sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator.__init__ (kvc.layer_info); before, "
    "model_runner_components.layer_setup.adjust_hybrid_swa_layer_ids",
)

#: the request cap serves the PD decode role without chunked prefill, and a chunk <= 0 (prefill off)
#: no longer counts as chunked (before: any chunked_prefill_size that is not None)
SWA_REQUEST_CAP_DECODE_ROLE = ReleaseRule(
    "swa-request-cap-decode-role",
    span("0.5.22"),
    "the request-capped SWA pool also applies in the PD decode role without chunked prefill; chunked "
    "prefill <= 0 does not qualify",
    "sglang.srt.model_executor.pool_configurator.SWARequestCapPoolConfigurator.is_applicable",
)


#: the request-capped hybrid-SWA configurator exists (SGLang's SWAChunkCapPoolConfigurator); before, every hybrid-SWA
#: model sizes its SWA pool at the ratio
SWA_REQUEST_CAP_EXISTS = ReleaseRule(
    "swa-request-cap",
    span("0.5.14"),
    "hybrid SWA with requests capped and the radix cache off: the SWA pool holds the request cap "
    "(SWAChunkCapPoolConfigurator; before: the ratio split)",
    "sglang.srt.model_executor.pool_configurator.create_memory_pool_configurator (SWAChunkCapPoolConfigurator)",
)


class SWAChunkCapPoolConfigurator(HybridSWAPoolConfigurator):
    """SGLang's ``SWARequestCapPoolConfigurator``: the SWA pool holds exactly the request cap."""

    family: ClassVar[str] = "hybrid-swa-chunk-cap"
    sglang_configurator: ClassVar[str | ByRelease[str]] = ByRelease(
        "sglang-class-swa-request-cap",
        (("0.5.1", "SWAChunkCapPoolConfigurator"), ("0.5.22", "SWARequestCapPoolConfigurator")),
        "SGLang's name for the request-capped hybrid-SWA configurator",
        "sglang.srt.model_executor.pool_configurator.SWARequestCapPoolConfigurator (SWAChunkCap... to 0.5.21)",
        topic="sizing",
    )

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        """All of SWARequestCapPoolConfigurator.is_applicable: requests capped, radix cache off, decode
        role or chunked prefill on, a sliding window, and a local full-attention layer."""
        if not HybridSWAPoolConfigurator.is_applicable(ctx) or not SWA_REQUEST_CAP_EXISTS.holds(ctx.release):
            return False
        hybrid = ctx.geometry.hybrid_swa
        sched = ctx.scheduling
        if hybrid is None or sched.max_running_requests is None or not sched.disable_radix_cache:
            return False
        if SWA_REQUEST_CAP_DECODE_ROLE.holds(ctx.release):
            chunked = sched.chunked_prefill_size is not None and sched.chunked_prefill_size > 0
            if sched.disaggregation_mode is not DisaggregationMode.DECODE and not chunked:
                return False
        elif sched.chunked_prefill_size is None:
            return False
        if hybrid.sliding_window_size is None:
            return False
        return bool(local_layer_ids(ctx, hybrid)[0])

    def __init__(self, ctx: KVCacheContext) -> None:
        super().__init__(ctx)
        if self.is_all_swa or self.sliding_window_size is None or ctx.scheduling.max_running_requests is None:
            raise KVCacheConfigError(
                "the request-capped SWA pool needs a full-attention layer on this stage, a sliding window "
                "and max_running_requests"
            )

    @cached_property
    def swa_cap_tokens(self) -> int:
        """``compute_swa_request_cap``: the worst case of every running request plus the
        prefill chunks in flight (decode role: the requests still arriving from prefill)."""
        window = self.sliding_window_size
        requests = self.ctx.scheduling.max_running_requests
        assert window is not None and requests is not None
        return swa_request_cap(self.ctx, window, requests)

    @property
    def full_token_cost(self) -> CacheCost:
        """Per full token once the SWA pool is fixed: the pools' bytes plus the draft's."""
        return CacheCost(self.full_pools_cell, rounding=Rounding.FLOOR) + self.draft_cost

    @property
    def full_pools_cell(self) -> int:
        """``full_cell + swa_pt*draft.swa_full``: the pools' bytes per full token once the SWA pool is fixed."""
        return self.full_cell + self.swa_bytes_per_layer * self.draft_layers.swa_full

    @property
    def full_token_cell(self) -> int:
        """Int bytes per full token once the SWA pool is fixed (:attr:`full_token_cost`'s slope)."""
        return self.full_pools_cell + self.draft_cell

    def capped_cost(self, page_size: int) -> CacheCost:
        """:attr:`full_token_cost` with the SWA pool as its intercept: ``ceil_align(cap, P) * swa_cell`` bytes."""
        swa = ceil_align(self.swa_cap_tokens, page_size)
        return CacheCost(self.full_token_cost.slope, swa * self.swa_cell, Rounding.FLOOR)

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        """``swa = ceil_align(cap, P)``; ``full = align((available - swa * swa_cell) // full_token_cell, P)``.

        No window-floor check (the cap always exceeds ``W + P``).
        """
        swa = ceil_align(self.swa_cap_tokens, page_size)
        cost = self.capped_cost(page_size)
        full = align_down(cost.tokens_for_budget(available_bytes), page_size)
        if full <= 0:
            raise InsufficientMemoryError(
                f"SWA pool cap ({swa} tokens, {cost.intercept / _GIB:.2f} GiB) leaves no room for the full KV pool "
                f"within the available {available_bytes / _GIB:.2f} GiB. Reduce max_running_requests "
                "(SGLang --max-running-requests), lower SGLANG_SWA_EVICTION_INTERVAL, or increase the "
                "budget (--mem-fraction-static)"
            )
        return PoolSizes(max_total_num_tokens=full, full_max_total_num_tokens=full, swa_max_total_num_tokens=swa)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> PoolSizes:
        """``full = align(M, P)``, ``swa = min(ceil_align(cap, P), M)``."""
        full = align_down(max_total_num_tokens, page_size)
        require_positive_tokens(full)
        # SGLang (SWARequestCapPoolConfigurator.calculate_pool_sizes_from_max_tokens): SGLang caps SWA by the un-aligned
        # M, so M = 30000, P = 64 gives swa = 30000 (not a page multiple); kept so capped plans match the engine's
        # pools.
        swa = min(ceil_align(self.swa_cap_tokens, page_size), max_total_num_tokens)
        return PoolSizes(max_total_num_tokens=full, full_max_total_num_tokens=full, swa_max_total_num_tokens=swa)
