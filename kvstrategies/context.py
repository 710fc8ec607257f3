"""What a strategy may read: the narrow :class:`KVCacheContext` protocol and its dataclass.

A strategy never sees an engine object. It sees the model's geometry, the parallel layout of
this rank, the speculative setup, the resolved KV dtype, the page size, the device and a few
scheduler/kernel settings (docs/maintainers.md, "Sizing flow", minus the out-of-scope flags). SGLang reads
many of these from environment variables; here they are explicit fields
(:class:`EngineKnobs`), filled by the case loader or the caller.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields, replace
from typing import Protocol, runtime_checkable

from .core.dtypes import DType, KVCacheDtype
from .core.releases import NEWEST_SGLANG, SGLANG, SGLANG_TRANSFORMERS, EngineRelease, ReleaseRule, parse_release, span
from .core.validate import (
    MAX_INT64,
    MAX_LAYERS,
    MAX_MEMORY_RATIO,
    MAX_PAGE_SIZE,
    check_bool,
    check_float,
    check_instance,
    check_int,
    check_opt_int,
    check_opt_str,
    finite_float,
    shown,
)
from .errors import KVCacheConfigError
from .models.geometry import ModelGeometry

#: the largest parallel group size accepted (SGLang deployments go to a few hundred ranks)
MAX_PARALLEL_SIZE = 2**16


class DeviceKind(enum.Enum):
    """Where the pools live; NPU selects the Ascend layouts."""

    CUDA = "cuda"
    HIP = "hip"
    NPU = "npu"
    CPU = "cpu"
    META = "meta"

    @classmethod
    def parse(cls, device: str) -> DeviceKind:
        """``"cuda"``, ``"cuda:1"``, ``"npu:0"``, ``"cpu"``, ``"meta"``, ``"hip"``."""
        head = str(device).strip().lower().split(":", 1)[0]
        for member in cls:
            if member.value == head:
                return member
        raise KVCacheConfigError(
            f"device {device!r} is not one of cuda, npu, hip, cpu, meta (optionally ':N')"
        )


class SpecAlgorithm(enum.Enum):
    """SGLang's ``--speculative-algorithm`` values that sizing distinguishes."""

    NONE = "NONE"
    EAGLE = "EAGLE"
    EAGLE3 = "EAGLE3"
    FROZEN_KV_MTP = "FROZEN_KV_MTP"
    STANDALONE = "STANDALONE"
    DFLASH = "DFLASH"
    DSPARK = "DSPARK"
    NGRAM = "NGRAM"
    UNO = "UNO"

    @classmethod
    def parse(cls, name: str | None) -> SpecAlgorithm:
        if name is None:
            return cls.NONE
        key = str(name).strip().upper()
        if key == "NEXTN":  # SGLang accepts NEXTN as an alias of EAGLE
            key = "EAGLE"
        for member in cls:
            if member.value == key:
                return member
        allowed = ", ".join(m.value for m in cls)
        raise KVCacheConfigError(f"unknown speculative_algorithm {name!r}; use one of: {allowed}")

    @property
    def is_eagle_family(self) -> bool:
        """EAGLE, EAGLE3, FROZEN_KV_MTP (counted as EAGLE in 0.5.23) and STANDALONE (DefaultPoolConfigurator.__init__
        draft scaling)."""
        return self in (
            SpecAlgorithm.EAGLE,
            SpecAlgorithm.EAGLE3,
            SpecAlgorithm.FROZEN_KV_MTP,
            SpecAlgorithm.STANDALONE,
        )

    @property
    def is_dflash_family(self) -> bool:
        return self in (SpecAlgorithm.DFLASH, SpecAlgorithm.DSPARK)


