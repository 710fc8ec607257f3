"""Run SGLang 0.5.23's own launch resolution on this CPU host while it believes it is on a GPU.

Private to :mod:`.launch`. One import of SGLang in the parent (:func:`.runtime.import_sglang`:
torchvision stub, version check, sizing modules), then one forked child per launch: the child answers
SGLang's platform probes for the GPU in question (sglang_bridge.md §6), builds
``ServerArgs(**fields)``, calls ``resolve_once()`` and sends the resolved fields back through a
pipe. The hooks write process state (``SGLANG_*`` environment, lru caches, the platform
override), so no launch ever runs in a process that resolved another one.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pkgutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .runtime import cuda_platform_facts, import_sglang

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


def preload_resolution_modules() -> None:
    """Import every module the resolution pipeline imports lazily, while the probes still answer
    "CPU": imported later under the GPU answers, kernel modules would try to load sgl_kernel."""
    import_sglang()
    with _quiet_stdout():
        importlib.import_module("sglang.srt.server_args")
        groups = importlib.import_module("sglang.srt.arg_groups")
        for info in pkgutil.walk_packages(groups.__path__, groups.__name__ + "."):
            with contextlib.suppress(Exception):  # a platform-only module may not import here
                importlib.import_module(info.name)
        for name in ("sglang.srt.model_loader", "sglang.srt.speculative.dflash_utils",
                     "sglang.srt.model_executor.cuda_graph_config", "sglang.srt.configs.model_config",
                     "sglang.srt.mem_cache.kv_cache_configurator"):  # fmt: skip
            importlib.import_module(name)


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
        """``sglang.srt.utils.common`` probes that modules import by name (bypassing the override)."""
        f = self.platform_facts()
        return {
            "get_device_memory_capacity": lambda *a, **k: self.capacity_mib,
            "is_cuda": lambda *a, **k: True,
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


def install_gpu(facts: GpuFacts) -> None:
    """Make SGLang believe it runs on ``facts`` (call in the child only: this is process state).

    The platform override, every by-name import of the probes in loaded ``sglang`` modules,
    ``torch.cuda.get_device_capability`` (read directly by the DSA rules), the CUDA-only
    ``mxfp4`` quantization registration, and ``current_platform`` as the CUDA platform object.
    """
    import torch

    rc = importlib.import_module("sglang.srt.runtime_context")
    common = importlib.import_module("sglang.srt.utils.common")
    rc.override_platform(**facts.platform_facts()).install()
    probes = facts.probes()
    originals = {name: getattr(common, name) for name in probes if hasattr(common, name)}
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("sglang"):
            continue
        for name, original in originals.items():
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
    """``sglang.srt.platforms.current_platform`` is the CUDA platform object on a GPU host."""
    platforms: Any = importlib.import_module("sglang.srt.platforms")
    cuda: Any = importlib.import_module("sglang.srt.platforms.cuda")
    previous = platforms.current_platform
    platform = cuda.CudaSRTPlatform()
    platforms._current_platform = platform  # what later `from ... import current_platform` reads
    for module in list(sys.modules.values()):
        named_sglang = module is not None and getattr(module, "__name__", "").startswith("sglang")
        if named_sglang and getattr(module, "current_platform", None) is previous:
            setattr(module, "current_platform", platform)  # noqa: B010


def resolve_in_this_process(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``ServerArgs(**fields).resolve_once()`` and the resolved fields (SGLang names), plus
    ``_swa_full_tokens_ratio_explicitly_set``. Call after :func:`install_gpu`."""
    server_args_mod = importlib.import_module("sglang.srt.server_args")
    overrides = importlib.import_module("sglang.srt.arg_groups.overrides")
    base = importlib.import_module("sglang.srt.arg_groups.model_override_base")
    kv_configurator = importlib.import_module("sglang.srt.mem_cache.kv_cache_configurator")
    sa = server_args_mod.ServerArgs(**fields)
    sa.resolve_once()
    resolved: dict[str, Any] = sa.resolved_dict()
    resolved["_swa_full_tokens_ratio_explicitly_set"] = overrides.resolution_result(
        sa, "_swa_full_tokens_ratio_explicitly_set"
    )
    # The KV-budget share for multimodal allocations, from the environment the hooks just set.
    reserve_gb = kv_configurator.mm_runtime_reservation_gb(
        is_multimodal=bool(base.model_config_of(sa).is_multimodal),
        mm_feature_transport=overrides.resolution_result(sa, "mm_feature_transport"),
    )
    resolved["_multimodal_reserve_mib"] = float(reserve_gb) * 1024
    return resolved


def resolve_forked(facts: GpuFacts, fields: Mapping[str, Any]) -> dict[str, Any]:
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
                install_gpu(facts)
                answer: dict[str, Any] = {"ok": resolve_in_this_process(fields)}
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


def resolve_many_forked(jobs: list[tuple[GpuFacts, dict[str, Any]]], workers: int = 1) -> list[dict[str, Any]]:
    """:func:`resolve_forked` for every job, in order. With ``workers > 1`` the jobs are dealt
    round-robin to that many forked workers (each still resolves every launch in its own fresh
    child, so no launch sees another's process state)."""
    if workers <= 1 or len(jobs) <= 1:
        return [resolve_forked(facts, fields) for facts, fields in jobs]
    pipes: list[tuple[int, int]] = []
    for worker in range(workers):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker
            os.close(read_fd)
            code = 0
            try:
                mine = {i: resolve_forked(*jobs[i]) for i in range(worker, len(jobs), workers)}
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
