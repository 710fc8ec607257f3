"""What SGLang 0.5.23 resolves at launch before any KV sizing (launch_defaults.md).

A pipeline of small pure steps over frozen dataclasses, in SGLang's order (§0)::

    LaunchModelFacts + Accelerator + tp/pp/attn-dp + LaunchSettings (None = not given)
      -> cuda graphs (§3) -> platform (§12, NPU) -> capacity tier (§2) -> prefill graph sizes
      -> mem_fraction_static (§4) -> model overrides (§6.1, §6.3, §7, §8, §9, §10)
      -> generic backend + page snaps + HIP aiter cut (§6.2, §7, §4.4) -> page default
      -> DP division (§11) -> speculative defaults (§10) -> SWA ratio (§9.1) -> capability (§9.4)
      -> LaunchResolution (every resolved setting + one AppliedDefault per default applied)

The order matters: ``mem_fraction_static`` is computed before the model overrides, the
speculative defaults and the DP division, so it never sees DeepSeek-V4's 256 requests, the
speculative 48 or the per-DP chunk (§0, quirk 1). :func:`estimate_kv_budget` turns the fraction
into a KV byte budget (§5 / resolve.md §2). Nothing here reads the environment or imports torch.

Not modelled (outside the fixtures; their settings are not inputs): XPU/MUSA/CPU/HPU platforms,
prefill context parallel, two-batch overlap, PD KV sharding, post-capture KV sizing,
deterministic inference, HiSparse, ``--enable-mis``, embedding-only heads and the ``llama-2`` path
rule. DCP enters through its prefill-graph and DSA-backend rules only.

Every rule is checked against SGLang's own resolution, launch by launch, by
``kvstrategies verify --against sglang --launch`` (:mod:`kvstrategies.integrations.sglang.launch`).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import InsufficientMemoryError, KVCacheConfigError
from ..models.architectures import (
    Attention,
    LaunchBackendCheck,
    LaunchBackendRule,
    SWAMemoryOff,
    model_type_row,
    names_where,
    row_for,
)
from ..validate import TrackedConfig, reading_config
from .gpus import Accelerator

SettingValue = str | int | float | bool | None
DisaggregationMode = Literal["null", "prefill", "decode"]

# --- architecture sets (launch_defaults.md §3, §6, §9; sizing.md §2.2, §2.6) ------------------

_MLA_ARCHS = names_where(lambda r: r.launch_mla)
# DeepSeek-V3-style architectures; with `index_topk` they are DSA (sizing.md §2.6).
_DEEPSEEK_FAMILY = names_where(lambda r: r.launch_deepseek_family)
_DSV4_ARCHS = names_where(lambda r: r.launch_dsv4)
_HYBRID_SWA_ARCHS = names_where(lambda r: r.launch_hybrid_swa)
_MAMBA_RADIX_ARCHS = names_where(lambda r: r.mamba_radix)
# §9.3: Mamba-radix architectures without extra-buffer support.
_NO_EXTRA_BUFFER_ARCHS = names_where(lambda r: r.mamba_radix and not r.mamba_extra_buffer)
# §4.4.1: multimodal part off unless --enable-multimodal.
_MULTIMODAL_OPT_IN = names_where(lambda r: r.multimodal_opt_in)
# §3: multimodal models that keep the breakable prefill graph.
_BREAKABLE_MULTIMODAL = names_where(lambda r: r.breakable_multimodal)
# §9.2: forced --disable-hybrid-swa-memory (Exaone-4 only with sliding_window_pattern).
_NO_HYBRID_SWA_MEMORY = names_where(lambda r: r.hybrid_swa_memory_off is SWAMemoryOff.ALWAYS)
_NO_HYBRID_SWA_MEMORY_WITH_PATTERN = names_where(
    lambda r: r.hybrid_swa_memory_off is SWAMemoryOff.WITH_SLIDING_WINDOW_PATTERN
)
_MLA_UNLESS_DISABLED = names_where(lambda r: r.attention is Attention.MLA_UNLESS_DISABLED)
_NOT_KDA = names_where(lambda r: not r.kda_from_linear_attn_config)
_ATTENTION_SINKS = names_where(lambda r: r.attention_sinks)
_AUDIO_ENCODER_DECODER = names_where(lambda r: r.audio_encoder_decoder)
_LATE_TRTLLM_MLA_PREFILL = names_where(lambda r: r.late_trtllm_mla_prefill_graph)


def _backend_rule_names(rule: LaunchBackendRule) -> frozenset[str]:
    return names_where(lambda row: row.launch_backend_rule is rule)


# §6.1: one name set per architecture backend rule
_BACKEND_RULE = {rule: _backend_rule_names(rule) for rule in LaunchBackendRule}
_SPEC_ALGORITHMS = frozenset({
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH", "DSPARK", "FROZEN_KV_MTP", "NGRAM",
})  # fmt: skip
_EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
_WIDE_SPEC_ARCHS = names_where(lambda r: r.wide_speculative_defaults)


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


def _text_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}
    merged.update(cfg.get("text_config") or {})
    return merged


def _context_length(t: Mapping[str, Any]) -> int:
    """sizing.md §2.5: first length key, times the rope factor unless llama3/original-max."""
    rope = t.get("rope_scaling") or {}
    factor = float(rope.get("factor", 1)) if isinstance(rope, Mapping) else 1.0
    if (
        not isinstance(rope, Mapping)
        or "original_max_position_embeddings" in rope
        or (rope.get("rope_type") == "llama3")
        or model_type_row(t.get("model_type")).rope_per_layer_type  # as models.parse.derive_context_len
    ):
        factor = 1.0
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):  # fmt: skip
        if t.get(key):
            return int(factor * int(t[key]))
    return int(factor * (model_type_row(t.get("model_type")).launch_context_default or 2048))


def model_facts_from_hf_config(cfg: Mapping[str, Any]) -> LaunchModelFacts:
    """Read :class:`LaunchModelFacts` from a raw HF ``config.json`` dict (``text_config`` aware).

    A field the launch rules cannot read raises :class:`KVCacheConfigError` naming it.
    """
    if not isinstance(cfg, Mapping):
        raise KVCacheConfigError(f"a model config must be a JSON object, got {type(cfg).__name__}")
    t = TrackedConfig()
    with reading_config(t, "reading the launch facts", "pass the settings explicitly (--available-bytes)"):
        t.update(_text_config(cfg))
        return _model_facts(cfg, t)


def _model_facts(cfg: Mapping[str, Any], t: Mapping[str, Any]) -> LaunchModelFacts:
    arch = tuple(str(a) for a in cfg.get("architectures") or t.get("architectures") or ())
    if not arch:
        raise KVCacheConfigError("config has no 'architectures'; SGLang selects rules by it")
    names = frozenset(arch)
    is_mla = bool(names & _MLA_ARCHS) and not (names & _MLA_UNLESS_DISABLED and t.get("use_mla") is False)
    vision = cfg.get("vision_config")
    opt_in = bool(names & _MULTIMODAL_OPT_IN)
    multimodal = (
        opt_in
        or isinstance(vision, Mapping)
        or any(a.endswith("ForConditionalGeneration") and a not in _AUDIO_ENCODER_DECODER for a in arch)
    )
    lac = t.get("linear_attn_config") or {}
    head_dim, v_head_dim = t.get("head_dim"), t.get("v_head_dim")
    return LaunchModelFacts(
        architectures=arch,
        model_type=str(cfg.get("model_type") or t.get("model_type") or ""),
        num_hidden_layers=int(t.get("num_hidden_layers") or 0),
        context_length=_context_length(t),
        num_kv_heads=int(t.get("num_key_value_heads") or t.get("num_attention_heads") or 0),
        is_mla=is_mla,
        is_dsa=bool(names & _DEEPSEEK_FAMILY) and t.get("index_topk") is not None,
        index_kpool=int(t.get("index_kpool") or 1),
        is_dsv4=bool(names & _DSV4_ARCHS),
        is_hybrid_swa=bool(names & _HYBRID_SWA_ARCHS) or bool(t.get("is_hybrid_swa")),
        is_mamba_radix=bool(names & _MAMBA_RADIX_ARCHS),
        mamba_extra_buffer=bool(names & _MAMBA_RADIX_ARCHS) and not names & _NO_EXTRA_BUFFER_ARCHS,
        is_kda=bool(lac.get("kda_layers")) and not names & _NOT_KDA,
        is_multimodal=multimodal,
        multimodal_opt_in=opt_in,
        breakable_multimodal=bool(names & _BREAKABLE_MULTIMODAL),
        has_vision_config=isinstance(vision, Mapping),
        vision_layers=_vision_value(cfg, vision, "num_hidden_layers"),
        vision_hidden=_vision_value(cfg, vision, "hidden_size"),
        has_attention_sinks=bool(names & _ATTENTION_SINKS)
        or bool(t.get("add_swa_attention_sink_bias") or t.get("add_full_attention_sink_bias")),
        kv_head_dims_differ=not is_mla and v_head_dim is not None and v_head_dim != head_dim,
        forces_disable_hybrid_swa_memory=bool(names & _NO_HYBRID_SWA_MEMORY)
        or (bool(names & _NO_HYBRID_SWA_MEMORY_WITH_PATTERN) and "sliding_window_pattern" in t),
    )


def _vision_value(cfg: Mapping[str, Any], vision: Any, key: str) -> int | None:
    """``vision_config[key]``, else the vision-config class default of the model type, else
    ``None`` (the VLM cut then uses 24 / 1024). SGLang: ``arg_groups.memory_hook.
    adjust_mem_fraction_for_vlm`` reads the attribute of the config *object*, which SGLang builds
    from the dict with the vision-config class defaults (the model type's table row)."""
    value = _opt_int(vision, key)
    if value is not None or not isinstance(vision, Mapping):
        return value
    return dict(model_type_row(str(cfg.get("model_type") or "")).vision_config_defaults).get(key)


def _opt_int(section: Any, key: str) -> int | None:
    if isinstance(section, Mapping) and section.get(key) is not None:
        return int(section[key])
    return None


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


def sglang_source(reason: str) -> str:
    """``reason`` with each launch_defaults.md section reference replaced by SGLang's module."""

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


# --- small pure formulas --------------------------------------------------------------------


def capacity_tier(gpu_mem_mib: float | None, tp_size: int) -> tuple[int, int]:
    """§2: ``(chunked_prefill_size, decode graph max_bs)`` from the capacity (MiB) and TP size."""
    if gpu_mem_mib is None:
        return 4096, 160
    if gpu_mem_mib < 20480:
        return 2048, 8
    if gpu_mem_mib < 35840:
        return 4096, 48 if tp_size < 4 else 160
    if gpu_mem_mib < 61440:
        return 4096, 32 if tp_size < 4 else 160
    if gpu_mem_mib < 163840:
        return 8192, 256 if tp_size < 4 else 512
    return 16384, 512


def prefill_graph_batch_sizes(max_bs: int) -> tuple[int, ...]:
    """§3: 4..32/4, 48..256/16, 288..512/32, 576..1024/64, 1280..4096/256, 4608../512, <= max_bs.

    Lengths: 42 (2048), 50 (4096), 58 (8192), 74 (16384).
    """
    ranges = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256))
    sizes = [b for lo, hi, step in ranges for b in range(lo, hi + 1, step)]
    sizes += range(4608, max_bs + 1, 512)
    return tuple(b for b in sizes if b <= max_bs)


