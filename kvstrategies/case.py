"""Case files: one deployment to plan, as JSON (docs/adding-a-model.md, "The case file").

Keys follow SGLang's server arguments. Missing keys take the defaults in :data:`CASE_DEFAULTS`;
unknown keys are an error. ``env`` holds the SGLang environment knobs that change sizing
(sglang.srt.environ) by their SGLang names; they are mapped onto explicit settings here, so no
strategy ever reads the process environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .context import (
    AttentionBackends,
    DeviceKind,
    DisaggregationMode,
    EngineKnobs,
    KVCacheSettings,
    ParallelLayout,
    Platform,
    SchedulingConfig,
    SpecAlgorithm,
    SpeculativeConfig,
)
from .core import jsonio
from .core.dtypes import DType, require_release_kv_cache_dtype, resolve_kv_cache_dtype
from .core.releases import ENGINE_NAMES, SGLANG, VLLM, EngineRelease, parse_release
from .core.validate import MAX_INT64, MAX_SETTING_INT, check_float, check_sane_ints
from .errors import KVCacheConfigError
from .models import ModelGeometry, parse_hf_config
from .models.architectures import any_row, holds_in, require_head_dim, require_loadable, rows_for
from .sglang.knobs import check_case_env
from .sglang.server_arguments import SERVER_ARGUMENT_RULES, SERVER_ARGUMENT_VALUE_RULES, require_server_argument

CASE_DEFAULTS: dict[str, Any] = {
    "name": None,
    "description": "",
    "sglang_version": None,
    "engine": None,
    "vllm_version": None,
    "gpu": None,
    "hf_config": None,
    "preset": None,
    "tp_size": 1,
    "pp_size": 1,
    "pp_rank": 0,
    "dcp_size": 1,
    "attn_dp_size": 1,
    "attn_cp_size": 1,
    "kv_cache_dtype": "auto",
    "model_dtype": "bfloat16",
    "page_size": 1,
    "available_bytes": None,
    "max_tokens": None,
    "device": "cuda",
    "attention_backend": None,
    "prefill_attention_backend": None,
    "decode_attention_backend": None,
    "dsa_prefill_backend": None,
    "dsa_decode_backend": None,
    "dsv4_attn_backend": None,
    "platform": {},
    "speculative_algorithm": None,
    "eagle_draft_num_layers": None,
    "eagle_draft_swa_num_layers": None,
    "eagle_draft_num_kv_heads": None,
    "eagle_draft_head_dim": None,
    "dflash_draft_cell_size_per_token": None,
    "speculative_num_draft_tokens": None,
    "speculative_num_steps": None,
    "speculative_eagle_topk": None,
    "swa_full_tokens_ratio": None,
    "swa_prefix_tails": None,
    "max_running_requests": None,
    "chunked_prefill_size": None,
    "context_length": None,
    "disable_radix_cache": False,
    "disable_overlap_schedule": False,
    "disaggregation_mode": "null",
    "enable_hierarchical_cache": False,
    "disable_hybrid_swa_memory": False,
    "disaggregation_decode_extra_slots": None,
    "max_mamba_cache_size": None,
    "mamba_full_memory_ratio": 0.9,
    "mamba_radix_cache_strategy": None,
    "is_draft_worker": False,
    "env": {},
    "pool_max_tokens": None,
    "pool_max_running_requests": 8,
    "pool_max_mamba_cache_size": None,
}
_PLATFORM_KEYS = {"is_sm100", "is_sm90", "is_blackwell", "is_hip", "is_gfx95", "is_npu_arch35"}
@dataclass(frozen=True)
class Case:
    """A parsed case: the context to plan, the budget, and the what-if pool request."""

    name: str
    description: str
    settings: KVCacheSettings
    available_bytes: int
    max_tokens: int | None
    pool_max_tokens: int | None
    pool_max_running_requests: int
    pool_max_mamba_cache_size: int | None
    raw: Mapping[str, Any]


def _int(
    data: Mapping[str, Any],
    key: str,
    *,
    minimum: int | None = None,
    optional: bool = False,
    maximum: int = MAX_SETTING_INT,
) -> Any:
    value = data[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        null = " or null" if optional else ""
        raise KVCacheConfigError(
            f"case field {key!r} must be an integer{null}, got {value!r:.80} ({type(value).__name__})"
        )
    if minimum is not None and value < minimum:
        raise KVCacheConfigError(f"case field {key!r} must be >= {minimum}, got {value}")
    if value > maximum:
        raise KVCacheConfigError(f"case field {key!r} must be <= {maximum}, got {value}")
    return value


def _float(data: Mapping[str, Any], key: str, *, fix: str) -> float:
    """A finite number > 0 (``mamba_full_memory_ratio``)."""
    return check_float(data[key], f"case field {key!r}", low=0.0, fix=fix)


def _bool(data: Mapping[str, Any], key: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise KVCacheConfigError(f"case field {key!r} must be true or false, got {value!r}")
    return value


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data[key]
    if value is not None and not isinstance(value, str):
        raise KVCacheConfigError(f"case field {key!r} must be a string or null, got {value!r}")
    return value


def _env_flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def knobs_from_env(env: Any) -> tuple[EngineKnobs, tuple[int, ...] | None]:
    """Map SGLang env knobs onto :class:`EngineKnobs` (and the PP layer partition); the names and
    values are checked by :func:`kvstrategies.sglang.knobs.check_case_env` first."""
    env = check_case_env(env)
    knobs: dict[str, Any] = {}
    if "SGLANG_SWA_EVICTION_INTERVAL" in env:
        raw = env["SGLANG_SWA_EVICTION_INTERVAL"]
        try:
            interval = max(1, int(raw))
        except (TypeError, ValueError, OverflowError) as exc:
            raise KVCacheConfigError(
                f"env SGLANG_SWA_EVICTION_INTERVAL must be an integer (default 128), got {raw!r:.40}"
            ) from exc
        if interval > 2**20:
            raise KVCacheConfigError(f"env SGLANG_SWA_EVICTION_INTERVAL={interval} is absurd; use e.g. 128 (default)")
        knobs["swa_eviction_interval"] = interval
    if "SGLANG_DSV4_COMPRESS_STATE_DTYPE" in env:
        name = str(env["SGLANG_DSV4_COMPRESS_STATE_DTYPE"]).lower()
        if name not in ("float32", "fp32", "bfloat16", "bf16"):
            raise KVCacheConfigError(
                f"env SGLANG_DSV4_COMPRESS_STATE_DTYPE={name!r}; use float32 (default) or bfloat16"
            )
        knobs["dsv4_compress_state_dtype"] = DType.from_name(name)
    if "SGLANG_DSV4_KV_LAYOUT" in env:
        knobs["dsv4_kv_layout"] = str(env["SGLANG_DSV4_KV_LAYOUT"])
    if "SGLANG_DSV4_COMPRESSED_KV_LAYOUT" in env:
        knobs["dsv4_compressed_kv_layout"] = str(env["SGLANG_DSV4_COMPRESSED_KV_LAYOUT"])
    if "SGLANG_MAMBA_SSM_DTYPE" in env:
        try:
            knobs["mamba_ssm_dtype"] = DType.from_name(str(env["SGLANG_MAMBA_SSM_DTYPE"]))
        except KVCacheConfigError as exc:
            raise KVCacheConfigError(f"env SGLANG_MAMBA_SSM_DTYPE: {exc}") from exc
    if "SGLANG_MAMBA_CONV_DTYPE" in env:
        conv = str(env["SGLANG_MAMBA_CONV_DTYPE"]).lower()
        # SGLang falls back to bfloat16 for anything but float32/float16 (mamba_utils mamba_cache_per_req)
        knobs["mamba_conv_dtype"] = DType.from_name(conv) if conv in ("float32", "float16") else DType.BFLOAT16
    if "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK" in env:
        knobs["mamba_skip_decode_lock"] = _env_flag(env["SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK"])
    partition = None
    if "SGLANG_PP_LAYER_PARTITION" in env:
        try:
            partition = tuple(int(p) for p in str(env["SGLANG_PP_LAYER_PARTITION"]).split(","))
        except ValueError as exc:
            raise KVCacheConfigError(
                "env SGLANG_PP_LAYER_PARTITION must be a comma list of layer counts, e.g. '3,45'"
            ) from exc
    return EngineKnobs(**knobs), partition


def _raw_config(data: Mapping[str, Any], base_dir: Path | None) -> Mapping[str, Any]:
    hf_config, preset = data["hf_config"], data["preset"]
    if (hf_config is None) == (preset is None):
        raise KVCacheConfigError("a case needs exactly one of 'hf_config' (a config.json object or path) or 'preset'")
    if preset is not None:
        from .presets import shared_preset_config  # a preset case only

        return shared_preset_config(str(preset))
    if isinstance(hf_config, str):
        path = Path(hf_config)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if path.is_dir():
            path = path / "config.json"
        return jsonio.read_json_object(path, "a model config (config.json)")
    if not isinstance(hf_config, Mapping):
        raise KVCacheConfigError("case field 'hf_config' must be a config.json object or a path to one")
    return hf_config


def _speculative(data: Mapping[str, Any], geometry: ModelGeometry) -> SpeculativeConfig:
    algorithm = SpecAlgorithm.parse(_opt_str(data, "speculative_algorithm"))
    draft_layers = _int(data, "eagle_draft_num_layers", minimum=0, optional=True)
    if draft_layers is None and algorithm.is_eagle_family:
        # no draft checkpoint in a case: SGLang reads the target's MTP layer count (DefaultPoolConfigurator.__init__
        # draft scaling)
        draft_layers = geometry.num_nextn_predict_layers
    return SpeculativeConfig(
        algorithm=algorithm,
        eagle_draft_num_layers=draft_layers if not algorithm.is_dflash_family else None,
        eagle_draft_swa_num_layers=_int(data, "eagle_draft_swa_num_layers", minimum=0, optional=True),
        dflash_draft_num_layers=draft_layers if algorithm.is_dflash_family else None,
        dflash_draft_cell_size_per_token=_int(data, "dflash_draft_cell_size_per_token", optional=True),
        num_draft_tokens=_int(data, "speculative_num_draft_tokens", minimum=1, optional=True),
        num_steps=_int(data, "speculative_num_steps", minimum=1, optional=True),
        eagle_topk=_int(data, "speculative_eagle_topk", minimum=1, optional=True),
        draft_num_kv_heads=_int(data, "eagle_draft_num_kv_heads", minimum=1, optional=True),
        draft_head_dim=_int(data, "eagle_draft_head_dim", minimum=1, optional=True),
    )


def _platform(data: Mapping[str, Any]) -> tuple[Platform, bool]:
    gpu = _opt_str(data, "gpu")
    raw = data["platform"] or {}
    if not isinstance(raw, Mapping):
        raise KVCacheConfigError(f"case field 'platform' must be an object, got {raw!r}")
    unknown = set(raw) - _PLATFORM_KEYS
    if unknown:
        raise KVCacheConfigError(f"unknown platform keys {sorted(unknown)}; known: {sorted(_PLATFORM_KEYS)}")
    flags = {k: _bool({k: raw.get(k, False)}, k) for k in _PLATFORM_KEYS}
    is_hip = flags.pop("is_hip")
    return Platform(**flags, gpu=gpu), is_hip


def _ratio(data: Mapping[str, Any]) -> float | None:
    value = data["swa_full_tokens_ratio"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise KVCacheConfigError(f"swa_full_tokens_ratio must be in (0, 1], got {value!r}")
    return float(value)


def _require_server_arguments(data: Mapping[str, Any], release: EngineRelease) -> None:
    """Refuse a case setting that ``release`` has no server argument for."""
    for key in {*SERVER_ARGUMENT_RULES, *(field for field, _ in SERVER_ARGUMENT_VALUE_RULES)}:
        require_server_argument(key, data.get(key), release, what=f"case field {key!r}")


def parse_case(
    data: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    name: str | None = None,
    sglang_version: str | None = None,
    engine: str | None = None,
    vllm_version: str | None = None,
) -> Case:
    """Validate a case dict and turn it into settings (see :data:`CASE_DEFAULTS`).

    ``sglang_version`` (``--sglang-version``) overrides the case's own ``sglang_version``;
    ``engine`` (``"sglang"``, ``"vllm"``) the case's ``engine``, ``vllm_version`` its
    ``vllm_version``. A vLLM case is read as the vLLM launch it stands for
    (:mod:`kvstrategies.vllm.strategies.engine_args`): SGLang's launch checks do not apply and
    ``kv_cache_dtype`` keeps the string given (vLLM resolves ``auto`` itself).
    """
    if not isinstance(data, Mapping):
        raise KVCacheConfigError(f"a case must be a JSON object, got {type(data).__name__}")
    check_sane_ints(dict(data), "case")
    unknown = sorted(set(data) - set(CASE_DEFAULTS))
    if unknown:
        raise KVCacheConfigError(f"unknown case keys {unknown}; known keys: {sorted(CASE_DEFAULTS)}")
    merged = {**CASE_DEFAULTS, **data}
    if sglang_version is not None:
        merged["sglang_version"] = sglang_version
    if engine is not None:
        merged["engine"] = engine
    if vllm_version is not None:
        merged["vllm_version"] = vllm_version
    raw_config = _raw_config(merged, base_dir)
    geometry = parse_hf_config(raw_config)
    is_vllm = _engine(merged) == VLLM
    if is_vllm:
        release = parse_release(merged["vllm_version"], VLLM, field="case field 'vllm_version'")
        if merged["sglang_version"] is not None:  # not the engine planned, but never a silent bogus value
            parse_release(merged["sglang_version"], field="case field 'sglang_version'")
    else:
        release = parse_release(merged["sglang_version"], field="case field 'sglang_version'")
        if merged["vllm_version"] is not None:
            parse_release(merged["vllm_version"], VLLM, field="case field 'vllm_version'")
        require_loadable(geometry.model_type, release)
        geometry = _served_geometry(geometry, release, is_draft=_bool(merged, "is_draft_worker"))
        require_head_dim(raw_config, release)
        _require_server_arguments(merged, release)
        require_release_kv_cache_dtype(str(merged["kv_cache_dtype"]), release)
    platform, is_hip = _platform(merged)
    device = DeviceKind.parse(str(merged["device"]))
    if is_hip and device is DeviceKind.CUDA:
        device = DeviceKind.HIP
    model_dtype = DType.from_name(str(merged["model_dtype"]))
    geometry = _with_model_dtype(geometry, model_dtype)
    kv_dtype = resolve_kv_cache_dtype(
        str(merged["kv_cache_dtype"]),
        model_dtype,
        checkpoint_kv_fp8=geometry.checkpoint_kv_fp8 and not is_vllm,
        is_hip=device is DeviceKind.HIP,
        is_cpu=device is DeviceKind.CPU,
    )
    env = check_case_env(merged["env"])
    knobs, partition = knobs_from_env(env)
    try:
        mode = DisaggregationMode(str(merged["disaggregation_mode"]).lower())
    except ValueError as exc:
        raise KVCacheConfigError(
            f"disaggregation_mode {merged['disaggregation_mode']!r}; use null, prefill or decode"
        ) from exc
    settings = KVCacheSettings(
        geometry=geometry,
        kv_cache_dtype=kv_dtype,
        page_size=_int(merged, "page_size", minimum=1),
        parallel=ParallelLayout(
            tp_size=_int(merged, "tp_size", minimum=1),
            pp_size=_int(merged, "pp_size", minimum=1),
            pp_rank=_int(merged, "pp_rank", minimum=0),
            dcp_size=_int(merged, "dcp_size", minimum=1),
            attn_dp_size=_int(merged, "attn_dp_size", minimum=1),
            attn_cp_size=_int(merged, "attn_cp_size", minimum=1),
            pp_layer_partition=partition,
        ),
        speculative=_speculative(merged, geometry),
        device=device,
        platform=platform,
        backends=AttentionBackends(
            attention_backend=_opt_str(merged, "attention_backend"),
            prefill_attention_backend=_opt_str(merged, "prefill_attention_backend"),
            decode_attention_backend=_opt_str(merged, "decode_attention_backend"),
            dsa_prefill_backend=_opt_str(merged, "dsa_prefill_backend"),
            dsa_decode_backend=_opt_str(merged, "dsa_decode_backend"),
            dsv4_attn_backend=_opt_str(merged, "dsv4_attn_backend"),
        ),
        scheduling=SchedulingConfig(
            max_running_requests=_int(merged, "max_running_requests", minimum=1, optional=True),
            max_total_tokens=_int(merged, "max_tokens", minimum=1, optional=True, maximum=MAX_INT64),
            chunked_prefill_size=_int(merged, "chunked_prefill_size", optional=True),
            context_length=_int(merged, "context_length", minimum=1, optional=True),
            disable_radix_cache=_bool(merged, "disable_radix_cache"),
            disable_overlap_schedule=_bool(merged, "disable_overlap_schedule"),
            swa_full_tokens_ratio=_ratio(merged),
            swa_prefix_tails=_int(merged, "swa_prefix_tails", minimum=0, optional=True),
            disaggregation_mode=mode,
            enable_hierarchical_cache=_bool(merged, "enable_hierarchical_cache"),
            disable_hybrid_swa_memory=_bool(merged, "disable_hybrid_swa_memory"),
            disaggregation_decode_extra_slots=_int(
                merged, "disaggregation_decode_extra_slots", minimum=0, optional=True
            ),
            max_mamba_cache_size=_int(merged, "max_mamba_cache_size", minimum=1, optional=True),
            mamba_full_memory_ratio=_float(merged, "mamba_full_memory_ratio", fix="use e.g. 0.9 (the default)"),
            mamba_radix_cache_strategy=_opt_str(merged, "mamba_radix_cache_strategy"),
        ),
        knobs=knobs,
        is_draft_worker=_bool(merged, "is_draft_worker"),
        release=release,
    )
    if not is_vllm:
        _check_context_length(settings, env)
    available = merged["available_bytes"]
    if available is None:
        raise KVCacheConfigError("case field 'available_bytes' is required (the KV budget in bytes after profiling)")
    return Case(
        name=_opt_str(merged, "name") or name or "case",
        description=_opt_str(merged, "description") or "",
        settings=settings,
        available_bytes=_int(merged, "available_bytes", minimum=1, maximum=MAX_INT64),
        max_tokens=_int(merged, "max_tokens", minimum=1, optional=True, maximum=MAX_INT64),
        pool_max_tokens=_int(merged, "pool_max_tokens", minimum=1, optional=True),
        pool_max_running_requests=_int(merged, "pool_max_running_requests", minimum=1),
        pool_max_mamba_cache_size=_int(merged, "pool_max_mamba_cache_size", minimum=1, optional=True),
        raw=dict(data),
    )


def _engine(data: Mapping[str, Any]) -> str:
    value = data["engine"]
    if value is None:
        return SGLANG
    if not isinstance(value, str) or value.lower() not in ENGINE_NAMES:
        raise KVCacheConfigError(
            f"case field 'engine' must be one of {sorted(ENGINE_NAMES)} or null, got {value!r:.40}"
        )
    return value.lower()


def _check_context_length(settings: KVCacheSettings, env: Mapping[str, Any]) -> None:
    """SGLang refuses a ``context_length`` above the model's derived one unless the env allows it
    (``sglang.srt.configs.model_config.ModelConfig._derive_context_length``)."""
    given, derived = settings.scheduling.context_length, settings.geometry.context_len
    if given is None or given <= derived or _env_flag(env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "")):
        return
    raise KVCacheConfigError(
        f"context_length {given} is greater than the model's derived context length {derived}; SGLang refuses "
        "this (sglang.srt.configs.model_config.ModelConfig._derive_context_length). Lower context_length, or set "
        "env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 to override as SGLang allows"
    )


def _served_geometry(geometry: ModelGeometry, release: EngineRelease, *, is_draft: bool) -> ModelGeometry:
    """``geometry`` as ``release`` serves it: DSA only where the architecture loaded is a DSA model in that release. A
    draft worker loads the row's draft architecture (``ModelConfig._config_draft_model``: DeepSeek-V3 / V3.2 ->
    ``DeepseekV3ForCausalLMNextN``), which SGLang 0.5.3's ``sglang.srt.configs.model_config.is_deepseek_nsa`` does not
    list: that draft's pool is plain MLA."""
    if geometry.dsa is None:
        return geometry
    names = geometry.architectures
    if is_draft:
        names = tuple(row.draft_architecture or row.name for row in rows_for(names))
    if any_row(names, lambda row: holds_in(row, "dsa_if_index_topk", release)):
        return geometry
    return replace(geometry, dsa=None)


