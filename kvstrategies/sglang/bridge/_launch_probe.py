"""Run an SGLang release's own launch resolution on this CPU host while it believes it is on a GPU.

Private to :mod:`.launch`. One import of SGLang in the parent (:func:`import_for_launch`:
torchvision stub, version check, the resolution modules), then one forked child per launch: the child answers
SGLang's platform probes for the GPU in question, resolves ``ServerArgs(**fields)`` and sends the
resolved fields back through a pipe. How a release is driven is its
:class:`~.bridge_releases.BridgeRelease` row: from 0.5.19 the launch resolves in
``ServerArgs.resolve_once()`` (``arg_groups/pipeline.py``) and platform facts are stated with
``runtime_context.override_platform``; up to 0.5.18 it resolves inside
``ServerArgs.__post_init__`` and the CUDA host's answers come only from the probe functions
rebound in every loaded sglang module. The hooks write process state (``SGLANG_*`` environment,
lru caches, the platform override), so no launch ever runs in a process that resolved another one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import pkgutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .bridge_releases import BridgeRelease
from .compat import accepted_keywords
from .runtime import (
    SGLangUnavailableError,
    check_version,
    cuda_platform_facts,
    install_cpu_amx_probe,
    install_kernel_stubs,
    install_torchvision_stub,
    quiet_stdout,
)

# --- launch-specific: preload the resolution modules, answer the probes, resolve -------------


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """SGLang prints import chatter on stdout; keep stdout for our own output."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def import_for_launch() -> BridgeRelease:
    """Import SGLang for launch resolution (torchvision stub first) and return its release row;
    an SGLang that is missing or a release the bridge does not drive is refused
    (:class:`.runtime.SGLangUnavailableError`). Only ``server_args`` is needed here, not the sizing
    modules of :func:`.runtime.import_sglang` (0.5.15 has no ``kv_cache_configurator``)."""
    try:
        with quiet_stdout():
            install_torchvision_stub()  # releases up to 0.5.21 import torchvision from `import sglang`
            install_cpu_amx_probe()
            sglang = importlib.import_module("sglang")
    except ImportError as exc:
        raise SGLangUnavailableError(f"SGLang is not installed ({exc}); see docs/sglang-bridge.md") from exc
    row = check_version(str(getattr(sglang, "__version__", "unknown")))
    # a release whose launch path imports its kernels unguarded (0.5.8) gets the whole-package stand-in; the
    # module stand-ins of the sizing path are not needed here
    install_kernel_stubs(tuple(name for name in row.kernel_stubs if "." not in name))
    os.environ.setdefault("SGLANG_DISABLE_REQUEST_LOGGING", "1")
    return row


def preload_resolution_modules() -> BridgeRelease:
    """Import every module the resolution pipeline imports lazily, while the probes still answer
    "CPU": imported later under the GPU answers, kernel modules would try to load sgl_kernel.
    Returns the installed release's row."""
    row = import_for_launch()
    with _quiet_stdout():
        importlib.import_module("sglang.srt.server_args")
        try:
            groups = importlib.import_module("sglang.srt.arg_groups")
        except ModuleNotFoundError:  # 0.5.11: every launch rule is in server_args
            groups = None
        for info in pkgutil.walk_packages(groups.__path__, groups.__name__ + ".") if groups is not None else ():
            with contextlib.suppress(Exception):  # a platform-only module may not import here
                importlib.import_module(info.name)
        for name in ("sglang.srt.model_loader", "sglang.srt.speculative.dflash_utils",
                     "sglang.srt.model_executor.cuda_graph_config", "sglang.srt.configs.model_config",
                     "sglang.srt.mem_cache.kv_cache_configurator"):  # fmt: skip
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:  # 0.5.15 has no kv_cache_configurator
                if exc.name != name:
                    raise
    return row


