"""What a CPU environment for the vLLM bridge installs, per vLLM release line (data only).

``tools/vllm_env.py VERSION DIR`` installs, in order: CPU torch (pinned for every later install),
this checkout of kvstrategies, :data:`LIGHT_PACKAGES` with their dependencies, then
:data:`NO_DEPS` with ``--no-deps`` (vLLM itself: its requirements pull a CUDA torch, FlashInfer's
CUDA stack, tilelang...). Each light package is one that vLLM's import chain (``import vllm``,
``vllm.config``, ``vllm.v1.core.kv_cache_utils``, the model registry) or a model's construction
needs on CPU; the version is vLLM's pin where vLLM pins one, else what was tried together with
torch 2.13.0 on Python 3.11.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VLLMEnvironment:
    """One release line's CPU environment: packages with their dependencies, then ``--no-deps`` ones."""

    line: str
    light_packages: tuple[str, ...]
    no_deps: tuple[str, ...]


_V0330 = VLLMEnvironment(
    "0.33.0",
    light_packages=(
        "packaging==26.4",  # vllm/utils/torch_version.py
        "pydantic==2.14.4",  # vllm.config
        "numpy==2.4.6",
        "regex==2026.11.19",
        "cbor2==6.3.0",  # vllm/utils/hashing.py
        "psutil==7.2.2",  # vllm/utils/network_utils.py
        "pyzmq==27.3.0",
        "urllib3==2.8.0",
        "transformers==5.20.2",  # vLLM pins >=5.16.1,<5.21.0; ModelConfig reads config.json with it
        "aiohttp==3.14.5",  # vllm/connections.py
        "requests==2.34.2",
        "oss-harmony==0.0.11",  # vllm/entrypoints/mcp/tool_server.py (vLLM's pin)
        "openai==3.57.0",  # vllm/entrypoints/mcp/tool.py
        "pillow==13.0.0",  # vllm/multimodal/hasher.py
        "pybase64==1.5.1",  # vllm/multimodal/media/audio.py
        "cachetools==8.0.2",  # vllm/utils/cache.py
        "msgspec==0.23.0",  # vllm/pooling_params.py
        "cloudpickle==3.1.3",  # vllm/v1/serial_utils.py
        "uvloop==0.23.0",  # vllm/v1/utils.py
        "py-cpuinfo==9.0.0",  # vllm/usage/usage_lib.py
        "prometheus_client==0.26.0",  # vllm/v1/metrics/perf.py
        "xgrammar==0.2.8",  # vllm/parser/abstract_parser.py (vLLM's pin; brings triton)
        "apache-tvm-ffi==0.1.11",  # xgrammar's FFI, reset to vLLM's pin
        "fastapi==0.136.3",  # vllm/entrypoints/serve (vLLM pins <0.137)
        "partial-json-parser==0.2.1.1.post7",  # vllm/tool_parsers/utils.py
        "llguidance==1.7.6",  # vllm/utils/import_utils.py (vLLM pins <1.8)
        "einops==0.8.2",  # vllm/v1/attention/ops/vit_attn_wrappers.py
        "compressed-tensors==0.17.0",  # the quantization registry (vLLM's pin)
        "nvidia-ml-py==13.615.71",  # pynvml, imported by vllm/platforms/cuda.py
        # bindings only (no CUDA libraries): MiniMax-M2 at TP > 1 imports them; its workspace set-up then
        # fails inside vLLM's own try/except and falls back, as on a GPU without peer access
        "cuda-python==13.4.4",
    ),
    no_deps=(
        # FlashInfer's Python package imports on CPU; without it vLLM's selector drops FLASHINFER
        "flashinfer-python==0.7.2.post1",
        "vllm==0.33.0",
    ),
)

