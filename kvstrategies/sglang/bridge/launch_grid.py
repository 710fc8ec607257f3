"""The launches checked against SGLang's own launch resolution (``verify --against sglang --launch``).

A launch is a preset model, a GPU, the parallel layout and the server flags a user would pass
(SGLang's server-argument names). :func:`default_grid` is the shipped grid: every preset on
H100-80GB, H200, B200 and A100-80GB at every TP in 1, 2, 4, 8 that divides the attention heads
(small models also on the other capacity tiers: RTX 4090 / 5090, L4, T4, A100-40GB, L40S, H20, RTX PRO 6000,
B300), then, per preset at its largest such TP, variants with fp8 KV, page 64, EAGLE (auto, explicit
chain and tree parameters, with page 64, with DP attention), NGRAM, DFLASH (with a draft model),
DP attention, DCP 2, PP 2, ``--chunked-prefill-size -1``, fp8_e5m2 KV, radix cache off and a
request cap, plus launches SGLang refuses (to check the planner refuses them too) and
launches that exercise a rule only some SGLang releases have. A grid file is a JSON list of
launch objects with the same keys as :class:`LaunchSpec`. No SGLang import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from ...core.jsonio import parse_json_text, require_object
from ...errors import KVCacheConfigError
from ...models.architectures import LaunchBackendCheck, row_for
from ...presets import load_preset_config, preset_names

# The config data of the grid ships in ``grid_configs/`` (package data, like the presets):
# ``dflash-draft.json`` is a minimal DFLASH draft model config written next to the launch (only
# its block size is read at launch: speculative_hook._handle_dflash ->
# dflash_utils.parse_dflash_draft_config).
DFLASH_DRAFT = "<dflash-draft>"

# Models without a shipped preset whose launch rules the issue named, as small configs that
# SGLang completes from its config classes (the rest of each config is the class default):
# ``grid_configs/index.json`` maps each name (the file's stem) to a description, in grid order.
# A launch's ``preset`` names one as ``synthetic:<name>``.
SYNTHETIC_PREFIX = "synthetic:"
_GRID_CONFIGS = "grid_configs"


def _grid_config_file(stem: str, what: str) -> Any:
    source = f"{_GRID_CONFIGS}/{stem}.json"
    text = resources.files(__package__).joinpath(_GRID_CONFIGS, f"{stem}.json").read_text(encoding="utf-8")
    return require_object(parse_json_text(text, source), source, what)


DFLASH_DRAFT_CONFIG: Mapping[str, Any] = MappingProxyType(_grid_config_file("dflash-draft", "a model config"))


@cache
def synthetic_config_names() -> tuple[str, ...]:
    """The synthetic configs' names in grid order (``grid_configs/index.json``)."""
    return tuple(_grid_config_file("index", "the synthetic config index"))


def synthetic_config(name: str) -> dict[str, Any]:
    """The raw config of one synthetic model (a fresh copy); an unknown name lists the known ones."""
    if name not in synthetic_config_names():
        raise KVCacheConfigError(f"unknown synthetic config {name!r}; known: {sorted(synthetic_config_names())}")
    config: dict[str, Any] = _grid_config_file(name, "a model config")
    return config


def launch_config(preset: str) -> dict[str, Any]:
    """The raw config of a launch's model: a shipped preset or a ``synthetic:`` config."""
    if preset.startswith(SYNTHETIC_PREFIX):
        return synthetic_config(preset[len(SYNTHETIC_PREFIX) :])
    return dict(load_preset_config(preset))


FLAG_NAMES = frozenset({
    "kv_cache_dtype", "page_size", "chunked_prefill_size", "attention_backend", "max_running_requests",
    "disable_radix_cache", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "speculative_draft_model_path", "moe_a2a_backend",
})  # fmt: skip

GRID_GPUS = ("H100-80GB", "H200", "B200", "A100-80GB")
GRID_TPS = (1, 2, 4, 8)


@dataclass(frozen=True)
class LaunchSpec:
    """One launch: ``flags`` are SGLang server arguments (``speculative_draft_model_path`` may be
    :data:`DFLASH_DRAFT`, the shipped draft config)."""

    name: str
    preset: str
    gpu: str
    tp_size: int = 1
    pp_size: int = 1
    attn_dp_size: int = 1
    dcp_size: int = 1
    flags: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "preset": self.preset, "gpu": self.gpu, "tp_size": self.tp_size}
        for key in ("pp_size", "attn_dp_size", "dcp_size"):
            if getattr(self, key) != 1:
                out[key] = getattr(self, key)
        if self.flags:
            out["flags"] = dict(sorted(self.flags.items()))
        return out


