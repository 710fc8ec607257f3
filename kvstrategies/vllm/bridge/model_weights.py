"""The weights each vLLM worker holds, from vLLM's own model class built on ``meta``.

For one weight case (:mod:`kvstrategies.sglang.weight_catalog`: a checkpoint's config files, the GPU
and the layout) this runs what a ``vllm serve`` worker runs before it reads a weight (vLLM module
paths): ``engine/arg_utils.py EngineArgs.create_engine_config`` on a folder of the checkpoint's
config files (``load_format="dummy"``), then, for TP rank 0 of each pipeline stage, that rank's
parallel groups and ``model_executor/model_loader/utils.py initialize_model`` on ``meta`` under the
model dtype, the same construction :mod:`.bridge` runs to read the KV cache specs. Every parameter
and buffer the model registers is counted once (a tied weight is one allocation) into the groups of
:func:`kvstrategies.sglang.bridge.model_on_meta.count_model`; the stage's total is what vLLM's
``model_memory_usage`` ("Model loading took") measures when ``process_weights_after_loading`` moves
no byte. That step is not run here (its kernels need a GPU): a repacking that changes the bytes
(Marlin, an online quantization of bf16 weights) is listed per case where the planner models it.

When vLLM refuses while it builds its config or the model (a block-FP8 split, an unsupported
quantization on that GPU), the refusal is recorded instead: vLLM's exception type and message. An
``ImportError`` is not vLLM's answer but this host's (a kernel package a GPU image installs, such as
DeepSeek-V4's ``tilelang``), nor is an ``OSError`` (a file of the checkpoint the case folder lacks, such
as 0.29.0's image-processor read for Qwen2.5-VL): it is recorded as ``environment``, and the comparison
skips the case.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping
from typing import Any

from .bridge import _VLLM_FAILURES, _clear_caches, _ensure_world, _first_lines, _stage_groups, meta_construction
from .runtime import check_version, gpu_facts, import_vllm, quiet, use_gpu

#: the recording's keys for a built rank (the per-tensor list stays out: it is vLLM's naming)
RANK_KEYS = ("groups", "total", "buffers", "model_class", "quantization", "dtype")


def engine_arguments(tp: int, pp: int, quantization: str | None, expert_parallel: bool, dp: int = 1) -> dict[str, Any]:
    """``EngineArgs`` keywords of a weight case (besides the folder): the layout and ``--quantization``."""
    arguments: dict[str, Any] = {"tensor_parallel_size": tp, "pipeline_parallel_size": pp}
    if dp > 1:
        arguments["data_parallel_size"] = dp
    if quantization is not None:
        arguments["quantization"] = quantization
    if expert_parallel:
        arguments["enable_expert_parallel"] = True
    return arguments


def _built_stage(vllm_config: Any) -> Any:
    """One stage's model on ``meta``, as ``Worker.load_model`` constructs it before loading."""
    loader = importlib.import_module("vllm.model_executor.model_loader.utils")
    with meta_construction(vllm_config):
        return loader.initialize_model(vllm_config=vllm_config)


def build_weights(folder: str, gpu: str, tp: int, pp: int, quantization: str | None = None,
                  expert_parallel: bool = False, dp: int = 1) -> tuple[str, list[dict[str, Any]]]:  # fmt: skip
    """vLLM's release and, per pipeline stage (TP rank 0 of DP rank 0), the bytes its model holds or vLLM's refusal.
    With ``dp`` > 1 the data-parallel group has ``dp`` ranks, which a MoE layer's split reads
    (``FusedMoEParallelConfig.make``: its experts over DP x TP ranks)."""
    from ...sglang.bridge.model_on_meta import count_model

    version = import_vllm()
    check_version(version)
    arg_utils = importlib.import_module("vllm.engine.arg_utils")
    usage = importlib.import_module("vllm.usage.usage_lib")
    ranks: list[dict[str, Any]] = []
    with use_gpu(gpu_facts(gpu)), quiet():
        _clear_caches()
        try:
            arguments = engine_arguments(tp, pp, quantization, expert_parallel, dp)
            engine_args = arg_utils.EngineArgs(model=folder, skip_tokenizer_init=True, load_format="dummy", **arguments)
            vllm_config = engine_args.create_engine_config(usage.UsageContext.OPENAI_API_SERVER)
            ps = _ensure_world(vllm_config)
            for stage in range(pp):
                worker_config = vllm_config if tp * pp == 1 else copy.deepcopy(vllm_config)
                _stage_groups(ps, tp, pp, stage, dp)
                model = _built_stage(worker_config)
                counted = count_model(model)
                ranks.append({
                    "world_rank": stage * tp,
                    "pp_rank": stage,
                    "groups": counted["groups"],
                    "total": counted["total"],
                    "buffers": counted["buffers"],
                    "model_class": type(model).__name__,
                    "quantization": worker_config.model_config.quantization,
                    "dtype": str(worker_config.model_config.dtype).removeprefix("torch."),
                })
        except Exception as exc:  # vLLM's own checks and asserts, and pydantic's ValidationError of its configs
            if not isinstance(exc, _VLLM_FAILURES) and type(exc).__name__ != "ValidationError":
                raise
            message = _first_lines(exc).replace(folder, "<model folder>")
            key = "environment" if isinstance(exc, (ImportError, OSError)) else "refusal"
            ranks = [{"world_rank": 0, "pp_rank": 0, key: {"type": type(exc).__name__, "message": message}}]
    return version, ranks


def rank_summary(rank: Mapping[str, Any]) -> str:
    """One recorded rank in a line: its refusal's type (or the host's), or its total in GiB."""
    if "refusal" in rank:
        return str(rank["refusal"]["type"])
    if "environment" in rank:
        return f"not built here ({rank['environment']['type']})"
    return f"{int(rank['total']) / 2**30:.2f} GiB"