#: 0.34.0 pins torch 2.14.0 (CUDA); the bridge keeps CPU torch 2.13.0 (its compiled extensions are stand-ins
#: anyway). It pins FlashInfer 0.7.3, which the package index does not serve; 0.7.2.post1 (0.33.0's) answers
#: the same backend probes. The light packages are 0.33.0's (vLLM 0.34.0's pins admit them)
_V0340 = VLLMEnvironment(
    "0.34.0",
    light_packages=_V0330.light_packages,
    no_deps=("flashinfer-python==0.7.2.post1", "vllm==0.34.0"),
)

#: 0.32.0 pins torch 2.13.0, FlashInfer 0.7.0.post1 and transformers < 5.20 (5.19.0, as SGLang 0.5.22 pins)
_V0320 = VLLMEnvironment(
    "0.32.0",
    light_packages=tuple(
        "transformers==5.19.0" if p.startswith("transformers==") else p for p in _V0330.light_packages
    ),
    no_deps=("flashinfer-python==0.7.0.post1", "vllm==0.32.0"),
)

#: 0.31.0 pins torch 2.13.0, FlashInfer 0.7.0.post1, transformers < 5.18 and xgrammar 0.2.7
_V0310 = VLLMEnvironment(
    "0.31.0",
    light_packages=tuple(
        "transformers==5.17.0" if p.startswith("transformers==") else "xgrammar==0.2.7" if p.startswith("xgrammar==")
        else p
        for p in _V0330.light_packages
    ),
    no_deps=("flashinfer-python==0.7.0.post1", "vllm==0.31.0"),
)



def _older_line(
    line: str, flashinfer: str, light: tuple[str, ...] = (), no_deps: tuple[str, ...] = ()
) -> VLLMEnvironment:
    """An older line's environment: 0.31.0's light packages (transformers 5.17.0, within every older line's
    ``>=`` pin) and ``light``, with the FlashInfer given (the line's pin where it runs here, see :data:`_OLDER`)
    and ``no_deps`` beside vLLM."""
    return VLLMEnvironment(
        line, (*_V0310.light_packages, *light), (f"flashinfer-python=={flashinfer}", *no_deps, f"vllm=={line}")
    )


#: 0.20.2 to 0.23.0 import GGUF's reader with their quantization registry, 0.22.1 and 0.23.0 the Humming kernels'
#: Python package too (``vllm/model_executor/kernels/linear/__init__.py``; they pin ``humming-kernels[cu13]`` 0.1.2
#: and 0.1.4, whose extra is CUDA's toolkit: installed without it, with the two pure-Python packages its import needs)
_GGUF = ("gguf==0.19.0",)
#: 0.19.1 imports diskcache with its structured-output package (``vllm/v1/structured_output/__init__.py``; its pin)
_DISKCACHE = (*_GGUF, "diskcache==5.6.3")
_HUMMING = (*_GGUF, "pyelftools==0.33", "tabulate==0.10.0")


#: 0.18.1 pins transformers below 5 (``transformers<5,>=4.56.0``; 4.57.6, the last 4.x), compressed-tensors 0.13.0,
#: llguidance below 1.4 and openai below 2.25: its environment is 0.19.1's with those four at 0.18.1's pins
_V0181_PINS = {
    "transformers": "transformers==4.57.6",
    "compressed-tensors": "compressed-tensors==0.13.0",
    "llguidance": "llguidance==1.3.0",
    "openai": "openai==2.24.0",
}


def _v0181() -> VLLMEnvironment:
    """vLLM 0.18.1's environment: 0.19.1's with 0.18.1's own pins of the packages it holds below theirs."""
    line = _older_line("0.18.1", "0.6.18", _DISKCACHE)
    light = tuple(_V0181_PINS.get(p.split("==", 1)[0], p) for p in line.light_packages)
    return VLLMEnvironment(line.line, light, line.no_deps)


#: 0.17.1 pins xgrammar 0.1.29 (0.18.1: ``>=0.1.32,<1.0.0``); its other pins of the light packages are 0.18.1's
_V0171_PINS = {"xgrammar": "xgrammar==0.1.29"}