def prefill_graph_bs_count(max_bs: int) -> int:
    """``prefill_graph_bs_count(max_bs)`` without building the list (any ``max_bs``)."""
    fixed = sum(1 for b in prefill_graph_batch_sizes(min(max_bs, 4096)) if b <= max_bs)
    return fixed + len(range(4608, max_bs + 1, 512))


def mem_fraction_from_reserve(gpu_mem_mib: float, reserved_mib: float) -> float:
    """§4.2: ``round((gpu_mem - R) / gpu_mem, 3)`` (Python's correctly rounded ``round``)."""
    return round((gpu_mem_mib - reserved_mib) / gpu_mem_mib, 3)


def vlm_fraction_factor(vision_layers: int | None, vision_hidden: int | None) -> float:
    """§4.4.1: ``0.95 * clamp(1 - 0.1 * (c - 1), 0.8, 1.05)``, ``c = L * H**2 / (24 * 1024**2)``.

    ``L`` defaults to 24 and ``H`` to 1024 when the vision config lacks them (quirk 7: configs
    that call the depth ``depth`` get 24, OPEN-L6 decided that way).
    """
    layers = 24 if vision_layers is None else vision_layers
    hidden = 1024 if vision_hidden is None else vision_hidden
    c = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * min(max(1 - 0.1 * (c - 1), 0.8), 1.05)


# --- pipeline steps -------------------------------------------------------------------------

Step = Callable[[LaunchInputs, LaunchResolution], LaunchResolution]


def _no_backend_flags(s: LaunchSettings) -> bool:
    return s.attention_backend is None and s.prefill_attention_backend is None and s.decode_attention_backend is None


def _multimodal_active(inp: LaunchInputs) -> bool:
    m, s = inp.model, inp.settings
    return m.is_multimodal and (not m.multimodal_opt_in or s.enable_multimodal) and not s.language_only


def cuda_graph_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 2 (§3): decode graph ``full``; prefill ``breakable`` on CUDA, disabled elsewhere,
    and disabled by the rules evaluated before the memory step."""
    s, m = inp.settings, inp.model
    if s.disable_cuda_graph or s.disaggregation_mode == "prefill":
        why = "--disable-cuda-graph" if s.disable_cuda_graph else "PD prefill role (§11)"
        res = _declare(res, "decode_cuda_graph", "disabled", why)
    prefill_off = [
        (s.disable_cuda_graph or s.disable_prefill_cuda_graph, "prefill graph disabled by flag"),
        (not inp.gpu.is_cuda, "breakable prefill graph is CUDA-only"),
        (inp.pp_size > 1, "pp_size > 1: breakable prefill graph is opt-in"),
        (m.is_kda, "KDA hybrid linear attention"),
        (m.is_dsv4, "DeepSeek-V4 disables the prefill graph"),
        (inp.dcp_size > 1, "decode context parallel (dcp_size > 1)"),
        (s.moe_a2a_backend not in ("none", "deepep", "megamoe", "flashinfer"), "moe_a2a_backend"),
        (_multimodal_active(inp) and not m.breakable_multimodal, "multimodal model not on the "
         "breakable allow-list"),
        (s.disaggregation_mode == "decode", "PD decode role"),
    ]  # fmt: skip
    for cond, why in prefill_off:
        if cond:
            return _declare(res, "prefill_cuda_graph", "disabled", f"{why} (§3)")
    return res


def platform_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 3 (§12): NPU uses ``ascend`` backends, page 128 and its own chunk/max_bs table."""
    if not inp.gpu.is_npu:
        return res
    for name in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"):
        if getattr(res, name) is None:
            res = _declare(res, name, "ascend", "NPU platform hook (§6.1)")
    if res.page_size is None:
        res = _declare(res, "page_size", 128, "NPU platform default (§7)")
    mem, small = res.gpu_mem_mib, inp.tp_size < 4
    if mem is not None and mem <= 65536:
        chunk, dmb = (4096, 16 if small else 64) if mem <= 32768 else (8192, 64 if small else 256)
        why = f"NPU table for {mem:g} MiB, tp {inp.tp_size} (§12)"
        if res.chunked_prefill_size is None:
            res = _declare(res, "chunked_prefill_size", chunk, why)
        if res.cuda_graph_max_bs is None:
            res = _declare(res, "cuda_graph_max_bs", dmb, why)
    return res


