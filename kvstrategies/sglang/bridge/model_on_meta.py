"""Build SGLang's own model class for one deployment on ``meta`` and count what each rank holds.

For one deployment (a config folder, the GPU planned, TP / EP / PP / attention DP, an optional
``--quantization``), SGLang's own pipeline runs unchanged up to a built model:
``ServerArgs(...)`` (its launch resolution for that GPU), the process published with the rank's
place (:func:`_publish_rank`: from 0.5.21 ``runtime_context.publish`` with the rank's ``SpawnRanks``,
SGLang deriving the rank's TP, attention and MoE ranks itself; before, the group globals
``initialize_model_parallel`` would leave), ``ModelConfig.from_server_args``, the loader's
``_get_quantization_config`` (config.json, ``hf_quant_config.json`` or ``--quantization``) and
``_initialize_model`` (the class SGLang's registry resolves), under
``set_default_torch_dtype(model dtype)`` and ``torch.device("meta")``. Then the quantization
methods' ``process_weights_after_loading`` where it runs on ``meta`` (unquantized, block-FP8 and
online-FP8 linear layers), and the bytes of every parameter and buffer are summed by
:func:`weight_group` (embedding, lm_head, attention, MoE experts, dense MLP, norms, scales,
vision tower, other buffers).

What is faked, and only that (docs/weights.md, "The recorder"):

* the platform: ``torch.cuda`` answers as the GPU planned (capability, name, memory, SM count),
  SGLang's platform override and probe functions as :func:`._launch_probe.install_gpu` states
  them, so SGLang takes the CUDA branches it takes on that GPU;
* compiled packages the import chain names but construction never calls (``sgl_kernel``,
  ``deep_gemm``, ``cutlass``, ``cuda``, ``quack``, ``flashinfer``...): permissive stand-ins;
* the parallel groups: stand-in coordinators carrying each group's width and this rank's rank;
  nothing communicates while building on ``meta``;
* tensors a constructor puts on ``"cuda"``: sent to ``meta`` (a torch function mode), CUDA
  streams and events inert.

Imported only under an SGLang environment (``tools/record_weights.py``); every model is built in
its own forked process (SGLang keeps the published context and caches in module globals).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import traceback
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bridge_releases import VLLM_CPU_FALLBACKS, BridgeRelease

#: compiled packages SGLang's import chain names; construction on ``meta`` never calls them
STUBBED_PACKAGES: tuple[str, ...] = (
    "sgl_kernel", "deep_gemm", "cutlass", "cuda", "quack", "flashinfer", "flash_mla", "fast_hadamard_transform",
    "tilelang", "aiter", "vllm", "cuda_python", "nvidia_cutlass_dsl", "mooncake", "deep_ep", "mscclpp",
    "triton_kernels", "kernels", "cutlass_library", "flash_attn", "sgl_fa", "tvm_ffi",
    "fastapi", "uvicorn", "torchaudio",
)  # fmt: skip


#: packages a CUDA install of SGLang does not have, of which only some modules are stood in for: vLLM's
#: activation and norm layers, which SGLang up to 0.5.7 imports where sgl-kernel has no build (this CPU host).
#: Anything else of vLLM stays absent: up to 0.5.3 compressed-tensors W4A16 then refuses, as SGLang does
#: without vLLM ('vllm is not installed, to use ... CompressedTensorsWNA16, please install vllm').
PARTIAL_STUBS: dict[str, tuple[str, ...]] = {"vllm": VLLM_CPU_FALLBACKS}


@dataclass(frozen=True)
class GpuModel:
    """What ``torch.cuda`` answers for the GPU planned."""

    name: str
    major: int
    minor: int
    total_memory: int  # bytes
    sm_count: int


GPUS: dict[str, GpuModel] = {
    "H100": GpuModel("NVIDIA H100 80GB HBM3", 9, 0, 85_520_809_984, 132),
    "H200": GpuModel("NVIDIA H200", 9, 0, 150_754_820_096, 132),
    "B200": GpuModel("NVIDIA B200", 10, 0, 191_514_083_328, 148),
    "A100": GpuModel("NVIDIA A100-SXM4-80GB", 8, 0, 85_100_068_864, 108),
}


# ---- permissive stand-ins -------------------------------------------------------------------


class _Anything:
    """An object that answers every attribute, call, subscript and iteration harmlessly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Anything()

    def __getitem__(self, item: Any) -> Any:
        return _Anything()

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _StubModule(types.ModuleType):
    """A stand-in module: every attribute is a stand-in class, the same one each time it is read
    (``scalar_types.uint4`` compared with itself must be equal)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _StubClass(name, (_Anything,), {})
        setattr(self, name, value)
        return value


class _StubClass(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _StubClass(name, (_Anything,), {})
        type.__setattr__(cls, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import X[.y]`` for the :data:`STUBBED_PACKAGES` that are not installed."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".")[0]
        if top not in self.names:
            return None
        only = PARTIAL_STUBS.get(top)
        if only is not None and not any(m == fullname or m.startswith(fullname + ".") for m in only):
            return None  # absent, as on a CUDA host
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "99.0.0"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


#: transformers' cached probes of packages the stand-ins name (answered before the stand-ins exist)
_TRANSFORMERS_PROBES = ("is_flash_attn_2_available", "is_flash_attn_3_available", "is_flash_attn_4_available")


def install_package_stubs() -> None:
    """Stand-ins for the compiled packages that do not import on this host; installed after
    transformers has recorded which optional packages exist (it must keep seeing them absent):
    its cached flash-attention probes are asked first (transformers 5.6 asks at its first model
    import, and a stand-in ``flash_attn`` it found then has no distribution to name)."""
    import_utils = importlib.import_module("transformers.utils.import_utils")
    for probe in _TRANSFORMERS_PROBES:
        answer = getattr(import_utils, probe, None)
        if callable(answer):
            answer()
    missing = set()
    for name in STUBBED_PACKAGES:
        if name in sys.modules:
            continue
        if importlib.util.find_spec(name) is None:
            missing.add(name)
    if missing:
        sys.meta_path.insert(0, _StubFinder(frozenset(missing)))


# ---- the GPU planned ------------------------------------------------------------------------


class _Inert:
    """A CUDA stream / event / graph that does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def install_cuda(gpu: GpuModel) -> None:
    """``torch.cuda`` answers as ``gpu`` (process state: call in the child)."""
    import torch

    cuda: Any = torch.cuda
    props = types.SimpleNamespace(
        name=gpu.name, major=gpu.major, minor=gpu.minor, total_memory=gpu.total_memory,
        multi_processor_count=gpu.sm_count, gcnArchName="", L2_cache_size=50 * 2**20, warp_size=32,
        max_threads_per_multi_processor=2048, regs_per_multiprocessor=65536, uuid="0",
    )  # fmt: skip
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 8
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *a, **k: None
    cuda.get_device_capability = lambda *a, **k: (gpu.major, gpu.minor)
    cuda.get_device_name = lambda *a, **k: gpu.name
    cuda.get_device_properties = lambda *a, **k: props
    cuda.mem_get_info = lambda *a, **k: (gpu.total_memory, gpu.total_memory)
    cuda.synchronize = lambda *a, **k: None
    cuda.empty_cache = lambda *a, **k: None
    cuda.is_initialized = lambda: True
    cuda._lazy_init = lambda: None
    cuda.Stream = _Inert
    cuda.Event = _Inert
    cuda.CUDAGraph = _Inert
    cuda.current_stream = lambda *a, **k: _Inert()
    cuda.default_stream = lambda *a, **k: _Inert()
    cuda.stream = lambda *a, **k: contextlib.nullcontext()
    cuda.memory_allocated = lambda *a, **k: 0
    cuda.max_memory_allocated = lambda *a, **k: 0
    setattr(torch.version, "cuda", "12.8")  # noqa: B010 (a module constant CUDA builds set)
    _fakes_of_stubbed_kernels(torch)