def _v0171() -> VLLMEnvironment:
    """vLLM 0.17.1's environment: 0.18.1's with 0.17.1's own xgrammar pin."""
    line = _older_line("0.17.1", "0.6.18", _DISKCACHE)
    light = tuple(_V0171_PINS.get(p.split("==", 1)[0], p) for p in _v0181().light_packages)
    return VLLMEnvironment(line.line, light, line.no_deps)


#: 0.16.0's structured-output package imports its Mistral tokenizer, which imports mistral_common at once
#: (``vllm/v1/structured_output/backend_xgrammar.py`` -> ``vllm/tokenizers/mistral.py``; vLLM pins
#: ``mistral_common[image]>=1.9.0``, whose image extra the import does not need)
_MISTRAL_COMMON = ("mistral_common==1.13.1",)


#: mistral_common 1.13.1 takes numpy below 2.4 on Python <= 3.12 (the package index's metadata; 2.4.6 does not resolve
#: beside it): 2.3.5, the last 2.3
_NUMPY_FOR_MISTRAL = {"numpy": "numpy==2.3.5"}


def _v0160() -> VLLMEnvironment:
    """vLLM 0.16.0's environment: 0.17.1's (its pins of those packages are 0.17.1's; openai unbounded above) and
    mistral_common, with numpy 2.3.5 beside it."""
    line = _older_line("0.16.0", "0.6.18", _DISKCACHE)
    light = tuple(_NUMPY_FOR_MISTRAL.get(p.split("==", 1)[0], p) for p in _v0171().light_packages)
    return VLLMEnvironment(line.line, (*light, *_MISTRAL_COMMON), line.no_deps)


def _v0151() -> VLLMEnvironment:
    """vLLM 0.15.1's environment: 0.16.0's (its pins of those packages are 0.16.0's: transformers below 5,
    xgrammar 0.1.29, compressed-tensors 0.13.0, llguidance below 1.4; mistral_common ``>=1.8.8``) with numpy 2.3.5."""
    line = _older_line("0.15.1", "0.6.18", _DISKCACHE)
    return VLLMEnvironment(line.line, _v0160().light_packages, line.no_deps)


#: 0.11.0 pins compressed-tensors 0.11.0, llguidance below 0.8 (0.7.30, the last 0.7), xgrammar 0.1.25 and numba
#: 0.61.2 (its model runner imports the n-gram proposer, which imports numba), whose NumPy is below 2.3 (2.2.6, the last
#: 2.2); its other pins of the light packages admit 0.18.1's
_V0110_PINS = {
    "compressed-tensors": "compressed-tensors==0.11.0",
    "llguidance": "llguidance==0.7.30",
    "xgrammar": "xgrammar==0.1.25",
    "numpy": "numpy==2.2.6",
}
#: numba, and what 0.11.0's ``vllm/utils/__init__.py`` imports beside it (unpinned there; the index's newest)
_V0110_UTILS = ("numba==0.61.2", "setproctitle==1.3.8", "blake3==1.0.11")


def _v0110() -> VLLMEnvironment:
    """vLLM 0.11.0's environment: 0.18.1's light packages at 0.11.0's pins, numba and its utilities' imports;
    FlashInfer 0.6.18 as the newer lines (0.11.0's pin, 0.3.1, asserts that libcudart is loaded when
    ``flashinfer.comm`` imports, ``flashinfer/comm/cuda_ipc.py``, which vLLM's compilation passes import while a
    model is built)."""
    line = _older_line("0.11.0", "0.6.18")
    light = tuple(_V0110_PINS.get(p.split("==", 1)[0], p) for p in _v0181().light_packages)
    return VLLMEnvironment(line.line, (*light, *_V0110_UTILS), line.no_deps)


#: 0.14.1's multimodal hasher imports blake3 at once (``vllm/multimodal/hasher.py``, through ``vllm/v1/engine``,
#: which ``ParallelConfig`` imports while the config is built; vLLM pins ``blake3`` unversioned)
_BLAKE3 = ("blake3==1.0.11",)


