"""Run one case through SGLang's own sizing and pool builders; return the ``plan --case --json`` document.

Given a case (the case-file dict, :mod:`kvstrategies.case`), build SGLang's objects
(``ServerArgs``, ``ModelConfig``, a stand-in model, ``KVCacheConfigurator``) without a server,
run SGLang's strategy selection (``create_memory_pool_configurator``), ``calculate_pool_sizes``,
``calculate_pool_sizes_from_max_tokens``, its request count (``resolve_max_num_reqs``),
``finalize_with_max_running_requests`` and its pool builders on ``meta``, and describe the built
token-to-KV pool by walking its tensors. How: docs/maintainers.md, "The bridge: checking against SGLang itself", and
docs/sglang-bridge.md.

The result has the keys of :func:`kvstrategies.document.plan_document` that both engines can
answer (:data:`.compare.COMPARED_KEYS` and the pools): ``configurator``, ``cell_size``, ``sizes``,
``sizes_from_max_tokens``, ``pool_sizes``, ``token_to_kv_pool_class``, ``pools`` (one entry per
tensor the pool holds: ``name``, ``shape``, ``dtype``), ``req_to_token_pool`` and ``notes``.

Process state: SGLang keeps the published ``ServerArgs``, the parallel stamp and the platform
override in module globals; :func:`sglang_document` sets all three per case and restores the
platform. Environment knobs (``SGLANG_*``) are read at import: a case with its own ``env`` needs
its own process (:mod:`kvstrategies.sglang.bridge.verify` groups them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import tempfile
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ...case import CASE_DEFAULTS
from ...core.jsonio import read_json_object
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ...models.architectures import SWALayerSplit
from ...models.architectures import row_for as architecture_row
from ...presets import load_preset_config
from ..server_arguments import RENAMED_SERVER_ARGUMENTS, is_unset
from . import compat, hosts
from .bridge_releases import BridgeRelease
from .hosts import ConfiguratorHost, RunnerHost
from .profiled import InitRunnerHost, RunnerProfile
from .runtime import cuda_platform_facts, installed_release, platform_override, quiet_stdout

COMPARED_KEYS: tuple[str, ...] = (
    "configurator",
    "cell_size",
    "sizes",
    "sizes_from_max_tokens",
    "pool_sizes",
    "token_to_kv_pool_class",
    "pools",
)
#: SGLang ``MemoryPoolConfig`` / ``_PoolSizes`` fields reported under ``sizes`` (our PoolSizes names)
SIZE_FIELDS: tuple[str, ...] = (
    "max_total_num_tokens",
    "max_running_requests",
    "full_max_total_num_tokens",
    "swa_max_total_num_tokens",
    "c4_max_total_num_tokens",
    "c128_max_total_num_tokens",
    "c4_state_pool_size",
    "c128_state_pool_size",
    "c4_state_dtype",
    "c128_state_dtype",
    "max_mamba_cache_size",
)
#: DeepSeek-V4 pool sizes; a release without DeepSeek-V4 (0.5.11) has no such field: no pool, 0
_DSV4_SIZE_FIELDS = frozenset({"c4_max_total_num_tokens", "c128_max_total_num_tokens", "c4_state_pool_size",
                               "c128_state_pool_size"})  # fmt: skip
_DTYPE_NAMES = {"torch.float32": "float32", "torch.bfloat16": "bfloat16", "torch.float16": "float16"}


#: SGLang refused the case (its own exception is named in the message)
SGLangCaseError = UnsupportedConfigurationError


# ---- the model folder SGLang reads -----------------------------------------------------------


def case_hf_config(case: Mapping[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """The case's config.json as a dict (preset, inline object or path)."""
    preset, hf_config = case.get("preset"), case.get("hf_config")
    if preset is not None:
        return dict(load_preset_config(str(preset)))
    if isinstance(hf_config, Mapping):
        return dict(hf_config)
    if isinstance(hf_config, str):
        path = Path(hf_config)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if path.is_dir():
            path = path / "config.json"
        return read_json_object(path, "a model config")
    raise SGLangCaseError("a case needs 'preset' or 'hf_config'")


def sanitized_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """What SGLang can load offline on CPU (bridge doc 2.3).

    ``auto_map`` would make transformers fetch remote code; mxfp4 (gpt-oss) is registered only
    on CUDA builds. Neither changes KV sizing.
    """
    out = {k: v for k, v in config.items() if k != "auto_map"}
    quant = out.get("quantization_config")
    if isinstance(quant, Mapping) and str(quant.get("quant_method", "")).lower() == "mxfp4":
        del out["quantization_config"]
    for key in ("text_config",):
        sub = out.get(key)
        if isinstance(sub, Mapping):
            out[key] = {k: v for k, v in sub.items() if k != "auto_map"}
    return out


@contextlib.contextmanager
def model_folder(config: Mapping[str, Any]) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="kvs-sglang-model-") as folder:
        Path(folder, "config.json").write_text(json.dumps(sanitized_config(config)), encoding="utf-8")
        yield folder


# ---- the settings SGLang reads ---------------------------------------------------------------

_SERVER_ARG_KEYS = (
    "tp_size",
    "pp_size",
    "kv_cache_dtype",
    "page_size",
    "disable_radix_cache",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "max_running_requests",
    "chunked_prefill_size",
    "swa_full_tokens_ratio",
    "swa_prefix_tails",
    "context_length",
    "enable_hierarchical_cache",
    "disable_hybrid_swa_memory",
    "disable_overlap_schedule",
    "max_mamba_cache_size",
    "mamba_full_memory_ratio",
    "mamba_radix_cache_strategy",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "dsa_prefill_backend",
    "dsa_decode_backend",
    "dsv4_attn_backend",
)