def _fakes_of_stubbed_kernels(torch: Any) -> None:
    """On CUDA, SGLang registers ``torch.compile`` fakes of ``sgl_kernel`` operators at import (0.5.12:
    ``layers/moe/topk.py``); the compiled package defines those operators, its stand-in does not, so
    a fake for an operator that does not exist is dropped (nothing here compiles or calls it)."""
    register = torch.library.register_fake
    stubbed = frozenset(STUBBED_PACKAGES)

    def exists(qualname: str) -> bool:
        namespace, _, name = qualname.partition("::")
        try:
            getattr(getattr(torch.ops, namespace), name.split(".")[0])
        except (AttributeError, RuntimeError):
            return False
        return True

    def register_fake(op: Any, func: Any = None, /, **kwargs: Any) -> Any:
        if isinstance(op, str) and op.partition("::")[0] in stubbed and not exists(op):
            return (lambda f: f) if func is None else func
        return register(op, func, **kwargs)

    torch.library.register_fake = register_fake


class CudaToMeta:
    """A torch function mode: a tensor made or moved to ``"cuda"`` lands on ``meta``."""

    def __new__(cls) -> Any:
        import torch
        from torch.overrides import TorchFunctionMode

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = dict(kwargs or {})
                device = kwargs.get("device")
                if device is not None and _is_cuda(device):
                    kwargs["device"] = torch.device("meta")
                if func in (torch.Tensor.to, torch.Tensor.cuda):
                    args = tuple(torch.device("meta") if _is_cuda(a) else a for a in args)
                    if func is torch.Tensor.cuda:
                        return args[0].to("meta")
                if func is torch.Tensor.pin_memory:
                    return args[0]
                return func(*args, **kwargs)

        return _Mode()


