"""The values every launch step passes along, and how a step records a default.

:class:`LaunchSettings` are the user's server arguments (SGLang: ``server_args.ServerArgs``
fields; ``None`` = not given), :class:`LaunchModelFacts` the model facts the rules read,
:class:`LaunchResolution` every resolved setting with one :class:`AppliedDefault` per default.
:func:`_declare` sets a field and records why, the last declaration winning as in
``ServerArgs.resolve_once``; :func:`sglang_source` turns a reason's section reference into the
SGLang module that takes the decision; :func:`_refuse` is the error for a launch SGLang rejects.
The shared predicates (:func:`_multimodal_active`, :func:`large_hopper_qwen3_vl`) mirror
``arg_groups.model_overrides.qwen3_vl.large_hopper_qwen3_vl_model_type``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ...errors import KVCacheConfigError
from ...models.architectures import model_type_row, require_loadable
from ...releases import NEWEST_SGLANG, EngineRelease, ReleaseRule, span
from ..gpus import Accelerator

SettingValue = str | int | float | bool | None
DisaggregationMode = Literal["null", "prefill", "decode"]


# --- inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchModelFacts:
    """The few model facts the launch rules read (build with :func:`model_facts_from_hf_config`).

    ``context_length``: derived as hf_transformers.common.get_context_length (read only by the HIP aiter cut,
    memory_hook.handle_gpu_memory_settings (HIP aiter cut)). ``num_kv_heads``: total KV heads (read only by the HIP MLA
    backend rule, get_default_attn_backend). ``vision_layers``/``vision_hidden``: ``vision_config`` values, ``None``
    when absent there (the VLM cut then uses 24 / 1024, memory_hook.adjust_mem_fraction_for_vlm); ``has_vision_config``
    False = no cut.
    """

    architectures: tuple[str, ...]
    model_type: str = ""
    num_hidden_layers: int = 0
    context_length: int = 2048
    num_kv_heads: int = 0
    is_mla: bool = False
    is_dsa: bool = False
    index_kpool: int = 1
    is_dsv4: bool = False
    is_hybrid_swa: bool = False
    is_mamba_radix: bool = False
    mamba_extra_buffer: bool = False
    is_kda: bool = False
    is_multimodal: bool = False
    multimodal_opt_in: bool = False
    breakable_multimodal: bool = False
    has_vision_config: bool = False
    vision_layers: int | None = None
    vision_hidden: int | None = None
    has_attention_sinks: bool = False
    kv_head_dims_differ: bool = False
    forces_disable_hybrid_swa_memory: bool = False

    def has_arch(self, names: frozenset[str]) -> bool:
        return any(a in names for a in self.architectures)


@dataclass(frozen=True)
class LaunchSettings:
    """The user's explicit server arguments; ``None`` (or the default) = not given."""

    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None  # SGLang --cuda-graph-max-bs-decode
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    max_prefill_tokens: int | None = None
    context_length: int | None = None
    kv_cache_dtype: str | None = None
    page_size: int | None = None
    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    swa_full_tokens_ratio: float | None = None
    disable_hybrid_swa_memory: bool = False
    mamba_radix_cache_strategy: str = "auto"
    disable_radix_cache: bool = False
    disable_cuda_graph: bool = False
    disable_prefill_cuda_graph: bool = False
    disable_overlap_schedule: bool = False
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None
    speculative_dflash_block_size: int | None = None  # the DFLASH draft config's block_size
    moe_a2a_backend: str = "none"
    disaggregation_mode: DisaggregationMode = "null"
    enable_multimodal: bool = False
    language_only: bool = False
    # env SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1 (memory_hook.handle_gpu_memory_settings (HIP aiter cut))
    aiter_honor_explicit_mem_fraction: bool = False


@dataclass(frozen=True)
class LaunchInputs:
    """Everything the pipeline reads; ``attn_dp_size`` = DP-attention size (1 = off);
    ``release`` the SGLang release whose launch resolution is followed."""

    model: LaunchModelFacts
    gpu: Accelerator
    tp_size: int = 1
    pp_size: int = 1
    attn_dp_size: int = 1
    settings: LaunchSettings = field(default_factory=LaunchSettings)
    dcp_size: int = 1
    release: EngineRelease = NEWEST_SGLANG


# --- outputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedDefault:
    """One value SGLang declared at launch: which setting, the value, and why (spec section)."""

    setting: str
    value: SettingValue
    reason: str


