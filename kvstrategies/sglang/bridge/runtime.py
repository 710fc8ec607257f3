"""Importing SGLang on a CPU-only machine: the version check, the torchvision stub, platform facts.

Everything that must happen before or around ``import sglang`` lives here, so every user of a
live SGLang (the case bridge, launch resolution) shares one small API:

* :func:`import_sglang` installs the import stub, imports SGLang's sizing modules once and
  returns the version; an unsupported or missing SGLang is a :class:`SGLangUnavailableError`
  naming :data:`SUPPORTED_VERSIONS`.
* :func:`platform_override` states the GPU's facts through SGLang's own
  ``sglang.srt.runtime_context.override_platform`` (a context manager).
* :func:`cuda_platform_facts` the facts a CUDA host of a given compute capability answers.
* :func:`quiet_stdout` keeps SGLang's import chatter off a stdout that carries JSON.

Install and platform facts: docs/sglang-bridge.md, "Installing".
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

from ...errors import MissingDependencyError
from .bridge_releases import BRIDGE_RELEASES, BridgeRelease, bridge_release

#: SGLang release lines whose private sizing API the bridge drives (a .postN build is its line).
SUPPORTED_VERSIONS: tuple[str, ...] = tuple(row.line for row in BRIDGE_RELEASES)
#: the stubbed package: only multimodal helpers import it at module load (never for sizing)
_STUBBED = "torchvision"
#: the modules the bridge reads (imported once by :func:`import_sglang`); releases before the
#: configurator extraction keep the builders in the ModelRunner mixin instead
SIZING_MODULES: tuple[str, ...] = (
    "sglang.srt.server_args",
    "sglang.srt.runtime_context",
    "sglang.srt.configs.model_config",
    "sglang.srt.model_executor.pool_configurator",
)
CONFIGURATOR_MODULE = "sglang.srt.mem_cache.kv_cache_configurator"


#: SGLang is not installed, cannot be imported here, or is a version the bridge does not know
SGLangUnavailableError = MissingDependencyError


def check_version(version: str) -> BridgeRelease:
    """The bridge's row for ``version``; an SGLang it does not drive is refused, naming the supported."""
    return bridge_release(version)