def _is_cuda(device: Any) -> bool:
    if isinstance(device, str):
        return device.startswith("cuda")
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    return getattr(device, "type", None) == "cuda"


# ---- stand-in parallel groups ---------------------------------------------------------------


class StandInProcessGroup:
    """A torch process group that answers its rank and size."""

    def __init__(self, rank: int, size: int) -> None:
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size


class StandInGroup:
    """A group coordinator that knows its width and this rank's place in it; nothing communicates."""

    def __init__(self, name: str, world_size: int, rank_in_group: int) -> None:
        self.unique_name = name
        self.world_size = world_size
        self.rank_in_group = rank_in_group
        self.rank = rank_in_group
        self.ranks = list(range(world_size))
        self.local_rank = 0
        self.first_rank = 0
        self.last_rank = world_size - 1
        self.is_first_rank = rank_in_group == 0
        self.is_last_rank = rank_in_group == world_size - 1
        self.next_rank = (rank_in_group + 1) % world_size
        self.prev_rank = (rank_in_group - 1) % world_size
        self.device_group = StandInProcessGroup(rank_in_group, world_size)
        self.cpu_group = StandInProcessGroup(rank_in_group, world_size)
        self.device_communicator = None
        self.pynccl_comm = None
        self.ca_comm = None
        self.use_pynccl = False
        self.use_custom_allreduce = False
        self.use_symm_mem_all_reduce = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


# ---- what one rank holds --------------------------------------------------------------------

GROUPS: tuple[str, ...] = (
    "embedding", "lm_head", "attention", "moe_experts", "router", "dense_mlp", "norms", "scales",
    "vision_tower", "mtp", "other_parameters", "other_buffers",
)  # fmt: skip

_TOWER_MARKS = ("visual.", "vision_tower", "vision_model", "multi_modal_projector", "mm_projector", "vision_encoder",
                "image_encoder", "audio_tower", "mm_input_projection", "mm_soft_emb_norm", "merger.")  # fmt: skip
_SCALE_MARKS = ("scale", "zeros", "qzeros", "g_idx", "perm", "global_sf", "blockscale", "alpha", "input_global")


def weight_group(name: str, is_buffer: bool) -> str:
    """The readable group of a parameter or buffer SGLang names ``name`` (module path + leaf)."""
    lowered = name.lower()
    leaf = lowered.rsplit(".", 1)[-1]
    tower = any(part in lowered for part in _TOWER_MARKS)
    if tower and (not lowered.startswith(("model.", "language_model.model.layers")) or "visual" in lowered):
        return "vision_tower"
    if any(mark in leaf for mark in _SCALE_MARKS) and not leaf.endswith("norm.weight"):
        return "scales"
    if is_buffer:
        return "other_buffers"
    if "embed_tokens" in lowered or "word_embeddings" in lowered or leaf == "wte.weight":
        return "embedding"
    if lowered.startswith(("lm_head", "language_model.lm_head", "model.lm_head")) or ".lm_head." in lowered:
        return "lm_head"
    if "shared_head" in lowered or ".eh_proj" in lowered or ".enorm" in lowered or ".hnorm" in lowered:
        return "mtp"
    if "norm" in leaf or "norm." in lowered.rsplit(".", 2)[-2] + ".":
        return "norms"
    if ".experts." in lowered or "experts.w" in lowered:
        return "moe_experts"
    if ".gate.weight" in lowered or "router" in lowered or "correction_bias" in lowered:
        return "router"
    if any(p in lowered for p in ("mlp.", "shared_expert", "feed_forward.", "ffn.")):
        return "dense_mlp"
    if any(p in lowered for p in ("attn", "attention", "mixer.", "linear_attn", "qkv", "o_proj", "indexer")):
        return "attention"
    return "other_parameters"


