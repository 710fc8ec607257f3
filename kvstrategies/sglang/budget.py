"""The budget step: from a GPU, the memory fraction and the weights to one rank's KV budget.

SGLang 0.5.23 (``sglang/srt/mem_cache/kv_cache_configurator.py``,
``KVCacheConfigurator._profile_available_bytes``) sizes the pool as
``int((avail - pre * (1 - mfs) - mm) * 2**30)`` bytes, where ``pre`` is the free memory measured
before any weight loads (``distributed/bootstrap.py``, ``measure_pre_model_load_memory``) and
``avail`` the free memory after loading, both MIN-all-reduced as float32 over the world. Here
``pre = capacity - held`` (``held``: what the process holds before loading, :mod:`.preload`, or
``--gpu-overhead``) and ``avail = pre - weights - rope`` (the fullest rank's resident weights
from :mod:`.checkpoint` when a checkpoint is at hand, else :mod:`kvstrategies.planner.weights`' estimate;
``rope``: the float32 RoPE ``cos_sin_cache`` the model builds at load). The arithmetic is
:func:`~kvstrategies.sglang.launch.defaults.estimate_kv_budget`; this module chooses its inputs and
records every assumption so the plan can print them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core.dtypes import DType
from ..errors import InsufficientMemoryError, KVCacheConfigError
from ..planner.model_reading import ModelReading, as_reading
from ..planner.request import GIB, DeploymentRequest, model_dtype_name
from ..planner.weights import moonvit_groups, vision_tower_params
from .launch.apply import launch_facts
from .launch.defaults import LaunchResolution, estimate_kv_budget
from .load_refusals import request_layout
from .preload import preload_memory
from .resident import resident_extras

if TYPE_CHECKING:
    from ..planner.checkpoint import CheckpointWeights


@dataclass(frozen=True)
class KVBudget:
    """One rank's KV budget (bytes) and the figures that produced it.

    ``source`` is ``"given"`` (``--available-bytes``) or ``"gpu"``. In GPU mode the capacity
    splits as ``overhead + weights + slack + multimodal + available`` (up to int truncation and
    the float32 rounding of a multi-rank world); ``weights`` includes the RoPE cache;
    ``slack = P0 * (1 - mfs)`` holds activations, CUDA graphs and the request table.
    """

    available_bytes: int
    source: Literal["given", "gpu"]
    gpu_name: str | None = None
    capacity_bytes: int | None = None
    mem_fraction_static: float | None = None
    overhead_bytes: int | None = None
    weight_bytes: int | None = None
    weight_source: str | None = None
    weight_origin: str | None = None  # "given", "checkpoint headers", "checkpoint index total", "config estimate"
    overhead_origin: str | None = None  # "given (--gpu-overhead)" or the preload profile it came from
    slack_bytes: int | None = None
    multimodal_bytes: int = 0
    assumptions: tuple[str, ...] = ()


def weights_per_rank(req: DeploymentRequest, model: ModelReading | Mapping[str, Any]) -> tuple[int, str]:
    """Resident weight bytes of the fullest rank, and where the number came from (``model``: the
    reading of the request's config, or the config itself).

    Given (``--weight-bytes``) wins; else the checkpoint (``source["checkpoint"]``: a model
    folder, or ``--checkpoint``) when it holds safetensors, unless ``--weight-quantization``
    asks for a format the checkpoint does not store; else the estimate of
    :mod:`kvstrategies.planner.weights` at ``tp x pp``. MTP layers count when speculative decoding is on
    (the draft shares the GPU). What SGLang keeps beyond the stored tensors (padding, copies,
    index buffers: :mod:`.resident`) is added to either figure.
    """
    if req.weight_bytes is not None:
        return req.weight_bytes, "given per rank (--weight-bytes)"
    model = as_reading(model)
    config = model.config
    dtype = req.weight_dtype or req.model_dtype
    estimate = model.weights(dtype, req.weight_quantization, req.release)
    extras = resident_extras(req, config, estimate, request_layout(req, config))
    extra_bytes = sum(e.nbytes for e in extras)
    extra_text = "".join(f"; + {e.nbytes / GIB:.2f} GiB {e.name}: {e.reason}" for e in extras)
    include_mtp = req.speculative_algorithm is not None and estimate.mtp_params > 0
    split = _split_text(req)
    ckpt = _checkpoint(req)
    stored = 0
    if ckpt is not None:  # what the config says the checkpoint stores: the two must agree
        stored = model.weights(_stored_dtype(config), None).weight_bytes(include_mtp=True)
        from ..planner.checkpoint import check_matches_config

        check_matches_config(ckpt, config, stored)
    if ckpt is not None and ckpt.source == "headers":
        from ..planner.checkpoint import ShardingFacts, max_rank_bytes

        facts = ShardingFacts.from_config(config, serve_bytes=_serve_bytes(req, config))
        nbytes = max_rank_bytes(
            ckpt,
            facts,
            tp=req.tp_size,
            pp=req.pp_size,
            include_mtp=include_mtp,
            attn_tp=req.tp_size // max(1, req.attn_dp_size),
        )
        return nbytes + extra_bytes, f"from the {ckpt.label}, {split}{extra_text}"
    attn_tp = max(1, req.tp_size // max(1, req.attn_dp_size))
    nbytes = estimate.weight_bytes_per_rank(req.tp_size, req.pp_size, include_mtp=include_mtp, attn_tp=attn_tp)
    mtp = f" + {estimate.mtp_params / 1e9:.2f}B MTP draft" if include_mtp else ""
    if ckpt is not None and stored > 0:  # index total only: scale the config's per-rank split to the stored total
        nbytes = int(nbytes * ckpt.total_bytes / stored)
        return nbytes + extra_bytes, (
            f"from the {ckpt.label}: the config estimate's {split} scaled by the stored total "
            f"({ckpt.total_bytes / stored:.4f} x the {stored:,} B the config predicts){extra_text}"
        )
    params = f"{estimate.main_params / 1e9:.2f}B parameters{mtp}"
    notes = "".join(f"; note: {n}" for n in estimate.fmt.notes)
    tower_bytes, tower_note = _vision_tower_bytes(req, config, estimate.fmt.base_bytes)
    source = f"estimated from the config: {params}, {estimate.fmt.name}, {split}{notes}{tower_note}{extra_text}"
    return nbytes + tower_bytes + extra_bytes, source


def _split_text(req: DeploymentRequest) -> str:
    ep = f", experts over EP {req.ep_size}" if req.ep_size > 1 else ""
    return f"split over TP {req.tp_size} x PP {req.pp_size}{ep} (fullest rank)"


def _vision_tower_bytes(req: DeploymentRequest, config: Mapping[str, Any], base: float) -> tuple[int, str]:
    """Bytes per rank of the vision tower SGLang loads with the language model, and the note."""
    return vision_tower_bytes(config, req.tp_size, max(1, req.tp_size // max(1, req.attn_dp_size)), base)


def vision_tower_bytes(config: Mapping[str, Any], tp: int, attn_tp: int, base: float) -> tuple[int, str]:
    """Bytes one rank holds of the vision tower a multimodal model class builds beside the language model
    (``base`` bytes a parameter), and the note: MoonViT's groups split over the attention TP, a ViT tower's
    approximate parameters over ``tp`` (TP-sharded like the language model's linears; vLLM's default
    ``mm_encoder_tp_mode`` ``weights`` shards it the same way)."""
    if not launch_facts(config).is_multimodal:
        return 0, ""
    groups = moonvit_groups(config)
    if groups:
        params = sum(g.count for g in groups)
        nbytes = math.ceil(sum(g.per_rank(attn_tp) for g in groups) * base)
        return nbytes, f"; + MoonViT vision tower and projector {params / 1e9:.3f}B parameters (from vision_config)"
    tower = _vision_tower(config)
    if not tower:
        return 0, ""
    nbytes = math.ceil(tower * base / max(1, tp))
    return nbytes, f"; + vision tower ~{tower / 1e9:.2f}B parameters (approximate, from vision_config)"


def _vision_tower(config: Mapping[str, Any]) -> int:
    """Parameters of the vision tower SGLang loads: the multimodal model classes build it even
    when multimodal serving is opt-in and off (``sglang/srt/models/gemma3_mm.py``)."""
    if not launch_facts(config).is_multimodal:
        return 0
    return vision_tower_params(config)


def weight_origin(source: str) -> str:
    """The short name of where a weight figure came from (for the JSON and quick reading)."""
    for marker, origin in (
        ("--weight-bytes", "given"),
        ("checkpoint headers", "checkpoint headers"),
        ("checkpoint index total", "checkpoint index total"),
    ):
        if marker in source:
            return origin
    return "config estimate"


def _checkpoint(req: DeploymentRequest) -> CheckpointWeights | None:
    folder = req.source.get("checkpoint")
    if folder is None or req.weight_quantization is not None:
        return None
    from ..planner.checkpoint import read_checkpoint  # the safetensors reader: only with a checkpoint at hand

    return read_checkpoint(str(folder))


def _serve_bytes(req: DeploymentRequest, config: Mapping[str, Any]) -> int:
    name = req.weight_dtype or model_dtype_name(req, config)
    return DType.from_name(name).itemsize


def _stored_dtype(config: Mapping[str, Any]) -> str | None:
    from ..models.hf import text_config

    name = text_config(config).get("torch_dtype") or text_config(config).get("dtype") or config.get("torch_dtype")
    return None if name is None else str(name)


def rope_cache_bytes(config: Mapping[str, Any], context_length: int | None) -> int:
    """Bytes of the float32 RoPE ``cos_sin_cache`` (``layers/rotary_embedding/base.py``): rows
    ``max(max_position_embeddings, align128(context + 256))`` (``reserve_rope_cache_for_long_sequences``)
    times the rotary dim (``qk_rope_head_dim`` for MLA, else ``head_dim * partial_rotary_factor``)
    times 4. One cache per model (``get_rope`` shares it across layers)."""
    from ..models.hf import text_config

    t = text_config(config)

    def num(key: str) -> float:
        value = t.get(key, config.get(key))
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    heads = num("num_attention_heads")
    if not heads or not num("hidden_size"):
        return 0
    rot = num("qk_rope_head_dim") or (num("head_dim") or num("hidden_size") / heads) * (
        num("partial_rotary_factor") or 1.0
    )
    max_pos = int(num("max_position_embeddings"))
    ctx = context_length or max_pos
    rows = max(max_pos, -(-(ctx + 256) // 128) * 128)
    return int(rows * int(rot) * 4)


def kv_budget(req: DeploymentRequest, model: ModelReading, launch: LaunchResolution | None) -> KVBudget:
    """The KV budget of one rank (``model``: the reading of its config): given, or derived from the
    GPU (see the module doc)."""
    if req.available_bytes is not None:
        return KVBudget(
            available_bytes=req.available_bytes,
            source="given",
            gpu_name=None if req.gpu is None else req.gpu.name,
            assumptions=("KV budget per rank given (--available-bytes): the GPU budget step is skipped",),
        )
    gpu = req.gpu
    if gpu is None or launch is None:
        raise KVCacheConfigError("name a GPU (--gpu / --gpu-memory) or give --available-bytes")
    if gpu.capacity_mib is None or launch.mem_fraction_static is None:
        raise KVCacheConfigError(f"GPU {gpu.name!r} has no known capacity; give --gpu-memory (e.g. 80GiB)")
    weights, weight_source = weights_per_rank(req, model)
    rope = 0 if req.weight_bytes is not None else rope_cache_bytes(model.config, req.context_length)
    held = preload_memory(gpu, tp=req.tp_size, pp=req.pp_size)
    overhead = req.overhead_bytes if req.overhead_bytes is not None else held.total_bytes
    mm_gib = launch.multimodal_reserve_mib / 1024  # kv_cache_configurator.mm_runtime_reservation_gb
    mfs = launch.mem_fraction_static
    world = req.tp_size * req.pp_size
    free_before = gpu.capacity_mib * 2**20 - overhead
    if free_before <= 0:
        raise InsufficientMemoryError(
            f"{gpu.name} holds {gpu.capacity_mib * 2**20 / GIB:.2f} GiB, no more than the "
            f"{overhead / GIB:.2f} GiB held before weights load (CUDA context, communication buffers): nothing is "
            "free for the weights; give the GPU's whole memory (--gpu-memory, e.g. 80GiB) or a smaller --gpu-overhead"
        )
    if weights + rope >= free_before:
        raise InsufficientMemoryError(
            f"the weights ({weights / GIB:.2f} GiB per rank) do not fit the {free_before / GIB:.2f} GiB free on "
            f"{gpu.name} before loading; use more GPUs (--tp, --pp-size), smaller weights (--weight-dtype / "
            f"--weight-quantization fp8) or a larger GPU (weights {weight_source})"
        )
    estimate = estimate_kv_budget(
        gpu.capacity_mib,
        weights + rope,
        mfs,
        overhead_gib=overhead / GIB,
        world_size=world,
        multimodal_gib=mm_gib,
    )
    held_text = (
        f"{overhead / GIB:.2f} GiB given (--gpu-overhead)" if req.overhead_bytes is not None else held.describe()
    )
    assumptions = [
        f"GPU capacity {gpu.capacity_mib:g} MiB ({gpu.name}) as nvidia-smi reports memory.total "
        "(SGLang's sglang.srt.utils.common.get_device_memory_capacity)"
        f"{'; ' + gpu.note if gpu.note else ''} (kvstrategies gpus lists the sources)",
        f"free memory before weights P0 = capacity - {held_text}",
        f"weights {weight_source}" + (f"; + {rope / 2**20:.1f} MiB float32 RoPE cache" if rope else ""),
        "free memory after weights = P0 - weights"
        + (
            f"; both float32-rounded by the world MIN all-reduce ({world} ranks, "
            "sglang.srt.utils.common.get_available_gpu_memory)"
            if world > 1
            else ""
        ),
        f"KV budget = free after weights - P0 x (1 - mem_fraction_static {mfs:g})"
        + (f" - {mm_gib:.4f} GiB multimodal cache (SGLANG_VLM_CACHE_SIZE_MB)" if mm_gib else "")
        + " (sglang/srt/mem_cache/kv_cache_configurator.py, _profile_available_bytes); the slack "
        "P0 x (1 - mfs) holds activations, CUDA graphs and the request table",
    ]
    if req.attn_dp_size > 1:
        assumptions.append(
            f"DP attention: attention projections and the embedding sharded over attention-TP "
            f"{max(1, req.tp_size // req.attn_dp_size)}, the rest over TP {req.tp_size}"
        )
    drafted = "MTP" in weight_source or "draft model weights" in weight_source
    if req.speculative_algorithm is not None and not drafted and req.weight_bytes is None:
        assumptions.append("speculative draft: no draft model's weights counted (no MTP layers, no draft config read)")
    return KVBudget(
        available_bytes=estimate.available_bytes,
        source="gpu",
        gpu_name=gpu.name,
        capacity_bytes=gpu.capacity_bytes,
        mem_fraction_static=mfs,
        overhead_bytes=overhead,
        overhead_origin="given (--gpu-overhead)" if req.overhead_bytes is not None else held.origin,
        weight_bytes=weights + rope,
        weight_source=weight_source,
        weight_origin=weight_origin(weight_source),
        slack_bytes=int(estimate.slack_gib * GIB),
        multimodal_bytes=int(mm_gib * GIB),
        assumptions=tuple(assumptions),
    )