@dataclass(frozen=True)
class GpuFacts:
    """What a CUDA host answers SGLang's probes: capability major/minor and nvidia-smi MiB."""

    major: int
    minor: int
    capacity_mib: float

    def platform_facts(self) -> dict[str, Any]:
        """``runtime_context.override_platform`` facts (:func:`.runtime.cuda_platform_facts`)."""
        return cuda_platform_facts(self.major, self.minor)

    def probes(self) -> dict[str, Any]:
        """``sglang.srt.utils.common`` probes that modules import by name (bypassing the override;
        up to 0.5.18 they are the only answer): one table for every release, a probe a release
        does not have is nothing it calls."""
        f = self.platform_facts()
        return {
            "get_device_memory_capacity": lambda *a, **k: self.capacity_mib,
            "get_nvgpu_memory_capacity": lambda *a, **k: self.capacity_mib,
            "get_device_sm": lambda *a, **k: self.major * 10 + self.minor,
            "get_device_capability": lambda *a, **k: (self.major, self.minor),
            "get_device": lambda *a, **k: "cuda",
            "is_cuda": lambda *a, **k: True,
            "is_cuda_alike": lambda *a, **k: True,
            "is_cpu": lambda *a, **k: False,
            "is_hpu": lambda *a, **k: False,
            "is_host_cpu_arm64": lambda *a, **k: False,
            "is_sm80_supported": lambda *a, **k: self.major == 8,
            "is_ampere_with_cuda_12_3": lambda *a, **k: self.major == 8,
            "is_hip": lambda *a, **k: False,
            "is_npu": lambda *a, **k: False,
            "is_xpu": lambda *a, **k: False,
            "is_musa": lambda *a, **k: False,
            "is_mps": lambda *a, **k: False,
            "is_sm90_supported": lambda *a, **k: f["is_sm90"],
            "is_hopper_with_cuda_12_3": lambda *a, **k: f["is_sm90"],
            "is_sm100_supported": lambda *a, **k: f["is_sm100"],
            "is_sm100_or_sm110_supported": lambda *a, **k: f["is_sm100_or_sm110"],
            "is_sm110_supported": lambda *a, **k: f["is_sm110"],
            "is_sm120_supported": lambda *a, **k: f["is_sm120"],
            "is_blackwell_supported": lambda *a, **k: f["is_blackwell"],
            "is_flashinfer_available": lambda *a, **k: True,
        }


def install_gpu(facts: GpuFacts, row: BridgeRelease) -> None:
    """Make SGLang believe it runs on ``facts`` (call in the child only: this is process state).

    The platform override (releases whose row has ``platform_override``), every by-name import
    of the probes in loaded ``sglang`` modules, ``torch.cuda.get_device_capability`` (read
    directly by the DSA rules), the CUDA-only ``mxfp4`` quantization registration, and
    ``current_platform`` as the CUDA platform object.
    """
    import torch

    if row.platform_override:
        rc = importlib.import_module("sglang.srt.runtime_context")
        known = {*getattr(rc, "_PLATFORM_PROBES", ()), *getattr(rc, "_PLATFORM_VALUES", ())}
        stated = {k: v for k, v in facts.platform_facts().items() if not known or k in known}
        rc.override_platform(**stated).install()
    probes = facts.probes()
    originals = [(name, getattr(defining, name)) for defining in map(importlib.import_module, row.probes_modules)
                 for name in probes if hasattr(defining, name)]  # fmt: skip
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("sglang"):
            continue
        for name, original in originals:
            if getattr(module, name, None) is original:
                setattr(module, name, probes[name])
    cuda: Any = torch.cuda
    cuda.get_device_capability = lambda *a, **k: (facts.major, facts.minor)
    quant = importlib.import_module("sglang.srt.layers.quantization")
    mxfp4 = importlib.import_module("sglang.srt.layers.quantization.mxfp4")
    for registry in ("BASE_QUANTIZATION_METHODS", "QUANTIZATION_METHODS"):
        getattr(quant, registry)["mxfp4"] = mxfp4.Mxfp4Config
    _install_cuda_platform()


def _install_cuda_platform() -> None:
    """``sglang.srt.platforms.current_platform`` is the CUDA platform object on a GPU host (before 0.5.13 there is
    none: a CUDA host keeps the base ``SRTPlatform``, which ``sglang.srt.platforms._resolve_platform`` returns when
    no plugin activates; before 0.5.11 there is no ``sglang.srt.platforms`` at all)."""
    try:
        platforms: Any = importlib.import_module("sglang.srt.platforms")
        cuda: Any = importlib.import_module("sglang.srt.platforms.cuda")
    except ModuleNotFoundError:
        return
    previous = platforms.current_platform
    platform = cuda.CudaSRTPlatform()
    platforms._current_platform = platform  # what later `from ... import current_platform` reads
    for module in list(sys.modules.values()):
        named_sglang = module is not None and getattr(module, "__name__", "").startswith("sglang")
        if named_sglang and getattr(module, "current_platform", None) is previous:
            setattr(module, "current_platform", platform)  # noqa: B010


def _plain(value: Any) -> Any:
    """A resolved field as JSON-ready data (dataclass records become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def server_fields(row: BridgeRelease, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` in this release's spelling: attention DP is ``dp_size`` with
    ``enable_dp_attention`` where ``ServerArgs`` has no ``attn_dp_size`` (row ``attn_dp_field``).
    Any other field the release lacks stays, so ``ServerArgs`` refuses it as SGLang would."""
    given = dict(fields)
    if not row.attn_dp_field:
        attn_dp = int(given.pop("attn_dp_size", 1))
        if attn_dp > 1:
            given.update(dp_size=attn_dp, enable_dp_attention=True)
    return given