def capacity_tier_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 4a (§2): fill chunk and decode max_bs from the capacity; a table max_bs is capped
    by a *user* ``--max-running-requests`` (the only request cap visible this early, §0)."""
    chunk, dmb = capacity_tier(res.gpu_mem_mib, inp.tp_size)
    mem = "unknown" if res.gpu_mem_mib is None else f"{res.gpu_mem_mib:g} MiB"
    why = f"capacity tier: gpu_mem {mem}, tp {inp.tp_size} (§2)"
    if res.chunked_prefill_size is None:
        res = _declare(res, "chunked_prefill_size", chunk, why)
    if res.cuda_graph_max_bs is None:
        mrr = inp.settings.max_running_requests
        if mrr is not None and dmb > mrr:
            dmb, why = mrr, f"capacity tier {dmb} capped by --max-running-requests {mrr} (§2)"
        if large_hopper_qwen3_vl(inp) and mrr is not None and dmb < mrr <= 512:
            why = "Qwen3-VL, large Hopper: --max-running-requests (qwen3_vl.expand_multimodal_decode_graph...)"
            dmb = mrr
        res = _declare(res, "cuda_graph_max_bs", dmb, why)
    return res


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


def prefill_graph_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 4b (§3): prefill graph ``max_bs`` (tokens) and its batch list length.

    ``max_bs = chunk`` (non-MLA) or ``min(8192, chunk)`` (MLA), then the PP cap 8192 (only while
    the prefill graph is still breakable) and ``min(., max_total_tokens)``. With chunked prefill
    off (``-1``) ``max_bs`` is ``-1`` and the batch list is empty: no prefill graph is captured
    and none is reserved for (SGLang: ``memory_hook.handle_gpu_memory_settings``).
    """
    chunk = res.chunked_prefill_size
    max_bs = chunk if chunk is not None else res.max_prefill_tokens
    if inp.model.is_mla:
        max_bs = min(8192, max_bs)
    if inp.pp_size > 1 and res.prefill_cuda_graph == "breakable":
        max_bs = min(max_bs, 8192)
    if inp.settings.max_total_tokens is not None:
        max_bs = min(max_bs, inp.settings.max_total_tokens)
    res = replace(res, prefill_graph_max_bs=max_bs)
    return replace(res, prefill_graph_bs_count=prefill_graph_bs_count(max_bs))


def reserved_memory_mib(inp: LaunchInputs, res: LaunchResolution) -> float:
    """§4.2-4.3: ``R = 512 + 1.5 * tokens + tp * pp / 8 * 1024 + G`` MiB, floored at 10240 on
    GPUs > 60 GiB, plus 2048 for DeepEP with decode graphs.

    ``G``: ``2 * dmb`` (decode graph), ``3 * dmb * dp`` (+``1.5 * dmb * dp`` if dmb > 300) for DP
    attention, ``8 * len(prefill bs)`` (non-MLA) or 1536 (MLA) for the prefill graph, +1024 for
    breakable prefill with DeepEP.
    """
    s, m = inp.settings, inp.model
    pd_prefill, pd_decode = s.disaggregation_mode == "prefill", s.disaggregation_mode == "decode"
    dmb = res.cuda_graph_max_bs or 0
    chunk = res.chunked_prefill_size
    if pd_decode:
        reqs = s.max_running_requests or res.cuda_graph_max_bs or 1
        tokens = max(reqs * (s.speculative_num_draft_tokens or 1), 2048)
    elif chunk is not None and chunk > 0:
        tokens = max(chunk, 2048)
    else:
        tokens = max(res.max_prefill_tokens, 2048)
    reserve = 512 + 1.5 * tokens + (inp.tp_size * inp.pp_size / 8) * 1024
    decode_on = res.decode_cuda_graph != "disabled" and not pd_prefill
    if decode_on:
        reserve += 2 * dmb
    if inp.attn_dp_size > 1 and not pd_prefill:
        reserve += 3 * dmb * inp.attn_dp_size + (1.5 * dmb * inp.attn_dp_size if dmb > 300 else 0)
    if res.prefill_cuda_graph != "disabled" and not pd_decode:
        reserve += 1536 if m.is_mla else 8 * res.prefill_graph_bs_count
        if res.prefill_cuda_graph == "breakable" and s.moe_a2a_backend == "deepep":
            reserve += 1024
    if res.gpu_mem_mib is not None and res.gpu_mem_mib > 61440:
        reserve = max(reserve, 10240)
    if decode_on and s.moe_a2a_backend == "deepep":
        reserve += 2048
    return reserve


