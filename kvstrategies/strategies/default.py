"""``DefaultPoolConfigurator``: MHA / GQA / MQA, MLA, DSA, MiniMax sparse; FP8, FP4, MXFP8 KV (DefaultPoolConfigurator).

Cost model (:class:`~kvstrategies.core.cost.CacheCost`, affine): ``available_bytes = max_total_num_tokens * cell``
with an int ``cell`` (bytes per token slot over this rank's layers) and no fixed part (logical-page KV
sharding, the only fixed term in SGLang, is out of scope). Inverse:
``T = align(max(available, 0) // cell, page_size)``.

``cell = target + draft``: the target's cell is built in SGLang's order
(DefaultPoolConfigurator._compute_cell_size): MLA (+ FP4, + DSA indexer) or MiniMax sparse or MHA
(+ FP4 recipe, + MXFP8 scales); a speculative target adds its draft's bytes per token
(DefaultPoolConfigurator.__init__ draft scaling).

Decisions where SGLang has no consistent pool (each raises ``UnsupportedConfigurationError``):
FP4 KV with DSA (priced 324 B/layer, but the DSA pool would store a 576-wide float4 row), FP4 with
MiniMax sparse (its builder passes no quant method, :func:`~.checks.reject_fp4`), FP4 off CUDA (SGLang skips its FP4
branches there), and the MiniMax-M3 NVFP4 native stack (out of scope). Draft scaling (DefaultPoolConfigurator.__init__
draft scaling) also applies to MiniMax sparse targets: its "return immediately" ends _compute_cell_size, not the
scaling.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from ..context import (
    DeviceKind,
    DisaggregationMode,
    KVCacheContext,
    draft_loc_space_scale,
    num_effective_layers,
    num_kv_heads_per_rank,
    stage_layer_range,
)
from ..core.cost import CacheCost, Rounding
from ..core.dtypes import DType, KVRecipe
from ..core.releases import ByRelease, ReleaseRule, span
from ..core.sizing import PoolSizes, align_down, ceil_div, require_positive_tokens
from ..errors import KVCacheConfigError, UnsupportedConfigurationError
from ..pools.basic import FUSED_KV_STORAGE, mha_layout, mla_layout
from ..pools.layout import PoolLayout
from .base import PoolConfigurator
from .checks import reject_fp4, require_fp4_device
from .mla_dims import calculate_mla_kv_cache_dim
from .request_math import known_dflash_draft_cell, req_to_token_pre_alloc

if TYPE_CHECKING:  # the DSA, FP4, MXFP8 and MiniMax pool modules load with the first model that uses one
    from ..pools.fp4 import FP4KVRecipe

#: what a stage with no local attention layer reports when the KV lives on another PP stage
ZERO_KV_STAGE_TOKENS = 2**63 - 1


#: a rank with no attention layer of its own (a PP stage of Mamba layers, an MTP draft of a
#: linear-attention model) takes a token count instead of dividing by its zero cell
ZERO_KV_RULE = ReleaseRule(
    "zero-kv-rule",
    span("0.5.17"),
    "a zero-cell rank gets max_total_tokens or the context (2**63 - 1 when the KV is on another PP stage); "
    "before, calculate_pool_sizes divides by zero",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.__init__ (_zero_kv_max_tokens)",
)
#: the MLA cell prices the row the pool stores (the 656-byte packed fp8 DSA row); before, always
#: the raw ``kv_lora_rank + qk_rope_head_dim`` elements (the pool already stored 656)
MLA_CELL_PRICES_POOL_ROW = ReleaseRule(
    "mla-cell-prices-pool-row",
    span("0.5.17"),
    "MLA cell uses calculate_mla_kv_cache_dim (packed fp8 DSA: 656) (before: rank + rope = 576)",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_cell_size",
)
#: layers that reuse the previous top-k hold no index keys (zero-row pool placeholders, not
#: priced), and an EAGLE draft adds its latent and indexer parts separately; before, every layer
#: allocates and prices its index keys and the draft scales the whole cell
DSA_INDEXER_BY_LAYER = ReleaseRule(
    "dsa-indexer-by-layer",
    span("0.5.18"),
    "DSA index keys only where the indexer runs (pool and sizing); EAGLE drafts split latent and indexer",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_dsa_indexer_cell_size; "
    "sglang.srt.mem_cache.memory_pool.DSATokenToKVPool (skip_topk_layers)",
)
#: SGLang's name for the DSA (sparse MLA) KV pool class
DSA_POOL_CLASS: ByRelease[str] = ByRelease(
    "sglang-class-dsa-pool",
    (("0.5.1", "NSATokenToKVPool"), ("0.5.13", "DSATokenToKVPool")),
    "SGLang's name for the DSA KV pool class",
    "sglang.srt.mem_cache.memory_pool.DSATokenToKVPool (NSATokenToKVPool to 0.5.12)",
    topic="sizing",
)
#: an EAGLE-family draft adds ``int(cell * D / L)`` to the cell; before, the cell became
#: ``int(cell * (1 + D / L))`` (one float product; it can round one byte lower)
#: the DSA pool takes any page size; before, ``NSATokenToKVPool`` asserts page 64 (and 0.5.9 builds it while sizing)
DSA_POOL_ANY_PAGE = ReleaseRule(
    "dsa-pool-any-page",
    span("0.5.10"),
    "the DSA pool takes the page size given (before: NSATokenToKVPool asserts page_size == 64)",
    "sglang.srt.mem_cache.memory_pool.NSATokenToKVPool.__init__",
)
EAGLE_DRAFT_CELL_PRICED = ReleaseRule(
    "eagle-draft-cell-priced",
    span("0.5.14"),
    "EAGLE / STANDALONE target: the draft's layers are priced in the cell (before: the target's own layers only)",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.__init__ (EAGLE/STANDALONE cell scaling)",
)
EAGLE_DRAFT_CELL_ADDED = ReleaseRule(
    "eagle-draft-cell-added",
    span("0.5.22"),
    "EAGLE draft cell: cell + int(cell * D / L) (before: int(cell * (1 + D / L)))",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.__init__",
)
#: the cell prices the DSA index keys; before, the latent row only, while the pool still allocates the keys (the
#: profiled token count overcommits the budget by the indexer's bytes)
DSA_INDEXER_IN_CELL = ReleaseRule(
    "dsa-indexer-in-cell",
    span("0.5.4"),
    "the cell prices the DSA indexer keys (before: the latent row only; NSATokenToKVPool still allocates them)",
    "sglang.srt.model_executor.model_runner.ModelRunner.profile_max_num_token",
)
#: an Ascend NPU with a non-fp8 KV cache prices the DSA indexer in the cache dtype (``index_head_dim``
#: values of ``es(kv)`` bytes); before, as the fp8 key plus scales of CUDA (132 bytes per layer)
NPU_DSA_CACHE_DTYPE_INDEXER = ReleaseRule(
    "npu-dsa-cache-dtype-indexer",
    span("0.5.20"),
    "DSA indexer on Ascend NPU with a non-fp8 KV cache: index_head_dim x es(kv) bytes (before: the fp8 132 B)",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_dsa_indexer_cell_size",
)

#: a DFLASH-family target prices its draft's layers once per DCP rank (``D * dcp`` layers; the
#: draft does not replicate over the DCP group); before, ``D`` layers whatever the DCP size
DFLASH_DRAFT_LAYERS_DCP = ReleaseRule(
    "dflash-draft-layers-dcp",
    span("0.5.17"),
    "DFLASH draft cell: ceil(cell * (L + D * dcp) / L) - cell (before: ceil(cell * (L + D) / L) - cell)",
    "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.__init__ "
    "(draft_num_layers * dcp_size into dflash_utils.scale_kv_cell_size_per_token_for_dflash)",
)

class DefaultPoolConfigurator(PoolConfigurator):
    """Everything that is not hybrid SWA or DeepSeek-V4 (DefaultPoolConfigurator)."""

    family: ClassVar[str] = "default"
    sglang_configurator: ClassVar[str] = "DefaultPoolConfigurator"  # HybridLinear and Ascend inherit it

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        return True

    # ---- layer counts (DefaultPoolConfigurator.__init__) ------------------------------------------------------------
    @cached_property
    def layer_range(self) -> tuple[int, int]:
        return stage_layer_range(self.ctx)

    @cached_property
    def num_layers(self) -> int:
        """Local attention layers priced by the cell (Mamba hybrids: only softmax-attention ones)."""
        return num_effective_layers(self.ctx)

    @property
    def effective_num_layers(self) -> int:
        """Layers of the MLA/MHA KV term; equals :attr:`num_layers` (GLM DSA CP split out of scope)."""
        return self.num_layers

    @cached_property
    def cache_layer_ids(self) -> tuple[int, ...]:
        """Global ids of the layers holding KV on this rank (DSA elision counts over these)."""
        start, end = self.layer_range
        return tuple(range(start, end))

    # ---- cell size (DefaultPoolConfigurator._compute_cell_size) ------------------------------------------------
    @property
    def kv_itemsize(self) -> int:
        return self.ctx.kv_cache_dtype.itemsize

    @property
    def fp4_applies(self) -> bool:
        """SGLang's ``is_float4_e2m1fn_x2``: true only on CUDA (DefaultPoolConfigurator._compute_cell_size,
        is_float4_e2m1fn_x2)."""
        return self.ctx.kv_cache_dtype.is_fp4 and self.ctx.device in (DeviceKind.CUDA, DeviceKind.META)

    @cached_property
    def dcp(self) -> int:
        return self.ctx.parallel.dcp_size

    @cached_property
    def base_cell_size_bytes(self) -> int:
        """The target's own cell (DefaultPoolConfigurator._compute_cell_size), without its draft."""
        if self.ctx.geometry.use_mla:
            return self.mla_cell_bytes()
        if self.ctx.geometry.minimax_sparse is not None:
            return self.minimax_cell_bytes()
        return self.mha_cell_bytes()

    @cached_property
    def target_cost(self) -> CacheCost:
        """This rank's own layers: ``T * base_cell`` bytes, no fixed part
        (DefaultPoolConfigurator._compute_cell_size)."""
        return CacheCost(self.base_cell_size_bytes, rounding=Rounding.FLOOR_AT_ZERO)

    @cached_property
    def draft_cell(self) -> int:
        """The bytes per token a speculative target's draft adds: ``draft_cell_bytes(base_cell)`` (0 without one)."""
        return self.draft_cell_bytes(self.base_cell_size_bytes)

    @cached_property
    def draft_cost(self) -> CacheCost:
        """A speculative target's draft: ``T * draft_cell`` bytes."""
        return CacheCost(self.draft_cell, rounding=Rounding.FLOOR_AT_ZERO)

    @cached_property
    def cost(self) -> CacheCost:
        """``target_cost + draft_cost``: an int slope (the cell), intercept 0."""
        return self.target_cost + self.draft_cost

    @cached_property
    def cell_size_bytes(self) -> int:
        """Final int bytes per token slot: the base cell plus the draft's (:attr:`cost`'s slope)."""
        return self.base_cell_size_bytes + self.draft_cell

    def engine_undercounts(self) -> tuple[ReleaseRule, ...]:
        """Before :data:`MLA_CELL_PRICES_POOL_ROW` a packed fp8 DSA row (656 B) is priced at ``rank + rope`` (576);
        before :data:`NPU_DSA_CACHE_DTYPE_INDEXER` an Ascend bf16 DSA indexer at the fp8 132 B: SGLang's pools then
        store more than its cell prices (module rules; GLM-5 fp8 under 0.5.15: 656 - 576 = 80 B a layer)."""
        geometry, release = self.ctx.geometry, self.ctx.release
        lacking: list[ReleaseRule] = []
        packed_row = geometry.mla is not None and self.mla_kv_cache_dim() != geometry.mla.latent_dim
        if packed_row and not MLA_CELL_PRICES_POOL_ROW.holds(release):
            lacking.append(MLA_CELL_PRICES_POOL_ROW)
        npu_cache_dtype_indexer = (
            geometry.dsa is not None
            and self.ctx.device is DeviceKind.NPU
            and self.ctx.kv_cache_dtype.dtype is not DType.FLOAT8_E4M3FN
        )
        if npu_cache_dtype_indexer and not NPU_DSA_CACHE_DTYPE_INDEXER.holds(release):
            lacking.append(NPU_DSA_CACHE_DTYPE_INDEXER)
        return tuple(lacking)

    # MLA ------------------------------------------------------------------------------
    def mla_kv_cache_dim(self) -> int:
        """``calculate_mla_kv_cache_dim``: 576 for DeepSeek, 656 packed-fp8 DSA rows."""
        return calculate_mla_kv_cache_dim(self.ctx)

    def mla_cell_bytes(self) -> int:
        """``mla_dim * L * kv`` (+ FP4 halving and scales) + the DSA indexer term (_compute_cell_size, MLA branch)."""
        geometry = self.ctx.geometry
        assert geometry.mla is not None
        require_fp4_device(self.ctx)
        if self.fp4_applies and geometry.dsa is not None:
            # SGLang prices 324 B/layer here but its DSA pool stores a 576-wide float4 row: no
            # consistent pool exists, so the combination is rejected (decision, see module notes)
            raise UnsupportedConfigurationError(
                f"kv_cache_dtype {self.ctx.kv_cache_dtype.name!r} (FP4) with DSA sparse attention "
                f"({', '.join(geometry.architectures)}) is not supported: SGLang has no FP4 DSA pool; "
                "use 'fp8_e4m3' or 'bf16'"
            )
        if geometry.dsa is not None and self.ctx.page_size != 64 and not DSA_POOL_ANY_PAGE.holds(self.ctx.release):
            raise UnsupportedConfigurationError(
                f"{self.ctx.release.label}'s NSATokenToKVPool asserts page_size == 64 "
                f"(sglang.srt.mem_cache.memory_pool.NSATokenToKVPool.__init__), and init_memory_pool builds it "
                f"while sizing: page {self.ctx.page_size} is refused; use --page-size 64 or a later --sglang-version"
            )
        layers = self.effective_num_layers
        row = self.mla_kv_cache_dim() if MLA_CELL_PRICES_POOL_ROW.holds(self.ctx.release) else geometry.mla.latent_dim
        cell = row * layers * self.kv_itemsize
        if self.fp4_applies:
            # half a byte per latent value plus one 1-byte scale per 16 values; SGLang's price
            # (_compute_cell_size, MLA FP4 branch): no recipe check and no workspace, nvfp4 and
            # fp4_mx_block16 cost the same
            from ..pools.fp4 import mla_fp4_cell_bytes

            cell = mla_fp4_cell_bytes(self.mla_kv_cache_dim(), layers)
        if geometry.dsa is not None and DSA_INDEXER_IN_CELL.holds(self.ctx.release):
            cell += self.indexer_bytes(self.num_layers) * (1 if self.ctx.is_draft_worker else self.indexer_dcp)
        return cell

    @property
    def indexer_dcp(self) -> int:
        """The DCP factor on DSA index keys: ``dcp`` (:data:`DSA_INDEX_KPOOL_DCP`), else 1."""
        from ..pools.dsa import DSA_INDEX_KPOOL_DCP

        return self.dcp if DSA_INDEX_KPOOL_DCP.holds(self.ctx.release) else 1

    # DSA indexer (DefaultPoolConfigurator._compute_dsa_indexer_cell_size) ---------------------------------------------
    @property
    def index_k_elision(self) -> bool:
        """Layers that reuse the previous top-k store no index keys (target workers only).

        Off on NPU under PD disaggregation or hierarchical cache
        (DefaultPoolConfigurator._compute_dsa_indexer_cell_size).
        """
        npu = self.ctx.device is DeviceKind.NPU
        scheduling = self.ctx.scheduling
        disagg = scheduling.disaggregation_mode is not DisaggregationMode.NULL
        return not self.ctx.is_draft_worker and not (npu and (disagg or scheduling.enable_hierarchical_cache))

    def indexer_layer_count(self, num_layers: int, *, all_layers: bool = False) -> int:
        """Layers carrying index keys; the skip rule runs on the cache-layer ids.

        SGLang's _get_dsa_cache_layer_ids: when the id list's length differs from ``num_layers`` SGLang
        evaluates the skip rule on ``0..num_layers-1`` instead of the real ids.
        """
        dsa = self.ctx.geometry.dsa
        assert dsa is not None
        if all_layers or not self.index_k_elision or not DSA_INDEXER_BY_LAYER.holds(self.ctx.release):
            return num_layers
        ids = self.cache_layer_ids
        if len(ids) != num_layers:
            ids = tuple(range(num_layers))
        return sum(1 for layer in ids if not dsa.skips_topk(layer))

    def indexer_bytes(self, num_layers: int, *, all_layers: bool = False) -> int:
        """``int(per_tok * n_indexer_layers * esz)``: uint8 index key + fp32 scale per 128
        (DefaultPoolConfigurator._compute_dsa_indexer_cell_size).

        NPU with a non-fp8 KV cache keeps a bf16 indexer: ``per_tok = index_head_dim``,
        ``esz = es(kv)``.
        """
        from ..pools.dsa import DSA_INDEX_KPOOL_DCP

        dsa = self.ctx.geometry.dsa
        assert dsa is not None
        kpool = DSA_INDEX_KPOOL_DCP.holds(self.ctx.release)
        per_token = dsa.index_k_bytes_per_token if kpool else dsa.raw_index_k_bytes_per_token
        element = 1
        if (
            self.ctx.device is DeviceKind.NPU
            and self.ctx.kv_cache_dtype.dtype is not DType.FLOAT8_E4M3FN
            and NPU_DSA_CACHE_DTYPE_INDEXER.holds(self.ctx.release)
        ):
            per_token = dsa.index_head_dim
            element = self.kv_itemsize
        return int(per_token * self.indexer_layer_count(num_layers, all_layers=all_layers) * element)

    # MHA --------------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return num_kv_heads_per_rank(self.ctx)

    def mha_cell_bytes(self) -> int:
        """``H * (head_dim + v_head_dim) * L * kv`` (_compute_cell_size, MHA branch); FP4 replaces it, MXFP8 adds
        scales.

        FP4 (fp4_kv_cache_quant_method compute_cell_size): the recipe's cell with ``head_dim`` for K and V (SGLang:
        the recipe takes no ``v_head_dim``). MXFP8: ``+ (H * (D + Dv) * num_layers) // 32`` (as SGLang has it in
        _compute_cell_size: ``num_layers`` in the scale term, ``effective_num_layers`` in the data term; equal for
        MHA; one floor overall).
        """
        geometry = self.ctx.geometry
        require_fp4_device(self.ctx)
        if self.fp4_applies:
            from ..pools.fp4 import FP4_RECIPE_BY_BACKEND, fixed_fp4_cell_bytes

            if not FP4_RECIPE_BY_BACKEND.holds(self.ctx.release):
                layers = self.effective_num_layers
                return fixed_fp4_cell_bytes(self.kv_heads, geometry.head_dim, geometry.v_head_dim, layers)
            return self.fp4_recipe.cell_bytes(self.kv_heads, geometry.head_dim, self.effective_num_layers)
        heads, dims = self.kv_heads, geometry.head_dim + geometry.v_head_dim
        cell = heads * dims * self.effective_num_layers * self.kv_itemsize
        if self.ctx.kv_cache_dtype.recipe is KVRecipe.MXFP8:
            from ..pools.mxfp8 import mxfp8_scale_cell_bytes

            cell += mxfp8_scale_cell_bytes(heads, geometry.head_dim, geometry.v_head_dim, self.num_layers)
        return cell

    @cached_property
    def fp4_recipe(self) -> FP4KVRecipe:
        """The FP4 recipe named by ``kv_cache_dtype`` for the (prefill, decode) backend pair (fp4_kv_cache_quant_method
        compute_cell_size).

        Each phase falls back to ``attention_backend``; with none at all only the packed data
        (and nvfp4's global-scale vectors) exist.
        """
        from ..pools.fp4 import FP4_RECIPE_BY_BACKEND, FP4KVRecipe

        backends = self.ctx.backends
        return FP4KVRecipe.configure(
            self.ctx.kv_cache_dtype.recipe,
            prefill_backend=backends.prefill,
            decode_backend=backends.decode,
            is_sm100=self.ctx.platform.is_sm100,
            by_backend=FP4_RECIPE_BY_BACKEND.holds(self.ctx.release),
        )

    # MiniMax sparse (_compute_cell_size, MiniMax branch) -------------------------------------------------------
    @cached_property
    def minimax_index_dtype(self) -> DType:
        """The indexer cache dtype: KV dtype on CUDA SM90 with fp8-e4m3 KV, fp8 on gfx95, else model dtype.

        MiniMax fp8-attention-GEMM mode is not a setting here (off); the gfx95 env knob
        ``SGLANG_OPT_MINIMAX_M3_FP8_INDEX_CACHE`` is taken at its default (on).
        """
        from ..pools.minimax import minimax_index_dtype

        ctx = self.ctx
        cuda = ctx.device in (DeviceKind.CUDA, DeviceKind.META)
        return minimax_index_dtype(
            ctx.kv_cache_dtype.dtype,
            ctx.geometry.model_dtype,
            cuda_sm90=cuda and ctx.platform.is_sm90,
            gfx95_fp8_index_cache=ctx.device is DeviceKind.HIP and ctx.platform.is_gfx95,
        )

    def minimax_cell_bytes(self) -> int:
        """MiniMax-M3 sparse: main K/V of every local layer plus indexer K(/V) (_compute_cell_size, MiniMax branch).

        ``H = num_kv_heads(attn_tp)`` without DCP (the builder passes DCP heads to the pool;
        identical unless DCP > 1). No FP4/MXFP8/QSA terms. FP4 KV is rejected (the builder passes no quant method), and
        so is the ``minimax_m3_nvfp4`` native Blackwell stack (not modelled).
        """
        ctx, geometry = self.ctx, self.ctx.geometry
        sparse = geometry.minimax_sparse
        assert sparse is not None
        reject_fp4(ctx, f"MiniMax sparse attention ({', '.join(geometry.architectures)})")
        if geometry.quantization == "minimax_m3_nvfp4" and ctx.platform.is_blackwell:
            raise UnsupportedConfigurationError(
                "the MiniMax-M3 NVFP4 native KV pool (quantization 'minimax_m3_nvfp4' on Blackwell) is out of "
                "scope of this planner; plan it on a non-Blackwell platform or with another checkpoint"
            )
        from ..pools.minimax import minimax_sparse_cell_bytes

        return minimax_sparse_cell_bytes(
            sparse.local(*self.layer_range),
            head_num=geometry.num_kv_heads(ctx.parallel.attn_tp_size),
            head_dim=geometry.head_dim,
            kv_itemsize=self.kv_itemsize,
            index_dim=sparse.sparse_index_dim,
            index_itemsize=self.minimax_index_dtype.itemsize,
        )

    # the draft's cost (DefaultPoolConfigurator.__init__ draft scaling) ---------------------------------------------
    def draft_cell_bytes(self, cell: int) -> int:
        """Bytes per token a speculative target adds for its draft's KV, given its own ``cell``
        (DefaultPoolConfigurator.__init__ draft scaling); 0 without a draft.

        EAGLE family (from :data:`EAGLE_DRAFT_CELL_PRICED`; before, 0): ``int(cell * D / num_layers)`` (float,
        truncated): every draft layer is priced
        at the target's per-layer bytes; before :data:`EAGLE_DRAFT_CELL_ADDED`, SGLang scaled the
        whole cell, ``int(cell * (1 + D / num_layers)) - cell``. DSA splits the latent and indexer
        parts. DFLASH: :meth:`dflash_draft_cell_bytes`.
        """
        spec = self.ctx.speculative
        if self.ctx.is_draft_worker or not spec.enabled or self.num_layers <= 0:
            return 0
        if spec.algorithm.is_eagle_family:
            draft_layers = spec.eagle_draft_num_layers
            if draft_layers is None or draft_layers <= 0 or not EAGLE_DRAFT_CELL_PRICED.holds(self.ctx.release):
                return 0
            if self.ctx.geometry.dsa is None or not DSA_INDEXER_BY_LAYER.holds(self.ctx.release):
                if EAGLE_DRAFT_CELL_ADDED.holds(self.ctx.release):
                    return int(cell * draft_layers / self.num_layers)
                return int(cell * (1 + draft_layers / self.num_layers)) - cell
            dcp = self.indexer_dcp
            target_index = self.indexer_bytes(self.num_layers) * dcp
            target_kv = cell - target_index
            draft_kv = int(target_kv * draft_layers / self.effective_num_layers)
            draft_index = self.indexer_bytes(draft_layers, all_layers=True)
            return draft_kv * dcp + draft_index * dcp
        if spec.algorithm.is_dflash_family:
            return self.dflash_draft_cell_bytes(cell)
        return 0

    def dflash_draft_cell_bytes(self, cell: int) -> int:
        """DFLASH/DSPARK: the draft's own cell times DCP (:func:`.request_math.known_dflash_draft_cell`), else the
        target cell scaled by layers and rounded up, ``ceil_div(cell * (L + D * dcp), L) - cell``
        (DefaultPoolConfigurator.__init__ draft scaling; ``dcp`` is 1 before :data:`DFLASH_DRAFT_LAYERS_DCP`)."""
        spec = self.ctx.speculative
        draft_layers = spec.dflash_draft_num_layers
        if draft_layers is None or draft_layers <= 0:
            return 0
        known = known_dflash_draft_cell(self.ctx)
        if known:
            return known
        dcp = self.dcp if DFLASH_DRAFT_LAYERS_DCP.holds(self.ctx.release) else 1
        return ceil_div(cell * (self.num_layers + draft_layers * dcp), self.num_layers) - cell

    # ---- token counts (DefaultPoolConfigurator.calculate_pool_sizes) -------------------------------------------------
    def zero_kv_tokens(self) -> int:
        """Tokens of a rank with no local attention layer (:data:`ZERO_KV_RULE`)."""
        self.require_zero_kv_rule()
        return self.ctx.scheduling.max_total_tokens or self.context_len

    def require_zero_kv_rule(self) -> None:
        """Refuse a zero-cell target rank where SGLang divides by its cell (before :data:`ZERO_KV_RULE`)."""
        if not ZERO_KV_RULE.holds(self.ctx.release) and not self.ctx.is_draft_worker:
            raise UnsupportedConfigurationError(
                f"{self.ctx.release.label} cannot size a rank without attention layers of its own (layers "
                f"{list(self.layer_range)}): its DefaultPoolConfigurator divides the budget by the zero cell "
                "(ZeroDivisionError; sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator."
                "calculate_pool_sizes); change the PP split or use SGLang 0.5.17 or later (--sglang-version)"
            )

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        """``T = align(max(available, 0) // cell, P)`` (DefaultPoolConfigurator.calculate_pool_sizes); cell 0 -> the
        zero-KV rule (DefaultPoolConfigurator.calculate_pool_sizes)."""
        cost = self.cost
        tokens = cost.tokens_for_budget(available_bytes) if cost.slope != 0 else self.zero_kv_tokens()
        tokens = align_down(tokens, page_size)
        require_positive_tokens(tokens)
        return PoolSizes(max_total_num_tokens=tokens)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> PoolSizes:
        tokens = align_down(max_total_num_tokens, page_size)
        require_positive_tokens(tokens)
        return PoolSizes(max_total_num_tokens=tokens)

    def finalize_with_max_running_requests(self, sizes: PoolSizes) -> PoolSizes:
        """A DeepSeek-V4 model sized here (hybrid-SWA memory disabled) still carries the
        compression-state dtypes: SGLang's ``_derive_pool_sizes`` sets them for every DSV4 model
        (``SGLANG_DSV4_COMPRESS_STATE_DTYPE``, float32 by default; KVCacheConfigurator._derive_pool_sizes)."""
        if self.ctx.geometry.dsv4 is None:
            return sizes
        name = self.ctx.knobs.dsv4_compress_state_dtype.torch_name
        return sizes.replace(c4_state_dtype=name, c128_state_dtype=name)

    # ---- pools (KVCacheConfigurator._build_token_to_kv_pool, _build_mha_kv_pool, _build_mla_kv_pool) -----------------
    @property
    def loc_space_scale(self) -> int:
        """A DCP draft indexes the target allocator's DCP-widened ids (:func:`draft_loc_space_scale`)."""
        return draft_loc_space_scale(self.ctx)

    @property
    def pool_page_size(self) -> int:
        return self.ctx.page_size * self.loc_space_scale

    @property
    def pool_layer_num(self) -> int:
        """``L`` handed to the pool: the stage's effective layers (draft: its own layers)."""
        return num_effective_layers(self.ctx)

    def pool_tokens(self, sizes: PoolSizes) -> int:
        """Token slots of the pool (a draft's sizes already carry ``loc_space_scale``)."""
        return sizes.max_total_num_tokens

    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """KVCacheConfigurator._build_token_to_kv_pool, for a non-Mamba, non-SWA model."""
        geometry = self.ctx.geometry
        if geometry.dsv4 is not None:
            # SGLang's KVCacheConfigurator._build_token_to_kv_pool builds the DeepSeek-V4 pool for every
            # DSV4 model; without hybrid-SWA memory it has no full/SWA sizes and cannot be built
            raise UnsupportedConfigurationError(
                "DeepSeek-V4 with disable_hybrid_swa_memory has no pool SGLang can build: its DeepSeek-V4 "
                "pool (KVCacheConfigurator._build_dsv4_kv_pool) needs the hybrid full/SWA sizes; leave "
                "hybrid-SWA memory on"
            )
        if geometry.use_mla:
            if geometry.dsa is not None:
                return self.dsa_layout(sizes)
            if self.fp4_applies:
                return self.mla_fp4_layout(sizes)
            return self.mla_layout(sizes)
        if geometry.minimax_sparse is not None:
            return self.minimax_sparse_layout(sizes)
        return self.mha_layout(sizes)

    def mla_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``MLATokenToKVPool`` with the raw latent width (no DSA packing, MLATokenToKVPool)."""
        geometry = self.ctx.geometry
        assert geometry.mla is not None
        return mla_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            kv_cache_dim=geometry.mla.latent_dim,
            layer_num=self.pool_layer_num,
            store_dtype=self.ctx.kv_cache_dtype.base_store_dtype,
        )

    def mla_fp4_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``MLATokenToKVPoolFP4`` (KVCacheConfigurator._build_token_to_kv_pool, MLATokenToKVPoolFP4), either FP4
        recipe."""
        from ..pools.fp4 import mla_fp4_layout as mla_fp4_pool_layout

        geometry = self.ctx.geometry
        assert geometry.mla is not None
        return mla_fp4_pool_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            kv_cache_dim=geometry.mla.latent_dim,
            layer_num=self.pool_layer_num,
        )

    def dsa_skip_topk_layers(self) -> tuple[bool, ...] | None:
        """Pool-local skip flags of the stage layers when index-K elision applies (_build_dsa_kv_pool)."""
        dsa = self.ctx.geometry.dsa
        assert dsa is not None
        if not self.index_k_elision or not DSA_INDEXER_BY_LAYER.holds(self.ctx.release):
            return None
        start, end = self.layer_range
        return tuple(dsa.skips_topk(layer) for layer in range(start, end))

    def dsa_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``DSATokenToKVPool`` (_build_dsa_kv_pool, DSATokenToKVPool): latent rows plus index keys.

        ``kv_cache_dim`` is calculate_mla_kv_cache_dim's (656 packed fp8 or the raw 576); a DCP draft pool is
        ``dcp_replicated`` (its index page is ``P * dcp / kpool / dcp``); the kpool compress tails
        get ``req_to_token`` rows + 1 rows and ``index_kpool + max draft tokens`` slots.
        """
        from ..pools.dsa import DSA_INDEX_KPOOL_DCP, DSAIndexGeometry
        from ..pools.dsa import dsa_layout as dsa_pool_layout

        ctx, geometry = self.ctx, self.ctx.geometry
        assert geometry.mla is not None and geometry.dsa is not None
        dsa = geometry.dsa
        tails = None
        if dsa.index_kpool > 1 and dsa.index_kpool_compress:
            requests = sizes.max_running_requests
            if requests is None:
                raise KVCacheConfigError("DSA compress tails need max_running_requests; finalise the sizes first")
            req_rows = requests + req_to_token_pre_alloc(ctx, requests) + 1
            tails = (req_rows + 1, dsa.index_kpool + (ctx.speculative.max_num_draft_tokens or 0))
        return dsa_pool_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            kv_cache_dim=self.mla_kv_cache_dim(),
            layer_num=self.pool_layer_num,
            store_dtype=ctx.kv_cache_dtype.base_store_dtype,
            index=DSAIndexGeometry(
                size=self.pool_tokens(sizes),
                page_size=self.pool_page_size,
                index_head_dim=dsa.index_head_dim,
                index_kpool=dsa.index_kpool,
                dcp_size=self.dcp,
                dcp_replicated=self.loc_space_scale > 1,
                kpool_dcp=DSA_INDEX_KPOOL_DCP.holds(ctx.release),
            ),
            skip_topk_layers=self.dsa_skip_topk_layers(),
            compress_tails=tails,
            is_hip=ctx.device is DeviceKind.HIP,
            pool_class=DSA_POOL_CLASS.at(ctx.release),
        )

    def minimax_sparse_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``MiniMaxSparseKVPool`` (_build_minimax_sparse_kv_pool, MiniMaxSparseKVPool); heads with DCP, as the builder
        passes."""
        from ..pools.minimax import minimax_sparse_layout

        geometry = self.ctx.geometry
        sparse = geometry.minimax_sparse
        assert sparse is not None
        return minimax_sparse_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            head_num=self.kv_heads,
            head_dim=geometry.head_dim,
            index_dim=sparse.sparse_index_dim,
            layers=sparse.local(*self.layer_range),
            store_dtype=self.ctx.kv_cache_dtype.base_store_dtype,
            index_dtype=self.minimax_index_dtype,
            fused=FUSED_KV_STORAGE.holds(self.ctx.release),
        )

    def mha_store_dtype(self) -> DType:
        """uint8 for fp8 (readers view it back), except CPU fp8 e4m3 (the AMX recipe keeps fp8)."""
        kv = self.ctx.kv_cache_dtype
        if self.ctx.device is DeviceKind.CPU and kv.dtype is DType.FLOAT8_E4M3FN:
            return DType.FLOAT8_E4M3FN
        return kv.store_dtype

    def mha_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``MHATokenToKVPool`` for this rank's heads and layers (_build_mha_kv_pool).

        FP4: the recipe's quantized buffers (MHATokenToKVPool FP4 quant_method), recipe page = scheduler page, ``L``
        layers of global scales. MXFP8: ``MHATokenToKVPoolMXFP8``.
        """
        geometry = self.ctx.geometry
        if self.fp4_applies:
            return self.fp4_recipe.layout(
                size=self.pool_tokens(sizes),
                page_size=self.pool_page_size,
                head_num=self.kv_heads,
                head_dim=geometry.head_dim,
                layer_num=self.pool_layer_num,
                quant_page_size=self.ctx.page_size,
            )
        if self.ctx.kv_cache_dtype.recipe is KVRecipe.MXFP8:
            from ..pools.mxfp8 import mxfp8_layout

            return mxfp8_layout(
                size=self.pool_tokens(sizes),
                page_size=self.pool_page_size,
                head_num=self.kv_heads,
                head_dim=geometry.head_dim,
                v_head_dim=geometry.v_head_dim,
                layer_num=self.pool_layer_num,
            )
        return mha_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            head_num=self.kv_heads,
            head_dim=geometry.head_dim,
            v_head_dim=geometry.v_head_dim,
            layer_num=self.pool_layer_num,
            store_dtype=self.mha_store_dtype(),
            fused=FUSED_KV_STORAGE.holds(self.ctx.release),
        )