def resolve_in_this_process(row: BridgeRelease, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve ``ServerArgs(**fields)`` the release's way and return the resolved fields (SGLang
    names), plus ``_swa_full_tokens_ratio_explicitly_set`` and ``_multimodal_reserve_mib``.
    Call after :func:`install_gpu`.

    With ``resolve_once`` (0.5.19 on): ``resolve_once()`` then ``resolved_dict()``; before:
    ``__post_init__`` resolves and materializes every declaration onto the fields
    (``arg_groups.overrides.materialize_declarations``), which are read directly.
    """
    server_args_mod = importlib.import_module("sglang.srt.server_args")
    cls = server_args_mod.ServerArgs
    known = accepted_keywords(cls)
    given = server_fields(row, fields)
    unknown = sorted(set(given) - known) if known is not None else []
    if unknown:
        raise TypeError(f"SGLang {row.line} ServerArgs has no field {', '.join(unknown)}")
    sa = cls(**given)
    if row.resolve_once:
        overrides = importlib.import_module("sglang.srt.arg_groups.overrides")
        base = importlib.import_module("sglang.srt.arg_groups.model_override_base")
        sa.resolve_once()
        resolved: dict[str, Any] = sa.resolved_dict()
        resolved["_swa_full_tokens_ratio_explicitly_set"] = overrides.resolution_result(
            sa, "_swa_full_tokens_ratio_explicitly_set"
        )
        model_config = base.model_config_of(sa)
    else:
        resolved = {f.name: _plain(getattr(sa, f.name)) for f in dataclasses.fields(sa)}
        resolved["_swa_full_tokens_ratio_explicitly_set"] = None
        model_config = None  # read only for the multimodal reserve (0.5.4's ServerArgs has no get_model_config)
    # The KV-budget share for multimodal allocations, from the environment the hooks just set.
    reserve_gb = 0.0
    if row.mm_kv_reserve:
        model_config = model_config if model_config is not None else sa.get_model_config()
        kv_configurator = importlib.import_module("sglang.srt.mem_cache.kv_cache_configurator")
        reserve_gb = kv_configurator.mm_runtime_reservation_gb(
            is_multimodal=bool(model_config.is_multimodal),
            mm_feature_transport=resolved.get("mm_feature_transport"),
        )
    resolved["_multimodal_reserve_mib"] = float(reserve_gb) * 1024
    # The scheduler's first step reads the algorithm (ServerArgs resolution leaves a name the release does not know
    # alone: DFLASH in 0.5.10): a name the release refuses there is its refusal of the launch.
    spec_info = importlib.import_module("sglang.srt.speculative.spec_info")
    spec_info.SpeculativeAlgorithm.from_string(resolved.get("speculative_algorithm"))
    return resolved


def resolve_forked(row: BridgeRelease, facts: GpuFacts, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve one launch in a fresh forked child; returns ``{"ok": resolved}`` or
    ``{"refused": "ExcType: message"}`` (SGLang rejected the launch)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        code = 0
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            try:
                install_gpu(facts, row)
                answer: dict[str, Any] = {"ok": resolve_in_this_process(row, fields)}
            except BaseException as exc:  # noqa: BLE001  (SGLang's refusal, any type)
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                answer = {"refused": f"{type(exc).__name__}: {first}"}
            data = json.dumps(answer, default=str).encode()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return {"refused": f"child process died (status {status}) before answering"}
    result: dict[str, Any] = json.loads(data)
    return result


def resolve_many_forked(
    row: BridgeRelease, jobs: list[tuple[GpuFacts, dict[str, Any]]], workers: int = 1
) -> list[dict[str, Any]]:
    """:func:`resolve_forked` for every job, in order. With ``workers > 1`` the jobs are dealt
    round-robin to that many forked workers (each still resolves every launch in its own fresh
    child, so no launch sees another's process state)."""
    if workers <= 1 or len(jobs) <= 1:
        return [resolve_forked(row, facts, fields) for facts, fields in jobs]
    pipes: list[tuple[int, int]] = []
    for worker in range(workers):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker
            os.close(read_fd)
            code = 0
            try:
                mine = {i: resolve_forked(row, *jobs[i]) for i in range(worker, len(jobs), workers)}
                with os.fdopen(write_fd, "wb") as pipe:
                    pipe.write(json.dumps(mine, default=str).encode())
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        pipes.append((pid, read_fd))
    answers: dict[int, dict[str, Any]] = {}
    for pid, read_fd in pipes:
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if not data:
            raise RuntimeError(f"a resolution worker died (status {status}) before answering")
        answers.update({int(k): v for k, v in json.loads(data).items()})
    return [answers[i] for i in range(len(jobs))]