def mem_fraction_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 4c (§4): the default fraction, then the VLM cut (§4.4.1, not re-rounded)."""
    if res.mem_fraction_static is not None:
        return res
    if res.gpu_mem_mib is None:
        return _declare(res, "mem_fraction_static", 0.95, "capacity unknown (§4.2)")
    reserve = reserved_memory_mib(inp, res)
    mfs = mem_fraction_from_reserve(res.gpu_mem_mib, reserve)
    res = replace(res, reserved_mib=reserve)
    res = _declare(res, "mem_fraction_static", mfs,
                   f"round(({res.gpu_mem_mib:g} - R {reserve:g}) / {res.gpu_mem_mib:g}, 3) (§4.2)")  # fmt: skip
    m = inp.model
    if _multimodal_active(inp) and inp.settings.disaggregation_mode != "decode" and m.has_vision_config:
        factor = vlm_fraction_factor(m.vision_layers, m.vision_hidden)
        res = _declare(res, "mem_fraction_static", mfs * factor,
                       f"VLM cut x{factor:.4f} (§4.4.1)")  # fmt: skip
    return res


def _dsa_kv_dtype(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """§8: DSA ``auto`` -> fp8_e4m3 on CUDA major >= 10, bfloat16 on older CUDA; only
    bfloat16/fp8_e4m3 accepted. HIP keeps ``auto`` (not specified; library decision)."""
    kv, gpu = res.kv_cache_dtype.lower(), inp.gpu
    if kv == "bf16":
        kv = "bfloat16"
        res = _declare(res, "kv_cache_dtype", kv, "DSA normalises bf16 (§8)")
    if kv == "auto" and gpu.is_cuda:
        major = gpu.sm_major or 0
        value = "fp8_e4m3" if major >= 10 else "bfloat16"
        return _declare(res, "kv_cache_dtype", value, f"DSA on CUDA SM major {major} (§8)")
    if kv not in ("auto", "bfloat16", "fp8_e4m3"):
        raise KVCacheConfigError(f"DSA models accept kv_cache_dtype bfloat16 or fp8_e4m3, got {kv!r}")
    return res


def _dsa_backends(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """§6.3: DSA split (prefill, decode) backends by KV dtype and SM major."""
    gpu = inp.gpu
    if gpu.is_hip:
        pair = ("triton", "triton")
    elif not gpu.is_cuda:
        return res
    else:
        fp8, sm10 = res.kv_cache_dtype == "fp8_e4m3", (gpu.sm_major or 0) >= 10
        pair = {(True, True): ("trtllm", "trtllm"), (True, False): ("flashmla_kv", "flashmla_kv"),
                (False, True): ("flashmla_sparse", "trtllm"),
                (False, False): ("flashmla_sparse", "fa3")}[(fp8, sm10)]  # fmt: skip
    why = f"DSA split backends for {res.kv_cache_dtype} (§6.3)"
    if res.dsa_prefill_backend is None:  # one set earlier (DCP) stays
        res = _declare(res, "dsa_prefill_backend", pair[0], why)
    if res.dsa_decode_backend is None:
        res = _declare(res, "dsa_decode_backend", pair[1], why)
    return res


def _dsa_dcp(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """DSA with ``--dcp-size > 1``: both DSA backends ``trtllm`` on any CUDA GPU (Hopper too);
    refused with PD disaggregation, a user topk other than 1, or a pooled index key
    (``index_kpool > 1``) (SGLang: ``arg_groups.model_overrides.deepseek_v2._dsa_dcp_overrides``
    and ``_deepseek_family_overrides``)."""
    if inp.dcp_size <= 1:
        return res
    s, check = inp.settings, "sglang.srt.arg_groups.model_overrides.deepseek_v2._dsa_dcp_overrides"
    if s.disaggregation_mode != "null":
        raise _refuse(check, "DSA DCP does not support PD disaggregation")
    if s.speculative_eagle_topk not in (None, 1):
        raise _refuse(check, "DSA DCP requires --speculative-eagle-topk 1")
    if inp.gpu.is_cuda and inp.model.index_kpool > 1:
        raise _refuse("sglang.srt.arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides",
                      f"--dcp-size > 1 is not supported for DSA with index_kpool={inp.model.index_kpool}")  # fmt: skip
    why = f"DSA with dcp_size {inp.dcp_size} forces trtllm"
    res = _declare(res, "dsa_prefill_backend", "trtllm", why)
    return _declare(res, "dsa_decode_backend", "trtllm", why)


def dsa_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5, DSA (DeepSeek family with ``index_topk``): backend ``dsa``, KV dtype, page
    ``64 * index_kpool`` **forced** on CUDA (1 on ROCm without the preshuffle path)."""
    if not inp.model.is_dsa:
        return res
    res = _dsa_dcp(inp, res)
    if _no_backend_flags(inp.settings) and not inp.gpu.is_npu:
        res = _declare(res, "attention_backend", "dsa", "DSA model override (§6.1)")
    if not inp.gpu.is_npu:
        res = _dsa_kv_dtype(inp, res)
    if res.attention_backend == "dsa":
        res = _dsa_backends(inp, res)
    if inp.gpu.is_cuda:
        res = _declare(res, "page_size", 64 * inp.model.index_kpool, "DSA forces 64 * index_kpool (§7)")
    elif inp.gpu.is_hip:
        res = _declare(res, "page_size", 1, "DSA on ROCm without preshuffle paged-MQA (§7)")
    return res


def dsv4_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5, DeepSeek-V4: backend ``dsv4`` and page 256 (NPU 128) **forced**, KV fp8_e4m3
    (NPU forced bfloat16), ``swa_full_tokens_ratio`` 0.1 (not V4.1) and 256 requests."""
    if not inp.model.is_dsv4:
        return res
    npu = inp.gpu.is_npu
    res = _declare(res, "attention_backend", "dsv4", "DeepSeek-V4 forces dsv4 (§6.1)")
    if npu:
        res = _declare(res, "prefill_attention_backend", "dsv4", "DeepSeek-V4 on NPU (§6.1)")
        res = _declare(res, "decode_attention_backend", "dsv4", "DeepSeek-V4 on NPU (§6.1)")
    else:
        res = _declare(res, "dsv4_attn_backend", "flashmla", "DeepSeek-V4 (flashmla_mega only V4.1)")
    res = _declare(res, "page_size", 128 if npu else 256, "DeepSeek-V4 forces the page (§7)")
    kv = res.kv_cache_dtype.lower()
    if npu:
        res = _declare(res, "kv_cache_dtype", "bfloat16", "DeepSeek-V4 on NPU forces bfloat16 (§8)")
    elif kv == "auto":
        res = _declare(res, "kv_cache_dtype", "fp8_e4m3", "DeepSeek-V4 auto -> fp8_e4m3 (§8)")
    elif kv not in ("bfloat16", "bf16", "fp8_e4m3"):
        raise KVCacheConfigError(f"DeepSeek-V4 accepts kv_cache_dtype fp8_e4m3 or bfloat16, got {kv!r}")
    if res.swa_full_tokens_ratio is None and model_type_row(inp.model.model_type).dsv4_swa_ratio_override:
        res = _declare(res, "swa_full_tokens_ratio", 0.1, "DeepSeek-V4 model override (§9.1)")
    if res.max_running_requests is None:
        res = _declare(res, "max_running_requests", 256, "DeepSeek-V4 model override (§10)")
    _dsv4_speculative_check(inp)
    return res


def _dsv4_speculative_check(inp: LaunchInputs) -> None:
    """DeepSeek-V4 takes EAGLE with an explicit ``--speculative-eagle-topk 1`` or DSPARK, checked
    on the raw flags before any speculative default (SGLang:
    ``arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults``)."""
    algo, topk = inp.settings.speculative_algorithm, inp.settings.speculative_eagle_topk
    check = "sglang.srt.arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults"
    if algo is not None and algo not in ("EAGLE", "DSPARK"):
        raise _refuse(check, f"DeepSeek-V4 supports only the EAGLE and DSPARK speculative algorithms, got {algo}")
    if algo == "EAGLE" and topk != 1:
        raise _refuse(check, f"DeepSeek-V4 with EAGLE needs an explicit --speculative-eagle-topk 1 (got {topk})")


def _family_backend(inp: LaunchInputs, res: LaunchResolution) -> tuple[str | None, int | None]:
    """§6.1 per-architecture backend (and page) when the family's flag condition holds."""
    m, g, s = inp.model, inp.gpu, inp.settings
    free, unset = _no_backend_flags(s), s.attention_backend is None
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    if m.has_arch(_DEEPSEEK_FAMILY) and not m.is_dsa and g.is_sm100 and free:
        return "trtllm_mla", None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GPT_OSS]) and free:
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.LLAMA4]) and unset:
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.MIMO_V2]) and g.is_sm100 and free:
        return "fa4", None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.QWEN3_NEXT]) and g.is_sm100 and unset:
        return _qwen3_5_hybrid_backend(inp, res)
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GEMMA4]) and unset:
        return _gemma4_backend(inp), None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.NEMOTRON_H]) and g.is_blackwell and free:
        if g.is_sm100 and (not spec or (topk or 1) <= 1):
            return "trtllm_mha", 64 if spec else None
        # model_overrides.nemotron_h._nemotron_h_overrides: any other speculative launch -> triton
        return ("triton", None) if spec else (None, None)
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.FALCON_H1]) and g.is_sm100 and unset:
        return "triton", None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GRANITE_HYBRID]) and m.is_mamba_radix and g.is_sm100 and unset:
        return "flashinfer", None
    return None, None