def decode_extra_slots(case: Mapping[str, Any]) -> int | None:
    """SGLang's resolution hook: ``2 * per_worker`` when ``per_worker = max(1, mrr // attn_dp) <= 32``."""
    if str(case["disaggregation_mode"]).lower() != "decode":
        return None
    if case["disaggregation_decode_extra_slots"] is not None:
        return int(case["disaggregation_decode_extra_slots"])
    mrr = case["max_running_requests"]
    if mrr is None:
        return 0
    per_worker = max(1, int(mrr) // int(case["attn_dp_size"]))
    return 2 * per_worker if per_worker <= 32 else 0


def server_args_fields(case: Mapping[str, Any], folder: str) -> dict[str, Any]:
    """``ServerArgs(**fields)`` for a case (bridge doc 2.1): resolved values, taken as given."""
    fields: dict[str, Any] = {
        "model_path": folder,
        "tokenizer_path": folder,
        "skip_tokenizer_init": True,
        "device": "cuda" if str(case["device"]) in ("cuda", "hip") else str(case["device"]),
        "dtype": str(case["model_dtype"]),
        "attn_dp_size": int(case["attn_dp_size"]),
        "dp_size": 1,
        "disaggregation_mode": str(case["disaggregation_mode"]),
    }
    for key in _SERVER_ARG_KEYS:
        if case.get(key) is not None:
            fields[key] = case[key]
    if case["max_tokens"] is not None:
        fields["max_total_tokens"] = int(case["max_tokens"])
    if int(case["attn_cp_size"]) != 1:
        fields["attn_cp_size"] = int(case["attn_cp_size"])
    if int(case["dcp_size"]) != 1:  # ServerArgs' default is 1; SGLang 0.5.14 has no dcp_size at all
        fields["dcp_size"] = int(case["dcp_size"])
    extra = decode_extra_slots(case)
    if extra is not None:
        fields["disaggregation_decode_extra_slots"] = extra
    return fields


#: fields the bridge fills in itself (as a release's launch would), dropped for a release whose ServerArgs lacks
#: them (0.5.13: no disaggregation_decode_extra_slots; its decode pool sizes the extra rows itself)
_LAUNCH_FILLED = frozenset({"disaggregation_decode_extra_slots"})


def _platform_facts(case: Mapping[str, Any]) -> dict[str, Any]:
    platform = dict(case["platform"] or {})
    if platform.get("is_sm100"):
        major = 10
    elif platform.get("is_blackwell"):
        major = 12
    elif platform.get("is_sm90"):
        major = 9
    else:
        major = 8
    facts = cuda_platform_facts(major)
    if platform.get("is_sm100"):
        facts.update(is_sm100=True, is_sm100_or_sm110=True, is_blackwell=True)
    if platform.get("is_hip") or str(case["device"]) == "hip":
        facts.update(is_cuda=False, is_hip=True, has_flashinfer=False)
    if str(case["device"]) == "npu":
        facts.update(is_cuda=False, is_npu=True, has_flashinfer=False)
    return facts


# ---- process-wide SGLang flags (CUDA answers on a CPU host, bridge doc 4) -------------------


def _loaded_sglang_modules() -> list[types.ModuleType]:
    import sys

    return [m for name, m in list(sys.modules.items()) if name.startswith("sglang") and m is not None]


@contextlib.contextmanager
def cuda_answers(case: Mapping[str, Any]) -> Iterator[None]:
    """Rebind the module-level flags SGLang computed at import for this host (CPU) to the case's device.

    * ``is_float4_e2m1fn_x2`` is ``is_cuda() and dtype == float4_e2m1fn_x2``: on CPU every FP4
      branch would be skipped, so FP4 is priced like fp8. A CUDA case gets the CUDA answer.
    * ``_is_npu`` / ``_is_hip`` in the pool and configurator modules, for NPU/HIP cases.
    * ``copy_all_layer_kv_cache_func`` launches a Triton kernel when an MHA pool is built
      under speculative decoding: a no-op here.
    * Pool modules that allocate with a hard-coded ``device="cuda"`` (the Mamba speculative
      state of 0.5.18-0.5.19) see a ``torch`` whose factories put such tensors on ``meta``.
    """
    import torch

    saved: list[tuple[types.ModuleType, str, Any]] = []

    def rebind(module: types.ModuleType, name: str, value: Any) -> None:
        saved.append((module, name, getattr(module, name)))
        setattr(module, name, value)

    device = str(case["device"])
    is_npu = device == "npu"
    is_hip = bool((case["platform"] or {}).get("is_hip")) or device == "hip"
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)

    def is_fp4(dtype: Any) -> bool:
        return fp4 is not None and dtype == fp4

    had_meta = hasattr(torch, "meta")
    try:
        if not had_meta:  # pools ask torch.get_device_module(device) for streams: CPU's answer on meta
            torch.meta = torch.cpu  # type: ignore[attr-defined]
        for module in _loaded_sglang_modules():
            namespace = vars(module)
            if device in ("cuda", "hip") and "is_float4_e2m1fn_x2" in namespace:
                rebind(module, "is_float4_e2m1fn_x2", is_fp4)
            if "_is_npu" in namespace and isinstance(namespace["_is_npu"], bool):
                rebind(module, "_is_npu", is_npu)
            if "_is_hip" in namespace and isinstance(namespace["_is_hip"], bool):
                rebind(module, "_is_hip", is_hip)
            if "copy_all_layer_kv_cache_func" in namespace:
                rebind(module, "copy_all_layer_kv_cache_func", lambda *a, **k: None)
            if module.__name__.startswith("sglang.srt.mem_cache.") and namespace.get("torch") is torch:
                rebind(module, "torch", _TorchWithCudaOnMeta(torch))
            for cls in [v for v in namespace.values() if isinstance(v, type) and v.__module__ == module.__name__]:
                if "_init_kv_copy_and_warmup" in vars(cls):  # reads data_strides[0].item(): not on meta
                    rebind(cls, "_init_kv_copy_and_warmup", _no_kv_copy)  # type: ignore[arg-type]
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)
        if not had_meta and hasattr(torch, "meta"):
            delattr(torch, "meta")