def count_model(model: Any) -> dict[str, Any]:
    """Bytes per :data:`GROUPS` entry, the total, and every tensor's bytes (name -> [dtype, shape, bytes])."""
    groups = dict.fromkeys(GROUPS, 0)
    tensors: dict[str, list[Any]] = {}
    buffer_names: set[str] = set()
    seen: set[int] = set()
    for is_buffer, items in ((False, model.named_parameters(remove_duplicate=False)),
                             (True, model.named_buffers(remove_duplicate=False))):  # fmt: skip
        for name, tensor in items:
            if tensor is None:
                continue
            key = id(tensor)
            if key in seen:  # a tied weight is one allocation
                continue
            seen.add(key)
            nbytes = int(tensor.numel() * tensor.element_size())
            group = weight_group(name, is_buffer)
            groups[group] += nbytes
            tensors[name] = [str(tensor.dtype).removeprefix("torch."), list(tensor.shape), nbytes]
            if group == "other_buffers":
                buffer_names.add(name)
    extra = _unregistered_tensors(model, seen)
    for name, (dtype, shape, nbytes) in extra.items():
        leaf = name.rsplit(".", 1)[-1]
        groups["attention" if leaf in ABSORBED else "other_buffers"] += nbytes
        tensors[name] = [dtype, shape, nbytes]
        if leaf not in ABSORBED:
            buffer_names.add(name)
    buffers: dict[str, int] = {}
    for name in buffer_names:
        held = tensors[name]
        label = f"{name.rsplit('.', 1)[-1]} ({held[0]})"
        buffers[label] = buffers.get(label, 0) + int(held[2])
    return {"groups": {k: v for k, v in groups.items() if v}, "total": sum(groups.values()),
            "buffers": buffers, "tensors": tensors}  # fmt: skip


#: MLA's absorbed projections, made by the model's ``post_load_weights`` as plain attributes
#: (``sglang/srt/models/deepseek_common/deepseek_weight_loader.py``): weights, not buffers
ABSORBED = frozenset({"w_kc", "w_vc", "w_scale_k", "w_scale_v"})


def _unregistered_tensors(model: Any, seen: set[int]) -> dict[str, tuple[str, list[int], int]]:
    """Plain tensor attributes of modules (not parameters or buffers) that a layer allocates for
    itself (the RoPE cos/sin cache of some layers, MLA's absorbed ``w_kc`` / ``w_vc``)."""
    import torch

    out: dict[str, tuple[str, list[int], int]] = {}
    for module_name, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_") or not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
                continue
            if id(value) in seen or value.device.type != "meta":
                continue
            seen.add(id(value))
            name = f"{module_name}.{attr}" if module_name else attr
            out[name] = (str(value.dtype).removeprefix("torch."), list(value.shape),
                         int(value.numel() * value.element_size()))  # fmt: skip
    return out


# ---- one deployment -------------------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """One launch to build: the config folder, the GPU planned and the layout."""

    folder: str
    gpu: str = "H100"
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attn_dp: int = 1
    quantization: str | None = None
    dtype: str = "auto"
    extra: tuple[tuple[str, Any], ...] = ()

    def server_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model_path": self.folder, "tokenizer_path": self.folder, "skip_tokenizer_init": True,
            "tp_size": self.tp, "ep_size": self.ep, "pp_size": self.pp, "dtype": self.dtype,
            "load_format": "dummy", "disable_cuda_graph": True,
        }  # fmt: skip
        if self.attn_dp > 1:
            fields.update(dp_size=self.attn_dp, enable_dp_attention=True)
        if self.quantization:
            fields["quantization"] = self.quantization
        fields.update(dict(self.extra))
        return fields


