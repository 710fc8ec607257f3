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
from ...models.architectures import model_type_row
from ..gpus import Accelerator

SettingValue = str | int | float | bool | None
DisaggregationMode = Literal["null", "prefill", "decode"]


# --- inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchModelFacts:
    """The few model facts the launch rules read (build with :func:`model_facts_from_hf_config`).

    ``context_length``: derived as sizing.md §2.5 (read only by the HIP aiter cut, §4.4.2).
    ``num_kv_heads``: total KV heads (read only by the HIP MLA backend rule, §6.2).
    ``vision_layers``/``vision_hidden``: ``vision_config`` values, ``None`` when absent there
    (the VLM cut then uses 24 / 1024, §4.4.1); ``has_vision_config`` False = no cut.
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
    # env SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1 (§4.4.2)
    aiter_honor_explicit_mem_fraction: bool = False


@dataclass(frozen=True)
class LaunchInputs:
    """Everything the pipeline reads; ``attn_dp_size`` = DP-attention size (1 = off)."""

    model: LaunchModelFacts
    gpu: Accelerator
    tp_size: int = 1
    pp_size: int = 1
    attn_dp_size: int = 1
    settings: LaunchSettings = field(default_factory=LaunchSettings)
    dcp_size: int = 1


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

    ``reserved_mib`` is ``R`` of §4.2 (``None`` when the user gave the fraction or the capacity
    is unknown). ``prefill_graph_bs_count`` is the length of the prefill-graph batch list (§3).
    ``swa_full_tokens_ratio`` is the effective value (0.8 field fallback) and
    ``swa_full_tokens_ratio_explicit`` what the DSV4 configurator reads (§9.1).
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


# Where SGLang 0.5.23 takes each launch decision, by launch_defaults.md section: the reasons
# users read cite SGLang's source, never the spec (most specific section first).
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
_SECTION = re.compile(r"§(\d+(?:\.\d+)*)(?:, after)?")


@functools.lru_cache(maxsize=4096)
def sglang_source(reason: str) -> str:
    """``reason`` with each launch_defaults.md section reference replaced by SGLang's module
    (a pure function of the text: the fix search and sweeps declare the same reasons again)."""

    def cite(match: re.Match[str]) -> str:
        parts = match.group(1).split(".")
        for depth in range(len(parts), 0, -1):
            source = _SGLANG_SOURCE.get(".".join(parts[:depth]))
            if source is not None:
                return source
        return "SGLang 0.5.23's launch defaults"

    return _SECTION.sub(cite, reason)


def _declare(res: LaunchResolution, setting: str, value: SettingValue, reason: str) -> LaunchResolution:
    """Set ``setting`` (a LaunchResolution field) and record why; last declaration wins (§0)."""
    applied = AppliedDefault(setting, value, sglang_source(reason))
    changes: dict[str, Any] = {setting: value, "applied": (*res.applied, applied)}
    return replace(res, **changes)


def _refuse(check: str, message: str) -> KVCacheConfigError:
    """The error for a launch SGLang rejects, naming SGLang's check (module.function)."""
    return KVCacheConfigError(f"SGLang refuses this launch ({check}): {message}")


Step = Callable[[LaunchInputs, LaunchResolution], LaunchResolution]


def _no_backend_flags(s: LaunchSettings) -> bool:
    return s.attention_backend is None and s.prefill_attention_backend is None and s.decode_attention_backend is None


def _multimodal_active(inp: LaunchInputs) -> bool:
    m, s = inp.model, inp.settings
    return m.is_multimodal and (not m.multimodal_opt_in or s.enable_multimodal) and not s.language_only


def large_hopper_qwen3_vl(inp: LaunchInputs) -> bool:
    """Qwen3-VL (a model type whose row has ``large_hopper_vl_overrides``, multimodal part on) on
    a Hopper GPU of at least 60 GiB (SGLang:
    ``arg_groups.model_overrides.qwen3_vl.large_hopper_qwen3_vl_model_type``)."""
    mem = inp.gpu.capacity_mib
    return (
        inp.gpu.is_sm90
        and mem is not None
        and mem >= 60 * 1024
        and model_type_row(inp.model.model_type).large_hopper_vl_overrides
        and _multimodal_active(inp)
    )
