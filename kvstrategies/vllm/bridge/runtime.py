"""Importing vLLM on a CPU-only machine: the version check and the stand-ins for a GPU platform.

vLLM's KV-cache sizing is plain Python over its config objects, but reaching it goes through a
CUDA wheel: compiled extensions that link against the CUDA driver, an NVML probe for the device,
CUDA streams created while a model is constructed. :func:`import_vllm` puts stand-ins in front
of exactly those (never in front of a sizing function) and imports vLLM once:

* the wheel's compiled extensions (``vllm/_C_stable_libtorch.abi3.so`` and the others) import as
  empty modules (some, :data:`STUB_OP_MODULES`, as their stub ops), and the ``torch.ops``
  namespaces they would register answer every op name with a stub that raises when called, except
  the few capability probes vLLM calls while building a model (:data:`OP_ANSWERS`: what an SM90
  build answers) and the ops reported absent (:data:`ABSENT_OPS`);
* :class:`GpuFacts` (name, compute capability, memory) is the platform vLLM reads through
  ``vllm.platforms.current_platform``: a ``CudaPlatformBase`` subclass whose device probes
  answer those facts (:func:`use_gpu` switches them per case);
* Triton's CUDA driver reports itself active, as on a GPU host (vLLM picks Model Runner V2,
  and with it its number of concurrent batches, only when Triton has an active driver);
* ``torch.cuda.Stream`` / ``Event`` are inert, and an explicit ``device="cuda"`` tensor
  created while a model is built goes to ``meta``;
* the model registry inspects model classes in this process (vLLM starts a child process for
  it, which would lack the stand-ins); FlashInfer's artifactory probe answers "reachable" without
  a network call; ``torchvision`` is a permissive stub (the SGLang bridge's).

:func:`quiet` keeps vLLM's log chatter off a stdout that carries JSON.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import logging
import os
import socket
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ...core.releases import EngineRelease, parse_release
from ...errors import MissingDependencyError
from .requirements import VLLM_LINES

#: vLLM release lines whose private sizing path the bridge drives
SUPPORTED_VERSIONS: tuple[str, ...] = VLLM_LINES

#: vLLM is not installed, cannot be imported here, or is a version the bridge does not drive
VLLMUnavailableError = MissingDependencyError

#: compiled extension modules of the vLLM wheel (they link against the CUDA driver)
EXTENSION_MODULES: frozenset[str] = frozenset(
    {
        "vllm._C",
        "vllm._C_stable_libtorch",
        "vllm._moe_C",
        "vllm._moe_C_stable_libtorch",
        "vllm._qutlass_C",
        "vllm._flashmla_C",
        "vllm._flashmla_extension_C",
        "vllm._flashkda_C",
        "vllm._deepselect_C",
        "vllm.cumem_allocator",
        "vllm.spinloop",
        "vllm.fs_io_C",
        "vllm.vllm_flash_attn._vllm_fa2_C",
        "vllm.vllm_flash_attn._vllm_fa3_C",
        "vllm.third_party.deep_gemm._C_extension",
    }
)
#: modules that stand in whole as stub ops (each with the namespace its ops answer in, :data:`OP_ANSWERS`) in the
#: releases given (first, last): DeepGEMM itself up to 0.19.1, a package of its own that vLLM's GPU images install
#: (``vllm/utils/import_utils.py has_deep_gemm``; the sparse-attention indexer refuses to build without it), then
#: vLLM's vendored DeepGEMM ``_C``, a pybind extension up to 0.31.0 and in 0.32.0 a facade over ``torch.ops`` that
#: also needs a ``torch.classes`` runtime; 0.33.0's facade imports over the op stubs
STUB_OP_MODULES: dict[str, tuple[str, str, str]] = {
    "deep_gemm": ("deep_gemm", "0.12.0", "0.19.1"),
    "vllm.third_party.deep_gemm._C": ("deep_gemm", "0.20.2", "0.32.0"),
}
#: where the vendored DeepGEMM (up to 0.32.0) is told CUDA is when it initialises at import
#: (``deep_gemm/__init__.py _find_cuda_home`` asserts one exists); its stubbed ``init`` never reads it
STATED_CUDA_HOME = "/usr/local/cuda"
#: modules that only set up a GPU kernel's JIT warm-up (CuTe DSL, which vLLM 0.34.0's router gate imports on
#: Hopper: ``vllm/model_executor/layers/fused_moe/router/gate_linear.py GateLinear._register_sm90_bf16x3_warmup``);
#: they import as modules whose every name is an inert object (nothing they do changes a KV cache number)
WARMUP_MODULES: frozenset[str] = frozenset(
    {
        "vllm.model_executor.layers.fused_moe.router.bf16x3_router_gemm_sm90",
        # DeepSeek-V4's CuTe DSL kernels, imported to register their warm-up (``DeepseekCompressor.__init__``)
        "vllm.models.deepseek_v4.nvidia.ops.sparse_attn_compress_cutedsl",
        "vllm.models.deepseek_v4.nvidia.ops.fused_indexer_q_cutedsl",
        "vllm.models.deepseek_v4.nvidia.ops.dequant_gather_k_cutedsl",
    }
)
#: GPU kernel languages (TileLang, NVIDIA's CuTe DSL) whose packages vLLM's DeepSeek-V4 imports at model import
#: (``vllm/tilelang_utils`` refuses to import without TileLang on CUDA; the model's ``*_cutedsl`` ops import
#: ``cutlass``); they and every submodule import as inert modules: kernels defined in them are never called
#: while a model is built on ``meta``, and none allocates memory
KERNEL_DSL_PACKAGES: frozenset[str] = frozenset({"tilelang"})
#: ``torch.ops`` namespaces those extensions register
OP_NAMESPACES: tuple[str, ...] = (
    "_C",
    "_C_cache_ops",
    "_C_custom_ar",
    "_C_utils",
    "_moe_C",
    "_flashmla_C",
    "_flashmla_extension_C",
    "_vllm_fa2_C",
    "_vllm_fa3_C",
    "_qutlass_C",
    "_flashkda_C",
    "_deepselect_C",
    "_rocm_C",
    "deep_gemm",
)
#: capability probes vLLM calls while constructing a model, answered as an SM90/SM100 build answers
OP_ANSWERS: dict[str, Callable[..., Any]] = {
    "cutlass_scaled_mm_supports_fp8": lambda capability: capability >= 89,
    "cutlass_scaled_mm_supports_block_fp8": lambda capability: capability >= 90,
    "cutlass_group_gemm_supported": lambda capability: capability in (90, 100),
    "cutlass_scaled_mm_supports_fp4": lambda capability: capability >= 100,
    "get_num_sms": lambda *args: 132,
    # DeepGEMM's set-up (vLLM's vendored copy runs it when the sparse-attention indexer is built)
    "init": lambda *args: None,
}
#: ops the stand-in namespaces report as unregistered (``getattr(torch.ops._C, name, None)`` is ``None``):
#: MiniMax-M2's fused all-reduce norm at TP > 1 allocates a CUDA IPC workspace while the model is built
#: (``model_executor/layers/minimax_rms_norm/lamport_workspace.py``), which a CPU host cannot; vLLM 0.24.0
#: and later fall back to the unfused norm when that set-up fails, 0.23.0 when the op is absent. The
#: workspace is communication memory, not KV cache
ABSENT_OPS: frozenset[str] = frozenset({"minimax_allreduce_rms_qk"})
#: GPUs the stated host has: as many as any planned layout needs (a TP 16 plan spans two hosts
#: on a real cluster; vLLM's per-host check is not a sizing rule)
STATED_DEVICE_COUNT = 1024
#: the CPU memory the stated host has (a DGX H100's 2 TiB): vLLM 0.17.1 refuses a swap space (4 GiB a TP rank)
#: above 70% of the host's memory (``vllm/config/cache.py CacheConfig.verify_with_parallel_config``), a check of the
#: host, not a sizing rule; this CPU host has far less than a GPU server (0.18.1 has no swap space)
STATED_HOST_MEMORY_BYTES = 2 * 2**40


@dataclass(frozen=True)
class GpuFacts:
    """What vLLM's CUDA platform probes answer: NVML's name and total memory, the compute capability."""

    name: str
    capability: tuple[int, int]
    total_memory_bytes: int

    @property
    def sm(self) -> int:
        return self.capability[0] * 10 + self.capability[1]


_FACTS: list[GpuFacts] = []


def current_gpu() -> GpuFacts:
    if not _FACTS:
        _FACTS.append(gpu_facts(None))
    return _FACTS[0]


def gpu_facts(name: str | None) -> GpuFacts:
    """The facts a CUDA GPU of ``kvstrategies gpus`` answers (``None``: the vLLM plans' default GPU)."""
    from ..strategies.devices import vllm_device
    from ..strategies.engine_args import DEFAULT_VLLM_GPU

    device = vllm_device(name or DEFAULT_VLLM_GPU)
    return GpuFacts(device.nvml_name, device.capability, device.memory_bytes)


@contextlib.contextmanager
def use_gpu(facts: GpuFacts) -> Iterator[GpuFacts]:
    """Answer vLLM's device probes with ``facts`` inside the block (caches cleared on both ends)."""
    previous = current_gpu()
    _FACTS[0] = facts
    _clear_platform_caches()
    try:
        yield facts
    finally:
        _FACTS[0] = previous
        _clear_platform_caches()


# ---- compiled extensions and torch.ops -----------------------------------------------------


class _ExtensionFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import`` of a compiled extension with an empty module, and of a :data:`STUB_OP_MODULES` module
    (``stubbed``: those of the installed release, with their namespaces) with its stub ops."""

    def __init__(self, stubbed: dict[str, str]) -> None:
        self._stubbed = stubbed

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in EXTENSION_MODULES or fullname in self._stubbed:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name in self._stubbed:
            return _StubNamespace(self._stubbed[spec.name])
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _Inert:
    """Answers every attribute and call with itself: a kernel object whose warm-up registration does nothing."""

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return self

    def __getitem__(self, key: Any) -> _Inert:
        return self

    def _same(self, *args: Any) -> _Inert:
        return self

    # annotations and constants a kernel module computes at import (``cute.Tensor | None``, ``cutlass.Int32 * 2``)
    __or__ = __ror__ = __and__ = __add__ = __radd__ = __sub__ = __rsub__ = _same
    __mul__ = __rmul__ = __truediv__ = __floordiv__ = __mod__ = __neg__ = _same

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # a class derived from an inert name is a plain class

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _WarmupFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import`` of a :data:`WARMUP_MODULES` module with an inert module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in WARMUP_MODULES or fullname.partition(".")[0] in KERNEL_DSL_PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []  # a package, so that its submodules in WARMUP_MODULES import too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _StubOp:
    """One op of a stubbed namespace: exists, answers known probes, raises when otherwise called."""

    def __init__(self, namespace: str, name: str) -> None:
        self._qualname = f"{namespace}::{name}"
        self._answer = OP_ANSWERS.get(name)
        self.default = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._answer is None and self._qualname.startswith(("deep_gemm::set_", "deep_gemm::shutdown")):
            return None
        if self._answer is not None:
            capability = args[0] if args else current_gpu().sm
            return self._answer(capability) if isinstance(capability, int) else self._answer(*args)
        raise RuntimeError(f"torch.ops.{self._qualname.replace('::', '.')} needs a GPU (stubbed by kvstrategies)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self


class _StubNamespace(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(f"torch.ops.{name}")
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ABSENT_OPS:
            raise AttributeError(name)
        op = _StubOp(self._name, name)
        setattr(self, name, op)
        return op


def _install_op_stubs(torch: Any) -> None:
    for name in OP_NAMESPACES:
        torch.ops.__dict__[name] = _StubNamespace(name)
    original_register_fake = torch.library.register_fake

    def register_fake(op: Any, *args: Any, **kwargs: Any) -> Any:
        qualname = op if isinstance(op, str) else ""
        if qualname.split("::")[0] in OP_NAMESPACES:
            return (lambda fn: fn) if not args else args[0]
        return original_register_fake(op, *args, **kwargs)

    torch.library.register_fake = register_fake
    original_load_library = torch.ops.load_library

    def load_library(path: str) -> None:
        if "deep_gemm" in str(path) or "vllm" in str(path):
            return None
        return original_load_library(path)  # type: ignore[no-any-return]

    torch.ops.load_library = load_library


# ---- torch.cuda and triton as a GPU host answers --------------------------------------------


class _InertStream:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __enter__(self) -> _InertStream:
        return self

    def __exit__(self, *args: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


class _Properties:
    def __init__(self, facts: GpuFacts) -> None:
        self.name = facts.name
        self.major, self.minor = facts.capability
        self.total_memory = facts.total_memory_bytes
        self.multi_processor_count = 132
        self.L2_cache_size = 50 * 2**20
        self.gcnArchName = ""
        self.uuid = "GPU-00000000-0000-0000-0000-000000000000"


def _install_cuda_facts(torch: Any) -> None:
    cuda = torch.cuda
    cuda.Stream = _InertStream
    cuda.Event = _InertStream
    cuda.current_stream = lambda *args, **kwargs: _InertStream()
    cuda.stream = lambda *args, **kwargs: contextlib.nullcontext()
    cuda.get_device_name = lambda *args, **kwargs: current_gpu().name
    cuda.get_device_capability = lambda *args, **kwargs: current_gpu().capability
    cuda.get_device_properties = lambda *args, **kwargs: _Properties(current_gpu())
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *args, **kwargs: None
    cuda.synchronize = lambda *args, **kwargs: None
    cuda.empty_cache = lambda *args, **kwargs: None
    cuda.device_count = lambda: STATED_DEVICE_COUNT
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:  # vLLM 0.34.0's sparse-MLA backends read the device index through it
        accelerator.current_device_index = lambda: 0
        # 0.23.0's workspace manager frees the cache before it grows a (meta) workspace
        accelerator.empty_cache = lambda: None


class _TritonDriver:
    """Triton's active driver as a CUDA host answers it (target, device); nothing is launched."""

    def get_current_target(self) -> Any:
        compiler = importlib.import_module("triton.backends.compiler")
        return compiler.GPUTarget("cuda", current_gpu().sm, 32)

    def get_current_device(self) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        return importlib.import_module("torch").device("meta")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def _install_triton_driver() -> None:
    """Triton's NVIDIA driver active (``vllm.triton_utils.importing`` then keeps Triton, as on a GPU)."""
    with contextlib.suppress(ImportError):
        backends = importlib.import_module("triton.backends").backends
        nvidia = backends.get("nvidia")
        if nvidia is not None and nvidia.driver is not None:
            nvidia.driver.is_active = staticmethod(lambda: True)
        importlib.import_module("triton.runtime.driver").driver.set_active(_TritonDriver())


class _CudaToMeta:
    """A TorchFunctionMode that sends explicit ``device="cuda"`` allocations to ``meta``."""

    @staticmethod
    def make(torch: Any) -> Any:
        overrides = importlib.import_module("torch.overrides")

        class CudaToMeta(overrides.TorchFunctionMode):  # type: ignore[misc,name-defined]
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = dict(kwargs or {})
                device = kwargs.get("device")
                if device is not None and "cuda" in str(device):
                    kwargs["device"] = "meta"
                return func(*args, **kwargs)

        return CudaToMeta()


def cuda_to_meta() -> Any:
    """The mode that builds models on ``meta`` whatever device their constructors name."""
    return _CudaToMeta.make(importlib.import_module("torch"))


def _refuse_remote_hosts() -> None:
    """No network from the bridge: host names other than loopback do not resolve."""
    original = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1", "0.0.0.0", ""):
            raise socket.gaierror(f"kvstrategies' vLLM bridge makes no network calls ({host})")
        return original(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


# ---- the platform -----------------------------------------------------------------------------


def _make_platform() -> Any:
    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")

    class StatedCudaPlatform(cuda.CudaPlatformBase):  # type: ignore[misc,name-defined]
        """vLLM's CUDA platform with the device probes answering :func:`current_gpu`."""

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            major, minor = current_gpu().capability
            return interface.DeviceCapability(major, minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return current_gpu().name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return current_gpu().total_memory_bytes

        @classmethod
        def is_fully_connected(cls, device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return STATED_DEVICE_COUNT

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return "GPU-00000000-0000-0000-0000-000000000000"

        @classmethod
        def set_device(cls, device: Any) -> None:
            return None

        @classmethod
        def get_current_memory_usage(cls, device: Any = None) -> float:
            return 0.0

        def current_device(self) -> Any:
            """Where constructors put "the current device": ``meta`` (no memory is used)."""
            return importlib.import_module("torch").device("meta")

    return StatedCudaPlatform()


def _clear_platform_caches() -> None:
    cuda = sys.modules.get("vllm.platforms.cuda")
    if cuda is not None:
        clear = getattr(getattr(cuda, "_get_backend_priorities", None), "cache_clear", None)
        if callable(clear):
            clear()


# ---- import -------------------------------------------------------------------------------------

_IMPORTED: list[str] = []


def check_version(version: str) -> EngineRelease:
    """The release line of ``version``; a vLLM the bridge does not drive is refused, naming the supported."""
    from ...errors import KVCacheConfigError

    try:
        return parse_release(version, "vllm", field="vllm.__version__")
    except KVCacheConfigError as exc:
        raise VLLMUnavailableError(
            f"vLLM {version} is installed; the bridge drives vLLM {', '.join(SUPPORTED_VERSIONS)} "
            f"(its private sizing path moves between releases): {exc}"
        ) from exc


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """vLLM's log lines and anything printed on stdout go into a buffer."""
    buffer = _LogBuffer()
    handler = logging.StreamHandler(buffer)
    root = logging.getLogger("vllm")
    saved = list(root.handlers)
    root.handlers = [handler]
    try:
        with contextlib.redirect_stdout(buffer):
            yield buffer
    finally:
        root.handlers = saved
        buffer.close_devnull()


class _LogBuffer(io.StringIO):
    """A text buffer with a file descriptor: vLLM 0.31.0's ``utils.system_utils.suppress_stdout`` (around
    each ``GroupCoordinator``) points ``sys.stdout.fileno()`` at /dev/null and back, so it gets one of its own."""

    _devnull: int | None = None

    def fileno(self) -> int:
        if self._devnull is None:
            self._devnull = os.open(os.devnull, os.O_WRONLY)
        return self._devnull

    def close_devnull(self) -> None:
        if self._devnull is not None:
            os.close(self._devnull)
            self._devnull = None


def import_vllm(*, require_supported: bool = True) -> str:
    """Import vLLM once with the stand-ins above and return ``vllm.__version__``."""
    if _IMPORTED:
        return _IMPORTED[0]
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Kimi's fused GEMM + all-reduce kernels (CuTe DSL, not installable here): a communication
    # kernel, off as on a host without it; it changes no KV cache number
    os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")
    os.environ.setdefault("VLLM_ENABLE_GEMM_RS", "0")
    try:
        torch = importlib.import_module("torch")
        metadata = importlib.import_module("importlib.metadata")
        version = str(metadata.version("vllm"))
    except (ImportError, Exception) as exc:
        raise VLLMUnavailableError(
            f"vLLM is not installed ({exc}); make its CPU environment with "
            f"python tools/vllm_env.py {SUPPORTED_VERSIONS[-1]} DIR (docs/vllm-bridge.md)"
        ) from exc
    release = check_version(version) if require_supported else None
    stubbed = {name: namespace for name, (namespace, first, last) in STUB_OP_MODULES.items()
               if release is not None and parse_release(first, "vllm") <= release <= parse_release(last, "vllm")}
    sys.meta_path.insert(0, _ExtensionFinder(stubbed))
    os.environ.setdefault("CUDA_HOME", STATED_CUDA_HOME)
    sys.meta_path.insert(0, _WarmupFinder())
    _install_op_stubs(torch)
    _install_cuda_facts(torch)
    _install_triton_driver()
    _refuse_remote_hosts()
    try:
        with quiet():
            from ...sglang.bridge.runtime import install_torchvision_stub

            install_torchvision_stub()
            platforms: Any = importlib.import_module("vllm.platforms")
            platforms._current_platform = _make_platform()
            vllm = importlib.import_module("vllm")
            _after_import()
    except ImportError as exc:
        raise VLLMUnavailableError(
            f"vLLM {version} is installed but its sizing modules do not import: {exc} "
            "(a light dependency is missing; see docs/vllm-bridge.md)"
        ) from exc
    _IMPORTED.append(str(getattr(vllm, "__version__", version)))
    return _IMPORTED[0]


def vllm_module(*names: str) -> Any:
    """The first of the modules ``names`` this vLLM has: 0.11.0 keeps in ``vllm/utils/__init__.py`` what 0.12.0
    has in ``vllm.utils.torch_utils``, ``vllm.utils.network_utils``..."""
    for name in names[:-1]:
        if importlib.util.find_spec(name) is not None:
            return importlib.import_module(name)
    return importlib.import_module(names[-1])


def _after_import() -> None:
    """Stand-ins that need vLLM's own modules: in-process model inspection, FlashInfer's probe."""
    registry: Any = importlib.import_module("vllm.model_executor.models.registry")

    registry._run_in_subprocess = lambda fn: fn()
    torch_utils: Any = vllm_module("vllm.utils.torch_utils", "vllm.utils")
    if hasattr(torch_utils, "_cuda_device_count_stateless"):  # 0.19.1 counts devices through NVML, not torch.cuda
        torch_utils._cuda_device_count_stateless = lambda *args: STATED_DEVICE_COUNT
    cache_config: Any = importlib.import_module("vllm.config.cache")
    if hasattr(cache_config, "get_cpu_memory"):  # 0.17.1's swap space check asks the host's memory
        cache_config.get_cpu_memory = lambda: STATED_HOST_MEMORY_BYTES
    flashinfer: Any = importlib.import_module("vllm.utils.flashinfer")
    flashinfer.has_nvidia_artifactory = lambda: True
    with contextlib.suppress(AttributeError):
        flashinfer.has_nvidia_artifactory.cache_clear()