def spec_from_dict(item: Mapping[str, Any]) -> LaunchSpec:
    """A :class:`LaunchSpec` from a grid-file object; unknown keys or flags are refused."""
    if not isinstance(item, Mapping):
        raise KVCacheConfigError(f"a launch in the grid must be a JSON object, got {type(item).__name__}")
    known = {"name", "preset", "gpu", "tp_size", "pp_size", "attn_dp_size", "dcp_size", "flags"}
    extra = set(item) - known
    if extra or not {"preset", "gpu"} <= set(item):
        raise KVCacheConfigError(
            f"launch {item.get('name', '?')!r}: keys must be among {sorted(known)} with preset and gpu given; "
            f"unknown: {sorted(extra)}"
        )
    raw_flags = item.get("flags") or {}
    if not isinstance(raw_flags, Mapping):
        raise KVCacheConfigError(
            f"launch {item.get('name', '?')!r}: flags must be a JSON object of server arguments, "
            f"got {type(raw_flags).__name__}"
        )
    flags = dict(raw_flags)
    bad = set(flags) - FLAG_NAMES
    label = f"{item.get('name', '?')!r:.80}"
    if bad:
        raise KVCacheConfigError(
            f"launch {label}: unsupported flags {sorted(map(str, bad))[:8]}; use {sorted(FLAG_NAMES)}"
        )
    for key, value in flags.items():
        check_grid_flag(label, key, value)
    ints = {k: item.get(k, 1) for k in ("tp_size", "pp_size", "attn_dp_size", "dcp_size")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_GRID_PARALLEL for v in ints.values()):
        raise KVCacheConfigError(
            f"launch {label}: parallel sizes must be integers in [1, {MAX_GRID_PARALLEL}], got {ints!r:.120}"
        )
    for key in ("name", "preset", "gpu"):
        if key in item and not (isinstance(item[key], str) and 0 < len(item[key]) <= 256):
            raise KVCacheConfigError(f"launch {label}: {key} must be a non-empty string, got {item[key]!r:.60}")
    name = str(item.get("name") or _name(str(item["preset"]), str(item["gpu"]), ints, flags))
    return LaunchSpec(name, str(item["preset"]), str(item["gpu"]), flags=flags, **ints)


#: the largest parallel size a grid launch may name (the planner's own bound)
MAX_GRID_PARALLEL = 1024
#: each grid flag's JSON type, and for integers the smallest value SGLang accepts
_FLAG_TYPES: dict[str, tuple[type, int | None]] = {
    "kv_cache_dtype": (str, None), "attention_backend": (str, None), "speculative_algorithm": (str, None),
    "speculative_draft_model_path": (str, None), "page_size": (int, 1), "chunked_prefill_size": (int, -1),
    "max_running_requests": (int, 1), "speculative_num_steps": (int, 1), "speculative_eagle_topk": (int, 1),
    "speculative_num_draft_tokens": (int, 1), "disable_radix_cache": (bool, None), "moe_a2a_backend": (str, None),
}  # fmt: skip


def check_grid_flag(label: str, key: str, value: Any) -> None:
    """One grid flag's value: its JSON type, a bounded integer, and SGLang's argparse choices
    (:data:`~kvstrategies.sglang.tables.flags.SGLANG_FLAG_VALUES`) for the flags that have them."""
    from ..tables.flags import SGLANG_FLAG_VALUES

    kind, minimum = _FLAG_TYPES[key]
    if kind is int:
        in_range = isinstance(value, int) and (1 <= value <= 2**40 or (value == -1 and minimum == -1))
        valid = in_range and not isinstance(value, bool)
        wanted = "a positive integer" + (" or -1" if minimum == -1 else "")
    else:
        valid, wanted = isinstance(value, kind), ("true or false" if kind is bool else "a string")
    if not valid:
        raise KVCacheConfigError(f"launch {label}: flag {key} must be {wanted}, got {value!r:.60}")
    choices = SGLANG_FLAG_VALUES.get("--" + key.replace("_", "-"), ("", None))[1]
    if choices is not None and value not in choices and value != DFLASH_DRAFT:
        raise KVCacheConfigError(f"launch {label}: flag {key} {value!r:.60} is not one of SGLang's choices {choices}")