@dataclass(frozen=True)
class ParallelLayout:
    """This rank's place in the parallel layout.

    ``attn_tp_size = tp_size // attn_dp_size // attn_cp_size`` (ModelConfig.get_num_kv_heads); the stage's layer
    range follows SGLang's ``get_pp_indices`` (sglang.srt.distributed.utils.get_pp_indices): the *last* ``n % pp``
    stages get one extra layer, unless an explicit ``pp_layer_partition`` is given.
    """

    tp_size: int = 1
    pp_size: int = 1
    pp_rank: int = 0
    dcp_size: int = 1
    attn_dp_size: int = 1
    attn_cp_size: int = 1
    pp_layer_partition: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("tp_size", "pp_size", "dcp_size", "attn_dp_size", "attn_cp_size"):
            check_int(getattr(self, name), name, minimum=1, maximum=MAX_PARALLEL_SIZE)
        if self.pp_layer_partition is not None:
            parts = self.pp_layer_partition
            if not isinstance(parts, tuple) or not parts:
                raise KVCacheConfigError(
                    f"pp_layer_partition must be a non-empty tuple of layer counts, got {parts!r}"
                )
            for i, part in enumerate(parts):
                check_int(part, f"pp_layer_partition[{i}]", minimum=0, fix="give each stage's layer count")
        if isinstance(self.pp_rank, bool) or not isinstance(self.pp_rank, int) or not 0 <= self.pp_rank < self.pp_size:
            raise KVCacheConfigError(
                f"pp_rank {self.pp_rank!r} is out of range for pp_size {self.pp_size}; "
                f"use 0..{self.pp_size - 1}"
            )
        if self.tp_size % (self.attn_dp_size * self.attn_cp_size):
            raise KVCacheConfigError(
                f"tp_size {self.tp_size} is not divisible by attn_dp_size x attn_cp_size "
                f"({self.attn_dp_size} x {self.attn_cp_size}); pick a tp_size that is"
            )
        if self.attn_tp_size % self.dcp_size:
            raise KVCacheConfigError(
                f"attention TP size {self.attn_tp_size} is not divisible by dcp_size "
                f"{self.dcp_size}; DCP splits the attention TP group, pick a divisor"
            )

    @property
    def attn_tp_size(self) -> int:
        """Attention tensor-parallel size: ``tp // attn_dp // attn_cp``."""
        return self.tp_size // self.attn_dp_size // self.attn_cp_size

    def layer_range(
        self, num_layers: int, pp_rank: int | None = None, *, last_takes_rest: bool = False
    ) -> tuple[int, int]:
        """``[start, end)`` of the stage's global layers (SGLang ``get_pp_indices``): the last ``num_layers % pp``
        stages take one more layer; with ``last_takes_rest`` (up to SGLang 0.5.5) every stage takes
        ``num_layers // pp`` and the last one the rest."""
        rank = self.pp_rank if pp_rank is None else pp_rank
        pp = self.pp_size
        if self.pp_layer_partition is not None and pp > 1:
            parts = self.pp_layer_partition
            if len(parts) != pp or sum(parts) != num_layers:
                raise KVCacheConfigError(
                    f"pp_layer_partition {list(parts)} must have pp_size={pp} entries summing to "
                    f"the model's {num_layers} layers"
                )
            start = sum(parts[:rank])
            return start, start + parts[rank]
        if num_layers < pp:
            raise KVCacheConfigError(
                f"pp_size {pp} exceeds the model's {num_layers} layers; use pp_size <= {num_layers}"
            )
        base, rem = divmod(num_layers, pp)
        if last_takes_rest:
            return rank * base, num_layers if rank == pp - 1 else rank * base + base
        if rank >= pp - rem:
            start = rank * (base + 1) - (pp - rem)
            return start, start + base + 1
        return rank * base, rank * base + base

    def at_pp_rank(self, rank: int) -> ParallelLayout:
        return replace(self, pp_rank=rank)