def _gemma4_backend(inp: LaunchInputs) -> str:
    """Gemma-4 without ``--attention-backend``: ``trtllm_mha`` on SM100, ``triton`` elsewhere
    (Hopper and Ampere included) and for the diffusion variant (SGLang:
    ``arg_groups.model_overrides.gemma4._gemma4_overrides``)."""
    first = row_for(inp.model.architectures[0])
    diffusion = first is not None and first.block_diffusion
    return "trtllm_mha" if inp.gpu.is_sm100 and not diffusion else "triton"


def _qwen3_vl_hopper_decode_backend(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Qwen3-VL on a large Hopper GPU decodes with ``flashinfer`` when no attention or decode
    backend was given (SGLang: ``arg_groups.model_overrides.qwen3_vl.
    _qwen3vl_hopper_serving_overrides``)."""
    if not large_hopper_qwen3_vl(inp) or res.attention_backend is not None or res.decode_attention_backend:
        return res
    return _declare(res, "decode_attention_backend", "flashinfer", "Qwen3-VL on a large Hopper GPU "
                    "(qwen3_vl._qwen3vl_hopper_serving_overrides)")  # fmt: skip


def _qwen3_5_hybrid_backend(inp: LaunchInputs, res: LaunchResolution) -> tuple[str, int]:
    """Qwen3-Next / Qwen3.5 on SM100 without ``--attention-backend``: ``trtllm_mha`` with page 64
    when the generic default is trtllm_mha and page 1 is not required (it is with the radix cache
    on, no extra buffer and no speculation), else ``triton`` with page 1; the page is **forced**
    over a user's ``--page-size`` (SGLang:
    ``arg_groups.model_overrides.qwen3_5._qwen3_5_hybrid_overrides``).

    QUIRK §6.4: the Mamba strategy is still "auto" here, which is not extra-buffer, so a default
    launch gets triton / page 1 although extra_buffer is chosen right after.
    """
    generic = generic_attention_backend(inp, res)
    extra = res.mamba_radix_cache_strategy.startswith("extra_buffer")
    page_one_needed = not extra and not res.disable_radix_cache and inp.settings.speculative_algorithm is None
    if generic == "trtllm_mha" and not page_one_needed:
        return "trtllm_mha", 64
    return "triton", 1


def attention_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5 (§6.1, §7): per-architecture attention backend and page size (fill-only page)."""
    if inp.model.is_dsv4 or inp.model.is_dsa or inp.gpu.is_npu:
        return res
    res = _qwen3_vl_hopper_decode_backend(inp, res)
    backend, page = _family_backend(inp, res)
    if backend is not None:
        res = _declare(res, "attention_backend", backend, f"{inp.model.architectures[0]} override (§6.1)")
    # qwen3_5._qwen3_5_hybrid_overrides forces the page over a user's
    forced = inp.model.has_arch(_BACKEND_RULE[LaunchBackendRule.QWEN3_NEXT])
    if page is not None and (res.page_size is None or (forced and res.page_size != page)):
        res = _declare(res, "page_size", page, f"{inp.model.architectures[0]} override (§7)")
    nemotron_spec = inp.model.has_arch(_BACKEND_RULE[LaunchBackendRule.NEMOTRON_H]) and inp.gpu.is_sm100
    spec = inp.settings.speculative_algorithm is not None
    if nemotron_spec and backend == "trtllm_mha" and spec and res.mamba_radix_cache_strategy == "auto":
        res = _declare(res, "mamba_radix_cache_strategy", "extra_buffer", "Nemotron-H SM100 with speculation (§6.1)")
    return res


_MODEL_HOOK = "sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments"
_LLAMA4_BACKENDS = frozenset({"fa3", "aiter", "triton", "ascend", "trtllm_mha", "intel_xpu"})
_GEMMA4_BACKENDS = frozenset({"trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter"})