def world_ranks(dep: Deployment) -> list[int]:
    """The world ranks recorded: TP rank 0 of every pipeline stage (the TP ranks of one stage
    hold the same bytes: every split SGLang makes is even, the vocabulary padded to it)."""
    return [stage * dep.tp for stage in range(dep.pp)]


def build_rank(dep: Deployment, world_rank: int) -> dict[str, Any]:
    """Build SGLang's model for ``world_rank`` of ``dep`` on ``meta`` (in this process) and count it."""
    from . import compat
    from ._launch_probe import GpuFacts, install_gpu
    from .runtime import installed_release, quiet_stdout

    gpu = GPUS[dep.gpu]
    install_package_stubs()
    row = installed_release()
    install_cuda(gpu)
    _answer_sm_count(gpu)
    _platform_flags_as_cuda()
    install_gpu(GpuFacts(gpu.major, gpu.minor, gpu.total_memory / 2**20), row)
    server_args_mod = importlib.import_module("sglang.srt.server_args")
    with quiet_stdout():
        sa = server_args_mod.ServerArgs(**dep.server_fields())
        _publish_rank(row, sa, dep, world_rank)
        model_config_mod = importlib.import_module("sglang.srt.configs.model_config")
        load_config_mod = importlib.import_module("sglang.srt.configs.load_config")
        loader = importlib.import_module("sglang.srt.model_loader.loader")
        utils = importlib.import_module("sglang.srt.model_loader.utils")
        model_config = model_config_mod.ModelConfig.from_server_args(sa)
        if not row.global_server_args:
            _runner_globals(model_config, sa)
        # the DP-attention state layers read, as ModelRunner's distributed init sets it (up to 0.5.20 it
        # takes the model config too)
        dp_attention = importlib.import_module("sglang.srt.layers.dp_attention")
        compat.call(dp_attention.initialize_dp_attention, server_args=sa, model_config=model_config)
        notes = _as_remote_config(model_config, dep.folder)
        _scheduler_configs(model_config, sa)
        load_config = load_config_mod.LoadConfig(load_format="dummy")
        # the registry imports every model module (up to 0.5.4 lazily, at the first lookup): outside the
        # meta device, as on a server, where import-time tensors are real
        importlib.import_module("sglang.srt.models.registry").ModelRegistry.get_supported_archs()
        with CudaToMeta():
            model, quant_config = _initialize_model(loader, utils, model_config, load_config)
            post = _process_after_loading(model, model_config)
    counted = count_model(model)
    counted["quantization"] = None if quant_config is None else str(quant_config.get_name())
    counted["model_class"] = type(model).__name__
    counted["dtype"] = str(model_config.dtype).removeprefix("torch.")
    counted["after_loading"] = post
    counted["launch"] = _launch_answers()
    if notes:
        counted["environment"] = notes
    return counted


def _runner_globals(model_config: Any, server_args: Any) -> None:
    """Up to 0.5.3 the layers read ``managers.schedule_batch.global_server_args_dict``, which
    ``ModelRunner.__init__`` fills with the server arguments and two facts of its own: whether the
    model is MLA (``use_mla_backend``) and the speculative algorithm (the arguments themselves are
    copied in by :func:`_publish_rank`)."""
    batch = importlib.import_module("sglang.srt.managers.schedule_batch")
    algorithm = importlib.import_module("sglang.srt.speculative.spec_info").SpeculativeAlgorithm
    arch = importlib.import_module("sglang.srt.configs.model_config").AttentionArch
    batch.global_server_args_dict.update(
        use_mla_backend=model_config.attention_arch == arch.MLA,
        speculative_algorithm=algorithm.from_string(server_args.speculative_algorithm),
    )


def _initialize_model(loader: Any, utils: Any, model_config: Any, load_config: Any) -> tuple[Any, Any]:
    """The model SGLang's loader builds on ``meta``, and the quantization config it built it with.

    From 0.5.5 the loader reads the quantization config (``_get_quantization_config``) and hands it
    to ``_initialize_model``; up to 0.5.4 ``_initialize_model`` reads it itself (with the model
    class's packed-module mapping), and the config is the one that call returned."""
    import torch

    from . import compat

    read = loader._get_quantization_config
    seen: list[Any] = []

    def reading(*args: Any, **kwargs: Any) -> Any:
        seen.append(read(*args, **kwargs))
        return seen[-1]

    takes_config = "quant_config" in (compat.accepted_keywords(loader._initialize_model) or ())
    loader._get_quantization_config = reading
    try:
        given = (reading(model_config, load_config),) if takes_config else ()
        with utils.set_default_torch_dtype(model_config.dtype), torch.device("meta"):
            model = loader._initialize_model(model_config, load_config, *given)
    finally:
        loader._get_quantization_config = read
    return model, seen[-1] if seen else None