@dataclass(frozen=True)
class SpeculativeConfig:
    """The speculative-decoding setup, as the target's sizing sees it (DefaultPoolConfigurator.__init__ draft scaling,
    compute_swa_request_cap)."""

    algorithm: SpecAlgorithm = SpecAlgorithm.NONE
    eagle_draft_num_layers: int | None = None
    eagle_draft_swa_num_layers: int | None = None
    dflash_draft_num_layers: int | None = None
    dflash_draft_cell_size_per_token: int | None = None
    num_draft_tokens: int | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    #: a separate draft head's attention, total KV heads and head size (vLLM's EAGLE / EAGLE3 heads; ``None``: the
    #: target's)
    draft_num_kv_heads: int | None = None
    draft_head_dim: int | None = None

    def __post_init__(self) -> None:
        check_instance(self.algorithm, SpecAlgorithm, "speculative algorithm", "use SpecAlgorithm.parse(name)")
        check_opt_int(self.draft_num_kv_heads, "eagle_draft_num_kv_heads", minimum=1, maximum=2**16,
                      fix="give the draft model's num_key_value_heads")  # fmt: skip
        check_opt_int(self.draft_head_dim, "eagle_draft_head_dim", minimum=1, maximum=2**16,
                      fix="give the draft model's head_dim")  # fmt: skip
        for name in ("eagle_draft_num_layers", "eagle_draft_swa_num_layers", "dflash_draft_num_layers"):
            check_opt_int(getattr(self, name), name, maximum=MAX_LAYERS, fix="give the draft model's layer count")
        check_opt_int(self.dflash_draft_cell_size_per_token, "dflash_draft_cell_size_per_token")
        for name in ("num_draft_tokens", "num_steps", "eagle_topk"):
            check_opt_int(getattr(self, name), f"speculative_{name}", minimum=1, maximum=2**16)

    @property
    def enabled(self) -> bool:
        return self.algorithm is not SpecAlgorithm.NONE

    @property
    def max_num_draft_tokens(self) -> int | None:
        """SGLang's ``max_speculative_num_draft_tokens()`` (no adaptive maximum here)."""
        return self.num_draft_tokens if self.enabled else None


@dataclass(frozen=True)
class Platform:
    """GPU generation probes that change FP4/MiniMax/DSV4 numbers."""

    is_sm100: bool = False
    is_sm90: bool = False
    is_blackwell: bool = False
    is_gfx95: bool = False
    is_npu_arch35: bool = False  # Ascend arch35 SoC: packed-FP8 DSA pool (_build_ascend_*_kv_pool)
    #: the GPU by name (``kvstrategies gpus``): what a vLLM plan reads (vLLM picks attention backends
    #: and batch defaults from its facts); SGLang plans read the flags above
    gpu: str | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            if item.name == "gpu":
                check_opt_str(self.gpu, "platform.gpu")
                continue
            check_bool(getattr(self, item.name), f"platform.{item.name}")


@dataclass(frozen=True)
class AttentionBackends:
    """Resolved attention backends; ``prefill``/``decode`` fall back to ``attention_backend``."""

    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    dsa_prefill_backend: str | None = None
    dsa_decode_backend: str | None = None
    dsv4_attn_backend: str | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            check_opt_str(getattr(self, item.name), item.name)

    @property
    def prefill(self) -> str | None:
        return self.prefill_attention_backend or self.attention_backend

    @property
    def decode(self) -> str | None:
        return self.decode_attention_backend or self.attention_backend