class _Permissive(type):
    """A class that answers every attribute, call and subscript with another permissive class."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Permissive(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _Permissive(cls.__name__, (), {})

    def __getitem__(cls, item: Any) -> Any:
        return _Permissive(cls.__name__, (), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Permissive(name, (), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import torchvision[.x.y]`` (or another ``package``) with permissive modules (no code runs)."""

    def __init__(self, package: str = _STUBBED) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == self.package or fullname.startswith(self.package + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+kvstrategies-stub"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_torchvision_stub() -> None:
    """Stub ``torchvision`` unless a real one imports.

    Installed *after* ``transformers.utils.import_utils`` is imported, so transformers keeps
    recording torchvision as absent (its PyPI wheel is built for CUDA torch and fails on CPU torch).
    """
    if any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        return
    importlib.import_module("transformers.utils.import_utils")
    if _STUBBED in sys.modules and not isinstance(sys.modules[_STUBBED], _StubModule):
        return
    sys.meta_path.insert(0, _StubFinder())
    _unplaceholder_auto_image_processor()


def install_cpu_amx_probe() -> None:
    """SGLang up to 0.5.1 asks ``torch._C._cpu._is_amx_tile_supported()`` at import (``utils.cpu_has_amx_support``),
    which CPU torch 2.13 no longer has: where it is missing it answers False, the CPU without AMX that the kernel
    stand-ins assume (nothing the bridge sizes runs a CPU kernel)."""
    import torch

    cpu: Any = torch._C._cpu
    if not hasattr(cpu, "_is_amx_tile_supported"):
        cpu._is_amx_tile_supported = lambda: False


def install_kernel_stubs(names: tuple[str, ...]) -> None:
    """Stand-ins for kernel modules (``sgl_kernel.kvcacheio``) a release imports at module load even
    where the kernels cannot run; nothing the bridge sizes calls them. Only the named module answers
    every name; the packages above it hold nothing else, so ``from sgl_kernel import x`` (or
    ``from vllm import _custom_ops``) still fails as it does without the package. A name without a
    dot stubs the whole package (every name answers). Nothing is stubbed where the package is installed."""
    for name in names:
        parent, _, child = name.rpartition(".")
        if not parent:  # a whole package (0.5.8 imports its kernels unguarded): every module and name answers
            if name not in sys.modules and importlib.util.find_spec(name) is None:
                sys.meta_path.insert(0, _StubFinder(name))
            continue
        top = name.partition(".")[0]
        if name in sys.modules or (top not in sys.modules and importlib.util.find_spec(top) is not None):
            continue
        if top in sys.modules and not getattr(sys.modules[top], "__kvstrategies_stub__", False):
            continue  # the real package is imported
        module: types.ModuleType = _StubModule(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = module
        while parent:  # empty packages up to the top: a sibling module still fails to import
            package = sys.modules.get(parent)
            if package is None:
                package = types.ModuleType(parent)
                package.__path__ = []
                package.__spec__ = importlib.machinery.ModuleSpec(parent, None, is_package=True)
                package.__kvstrategies_stub__ = True  # type: ignore[attr-defined]
                sys.modules[parent] = package
            setattr(package, child, module)
            module, (parent, _, child) = package, parent.rpartition(".")


def _unplaceholder_auto_image_processor() -> None:
    """Give ``transformers.AutoImageProcessor`` its real class where transformers hides it.

    transformers 5.12 (the pin of SGLang 0.5.15 to 0.5.21) lists ``AutoImageProcessor`` as needing
    torchvision and hands out a placeholder that raises on use; SGLang's config modules call
    ``AutoImageProcessor.register`` at import. The module itself imports without torchvision.
    """
    transformers = sys.modules.get("transformers") or importlib.import_module("transformers")
    current = getattr(transformers, "AutoImageProcessor", None)
    if current is None or type(current).__name__ != "DummyObject":
        return
    module: Any = importlib.import_module("transformers.models.auto.image_processing_auto")
    setattr(sys.modules["transformers"], "AutoImageProcessor", module.AutoImageProcessor)  # noqa: B010


@contextlib.contextmanager
def quiet_stdout() -> Iterator[io.StringIO]:
    """Send anything printed on stdout (SGLang's import chatter) into a buffer."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield buffer


_IMPORTED: str | None = None


def installed_release() -> BridgeRelease:
    """The bridge row of the SGLang this process imported (imports it first)."""
    return bridge_release(import_sglang())


def import_sglang(*, require_supported: bool = True) -> str:
    """Import SGLang's sizing modules once (CPU-safe) and return ``sglang.__version__``.

    Raises :class:`SGLangUnavailableError` when SGLang or a light dependency is missing, or the
    version is not in :data:`SUPPORTED_VERSIONS` (unless ``require_supported`` is false).
    """
    global _IMPORTED
    if _IMPORTED is not None:
        return _IMPORTED
    try:
        with quiet_stdout():
            install_torchvision_stub()  # releases up to 0.5.21 import torchvision from `import sglang`
            sglang = importlib.import_module("sglang")
    except ImportError as exc:
        raise SGLangUnavailableError(
            f"SGLang is not installed ({exc}); install the 'sglang' extra: "
            f"pip install --no-deps 'sglang=={SUPPORTED_VERSIONS[-1]}' plus its light dependencies "
            "(docs/sglang-bridge.md)"
        ) from exc
    version = str(getattr(sglang, "__version__", "unknown"))
    builders, has_context, has_pool_configurator = CONFIGURATOR_MODULE, True, True
    stubs: tuple[str, ...] = ()
    if require_supported:
        row = check_version(version)
        has_context, has_pool_configurator = row.runtime_context, row.pool_configurator
        builders = CONFIGURATOR_MODULE if row.configurator else row.sizing_module
        stubs = row.kernel_stubs
    os.environ.setdefault("SGLANG_DISABLE_REQUEST_LOGGING", "1")
    try:
        with quiet_stdout():
            install_torchvision_stub()
            install_cpu_amx_probe()
            install_kernel_stubs(stubs)
            modules = [m for m in SIZING_MODULES if (has_context or not m.endswith(".runtime_context"))
                       and (has_pool_configurator or not m.endswith(".pool_configurator"))]  # fmt: skip
            for name in (*modules, builders):
                importlib.import_module(name)
    except ImportError as exc:
        raise SGLangUnavailableError(
            f"SGLang {version} is installed but its sizing modules do not import: {exc} "
            "(a light dependency is missing; see docs/sglang-bridge.md)"
        ) from exc
    _IMPORTED = version
    return version


def cuda_platform_facts(major: int, minor: int = 0) -> dict[str, Any]:
    """The platform facts a CUDA host of compute capability ``major.minor`` answers (bridge doc 6)."""
    return {
        "is_cuda": True,
        "is_hip": False,
        "is_npu": False,
        "is_xpu": False,
        "is_musa": False,
        "is_mps": False,
        "is_sm90": major == 9,
        "is_hopper_with_cuda_12_3": major == 9,
        "is_sm100": major == 10,
        "is_sm100_or_sm110": major in (10, 11),
        "is_sm110": major == 11,
        "is_sm120": major == 12,
        "is_blackwell": major in (10, 11, 12),
        "has_flashinfer": True,
        "has_amx": False,
        "device_sm": major * 10 + minor,
        "device_capability": (major, minor),
    }


@contextlib.contextmanager
def platform_override(**facts: Any) -> Iterator[Any]:
    """State platform facts for every SGLang reader (``runtime_context.override_platform``), scoped."""
    import_sglang()
    runtime_context = importlib.import_module("sglang.srt.runtime_context")
    known = {*getattr(runtime_context, "_PLATFORM_PROBES", ()), *getattr(runtime_context, "_PLATFORM_VALUES", ())}
    if known:  # a fact a release does not have (0.5.19 has no is_sm110) is nothing it reads
        facts = {k: v for k, v in facts.items() if k in known}
    with runtime_context.override_platform(**facts) as platform:
        yield platform