def _as_remote_config(model_config: Any, folder: str) -> list[str]:
    """Undo what this host's transformers adds where the checkpoint's own (remote-code) config
    class would not: transformers 5's native config of a model such as MiMo-V2-Flash turns the
    absent ``rope_scaling`` into a dict keyed by layer type, which SGLang's ``get_rope`` cannot
    hash; the checkpoint's ``auto_map`` config (``--trust-remote-code``) leaves it ``None``.
    RoPE parameters change no weight."""
    raw = json.loads(Path(folder, "config.json").read_text(encoding="utf-8"))
    hf = model_config.hf_config
    scaling = getattr(hf, "rope_scaling", None)
    keyed = isinstance(scaling, dict) and scaling and all(isinstance(v, dict) for v in scaling.values())
    if keyed and raw.get("rope_scaling") is None:
        hf.rope_scaling = None
        return ["rope_scaling: transformers' per-layer-type dict set back to the config.json's None "
                "(the checkpoint's remote-code config class keeps it None)"]
    return []


#: module-level platform flags SGLang computed at import on this CPU host, as a CUDA host has them
PLATFORM_FLAGS: dict[str, bool] = {
    "_is_cuda": True, "_is_cpu": False, "_is_hip": False, "_is_npu": False, "_is_xpu": False,
    "_is_musa": False, "_is_mps": False, "_is_cpu_amx_available": False, "_use_aiter": False,
}  # fmt: skip


def _platform_flags_as_cuda() -> None:
    """Rebind :data:`PLATFORM_FLAGS` in every loaded SGLang module (a module imported later
    computes them under the CUDA answers installed by :func:`install_cuda`)."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang") or module is None:
            continue
        namespace = vars(module)
        for flag, value in PLATFORM_FLAGS.items():
            if isinstance(namespace.get(flag), bool):
                setattr(module, flag, value)


#: per-token expert-count fields ``Scheduler.init_moe_gemm_config`` looks for (a MoE model)
_MOE_TOPK_FIELDS = ("num_experts_per_tok", "num_experts_per_token", "top_k_experts", "moe_top_k", "moe_topk")


#: the kernel-choice seeds ``Scheduler.init_moe_gemm_config`` calls, by module (a release without one
#: of them has no such choice: up to 0.5.4 only the MoE config, handed the ``ServerArgs``)
_SCHEDULER_SEEDS: tuple[tuple[str, str], ...] = (
    ("sglang.srt.layers.quantization.fp8_utils", "initialize_fp8_gemm_config"),
    ("sglang.srt.layers.quantization.fp4_utils", "initialize_fp4_gemm_config"),
    ("sglang.srt.layers.quantization.unquant", "initialize_bf16_gemm_config"),
)


def _scheduler_configs(model_config: Any, server_args: Any) -> None:
    """The process-wide kernel choices the scheduler seeds before the model is built
    (``sglang/srt/managers/scheduler.py``, ``Scheduler.init_moe_gemm_config``): the MoE runner and
    all-to-all backends for a MoE model, then the FP8 / FP4 / bf16 GEMM configs. Weight layouts
    read them (the NVFP4 MoE keeps a swizzled scale copy unless the runner is TRT-LLM)."""
    from . import compat

    text = model_config.hf_text_config
    if any(hasattr(text, name) for name in _MOE_TOPK_FIELDS):
        compat.call(importlib.import_module("sglang.srt.layers.moe").initialize_moe_config, server_args=server_args)
    for module_name, seed in _SCHEDULER_SEEDS:
        with contextlib.suppress(ImportError):
            function = getattr(importlib.import_module(module_name), seed, None)
            if function is not None:  # up to 0.5.12 handed the ServerArgs
                compat.call(function, server_args=server_args)


def _launch_answers() -> dict[str, str]:
    """The kernel choices the build saw (the MoE runner and all-to-all backends)."""
    moe = importlib.import_module("sglang.srt.layers.moe.utils")
    out = {}
    for name, getter in (("moe_runner_backend", "get_moe_runner_backend"), ("moe_a2a_backend", "get_moe_a2a_backend")):
        with contextlib.suppress(Exception):
            value = getattr(moe, getter)()
            out[name] = str(getattr(value, "value", value))
    return out


def _answer_sm_count(gpu: GpuModel) -> None:
    """The ``deep_gemm`` stand-in answers the GPU's SM count (the DSA indexer reads it at construction)."""
    deep_gemm = sys.modules.get("deep_gemm") or importlib.import_module("deep_gemm")
    if isinstance(deep_gemm, _StubModule):
        deep_gemm.get_num_sms = lambda: gpu.sm_count  # type: ignore[attr-defined]