def _v0141() -> VLLMEnvironment:
    """vLLM 0.14.1's environment: 0.15.1's (its pins of those packages are 0.15.1's) and blake3."""
    line = _older_line("0.14.1", "0.6.18", _DISKCACHE)
    return VLLMEnvironment(line.line, (*_v0151().light_packages, *_BLAKE3), line.no_deps)


#: 0.13.0 pins xgrammar 0.1.27 and compressed-tensors 0.12.2 (0.14.1: 0.1.29, 0.13.0); its other pins of the light
#: packages are 0.14.1's
_V0130_PINS = {"xgrammar": "xgrammar==0.1.27", "compressed-tensors": "compressed-tensors==0.12.2"}


def _v0130() -> VLLMEnvironment:
    """vLLM 0.13.0's environment: 0.14.1's with 0.13.0's own xgrammar and compressed-tensors pins."""
    line = _older_line("0.13.0", "0.6.18", _DISKCACHE)
    light = tuple(_V0130_PINS.get(p.split("==", 1)[0], p) for p in _v0141().light_packages)
    return VLLMEnvironment(line.line, light, line.no_deps)


def _v0120() -> VLLMEnvironment:
    """vLLM 0.12.0's environment: 0.13.0's (its pins of those packages are 0.13.0's)."""
    line = _older_line("0.12.0", "0.6.18", _DISKCACHE)
    return VLLMEnvironment(line.line, _v0130().light_packages, line.no_deps)


#: each older line and the FlashInfer its environment takes (0.27.1 on pin torch 2.13.0)
_OLDER = (
    _v0110(),
    _v0120(),
    _v0130(),
    _v0141(),
    _v0151(),
    _v0160(),
    _v0171(),
    _v0181(),
    # 0.12.0 and 0.13.0 pin torch 2.9.0 and FlashInfer 0.5.3, 0.14.1 torch 2.9.1 and FlashInfer 0.5.3, 0.15.1 torch
    # 2.9.1 and FlashInfer 0.6.1, 0.16.0 torch 2.9.1 and FlashInfer 0.6.3, 0.17.1 to 0.26.0 torch 2.10.0 or 2.11.0 and
    # FlashInfer 0.6.4 to 0.6.14: the environment keeps CPU torch 2.13.0 (vLLM's compiled extensions are stand-ins
    # here) and takes 0.6.18 as 0.27.1 does (their pins not tried)
    _older_line("0.19.1", "0.6.18", _DISKCACHE),
    _older_line("0.20.2", "0.6.18", _GGUF),
    _older_line("0.21.0", "0.6.18", _GGUF),
    _older_line("0.22.1", "0.6.18", _HUMMING, ("humming-kernels==0.1.2",)),
    _older_line("0.23.0", "0.6.18", _HUMMING, ("humming-kernels==0.1.4",)),
) + tuple(
    _older_line(line, flashinfer)
    for line, flashinfer in (
        ("0.24.0", "0.6.18"),
        ("0.25.1", "0.6.18"),
        ("0.26.0", "0.6.18"),
        # 0.27.1 pins FlashInfer 0.6.16.post3, whose flashinfer.comm (imported by 0.27.1's all-reduce fusion pass)
        # annotates with array.array[int], which Python 3.11 cannot evaluate; 0.6.18 answers the same probes
        ("0.27.1", "0.6.18"),
        ("0.28.0", "0.6.16.post3"),
        ("0.29.0", "0.6.18"),
        ("0.30.0", "0.6.18.post1"),
    )
)

ENVIRONMENTS: dict[str, VLLMEnvironment] = {env.line: env for env in (*_OLDER, _V0310, _V0320, _V0330, _V0340)}
#: lines the bridge drives (``tools/vllm_env.py`` makes their environments) that the project does not model yet:
#: no case mapping or recordings of theirs (``kvstrategies.core.releases`` refuses them)
NOT_MODELLED: tuple[str, ...] = ()
#: the vLLM release lines the bridge drives, oldest first (``kvstrategies.core.releases.VLLM_RELEASE_LINES``)
VLLM_LINES: tuple[str, ...] = tuple(line for line in ENVIRONMENTS if line not in NOT_MODELLED)
