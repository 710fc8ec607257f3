"""``HybridLinearPoolConfigurator``: Mamba2 / GDN / Mamba-1 / KDA hybrids (DefaultPoolConfigurator,
KVCacheConfigurator._handle_max_mamba_cache).

Qwen3-Next, Qwen3.5, Nemotron-H, Falcon-H1, Jamba and Kimi-Linear keep softmax-attention KV on
some layers and a fixed-size recurrent state per request on the others. SGLang has no
configurator for them: the KV numbers are exactly Default's over this rank's *full-attention*
layers (DefaultPoolConfigurator.__init__, DefaultPoolConfigurator.calculate_pool_sizes), and the Mamba state is taken
out of the budget earlier, while profiling (KVCacheConfigurator._handle_max_mamba_cache). This class does both, in that
order.

Cost model (two steps). State first, in SGLang's GiB floats on ``rest = available / 2**30``:
``K`` state slots (branch A: given, B: ``max_running_requests`` without radix cache, C: the
``r / (1 + r)`` share of ``rest``, ``r = mamba_full_memory_ratio``), then
``kv_available = int((rest - (K + 1) * stage_per_req / 2**30 [- spec scratch]) * 2**30)``.
KV second, Default's :attr:`~DefaultPoolConfigurator.cost`: ``T = align(kv_available // cell, P)`` with
``cell = H * (D + Dv) * L_full * kv`` (MLA: ``latent * L_full * kv``).
Requests: Default's estimate, capped by ``K // mamba_ratio`` (KVCacheConfigurator.resolve_max_num_reqs).

Contract (as for every strategy, :meth:`~kvstrategies.strategies.base.PoolConfigurator.reserve_state_bytes`):
``available_bytes`` is what SGLang hands ``calculate_pool_sizes``, the Mamba reservation already out of it.
:meth:`reserve_state_bytes` therefore only fixes the slot count ``K``: given
(``max_mamba_cache_size``, branch A), ``max_running_requests`` without radix cache (B), or, when
neither fixes it, the ``K`` SGLang's auto-fit (C) picks for the *smallest* pre-reservation budget
``R`` whose reservation leaves exactly ``available_bytes`` (the inverse of KVCacheConfigurator._handle_max_mamba_cache,
found by ``R += available - left(R)`` from ``R = available``: ``left`` grows at most one byte per byte of
``R``, so the walk never steps over a solution; about ten steps). A planner that starts from the
pre-reservation ``rest`` (``--gpu``) runs the forward direction, :meth:`reserve_before_kv`.

Other decisions, where SGLang offers nothing to follow:
* Jamba: SGLang serves it only through its generic path (no Mamba-ish config: every layer priced and
  built as attention KV, no state); it is not sized here but by the default strategy, as SGLang does
  (``strategies.checks.uses_mamba_pools``).
* Draft workers (MTP over a hybrid target): the KV pool holds one layer (``[0]``,
  KVCacheConfigurator._build_token_to_kv_pool), no state is reserved and no Mamba pool is described:
  the draft shares the target's request pool and its Mamba state.
* ReplaySSM, the int8 checkpoint pool and unified memory are out of scope. On NPU the full
  sub-pool is ``NPUMHATokenToKVPool`` / ``NPUMLATokenToKVPool`` (``kvstrategies.pools.ascend``)
  and the conv state takes the NPU layout (mamba_utils state shapes); FP4 / MXFP8 KV are rejected there.
* PD decode role: ``HybridMambaDecodeReqToTokenPool`` widens the request rows (and the Mamba
  index mapping) by ``pre_alloc``; the Mamba pool keeps ``max_mamba_cache_size`` slots and
  ``R`` speculative slots, as HybridReqToTokenPool states.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar

from ..context import DeviceKind, DisaggregationMode, KVCacheContext, SpecAlgorithm
from ..core.dtypes import DType, KVRecipe
from ..core.releases import ReleaseRule, span
from ..core.sizing import PoolSizes
from ..errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from ..models.architectures import LinearAttention
from ..models.mamba import STATE_DTYPES, MambaGeometry, MambaStateShapes
from ..pools.ascend import npu_mha_layout, npu_mla_layout
from ..pools.basic import FUSED_KV_STORAGE, REQ_GENERATION_COUNTER, REQ_PADDING_ROW, mha_layout
from ..pools.layout import PoolLayout
from ..pools.mamba import hybrid_linear_kv_layout, hybrid_req_to_token_layout, mamba_pool_layout
from .base import StateReservation
from .checks import uses_mamba_pools
from .default import ZERO_KV_STAGE_TOKENS, DefaultPoolConfigurator
from .request_math import req_to_token_max_context_len, req_to_token_pre_alloc

GIB = 1 << 30

#: ``--mamba-radix-cache-strategy`` values sizing understands (``auto`` is resolved at launch;
#: left unresolved it means no extra buffer, as for Jamba, overrides._mamba_radix_cache_resolution)
RADIX_STRATEGIES = (None, "auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")


@dataclass(frozen=True)
class MambaBudget:
    """What KVCacheConfigurator._handle_max_mamba_cache decided for one rank (bytes ints, GiB floats as SGLang keeps
    them)."""

    branch: str  # "A" (given size), "B" (radix off + max_running_requests), "C" (auto-fit)
    max_mamba_cache_size: int
    mamba_ratio: int
    mamba_cache_per_req: int  # all Mamba layers of the model
    stage_mamba_cache_per_req: int  # PP-scaled (equals the above when pp == 1)
    spec_scratch_gib: float  # speculative per-draft-token state taken from rest (0.0 without)
    rest_gib_before: float
    rest_gib_after: float

    @property
    def kv_available_bytes(self) -> int:
        return int(self.rest_gib_after * GIB)

    @property
    def state_bytes(self) -> int:
        """``(K + 1) * stage_per_req``: the persistent state pool (slot 0 is the dummy slot)."""
        return (self.max_mamba_cache_size + 1) * self.stage_mamba_cache_per_req


#: the reservation prices the Mamba pool's padding slot (slot 0) in the state and speculative terms
MAMBA_PRICES_PADDING_SLOT = ReleaseRule(
    "mamba-prices-padding-slot",
    span("0.5.17"),
    "Mamba reservation: (K + 1) slots and (capped + 1) draft rows (before: K and capped)",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache",
)
#: the per-replica request count of the Mamba reservation is at least 1 (``max(1, mrr // dp)``): fewer
#: requests than attention-DP replicas still leave one slot; before, ``mrr // dp`` (0 slots: SGLang refuses
#: "state cache is too small to serve any requests")
MAMBA_REQUESTS_AT_LEAST_ONE = ReleaseRule(
    "mamba-requests-at-least-one",
    span("0.5.23"),
    "Mamba reservation: max(1, max_running_requests // attn_dp) requests a replica (before: mrr // attn_dp)",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache",
)
#: the speculative per-draft-token state is solved jointly with the slots it serves (``min(mrr // dp, K // ratio)``
#: rows); before, ``mrr // dp`` rows of it come off the budget first, then the slots are split from the rest
MAMBA_SPEC_STATE_JOINT = ReleaseRule(
    "mamba-spec-state-joint",
    span("0.5.13"),
    "Mamba reservation with speculation: the draft-token state is solved with the slots (K * per * (1 + D / ratio) "
    "= budget; min(mrr // dp, K // ratio) draft rows); before: mrr // dp draft rows reserved first, then K from the "
    "ratio split of what is left",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.handle_max_mamba_cache",
)
#: under PP each stage reserves the largest stage's share of the Mamba layers (before: all of them)
MAMBA_STAGE_SHARE = ReleaseRule(
    "mamba-stage-share",
    span("0.5.17"),
    "Mamba reservation under PP: per-request bytes scaled to the largest stage's Mamba layers",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache (pp_layer_scale)",
)
#: the speculative conv-intermediate buffer of a linear draft chain on CUDA shares the window between
#: consecutive draft tokens (one allocation of ``K - 1 + D`` columns viewed per token); before, every
#: draft token holds its own dense window
CONV_WINDOW_DEDUP = ReleaseRule(
    "mamba-conv-window-dedup",
    span("0.5.14"),
    "speculative Mamba conv window: one shared K - 1 + D column buffer viewed per draft token on CUDA with "
    "topk <= 1 (before: a dense window per draft token)",
    "sglang.srt.mem_cache.memory_pool.conv_window_dedup_enabled, MambaPool.__init__",
)
#: the extra buffer's row -> ping-pong slot mapping is int64; before, int32
MAMBA_PING_PONG_INT64 = ReleaseRule(
    "mamba-ping-pong-int64",
    span("0.5.13"),
    "req_index_to_mamba_ping_pong_track_buffer_mapping is int64 (before: int32)",
    "sglang.srt.mem_cache.memory_pool.HybridReqToTokenPool.__init__",
)
#: the Mamba pool's free-slot list lives on the host; before, it is a device tensor of ``size`` int64 slot indices
MAMBA_FREE_SLOTS_ON_HOST = ReleaseRule(
    "mamba-free-slots-on-host",
    span("0.5.13"),
    "MambaPool's free slots are a host list (before: a device int64 tensor torch.arange(1, size + 1))",
    "sglang.srt.mem_cache.memory_pool.MambaPool.__init__ (free_slots)",
)
#: KDA (Kimi-Linear) keeps the dense per-draft-token conv window: its conv tuples read
#: ``(K - 1, channels)``, so the shared-window view would alias the channel axis (before: deduplicated
#: like every CUDA linear chain, over the tuple's second axis, which is KDA's channel axis)
KDA_DENSE_CONV_WINDOW = ReleaseRule(
    "kda-dense-conv-window",
    span("0.5.16"),
    "KDA's speculative conv window is dense (before: the shared-window layout over the tuple's second axis)",
    "sglang.srt.mem_cache.memory_pool.conv_window_dedup_enabled (is_kda)",
)
#: a PD prefill role's Mamba pool allocates no per-draft-token state (it never runs target verify)
MAMBA_PD_PREFILL_POOL_SKIPS_SPEC = ReleaseRule(
    "mamba-pd-prefill-pool-skips-spec",
    span("0.5.18"),
    "the Mamba pool of a PD prefill role holds no speculative (per-draft-token) state",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._build_req_to_token_pool",
)
#: the PD prefill role's reservation skips the per-draft-token state its pool never allocates
#: (before: reserved anyway, so fewer state slots fit)
MAMBA_PD_PREFILL_BUDGET_SKIPS_SPEC = ReleaseRule(
    "mamba-pd-prefill-budget-skips-spec",
    span("0.5.22"),
    "Mamba reservation in the PD prefill role prices no speculative state",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache "
    "(_pd_prefill_skips_mamba_spec_state)",
)
#: the row -> Mamba-slot mappings have one entry per request row; before, one per Mamba slot
MAMBA_MAPPING_BY_REQUEST_ROWS = ReleaseRule(
    "mamba-mapping-by-request-rows",
    span("0.5.11"),
    "HybridReqToTokenPool sizes req_index_to_mamba_index_mapping (and the ping-pong mapping) by the request "
    "rows (before: by the Mamba slot count it is handed)",
    "sglang.srt.mem_cache.memory_pool.HybridReqToTokenPool._init_mamba_pool",
)
#: the Mamba pool holds this pipeline stage's Mamba layers; before, every Mamba layer of the model
MAMBA_POOL_STAGE_LAYERS = ReleaseRule(
    "mamba-pool-stage-layers",
    span("0.5.10"),
    "the Mamba pool holds the stage's Mamba layers (before: every Mamba layer of the model, whatever the stage)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._init_pools (mamba_layer_ids; "
    "before: init_memory_pool, HybridReqToTokenPool without mamba_layer_ids)",
)
#: the profiled cell prices the stage's full-attention layers; before, every full-attention layer of the model
MAMBA_PROFILE_STAGE_LAYERS = ReleaseRule(
    "mamba-profile-stage-layers",
    span("0.5.8"),
    "a Mamba hybrid's KV cell prices the stage's full-attention layers (before: every full-attention layer of the "
    "model, whatever the pipeline stage)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.profile_max_num_token",
)
#: the PD decode role's Mamba pool is sized from the reserved slots; before, it is its request rows
MAMBA_DECODE_SLOTS_FROM_RESERVE = ReleaseRule(
    "mamba-decode-slots-from-reserve",
    span("0.5.9"),
    "PD decode Mamba slots follow the reserved slots K (before: the request rows R + pre_alloc, K ignored)",
    "sglang.srt.disaggregation.decode.HybridMambaDecodeReqToTokenPool.__init__",
)
#: the hybrid linear KV pool holds this stage's full-attention layers; before, every one of the model
HYBRID_LINEAR_KV_STAGE_LAYERS = ReleaseRule(
    "hybrid-linear-kv-stage-layers",
    span("0.5.9"),
    "HybridLinearKVPool holds the stage's full-attention layers (before: every full-attention layer of the model)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool "
    "(full_attention_layer_ids)",
)
#: the PD decode role's Mamba pool is capped at its rows; before, the reserved slots plus the pre-allocated rows
MAMBA_DECODE_SLOTS_CAPPED = ReleaseRule(
    "mamba-decode-slots-capped",
    span("0.5.10"),
    "PD decode Mamba slots: min(K, R + pre_alloc) (before: K + pre_alloc)",
    "sglang.srt.disaggregation.decode.HybridMambaDecodeReqToTokenPool.__init__",
)
#: the extra buffer's ping-pong slots follow the overlap scheduler; before, speculative decoding
MAMBA_TRACKING_BY_OVERLAP = ReleaseRule(
    "mamba-tracking-by-overlap",
    span("0.5.10"),
    "the Mamba extra buffer keeps 2 ping-pong slots a request under the overlap scheduler, else 1 (before: 2 "
    "without speculative decoding, else 1)",
    "sglang.srt.mem_cache.memory_pool.HybridReqToTokenPool.__init__; "
    "model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._calculate_mamba_ratio (before: init_memory_pool)",
)
#: the SSM state dtype is the variable's, else the config's; before, ``--mamba-ssm-dtype`` (default float32) is written
#: over the variable at launch and the config is not read
MAMBA_SSM_DTYPE_FROM_CONFIG = ReleaseRule(
    "mamba-ssm-dtype-from-config",
    span("0.5.9"),
    "the Mamba SSM state dtype is SGLANG_MAMBA_SSM_DTYPE, else the config's mamba_ssm_dtype, else float32 (before: "
    "--mamba-ssm-dtype, default float32, written over the variable; the config is not read)",
    "sglang.srt.configs.mamba_utils.mamba2_state_dtype; server_args.ServerArgs._handle_environment_variables",
)
#: a radix-cache request counts extra Mamba slots (0.5.7: 2, 1 with the extra buffer under speculation); before, 3
MAMBA_RATIO_EXTRA_SLOTS = ReleaseRule(
    "mamba-ratio-extra-slots",
    span("0.5.7"),
    "a radix-cache Mamba request counts extra slots beyond MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3 (before: 3)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool (additional_ratio; "
    "0.5.6: ModelRunner.init_memory_pool)",
)
#: the per-draft-token state is reserved apart from the slots; before, every slot carries ``1 + D`` states: the slots
#: are ``raw // per // (1 + D)``, the reservation ``slots x per x (1 + D)``, and a given --max-mamba-cache-size counts
#: only without the radix cache (the ratio branch overwrites it); only a GDN model divides its slots by attention DP
MAMBA_SPEC_STATE_APART = ReleaseRule(
    "mamba-spec-state-apart",
    span("0.5.7"),
    "the Mamba speculative state is reserved apart from the slots, and --max-mamba-cache-size is honoured with the "
    "radix cache on (before: slots = raw // per // (1 + D) x per x (1 + D) reserved, the given size only without the "
    "radix cache, attention DP divides the slots of GDN models only)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.handle_max_mamba_cache "
    "(0.5.6: ModelRunner.handle_max_mamba_cache)",
)
#: the per-draft-token Mamba state has a row per request; before, a row per Mamba slot (MambaPool without
#: ``spec_state_size``)
MAMBA_SPEC_STATE_BY_REQUESTS = ReleaseRule(
    "mamba-spec-state-by-requests",
    span("0.5.7"),
    "the Mamba pool's per-draft-token state (intermediate_ssm / intermediate_conv_window) has R + 1 rows (before: "
    "one per Mamba slot, K + 1)",
    "sglang.srt.mem_cache.memory_pool.MambaPool.__init__ (mamba_spec_state_size; 0.5.6: size)",
)
#: every Mamba family keeps its conv states as a list (``conv[i]``); before, one tensor but for KDA
MAMBA_CONV_STATE_LIST = ReleaseRule(
    "mamba-conv-state-list",
    span("0.5.6"),
    "MambaPool keeps the conv states as a list for every family (before: one conv tensor, a list for KDA only)",
    "sglang.srt.mem_cache.memory_pool.MambaPool.__init__ (conv_state)",
)
#: the request cap counts the extra buffer's slots only where the extra buffer is on; before, every radix-cache
#: request also counts 2 (1 with the extra buffer under speculative decoding), whatever the strategy
MAMBA_RATIO_EXTRA_WITH_BUFFER = ReleaseRule(
    "mamba-ratio-extra-with-buffer",
    span("0.5.8"),
    "a Mamba request counts the extra buffer's slots only with the extra buffer on (before: 3 + 2 a request, 3 + 1 "
    "with the extra buffer under speculative decoding, whatever the strategy)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool (additional_ratio)",
)
#: the per-draft-token Mamba state is reserved whatever sets the slot count, for ``max_running_requests // dp`` rows;
#: before, only where the slots follow from the memory ratio (radix cache on, no --max-mamba-cache-size), for
#: ``max_running_requests`` rows
MAMBA_SPEC_RESERVE_EVERY_BRANCH = ReleaseRule(
    "mamba-spec-reserve-every-branch",
    span("0.5.8"),
    "the Mamba speculative state is reserved on every branch, for max_running_requests // dp rows (before: only on "
    "the memory-ratio branch, for max_running_requests rows)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.handle_max_mamba_cache",
)
#: a KDA layer's q, k and v conv states are one tensor; before, three (the same bytes)
KDA_FUSED_CONV_STATE = ReleaseRule(
    "kda-fused-conv-state",
    span("0.5.10"),
    "a KDA layer's q / k / v conv states are one (K - 1, proj + 2 proj_k) tensor (before: three tensors)",
    "sglang.srt.configs.mamba_utils.KimiLinearStateShape.create",
)
#: with speculation and attention DP the request pool is also capped at ``--max-running-requests // dp``
MAMBA_SPEC_DP_REQUEST_CAP = ReleaseRule(
    "mamba-spec-dp-request-cap",
    span("0.5.8", "0.5.9"),
    "a Mamba hybrid with speculative decoding and attention DP caps its request pool at max_running_requests // dp",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool",
)
#: the PD decode role's Mamba pool covers every request row with its tracking slots,
#: ``max(K, (R + pre_alloc) * (1 + tracking))``; before, it is capped at the rows, ``min(K, R + pre_alloc)``
MAMBA_DECODE_SLOTS_COVER_ROWS = ReleaseRule(
    "mamba-decode-slots-cover-rows",
    span("0.5.11"),
    "PD decode Mamba slots: max(K, (R + pre_alloc) * (1 + tracking slots)) (before: min(K, R + pre_alloc))",
    "sglang.srt.disaggregation.decode.HybridMambaDecodeReqToTokenPool.__init__",
)


#: the Mamba slots follow the memory ratio with the radix cache on (0.5.4: ``handle_max_mamba_cache``, Mamba2 cache
#: params); before, ``ModelRunner.__init__`` turns the radix cache off for every hybrid it serves (Qwen3-Next,
#: Falcon-H1) and fixes the slots at --max-mamba-cache-size, else --max-running-requests, else 512, divided by the
#: DP width under DP attention; ``profile_max_num_token`` reserves ``slots x per`` (no speculative state), the
#: request pool is ``min(R, slots)`` and the Mamba pool (single conv tensor) has a slot per request row
MAMBA_RATIO_SPLIT = ReleaseRule(
    "mamba-ratio-split",
    span("0.5.4"),
    "Mamba slots from --mamba-full-memory-ratio with the radix cache on (before: radix cache off for every Mamba "
    "hybrid; slots = --max-mamba-cache-size, else --max-running-requests, else 512, over the DP width; slots x per "
    "reserved, no speculative state; the request pool min(R, slots) and the Mamba pool a slot per request row)",
    "sglang.srt.model_executor.model_runner.ModelRunner.handle_max_mamba_cache (before: ModelRunner.__init__, "
    "profile_max_num_token, init_memory_pool)",
)
#: the full-attention sub-pool of ``HybridLinearKVPool`` is built with the KV page (``size + page`` rows); before, with
#: page 1 (``size + 1`` rows, the page being the allocator's only)
HYBRID_LINEAR_KV_PAGED = ReleaseRule(
    "hybrid-linear-kv-paged",
    span("0.5.3"),
    "HybridLinearKVPool builds its full-attention pool with the KV page (before: page 1, so size + 1 rows)",
    "sglang.srt.mem_cache.memory_pool.HybridLinearKVPool.__init__ (page_size)",
)
#: Falcon-H1's SSM state is ``(heads / tp, head_dim, d_state)`` (0.5.4: Mamba2StateShape); before,
#: ``(d_state, head_dim, heads / tp)`` (``FalconH1Config.hybrid_gdn_params``), the same bytes
FALCON_H1_TEMPORAL_HEADS_FIRST = ReleaseRule(
    "falcon-h1-temporal-heads-first",
    span("0.5.4"),
    "Falcon-H1's SSM state is (heads / tp, head_dim, d_state) (before: (d_state, head_dim, heads / tp))",
    "sglang.srt.configs.mamba_utils.Mamba2StateShape.create (before: FalconH1Config.hybrid_gdn_params)",
)


class HybridLinearPoolConfigurator(DefaultPoolConfigurator):
    """Default's numbers over the local full-attention layers, plus the Mamba state.

    ``available_bytes`` handed to :meth:`reserve_state_bytes` is SGLang's KV budget (reservation
    already taken); it fixes ``max_mamba_cache_size`` (see the module doc).
    :meth:`reserve_before_kv` runs KVCacheConfigurator._handle_max_mamba_cache forward on the pre-reservation budget.
    :meth:`cap_max_running_requests` then applies ``K // mamba_ratio`` (KVCacheConfigurator.resolve_max_num_reqs).
    """

    family: ClassVar[str] = "hybrid-linear"

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        return uses_mamba_pools(ctx)

    @property
    def mamba(self) -> MambaGeometry:
        mamba = self.ctx.geometry.mamba
        assert mamba is not None  # is_applicable guarantees it
        return mamba

    # ---- layers (DefaultPoolConfigurator.__init__, _build_hybrid_linear_kv_pool) -------------------------------------
    @cached_property
    def cache_layer_ids(self) -> tuple[int, ...]:
        """Global ids of this rank's softmax-attention layers; a draft worker's pool holds ``[0]``."""
        if self.ctx.is_draft_worker:
            return (0,)
        if not HYBRID_LINEAR_KV_STAGE_LAYERS.holds(self.ctx.release):
            return tuple(self.mamba.full_attention_layer_ids)
        start, end = self.layer_range
        return tuple(i for i in self.mamba.full_attention_layer_ids if start <= i < end)

    @cached_property
    def num_layers(self) -> int:
        """Local softmax-attention layers, the only layers the KV cell prices (DefaultPoolConfigurator.__init__): the
        pattern's ids inside ``[start, end)``. A draft worker's range is ``[0, n)`` of the same
        pattern (SGLang looks its MTP layers up there), so a Qwen3-Next MTP draft, whose layer 0
        is linear attention, prices none and takes the zero-KV rule (DefaultPoolConfigurator.calculate_pool_sizes),
        while its pool holds one attention layer (:attr:`cache_layer_ids`, built for the adopted target sizes).
        Up to 0.5.7 a target prices every full-attention layer of the model (:data:`MAMBA_PROFILE_STAGE_LAYERS`)."""
        if not self.ctx.is_draft_worker and not MAMBA_PROFILE_STAGE_LAYERS.holds(self.ctx.release):
            return len(self.mamba.full_attention_layer_ids)
        start, end = self.layer_range
        return sum(1 for i in self.mamba.full_attention_layer_ids if start <= i < end)

    @property
    def pool_layer_num(self) -> int:
        return len(self.cache_layer_ids)

    @cached_property
    def local_mamba_layer_ids(self) -> tuple[int, ...]:
        """Global ids of this stage's Mamba layers (the Mamba pool's layers; every Mamba layer before
        :data:`MAMBA_POOL_STAGE_LAYERS`)."""
        if not MAMBA_POOL_STAGE_LAYERS.holds(self.ctx.release):
            return tuple(self.mamba.mamba_layer_ids)
        start, end = self.layer_range
        return tuple(i for i in self.mamba.mamba_layer_ids if start <= i < end)

    @property
    def pool_page_size(self) -> int:
        """The full-attention sub-pool's page: the KV page, 1 up to 0.5.2 (:data:`HYBRID_LINEAR_KV_PAGED`)."""
        return super().pool_page_size if HYBRID_LINEAR_KV_PAGED.holds(self.ctx.release) else 1

    def zero_kv_tokens(self) -> int:
        """No local attention layer: ``2**63 - 1`` when the KV lives on another PP stage
        (DefaultPoolConfigurator.calculate_pool_sizes)."""
        self.require_zero_kv_rule()
        if self.mamba.full_attention_layer_ids and self.ctx.parallel.pp_size > 1:
            return ZERO_KV_STAGE_TOKENS
        return super().zero_kv_tokens()

    # ---- state geometry (mamba_utils mamba_cache_per_req) ---------------------------------------------------------
    @cached_property
    def state_shapes(self) -> MambaStateShapes:
        """Per-layer, per-slot shapes at the linear-attention TP size (= attention TP)."""
        fused = KDA_FUSED_CONV_STATE.holds(self.ctx.release)
        shapes = self.mamba.state_shapes(self.ctx.parallel.attn_tp_size, fused_kda_conv=fused)
        falcon = self.mamba.family == LinearAttention.FALCON_H1.value
        if falcon and not FALCON_H1_TEMPORAL_HEADS_FIRST.holds(self.ctx.release):
            heads, head_dim, state = shapes.temporal
            return replace(shapes, temporal=(state, head_dim, heads))
        return shapes

    @property
    def conv_dtype(self) -> DType:
        """``SGLANG_MAMBA_CONV_DTYPE``: bfloat16 unless float32/float16 (mamba_utils mamba_cache_per_req)."""
        dtype = self.ctx.knobs.mamba_conv_dtype
        return dtype if dtype in STATE_DTYPES else DType.BFLOAT16

    @property
    def ssm_dtype(self) -> DType:
        """``SGLANG_MAMBA_SSM_DTYPE`` when valid, else the config's ``mamba_ssm_dtype``, else float32; up to 0.5.8
        float32 always (:data:`MAMBA_SSM_DTYPE_FROM_CONFIG`: the server argument's default overwrites the variable)."""
        if not MAMBA_SSM_DTYPE_FROM_CONFIG.holds(self.ctx.release):
            return DType.FLOAT32
        knob = self.ctx.knobs.mamba_ssm_dtype
        return knob if knob in STATE_DTYPES else self.mamba.ssm_dtype

    @cached_property
    def mamba_cache_per_req(self) -> int:
        """One slot's bytes over all the model's Mamba layers."""
        return self.state_shapes.bytes_per_layer(self.conv_dtype, self.ssm_dtype) * len(self.mamba.mamba_layer_ids)

    @cached_property
    def stage_mamba_cache_per_req(self) -> int:
        """PP scaling (KVCacheConfigurator._handle_max_mamba_cache):
        ``int(per_req * (max stage Mamba layers / all Mamba layers))``."""
        pp = self.ctx.parallel.pp_size
        if pp == 1 or not MAMBA_STAGE_SHARE.holds(self.ctx.release):
            return self.mamba_cache_per_req
        ids = self.mamba.mamba_layer_ids
        largest = 0
        for rank in range(pp):
            start, end = self.ctx.parallel.layer_range(self.ctx.geometry.num_pp_layers, rank)
            largest = max(largest, sum(1 for i in ids if start <= i < end))
        scale = largest / max(len(ids), 1)
        return int(self.mamba_cache_per_req * scale)

    # ---- slots per request (KVCacheConfigurator._calculate_mamba_ratio) ----------------------------------------------
    @cached_property
    def radix_strategy(self) -> str | None:
        strategy = self.ctx.scheduling.mamba_radix_cache_strategy
        if strategy not in RADIX_STRATEGIES:
            raise KVCacheConfigError(
                f"mamba_radix_cache_strategy {strategy!r} is not one of auto, no_buffer, extra_buffer, "
                "extra_buffer_lazy"
            )
        return strategy

    @property
    def extra_buffer(self) -> bool:
        """SGLang ``enable_mamba_extra_buffer``: an extra-buffer strategy with the radix cache on."""
        return not self.ctx.scheduling.disable_radix_cache and self.radix_strategy in (
            "extra_buffer",
            "extra_buffer_lazy",
        )

    @property
    def overlap_schedule(self) -> bool:
        return not self.ctx.scheduling.disable_overlap_schedule

    @cached_property
    def mamba_ratio(self) -> int:
        """State slots per running request: 1 without radix cache, else 3 (2 with skip-lock) + extras
        (0.5.7: + 2 whatever the strategy, :data:`MAMBA_RATIO_EXTRA_WITH_BUFFER`)."""
        sched = self.ctx.scheduling
        if sched.disable_radix_cache or not MAMBA_RATIO_SPLIT.holds(self.ctx.release):  # 0.5.3: radix cache off
            return 1
        if not MAMBA_RATIO_EXTRA_SLOTS.holds(self.ctx.release):  # 0.5.6: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
            return 3
        if not MAMBA_RATIO_EXTRA_WITH_BUFFER.holds(self.ctx.release):  # 0.5.7: no skip-lock; + 2 but one case
            speculative = self.ctx.speculative.algorithm is not SpecAlgorithm.NONE
            return 3 + (1 if self.extra_buffer and speculative else 2)
        skip_lock = self.ctx.knobs.mamba_skip_decode_lock
        base = 2 if skip_lock else 3
        if self.extra_buffer and not MAMBA_TRACKING_BY_OVERLAP.holds(self.ctx.release):
            return base + self.tracking_slots  # 0.5.9: the ping-pong slots, keyed on speculation
        if self.extra_buffer:
            lazy = self.radix_strategy == "extra_buffer_lazy"
            if not self.overlap_schedule:
                if lazy:
                    raise KVCacheConfigError(
                        "mamba_radix_cache_strategy 'extra_buffer_lazy' needs the overlap scheduler; "
                        "drop disable_overlap_schedule or use 'extra_buffer'"
                    )
                return base + 1
            return base + (1 if lazy else 2)
        return base + (1 if skip_lock else 0)

    # ---- speculative state (KVCacheConfigurator._handle_max_mamba_cache) ---------------------------------------------
    @property
    def pd_prefill_skips_spec(self) -> bool:
        """A PD prefill role (off NPU) keeps no per-draft-token state (:data:`MAMBA_PD_PREFILL_POOL_SKIPS_SPEC`)."""
        prefill = self.ctx.scheduling.disaggregation_mode is DisaggregationMode.PREFILL
        skips = MAMBA_PD_PREFILL_POOL_SKIPS_SPEC.holds(self.ctx.release)
        return skips and prefill and self.ctx.device is not DeviceKind.NPU

    @property
    def reserves_spec(self) -> bool:
        """The pool holds per-draft-token state (not in the PD prefill role)."""
        return self.ctx.speculative.enabled and not self.pd_prefill_skips_spec

    @property
    def budget_reserves_spec(self) -> bool:
        """The reservation prices per-draft-token state: :attr:`reserves_spec`; before
        :data:`MAMBA_PD_PREFILL_BUDGET_SKIPS_SPEC`, also in the PD prefill role (whose pool has none)."""
        if MAMBA_PD_PREFILL_BUDGET_SKIPS_SPEC.holds(self.ctx.release):
            return self.reserves_spec
        return self.ctx.speculative.enabled

    @property
    def spec_num_draft_tokens(self) -> int | None:
        """``speculative_num_draft_tokens`` handed to the Mamba pool (None without spec state)."""
        if not self.reserves_spec:
            return None
        return self.ctx.speculative.max_num_draft_tokens

    def _spec_inputs(self) -> tuple[int, int]:
        spec = self.ctx.speculative
        mrr = self.ctx.scheduling.max_running_requests
        if spec.num_draft_tokens is None or mrr is None:
            raise KVCacheConfigError(
                f"speculative decoding ({spec.algorithm.value}) on a hybrid linear model reserves Mamba "
                "state per draft token and needs both speculative_num_draft_tokens (given "
                f"{spec.num_draft_tokens}) and max_running_requests (given {mrr}); set both"
            )
        return spec.num_draft_tokens, mrr

    # ---- the budget (KVCacheConfigurator._handle_max_mamba_cache) ----------------------------------------------------
    def mamba_budget(self, available_bytes: int) -> MambaBudget:
        """``_handle_max_mamba_cache`` on ``rest = available_bytes / 2**30`` (float order kept)."""
        if not MAMBA_SPEC_STATE_APART.holds(self.ctx.release):
            return self._slot_carried_budget(available_bytes)
        sched = self.ctx.scheduling
        rest = available_bytes / GIB
        rest_before = rest
        per = self.stage_mamba_cache_per_req
        ratio = self.mamba_ratio
        dp = self.ctx.parallel.attn_dp_size
        mrr = sched.max_running_requests
        spec_gib = 0.0
        pad = 1 if MAMBA_PRICES_PADDING_SLOT.holds(self.ctx.release) else 0  # the pool's dummy slot 0
        # SGLang asserts both inputs whenever a speculative algorithm is set, also where no per-token
        # state is reserved (PD prefill role): _handle_max_mamba_cache checks before branching
        spec_inputs = self._spec_inputs() if self.ctx.speculative.enabled else (0, 0)
        draft_tokens, spec_mrr = spec_inputs if self.budget_reserves_spec else (0, 0)
        floor = 1 if MAMBA_REQUESTS_AT_LEAST_ONE.holds(self.ctx.release) else 0  # max(floor, mrr // dp)
        joint = self.budget_reserves_spec and MAMBA_SPEC_STATE_JOINT.holds(self.ctx.release)
        every_branch = MAMBA_SPEC_RESERVE_EVERY_BRANCH.holds(self.ctx.release)
        if self.budget_reserves_spec and not joint and every_branch:
            # 0.5.8 to 0.5.12: mrr // dp draft rows first, then the branches below see only the rest
            spec_gib = per * (spec_mrr // dp) * draft_tokens / GIB
            rest -= spec_gib
        if sched.max_mamba_cache_size is not None:
            branch = "A"
            slots = sched.max_mamba_cache_size // dp
            if joint:
                capped = min(max(floor, spec_mrr // dp), slots // ratio)
                spec_gib = per * (capped + pad) * draft_tokens / GIB
                rest -= spec_gib
        elif sched.disable_radix_cache and mrr is not None:
            branch = "B"
            slots = max(floor, mrr // dp)
            if joint:
                spec_gib = per * (slots + pad) * draft_tokens / GIB
                rest -= spec_gib
        else:
            branch = "C"
            if self.budget_reserves_spec and not every_branch:  # 0.5.7: on this branch only, mrr rows (no // dp)
                spec_gib = per * spec_mrr * draft_tokens / GIB
                rest -= spec_gib
            share = sched.mamba_full_memory_ratio
            budget = rest * share / (1 + share)
            budget_bytes = budget * GIB
            if joint:
                slots = int((budget_bytes - per * (1 + draft_tokens) * pad) // (per * (1 + draft_tokens / ratio)))
                capped = min(max(floor, spec_mrr // dp), slots // ratio)
                spec_gib = per * (capped + pad) * draft_tokens / GIB
                rest -= spec_gib
            else:
                slots = int((budget_bytes - per * pad) // per)
        if slots <= 0:
            raise InsufficientMemoryError(
                "not enough memory for the hybrid (Mamba / linear-attention) state cache: "
                f"max_mamba_cache_size={slots} (rest {rest:.3f} GiB, {per / 2**20:.2f} MiB per slot). "
                "Reduce max_running_requests, raise available_bytes (--mem-fraction-static), "
                "reduce speculative_num_draft_tokens or use more TP"
            )
        rest -= (slots + pad) * per / GIB
        if rest <= 0:
            raise InsufficientMemoryError(
                f"the Mamba state ({(slots + pad) * per:,} B for {slots} slots) leaves no memory for the KV "
                "cache; lower max_mamba_cache_size / max_running_requests or raise available_bytes"
            )
        return MambaBudget(
            branch=branch,
            max_mamba_cache_size=slots,
            mamba_ratio=ratio,
            mamba_cache_per_req=self.mamba_cache_per_req,
            stage_mamba_cache_per_req=per,
            spec_scratch_gib=spec_gib,
            rest_gib_before=rest_before,
            rest_gib_after=rest,
        )

    def _slot_carried_budget(self, available_bytes: int) -> MambaBudget:
        """0.5.6's ``handle_max_mamba_cache`` (:data:`MAMBA_SPEC_STATE_APART`): every slot carries ``1 + D`` states
        (``D = --speculative-num-draft-tokens``, 0 unset). Without the radix cache (or a stateless config) the slots
        are the given size, else ``max_running_requests``, else 512; with it ``int(rest x share / (1 + share) x 2**30
        // per // (1 + D))``. A GDN model divides them by attention DP. The rest loses ``slots x per x (1 + D)``."""
        sched = self.ctx.scheduling
        rest = available_bytes / GIB
        per = self.stage_mamba_cache_per_req
        split = MAMBA_RATIO_SPLIT.holds(self.ctx.release)  # 0.5.3: no ratio, no speculative state, radix cache off
        draft = (self.ctx.speculative.num_draft_tokens or 0) if split else 0
        if sched.disable_radix_cache or per == 0 or not split:
            given = sched.max_mamba_cache_size
            branch = "A" if given is not None else "B"
            if given is not None:
                slots = given
            else:
                slots = sched.max_running_requests if sched.max_running_requests is not None else 512
        else:
            branch = "C"
            share = sched.mamba_full_memory_ratio
            slots = int(rest * share / (1 + share) * GIB // per // (1 + draft))
        if self.mamba.family == LinearAttention.GDN.value or not split:
            slots //= self.ctx.parallel.attn_dp_size
        if slots <= 0:
            raise InsufficientMemoryError(
                "not enough memory for the hybrid (Mamba / linear-attention) state cache: "
                f"max_mamba_cache_size={slots} (rest {rest:.3f} GiB, {per / 2**20:.2f} MiB per slot x {1 + draft} "
                "states). Raise available_bytes (--mem-fraction-static) or reduce speculative_num_draft_tokens"
            )
        state = slots * per * (1 + draft) / GIB
        if rest - state <= 0:
            raise InsufficientMemoryError(
                f"the Mamba state ({slots * per * (1 + draft):,} B for {slots} slots) leaves no memory for the KV "
                "cache; lower max_mamba_cache_size / max_running_requests or raise available_bytes"
            )
        return MambaBudget(
            branch=branch,
            max_mamba_cache_size=slots,
            mamba_ratio=self.mamba_ratio,
            mamba_cache_per_req=self.mamba_cache_per_req,
            stage_mamba_cache_per_req=per,
            spec_scratch_gib=slots * per * draft / GIB,
            rest_gib_before=rest,
            rest_gib_after=rest - state,
        )

    def reserve_before_kv(self, budget_bytes: int) -> StateReservation:
        """KVCacheConfigurator._handle_max_mamba_cache forward: from the budget *before* the reservation to SGLang's KV
        budget."""
        if self.ctx.is_draft_worker:
            return StateReservation(budget_bytes)
        budget = self.mamba_budget(budget_bytes)
        return StateReservation(
            kv_available_bytes=budget.kv_available_bytes,
            size_fields={"max_mamba_cache_size": budget.max_mamba_cache_size},
            notes=(self._reservation_note(budget),),
        )

    def reserve_state_bytes(self, available_bytes: int) -> StateReservation:
        """The slot count for SGLang's KV budget ``available_bytes`` (reservation already out of it)."""
        if self.ctx.is_draft_worker:
            return StateReservation(available_bytes)
        budget = self.budget_leaving(available_bytes)
        note = self._reservation_note(budget)
        if budget.branch == "C":
            note += (
                f"; max_mamba_cache_size not given: {budget.max_mamba_cache_size} slots is what SGLang's auto-fit "
                f"picks for the smallest budget ({int(budget.rest_gib_before * GIB):,} B) that leaves "
                f"available_bytes={available_bytes:,} after the reservation"
            )
        return StateReservation(
            kv_available_bytes=available_bytes,
            size_fields={"max_mamba_cache_size": budget.max_mamba_cache_size},
            notes=(note,),
        )

    def budget_leaving(self, available_bytes: int) -> MambaBudget:
        """The reservation of the smallest budget ``R >= available_bytes`` that leaves ``available_bytes``.

        ``R += available - left(R)`` from ``R = available`` (module doc). A budget too small for one
        slot moves ``R`` up by a sixteenth of the target; the walk stops at the first ``left(R) >=
        available`` (``int()`` may skip the exact byte).
        """
        rest = available_bytes
        step_floor = max(available_bytes // 16, 1 << 20)
        last_error: InsufficientMemoryError | None = None
        for _ in range(1000):
            try:
                budget = self.mamba_budget(rest)
            except InsufficientMemoryError as exc:
                last_error = exc
                rest += step_floor
                continue
            left = budget.kv_available_bytes
            if left >= available_bytes:
                return budget
            rest += available_bytes - left
        raise InsufficientMemoryError(
            f"no Mamba state reservation leaves available_bytes={available_bytes:,} "
            f"({last_error or 'the search did not converge'}); give max_mamba_cache_size explicitly"
        )

    def _reservation_note(self, budget: MambaBudget) -> str:
        note = (
            f"Mamba state reserved before KV (SGLang's Mamba budget, branch {budget.branch}): "
            f"max_mamba_cache_size={budget.max_mamba_cache_size} slots x "
            f"{budget.stage_mamba_cache_per_req:,} B (+1 dummy slot) = {budget.state_bytes:,} B"
        )
        if budget.spec_scratch_gib:
            note += f", speculative scratch {int(budget.spec_scratch_gib * GIB):,} B"
        return note

    def cap_max_running_requests(self, requests: int, sizes: PoolSizes, *, user_requests: int | None = None) -> int:
        """``min(R, max_mamba_cache_size // mamba_ratio)`` (KVCacheConfigurator.resolve_max_num_reqs)."""
        slots = sizes.max_mamba_cache_size
        if slots is None:
            return requests
        capped = min(requests, slots // self.mamba_ratio)
        spec_dp = self.ctx.speculative.algorithm is not SpecAlgorithm.NONE and self.ctx.parallel.attn_dp_size > 1
        user = self.ctx.scheduling.max_running_requests if user_requests is None else user_requests
        if spec_dp and user is not None and MAMBA_SPEC_DP_REQUEST_CAP.holds(self.ctx.release):
            capped = min(capped, user // self.ctx.parallel.attn_dp_size)
        if capped <= 0:
            raise InsufficientMemoryError(
                "the hybrid (Mamba / linear-attention) state cache is too small to serve any request: "
                f"max_mamba_cache_size={slots}, mamba_ratio={self.mamba_ratio}, max_running_requests={capped}. "
                "Raise max_mamba_cache_size or available_bytes, or disable the radix cache (ratio 1)"
            )
        return capped

    # ---- pools (KVCacheConfigurator._build_req_to_token_pool, _build_hybrid_linear_kv_pool; MambaPool,
    # HybridReqToTokenPool, HybridLinearKVPool)
    @property
    def npu(self) -> bool:
        """Ascend: NPU sub-pool classes and the NPU conv-state layout (_build_hybrid_linear_kv_pool, mamba_utils state
        shapes)."""
        return self.ctx.device is DeviceKind.NPU

    def _require_supported_device(self) -> None:
        kv = self.ctx.kv_cache_dtype
        if self.npu and (kv.is_fp4 or kv.recipe is KVRecipe.MXFP8):
            raise UnsupportedConfigurationError(
                f"kv_cache_dtype {kv.name!r} has no Ascend NPU pool (FP4 and MXFP8 KV caches are CUDA-only); "
                "use 'auto'/'bf16' or 'fp8_e4m3' on device 'npu'"
            )

    def req_to_token_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``HybridReqToTokenPool`` (``HybridMambaDecodeReqToTokenPool`` in the PD decode role)."""
        if self.ctx.is_draft_worker:
            return super().req_to_token_layout(sizes)
        requests = sizes.max_running_requests
        slots = sizes.max_mamba_cache_size
        if requests is None or slots is None:
            raise KVCacheConfigError(
                "hybrid linear sizes need max_running_requests and max_mamba_cache_size; finalise them "
                "first (kvstrategies.plan / resolve)"
            )
        decode = self.ctx.scheduling.disaggregation_mode is DisaggregationMode.DECODE
        release = self.ctx.release
        if decode and not MAMBA_RATIO_SPLIT.holds(release):  # 0.5.3: the decode role's plain request pool
            return super().req_to_token_layout(sizes)
        pre_alloc = req_to_token_pre_alloc(self.ctx, requests)
        return hybrid_req_to_token_layout(
            max_running_requests=requests,
            max_context_len=req_to_token_max_context_len(self.ctx),
            mamba_size=slots,
            pre_alloc_size=pre_alloc,
            padding_row=REQ_PADDING_ROW.holds(release),
            mapping_rows=None if MAMBA_MAPPING_BY_REQUEST_ROWS.holds(release)
            else requests if not MAMBA_RATIO_SPLIT.holds(release)
            else self.decode_mamba_slots(requests, pre_alloc, slots) if decode else slots,
            ping_pong_track_buffer_size=self.tracking_slots if self.extra_buffer else None,
            pool_class="HybridMambaDecodeReqToTokenPool" if decode else "HybridReqToTokenPool",
            generation_counter=REQ_GENERATION_COUNTER.holds(self.ctx.release),
            ping_pong_dtype=DType.INT64 if MAMBA_PING_PONG_INT64.holds(self.ctx.release) else DType.INT32,
        )

    def extra_layouts(self, sizes: PoolSizes) -> tuple[PoolLayout, ...]:
        """The ``MambaPool`` of this stage's Mamba layers (owned by the request pool in SGLang)."""
        if self.ctx.is_draft_worker:
            return ()
        decode = self.ctx.scheduling.disaggregation_mode is DisaggregationMode.DECODE
        if decode and not MAMBA_RATIO_SPLIT.holds(self.ctx.release):  # 0.5.3: DecodeReqToTokenPool holds no state
            return ()
        self._require_supported_device()
        requests = sizes.max_running_requests
        slots = sizes.max_mamba_cache_size
        if requests is None or slots is None:
            raise KVCacheConfigError("the Mamba pool needs finalised max_running_requests and max_mamba_cache_size")
        shapes = self.state_shapes
        spec = self.ctx.speculative
        cuda = self.ctx.device in (DeviceKind.CUDA, DeviceKind.META)
        dedup = cuda and (spec.eagle_topk or 1) <= 1 and CONV_WINDOW_DEDUP.holds(self.ctx.release)
        window_axis = shapes.conv_window_axis
        if dedup and self.mamba.is_kda:
            if KDA_DENSE_CONV_WINDOW.holds(self.ctx.release):
                dedup = False
            else:
                window_axis = 1  # SGLang read every conv tuple as (channels, K - 1)
        spec_state_size = requests if MAMBA_SPEC_STATE_BY_REQUESTS.holds(self.ctx.release) else slots
        if not MAMBA_RATIO_SPLIT.holds(self.ctx.release):  # 0.5.3: MambaPool(max_num_reqs), a slot per request row
            slots = spec_state_size = requests
        if self.ctx.scheduling.disaggregation_mode is DisaggregationMode.DECODE:
            # HybridMambaDecodeReqToTokenPool (SGLang disaggregation.decode): the pre-allocated rows
            # get state too; slots = max(K, (R + pre_alloc) * (1 + tracking slots))
            pre_alloc = req_to_token_pre_alloc(self.ctx, requests)
            slots = self.decode_mamba_slots(requests, pre_alloc, slots)
            spec_state_size = requests + pre_alloc
        return (
            mamba_pool_layout(
                size=slots,
                spec_state_size=spec_state_size,
                conv_shapes=shapes.conv,
                temporal_shape=shapes.temporal,
                mamba_layer_ids=self.local_mamba_layer_ids,
                conv_dtype=self.conv_dtype,
                ssm_dtype=self.ssm_dtype,
                num_draft_tokens=self.spec_num_draft_tokens,
                conv_window_dedup=dedup,
                conv_window_axis=window_axis,
                npu_conv=self.npu,
                device_free_slots=self.device_free_slots,
                single_conv=not self.mamba.is_kda and not MAMBA_CONV_STATE_LIST.holds(self.ctx.release),
            ),
        )

    @property
    def device_free_slots(self) -> bool:
        """MambaPool's free slots are a device tensor: 0.5.4 to 0.5.12 (:data:`MAMBA_FREE_SLOTS_ON_HOST`); 0.5.3 keeps a
        host list too (:data:`MAMBA_RATIO_SPLIT`)."""
        release = self.ctx.release
        return MAMBA_RATIO_SPLIT.holds(release) and not MAMBA_FREE_SLOTS_ON_HOST.holds(release)

    @property
    def tracking_slots(self) -> int:
        """The extra buffer's ping-pong slots a request: 2 under the overlap scheduler, else 1; up to 0.5.9 2
        without speculative decoding, else 1 (:data:`MAMBA_TRACKING_BY_OVERLAP`)."""
        if not MAMBA_TRACKING_BY_OVERLAP.holds(self.ctx.release):
            return 1 if self.ctx.speculative.algorithm is not SpecAlgorithm.NONE else 2
        return 2 if self.overlap_schedule else 1

    def decode_mamba_slots(self, requests: int, pre_alloc: int, slots: int) -> int:
        """The PD decode role's Mamba slots for ``requests`` plus ``pre_alloc`` pre-allocated rows and ``slots``
        reserved (HybridMambaDecodeReqToTokenPool): ``max(K, rows * (1 + tracking))`` with the extra buffer's
        tracking slots; 0.5.10 ``min(K, rows)`` (:data:`MAMBA_DECODE_SLOTS_COVER_ROWS`); 0.5.9 ``K + pre_alloc``
        (:data:`MAMBA_DECODE_SLOTS_CAPPED`); 0.5.8 the rows (:data:`MAMBA_DECODE_SLOTS_FROM_RESERVE`)."""
        rows = requests + pre_alloc
        if not MAMBA_DECODE_SLOTS_FROM_RESERVE.holds(self.ctx.release):
            return rows
        if not MAMBA_DECODE_SLOTS_CAPPED.holds(self.ctx.release):
            return slots + pre_alloc
        if not MAMBA_DECODE_SLOTS_COVER_ROWS.holds(self.ctx.release):
            return min(slots, rows)
        tracking = self.tracking_slots if self.extra_buffer else 0
        return max(slots, rows * (1 + tracking))

    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``HybridLinearKVPool``: Default's MHA / MLA pool over the full-attention layers, as ``full.``."""
        self._require_supported_device()
        if self.npu and self.ctx.geometry.dsa is None:
            return hybrid_linear_kv_layout(self.npu_full_attention_layout(sizes), self.cache_layer_ids)
        return hybrid_linear_kv_layout(super().token_to_kv_layout(sizes), self.cache_layer_ids)

    def npu_full_attention_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``_hybrid_full_attention_pool_class`` on NPU: ``NPUMLATokenToKVPool`` (nope/rope split) for
        MLA, else ``NPUMHATokenToKVPool`` with V sized by ``head_dim``; dense, no start layer
        (DefaultPoolConfigurator.__init__)."""
        geometry = self.ctx.geometry
        if geometry.use_mla:
            mla = geometry.mla
            if mla is None:
                raise KVCacheConfigError(f"{geometry.architectures} is an MLA model without MLA dims")
            return npu_mla_layout(
                size=self.pool_tokens(sizes),
                page_size=self.pool_page_size,
                kv_lora_rank=mla.kv_lora_rank,
                qk_rope_head_dim=mla.qk_rope_head_dim,
                layer_num=self.pool_layer_num,
                dtype=self.ctx.kv_cache_dtype.dtype,
            )
        return npu_mha_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            head_num=self.kv_heads,
            head_dim=geometry.head_dim,
            v_head_dim=geometry.head_dim,
            layer_num=self.pool_layer_num,
            store_dtype=self.mha_store_dtype(),
        )

    def mla_fp4_layout(self, sizes: PoolSizes) -> PoolLayout:
        """FP4 on an MLA hybrid: the plain MLA class in the FP4 dtype (_build_hybrid_linear_kv_pool).

        SGLang's ``_hybrid_full_attention_pool_class`` has no MLA-FP4 entry, so the sub-pool keeps
        full 576-wide rows of 1-byte elements while the Default cell prices the packed FP4 row.
        """
        return self.mla_layout(sizes)

    def dsa_skip_topk_layers(self) -> tuple[bool, ...] | None:
        """Skip flags per full-attention layer id (target), None for a draft (_build_hybrid_linear_kv_pool)."""
        dsa = self.ctx.geometry.dsa
        assert dsa is not None
        if not self.index_k_elision:
            return None
        return tuple(dsa.skips_topk(layer) for layer in self.cache_layer_ids)

    def mha_layout(self, sizes: PoolSizes) -> PoolLayout:
        """The MHA sub-pool; SGLang passes it no ``v_head_dim``, so V is sized with ``head_dim``."""
        geometry = self.ctx.geometry
        recipe = self.fp4_applies or self.ctx.kv_cache_dtype.recipe is not KVRecipe.NONE
        if geometry.head_dim == geometry.v_head_dim or recipe:
            # FP4 recipes size V with head_dim anyway; MXFP8 with D != Dv keeps Default's layout
            return super().mha_layout(sizes)
        # SGLang (HybridLinearKVPool): HybridLinearKVPool drops v_head_dim; the cell still prices D + Dv
        return mha_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            head_num=self.kv_heads,
            head_dim=geometry.head_dim,
            v_head_dim=geometry.head_dim,
            layer_num=self.pool_layer_num,
            store_dtype=self.mha_store_dtype(),
            fused=FUSED_KV_STORAGE.holds(self.ctx.release),
        )
