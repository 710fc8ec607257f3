"""What a user asks the planner: one deployment, with every setting they left out as ``None``.

``None`` means "not given": with a GPU named, SGLang 0.5.23's launch defaults fill it
(:mod:`.launch`); without one, the library's plain defaults apply (KV dtype ``auto``, page 1),
as ``kvstrategies plan --available-bytes`` always did.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..context import MAX_PARALLEL_SIZE
from ..core.releases import NEWEST_SGLANG, EngineRelease, parse_release
from ..core.validate import (
    MAX_LAYERS,
    MAX_PAGE_SIZE,
    MAX_SETTING_INT,
    check_bool,
    check_float,
    check_int,
    check_opt_int,
    check_sane_ints,
    finite_float,
)
from ..errors import KVCacheConfigError, UnsupportedConfigurationError
from ..sglang.server_arguments import require_server_argument
from .gpus import Accelerator

GIB = 2**30


#: SGLang's ``--mamba-ssm-dtype`` choices (the Mamba SSM state dtype; ``ServerArgs`` field help)
MAMBA_SSM_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")

@dataclass(frozen=True)
class DeploymentRequest:
    """One deployment to plan, one rank's view.

    ``source`` is ``{"preset": name}`` or ``{"hf_config": dict}`` (``cli.model_source``).
    Budget: ``available_bytes`` (the KV budget per rank, skips the budget step) or ``gpu``
    (capacity as SGLang reads it) with ``mem_fraction_static`` and the resident weights
    (``weight_bytes`` per rank, else estimated from the config with ``weight_dtype`` /
    ``weight_quantization``); ``overhead_bytes`` is what the runtime holds before weights load
    (``None``: modelled per GPU and TP by :mod:`.preload`).
    ``request_lengths`` (tokens) are the lengths the fit report answers for.
    ``assume_architecture`` plans an unserved architecture as a served one;
    ``allow_context_length_override`` admits ``context_length`` above the model's maximum
    (SGLang's ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``); ``model_folder`` is the local
    checkpoint folder the config came from (``None`` for a preset or a bare config file);
    ``model_description`` says where the config came from (preset, path, HF cache, download).
    ``dp_replicas`` is SGLang's ``--dp-size`` without attention DP: independent replicas, each
    planned as this one. ``launch_extras`` are further
    :class:`~kvstrategies.sglang.launch.defaults.LaunchSettings` fields the user gave.
    ``ep_size``: SGLang's ``--ep-size`` (routed experts split over ``ep`` ranks, each over
    ``tp / ep``); ``moe_runner_backend``: ``--moe-runner-backend`` (``None``: SGLang's choice);
    ``rocm_aiter``: ``SGLANG_USE_AITER=1`` on ROCm, as SGLang's ROCm images set it.
    ``mamba_ssm_dtype``: ``--mamba-ssm-dtype`` (``None``: the config's ``mamba_ssm_dtype``, else
    float32; ``sglang.srt.configs.mamba_utils.mamba2_state_dtype``).
    ``release`` is the SGLang release planned for (``--sglang-version``; a release string such as
    ``"0.5.20"`` is accepted; default the newest supported): its launch defaults and sizing.
    """

    model: str
    source: Mapping[str, Any]
    tp_size: int = 1
    pp_size: int = 1
    pp_rank: int = 0
    dcp_size: int = 1
    attn_dp_size: int = 1
    kv_cache_dtype: str | None = None
    page_size: int | None = None
    model_dtype: str | None = None
    available_bytes: int | None = None
    gpu: Accelerator | None = None
    mem_fraction_static: float | None = None
    weight_bytes: int | None = None
    weight_dtype: str | None = None
    weight_quantization: str | None = None
    overhead_bytes: int | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    device: str = "cuda"
    attention_backend: str | None = None
    speculative_algorithm: str | None = None
    speculative_draft_layers: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_draft_model_path: str | None = None
    swa_full_tokens_ratio: float | None = None
    chunked_prefill_size: int | None = None
    disable_radix_cache: bool = False
    request_lengths: tuple[int, ...] = field(default_factory=tuple)
    assume_architecture: str | None = None
    allow_context_length_override: bool = False
    model_folder: Path | None = None
    model_description: str | None = None
    dp_replicas: int = 1
    launch_extras: Mapping[str, Any] = field(default_factory=dict)
    ep_size: int = 1
    moe_runner_backend: str | None = None
    rocm_aiter: bool = True
    mamba_ssm_dtype: str | None = None
    release: EngineRelease = NEWEST_SGLANG

    def __post_init__(self) -> None:
        object.__setattr__(self, "release", parse_release(self.release))
        validate_request(self)
        if self.model_dtype == "auto":  # SGLang's default --dtype: the config's dtype, as when not given
            object.__setattr__(self, "model_dtype", None)
        if self.available_bytes is None and self.gpu is None:
            raise KVCacheConfigError(
                "no memory budget: name a GPU (--gpu H100-80GB or --gpu-memory 80GiB) or give the KV "
                "budget per rank (--available-bytes 40GiB)"
            )
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static < 1:
            raise KVCacheConfigError(f"--mem-fraction-static must be in (0, 1), got {self.mem_fraction_static}")
        if self.overhead_bytes is not None and self.overhead_bytes < 0:
            raise KVCacheConfigError(f"overhead must be >= 0 bytes, got {self.overhead_bytes}")
        for length in self.request_lengths:
            if length < 1:
                raise KVCacheConfigError(f"--request-length must be a positive token count, got {length}")

    @property
    def uses_launch_defaults(self) -> bool:
        """SGLang's launch defaults apply when a GPU is named (ServerArgs.resolve_once)."""
        return self.gpu is not None

    def hf_config(self) -> Mapping[str, Any]:
        """The raw HF config of the model (a preset's shipped file or the given dict)."""
        if "hf_config" in self.source:
            config: Mapping[str, Any] = self.source["hf_config"]
            return config
        from ..presets import shared_preset_config

        return shared_preset_config(str(self.source["preset"]))

    def replace(self, **changes: Any) -> DeploymentRequest:
        return replace(self, **changes)


def model_dtype_name(req: DeploymentRequest, config: Mapping[str, Any]) -> str:
    """The serving dtype: ``--model-dtype``, else the config's (``auto``: fp32 serves bf16)."""
    if req.model_dtype is not None:
        return req.model_dtype
    from ..models.hf import text_config
    from ..models.parse import model_dtype_of

    return model_dtype_of(config, text_config(config)).torch_name


def check_page_size(page_size: int | None) -> None:
    """``--page-size`` must be a positive token count (SGLang fails at launch otherwise)."""
    if isinstance(page_size, int) and not isinstance(page_size, bool) and page_size < 1:
        raise UnsupportedConfigurationError(
            f"--page-size must be a positive number of tokens, got {page_size}; SGLang 0.5.23 fails at launch on it "
            "(sglang.srt.arg_groups.validation_hook.check_server_args takes the chunked-prefill size modulo the page); "
            "leave --page-size out for SGLang's default or give e.g. 1, 16, 64"
        )


#: the request's text settings (``None`` = not given) and its switches
_TEXT_FIELDS = ("kv_cache_dtype", "model_dtype", "weight_dtype", "weight_quantization", "attention_backend",
                "speculative_algorithm", "speculative_draft_model_path", "assume_architecture", "model_description")
_BOOL_FIELDS = ("disable_radix_cache", "allow_context_length_override")
#: the longest text setting accepted (names and paths)
MAX_TEXT = 4096


def check_types(req: DeploymentRequest) -> None:
    """Every field has its declared type (a Python caller may pass anything): text settings are
    strings or None, switches booleans, ``source`` a ``preset`` name or an ``hf_config`` object
    (plus an optional ``checkpoint`` folder), ``launch_extras`` known
    :class:`~kvstrategies.sglang.launch.defaults.LaunchSettings` fields of their types."""
    check_sane_ints({name: getattr(req, name) for name in _scanned_fields()}, "request")
    if not isinstance(req.model, str):
        raise KVCacheConfigError(f"model must be a string (a name for the report), got {req.model!r:.60}")
    for name in _TEXT_FIELDS:
        value = getattr(req, name)
        if value is not None and not (isinstance(value, str) and len(value) <= MAX_TEXT and "\0" not in value):
            raise KVCacheConfigError(f"{name} must be a string or None, got {type(value).__name__} {value!r:.60}")
    for name in _BOOL_FIELDS:
        check_bool(getattr(req, name), name)
    if not isinstance(req.device, str):
        raise KVCacheConfigError(f"device must be a string such as 'cuda', got {req.device!r:.60}")
    if req.model_folder is not None and not isinstance(req.model_folder, Path):
        raise KVCacheConfigError(f"model_folder must be a pathlib.Path or None, got {req.model_folder!r:.60}")
    _check_source(req.source)
    _check_launch_extras(req.launch_extras)
    _check_sglang_choices(req)


#: request fields (and launch extras) whose values SGLang's argparse restricts to its ``choices``
_CHOICE_FLAGS = {"kv_cache_dtype": "--kv-cache-dtype", "model_dtype": "--dtype",
                 "attention_backend": "--attention-backend", "prefill_attention_backend": "--prefill-attention-backend",
                 "decode_attention_backend": "--decode-attention-backend",
                 "mamba_radix_cache_strategy": "--mamba-radix-cache-strategy", "moe_a2a_backend": "--moe-a2a-backend",
                 "disaggregation_mode": "--disaggregation-mode"}  # fmt: skip


def _check_sglang_choices(req: DeploymentRequest) -> None:
    """A value SGLang's own argparse refuses is refused here too (``--attention-backend bogus``
    was planned), with SGLang's choices named (:func:`.launch_values.check_flag_value`)."""
    require_server_argument("speculative_algorithm", req.speculative_algorithm, req.release,
                            what=f"--speculative-algorithm {req.speculative_algorithm}")  # fmt: skip
    given = {}
    for name, flag in _CHOICE_FLAGS.items():
        value = req.launch_extras.get(name) if name in req.launch_extras else getattr(req, name, None)
        if isinstance(value, str):
            given[flag] = value
    if not given:
        return  # the flag table loads only when there is a value to check
    from ..sglang.flag_values import check_flag_value

    for flag, value in given.items():
        check_flag_value(flag, flag, value)
    strategy = req.launch_extras.get("mamba_radix_cache_strategy", getattr(req, "mamba_radix_cache_strategy", None))
    require_server_argument("mamba_radix_cache_strategy", strategy, req.release,
                            what=f"--mamba-radix-cache-strategy {strategy}")  # fmt: skip


def _check_source(source: Any) -> None:
    hint = "pass {'preset': NAME} or {'hf_config': CONFIG_DICT} (plus an optional 'checkpoint' folder)"
    if not isinstance(source, Mapping) or not set(source) <= {"preset", "hf_config", "checkpoint"}:
        raise KVCacheConfigError(f"source must be a mapping; {hint}, got {source!r:.80}")
    if ("preset" in source) == ("hf_config" in source):
        raise KVCacheConfigError(f"source names exactly one of 'preset' or 'hf_config'; {hint}")
    if "preset" in source and not isinstance(source["preset"], str):
        raise KVCacheConfigError(f"source['preset'] must be a preset name, got {source['preset']!r:.60}")
    if "hf_config" in source and not isinstance(source["hf_config"], Mapping):
        raise KVCacheConfigError(f"source['hf_config'] must be a config.json object, got {source['hf_config']!r:.60}")
    if "checkpoint" in source and not isinstance(source["checkpoint"], (str, Path)):
        raise KVCacheConfigError(f"source['checkpoint'] must be a folder path, got {source['checkpoint']!r:.60}")


@functools.cache
def _scanned_fields() -> tuple[str, ...]:
    """The request fields :func:`check_types` scans for huge integers (all but the GPU's table entry)."""
    return tuple(f.name for f in fields(DeploymentRequest) if f.name != "gpu")


@functools.cache
def _extra_kinds() -> tuple[frozenset[str], dict[str, str]]:
    """The request's own field names (never an extra) and each LaunchSettings field an extra may set, with its type."""
    from ..sglang.launch.defaults import LaunchSettings

    own = frozenset({f.name for f in fields(DeploymentRequest)} | {"speculative_dflash_block_size"})
    return own, {f.name: str(f.type) for f in fields(LaunchSettings) if f.name not in own}


def _check_launch_extras(extras: Any) -> None:
    if not isinstance(extras, Mapping):
        raise KVCacheConfigError(f"launch_extras must be a mapping of LaunchSettings fields, got {extras!r:.60}")
    own, kinds = _extra_kinds()
    for key, value in extras.items():
        if key in own:
            raise KVCacheConfigError(f"launch_extras[{key!r}]: set {key} as the request's own field instead")
        if key not in kinds:
            raise KVCacheConfigError(f"launch_extras: {key!r:.60} is not a LaunchSettings field ({sorted(kinds)})")
        kind = kinds[key]
        if value is None:
            continue
        if kind.startswith("bool"):
            check_bool(value, f"launch_extras[{key!r}]")
        elif kind.startswith("int"):
            check_int(value, f"launch_extras[{key!r}]", minimum=-1, maximum=MAX_SETTING_INT)
        elif kind.startswith("float"):
            check_float(value, f"launch_extras[{key!r}]", low=0.0, high=float(MAX_SETTING_INT))
        elif kind.startswith("str") and not isinstance(value, str):
            raise KVCacheConfigError(f"launch_extras[{key!r}] must be a string, got {value!r:.60}")


def validate_request(req: DeploymentRequest) -> None:
    """The request's own numbers, with the bounds of the case-file fields (no loop over a huge count).

    Run by :meth:`DeploymentRequest.__post_init__` (so every replaced copy is checked too).
    """
    check_types(req)
    check_int(req.tp_size, "--tp", minimum=1, maximum=MAX_PARALLEL_SIZE)
    check_int(req.pp_size, "--pp-size", minimum=1, maximum=MAX_LAYERS, fix="a pipeline stage needs >= 1 layer")
    check_int(req.pp_rank, "--pp-rank", minimum=0, maximum=MAX_LAYERS)
    if req.pp_rank >= req.pp_size:
        raise KVCacheConfigError(
            f"--pp-rank {req.pp_rank} is out of range for --pp-size {req.pp_size}: ranks are 0..{req.pp_size - 1}"
        )
    check_int(req.dcp_size, "--dcp", minimum=1, maximum=MAX_PARALLEL_SIZE)
    require_server_argument("dcp_size", req.dcp_size, req.release, what=f"--dcp {req.dcp_size}")
    check_int(req.attn_dp_size, "--attn-dp", minimum=1, maximum=MAX_PARALLEL_SIZE)
    check_page_size(req.page_size)
    check_opt_int(req.page_size, "--page-size", minimum=1, maximum=MAX_PAGE_SIZE)
    check_opt_int(req.available_bytes, "--available-bytes", minimum=0, maximum=2**63 - 1)
    check_opt_int(req.weight_bytes, "--weight-bytes", minimum=0, maximum=2**63 - 1)
    check_opt_int(req.overhead_bytes, "--gpu-overhead", minimum=0, maximum=2**63 - 1)
    check_int(req.dp_replicas, "--dp-size", minimum=1, maximum=MAX_PARALLEL_SIZE)
    check_int(req.ep_size, "--ep-size", minimum=1, maximum=MAX_PARALLEL_SIZE)
    if req.moe_runner_backend is not None and not isinstance(req.moe_runner_backend, str):
        raise KVCacheConfigError(f"--moe-runner-backend must be a backend name, got {req.moe_runner_backend!r:.80}")
    if req.mamba_ssm_dtype is not None and req.mamba_ssm_dtype not in MAMBA_SSM_DTYPES:
        raise KVCacheConfigError(
            f"--mamba-ssm-dtype must be one of {', '.join(MAMBA_SSM_DTYPES)} (SGLang's choices), got "
            f"{req.mamba_ssm_dtype!r:.80}"
        )
    require_server_argument("mamba_ssm_dtype", req.mamba_ssm_dtype, req.release,
                            what=f"--mamba-ssm-dtype {req.mamba_ssm_dtype}")  # fmt: skip
    chunk = req.chunked_prefill_size
    if chunk is not None and chunk != -1:
        check_int(chunk, "--chunked-prefill-size", minimum=1, maximum=MAX_SETTING_INT,
                  fix="give a positive token count, or -1 to disable chunked prefill")  # fmt: skip
    for flag, value in (
        ("--max-total-tokens", req.max_total_tokens),
        ("--max-running-requests", req.max_running_requests),
        ("--context-length", req.context_length),
        ("--speculative-draft-layers", req.speculative_draft_layers),
        ("--speculative-num-draft-tokens", req.speculative_num_draft_tokens),
        ("--speculative-num-steps", req.speculative_num_steps),
        ("--speculative-eagle-topk", req.speculative_eagle_topk),
    ):
        minimum = 1 if flag != "--speculative-draft-layers" else 0
        check_opt_int(value, flag, minimum=minimum, maximum=MAX_SETTING_INT)
    if not isinstance(req.request_lengths, (tuple, list)):
        raise KVCacheConfigError(f"request_lengths must be a tuple of token counts, got {req.request_lengths!r:.80}")
    if req.gpu is not None and not isinstance(req.gpu, Accelerator):
        raise KVCacheConfigError(
            f"gpu must be an Accelerator (kvstrategies.planner.gpus.lookup_gpu), got {req.gpu!r:.80}"
        )
    for length in req.request_lengths:
        check_int(length, "--request-length", minimum=1, maximum=MAX_SETTING_INT)
    if req.mem_fraction_static is not None:
        check_float(req.mem_fraction_static, "--mem-fraction-static", low=0.0, high=1.0)
    if req.swa_full_tokens_ratio is not None:
        check_float(req.swa_full_tokens_ratio, "--swa-full-tokens-ratio", low=0.0, high=1.0)
    capacity = None if req.gpu is None else req.gpu.capacity_mib
    if capacity is not None and not (math.isfinite(finite_float(capacity)) and 0 < capacity * 2**20 <= 2**63 - 1):
        raise KVCacheConfigError(f"GPU capacity must be in (0, 2**63) bytes, got {capacity!r} MiB; fix --gpu-memory")