class DisaggregationMode(enum.Enum):
    NULL = "null"
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class SchedulingConfig:
    """Scheduler settings that sizing reads (docs/maintainers.md, "Sizing flow")."""

    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int | None = None
    context_length: int | None = None
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    swa_full_tokens_ratio: float | None = None
    swa_prefix_tails: int | None = None
    disaggregation_mode: DisaggregationMode = DisaggregationMode.NULL
    disaggregation_decode_extra_slots: int | None = None
    max_mamba_cache_size: int | None = None
    mamba_full_memory_ratio: float = 0.9
    mamba_radix_cache_strategy: str | None = None
    # HiCache: on NPU it turns DSA index-K elision off (_compute_dsa_indexer_cell_size)
    enable_hierarchical_cache: bool = False
    # hybrid SWA and DSV4 fall to Default (model_config.is_hybrid_swa_model, get_hybrid_layer_ids)
    disable_hybrid_swa_memory: bool = False

    def __post_init__(self) -> None:
        """Types and ranges of every field (a bad value fails here, not deep inside a strategy)."""
        check_opt_int(self.max_running_requests, "max_running_requests", minimum=1)
        check_opt_int(self.max_total_tokens, "max_total_tokens (max_tokens)", minimum=1, maximum=MAX_INT64)
        # SGLang: -1 (or 0) turns chunked prefill off
        check_opt_int(self.chunked_prefill_size, "chunked_prefill_size", minimum=-1)
        check_opt_int(self.context_length, "context_length", minimum=1)
        check_opt_int(self.swa_prefix_tails, "swa_prefix_tails")
        check_opt_int(self.disaggregation_decode_extra_slots, "disaggregation_decode_extra_slots")
        check_opt_int(self.max_mamba_cache_size, "max_mamba_cache_size", minimum=1)
        ratio = self.swa_full_tokens_ratio
        if ratio is not None and (
            isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(finite_float(ratio))
        ):  # the (0, 1] range is the SWA strategies' own check (they name the model's default)
            raise KVCacheConfigError(f"swa_full_tokens_ratio must be a number in (0, 1] or None, got {shown(ratio)}")
        # the Mamba : KV memory split r / (1 + r) of KVCacheConfigurator._handle_max_mamba_cache needs r > 0
        check_float(self.mamba_full_memory_ratio, "mamba_full_memory_ratio", low=0.0, high=MAX_MEMORY_RATIO,
                    fix="use e.g. 0.9 (the default)")  # fmt: skip
        check_opt_str(self.mamba_radix_cache_strategy, "mamba_radix_cache_strategy")
        check_instance(
            self.disaggregation_mode, DisaggregationMode, "disaggregation_mode", "use DisaggregationMode('null')"
        )
        for name in ("disable_radix_cache", "disable_overlap_schedule", "enable_hierarchical_cache",
                     "disable_hybrid_swa_memory"):  # fmt: skip
            check_bool(getattr(self, name), name)


@dataclass(frozen=True)
class EngineKnobs:
    """SGLang environment knobs that change sizing (sglang.srt.environ), as explicit settings."""

    swa_eviction_interval: int = 128
    dsv4_compress_state_dtype: DType = DType.FLOAT32
    dsv4_kv_layout: str = "v4"
    dsv4_compressed_kv_layout: str = "auto"
    mamba_ssm_dtype: DType | None = None
    mamba_conv_dtype: DType = DType.BFLOAT16
    mamba_skip_decode_lock: bool = False

    def __post_init__(self) -> None:
        check_int(self.swa_eviction_interval, "SGLANG_SWA_EVICTION_INTERVAL (swa_eviction_interval)", minimum=1,
                  maximum=2**20)  # fmt: skip
        for name in ("dsv4_compress_state_dtype", "mamba_conv_dtype"):
            check_instance(getattr(self, name), DType, name, "use DType.from_name(name)")
        if self.mamba_ssm_dtype is not None:
            check_instance(self.mamba_ssm_dtype, DType, "mamba_ssm_dtype", "use DType.from_name(name)")
        for name in ("dsv4_kv_layout", "dsv4_compressed_kv_layout"):
            if not isinstance(getattr(self, name), str):
                raise KVCacheConfigError(f"{name} must be a string, got {getattr(self, name)!r}")
        check_bool(self.mamba_skip_decode_lock, "mamba_skip_decode_lock")


@runtime_checkable
class KVCacheContext(Protocol):
    """Every input that sizing and building read. Strategies depend on this, nothing else."""

    @property
    def geometry(self) -> ModelGeometry: ...

    @property
    def parallel(self) -> ParallelLayout: ...

    @property
    def speculative(self) -> SpeculativeConfig: ...

    @property
    def kv_cache_dtype(self) -> KVCacheDtype: ...

    @property
    def page_size(self) -> int: ...

    @property
    def device(self) -> DeviceKind: ...

    @property
    def platform(self) -> Platform: ...

    @property
    def backends(self) -> AttentionBackends: ...

    @property
    def scheduling(self) -> SchedulingConfig: ...

    @property
    def knobs(self) -> EngineKnobs: ...

    @property
    def is_draft_worker(self) -> bool: ...

    @property
    def release(self) -> EngineRelease:
        """The engine release whose rules apply (``kvstrategies.core.releases``; default the newest)."""
        ...

    def at_pp_rank(self, rank: int) -> KVCacheContext:
        """The same deployment seen from another pipeline stage (for the PP-wide MIN)."""
        ...

    def target_context(self) -> KVCacheContext:
        """The same deployment seen from the target worker (a draft takes the target's sizes)."""
        ...