def _with_model_dtype(geometry: ModelGeometry, dtype: DType) -> ModelGeometry:
    """``geometry`` served in ``dtype`` (checked again)."""

    if geometry.model_dtype is dtype:
        return geometry
    return replace(geometry, model_dtype=dtype)


def read_json_file(path: str | Path) -> Any:
    """Read JSON (``Infinity``/``NaN`` accepted, as NVIDIA publishes them); errors name the file.

    Every file the library reads goes through :mod:`kvstrategies.core.jsonio` (JSON only, never executed).
    """
    return jsonio.read_json_file(path)


def at_budget(case: Case, data: Mapping[str, Any]) -> Case:
    """``parse_case(data)`` where ``data`` is the dict ``case`` was parsed from with only its
    ``available_bytes`` changed: the settings do not read the budget, so only the budget is
    checked (as :func:`parse_case` checks it, same message) and replaced."""
    if data["available_bytes"] is None:
        raise KVCacheConfigError("case field 'available_bytes' is required (the KV budget in bytes after profiling)")
    available = _int(data, "available_bytes", minimum=1, maximum=MAX_INT64)
    return Case(case.name, case.description, case.settings, available, case.max_tokens, case.pool_max_tokens,
                case.pool_max_running_requests, case.pool_max_mamba_cache_size, dict(data))  # fmt: skip


def load_case(
    path: str | Path,
    *,
    sglang_version: str | None = None,
    engine: str | None = None,
    vllm_version: str | None = None,
) -> Case:
    """Read and parse a case file; a relative ``hf_config`` path is taken from the file's folder.

    ``sglang_version`` plans it for that SGLang release instead of the case's own; ``engine`` /
    ``vllm_version`` for that engine (``"vllm"``: the vLLM launch it stands for) instead.
    """
    file = Path(path)
    data = jsonio.read_json_object(file, "a case file")
    try:
        return parse_case(data, base_dir=file.parent, name=file.stem, sglang_version=sglang_version,
                          engine=engine, vllm_version=vllm_version)  # fmt: skip
    except KVCacheConfigError as exc:
        if str(file) in str(exc):
            raise
        raise type(exc)(f"{file}: {exc}") from exc