def _name(preset: str, gpu: str, sizes: Mapping[str, int], flags: Mapping[str, Any]) -> str:
    parts = [preset, gpu, f"tp{sizes['tp_size']}"]
    for key, short in (("pp_size", "pp"), ("attn_dp_size", "dp"), ("dcp_size", "dcp")):
        if sizes.get(key, 1) != 1:
            parts.append(f"{short}{sizes[key]}")
    for key, value in sorted(flags.items()):
        text = "draft" if value == DFLASH_DRAFT else str(value)
        parts.append(f"{key.replace('speculative_', 'spec-').replace('_', '-')}={text}")
    return "/".join(parts)


def _spec(preset: str, gpu: str, tp: int, **kw: Any) -> LaunchSpec:
    flags = kw.pop("flags", {})
    sizes = {"tp_size": tp, "pp_size": kw.get("pp_size", 1), "attn_dp_size": kw.get("attn_dp_size", 1),
             "dcp_size": kw.get("dcp_size", 1)}  # fmt: skip
    return LaunchSpec(_name(preset, gpu, sizes, flags), preset, gpu, tp, flags=flags, **kw)


def attention_heads(config: Mapping[str, Any]) -> int:
    """``num_attention_heads`` of the text model (``text_config`` or ``llm_config`` aware)."""
    for section in (config.get("text_config"), config.get("llm_config"), config):
        if isinstance(section, Mapping) and section.get("num_attention_heads"):
            return int(section["num_attention_heads"])
    return 1


def valid_tps(config: Mapping[str, Any]) -> tuple[int, ...]:
    """TP sizes of :data:`GRID_TPS` that divide the attention heads."""
    heads = attention_heads(config)
    return tuple(tp for tp in GRID_TPS if heads % tp == 0)


_VARIANTS_ALL_GPUS: tuple[dict[str, Any], ...] = (
    {"flags": {"kv_cache_dtype": "fp8_e4m3"}},
    {"flags": {"page_size": 64}},
    {"flags": {"speculative_algorithm": "EAGLE"}},
    {"attn_dp_size": -1},  # DP attention as wide as TP
    {"pp_size": 2},
)
_VARIANTS_H200_B200: tuple[dict[str, Any], ...] = (
    {"flags": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
               "speculative_num_draft_tokens": 4}},
    {"flags": {"speculative_algorithm": "NGRAM"}},
    {"flags": {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": DFLASH_DRAFT}},
    {"dcp_size": 2},
    {"flags": {"chunked_prefill_size": -1}},
    {"flags": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
               "speculative_num_draft_tokens": 8}},
    {"flags": {"speculative_algorithm": "EAGLE", "page_size": 64}},
    {"attn_dp_size": -1, "flags": {"speculative_algorithm": "EAGLE"}},
    {"flags": {"kv_cache_dtype": "fp8_e5m2"}},
    {"flags": {"disable_radix_cache": True}},
    {"flags": {"max_running_requests": 64}},
)  # fmt: skip
# Launches SGLang refuses; the planner must refuse them too (DeepSeek-V4 + bare EAGLE is a
# variant already).
_REFUSED: tuple[tuple[str, str, int, dict[str, Any]], ...] = (
    ("deepseek-v4-pro", "H200", 8, {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}),
    ("llama-3.1-8b", "H200", 1, {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4}),
    ("qwen3-8b", "B200", 1, {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 6}),
    ("deepseek-v3", "H200", 8, {"attention_backend": "trtllm_mla"}),
    ("kimi-k2", "H100-80GB", 8, {"attention_backend": "trtllm_mla"}),
    ("llama-3.1-8b", "H200", 1, {"speculative_algorithm": "DFLASH"}),
    ("qwen3-30b-a3b", "B200", 4, {"speculative_algorithm": "DFLASH"}),
)


# Launches that exercise a launch rule some SGLang releases have and others do not (the grid is
# recorded under every release): DSA with a pooled index key under DCP (refused from 0.5.22, whose
# DSA DCP overrides also refuse an EAGLE tree, topk > 1); the DeepEP all-to-all backend (it keeps
# the breakable prefill graph from 0.5.17).
_RELEASE_DIFFERENCES: tuple[tuple[str, str, int, dict[str, Any]], ...] = (
    (SYNTHETIC_PREFIX + "deepseek-v3.2-kpool4", "H200", 8, {"dcp_size": 2}),
    ("qwen3-30b-a3b", "H200", 8, {"flags": {"moe_a2a_backend": "deepep"}}),
    ("qwen3-30b-a3b", "B200", 4, {"flags": {"moe_a2a_backend": "deepep"}}),
    ("deepseek-v3.2", "H200", 8, {"dcp_size": 2, "flags": {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                                          "speculative_eagle_topk": 4,
                                                          "speculative_num_draft_tokens": 8}}),
)  # fmt: skip


