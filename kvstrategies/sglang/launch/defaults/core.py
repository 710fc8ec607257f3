"""The values every launch step passes along, and how a step records a default.

:class:`LaunchSettings` are the user's server arguments (SGLang: ``server_args.ServerArgs``
fields; ``None`` = not given), :class:`LaunchModelFacts` the model facts the rules read,
:class:`LaunchResolution` every resolved setting with one :class:`AppliedDefault` per default;
the steps write into one :class:`ResolutionDraft`, frozen once at the end.
:func:`_declare` sets a field of the draft and records why, the last declaration winning as in
``ServerArgs.resolve_once``; each reason names the SGLang source that takes the decision in the
release (:class:`SglangHook`); :func:`_refuse` is the error for a launch SGLang rejects.
The shared predicates (:func:`_multimodal_active`, :func:`large_hopper_qwen3_vl`) mirror
``arg_groups.model_overrides.qwen3_vl.large_hopper_qwen3_vl_model_type``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Literal, NamedTuple

from ....core.releases import NEWEST_SGLANG, EngineRelease, ReleaseRule, span
from ....errors import KVCacheConfigError
from ....models.architectures import model_type_row, require_loadable
from ....planner.gpus import Accelerator

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
    False = no cut. ``sm100_trtllm_moe_quantization``: the checkpoint's quantization (``"none"`` for 16-bit) when the
    model's SM100 override picks the FlashInfer TRT-LLM MoE runner for it, else None
    (:func:`kvstrategies.planner.moe_layout.sm100_trtllm_quantization`).
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
    sm100_trtllm_moe_quantization: str | None = None

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
    #: the attention-DP size the launch forces (None: as given; 0.5.5 forces DP = TP for DSA models)
    attn_dp_size: int | None = None
    applied: tuple[AppliedDefault, ...] = ()

    def reasons(self, setting: str) -> tuple[AppliedDefault, ...]:
        """The declarations of one setting, in pipeline order (the last one won)."""
        return tuple(a for a in self.applied if a.setting == setting)

    def explain(self) -> str:
        """One line per applied default, like a server log: ``setting = value  # reason``."""
        return "\n".join(f"{a.setting} = {a.value!r}  # {a.reason}" for a in self.applied)


@dataclass
class ResolutionDraft:
    """The launch resolution while the pipeline builds it: one mutable record that every step
    reads and writes (the ``ServerArgs`` fields ``resolve_once`` assigns in place), the same fields
    as :class:`LaunchResolution` plus the defaults applied so far; :meth:`freeze` builds the
    frozen :class:`LaunchResolution` once, after the last step."""

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
    attn_dp_size: int | None = None
    applied: list[AppliedDefault] = field(default_factory=list)

    @classmethod
    def of(cls, res: LaunchResolution) -> ResolutionDraft:
        """A draft holding ``res`` (to run one step on a finished resolution)."""
        values = {f.name: getattr(res, f.name) for f in fields(LaunchResolution)}
        return cls(**{**values, "applied": list(res.applied)})

    def freeze(self) -> LaunchResolution:
        """The frozen resolution: every field as decided, the applied defaults in order."""
        values = {f.name: getattr(self, f.name) for f in fields(LaunchResolution)}
        return LaunchResolution(**{**values, "applied": tuple(self.applied)})


#: the launch hooks are ``arg_groups`` modules run by ``ServerArgs.resolve_once`` (before:
#: ``ServerArgs`` methods run by ``__post_init__``); only the cited source changes
LAUNCH_HOOKS_IN_ARG_GROUPS = ReleaseRule(
    "launch-hooks-in-arg-groups",
    span("0.5.19"),
    "launch resolution runs in ServerArgs.resolve_once over the arg_groups hooks (before: ServerArgs.__post_init__)",
    "sglang.srt.arg_groups.pipeline.run_resolution_pipeline",
    topic="launch",
)

#: ``ServerArgs.__post_init__`` runs the launch in named ``_handle_*`` steps; before, in its own body
LAUNCH_STEPS_NAMED = ReleaseRule(
    "launch-steps-named",
    span("0.5.3"),
    "ServerArgs.__post_init__ resolves the launch in named _handle_* steps (before: in its own body)",
    "sglang.srt.server_args.ServerArgs.__post_init__",
    topic="launch",
)