@dataclass(frozen=True)
class KVCacheSettings:
    """The plain-data :class:`KVCacheContext`: build one, hand it to any strategy."""

    geometry: ModelGeometry
    kv_cache_dtype: KVCacheDtype
    page_size: int = 1
    parallel: ParallelLayout = field(default_factory=ParallelLayout)
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    device: DeviceKind = DeviceKind.CUDA
    platform: Platform = field(default_factory=Platform)
    backends: AttentionBackends = field(default_factory=AttentionBackends)
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    knobs: EngineKnobs = field(default_factory=EngineKnobs)
    is_draft_worker: bool = False
    release: EngineRelease = NEWEST_SGLANG

    def __post_init__(self) -> None:
        check_int(self.page_size, "page_size", minimum=1, maximum=MAX_PAGE_SIZE,
                  fix="give the KV page size in tokens, e.g. 1, 16, 64 or 256")  # fmt: skip
        check_instance(self.geometry, ModelGeometry, "geometry", "parse one with kvstrategies.parse_hf_config")
        check_instance(self.kv_cache_dtype, KVCacheDtype, "kv_cache_dtype", "use resolve_kv_cache_dtype(name, ...)")
        for name, kind in (
            ("parallel", ParallelLayout),
            ("speculative", SpeculativeConfig),
            ("device", DeviceKind),
            ("platform", Platform),
            ("backends", AttentionBackends),
            ("scheduling", SchedulingConfig),
            ("knobs", EngineKnobs),
        ):
            check_instance(getattr(self, name), kind, name, f"build it with {kind.__name__}(...)")
        check_bool(self.is_draft_worker, "is_draft_worker")
        check_instance(self.release, EngineRelease, "release", "use kvstrategies.core.releases.parse_release('0.5.20')")
        parse_release(self.release, field="release")  # a release the project models

    def at_pp_rank(self, rank: int) -> KVCacheSettings:
        return replace(self, parallel=self.parallel.at_pp_rank(rank))

    def target_context(self) -> KVCacheSettings:
        return replace(self, is_draft_worker=False) if self.is_draft_worker else self


# ---- derived quantities every strategy uses (one definition each) -------------------------


def context_len(ctx: KVCacheContext) -> int:
    """The engine's context length: the user's override, else the model's
    (hf_transformers.common.get_context_length)."""
    override = ctx.scheduling.context_length
    if override is not None:
        return override
    old = ctx.geometry.context_len_transformers4
    if old is not None and ctx.release.engine == SGLANG and SGLANG_TRANSFORMERS.at(ctx.release).startswith("4."):
        return old  # transformers 4 (SGLang up to 0.5.9) keeps the top-level rope factor
    return ctx.geometry.context_len


#: the pipeline stages spread the rest of ``num_layers / pp`` over the last stages, one layer each; before, the last
#: stage takes it all
PP_REST_SPREAD = ReleaseRule(
    "pp-rest-spread",
    span("0.5.6"),
    "the last num_layers % pp pipeline stages take one more layer each (before: every stage takes num_layers // pp "
    "and the last one the rest)",
    "sglang.srt.distributed.utils.get_pp_indices",
)


def stage_layer_range(ctx: KVCacheContext) -> tuple[int, int]:
    """``[start, end)`` of this rank's global layers (draft worker: its own draft layers; :data:`PP_REST_SPREAD`)."""
    if ctx.is_draft_worker:
        return 0, draft_num_layers(ctx)
    rest = ctx.release.engine == SGLANG and not PP_REST_SPREAD.holds(ctx.release)
    return ctx.parallel.layer_range(ctx.geometry.num_pp_layers, last_takes_rest=rest)


