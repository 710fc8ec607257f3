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
prefill context parallel, DCP, two-batch overlap, PD KV sharding, post-capture KV sizing,
deterministic inference, HiSparse, ``--enable-mis``, embedding-only heads, the ``llama-2`` path
rule and the Qwen3-VL Hopper ``max_bs`` raise.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .errors import InsufficientMemoryError, KVCacheConfigError
from .gpus import Accelerator
from .validate import TrackedConfig, reading_config

SettingValue = str | int | float | bool | None
DisaggregationMode = Literal["null", "prefill", "decode"]

# --- architecture sets (launch_defaults.md §3, §6, §9; sizing.md §2.2, §2.6) ------------------

_MLA_ARCHS = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN", "DeepseekVL2ForCausalLM", "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration", "KimiLinearForCausalLM", "KimiK3LinearForCausalLM",
    "KimiK3ForConditionalGeneration", "LongcatFlashForCausalLM", "HYV4ForCausalLM",
    "DotsVLMForCausalLM", "Dots3NoteForCausalLM", "MistralLarge3ForCausalLM",
    "Eagle3DeepseekV2ForCausalLM", "GigaChat35ForCausalLM", "MiniCPM3ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "SarvamMLAForCausalLM",
})  # fmt: skip
# DeepSeek-V3-style architectures; with `index_topk` they are DSA (sizing.md §2.6).
_DEEPSEEK_FAMILY = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
    "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM", "Dots3NoteForCausalLM",
    "HYV4ForCausalLM", "KimiK25ForConditionalGeneration",
})  # fmt: skip
_DSV4_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
_HYBRID_SWA_ARCHS = frozenset({
    "GptOssForCausalLM", "Llama4ForConditionalGeneration", "Llama4ForCausalLM",
    "DeepseekV4ForCausalLM", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM",
})  # fmt: skip
_MAMBA_RADIX_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "KimiLinearForCausalLM",
    "KimiK3LinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM",
    "BailingMoeV3ForCausalLM", "NemotronHForCausalLM", "FalconH1ForCausalLM",
    "JetNemotronForCausalLM", "JetVLMForConditionalGeneration", "Lfm2ForCausalLM",
    "Lfm2MoeForCausalLM", "GraniteMoeHybridForCausalLM", "ZayaForCausalLM",
    "Glm5NextForConditionalGeneration",
})  # fmt: skip
# §9.3: Mamba-radix architectures without extra-buffer support.
_NO_EXTRA_BUFFER_ARCHS = frozenset({
    "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration",
})  # fmt: skip
_QWEN3_NEXT_LIKE = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
})  # fmt: skip
# §4.4.1: multimodal part off unless --enable-multimodal.
_MULTIMODAL_OPT_IN = frozenset({
    "Llama4ForConditionalGeneration", "Gemma3ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
})  # fmt: skip
# §3: multimodal models that keep the breakable prefill graph.
_BREAKABLE_MULTIMODAL = frozenset({
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "KimiK3ForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration",
})  # fmt: skip
# §9.2: forced --disable-hybrid-swa-memory (Exaone-4 only with sliding_window_pattern).
_NO_HYBRID_SWA_MEMORY = frozenset({
    "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Olmo2ForCausalLM",
    "Olmo3ForCausalLM",
})  # fmt: skip
_SPEC_ALGORITHMS = frozenset({
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH", "DSPARK", "FROZEN_KV_MTP", "NGRAM",
})  # fmt: skip
_EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
_WIDE_SPEC_ARCHS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})


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
    ):
        factor = 1.0
    defaults = {"gemma3_text": 131072}
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):  # fmt: skip
        if t.get(key):
            return int(factor * int(t[key]))
    return int(factor * defaults.get(str(t.get("model_type")), 2048))


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
    is_mla = bool(names & _MLA_ARCHS) and not ("DeepseekVL2ForCausalLM" in names and t.get("use_mla") is False)
    vision = cfg.get("vision_config")
    opt_in = bool(names & _MULTIMODAL_OPT_IN)
    multimodal = (
        opt_in
        or isinstance(vision, Mapping)
        or any(a.endswith("ForConditionalGeneration") and "Whisper" not in a for a in arch)
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
        is_kda=bool(lac.get("kda_layers")) and "Glm5NextForConditionalGeneration" not in names,
        is_multimodal=multimodal,
        multimodal_opt_in=opt_in,
        breakable_multimodal=bool(names & _BREAKABLE_MULTIMODAL),
        has_vision_config=isinstance(vision, Mapping),
        vision_layers=_opt_int(vision, "num_hidden_layers"),
        vision_hidden=_opt_int(vision, "hidden_size"),
        has_attention_sinks="GptOssForCausalLM" in names
        or bool(t.get("add_swa_attention_sink_bias") or t.get("add_full_attention_sink_bias")),
        kv_head_dims_differ=not is_mla and v_head_dim is not None and v_head_dim != head_dim,
        forces_disable_hybrid_swa_memory=bool(names & _NO_HYBRID_SWA_MEMORY)
        or ("Exaone4ForCausalLM" in names and "sliding_window_pattern" in t),
    )


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
    applied: tuple[AppliedDefault, ...] = ()

    def reasons(self, setting: str) -> tuple[AppliedDefault, ...]:
        """The declarations of one setting, in pipeline order (the last one won)."""
        return tuple(a for a in self.applied if a.setting == setting)

    def explain(self) -> str:
        """One line per applied default, like a server log: ``setting = value  # reason``."""
        return "\n".join(f"{a.setting} = {a.value!r}  # {a.reason}" for a in self.applied)


