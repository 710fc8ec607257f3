"""``DSV4PoolConfigurator``: DeepSeek-V4 compressed attention (DSV4PoolConfigurator).

Cost model (piecewise affine, bytes per rank)::

    available = full * bpft + fixed(m)

``bpft`` (bytes per full token, float) sums, per owned compression ratio, the compressed
latent and indexer bytes one full token adds, plus ``swa_ratio * bpst`` in ratio mode (SWA
slots follow the full pool at ``swa_ratio``, 0.1 unless given). ``bpst`` (bytes per SWA
token) is the paged latent of every stage layer plus the ratio-4 compression state, which
lives per SWA page. ``fixed(m)`` is request-scoped: the ratio-128 compression state for an
estimated ``m`` requests, plus, in cap mode, the whole SWA pool (``swa_cap_tokens * bpst``,
sized from ``max_running_requests`` instead of the ratio). Inverse:
``full = align(int(max(A - fixed, 0) / bpft), P)``; then ``swa``, ``c4 = full // 4``,
``c128 = full // 128`` and ``c4_state = swa // P * ring4`` follow; ``finalize`` sets
``c128_state = (R + 1) * ring128`` for the resolved request count ``R``.

Both slopes are :class:`~kvstrategies.core.cost.CacheCost` values, the draft's cost added to the
target's. Every float is evaluated in SGLang's order. Modelled: the CUDA ``v4`` page
layout, the trtllm uniform-fp8 pool, NPU sizing (no page padding; the NPU pool layout itself is
another module's), an EAGLE/MTP draft priced as one more average layer (``(T + 1) / T``), the
draft worker's zeroed compressed pools. Rejected with :class:`UnsupportedConfigurationError`: V4.1 layouts and
kv-source ratio-1/2 pools, DSpark drafts (encoder replay), a DCP draft worker.

Decisions where SGLang's own behaviour is inconsistent or unhelpful:
* A speculative DSV4 deployment must state ``speculative_num_draft_tokens``: SGLang's sizing
  keys the rings on "algorithm set" and its pool on "algorithm set and draft tokens > 0"
  (DeepSeekV4TokenToKVPool); requiring the count makes both agree.
* Where SGLang's ratio-mode window-floor ``ValueError`` is really caused by the ratio-128
  state reserved for the *estimated* request count (the fixed bytes use
  DSV4PoolConfigurator._resolve_max_running_requests_per_worker's estimate), we raise
  :class:`DSV4StateReservationError` naming that cause and ``max_running_requests``.
* Page size: sizing accepts any multiple of 128 (what SGLang's configurator asserts); the pool
  needs 256 off NPU (the CUDA builder asserts it), so other pages plan sizes but no layout.
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

from ..context import (
    DeviceKind,
    DisaggregationMode,
    KVCacheContext,
    SpecAlgorithm,
    context_len,
    num_effective_layers,
)
from ..core.cost import CacheCost, Rounding
from ..core.dtypes import DType
from ..core.releases import ByRelease, ReleaseRule, span
from ..core.sizing import PoolSizes, align_down, ceil_align, ceil_div, require_positive_tokens
from ..errors import (
    InsufficientMemoryError,
    KVCacheConfigError,
    SWAPoolTooSmallError,
    UnsupportedConfigurationError,
)
from ..models.dsv4 import DSV4Geometry
from ..pools.dsv4 import (
    DSV4_C128_STATE_REQUEST_FLOOR,
    DSV4_INDEXER_PAGES_AT_GLOBAL_PAGE,
    DSV4_KV_PAGES_AT_GLOBAL_PAGE,
    KVPageLayout,
    compress_state_rows,
    dsv4_layout,
)
from ..pools.layout import PoolLayout
from ..pools.swa import full_to_swa_mapping_length
from .base import PoolConfigurator
from .checks import uses_dsv4_pools
from .request_math import req_to_token_pre_alloc, swa_request_cap

#: ``DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO``: SWA tokens per full token when the ratio is not given
DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO = 0.1
#: the page size SGLang's CUDA DSV4 builder asserts (_build_dsv4_kv_pool)
DSV4_CUDA_PAGE_SIZE = 256
#: ring sizes of the compression state ``(without, with)`` speculative decoding (DSV4PoolConfigurator.__init__)
_RING_SIZES = {4: (8, 16), 128: (128, 256)}
#: the compressor window a ring must keep besides the drafts: ``ratio * (2 if ratio == 4 else 1)``
_RING_WINDOWS = {4: 8, 128: 128}
_STATE_DTYPES = (DType.FLOAT32, DType.BFLOAT16)


#: SGLang's DeepSeek-V4 sizing up to 0.5.20 (before the request-cap / kv-source rewrite of 0.5.21)
DSV4_RATIO_ONLY_SIZING = ReleaseRule(
    "dsv4-ratio-only-sizing",
    span(last="0.5.20"),
    "DeepSeek-V4 sizing without cap mode: SWA ratio from --swa-full-tokens-ratio (as the launch resolved it), "
    "unpadded 584-byte latent rows, c4 compression state per sliding window",
    "sglang.srt.model_executor.pool_configurator.DSV4PoolConfigurator._get_bytes_per_full_token",
)
#: the ratio-128 compression state is priced per SWA token (``ring128 / window`` rows of ``2 * hd`` states per
#: ratio-128 layer) and its pool sized from the SWA pool; from 0.5.15 it is request-scoped (fixed bytes for the
#: estimated request count, sized once the request count is resolved)
DSV4_C128_STATE_PER_SWA_TOKEN = ReleaseRule(
    "dsv4-c128-state-per-swa-token",
    span(last="0.5.14"),
    "DeepSeek-V4: the ratio-128 compression state priced per SWA token (swa_ratio * ring128 / window rows a full "
    "token) and c128_state_pool_size = swa // window * ring128 (0.5.15: request-scoped, (R + 1) * ring128 rows)",
    "sglang.srt.model_executor.pool_configurator.DSV4PoolConfigurator._get_bytes_per_full_token and "
    "_compute_dsv4_sizes (0.5.15: _get_c128_state_fixed_bytes, finalize_with_max_running_requests)",
)
#: the cost model prices this stage's layers, ``compress_ratios[start:end]``; before, every entry of the list (all
#: pipeline stages, and the trailing entry of the MTP layer)
DSV4_PRICES_STAGE_LAYERS = ReleaseRule(
    "dsv4-prices-stage-layers",
    span("0.5.13"),
    "DeepSeek-V4 bytes per full token count this PP stage's layers (before: every compress_ratios entry, the MTP "
    "layer's included, on every stage)",
    "sglang.srt.model_executor.pool_configurator.DSV4PoolConfigurator.__init__ (compression_ratios)",
)
#: ``SGLANG_DSV4_COMPRESS_STATE_DTYPE`` picks the compression-state dtype; before, it is float32
DSV4_STATE_DTYPE_KNOB = ReleaseRule(
    "dsv4-state-dtype-knob",
    span("0.5.14"),
    "DeepSeek-V4 compression-state dtype from SGLANG_DSV4_COMPRESS_STATE_DTYPE (before: float32 always)",
    "sglang.srt.model_executor.pool_configurator._get_dsv4_compress_state_dtype_sizes",
)
#: ``--swa-full-tokens-ratio``'s fallback when not given (``arg_groups.fields.schedule``)
SERVER_ARGS_SWA_FULL_TOKENS_RATIO = 0.8
#: the SWA ratio of a DeepSeek-V4 deployment that does not give ``--swa-full-tokens-ratio`` is the
#: launch's 0.1 (its model override writes the field the configurator reads); from 0.5.21 the
#: configurator itself takes 0.1 when the ratio was not explicitly set
DSV4_LAUNCH_SETS_SWA_RATIO = ReleaseRule(
    "dsv4-launch-sets-swa-ratio",
    span(last="0.5.20"),
    "DeepSeek-V4 without --swa-full-tokens-ratio: the launch's model override sets swa_full_tokens_ratio 0.1, "
    "which the configurator reads (0.5.21: the configurator's own default for a ratio not explicitly set)",
    "sglang.srt.arg_groups.overrides._deepseek_v4_overrides (0.5.19: "
    "arg_groups.model_overrides.deepseek_v4._deepseek_v4_overrides)",
    topic="launch",
)
#: ratio-mode DeepSeek-V4 refuses an SWA pool of ``W + P`` tokens or fewer (before: planned)
DSV4_SWA_ADMISSION_FLOOR = ReleaseRule(
    "dsv4-swa-admission-floor",
    span("0.5.20"),
    "DeepSeek-V4 ratio mode: an SWA pool of sliding_window_size + page_size tokens or fewer is refused "
    "(before: planned)",
    "sglang.srt.model_executor.pool_configurator.DSV4PoolConfigurator._compute_dsv4_sizes "
    "(validate_swa_pool_size)",
)


class DSV4StateReservationError(SWAPoolTooSmallError):
    """The ratio-128 state for the estimated request count leaves the SWA pool below its floor.

    SGLang reports this as the SWA window-floor error ("SWA pool cannot hold even one request"); the fix
    is to bound the request count with ``max_running_requests``.
    """


class DSV4PoolConfigurator(PoolConfigurator):
    """DeepSeek-V4 compressed attention: SWA, c4, c128 and compression-state pools (DSV4PoolConfigurator)."""

    family: ClassVar[str] = "dsv4"

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        """DeepSeek-V4 family with hybrid SWA memory on (create_memory_pool_configurator, first rule), from SGLang
        0.5.21."""
        return uses_dsv4_pools(ctx) and not DSV4_RATIO_ONLY_SIZING.holds(ctx.release)

    # ---- geometry and settings (DSV4PoolConfigurator.__init__) ----------------------------------------------
    @property
    def dsv4(self) -> DSV4Geometry:
        geometry = self.ctx.geometry.dsv4
        if geometry is None:
            raise KVCacheConfigError(
                f"{self.ctx.geometry.architectures} is not a DeepSeek-V4 model; DSV4PoolConfigurator needs one"
            )
        return geometry

    @cached_property
    def stage_range(self) -> tuple[int, int]:
        """The *target's* ``[start, end)`` on this PP rank (a draft worker sizes as its target)."""
        return self.ctx.parallel.layer_range(self.ctx.geometry.num_pp_layers)

    @cached_property
    def stage_ratios(self) -> tuple[int, ...]:
        """``compress_ratios[start:end]``; ``T = len`` counts ratio-0 layers too."""
        return self.dsv4.stage_ratios(*self.stage_range)

    @property
    def num_layers_total(self) -> int:
        return len(self.stage_ratios)

    @cached_property
    def owners(self) -> dict[int, tuple[int, ...]]:
        """Global ids owning compressed storage, per ratio, in dict order 4, 128 (``collect_sources_by_ratio``).

        Ratios 1 and 2 own only ``kv_source_layer_ids`` layers (V4.1); without that list they
        own nothing and their layers are SWA-only. With it they are rejected (out of scope).
        """
        start, _ = self.stage_range
        low = sorted({r for r in self.stage_ratios if r in (1, 2)})
        if low and self.dsv4.kv_source_layer_ids is not None:
            raise UnsupportedConfigurationError(
                f"compress ratio(s) {low} with kv_source_layer_ids (a DeepSeek-V4.1 checkpoint) need the "
                "ratio-1/2 pools, which kvstrategies does not model; use a V4 (ratios 0/4/128) checkpoint"
            )
        owners: dict[int, tuple[int, ...]] = {}
        for ratio in (4, 128):
            layers = tuple(start + i for i, r in enumerate(self.stage_ratios) if r == ratio)
            if layers:
                owners[ratio] = layers
        return owners

    def n(self, ratio: int) -> int:
        """``n(r)``: layers of this stage owning ratio ``r``'s compressed storage."""
        return len(self.owners.get(ratio, ()))

    @cached_property
    def speculative(self) -> bool:
        """A speculative algorithm is set (it sizes the rings and inflates the coefficients)."""
        spec = self.ctx.speculative
        if not spec.enabled:
            return False
        if spec.algorithm is SpecAlgorithm.DSPARK:
            raise UnsupportedConfigurationError(
                "DeepSeek-V4 with a DSpark draft (encoder SWA replay) is not modelled; use EAGLE/MTP"
            )
        if not spec.num_draft_tokens:
            raise KVCacheConfigError(
                f"DeepSeek-V4 with speculative_algorithm {spec.algorithm.value} needs speculative_num_draft_tokens "
                "(the compression-state rings are sized for it); set it, e.g. 4 for MTP"
            )
        return True

    @cached_property
    def ring_sizes(self) -> dict[int, int]:
        """Compression-state ring per owned ratio: 8 / 128, or 16 / 256 with speculative decoding.

        With drafts the ring must keep them resident: ``ring - window + 2 >= draft tokens``
        (16-ring serves 10 drafts, 256-ring 130; SGLang asserts).
        """
        speculative = self.speculative
        rings = {ratio: _RING_SIZES[ratio][1 if speculative else 0] for ratio in self.owners}
        if speculative:
            drafts = self.ctx.speculative.max_num_draft_tokens or 0
            for ratio, ring in rings.items():
                window = _RING_WINDOWS[ratio]
                pad = ring - window + 2 if ring > window else 0
                if drafts > pad:
                    raise KVCacheConfigError(
                        f"speculative_num_draft_tokens={drafts} exceeds what the c{ratio} compression-state ring "
                        f"(ring {ring}) keeps resident ({pad} draft tokens); lower speculative_num_draft_tokens"
                    )
        return rings

    def pool_ring_sizes(self) -> tuple[int, int]:
        """``(ring4, ring128)`` as the pool computes them (whether or not the stage owns the ratio)."""
        index = 1 if self.speculative else 0
        return _RING_SIZES[4][index], _RING_SIZES[128][index]

    @cached_property
    def page_size(self) -> int:
        """The scheduler page, checked as SGLang's configurator asserts it: a multiple of 128."""
        return self.check_page_size(self.ctx.page_size)

    def check_page_size(self, page_size: int) -> int:
        """Sizing needs ``P % 128 == 0`` (DSV4PoolConfigurator); only the CUDA pool insists on 256."""
        if page_size % 128:
            raise KVCacheConfigError(
                f"page_size {page_size}: DeepSeek-V4 compressed attention needs a multiple of 128 "
                f"(SGLang asserts it); use {DSV4_CUDA_PAGE_SIZE} on CUDA or 128 on Ascend NPU"
            )
        return page_size

    def pool_page_size(self) -> int:
        """The page the pool is built with: 256 off NPU, where SGLang's builder asserts it."""
        page = self.page_size
        if self.ctx.device is not DeviceKind.NPU and page != DSV4_CUDA_PAGE_SIZE:
            raise KVCacheConfigError(
                f"page_size {page}: the DeepSeek-V4 pool on {self.ctx.device.value} needs page_size "
                f"{DSV4_CUDA_PAGE_SIZE} (SGLang forces --page-size 256 and the pool asserts it; 128 is the "
                "Ascend NPU layout); set page_size to 256"
            )
        return page

    @cached_property
    def kv_layout(self) -> KVPageLayout:
        """The main-cache page format (``select_dsv4_kv_layout``): V4, or uniform fp8 under trtllm.

        ``SGLANG_DSV4_KV_LAYOUT``: ``v4`` (default); ``auto`` is V4.1 on SM100, else V4; ``v41``
        and the ``flashmla_mega`` backend select V4.1, which is not modelled. A V4 main cache
        pairs only with V4 compressed caches (compressed option ``auto`` or ``fp8``).
        """
        knobs, backend = self.ctx.knobs, self.ctx.backends.dsv4_attn_backend
        if backend == "trtllm":
            if self.ctx.kv_cache_dtype.dtype is not DType.FLOAT8_E4M3FN:
                raise KVCacheConfigError(
                    f"dsv4_attn_backend trtllm stores the uniform fp8 pool and needs kv_cache_dtype fp8_e4m3, "
                    f"got {self.ctx.kv_cache_dtype.name}"
                )
            return KVPageLayout.UNIFORM_FP8
        mode = knobs.dsv4_kv_layout.strip().lower()
        if mode not in ("v4", "auto", "v41", "v41_new"):
            raise KVCacheConfigError(f"SGLANG_DSV4_KV_LAYOUT={mode!r}; use v4 (default), auto or v41")
        if backend == "flashmla_mega" or mode in ("v41", "v41_new") or (mode == "auto" and self.ctx.platform.is_sm100):
            raise UnsupportedConfigurationError(
                "the DeepSeek-V4.1 KV page layouts (v41, SM100 auto, flashmla_mega) are not modelled; "
                "set SGLANG_DSV4_KV_LAYOUT=v4"
            )
        option = knobs.dsv4_compressed_kv_layout.strip().lower()
        if option not in ("auto", "fp8"):
            raise KVCacheConfigError(
                f"SGLANG_DSV4_COMPRESSED_KV_LAYOUT={option!r}: the V4 main cache pairs only with V4 compressed "
                "caches; use auto or fp8"
            )
        return KVPageLayout.V4

    @property
    def unpadded(self) -> bool:
        """NPU and the trtllm uniform pool store ``kv_bytes`` per token with no page padding
        (DSV4PoolConfigurator._get_paged_kv_bytes_per_token)."""
        return self.ctx.device is DeviceKind.NPU or self.kv_layout is KVPageLayout.UNIFORM_FP8

    @property
    def head_dim(self) -> int:
        """``hd = nope + rope`` (512)."""
        return self.dsv4.head_dim

    @property
    def kv_bytes(self) -> int:
        """One latent slot: ``hd`` under trtllm, else ``nope + 2 * rope + 8`` (584: fp8 nope, bf16 rope, scales)."""
        if self.kv_layout is KVPageLayout.UNIFORM_FP8:
            return self.head_dim
        return self.dsv4.qk_nope_head_dim + self.dsv4.qk_rope_head_dim * 2 + 8

    @property
    def indexer_bytes_per_token(self) -> int:
        """``idx + idx // 128 * 4``: fp8 indexer key plus fp32 scales (132 for 128)."""
        idx = self.dsv4.index_head_dim
        return idx + idx // 128 * 4

    @cached_property
    def state_dtype(self) -> DType:
        """``SGLANG_DSV4_COMPRESS_STATE_DTYPE``: float32 (default) or bfloat16, for c4 and c128 alike (float32 where
        :data:`DSV4_STATE_DTYPE_KNOB` does not hold)."""
        if not DSV4_STATE_DTYPE_KNOB.holds(self.ctx.release):
            return DType.FLOAT32
        dtype = self.ctx.knobs.dsv4_compress_state_dtype
        if dtype not in _STATE_DTYPES:
            raise KVCacheConfigError(
                f"DeepSeek-V4 compression-state dtype {dtype.torch_name}; use float32 (default) or bfloat16 "
                "(SGLANG_DSV4_COMPRESS_STATE_DTYPE)"
            )
        return dtype

    # ---- per-token coefficients (DSV4PoolConfigurator._get_paged_kv_bytes_per_token, _get_bytes_per_full_token) ---
    def paged(self, ratio: int) -> float:
        """Paged bytes per token of the ratio-``r`` cache (0 = SWA): ``page_bytes(ps) / ps``, ``ps = P // r``.

        V4 at P = 256: 585.0 (ratio 0 and 4), 864.0 (ratio 128: 1,168 bytes padded to 1,728).
        """
        if self.unpadded:
            return float(self.kv_bytes)
        tokens = self.page_size // ratio if ratio else self.page_size
        return self.kv_layout.page_bytes(tokens) / tokens

    def compressed_bytes_per_full_token(self, ratio: int) -> float:
        """``comp(4) = 1/4 * paged(4) + 1/4 * idx_bpt``; ``comp(128) = 1/128 * paged(128)`` (float)."""
        if ratio == 4:
            # ``1 / (4 * c4_shrink)`` with c4_shrink = 1: HiSparse (its host/device ratio) is not modelled
            return (1 / (4 * 1)) * self.paged(4) + 1 / 4 * self.indexer_bytes_per_token
        return 1 / 128 * self.paged(128)

    @property
    def draft_inflation(self) -> float:
        """``(T + 1) / T``: SGLang prices an EAGLE/MTP draft as one more layer of the stage's average."""
        total = self.num_layers_total
        return (total + 1) / total

    def draft_cost(self, target_bytes: float) -> CacheCost:
        """The draft's bytes per token on top of a target's ``target_bytes``: ``target * (T + 1) / T - target``
        with speculative decoding, else 0 (DSV4PoolConfigurator._get_bytes_per_full_token).

        Adding it back gives SGLang's product ``target * (T + 1) / T`` bit for bit: the product lies in
        ``[target, 2 * target]`` (``T >= 1``), so the difference is exact (Sterbenz's lemma) and so is the sum.
        """
        if not self.speculative:
            return CacheCost(0, rounding=Rounding.TRUNCATE_AT_ZERO)
        return CacheCost(target_bytes * self.draft_inflation - target_bytes, rounding=Rounding.TRUNCATE_AT_ZERO)

    @cached_property
    def base_bytes_per_swa_token(self) -> float:
        """``paged(0) * T + (ring4 / P) * (4*hd*es + 4*idx*es) * n(4)`` without the draft (float).

        The c4 compression state (attention + indexer rows) lives per SWA page, so it is priced
        per SWA token. Flash, no speculative decoding: ``585.0 * 43 + 8/256 * 10,240 * 21 = 31,875.0``.
        """
        es = self.state_dtype.itemsize
        c4_state_bytes = 2 * 2 * self.head_dim * es
        c4_indexer_state_bytes = 2 * 2 * self.dsv4.index_head_dim * es
        return self.paged(0) * self.num_layers_total + (
            self.c4_state_per_token * (c4_state_bytes + c4_indexer_state_bytes) * self.n(4)
        )

    @property
    def c4_state_per_token(self) -> float:
        """``ring4 / P``: c4 compression-state rows per SWA token (one ring per SWA page)."""
        return self.ring_sizes.get(4, 0) / self.page_size

    @cached_property
    def base_bytes_per_full_token(self) -> float:
        """``swa_term + sum comp(r) * n(r)`` (dict order 4, 128) without the draft (float).

        ``swa_term = swa_ratio * bpst`` in ratio mode, ``0 * bpst`` in cap mode (the SWA pool is
        then fixed bytes). Flash, no speculative decoding, ratio 0.1: ``3,187.5 + 3,899.25 = 7,086.75``.
        """
        swa_ratio = 0 if self.cap_mode else self.swa_ratio
        return swa_ratio * self.base_bytes_per_swa_token + sum(
            self.compressed_bytes_per_full_token(ratio) * len(layers) for ratio, layers in self.owners.items()
        )

    @cached_property
    def swa_token_cost(self) -> CacheCost:
        """Bytes per SWA token: :attr:`base_bytes_per_swa_token` plus the draft's (:meth:`draft_cost`)."""
        base = self.base_bytes_per_swa_token
        return CacheCost(base, rounding=Rounding.TRUNCATE_AT_ZERO) + self.draft_cost(base)

    @cached_property
    def full_token_cost(self) -> CacheCost:
        """Bytes per full token: :attr:`base_bytes_per_full_token` plus the draft's (:meth:`draft_cost`)."""
        base = self.base_bytes_per_full_token
        return CacheCost(base, rounding=Rounding.TRUNCATE_AT_ZERO) + self.draft_cost(base)

    @property
    def bytes_per_swa_token(self) -> float:
        """``bpst``: :attr:`swa_token_cost`'s slope."""
        return self.swa_token_cost.slope

    @property
    def bytes_per_full_token(self) -> float:
        """``bpft``: :attr:`full_token_cost`'s slope."""
        return self.full_token_cost.slope

    @property
    def cell_size_bytes(self) -> float:
        """The reported cell: ``bytes_per_full_token`` (draft included; no SWA term in cap mode)."""
        return self.bytes_per_full_token

    # ---- SWA mode (DSV4PoolConfigurator.__init__ swa_ratio, DSV4PoolConfigurator._resolve_swa_cap_tokens) ------------
    @property
    def swa_ratio(self) -> float:
        """The operator's ``swa_full_tokens_ratio`` when given, else 0.1."""
        given = self.ctx.scheduling.swa_full_tokens_ratio
        return DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO if given is None else given

    @property
    def window(self) -> int:
        return self.dsv4.window_size

    @property
    def requests_per_worker(self) -> int | None:
        """``max(1, max_running_requests // attn_dp)`` when ``--max-running-requests`` is set."""
        requested = self.ctx.scheduling.max_running_requests
        if requested is None:
            return None
        return max(1, requested // self.ctx.parallel.attn_dp_size)

    @property
    def swa_prefix_tails(self) -> int:
        """Cached prefixes kept addressable in cap mode: given, else 0 without radix cache or cap, else ``4 * mrr``."""
        sched = self.ctx.scheduling
        if sched.swa_prefix_tails is not None:
            return sched.swa_prefix_tails
        requests = self.requests_per_worker
        if sched.disable_radix_cache or requests is None:
            return 0
        return 4 * requests

    @cached_property
    def swa_cap_tokens(self) -> int | None:
        """Cap mode: ``ceil_align(cap + prefix_tails * (W + P), P)``; None = ratio mode.

        Ratio mode when the ratio was given, without ``--max-running-requests``, or outside the
        decode role without chunked prefill. Flash, 64 requests, chunk 8192, radix on:
        ``ceil_align(65,792 + 256 * 384, 256) = 164,096``.
        """
        sched = self.ctx.scheduling
        requested = sched.max_running_requests
        if sched.swa_full_tokens_ratio is not None or requested is None:
            return None
        decode = sched.disaggregation_mode is DisaggregationMode.DECODE
        if not decode and (sched.chunked_prefill_size is None or sched.chunked_prefill_size <= 0):
            return None
        page = self.page_size
        # compute_swa_request_cap takes the global --max-running-requests and divides by attn DP itself
        # (DSV4PoolConfigurator._resolve_swa_cap_tokens)
        cap = swa_request_cap(self.ctx, self.window, requested)
        return ceil_align(cap + self.swa_prefix_tails * (self.window + page), page)

    @property
    def cap_mode(self) -> bool:
        return self.swa_cap_tokens is not None

    # ---- fixed request-scoped bytes (DSV4PoolConfigurator._fixed_swa_bytes) ------------------------------------------
    def estimated_requests(self, available_bytes: int) -> int:
        """``m``: ``max_running_requests`` per worker if set, else ``min(clamp(int(F / C * 512), 2048, 4096), F // 2)``.

        ``F = int(A / bpft)`` (float). Over-estimating is safe: more fixed bytes, fewer tokens.
        """
        requests = self.requests_per_worker
        if requests is not None:
            return requests
        full = int(available_bytes / self.bytes_per_full_token)
        estimate = int(full / context_len(self.ctx) * 512)
        estimate = max(min(estimate, 4096), 2048)
        return min(estimate, full // 2)

    def request_slots(self, requests: int) -> int:
        """Request-table rows: ``m + 1`` (+ the decode role's pre-allocated slots)."""
        return requests + req_to_token_pre_alloc(self.ctx, requests) + 1

    def c128_state_fixed_bytes(self, requests: int) -> int:
        """``ceil_div(slots * ring128 + ring128 + 1, 128) * 128`` rows of ``2 * hd`` states per ratio-128 layer."""
        layers = self.n(128)
        if layers == 0:
            return 0
        ring = self.ring_sizes[128]
        rows = ceil_div(self.request_slots(requests) * ring + ring + 1, 128) * 128
        return rows * (2 * self.head_dim) * self.state_dtype.itemsize * layers

    @property
    def swa_fixed_bytes(self) -> float:
        """Cap mode: the whole SWA pool, ``swa_cap_tokens * bpst`` (float); ratio mode 0."""
        cap = self.swa_cap_tokens
        return 0 if cap is None else cap * self.bytes_per_swa_token

    def fixed_bytes(self, requests: int) -> float:
        """``c128 + c2 + swa_fixed + swa_ring + c4_unified``: ``c2``, ``swa_ring`` and ``c4_unified`` are 0 here (the
        ratio-2 and unified-c4 pools are not modelled)."""
        return self.c128_state_fixed_bytes(requests) + 0 + self.swa_fixed_bytes + 0 + 0

    def budget_cost(self, requests: int) -> CacheCost:
        """``bytes(full) = full * bpft + fixed(m)`` for ``m`` requests; inverse ``int(max(A - fixed, 0) / bpft)``."""
        return CacheCost(self.bytes_per_full_token, self.fixed_bytes(requests), Rounding.TRUNCATE_AT_ZERO)

    # ---- sizes (DSV4PoolConfigurator.calculate_pool_sizes) -----------------------------------------------------------
    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        """``full = align(int(max(A - fixed(m), 0) / bpft), P)``, then :meth:`sizes_for_full_tokens`.

        The ratio-1/2 page padding of DSV4PoolConfigurator.calculate_pool_sizes does not apply: those pools are not
        modelled.
        """
        page = self.check_page_size(page_size)
        if self.bytes_per_full_token <= 0:
            # cap mode with only ratio-0 layers on this stage: SGLang divides by this 0 and crashes
            raise UnsupportedConfigurationError(
                f"DeepSeek-V4 in cap mode (max_running_requests set, no swa_full_tokens_ratio) with no compressed "
                f"layer on this stage (compress_ratios {list(self.stage_ratios)}) prices a full token at 0 bytes; "
                "give swa_full_tokens_ratio (ratio mode) or a PP split that puts a ratio-4/128 layer on this stage"
            )
        # SGLang (DSV4PoolConfigurator._resolve_max_running_requests_per_worker): fixed bytes use this
        # estimate; finalize later uses the resolved count.
        requests = self.estimated_requests(available_bytes)
        cost = self.budget_cost(requests)
        fixed = cost.intercept
        full = align_down(cost.tokens_for_budget(available_bytes), page)
        if full <= 0 and self.cap_mode:
            raise InsufficientMemoryError(
                f"The DSV4 SWA pool cap ({self.swa_cap_tokens} tokens, {self.swa_fixed_bytes / (1 << 30):.2f} GB) "
                f"leaves no room for the full KV pool within the available {available_bytes / (1 << 30):.2f} GB. "
                "Reduce max_running_requests (--max-running-requests), lower swa_prefix_tails or "
                "SGLANG_SWA_EVICTION_INTERVAL, or increase available_bytes (--mem-fraction-static)."
            )
        if not self.cap_mode:
            self._explain_state_reservation(available_bytes, requests, fixed, full, page)
        sizes = self.sizes_for_full_tokens(full, page)
        return self.derive_draft_sizes(sizes) if self.ctx.is_draft_worker else sizes

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> PoolSizes:
        """:meth:`sizes_for_full_tokens` on ``M`` (fixed bytes are not re-subtracted; cap-mode ``swa`` is not limited
        by ``M``)."""
        sizes = self.sizes_for_full_tokens(max_total_num_tokens, self.check_page_size(page_size))
        return self.derive_draft_sizes(sizes) if self.ctx.is_draft_worker else sizes

    def sizes_for_full_tokens(self, full_tokens: int, page_size: int) -> PoolSizes:
        """``full = align(full, P)``; ``swa`` = cap, or ``align(int(full * ratio), P)`` checked against ``W + P``.

        ``c4 = full // 4``, ``c128 = full // 128``, ``c4_state = swa // P * ring4``,
        ``c128_state = 0`` until :meth:`finalize_with_max_running_requests`.
        """
        full = align_down(full_tokens, page_size)
        cap = self.swa_cap_tokens
        # SGLang (DSV4PoolConfigurator._compute_dsv4_sizes): the cap-mode SWA size is neither re-aligned nor limited by
        # full/M.
        swa = cap if cap is not None else align_down(int(full * self.swa_ratio), page_size)
        floor = DSV4_SWA_ADMISSION_FLOOR.holds(self.ctx.release)
        if cap is None and floor and self.window + page_size >= swa:
            raise SWAPoolTooSmallError(
                f"SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is "
                f"sliding_window_size ({self.window}) + page_size ({page_size}). Increase swa_full_tokens_ratio "
                "(--swa-full-tokens-ratio) or the total KV budget."
            )
        require_positive_tokens(full)
        dtype = self.state_dtype.torch_name
        return PoolSizes(
            max_total_num_tokens=full,
            full_max_total_num_tokens=full,
            swa_max_total_num_tokens=swa,
            c4_max_total_num_tokens=full // (4 * 1),  # full // (4 * c4_shrink), c4_shrink = 1 (no HiSparse)
            c128_max_total_num_tokens=full // 128,
            c4_state_pool_size=swa // page_size * self.ring_sizes.get(4, 0),
            c128_state_pool_size=0,
            c4_state_dtype=dtype,
            c128_state_dtype=dtype,
        )

    def _explain_state_reservation(self, available: int, requests: int, fixed: float, full: int, page: int) -> None:
        """Replace SGLang's window-floor error when the c128 state reservation caused it (module doc, Decisions).

        Raised only when the SWA pool misses its floor *and* would clear it without the
        request-scoped state; otherwise the plain window-floor error follows.
        """
        if not DSV4_SWA_ADMISSION_FLOOR.holds(self.ctx.release):
            return
        swa = align_down(int(full * self.swa_ratio), page)
        if fixed <= 0 or self.window + page < swa:
            return
        without_state = align_down(int(available / self.bytes_per_full_token), page)
        if self.window + page >= align_down(int(without_state * self.swa_ratio), page):
            return
        ring = self.ring_sizes.get(128, 0)
        rows = compress_state_rows(self.request_slots(requests) * ring, ring, 128)
        if self.requests_per_worker is None:
            count = f"an estimated {requests} concurrent requests (max_running_requests not given)"
            fix = "Set max_running_requests (--max-running-requests) to the concurrency you serve (e.g. 64)"
        else:
            count = f"max_running_requests {requests} per worker"
            fix = "Lower max_running_requests (--max-running-requests)"
        spec = "; speculative decoding doubles the ring to 256 rows per request" if self.speculative else ""
        raise DSV4StateReservationError(
            f"DeepSeek-V4: the ratio-128 compression state for {count} takes {int(fixed)} bytes "
            f"({fixed / (1 << 30):.2f} GiB: {rows} rows x {self.n(128)} layers{spec}) of the {available} byte "
            f"budget, which leaves the SWA pool {swa} tokens, at or below its floor sliding_window_size + "
            f"page_size ({self.window} + {page}). SGLang reports this as 'SWA pool cannot hold even one "
            f"request', but the cause is the request-scoped state. {fix}, or raise available_bytes."
        )

    def finalize_with_max_running_requests(self, sizes: PoolSizes) -> PoolSizes:
        """``c128_state_pool_size = (R + 1 [+ decode slots]) * ring128`` for the resolved ``R``."""
        if sizes.max_running_requests is None:
            raise KVCacheConfigError("DSV4 finalize needs max_running_requests; resolve it first (resolve.finalize)")
        if self.ctx.is_draft_worker:
            return self.derive_draft_sizes(sizes)
        slots = self.request_slots(sizes.max_running_requests)
        return sizes.replace(c128_state_pool_size=slots * self.ring_sizes.get(128, 0))

    def derive_draft_sizes(self, target_sizes: PoolSizes, *, handed_tokens: int | None = None) -> PoolSizes:
        """The target's sizes with c4/c128 and both state pools 0: they live on the target
        (KVCacheConfigurator._derive_pool_sizes)."""
        if self.ctx.parallel.dcp_size > 1:
            raise UnsupportedConfigurationError(
                "a DeepSeek-V4 draft worker under decode context parallelism (dcp_size > 1) is not modelled; "
                "use dcp_size 1"
            )
        dtype = self.state_dtype.torch_name
        return super().derive_draft_sizes(target_sizes).replace(
            c4_max_total_num_tokens=0,
            c128_max_total_num_tokens=0,
            c4_state_pool_size=0,
            c128_state_pool_size=0,
            c4_state_dtype=dtype,
            c128_state_dtype=dtype,
        )

    # ---- pool (_build_dsv4_kv_pool, DeepSeekV4TokenToKVPool) -------------------------------------------------
    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``DeepSeekV4TokenToKVPool`` for these sizes; a draft worker holds only its SWA layers."""
        if self.ctx.device is DeviceKind.NPU:
            return self.npu_token_to_kv_layout(sizes)
        page = self.pool_page_size()
        requests = sizes.max_running_requests
        if requests is None:
            raise KVCacheConfigError("the DSV4 pool needs max_running_requests; finalise the sizes first")
        swa = sizes.swa_max_total_num_tokens
        if swa is None:
            raise KVCacheConfigError("DSV4 sizes need swa_max_total_num_tokens")
        if self.ctx.is_draft_worker:
            start, ratios = 0, (0,) * num_effective_layers(self.ctx)
        else:
            start, ratios = self.stage_range[0], self.stage_ratios
        _ = self.owners  # validates the stage (kv-source ratio-1/2 layers are rejected)
        num_req_slots = self.request_slots(requests)  # = req_to_token rows
        return dsv4_layout(
            swa_size=swa,
            c4_size=sizes.c4_max_total_num_tokens,
            c128_size=sizes.c128_max_total_num_tokens,
            c4_state_pool_size=sizes.c4_state_pool_size,
            c128_state_pool_size=sizes.c128_state_pool_size,
            num_req_slots=num_req_slots,
            page_size=page,
            stage_start=start,
            stage_ratios=ratios,
            ring_sizes=self.pool_ring_sizes(),
            qk_nope_head_dim=self.dsv4.qk_nope_head_dim,
            qk_rope_head_dim=self.dsv4.qk_rope_head_dim,
            indexer_head_dim=self.dsv4.index_head_dim,
            indexer_bytes_per_token=self.indexer_bytes_per_token,
            c4_state_dtype=self.state_dtype,
            c128_state_dtype=self.state_dtype,
            kv_layout=self.kv_layout,
            indexer_pages_at_global_page=DSV4_INDEXER_PAGES_AT_GLOBAL_PAGE.holds(self.ctx.release),
            kv_pages_at_global_page=DSV4_KV_PAGES_AT_GLOBAL_PAGE.holds(self.ctx.release),
            c128_state_request_floor=DSV4_C128_STATE_REQUEST_FLOOR.holds(self.ctx.release),
            # the target's SWA allocator registers its full -> SWA mapping on the pool (SGLang's
            # SWATokenToKVPoolAllocator: full + page + 1 int64 entries)
            mapping_length=None if self.ctx.is_draft_worker else full_to_swa_mapping_length(
                sizes.full_max_total_num_tokens or sizes.max_total_num_tokens, swa, page
            ),
        )

    def npu_token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``DSV4NPUTokenToKVPool`` (Ascend): provided by the NPU pools, not here."""
        raise UnsupportedConfigurationError(
            "the Ascend NPU DeepSeek-V4 pool (DSV4NPUTokenToKVPool) layout is not available yet; "
            "plan on cuda, or size only (calculate_pool_sizes works on npu)"
        )



class RatioOnlyDSV4PoolConfigurator(DSV4PoolConfigurator):
    """SGLang's ``DSV4PoolConfigurator`` up to 0.5.20 (:data:`DSV4_RATIO_ONLY_SIZING`).

    One cost model, ratio mode only::

        bpft = r * kv * T + kv * n4 / 4 + kv * n128 / 128 + idx * n4 / 4 + r * (ring4 / W) * (st4 + sti4) * n4

    with ``kv = nope + 2 * rope + 8`` bytes a latent row (no page padding, also under trtllm),
    ``r`` the given ``swa_full_tokens_ratio`` else the launch's 0.1, ``W`` the model's window and
    ``st4 = 4 * hd * es``, ``sti4 = 4 * idx * es`` the c4 compression-state rows; times
    ``(T + 1) / T`` with speculative decoding. ``c4_state = swa // W * ring4``.
    """

    family: ClassVar[str] = "dsv4-ratio-only"
    sglang_configurator: ClassVar[str | ByRelease[str]] = "DSV4PoolConfigurator"

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        return uses_dsv4_pools(ctx) and DSV4_RATIO_ONLY_SIZING.holds(ctx.release)

    @property
    def swa_ratio(self) -> float:
        """The operator's ``swa_full_tokens_ratio``, else the launch's 0.1 (:data:`DSV4_LAUNCH_SETS_SWA_RATIO`;
        without that launch, the server argument's fallback 0.8 would be read)."""
        given = self.ctx.scheduling.swa_full_tokens_ratio
        if given is not None:
            return given
        launch_set = DSV4_LAUNCH_SETS_SWA_RATIO.holds(self.ctx.release)
        return DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO if launch_set else SERVER_ARGS_SWA_FULL_TOKENS_RATIO

    @cached_property
    def swa_cap_tokens(self) -> int | None:
        """No cap mode: the SWA pool always follows the full pool at ``swa_ratio``."""
        return None

    @property
    def kv_bytes(self) -> int:
        """``nope + 2 * rope + 8`` (584) for every backend."""
        return self.dsv4.qk_nope_head_dim + self.dsv4.qk_rope_head_dim * 2 + 8

    def paged(self, ratio: int) -> float:
        """Rows are priced unpadded: ``kv_bytes`` per token for every ratio."""
        return float(self.kv_bytes)

    @property
    def c4_state_per_token(self) -> float:
        """``ring4 / W``: the c4 compression state is kept per sliding window of SWA tokens."""
        return self.ring_sizes.get(4, 0) / self.window

    @cached_property
    def priced_layers(self) -> tuple[int, int, int]:
        """``(T, n4, n128)`` the cost model counts: this stage's layers (:data:`DSV4_PRICES_STAGE_LAYERS`); up to
        0.5.12 every entry of ``compress_ratios`` (all stages, and the MTP layer's trailing entry: V4-Flash 44)."""
        if DSV4_PRICES_STAGE_LAYERS.holds(self.ctx.release):
            return self.num_layers_total, self.n(4), self.n(128)
        ratios = self.dsv4.compress_ratios
        return len(ratios), ratios.count(4), ratios.count(128)

    @property
    def draft_inflation(self) -> float:
        """``(T + 1) / T`` over :attr:`priced_layers`' ``T``."""
        total = self.priced_layers[0]
        return (total + 1) / total

    @property
    def c128_state_per_swa_token(self) -> bool:
        """Whether the ratio-128 state lives per SWA window (:data:`DSV4_C128_STATE_PER_SWA_TOKEN`), not per request."""
        return DSV4_C128_STATE_PER_SWA_TOKEN.holds(self.ctx.release)

    @cached_property
    def base_bytes_per_swa_token(self) -> float:
        """As the current sizing, plus (0.5.14) ``(ring128 / W) * 2 * hd * es * n(128)``: the ratio-128 state per SWA
        token. Flash, no speculative decoding, fp32 state: ``128/128 * 2,048 * 20 = 40,960`` B more."""
        base = super().base_bytes_per_swa_token
        if not self.c128_state_per_swa_token:
            return base
        c128_state_bytes = 2 * self.head_dim * self.state_dtype.itemsize
        return base + self.ring_sizes.get(128, 0) / self.window * c128_state_bytes * self.n(128)

    @cached_property
    def base_bytes_per_full_token(self) -> float:
        """0.5.14: SGLang's seven terms in its own order (float for float)::

            r*kv*T + kv*n4/4 + kv*n128/128 + idx*n4/4 + r*(ring4/W)*st4*n4 + r*(ring128/W)*st128*n128
            + r*(ring4/W)*sti4*n4

        with ``st4 = 4 * hd * es``, ``st128 = 2 * hd * es``, ``sti4 = 4 * idx_hd * es``; later releases as today.
        """
        if not self.c128_state_per_swa_token:
            return super().base_bytes_per_full_token
        r, kv, es, hd = self.swa_ratio, self.kv_bytes, self.state_dtype.itemsize, self.head_dim
        total, n4, n128 = self.priced_layers
        c4_rows, c128_rows = self.ring_sizes.get(4, 0) / self.window, self.ring_sizes.get(128, 0) / self.window
        return (
            r * kv * total
            + 1 / (4 * 1) * kv * n4
            + 1 / 128 * kv * n128
            + 1 / 4 * self.indexer_bytes_per_token * n4
            + r * c4_rows * (2 * 2 * hd * es) * n4
            + r * c128_rows * (2 * hd * es) * n128
            + r * c4_rows * (2 * 2 * self.dsv4.index_head_dim * es) * n4
        )

    def c128_state_fixed_bytes(self, requests: int) -> int:
        """0 where the ratio-128 state is priced per SWA token (0.5.14), else request-scoped as today."""
        return 0 if self.c128_state_per_swa_token else super().c128_state_fixed_bytes(requests)

    def sizes_for_full_tokens(self, full_tokens: int, page_size: int) -> PoolSizes:
        """As the current sizing, with ``c4_state = swa // W * ring4`` (0.5.14: ``c128_state = swa // W * ring128``)."""
        sizes = super().sizes_for_full_tokens(full_tokens, page_size)
        swa = sizes.swa_max_total_num_tokens or 0
        sizes = sizes.replace(c4_state_pool_size=swa // self.window * self.ring_sizes.get(4, 0))
        if self.c128_state_per_swa_token:
            sizes = sizes.replace(c128_state_pool_size=swa // self.window * self.ring_sizes.get(128, 0))
        return sizes

    def finalize_with_max_running_requests(self, sizes: PoolSizes) -> PoolSizes:
        """The request-scoped ratio-128 state (0.5.15 on); 0.5.14 has no such step: its sizes are final."""
        if self.c128_state_per_swa_token and not self.ctx.is_draft_worker:
            return sizes
        return super().finalize_with_max_running_requests(sizes)