class _TorchWithCudaOnMeta:
    """``torch``, except that tensor factories asked for ``device="cuda"`` build on ``meta``."""

    _FACTORIES = frozenset({"zeros", "empty", "ones", "full", "zeros_like", "empty_like"})

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._torch, name)
        if name not in self._FACTORIES:
            return value

        def factory(*args: Any, **kwargs: Any) -> Any:
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "meta"
            return value(*args, **kwargs)

        return factory


def _no_kv_copy(self: Any) -> None:
    """SGLang's tiled-copy warmup picks kernel tiles and launches Triton: no tensors to size."""
    self._kv_copy_config = None


# ---- walking a built pool --------------------------------------------------------------------

#: back references and allocator state: not storage of the pool being listed
_SKIP_ATTRS = frozenset({"req_to_token_pool", "token_to_kv_pool_allocator", "allocator", "mamba_allocator"})
#: SGLang attribute paths -> the names the project gives the same tensors (sub-pools
#: by role, the DSA indexer keys after their accessor ``get_index_k_with_scale_buffer``)
NAME_ALIASES: tuple[tuple[str, str], ...] = (
    ("full_kv_pool.", "full."),
    ("swa_kv_pool.", "swa."),
    ("mamba_pool.mamba_cache.", "mamba."),
    # 0.5.3 keeps the Mamba state as a tuple, in the order the later releases name
    ("mamba_pool.mamba_cache[0]", "mamba.conv"),
    ("mamba_pool.mamba_cache[1]", "mamba.temporal"),
    ("mamba_pool.mamba_cache[2]", "mamba.intermediate_ssm"),
    ("mamba_pool.mamba_cache[3]", "mamba.intermediate_conv_window"),
    ("index_key_cache.buffer", "index_k_with_scale_buffer"),
    # DeepSeek-V4: SGLang's ratio-keyed dicts and per-layer state pools -> role names
    ("kv_pools[4].", "c4."),
    ("kv_pools[128].", "c128."),
    ("index_pools[4].", "c4_indexer."),
    ("c4_kv_pool.", "c4."),  # up to 0.5.19 the ratio pools are named attributes
    ("c128_kv_pool.", "c128."),
    ("c4_indexer_kv_pool.", "c4_indexer."),
    ("indexer_compress_state_pools[", "indexer_state["),
    ("compress_state_pools[", "state["),
    (".kv_score_buffer.kv_score", ".kv_score"),
)


def project_name(name: str) -> str:
    """The project's name for a tensor SGLang holds at attribute path ``name``."""
    for old, new in NAME_ALIASES:
        name = name.replace(old, new)
    return name