def draft_num_layers(ctx: KVCacheContext) -> int:
    """Layers of a draft worker's model: the config's MTP layers, else the draft count, else all.

    SGLang's ``layer_setup._compute_model_num_layers`` takes ``num_nextn_predict_layers`` first
    for a draft whose config has MTP layers (sglang.srt.distributed.utils.get_pp_indices), whatever the draft count
    says, after ``ModelConfig._config_draft_model`` renamed some architectures to one-layer MTP heads
    (``geometry.draft_num_layers``, where the release renames it: row fact ``draft_renamed``); a draft with no count
    of its own is the target checkpoint
    itself (``num_pp_layers`` layers).
    """
    from .models.architectures import holds_in, row_for  # the row's release facts

    spec = ctx.speculative
    geometry = ctx.geometry
    row = row_for(geometry.architectures[0]) if geometry.architectures else None
    renamed = geometry.draft_num_layers if row is None or holds_in(row, "draft_renamed", ctx.release) else None
    counts = (renamed, geometry.num_nextn_predict_layers, spec.eagle_draft_num_layers,
              spec.dflash_draft_num_layers)  # fmt: skip
    for count in counts:
        if count:
            return count
    return ctx.geometry.num_pp_layers


def num_effective_layers(ctx: KVCacheContext) -> int:
    """``(end - start) * loop_num``: SGLang's ``layer_info`` for this rank
    (sglang.srt.distributed.utils.get_pp_indices)."""
    start, end = stage_layer_range(ctx)
    return (end - start) * ctx.geometry.loop_num


#: DCP ranks replicate KV: a rank holds ``H_total // (attn_tp // dcp)`` KV heads (before: the heads
#: are split over attention TP alone, ``H_total // attn_tp``, whatever the DCP size)
KV_HEADS_DCP_REPLICATED = ReleaseRule(
    "kv-heads-dcp-replicated",
    span("0.5.18"),
    "KV heads per rank max(1, H // (attn_tp // dcp)), a draft ignoring DCP (before: max(1, H // attn_tp))",
    "sglang.srt.configs.model_config.ModelConfig.get_num_kv_heads (dcp_size argument, 0.5.18)",
)


def num_kv_heads_per_rank(ctx: KVCacheContext) -> int:
    """``max(1, H_total // (attn_tp // dcp))``; a draft worker ignores DCP (ModelConfig.get_num_kv_heads).

    Before :data:`KV_HEADS_DCP_REPLICATED`: ``max(1, H_total // attn_tp)`` (Llama-3.1-70B, 8 KV heads,
    TP 8, DCP 2: 1 head, not 2).
    """
    replicated = not ctx.is_draft_worker and KV_HEADS_DCP_REPLICATED.holds(ctx.release)
    dcp = ctx.parallel.dcp_size if replicated else 1
    return ctx.geometry.num_kv_heads(ctx.parallel.attn_tp_size, dcp)


def is_hybrid_swa(ctx: KVCacheContext) -> bool:
    """SGLang's ``is_hybrid_swa``: a hybrid-SWA model in the release's set (row fact ``hybrid_swa_listed``)
    and ``--disable-hybrid-swa-memory`` off (model_config.is_hybrid_swa_model; 0.5.7: is_hybrid_model)."""
    from .models.architectures import holds_in, row_for  # the row's release facts

    geometry = ctx.geometry
    if geometry.hybrid_swa is None or ctx.scheduling.disable_hybrid_swa_memory:
        return False
    row = row_for(geometry.architectures[0]) if geometry.architectures else None
    return row is None or holds_in(row, "hybrid_swa_listed", ctx.release)


#: a draft worker under DCP indexes the target allocator's DCP-widened token ids: its pools hold
#: ``dcp x`` the target's tokens at a ``dcp x`` page (before: the target's tokens and page)
DRAFT_DCP_LOC_SPACE = ReleaseRule(
    "draft-dcp-loc-space",
    span("0.5.17"),
    "a DCP draft worker's pools span the DCP-widened location space (x dcp tokens and page)",
    "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator.loc_space_scale / _derive_pool_sizes",
)


def draft_loc_space_scale(ctx: KVCacheContext) -> int:
    """``dcp`` for a draft worker under DCP (:data:`DRAFT_DCP_LOC_SPACE`), else 1."""
    dcp = ctx.parallel.dcp_size
    return dcp if ctx.is_draft_worker and dcp > 1 and DRAFT_DCP_LOC_SPACE.holds(ctx.release) else 1