class SglangHook(NamedTuple):
    """Where SGLang takes one launch decision, as the reason users read cites it: an ``arg_groups``
    hook from 0.5.19 on, a ``ServerArgs`` method up to 0.5.18 (:data:`LAUNCH_HOOKS_IN_ARG_GROUPS`), ``ServerArgs``'s
    ``__post_init__`` itself up to 0.5.2 (:data:`LAUNCH_STEPS_NAMED`)."""

    arg_groups: str
    server_args: str

    def at(self, release: EngineRelease) -> str:
        """The SGLang source that takes this decision in ``release``."""
        if LAUNCH_HOOKS_IN_ARG_GROUPS.holds(release):
            return self.arg_groups
        if not LAUNCH_STEPS_NAMED.holds(release) and self.server_args.startswith(_SERVER_ARGS):
            return _SERVER_ARGS + "__post_init__"
        return self.server_args


_SERVER_ARGS = "sglang.srt.server_args.ServerArgs."
_OVERRIDES = "sglang.srt.arg_groups.overrides"
#: capacity tier, reserved memory, ``mem_fraction_static`` and the HIP aiter cut
GPU_MEMORY_HOOK = SglangHook(
    "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings", _SERVER_ARGS + "_handle_gpu_memory_settings"
)
#: the vision-model cut of ``mem_fraction_static``
VLM_MEMORY_HOOK = SglangHook(
    "sglang.srt.arg_groups.memory_hook.adjust_mem_fraction_for_vlm", _SERVER_ARGS + "adjust_mem_fraction_for_vlm"
)
#: the decode and prefill CUDA graphs
CUDA_GRAPH_HOOK = SglangHook("sglang.srt.arg_groups.cuda_graph_hook", _SERVER_ARGS + "_handle_cuda_graph_config")
#: per-architecture attention backends and pages
MODEL_OVERRIDES_HOOK = SglangHook("sglang.srt.arg_groups.model_overrides", _OVERRIDES + " (model overrides)")
#: the attention backend when none is given
DEFAULT_BACKEND_HOOK = SglangHook(
    "sglang.srt.arg_groups.model_override_base.get_default_attn_backend", _SERVER_ARGS + "_get_default_attn_backend"
)
#: DSA's prefill and decode backends
DSA_BACKENDS_HOOK = SglangHook(_OVERRIDES, _OVERRIDES + "._deepseek_family_overrides")
#: the page size a backend or model forces, and the default page
PAGE_SIZE_HOOK = SglangHook(_OVERRIDES + "._page_size_default", _SERVER_ARGS + "_handle_page_size")
#: the KV cache dtype a model forces
KV_DTYPE_HOOK = SglangHook(
    _OVERRIDES + " (kv_cache_dtype defaults)",
    _SERVER_ARGS + "_handle_model_specific_adjustments (kv_cache_dtype defaults)",
)
#: the other model-specific settings (SWA memory and ratio, radix cache)
OVERRIDES_HOOK = SglangHook(_OVERRIDES, _SERVER_ARGS + "_handle_model_specific_adjustments")
#: the Mamba radix cache strategy
MAMBA_RADIX_HOOK = SglangHook(_OVERRIDES + "._mamba_radix_cache_resolution", _SERVER_ARGS + "_handle_mamba_radix_cache")
#: the speculative-decoding defaults (a hook in every release)
SPECULATIVE_HOOK = SglangHook(
    "sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding",
    "sglang.srt.arg_groups.speculative_hook.handle_speculative_decoding",
)
#: DP attention and the PD roles
DATA_PARALLEL_HOOK = SglangHook(
    "sglang.srt.arg_groups.parallel_hook.handle_data_parallelism", _SERVER_ARGS + "_handle_data_parallelism"
)
#: the Ascend NPU defaults
NPU_PLATFORM_HOOK = SglangHook(
    "sglang.srt.arg_groups.platform_hook.handle_platform_defaults", _SERVER_ARGS + "_handle_npu_backends"
)


def _declare(res: ResolutionDraft, setting: str, value: SettingValue, reason: str) -> None:
    """Set ``setting`` (a LaunchResolution field) on the draft and record why (a reason names the
    SGLang source it mirrors, :meth:`SglangHook.at`); last declaration wins (ServerArgs.resolve_once
    order)."""
    setattr(res, setting, value)
    res.applied.append(AppliedDefault(setting, value, reason))


def _refuse(check: str, message: str) -> KVCacheConfigError:
    """The error for a launch SGLang rejects, naming SGLang's check (module.function)."""
    return KVCacheConfigError(f"SGLang refuses this launch ({check}): {message}")


def check_release_serves(model_type: str, release: EngineRelease) -> None:
    """Refuse a model ``release`` cannot load: its ``model_type`` row is first loaded by a later
    release (SGLang's ``configs.model_config.ModelConfig`` fails on the config;
    :func:`kvstrategies.models.architectures.require_loadable`)."""
    require_loadable(model_type, release)


#: a launch step: reads the inputs and the values decided so far, writes its decisions into the draft
Step = Callable[[LaunchInputs, ResolutionDraft], None]


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