@dataclass(frozen=True)
class LaunchResolution:
    """Every resolved launch setting. Sizes in tokens/requests; memory in MiB.

    ``reserved_mib`` is ``R`` of memory_hook.handle_gpu_memory_settings (``None`` when the user gave the fraction or the
    capacity is unknown). ``prefill_graph_bs_count`` is the length of the prefill-graph batch list
    (arg_groups.cuda_graph_hook). ``swa_full_tokens_ratio`` is the effective value (0.8 field fallback) and
    ``swa_full_tokens_ratio_explicit`` what the DSV4 configurator reads (arg_groups.overrides).
    """

    gpu_mem_mib: float | None
    mem_fraction_static: float | None = None
    reserved_mib: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    cuda_graph_max_bs: int | None = None
    decode_cuda_graph: str = "full"
    prefill_cuda_graph: str = "breakable"
    prefill_graph_max_bs: int | None = None
    prefill_graph_bs_count: int = 0
    kv_cache_dtype: str = "auto"
    page_size: int | None = None
    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    dsa_prefill_backend: str | None = None
    dsa_decode_backend: str | None = None
    dsv4_attn_backend: str | None = None
    swa_full_tokens_ratio: float | None = None
    swa_full_tokens_ratio_explicit: bool = False
    disable_hybrid_swa_memory: bool = False
    mamba_radix_cache_strategy: str = "auto"
    disable_overlap_schedule: bool = False
    disable_radix_cache: bool = False
    max_running_requests: int | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    multimodal_reserve_mib: float = 0.0
    applied: tuple[AppliedDefault, ...] = ()

    def reasons(self, setting: str) -> tuple[AppliedDefault, ...]:
        """The declarations of one setting, in pipeline order (the last one won)."""
        return tuple(a for a in self.applied if a.setting == setting)

    def explain(self) -> str:
        """One line per applied default, like a server log: ``setting = value  # reason``."""
        return "\n".join(f"{a.setting} = {a.value!r}  # {a.reason}" for a in self.applied)


# Where SGLang takes each launch decision, keyed by the section tag (§N) a reason carries: the reasons users read
# cite SGLang's source, never the spec (most specific section first). From 0.5.19 the decisions
# live in the ``arg_groups`` hook modules (``ServerArgs.resolve_once``); up to 0.5.18 they are
# methods of ``ServerArgs`` run by ``__post_init__`` (:data:`LAUNCH_HOOKS_IN_ARG_GROUPS`).
_SGLANG_SOURCE = {
    "4.4.1": "sglang.srt.arg_groups.memory_hook.adjust_mem_fraction_for_vlm",
    "6.1": "sglang.srt.arg_groups.model_overrides",
    "6.2": "sglang.srt.arg_groups.model_override_base.get_default_attn_backend",
    "6.3": "sglang.srt.arg_groups.overrides",
    "9.3": "sglang.srt.arg_groups.overrides._mamba_radix_cache_resolution",
    "1": "sglang.srt.utils.common.get_device_memory_capacity",
    "2": "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings",
    "3": "sglang.srt.arg_groups.cuda_graph_hook",
    "4": "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings",
    "6": "sglang.srt.arg_groups.attention_hook.handle_attention_backend_compatibility",
    "7": "sglang.srt.arg_groups.overrides._page_size_default",
    "8": "sglang.srt.arg_groups.overrides (kv_cache_dtype defaults)",
    "9": "sglang.srt.arg_groups.overrides",
    "10": "sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding",
    "11": "sglang.srt.arg_groups.parallel_hook.handle_data_parallelism",
    "12": "sglang.srt.arg_groups.platform_hook.handle_platform_defaults",
}
_SERVER_ARGS = "sglang.srt.server_args.ServerArgs."
_LEGACY_SOURCE = {
    "4.4.1": _SERVER_ARGS + "adjust_mem_fraction_for_vlm",
    "6.1": "sglang.srt.arg_groups.overrides (model overrides)",
    "6.2": _SERVER_ARGS + "_get_default_attn_backend",
    "6.3": "sglang.srt.arg_groups.overrides._deepseek_family_overrides",
    "9.3": _SERVER_ARGS + "_handle_mamba_radix_cache",
    "1": "sglang.srt.utils.common.get_device_memory_capacity",
    "2": _SERVER_ARGS + "_handle_gpu_memory_settings",
    "3": _SERVER_ARGS + "_handle_cuda_graph_config",
    "4": _SERVER_ARGS + "_handle_gpu_memory_settings",
    "6": _SERVER_ARGS + "_handle_attention_backend_compatibility",
    "7": _SERVER_ARGS + "_handle_page_size",
    "8": _SERVER_ARGS + "_handle_model_specific_adjustments (kv_cache_dtype defaults)",
    "9": _SERVER_ARGS + "_handle_model_specific_adjustments",
    "10": "sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding",
    "11": _SERVER_ARGS + "_handle_data_parallelism",
    "12": _SERVER_ARGS + "_handle_npu_backends",
}
#: the launch hooks are ``arg_groups`` modules run by ``ServerArgs.resolve_once`` (before:
#: ``ServerArgs`` methods run by ``__post_init__``); only the cited source changes
LAUNCH_HOOKS_IN_ARG_GROUPS = ReleaseRule(
    "launch-hooks-in-arg-groups",
    span("0.5.19"),
    "launch resolution runs in ServerArgs.resolve_once over the arg_groups hooks (before: ServerArgs.__post_init__)",
    "sglang.srt.arg_groups.pipeline.run_resolution_pipeline",
    topic="launch",
)
_SECTION = re.compile(r"§(\d+(?:\.\d+)*)(?:, after)?")