def _publish_rank(row: BridgeRelease, server_args: Any, dep: Deployment, world_rank: int) -> None:
    """Make ``server_args`` the process's configuration and place this process at ``world_rank``.

    From 0.5.21 ``runtime_context.publish`` takes the rank's ``SpawnRanks`` and derives every group
    place itself; the stand-in groups then take SGLang's widths and ranks. Before, the process is
    published without ranks (``publish`` from 0.5.17, the ``ServerArgs`` setter before) and the rank's
    place is what ``initialize_model_parallel`` would leave in ``parallel_state``'s group globals:
    :func:`_stand_in_parallel_state`.
    """
    from . import compat

    if row.spawn_ranks:
        rc = importlib.import_module("sglang.srt.runtime_context")
        rc.publish(server_args, role="test", ranks=rc.SpawnRanks(world_rank=world_rank, dp_rank=None, gpu_id=0))
        _stand_in_groups(rc)
        return
    if row.publish:
        importlib.import_module("sglang.srt.runtime_context").publish(server_args, role="test")
    else:
        compat.publish_server_args(row, server_args)
    _stand_in_parallel_state(dep, world_rank)


def rank_places(dep: Deployment, world_rank: int) -> dict[str, tuple[int, int]]:
    """``parallel_state`` group global -> (width, this rank's place), as ``initialize_model_parallel``
    builds them for ``dep``: TP groups of ``tp`` consecutive ranks, one pipeline stage each; attention
    TP ``tp / attn_dp`` wide; the experts split ``ep`` ways and each expert ``tp / ep`` ways."""
    tp_rank, pp_rank = world_rank % dep.tp, world_rank // dep.tp
    attn_tp = dep.tp // dep.attn_dp
    moe_tp = dep.tp // dep.ep
    return {
        "_WORLD": (dep.tp * dep.pp, world_rank), "_TP": (dep.tp, tp_rank), "_PP": (dep.pp, pp_rank),
        "_ATTN_TP": (attn_tp, tp_rank % attn_tp), "_ATTN_CP": (1, 0), "_DCP": (1, 0),
        "_MOE_EP": (dep.ep, tp_rank // moe_tp), "_MOE_TP": (moe_tp, tp_rank % moe_tp), "_MOE_DP": (1, 0),
    }  # fmt: skip


def _stand_in_parallel_state(dep: Deployment, world_rank: int) -> None:
    """Stand-in coordinators in ``parallel_state``'s group globals (those the release has), and in
    place of the attention-TP coordinator ``initialize_dp_attention`` builds itself (up to 0.5.8:
    ``dp_attention._ATTN_TP_GROUP``): each answers its width and this rank's place."""
    import torch

    parallel_state = importlib.import_module("sglang.srt.distributed.parallel_state")
    for name, (width, place) in rank_places(dep, world_rank).items():
        if name in vars(parallel_state):
            setattr(parallel_state, name, StandInGroup(name.strip("_").lower(), width, place))
    dp_attention: Any = importlib.import_module("sglang.srt.layers.dp_attention")
    if "GroupCoordinator" in vars(dp_attention):
        width, place = rank_places(dep, world_rank)["_ATTN_TP"]
        dp_attention.GroupCoordinator = lambda *a, **k: StandInGroup("attention_tp", width, place)
        distributed: Any = torch.distributed
        distributed.get_backend = lambda *a, **k: "nccl"  # this forked process only


def _stand_in_groups(rc: Any) -> None:
    """Stand-in coordinators for every group, at the widths and ranks SGLang published."""
    parallel = rc.get_parallel()
    pairs = {
        "world_group": ("world_size", "world_rank"), "tp_group": ("tp_size", "tp_rank"),
        "pp_group": ("pp_size", "pp_rank"), "attn_tp_group": ("attn_tp_size", "attn_tp_rank"),
        "attn_cp_group": ("attn_cp_size", "attn_cp_rank"), "moe_ep_group": ("moe_ep_size", "moe_ep_rank"),
        "moe_tp_group": ("moe_tp_size", "moe_tp_rank"), "moe_dp_group": ("moe_dp_size", "moe_dp_rank"),
        "shared_experts_tp_group": ("tp_size", "tp_rank"), "dcp_group": ("attn_dcp_size", "attn_dcp_rank"),
    }  # fmt: skip
    groups: dict[str, Any] = {}
    for group, (size_name, rank_name) in pairs.items():
        size = _read(parallel, size_name, 1)
        rank = _read(parallel, rank_name, 0)
        groups[group] = StandInGroup(group, int(size), int(rank))
    parallel.override_permanently(**groups)


def _read(parallel: Any, name: str, default: int) -> Any:
    try:
        return getattr(parallel, name)
    except Exception:
        return default


#: quantization methods whose ``process_weights_after_loading`` is plain torch and runs on
#: ``meta`` (unquantized, block-FP8 and online-FP8 linear layers). The others call CUDA,
#: compile kernels or reach a compiled package (a stand-in here would answer nonsense): their
#: after-loading allocations are modelled in the planner (docs/weights.md, "After loading").
RUNS_ON_META = frozenset({"UnquantizedLinearMethod", "UnquantizedEmbeddingMethod", "Fp8LinearMethod"})


def _process_after_loading(model: Any, model_config: Any) -> dict[str, str]:
    """Run each quantization method's ``process_weights_after_loading`` where it runs on ``meta``
    (:data:`RUNS_ON_META`) and the model's ``post_load_weights`` (MLA's ``w_kc`` / ``w_vc``);
    say which ran and which did not."""
    status: dict[str, str] = {}
    for _, module in model.named_modules():
        method = getattr(module, "quant_method", None)
        if method is None or not hasattr(method, "process_weights_after_loading"):
            continue
        kind = type(method).__name__
        if kind not in RUNS_ON_META:
            status[kind] = "not run (not plain torch)"
            continue
        try:
            method.process_weights_after_loading(module)
        except Exception as exc:  # a CUDA call: not runnable here
            status.setdefault(kind, f"not run: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        status.setdefault(kind, "ran")
    post = getattr(model, "post_load_weights", None)
    if callable(post):
        try:
            post()
            status["post_load_weights"] = "ran"
        except Exception as exc:
            status["post_load_weights"] = f"not run: {type(exc).__name__}: {str(exc)[:160]}"
    return status


def build_deployment(dep: Deployment) -> dict[str, Any]:
    """Every recorded rank of ``dep``, each built in its own forked process; a refusal is
    SGLang's exception type and message."""
    ranks = []
    for world_rank in world_ranks(dep):
        ranks.append({"world_rank": world_rank, "pp_rank": world_rank // dep.tp, **_forked(dep, world_rank)})
    return {"ranks": ranks}


def _forked(dep: Deployment, world_rank: int) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child builds and reports
        os.close(read_fd)
        try:
            result: dict[str, Any] = build_rank(dep, world_rank)
        except BaseException as exc:  # SGLang's refusal, or an environment failure
            result = {"refusal": {"type": type(exc).__name__, "message": str(exc)[:2000]},
                      "trace": traceback.format_exc()[-4000:]}  # fmt: skip
        with os.fdopen(write_fd, "w", encoding="utf-8") as out:
            json.dump(result, out, default=str)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as inp:
        text = inp.read()
    os.waitpid(pid, 0)
    if not text:
        return {"refusal": {"type": "ChildDied", "message": "the build process died without an answer"}}
    answer: dict[str, Any] = json.loads(text)
    return answer


@contextlib.contextmanager
def config_folder(files: Mapping[str, Any]) -> Iterator[str]:
    """A temporary checkpoint folder holding ``files`` (name -> JSON object)."""
    with tempfile.TemporaryDirectory(prefix="kvs-weights-") as folder:
        for name, content in files.items():
            Path(folder, name).write_text(json.dumps(content), encoding="utf-8")
        yield folder