def walk_tensors(
    obj: Any, prefix: str = "", seen: set[int] | None = None, views: dict[int, tuple[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every tensor an SGLang pool object holds, named by attribute path (``swa.kv_buffer[3]``).

    Walks attributes in definition order, lists/tuples (``[i]``), dicts (``[key]``) and nested
    SGLang objects; each object is visited once (shared sub-pools are not listed twice). A tensor
    that is a view (``_base`` set) puts its base in ``views`` (id -> (the first view's name, base))
    for :func:`view_bases` to list.
    """
    import torch

    seen = set() if seen is None else seen
    out: list[dict[str, Any]] = []
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    items: list[tuple[str, Any]]
    if hasattr(obj, "__dict__"):
        # public attributes first: a tensor held under both a public and a private name (a dense
        # conv window is its own backing storage) is listed under the name engines use
        attrs = sorted(vars(obj).items(), key=lambda item: item[0].startswith("_"))
        items = [(f"{prefix}{k}", v) for k, v in attrs if k not in _SKIP_ATTRS]
    else:
        return out
    views = {} if views is None else views
    for name, value in items:
        out.extend(_walk_value(name, value, seen, views, torch))
    return out


def view_bases(views: Mapping[int, tuple[str, Any]], seen: set[int]) -> list[dict[str, Any]]:
    """The storage behind views that no attribute lists (``seen``: the tensors walked), once per base.

    SGLang's ``MHATokenToKVPool._create_buffers_normal`` (release rule ``fused-kv-storage``) keeps K
    and V as the halves of one fused ``(2, rows, H, D)`` tensor per layer and holds only the halves:
    the base is named after its first view, ``k_buffer[0]._base`` (a private name, so the
    comparison reads it as backing).
    """
    return [
        {"name": f"{name}._base", "shape": list(base.shape), "dtype": str(base.dtype)}
        for key, (name, base) in views.items()
        if key not in seen
    ]


def _walk_value(
    name: str, value: Any, seen: set[int], views: dict[int, tuple[str, Any]], torch: Any
) -> list[dict[str, Any]]:
    if isinstance(value, torch.Tensor):
        if id(value) in seen:
            return []
        seen.add(id(value))
        base = value._base
        if base is not None:
            views.setdefault(id(base), (project_name(name), base))
        return [{"name": project_name(name), "shape": list(value.shape), "dtype": str(value.dtype)}]
    if isinstance(value, (list, tuple)):
        out: list[dict[str, Any]] = []
        for index, item in enumerate(value):
            out.extend(_walk_value(f"{name}[{index}]", item, seen, views, torch))
        return out
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out.extend(_walk_value(f"{name}[{key}]", item, seen, views, torch))
        return out
    module = type(value).__module__
    if module.startswith("sglang") and hasattr(value, "__dict__") and not isinstance(value, type):
        return walk_tensors(value, f"{name}.", seen, views)
    return []


# ---- the document ----------------------------------------------------------------------------


def _sizes_dict(config: Any, host: ConfiguratorHost | RunnerHost, mamba_slots: int | None) -> dict[str, Any]:
    """A ``MemoryPoolConfig`` under our ``PoolSizes`` names (DSV4 dtypes as plain names)."""
    out: dict[str, Any] = {}
    for key in SIZE_FIELDS:
        out[key] = getattr(config, key, 0 if key in _DSV4_SIZE_FIELDS else None)
    for key in ("c4_state_dtype", "c128_state_dtype"):
        out[key] = None
    derived = host.derive_pool_sizes(config) if config.max_running_requests is not None else None
    if derived is not None and derived.c4_state_dtype is not None:
        out["c4_state_dtype"] = _DTYPE_NAMES.get(str(derived.c4_state_dtype), str(derived.c4_state_dtype))
        out["c128_state_dtype"] = _DTYPE_NAMES.get(str(derived.c128_state_dtype), str(derived.c128_state_dtype))
    out["max_mamba_cache_size"] = mamba_slots
    return out


def sglang_document(case: Mapping[str, Any], *, base_dir: Path | None = None) -> dict[str, Any]:
    """SGLang 0.5.23's answer for one case, as ``plan --case --json`` reports ours.

    Raises :class:`SGLangCaseError` when SGLang itself refuses the case (its exception is named).
    """
    row = installed_release()
    merged = {**CASE_DEFAULTS, **case}
    config = case_hf_config(merged, base_dir)
    platform = platform_override(**_platform_facts(merged)) if row.platform_override else contextlib.nullcontext()
    with model_folder(config) as folder, model_folder(draft_config(config, merged)) as draft_folder, \
            quiet_stdout(), cuda_answers(merged), platform, compat.parallel_scope(merged):
        try:
            return _run(row, merged, folder, draft_folder)
        except KVCacheConfigError:
            raise
        except Exception as exc:  # SGLang's own refusals: AssertionError, ValueError, RuntimeError...
            raise SGLangCaseError(f"SGLang raised {type(exc).__name__}: {exc}") from exc


def draft_config(config: Mapping[str, Any], case: Mapping[str, Any]) -> dict[str, Any]:
    """The draft checkpoint's config a case implies (``eagle_draft_num_layers`` is the
    draft model's layer count, its per-layer geometry the target's). MTP targets (``num_nextn_predict_layers``)
    keep their config: SGLang's draft reads the MTP layer count from it."""
    layers = case.get("eagle_draft_num_layers")
    out = dict(config)
    if not case.get("is_draft_worker") or layers is None:
        return out
    key = next((k for k in ("text_config", "llm_config", "language_config") if isinstance(out.get(k), Mapping)), None)
    text = dict(out[key]) if key else out
    if text.get("num_nextn_predict_layers"):
        return out
    text["num_hidden_layers"] = int(layers)
    if isinstance(text.get("layer_types"), list):
        text["layer_types"] = text["layer_types"][: int(layers)]
    if key:
        out[key] = text
    return out


def _run(row: BridgeRelease, case: Mapping[str, Any], folder: str, draft_folder: str) -> dict[str, Any]:
    """One case. A draft worker also runs its target: its pools are built for the target's sizes,
    on the target's request pool (shared, so not reported as the draft's)."""
    if not case["is_draft_worker"]:
        sized = _sized(row, case, folder)
        sized.document.update(_build(case, sized, sized.pool_config, sized.pool_slots))
        _require_argparse(sized)
        return sized.document
    target = _sized(row, {**case, "is_draft_worker": False}, folder)
    _require_argparse(target)
    sized = _sized(row, case, draft_folder, tolerate_sizing_error=True, inherited_slots=target.mamba_slots)
    document = sized.document
    host = sized.host
    document["adopted_sizes"] = _derived_dict(host.derive_pool_sizes(target.final_config), target.mamba_slots)
    document["pool_sizes"] = _derived_dict(host.derive_pool_sizes(target.pool_config), target.pool_slots)
    document.update(_build(case, sized, target.pool_config, target.pool_slots, shared_from=target))
    _require_argparse(sized)
    return document


def _require_argparse(sized: _Sized) -> None:
    """The release's argparse refusal of a value its sizing accepted (:func:`compat.argparse_refusal`)."""
    if sized.argparse_refusal is not None:
        raise UnsupportedConfigurationError(sized.argparse_refusal)


@dataclasses.dataclass
class _Sized:
    """SGLang's objects for one case and its finalised configs."""

    document: dict[str, Any]
    row: BridgeRelease
    server_args: Any
    host: ConfiguratorHost | RunnerHost
    hf: Any
    final_config: Any
    pool_config: Any
    pool_slots: int | None
    mamba_slots: int | None
    argparse_refusal: str | None = None


def _sized(
    row: BridgeRelease,
    case: Mapping[str, Any],
    folder: str,
    *,
    tolerate_sizing_error: bool = False,
    inherited_slots: int | None = None,
) -> _Sized:
    server_args = importlib.import_module("sglang.srt.server_args")

    fields = server_args_fields(case, folder)
    launch_ratio = launch_set_swa_ratio(row, case, folder)
    if launch_ratio is not None:
        fields["swa_full_tokens_ratio"] = launch_ratio
    known = compat.accepted_keywords(server_args.ServerArgs)
    if known is not None and case["disaggregation_decode_extra_slots"] is None:
        fields = {k: v for k, v in fields.items() if k in known or k not in _LAUNCH_FILLED}
    if known is not None:  # a field at its default is not given: a release without it launches the same
        fields = {k: v for k, v in fields.items() if k in known or not is_unset(k, v)}
    if known is not None:  # a release before a rename takes the field under its old name
        for new, old in RENAMED_SERVER_ARGUMENTS:
            if new in fields and new not in known and old in known:
                fields[old] = fields.pop(new)
    sa = compat.make_server_args(row, server_args.ServerArgs, fields)
    refusal = compat.argparse_refusal(row, server_args.ServerArgs, fields)
    sa._swa_full_tokens_ratio_explicitly_set = case["swa_full_tokens_ratio"] is not None
    compat.publish_server_args(row, sa)
    is_draft = bool(case["is_draft_worker"])
    host, hf = (_configurator_host if row.configurator else _runner_host)(case, folder, sa)
    configurator = _configurator(row, host)
    page = int(case["page_size"])
    document: dict[str, Any] = {
        "configurator": getattr(configurator, "name", type(configurator).__name__),
        "cell_size": _cell(configurator),
    }
    mamba_slots = None if is_draft else _mamba_slots(row, case, host, sa)
    if inherited_slots is not None:  # a draft reads the slot count the target's reservation fixed
        compat.set_mamba_slots(row, sa, inherited_slots)
    try:
        sizes = configurator.calculate_pool_sizes(int(case["available_bytes"]), page)
        sizes = _finalised(row, configurator, host, sizes)
        document["sizes"] = _sizes_dict(sizes, host, mamba_slots)
        capped = None
        document["sizes_from_max_tokens"] = None
        if case["max_tokens"] is not None:
            capped = configurator.calculate_pool_sizes_from_max_tokens(int(case["max_tokens"]), page)
            capped = _finalised(row, configurator, host, capped)
            document["sizes_from_max_tokens"] = _sizes_dict(capped, host, mamba_slots)
    except Exception as exc:  # a draft's own sizing is never used by SGLang; report its refusal
        if not tolerate_sizing_error:
            raise
        document.update(sizes=None, sizes_from_max_tokens=None,
                        sizing_error=f"SGLang's {type(configurator).__name__} raised {type(exc).__name__}: {exc}")
        return _Sized(document, row, sa, host, hf, None, None, None, mamba_slots, refusal)
    pool_config = capped or sizes
    pool_slots = mamba_slots
    if case["pool_max_tokens"] is not None:
        pool_config = configurator.calculate_pool_sizes_from_max_tokens(int(case["pool_max_tokens"]), page)
        pool_config.max_running_requests = int(case["pool_max_running_requests"])
        pool_config = compat.finalize_pool_config(row, configurator, pool_config)
        if mamba_slots is not None:
            pool_slots = case["pool_max_mamba_cache_size"] or 3 * int(case["pool_max_running_requests"])
    document["pool_sizes"] = _sizes_dict(pool_config, host, pool_slots)
    return _Sized(document, row, sa, host, hf, capped or sizes, pool_config, pool_slots, mamba_slots, refusal)


def _configurator(row: BridgeRelease, host: ConfiguratorHost | RunnerHost) -> Any:
    """SGLang's pool configurator for the host (``create_memory_pool_configurator``); up to 0.5.10, the
    ModelRunner's inline sizing behind the same two entry points (:class:`.profiled.RunnerProfile`)."""
    if isinstance(host, InitRunnerHost):
        return host.profile
    if not row.pool_configurator:
        return RunnerProfile(host.source)
    pool_mod = importlib.import_module("sglang.srt.model_executor.pool_configurator")
    return pool_mod.create_memory_pool_configurator(host.source)


def launch_set_swa_ratio(row: BridgeRelease, case: Mapping[str, Any], folder: str) -> float | None:
    """The ``swa_full_tokens_ratio`` the release's own launch writes for a DeepSeek-V4 case that does not give one,
    where that launch value is what the configurator reads (``DSV4_LAUNCH_SETS_SWA_RATIO``: up to 0.5.20); else None.

    The launch runs as ``verify --against sglang --launch`` runs it (:mod:`._launch_probe`: a forked child that
    believes it is on the case's GPU generation), on the case's model and parallel widths; SGLang's own model
    override (``_deepseek_v4_overrides``) decides. A launch SGLang refuses is the case's refusal.
    """
    from ...strategies.dsv4 import DSV4_LAUNCH_SETS_SWA_RATIO

    architectures = case_hf_config(case, None).get("architectures") if case.get("preset") else None
    if architectures is None:
        config = json.loads(Path(folder, "config.json").read_text(encoding="utf-8"))
        architectures = config.get("architectures")
    rows = [architecture_row(str(name)) for name in architectures] if isinstance(architectures, list) else []
    is_dsv4 = any(row is not None and row.dsv4 for row in rows)
    if case["swa_full_tokens_ratio"] is not None or not is_dsv4 or not DSV4_LAUNCH_SETS_SWA_RATIO.holds(row.release):
        return None
    from . import _launch_probe

    _launch_probe.preload_resolution_modules()
    major = 10 if (case["platform"] or {}).get("is_sm100") else 9
    fields = {"model_path": folder, "tokenizer_path": folder, "skip_tokenizer_init": True,
              "tp_size": int(case["tp_size"]), "pp_size": int(case["pp_size"])}  # fmt: skip
    answer = _launch_probe.resolve_forked(row, _launch_probe.GpuFacts(major, 0, 81559.0), fields)
    if "refused" in answer:
        raise SGLangCaseError(f"SGLang's launch refused the case: {answer['refused']}")
    return float(answer["ok"]["swa_full_tokens_ratio"])


def _model_objects(case: Mapping[str, Any], folder: str) -> tuple[Any, Any, Any, Any]:
    """``(ModelConfig, stand-in model, SpeculativeAlgorithm, model dtype)`` for one rank.

    The stand-in carries what sizing reads of a loaded model: ``config``, the PP stage's
    ``start_layer`` / ``end_layer`` (a draft holds its own layers on the last stage), the model
    class's ``get_attention_sliding_window_size`` and an FP8 ``quant_config`` when the checkpoint
    says its KV cache is FP8.
    """
    import torch

    model_config_mod = importlib.import_module("sglang.srt.configs.model_config")
    spec_mod = importlib.import_module("sglang.srt.speculative.spec_info")
    dist_utils = importlib.import_module("sglang.srt.distributed.utils")
    is_draft = bool(case["is_draft_worker"])
    spec_name = case["speculative_algorithm"]
    model_config = compat.call(
        model_config_mod.ModelConfig,
        model_path=folder,
        dtype=str(case["model_dtype"]),
        speculative_algorithm=spec_name,
        is_draft_model=is_draft,
        context_length=case["context_length"],
        disable_hybrid_swa_memory=bool(case["disable_hybrid_swa_memory"]),
    )
    hf = model_config.hf_config
    model = types.SimpleNamespace(layers=[], config=hf)
    pp_size, pp_rank = int(case["pp_size"]), int(case["pp_rank"])
    if pp_size > 1 and not is_draft:
        model.start_layer, model.end_layer = dist_utils.get_pp_indices(model_config.num_hidden_layers, pp_rank, pp_size)
    _bind_sliding_window_method(model, hf)
    quant = getattr(hf, "quantization_config", None)
    if isinstance(quant, Mapping) and str(quant.get("kv_cache_quant_algo", "")).upper() == "FP8":
        model.quant_config = types.SimpleNamespace(kv_cache_quant_algo="FP8")
    spec_algorithm = spec_mod.SpeculativeAlgorithm.from_string(spec_name)
    return model_config, model, spec_algorithm, getattr(torch, str(case["model_dtype"]))


def _is_standalone(spec_algorithm: Any) -> bool:
    """``SpeculativeAlgorithm.is_standalone()``; 0.5.1 has no STANDALONE algorithm (nor the method)."""
    method = getattr(spec_algorithm, "is_standalone", None)
    return bool(method()) if method is not None else False


def _draft_layers(case: Mapping[str, Any], hf: Any, spec_algorithm: Any) -> int | None:
    """The draft model's layers: the case's, else the target's MTP layers for EAGLE / STANDALONE
    (``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``: a path-less draft reads them)."""
    draft_layers = case["eagle_draft_num_layers"]
    if draft_layers is None and (spec_algorithm.is_eagle() or _is_standalone(spec_algorithm)):
        draft_layers = getattr(hf, "num_nextn_predict_layers", None)
    return None if draft_layers is None else int(draft_layers)


def _configurator_host(case: Mapping[str, Any], folder: str, sa: Any) -> tuple[ConfiguratorHost, Any]:
    """SGLang 0.5.16+: ``KVCacheConfigurator`` built as ``ModelRunner.init_memory_pool`` builds it."""
    model_config_mod = importlib.import_module("sglang.srt.configs.model_config")
    kvc_mod = importlib.import_module("sglang.srt.mem_cache.kv_cache_configurator")
    layer_setup = importlib.import_module("sglang.srt.model_executor.model_runner_components.layer_setup")
    load_utils = importlib.import_module("sglang.srt.model_executor.model_runner_components.load_model_utils")
    dtype_mod = importlib.import_module("sglang.srt.mem_cache.kv_cache_dtype")
    aux_mod = importlib.import_module("sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state")
    model_config, model, spec_algorithm, model_dtype = _model_objects(case, folder)
    hf = model_config.hf_config
    is_draft = bool(case["is_draft_worker"])
    layer_info = compat.call(
        layer_setup.resolve_layer_indices,
        model=model, model_config=model_config, is_draft_worker=is_draft, draft_model_idx=None,
        spec_algorithm=spec_algorithm,
    )  # fmt: skip
    adjust = getattr(layer_setup, "adjust_hybrid_swa_layer_ids", None)
    if adjust is not None:  # 0.5.16-0.5.20's ModelRunner trims the model's layer lists to the stage here
        adjust(model_config=model_config, start_layer=layer_info.start_layer, end_layer=layer_info.end_layer,
               is_hybrid_swa=model_config.is_hybrid_swa)  # fmt: skip
    sliding_window = load_utils.resolve_sliding_window_size(model, model_config)
    kv_str, kv_dtype = compat.call(
        dtype_mod.configure_kv_cache_dtype,
        server_args_kv_cache_dtype=str(case["kv_cache_dtype"]),
        model=model,
        model_dtype=model_dtype,
        is_draft_worker=is_draft,
        is_dflash=spec_algorithm.is_dflash_family(),
        speculative_draft_attention_backend=None,
        speculative_draft_kv_cache_dtype=None,
    )
    draft_layers = _draft_layers(case, hf, spec_algorithm)
    aux = compat.call(
        aux_mod.SpecAuxHiddenStateConfig,
        eagle_draft_num_layers=None if spec_algorithm.is_dflash_family() else draft_layers,
        eagle_draft_swa_num_layers=case["eagle_draft_swa_num_layers"],
        dflash_draft_num_layers=draft_layers if spec_algorithm.is_dflash_family() else None,
        is_dspark=spec_algorithm.is_dspark(),
        # 0.5.18-0.5.22 read a DFLASH draft's own cell here (resolved from its model config at launch)
        dflash_draft_cell_size_per_token=case.get("dflash_draft_cell_size_per_token"),
    )
    pp_size, pp_rank = int(case["pp_size"]), int(case["pp_rank"])
    pp_group = types.SimpleNamespace(
        world_size=pp_size, rank_in_group=pp_rank, is_first_rank=pp_rank == 0, is_last_rank=pp_rank == pp_size - 1
    )
    kvc = compat.call(
        kvc_mod.KVCacheConfigurator,
        device="meta",
        gpu_id=0,
        ps=compat.parallel_state(case),
        attn_dp_size=int(case["attn_dp_size"]),
        pp_size=pp_size,
        pp_group=pp_group,
        model=model,
        model_config=model_config,
        server_args=sa,
        kv_cache_dtype=kv_dtype,
        kv_cache_dtype_str=kv_str if kv_str is not None else str(case["kv_cache_dtype"]),
        model_dtype=model_dtype,
        page_size=int(case["page_size"]),
        sliding_window_size=sliding_window,
        spec_algorithm=spec_algorithm,
        is_draft_worker=is_draft,
        post_capture_kv_active=False,
        spec_aux_config=aux,
        draft_parallel_layout=None,
        is_hybrid_swa=model_config.is_hybrid_swa,
        is_hybrid_swa_compress=model_config.is_hybrid_swa_compress,
        use_mla_backend=model_config.attention_arch == model_config_mod.AttentionArch.MLA,
        layer_info=layer_info,
        forward_stream=None,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=None,
        memory_pool_config=None,
        draft_model_idx=None,
    )
    if hasattr(kvc, "dflash_draft_cell_size_per_token") and not is_draft and spec_algorithm.is_dflash_family():
        # 0.5.23's KVCacheConfigurator.__post_init__ resolves it from the draft model config (draft_kv_budget);
        # the case gives the value that draft would resolve to
        kvc.dflash_draft_cell_size_per_token = case.get("dflash_draft_cell_size_per_token")
    return ConfiguratorHost(kvc), hf


def _runner_host(case: Mapping[str, Any], folder: str, sa: Any) -> tuple[RunnerHost, Any]:
    """SGLang 0.5.15: a ``ModelRunner`` set up for one rank as ``ModelRunner.initialize`` sets it up.

    ``initialize``'s layer count: the draft of a model with MTP layers holds
    ``num_nextn_predict_layers``; MiMoV2MTP and Step3p5MTP drafts one; otherwise
    ``max(num_hidden_layers, num_attention_layers)``; then the stage's ``[start, end)``, times
    ``loop_num``, and the PP-with-MTP check.
    """
    model_config, model, spec_algorithm, model_dtype = _model_objects(case, folder)
    hf = model_config.hf_config
    is_draft = bool(case["is_draft_worker"])
    mtp = model_config.num_nextn_predict_layers
    has_mtp = mtp is not None and mtp > 0
    # 0.5.1's ModelConfig has no num_attention_layers (its initialize takes num_hidden_layers)
    attention_layers = getattr(model_config, "num_attention_layers", 0)
    layers = mtp if is_draft and has_mtp else max(model_config.num_hidden_layers, attention_layers)
    row = architecture_row(str(hf.architectures[0]))
    if row is not None and row.swa_layer_split is SWALayerSplit.DRAFT_ONE_SWA:  # the one-layer MTP heads
        layers = 1
    start, end = getattr(model, "start_layer", 0), getattr(model, "end_layer", layers)
    effective = (end - start) * int(getattr(hf, "loop_num", 1) or 1)
    if has_mtp and not spec_algorithm.is_none() and effective != layers:
        raise SGLangCaseError("SGLang raised AssertionError: PP is not compatible with MTP models.")
    draft_layers = _draft_layers(case, hf, spec_algorithm)
    dflash = bool(getattr(spec_algorithm, "is_dflash", lambda: False)())  # 0.5.10 has no DFLASH
    runner = hosts.model_runner(
        server_args=sa, model_config=model_config, model=model, case=case, model_dtype=model_dtype,
        spec_algorithm=spec_algorithm, layer_range=(start, end), num_effective_layers=effective,
        eagle_draft_num_layers=None if dflash else draft_layers,
        dflash_draft_num_layers=draft_layers if dflash else None,
    )  # fmt: skip
    return (RunnerHost if installed_release().resolution_steps else InitRunnerHost)(runner), hf


def _derived_dict(derived: Any, slots: int | None) -> dict[str, Any]:
    """SGLang's ``_PoolSizes`` (what a pool is built for) under our ``PoolSizes`` names."""
    out = {key: getattr(derived, key, 0 if key in _DSV4_SIZE_FIELDS else None) for key in SIZE_FIELDS}
    for key in ("c4_state_dtype", "c128_state_dtype"):
        if out[key] is not None:
            out[key] = _DTYPE_NAMES.get(str(out[key]), str(out[key]))
    out["max_mamba_cache_size"] = slots
    return out


def _bind_sliding_window_method(model: Any, hf: Any) -> None:
    """Models whose class overrides ``get_attention_sliding_window_size`` (Gemma, gpt-oss) answer it."""
    registry = importlib.import_module("sglang.srt.models.registry")
    architectures = list(getattr(hf, "architectures", None) or [])
    try:
        model_cls, _ = registry.ModelRegistry.resolve_model_cls(architectures)
    except Exception:
        return
    method = getattr(model_cls, "get_attention_sliding_window_size", None)
    if method is None:
        return
    text_config = getattr(hf, "text_config", None) or hf
    model.text_config = text_config
    model.get_attention_sliding_window_size = types.MethodType(method, model)
    # multimodal wrappers (Gemma 3) ask their language model: give the stand-in one
    module = importlib.import_module(model_cls.__module__)
    for value in vars(module).values():
        inner = getattr(value, "get_attention_sliding_window_size", None)
        causal = isinstance(value, type) and value.__name__.endswith("ForCausalLM")
        if causal and value is not model_cls and inner is not None:
            language_model = types.SimpleNamespace(config=text_config, text_config=text_config)
            language_model.get_attention_sliding_window_size = types.MethodType(inner, language_model)
            model.language_model = language_model
            break


def _cell(configurator: Any) -> int | float:
    """The strategy's cell (``_cell_size``; DeepSeek-V4: ``bytes_per_full_token``)."""
    cell = getattr(configurator, "_cell_size", None)
    if cell is None:
        cell = getattr(configurator, "bytes_per_full_token", None)
    if not isinstance(cell, (int, float)):
        raise SGLangCaseError(f"{type(configurator).__name__} has no cell size the bridge knows")
    return cell


def _finalised(row: BridgeRelease, configurator: Any, host: ConfiguratorHost | RunnerHost, config: Any) -> Any:
    if isinstance(host, InitRunnerHost):  # 0.5.9 sizes its request pool with the tokens
        return config
    config.max_running_requests = host.resolve_max_num_reqs(config.max_total_num_tokens)
    return compat.finalize_pool_config(row, configurator, config)


def _mamba_slots(
    row: BridgeRelease, case: Mapping[str, Any], host: ConfiguratorHost | RunnerHost, sa: Any
) -> int | None:
    """The Mamba state-slot count (per DP shard) SGLang's ``_handle_max_mamba_cache`` fixes.

    ``available_bytes`` is what SGLang hands ``calculate_pool_sizes``: the reservation is already
    out of it. The slot count is the one SGLang chooses for the *smallest* pre-reservation budget
    ``R`` whose reservation leaves exactly ``available_bytes``: starting from ``R = available``,
    ``R += available - left(R)`` never steps over a solution (``left`` grows at most one byte per
    byte of ``R``). With ``max_mamba_cache_size`` in the case (or radix cache off with a request
    cap) the count does not depend on ``R`` at all. SGLang's own function answers ``left(R)``.
    """
    if host.mambaish_config is None:
        return None
    target = int(case["available_bytes"])
    given = sa.max_mamba_cache_size

    def left(rest_bytes: int) -> int | None:
        compat.reset_mamba_slots(row, sa, given)  # drops the previous call's slot count
        try:
            return int(host.handle_max_mamba_cache(rest_bytes / (1 << 30)) * (1 << 30))
        except RuntimeError:  # "Not enough GPU memory for hybrid ... state cache": budget too small
            return None

    rest = target
    for _ in range(400):
        got = left(rest)
        if got is None:
            rest += max(target // 16, 1 << 20)
            continue
        if got >= target:
            break
        rest += target - got
    return compat.mamba_slot_count(row, sa)


def _build(
    case: Mapping[str, Any], sized: _Sized, config: Any, mamba_slots: int | None, *, shared_from: _Sized | None = None
) -> dict[str, Any]:
    """Build the request and token-to-KV pools on ``meta`` and list their tensors.

    A draft (``shared_from`` its target) builds on the target's request pool, as SGLang's draft
    worker does; tensors the target's pools own are not listed as the draft's.
    """
    if str(case["device"]) == "npu":
        return {"token_to_kv_pool_class": None, "pools": None,
                "pools_unavailable": "SGLang's NPU pool classes need torch_npu"}
    slots = compat.pin_mamba_slots(sized.row, sized.server_args, mamba_slots)
    seen: set[int] = set()
    try:
        with slots:
            shared = None
            if shared_from is not None:  # the target's request pool: marked as seen, not listed
                shared = shared_from.host.shared_pools(config)
                for owned in shared:  # the target allocator's full -> SWA mapping is its own too
                    walk_tensors(owned, seen=seen)
            req_pool, pool = sized.host.build(config, shared=shared)
    except Exception as exc:  # sizing stands when SGLang's builder refuses: report both, as plan --json does
        return {"token_to_kv_pool_class": None, "pools": None,
                "layout_error": f"SGLang's pool builder raised {type(exc).__name__}: {exc}"}
    pool_views: dict[int, tuple[str, Any]] = {}
    req_views: dict[int, tuple[str, Any]] = {}
    pools = walk_tensors(pool, seen=seen, views=pool_views)
    if req_buffers_hold_state(req_pool, pool) and shared_from is None:  # 0.5.3: the state is the request pool's only
        pools += walk_tensors(req_pool.mamba_pool, "mamba_pool.", seen=seen, views=pool_views)
    # state the token-to-KV pool already listed (SGLang's Mamba pool hangs off both) is not repeated
    req_buffers = None if shared_from is not None else walk_tensors(req_pool, seen=seen, views=req_views)
    # storage behind views, once every attribute is walked (a private base is listed under its own name)
    pools += view_bases(pool_views, seen)
    seen.update(pool_views)
    req = None if req_buffers is None else {
        "pool_class": type(req_pool).__name__, "buffers": req_buffers + view_bases(req_views, seen)}
    out = {"token_to_kv_pool_class": type(pool).__name__, "pools": pools, "req_to_token_pool": req}
    if isinstance(sized.host, InitRunnerHost):  # 0.5.9 re-derives the sizes it builds for (caps, a draft's split)
        out["pool_sizes"] = _sizes_dict(sized.host.built_sizes(), sized.host, mamba_slots)
    return out


def req_buffers_hold_state(req_pool: Any, pool: Any) -> bool:
    """SGLang 0.5.3's Mamba pool hangs off the request pool only (later, ``HybridLinearKVPool`` holds it too); the
    bridge lists it with the KV side either way, as the project's plan does."""
    return hasattr(req_pool, "mamba_pool") and not hasattr(pool, "mamba_pool")


def env_of(case: Mapping[str, Any]) -> dict[str, str]:
    """The ``SGLANG_*`` environment a case needs (read by SGLang at import)."""
    env = case.get("env") or {}
    if not isinstance(env, Mapping):
        raise KVCacheConfigError(f"case field 'env' must be an object of SGLANG_* knobs, got {env!r:.60}")
    return {str(k): str(v) for k, v in env.items()}


def environment_matches(case: Mapping[str, Any]) -> bool:
    """Whether this process's environment already holds the case's knobs."""
    return all(os.environ.get(k) == v for k, v in env_of(case).items())