@functools.lru_cache(maxsize=4096)
def sglang_source(reason: str, release: EngineRelease = NEWEST_SGLANG) -> str:
    """``reason`` with each section tag (§N) replaced by ``release``'s SGLang module
    (a pure function of the text and release: the fix search and sweeps declare the same reasons again)."""
    table = _SGLANG_SOURCE if LAUNCH_HOOKS_IN_ARG_GROUPS.holds(release) else _LEGACY_SOURCE

    def cite(match: re.Match[str]) -> str:
        parts = match.group(1).split(".")
        for depth in range(len(parts), 0, -1):
            source = table.get(".".join(parts[:depth]))
            if source is not None:
                return source
        return f"{release.label}'s launch defaults"

    return _SECTION.sub(cite, reason)


def _declare(res: LaunchResolution, setting: str, value: SettingValue, reason: str) -> LaunchResolution:
    """Set ``setting`` (a LaunchResolution field) and record why (section references are cited
    for the release by :func:`cite_sources` at the end); last declaration wins (ServerArgs.resolve_once order)."""
    applied = AppliedDefault(setting, value, reason)
    changes: dict[str, Any] = {setting: value, "applied": (*res.applied, applied)}
    return replace(res, **changes)


def cite_sources(res: LaunchResolution, release: EngineRelease) -> LaunchResolution:
    """Every applied default's section references replaced by ``release``'s SGLang source."""
    return replace(res, applied=tuple(replace(a, reason=sglang_source(a.reason, release)) for a in res.applied))


def _refuse(check: str, message: str) -> KVCacheConfigError:
    """The error for a launch SGLang rejects, naming SGLang's check (module.function)."""
    return KVCacheConfigError(f"SGLang refuses this launch ({check}): {message}")


def check_release_serves(model_type: str, release: EngineRelease) -> None:
    """Refuse a model ``release`` cannot load: its ``model_type`` row is first loaded by a later
    release (SGLang's ``configs.model_config.ModelConfig`` fails on the config;
    :func:`kvstrategies.models.architectures.require_loadable`)."""
    require_loadable(model_type, release)


Step = Callable[[LaunchInputs, LaunchResolution], LaunchResolution]


def _no_backend_flags(s: LaunchSettings) -> bool:
    return s.attention_backend is None and s.prefill_attention_backend is None and s.decode_attention_backend is None


def _multimodal_active(inp: LaunchInputs) -> bool:
    m, s = inp.model, inp.settings
    return m.is_multimodal and (not m.multimodal_opt_in or s.enable_multimodal) and not s.language_only


#: Qwen3-VL's profiled serving path on a large Hopper GPU (decode backend, CUDA-IPC features, the
#: decode graph expanded to the request cap)
QWEN3_VL_LARGE_HOPPER = ReleaseRule(
    "launch-qwen3-vl-large-hopper",
    span("0.5.20"),
    "Qwen3-VL on a Hopper GPU >= 60 GiB takes its profiled serving overrides",
    "sglang.srt.arg_groups.model_overrides.qwen3_vl._qwen3vl_hopper_serving_overrides",
    topic="launch",
)


def large_hopper_qwen3_vl(inp: LaunchInputs) -> bool:
    """Qwen3-VL (a model type whose row has ``large_hopper_vl_overrides``, multimodal part on) on
    a Hopper GPU of at least 60 GiB, in a release with :data:`QWEN3_VL_LARGE_HOPPER` (SGLang:
    ``arg_groups.model_overrides.qwen3_vl.large_hopper_qwen3_vl_model_type``)."""
    mem = inp.gpu.capacity_mib
    return (
        QWEN3_VL_LARGE_HOPPER.holds(inp.release)
        and inp.gpu.is_sm90
        and mem is not None
        and mem >= 60 * 1024
        and model_type_row(inp.model.model_type).large_hopper_vl_overrides
        and _multimodal_active(inp)
    )