def model_backend_check(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """After the model overrides: Llama-4 needs fa3/aiter/triton/ascend/trtllm_mha/intel_xpu as the
    attention backend; Gemma-4 needs trtllm_mha/triton/fa4/ascend/intel_xpu/intel_amx/aiter for
    prefill and decode (SGLang: ``arg_groups.model_hook.handle_model_specific_adjustments``)."""
    first = row_for(inp.model.architectures[0])
    check = first.launch_backend_check if first is not None else None
    if check is LaunchBackendCheck.LLAMA4 and res.attention_backend not in _LLAMA4_BACKENDS:
        raise _refuse(_MODEL_HOOK, f"Llama-4 needs one of {sorted(_LLAMA4_BACKENDS)} as the attention backend, got "
                      f"{res.attention_backend}")  # fmt: skip
    if check is LaunchBackendCheck.GEMMA4:
        prefill = res.prefill_attention_backend or res.attention_backend
        decode = res.decode_attention_backend or res.attention_backend
        if prefill not in _GEMMA4_BACKENDS or decode not in _GEMMA4_BACKENDS:
            raise _refuse(_MODEL_HOOK, f"Gemma-4 needs one of {sorted(_GEMMA4_BACKENDS)} for prefill and decode, got "
                          f"prefill={prefill}, decode={decode}")  # fmt: skip
    return res


def hybrid_swa_memory_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5 (§9.2): Gemma-2/3, Exaone-4 (with pattern), Olmo2/3 force hybrid-SWA memory off."""
    if inp.model.forces_disable_hybrid_swa_memory and not res.disable_hybrid_swa_memory:
        return _declare(res, "disable_hybrid_swa_memory", True, "model override (§9.2)")
    return res


def mamba_strategy_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5 (§9.3): ``auto`` -> ``extra_buffer`` when (overlap on or page > 1) and supported,
    else ``no_buffer`` with the overlap scheduler forced off. Radix off -> no strategy.
    Assumes the default ``linear_attn_backend`` triton."""
    m = inp.model
    if not m.is_mamba_radix or res.disable_radix_cache or res.mamba_radix_cache_strategy != "auto":
        return res
    overlap = not res.disable_overlap_schedule
    if (overlap or (res.page_size or 1) > 1) and m.mamba_extra_buffer:
        return _declare(res, "mamba_radix_cache_strategy", "extra_buffer", "Mamba radix auto (§9.3)")
    res = _declare(res, "mamba_radix_cache_strategy", "no_buffer", "Mamba radix auto (§9.3)")
    return _declare(res, "disable_overlap_schedule", True, "no_buffer Mamba radix cache (§9.3)")


def generic_attention_backend(inp: LaunchInputs, res: LaunchResolution) -> str:
    """§6.2 ``get_default_attn_backend`` with the *user* speculative topk (auto topk comes later)."""
    m, g, s = inp.model, inp.gpu, inp.settings
    if m.has_arch(_AUDIO_ENCODER_DECODER):
        return "flashinfer"
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    # utils.common.is_no_spec_infer_or_topk_one: an unset topk passes at any page size.
    spec_ok = topk is None or (topk == 1 and res.page_size in (None, 1))
    if m.is_mla:
        if g.is_sm90:
            return "fa3"
        if g.is_sm100:
            return "flashinfer"
        if g.is_hip:
            # OPEN-L7 decided: total KV heads over attention TP (floored at 1).
            attn_tp = max(1, inp.tp_size // inp.attn_dp_size)
            return "aiter" if max(1, m.num_kv_heads // attn_tp) in (16, 128) else "triton"
        return "triton"
    if g.is_sm90 and spec_ok:
        return "fa3"
    if g.is_sm100 and spec_ok and (not spec or topk is not None or (s.speculative_algorithm or "").upper() == "DFLASH"):
        return "fa4" if m.kv_head_dims_differ else "trtllm_mha"
    if g.is_hip:
        return "aiter"
    return "triton" if m.has_attention_sinks else "flashinfer"  # flashinfer assumed installed


def generic_backend_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 6 (§6.2): fill the backend, snap the page per backend (§7), fa3+fp8_e5m2 fallback,
    HIP aiter x0.85 (§4.4.2), late prefill-graph disables (§3)."""
    s = inp.settings
    if res.attention_backend is None:
        pre, dec = res.prefill_attention_backend, res.decode_attention_backend
        if pre is not None and pre == dec:
            res = _declare(res, "attention_backend", pre, "prefill == decode backend (§6.2)")
        else:
            res = _declare(res, "attention_backend", generic_attention_backend(inp, res),
                           "generic default (§6.2)")  # fmt: skip
    if res.attention_backend == "fa3" and res.kv_cache_dtype == "fp8_e5m2":
        res = _declare(res, "attention_backend", "triton", "fa3 does not take fp8_e5m2 KV (§6.2)")
    res = _page_snap(inp, res)
    _trtllm_mla_check(inp, res)
    ctx = s.context_length or inp.model.context_length
    if res.attention_backend == "aiter" and ctx > 8192 and res.mem_fraction_static is not None:
        honored = s.mem_fraction_static is not None and s.aiter_honor_explicit_mem_fraction
        if not honored:  # QUIRK §4.4.2: also scales a user-given fraction
            res = _declare(res, "mem_fraction_static", res.mem_fraction_static * 0.85,
                           f"HIP aiter with context {ctx} > 8192 (§4.4.2)")  # fmt: skip
    prefill = res.prefill_attention_backend or res.attention_backend
    late = (inp.model.has_arch(_LATE_TRTLLM_MLA_PREFILL) and prefill == "trtllm_mla") or prefill in (
        "torch_native",
        "flex_attention",
    )
    if late and res.prefill_cuda_graph != "disabled":
        # QUIRK §14.2: the reserve already counted this graph (1536 MiB for MLA).
        res = _declare(res, "prefill_cuda_graph", "disabled", f"{prefill} prefill backend (§3, after)")
    return res


def _trtllm_mla_check(inp: LaunchInputs, res: LaunchResolution) -> None:
    """``trtllm_mla`` (as the backend or decode backend) needs Blackwell and an fp8_e4m3 / bf16 /
    auto KV cache (SGLang: ``arg_groups.overrides._mla_kv_cache_dtype_checks``)."""
    if "trtllm_mla" not in (res.attention_backend, res.decode_attention_backend):
        return
    check = "sglang.srt.arg_groups.overrides._mla_kv_cache_dtype_checks"
    if not inp.gpu.is_blackwell:
        raise _refuse(check, f"the trtllm_mla backend needs a Blackwell GPU (SM100/SM12x), not {inp.gpu.name}")
    if res.kv_cache_dtype not in ("fp8_e4m3", "bf16", "auto"):
        raise _refuse(check, f"the trtllm_mla backend takes kv_cache_dtype fp8_e4m3, bf16 or auto, not "
                      f"{res.kv_cache_dtype}")  # fmt: skip


def _page_snap(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """§7 backend page rules; they compare the current value, set or not."""
    main, pre, dec = res.attention_backend, res.prefill_attention_backend, res.decode_attention_backend
    any_phase, attn_or_decode = {main, pre, dec}, {main, dec}
    page, topk = res.page_size, inp.settings.speculative_eagle_topk
    new: int | None = None
    if "flashmla" in attn_or_decode or "hpc_ops" in any_phase:
        new = 64
    elif attn_or_decode & {"trtllm_mla"} or "cutedsl_mla" in any_phase:
        new = page if page in (32, 64) else 64
    elif "trtllm_mha" in any_phase:
        new = page if page in (16, 32, 64, 128) else 64
    elif "fa4" in any_phase and not inp.model.is_mla and inp.gpu.is_sm100 and (topk or 1) <= 1:
        new = 128
    if new is not None and new != page:
        res = _declare(res, "page_size", new, f"page rule of the {main} backend (§7)")
    return res


def page_default_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 7 (§7): page 1 if still unset."""
    return res if res.page_size is not None else _declare(res, "page_size", 1, "default (§7)")


def dp_attention_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 8 (§11): ``chunked_prefill_size //= attn_dp_size``; prefill graph re-clamped."""
    dp, chunk = inp.attn_dp_size, res.chunked_prefill_size
    if dp <= 1 or chunk is None or chunk <= 0:
        return res
    res = _declare(res, "chunked_prefill_size", chunk // dp, f"DP attention: {chunk} // {dp} (§11)")
    # parallel_hook.handle_data_parallelism re-clamps only a prefill graph still enabled.
    graph_on = res.prefill_cuda_graph != "disabled"
    if graph_on and res.prefill_graph_max_bs is not None and res.prefill_graph_max_bs > chunk // dp:
        max_bs = chunk // dp
        res = replace(res, prefill_graph_max_bs=max_bs,
                      prefill_graph_bs_count=prefill_graph_bs_count(max_bs))  # fmt: skip
    return res


def pipeline_overlap_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """PP > 1 turns the overlap scheduler off, after the Mamba strategy was chosen with it on
    (SGLang: ``arg_groups.overrides._pipeline_parallel_overlap_disable``, run just before the
    speculative hook); the Mamba state slots per request follow the final value."""
    if inp.pp_size > 1 and not res.disable_overlap_schedule:
        return _declare(res, "disable_overlap_schedule", True, "pipeline parallelism disables the overlap scheduler")
    return res


_SPEC_HOOK = "sglang.srt.arg_groups.speculative_hook"
NGRAM_MAX_BFS_BREADTH = 10  # SGLang's --speculative-ngram-max-bfs-breadth default
DFLASH_DEFAULT_BLOCK_SIZE = 16  # used when the draft config names no block_size


def _eagle_family(inp: LaunchInputs, res: LaunchResolution, algo: str) -> LaunchResolution:
    """EAGLE/EAGLE3/STANDALONE (``speculative_hook._handle_eagle_family``): auto (steps, topk,
    draft) only when steps are unset, and then topk/draft must be unset too; topk 1 forces
    draft = steps + 1; topk > 1 needs no trtllm_mha and, at page > 1, flashinfer/fa3/triton."""
    if algo == "STANDALONE" and inp.attn_dp_size > 1:
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "STANDALONE speculative decoding does not support "
                      "DP attention")  # fmt: skip
    if res.speculative_num_steps is None:
        if res.speculative_eagle_topk is not None or res.speculative_num_draft_tokens is not None:
            raise _refuse(
                f"{_SPEC_HOOK}._handle_eagle_family",
                "--speculative-eagle-topk / --speculative-num-draft-tokens need --speculative-num-steps "
                "(SGLang chooses all three only when none is given)",
            )
        wide = algo != "STANDALONE" and inp.model.architectures[0] in _WIDE_SPEC_ARCHS
        auto = (5, 4, 8) if wide else (3, 1, 4)
        why = f"auto params for {inp.model.architectures[0]} (speculative_hook._auto_choose_speculative_params)"
        res = _declare(res, "speculative_num_steps", auto[0], why)
        res = _declare(res, "speculative_eagle_topk", auto[1], why)
        res = _declare(res, "speculative_num_draft_tokens", auto[2], why)
    topk = res.speculative_eagle_topk
    if topk is None:  # SGLang compares None > 1 and fails with a TypeError
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "--speculative-num-steps needs --speculative-eagle-topk")
    if topk > 1 and "trtllm_mha" in (res.attention_backend, res.decode_attention_backend):
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", "trtllm_mha backend only supports topk = 1")
    if topk == 1 and res.speculative_num_steps is not None:
        draft = res.speculative_num_steps + 1
        if res.speculative_num_draft_tokens != draft:
            why = "topk 1: steps + 1 (speculative_hook._handle_eagle_family)"
            res = _declare(res, "speculative_num_draft_tokens", draft, why)
    if topk > 1 and (res.page_size or 1) > 1 and res.attention_backend not in ("flashinfer", "fa3", "triton"):
        raise _refuse(f"{_SPEC_HOOK}._handle_eagle_family", f"speculative_eagle_topk > 1 with page_size > 1 needs "
                      f"flashinfer, fa3 or triton, got {res.attention_backend}")  # fmt: skip
    return res


def _ngram(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """NGRAM (``speculative_hook._handle_ngram``): topk = the BFS breadth (10), draft tokens 12,
    steps = draft // topk; topk > 1 at page > 1 needs flashinfer; no DP attention."""
    why = "NGRAM default (speculative_hook._handle_ngram)"
    res = _declare(res, "speculative_eagle_topk", NGRAM_MAX_BFS_BREADTH, why)
    if res.speculative_num_draft_tokens is None:
        res = _declare(res, "speculative_num_draft_tokens", 12, why)
    if res.speculative_num_steps is None:
        draft = res.speculative_num_draft_tokens or 12
        res = _declare(res, "speculative_num_steps", draft // NGRAM_MAX_BFS_BREADTH, why)
    if (res.page_size or 1) > 1 and res.attention_backend != "flashinfer":
        raise _refuse(f"{_SPEC_HOOK}._handle_ngram", f"NGRAM's topk {NGRAM_MAX_BFS_BREADTH} with page_size "
                      f"{res.page_size} > 1 is only supported on the flashinfer backend, got {res.attention_backend}")
    if inp.attn_dp_size > 1:
        raise _refuse(f"{_SPEC_HOOK}._handle_ngram", "ngram speculative decoding does not support DP attention")
    return res


def _dflash(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """DFLASH (``speculative_hook._handle_dflash``): PP 1, a draft model, no DP attention (it
    needs --enable-dp-lm-head); steps 1, topk 1; draft tokens = the draft's block size (16)."""
    s, check = inp.settings, f"{_SPEC_HOOK}._handle_dflash"
    if inp.attn_dp_size > 1:
        raise _refuse(check, "DFLASH with DP attention requires --enable-dp-lm-head")
    if inp.pp_size != 1:
        raise _refuse(check, "DFLASH speculative decoding only supports pp_size == 1")
    if s.speculative_draft_model_path is None:
        raise _refuse(check, "DFLASH speculative decoding requires --speculative-draft-model-path")
    res = _declare(res, "speculative_num_steps", 1, "DFLASH: one step (speculative_hook._handle_dflash)")
    res = _declare(res, "speculative_eagle_topk", 1, "DFLASH: topk 1 (speculative_hook._handle_dflash)")
    if res.speculative_num_draft_tokens is None:
        block = s.speculative_dflash_block_size or DFLASH_DEFAULT_BLOCK_SIZE
        res = _declare(res, "speculative_num_draft_tokens", block, "DFLASH: the draft model's block size")
    return res


def speculative_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 9 (§10, ``speculative_hook.handle_speculative_decoding``): upper-case, NEXTN ->
    EAGLE, 48 requests, then the algorithm's own defaults and checks."""
    algo = res.speculative_algorithm
    if algo is None:
        return res
    algo = algo.upper()
    res = replace(res, speculative_algorithm=algo)  # SGLang's enum is upper case
    if algo == "NEXTN":
        why = "NEXTN is EAGLE (speculative_hook.handle_speculative_decoding)"
        res = _declare(res, "speculative_algorithm", "EAGLE", why)
        algo = "EAGLE"
    if algo == "DFLASH":
        res = _dflash(inp, res)
    if res.max_running_requests is None:
        res = _declare(res, "max_running_requests", 48, f"{algo} default (speculative_hook)")
    if algo in _EAGLE_FAMILY:
        res = _eagle_family(inp, res, algo)
    elif algo == "NGRAM":
        res = _ngram(inp, res)
    elif algo == "DSPARK":
        res = _declare(res, "speculative_num_steps", 1, f"{algo} forces one step (§10)")
        res = _declare(res, "speculative_eagle_topk", 1, f"{algo} forces topk 1 (§10)")
    return res


def swa_ratio_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 10 (§9.1): "explicit" = non-None at this point (QUIRK: DSV4's model-declared 0.1
    counts, so V4/V4-Pro size in ratio mode); effective value falls back to 0.8."""
    ratio = res.swa_full_tokens_ratio
    res = replace(res, swa_full_tokens_ratio_explicit=ratio is not None)
    if ratio is None:
        res = _declare(res, "swa_full_tokens_ratio", 0.8, "field fallback (§9.1)")
    value = res.swa_full_tokens_ratio
    if value is None or not 0 < value <= 1:
        raise KVCacheConfigError(f"swa_full_tokens_ratio must be in (0, 1], got {value!r}")
    return res


VLM_CACHE_MIB = 100  # SGLANG_VLM_CACHE_SIZE_MB default
MM_FEATURE_CACHE_MIB = 1024  # SGLANG_MM_FEATURE_CACHE_MB default


def multimodal_reserve_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """The KV-budget share held for multimodal allocations made after sizing (MiB): the embedding
    cache (100) for an active multimodal part; Qwen3-VL on a large Hopper GPU turns that cache
    off and moves features over CUDA IPC, whose pool is reserved instead (1024 MiB, 3072 with a
    user ``--max-running-requests >= 400``). SGLang: ``mem_cache.kv_cache_configurator.
    mm_runtime_reservation_gb`` with the environment ``qwen3_vl._qwen3vl_hopper_serving_overrides``
    sets."""
    if not _multimodal_active(inp):
        return res
    if not large_hopper_qwen3_vl(inp):
        return replace(res, multimodal_reserve_mib=float(VLM_CACHE_MIB))
    mrr = inp.settings.max_running_requests
    feature = 3 * 1024 if mrr is not None and mrr >= 400 else MM_FEATURE_CACHE_MIB
    return _declare(res, "multimodal_reserve_mib", float(feature), "Qwen3-VL on a large Hopper GPU: CUDA-IPC "
                    "feature pool, no embedding cache (qwen3_vl._qwen3vl_hopper_serving_overrides)")  # fmt: skip


def capability_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 11 (§9.4): PD decode and Whisper run without the radix cache."""
    if res.disable_radix_cache:
        return res
    if inp.settings.disaggregation_mode == "decode":
        return _declare(res, "disable_radix_cache", True, "PD decode role (§9.4)")
    if inp.model.has_arch(_AUDIO_ENCODER_DECODER):
        return _declare(res, "disable_radix_cache", True, "Whisper encoder-decoder (§9.4)")
    return res


PIPELINE: tuple[Step, ...] = (
    cuda_graph_step,  # 2
    platform_step,  # 3
    capacity_tier_step,  # 4
    prefill_graph_step,
    mem_fraction_step,
    dsv4_override,  # 5
    dsa_override,
    attention_override,
    model_backend_check,
    hybrid_swa_memory_override,
    mamba_strategy_override,
    generic_backend_step,  # 6
    page_default_step,  # 7
    dp_attention_step,  # 8
    pipeline_overlap_step,
    speculative_step,  # 9
    swa_ratio_step,  # 10
    capability_step,  # 11
    multimodal_reserve_step,
)


def _initial(inp: LaunchInputs) -> LaunchResolution:
    """The raw user input before any step (§0: kept separately, last declaration wins)."""
    s, gpu = inp.settings, inp.gpu
    _validate(inp)
    return LaunchResolution(
        gpu_mem_mib=gpu.capacity_mib,
        mem_fraction_static=s.mem_fraction_static,
        chunked_prefill_size=s.chunked_prefill_size,
        max_prefill_tokens=16384 if s.max_prefill_tokens is None else s.max_prefill_tokens,
        cuda_graph_max_bs=s.cuda_graph_max_bs,
        prefill_cuda_graph="breakable" if gpu.is_cuda else "disabled",
        kv_cache_dtype=s.kv_cache_dtype or "auto",
        page_size=s.page_size,
        attention_backend=s.attention_backend,
        prefill_attention_backend=s.prefill_attention_backend,
        decode_attention_backend=s.decode_attention_backend,
        swa_full_tokens_ratio=s.swa_full_tokens_ratio,
        disable_hybrid_swa_memory=s.disable_hybrid_swa_memory,
        mamba_radix_cache_strategy=s.mamba_radix_cache_strategy,
        disable_overlap_schedule=s.disable_overlap_schedule,
        disable_radix_cache=s.disable_radix_cache,
        max_running_requests=s.max_running_requests,
        speculative_algorithm=s.speculative_algorithm,
        speculative_num_steps=s.speculative_num_steps,
        speculative_eagle_topk=s.speculative_eagle_topk,
        speculative_num_draft_tokens=s.speculative_num_draft_tokens,
    )


def _validate(inp: LaunchInputs) -> None:
    s = inp.settings
    if min(inp.tp_size, inp.pp_size, inp.attn_dp_size) < 1 or inp.tp_size % inp.attn_dp_size:
        raise KVCacheConfigError(
            f"tp_size={inp.tp_size}, pp_size={inp.pp_size}, attn_dp_size={inp.attn_dp_size}: "
            "sizes must be >= 1 and tp_size divisible by attn_dp_size"
        )
    if s.mem_fraction_static is not None and not 0 < s.mem_fraction_static < 1:
        raise KVCacheConfigError(f"mem_fraction_static must be in (0, 1), got {s.mem_fraction_static}")
    if s.speculative_algorithm is not None and s.speculative_algorithm.upper() not in _SPEC_ALGORITHMS:
        raise KVCacheConfigError(
            f"unknown speculative_algorithm {s.speculative_algorithm!r}; use one of {sorted(_SPEC_ALGORITHMS)}"
        )
    if s.disaggregation_mode not in ("null", "prefill", "decode"):
        raise KVCacheConfigError(f"disaggregation_mode must be null, prefill or decode, got {s.disaggregation_mode!r}")


def resolve_launch_defaults(
    model: LaunchModelFacts,
    gpu: Accelerator,
    *,
    tp_size: int = 1,
    pp_size: int = 1,
    attn_dp_size: int = 1,
    settings: LaunchSettings | None = None,
    dcp_size: int = 1,
) -> LaunchResolution:
    """Run :data:`PIPELINE` and return every resolved setting with the defaults applied."""
    inp = LaunchInputs(model, gpu, tp_size, pp_size, attn_dp_size, settings or LaunchSettings(), dcp_size)
    res = _initial(inp)
    for step in PIPELINE:
        res = step(inp, res)
    return res


# --- §5: from the fraction to the KV budget -------------------------------------------------


def float32_round(x: float) -> float:
    """Round to the nearest float32 (the MIN all-reduce runs on a float32 tensor)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def kv_budget_bytes(pre_gib: float, avail_gib: float, mem_fraction_static: float, multimodal_gib: float = 0.0) -> int:
    """resolve.md §2: ``int((avail - pre * (1 - mfs) - mm) * 2**30)`` bytes (before any Mamba
    share). ``pre``: free GiB before weights load; ``avail``: free GiB after. Raises
    :class:`InsufficientMemoryError` with SGLang's message when nothing is left."""
    rest = avail_gib - pre_gib * (1 - mem_fraction_static) - multimodal_gib
    if rest <= 0:
        minimum = 1 - avail_gib / pre_gib
        raise InsufficientMemoryError(
            f"Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static above "
            f"{math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = "
            f"{minimum:.4f}). If using speculative decoding, draft weights are now counted."
        )
    return int(rest * 2**30)


@dataclass(frozen=True)
class KVBudgetEstimate:
    """§5 estimate: GiB floats as SGLang holds them, and the resulting KV bytes."""

    pre_gib: float
    avail_gib: float
    slack_gib: float
    available_bytes: int


def estimate_kv_budget(
    capacity_mib: float,
    weights_bytes: int,
    mem_fraction_static: float,
    *,
    overhead_gib: float = 1.0,
    world_size: int = 1,
    multimodal_gib: float = 0.0,
) -> KVBudgetEstimate:
    """Estimate the KV budget without a GPU (§5, OPEN-L2).

    ``pre = capacity_mib / 1024 - overhead_gib`` (CUDA context, NCCL and custom all-reduce
    buffers; 1.0 GiB by default, a library decision inside the 0.5-3 GiB the spec reports),
    ``avail = pre - weights_bytes / 2**30``; with ``world_size > 1`` both byte counts are rounded
    to float32 like SGLang's MIN all-reduce. Budget = :func:`kv_budget_bytes`.
    """
    pre_bytes = capacity_mib * 2**20 - overhead_gib * 2**30
    avail_bytes = pre_bytes - weights_bytes
    if world_size > 1:
        pre_bytes, avail_bytes = float32_round(pre_bytes), float32_round(avail_bytes)
    pre, avail = pre_bytes / 2**30, avail_bytes / 2**30
    budget = kv_budget_bytes(pre, avail, mem_fraction_static, multimodal_gib)
    return KVBudgetEstimate(pre, avail, pre * (1 - mem_fraction_static), budget)