# Smaller and other data-centre GPUs, each capacity tier of the launch's memory defaults (16, 23-32, 40-46,
# 96-98 and 275 GiB: the workstation tier changed in 0.5.20), on the models that fit them, at TP 1 and a
# wider TP, and fp8 KV on an RTX 4090.
_OTHER_GPUS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("RTX-4090", (1, 2)), ("RTX-5090", (1,)), ("L4", (1,)), ("T4", (1,)), ("A100-40GB", (1, 4)),
    ("L40S", (1, 2)), ("H20", (1, 8)), ("RTX-PRO-6000", (1,)), ("B300", (8,)),
)  # fmt: skip
_OTHER_GPU_PRESETS = (
    "llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite", "gemma-3-27b", "mistral-7b",
    "qwen2.5-7b",
)  # fmt: skip


def other_gpu_grid(presets: Iterable[str]) -> tuple[LaunchSpec, ...]:
    """:data:`_OTHER_GPUS` for the presets of :data:`_OTHER_GPU_PRESETS` among ``presets``."""
    chosen = [p for p in _OTHER_GPU_PRESETS if p in set(presets)]
    out = [_spec(p, gpu, tp) for p in chosen for gpu, tps in _OTHER_GPUS for tp in tps]
    out += [_spec(p, "RTX-4090", 1, flags={"kv_cache_dtype": "fp8_e4m3"}) for p in chosen]
    return tuple(out)


def default_grid(presets: Iterable[str] | None = None) -> tuple[LaunchSpec, ...]:
    """The shipped grid (see the module doc); ``presets`` restricts it to some models."""
    names = tuple(presets) if presets is not None else preset_names()
    out: list[LaunchSpec] = []
    for preset in names:
        tps = valid_tps(load_preset_config(preset))
        for gpu in GRID_GPUS:
            out.extend(_spec(preset, gpu, tp) for tp in tps)
        top = tps[-1]
        for gpu in GRID_GPUS:
            for variant in _VARIANTS_ALL_GPUS + (_VARIANTS_H200_B200 if gpu in ("H200", "B200") else ()):
                kw = dict(variant)
                if kw.get("attn_dp_size") == -1:
                    if top == 1:
                        continue
                    kw["attn_dp_size"] = top
                out.append(_spec(preset, gpu, top, **kw))
    for preset, gpu, tp, flags in _REFUSED:
        if preset in names:
            out.append(_spec(preset, gpu, tp, flags=flags))
    out.extend(other_gpu_grid(names))
    if presets is None:
        out.extend(synthetic_grid())
        out.extend(_spec(preset, gpu, tp, **kw) for preset, gpu, tp, kw in _RELEASE_DIFFERENCES)
    return tuple(out)


def synthetic_grid() -> tuple[LaunchSpec, ...]:
    """Every synthetic config on every grid GPU at TP 1 and 8, plus a high request cap (the
    Qwen3-VL Hopper graph and feature-pool rules) and, for a model whose row carries the Gemma-4
    backend check, a backend that check refuses (``--attention-backend flashinfer``)."""
    names = synthetic_config_names()
    out: list[LaunchSpec] = []
    for name in names:
        preset = SYNTHETIC_PREFIX + name
        for gpu in GRID_GPUS:
            out.extend(_spec(preset, gpu, tp) for tp in (1, 8))
            out.append(_spec(preset, gpu, 8, flags={"max_running_requests": 400}))
    checked = [name for name in names if _first_row_check(synthetic_config(name)) is LaunchBackendCheck.GEMMA4]
    for name in checked:
        for gpu in GRID_GPUS:
            out.append(_spec(SYNTHETIC_PREFIX + name, gpu, 1, flags={"attention_backend": "flashinfer"}))
    return tuple(out)


def _first_row_check(config: Mapping[str, Any]) -> LaunchBackendCheck | None:
    """The backend check of the config's first architecture (the one SGLang's model hook reads)."""
    row = row_for(str((config.get("architectures") or [""])[0]))
    return row.launch_backend_check if row is not None else None


def grid_from_json(items: Sequence[Any]) -> tuple[LaunchSpec, ...]:
    """Parse a grid file's list; duplicate names are refused."""
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise KVCacheConfigError("a launch grid file must hold a JSON list of launch objects")
    specs = tuple(spec_from_dict(item) for item in items)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise KVCacheConfigError(f"launch name {spec.name!r} appears twice in the grid")
        seen.add(spec.name)
    return specs