def _declare(res: LaunchResolution, setting: str, value: SettingValue, reason: str) -> LaunchResolution:
    """Set ``setting`` (a LaunchResolution field) and record why; last declaration wins (§0)."""
    changes: dict[str, Any] = {setting: value, "applied": (*res.applied, AppliedDefault(setting, value, reason))}
    return replace(res, **changes)


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
        res = _declare(res, "cuda_graph_max_bs", dmb, why)
    return res


def prefill_graph_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 4b (§3): prefill graph ``max_bs`` (tokens) and its batch list length.

    ``max_bs = chunk`` (non-MLA) or ``min(8192, chunk)`` (MLA), then ``min(., max_total_tokens)``
    and the PP cap 8192. With chunked prefill off (-1) ``max_prefill_tokens`` stands in
    (library decision; SGLang's value for that case was not traced).
    """
    chunk = res.chunked_prefill_size
    max_bs = chunk if chunk is not None and chunk > 0 else res.max_prefill_tokens
    if inp.model.is_mla:
        max_bs = min(8192, max_bs)
    if inp.settings.max_total_tokens is not None:
        max_bs = min(max_bs, inp.settings.max_total_tokens)
    if inp.pp_size > 1:
        max_bs = min(max_bs, 8192)
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
    res = _declare(res, "dsa_prefill_backend", pair[0], why)
    return _declare(res, "dsa_decode_backend", pair[1], why)


def dsa_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5, DSA (DeepSeek family with ``index_topk``): backend ``dsa``, KV dtype, page
    ``64 * index_kpool`` **forced** on CUDA (1 on ROCm without the preshuffle path)."""
    if not inp.model.is_dsa:
        return res
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
    if res.swa_full_tokens_ratio is None and inp.model.model_type != "deepseek_v41":
        res = _declare(res, "swa_full_tokens_ratio", 0.1, "DeepSeek-V4 model override (§9.1)")
    if res.max_running_requests is None:
        res = _declare(res, "max_running_requests", 256, "DeepSeek-V4 model override (§10)")
    return res


def _family_backend(inp: LaunchInputs, res: LaunchResolution) -> tuple[str | None, int | None]:
    """§6.1 per-architecture backend (and page) when the family's flag condition holds."""
    m, g, s = inp.model, inp.gpu, inp.settings
    free, unset = _no_backend_flags(s), s.attention_backend is None
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    if m.has_arch(_DEEPSEEK_FAMILY) and not m.is_dsa and g.is_sm100 and free:
        return "trtllm_mla", None
    if m.has_arch(frozenset({"GptOssForCausalLM"})) and free:
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(frozenset({"Llama4ForConditionalGeneration", "Llama4ForCausalLM"})) and unset:
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(frozenset({"MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM"})) and g.is_sm100 and free:
        return "fa4", None
    if m.has_arch(_QWEN3_NEXT_LIKE) and g.is_sm100 and unset:
        # QUIRK §6.4: the Mamba strategy is still "auto" here, which is not extra-buffer, so a
        # default launch gets triton / page 1 although extra_buffer is chosen right after.
        generic = generic_attention_backend(inp, res)
        keep = res.mamba_radix_cache_strategy.startswith("extra_buffer") or res.disable_radix_cache or spec
        if not keep:
            return "triton", 1
        return generic, 64 if generic == "trtllm_mha" else None
    if m.has_arch(frozenset({"NemotronHForCausalLM"})) and g.is_blackwell and free:
        if g.is_sm100 and (not spec or (topk or 1) <= 1):
            return "trtllm_mha", 64 if spec else None
        return ("triton", None) if spec and not g.is_sm100 else (None, None)
    if m.has_arch(frozenset({"FalconH1ForCausalLM", "JetNemotronForCausalLM"})) and g.is_sm100 and unset:
        return "triton", None
    if m.has_arch(frozenset({"GraniteMoeHybridForCausalLM"})) and m.is_mamba_radix and g.is_sm100 and unset:
        return "flashinfer", None
    return None, None


def attention_override(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 5 (§6.1, §7): per-architecture attention backend and page size (fill-only page)."""
    if inp.model.is_dsv4 or inp.model.is_dsa or inp.gpu.is_npu:
        return res
    backend, page = _family_backend(inp, res)
    if backend is not None:
        res = _declare(res, "attention_backend", backend, f"{inp.model.architectures[0]} override (§6.1)")
    if page is not None and res.page_size is None:
        res = _declare(res, "page_size", page, f"{inp.model.architectures[0]} override (§7)")
    nemotron_spec = inp.model.has_arch(frozenset({"NemotronHForCausalLM"})) and inp.gpu.is_sm100
    spec = inp.settings.speculative_algorithm is not None
    if nemotron_spec and backend == "trtllm_mha" and spec and res.mamba_radix_cache_strategy == "auto":
        res = _declare(res, "mamba_radix_cache_strategy", "extra_buffer", "Nemotron-H SM100 with speculation (§6.1)")
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
    if "WhisperForConditionalGeneration" in m.architectures:
        return "flashinfer"
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    spec_ok = not spec or (topk in (None, 1) and res.page_size in (None, 1))
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
    ctx = s.context_length or inp.model.context_length
    if res.attention_backend == "aiter" and ctx > 8192 and res.mem_fraction_static is not None:
        honored = s.mem_fraction_static is not None and s.aiter_honor_explicit_mem_fraction
        if not honored:  # QUIRK §4.4.2: also scales a user-given fraction
            res = _declare(res, "mem_fraction_static", res.mem_fraction_static * 0.85,
                           f"HIP aiter with context {ctx} > 8192 (§4.4.2)")  # fmt: skip
    prefill = res.prefill_attention_backend or res.attention_backend
    late = ("DeepseekV3ForCausalLM" in inp.model.architectures and prefill == "trtllm_mla") or prefill in (
        "torch_native",
        "flex_attention",
    )
    if late and res.prefill_cuda_graph != "disabled":
        # QUIRK §14.2: the reserve already counted this graph (1536 MiB for MLA).
        res = _declare(res, "prefill_cuda_graph", "disabled", f"{prefill} prefill backend (§3, after)")
    return res


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
    if res.prefill_graph_max_bs is not None and res.prefill_graph_max_bs > chunk // dp:
        max_bs = chunk // dp
        res = replace(res, prefill_graph_max_bs=max_bs,
                      prefill_graph_bs_count=prefill_graph_bs_count(max_bs))  # fmt: skip
    return res


def speculative_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 9 (§10): 48 requests; EAGLE-family (steps, topk, draft) when steps are unset:
    (5, 4, 8) for Llama/Grok, else (3, 1, 4); topk 1 forces draft = steps + 1."""
    algo = res.speculative_algorithm
    if algo is None:
        return res
    algo = algo.upper()
    res = replace(res, speculative_algorithm=algo)  # SGLang's enum is upper case
    if algo == "NEXTN":
        res = _declare(res, "speculative_algorithm", "EAGLE", "NEXTN is renamed EAGLE (§10)")
        algo = "EAGLE"
    if res.max_running_requests is None:
        res = _declare(res, "max_running_requests", 48, f"{algo} default (§10)")
    if algo in _EAGLE_FAMILY and res.speculative_num_steps is None:
        wide = algo != "STANDALONE" and inp.model.has_arch(_WIDE_SPEC_ARCHS)
        steps, topk, draft = (5, 4, 8) if wide else (3, 1, 4)
        why = f"auto speculative params for {inp.model.architectures[0]} (§10)"
        res = _declare(res, "speculative_num_steps", steps, why)
        if res.speculative_eagle_topk is None:
            res = _declare(res, "speculative_eagle_topk", topk, why)
        if res.speculative_num_draft_tokens is None:
            res = _declare(res, "speculative_num_draft_tokens", draft, why)
    if algo in ("DFLASH", "DSPARK"):
        res = _declare(res, "speculative_num_steps", 1, f"{algo} forces one step (§10)")
        res = _declare(res, "speculative_eagle_topk", 1, f"{algo} forces topk 1 (§10)")
    if algo == "NGRAM" and res.speculative_num_draft_tokens is None:
        res = _declare(res, "speculative_num_draft_tokens", 12, "NGRAM default (§10)")
    if algo in _EAGLE_FAMILY and res.speculative_eagle_topk == 1 and res.speculative_num_steps is not None:
        draft = res.speculative_num_steps + 1
        if res.speculative_num_draft_tokens != draft:
            res = _declare(res, "speculative_num_draft_tokens", draft, "topk 1: steps + 1 (§10)")
    topk = res.speculative_eagle_topk or 1
    if inp.model.is_dsv4 and (algo not in ("EAGLE", "DSPARK") or topk > 1):
        raise KVCacheConfigError("DeepSeek-V4 accepts only EAGLE with topk 1 or DSPARK (§10)")
    if topk > 1 and "trtllm_mha" in (res.attention_backend, res.decode_attention_backend):
        raise KVCacheConfigError("attention backend trtllm_mha rejects speculative topk > 1 (§10)")
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


def capability_step(inp: LaunchInputs, res: LaunchResolution) -> LaunchResolution:
    """Step 11 (§9.4): PD decode and Whisper run without the radix cache."""
    if res.disable_radix_cache:
        return res
    if inp.settings.disaggregation_mode == "decode":
        return _declare(res, "disable_radix_cache", True, "PD decode role (§9.4)")
    if "WhisperForConditionalGeneration" in inp.model.architectures:
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
    hybrid_swa_memory_override,
    mamba_strategy_override,
    generic_backend_step,  # 6
    page_default_step,  # 7
    dp_attention_step,  # 8
    speculative_step,  # 9
    swa_ratio_step,  # 10
    capability_step,  # 11
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
) -> LaunchResolution:
    """Run :data:`PIPELINE` and return every resolved setting with the defaults applied."""
    inp = LaunchInputs(model, gpu, tp_size, pp_size, attn_dp_size, settings or LaunchSettings())
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
