"""``kvstrategies plan MODEL --engine vllm ...``: the ``plan`` flags as a vLLM request, and the command.

The flags themselves (vLLM's spellings, and the refusal of SGLang's) are
:mod:`kvstrategies.vllm.arguments`'; this module reads them into a
:class:`~.request.VLLMPlanRequest` and prints the plan.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...errors import KVCacheConfigError
from ..arguments import check_engine_flags
from .budget import planning_release
from .values import human_readable_int, max_model_len, utilization


def _int(args: argparse.Namespace, dest: str) -> int | None:
    value = getattr(args, dest, None)
    return None if value is None else human_readable_int(value, "--" + dest.replace("_", "-"))


def vllm_request(args: argparse.Namespace) -> Any:
    """The :class:`~.request.VLLMPlanRequest` of the ``plan`` flags."""
    from ...core.quantization_names import quantization_for
    from ...planner.gpus import lookup_gpu, parse_bytes
    from ...planner.model_lookup import resolve_for_planning
    from ...presets import load_preset_config
    from .request import VLLMPlanRequest

    check_engine_flags(args)
    given = [v for v in (args.model, args.model_path) if v is not None]
    if not given or any(not v.strip() for v in given):
        raise KVCacheConfigError("name a model (preset, HF id, config.json or folder) to plan for vLLM")
    if len(set(given)) > 1:
        raise KVCacheConfigError(f"two models given: {given[0]!r} and --model-path {given[1]!r}; keep one")
    source = resolve_for_planning(given[0])
    config = source.config if source.config is not None else load_preset_config(str(source.preset))
    gpu = None if args.gpu is None else lookup_gpu(args.gpu).name
    memory = None if args.gpu_memory is None else parse_bytes(args.gpu_memory) / 2**20
    quant = args.weight_quantization
    if args.sglang_quantization is not None:
        quant = quant or quantization_for(args.sglang_quantization, "per GPU")
    kv_bytes = None if args.kv_cache_memory_bytes is None else _kv_bytes(args.kv_cache_memory_bytes)
    return VLLMPlanRequest(
        model=given[0],
        source=source.request_source(),
        config=config,
        model_folder=None if source.folder is None else str(source.folder),
        gpu=gpu,
        gpu_memory_mib=memory,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=args.pp_size,
        kv_cache_dtype=args.kv_cache_dtype or "auto",
        dtype=args.model_dtype,
        block_size=_int(args, "block_size"),
        gpu_memory_utilization=None if args.gpu_memory_utilization is None
        else utilization(args.gpu_memory_utilization),
        kv_cache_memory_bytes=kv_bytes,
        max_model_len=None if args.max_model_len is None else max_model_len(args.max_model_len),
        max_num_seqs=_int(args, "max_num_seqs"),
        max_num_batched_tokens=_int(args, "max_num_batched_tokens"),
        enable_prefix_caching=args.enable_prefix_caching,
        enable_chunked_prefill=args.enable_chunked_prefill,
        async_scheduling=args.async_scheduling,
        disable_hybrid_kv_cache_manager=args.disable_hybrid_kv_cache_manager,
        enforce_eager=args.enforce_eager,
        enable_expert_parallel=args.enable_expert_parallel,
        data_parallel_size=args.dp_size,
        decode_context_parallel_size=args.dcp,
        weight_quantization=quant,
        weight_bytes=None if args.weight_bytes is None else parse_bytes(args.weight_bytes),
        request_lengths=tuple(args.request_lengths or ()),
        release=planning_release(args.vllm_version),
        **_speculative(args.speculative_config),
    )


def _speculative(text: str | None) -> dict[str, Any]:
    """The request's speculative fields from ``--speculative-config`` (none when not given): the method, the tokens,
    and a draft head's or draft model's folder and config.json."""
    from ...core.jsonio import parse_json_text
    from ..strategies.drafts import speculative_request

    if text is None:
        return {}
    value = parse_json_text(text, "--speculative-config")  # depth, duplicate keys and bad escapes refused
    try:
        method, tokens, model = speculative_request(value)
    except ValueError as exc:
        raise KVCacheConfigError(str(exc)) from None
    fields: dict[str, Any] = {"num_speculative_tokens": tokens, "speculative_method": method}
    if model is not None:
        fields.update(draft_model=model, draft_config=_draft_config(model))
    return fields


def _draft_config(model: str) -> dict[str, Any]:
    """The draft's config.json (a head or a draft model): ``model`` is its folder or the file (bounded JSON,
    :mod:`kvstrategies.core.jsonio`);
    vLLM could not load a head that is not there."""
    from pathlib import Path

    from ...core.jsonio import read_json_object

    path = Path(model)
    if not (path.exists() or path.is_symlink()):
        raise KVCacheConfigError(f"--speculative-config model {model!r:.120}: no such file or folder; vLLM could not "
                                 "load the draft (give its folder or config.json)")  # fmt: skip
    try:
        return read_json_object(path / "config.json" if path.is_dir() else path, "the draft's config.json")
    except KVCacheConfigError as exc:
        raise KVCacheConfigError(f"--speculative-config model: {exc}") from exc


def _kv_bytes(text: str) -> int:
    """vLLM's integer (``40G`` = 40 x 2**30); the planner's ``40GiB`` spelling is read too."""
    from ...planner.gpus import parse_bytes

    try:
        return human_readable_int(text, "--kv-cache-memory-bytes")
    except KVCacheConfigError:
        return parse_bytes(text)


def run_vllm_plan(args: argparse.Namespace, notes: tuple[str, ...] = ()) -> int:
    """``plan MODEL --engine vllm``: print the report (text or ``--json``)."""
    from .deployment import plan_vllm
    from .report import plan_json, plan_text

    planned = plan_vllm(vllm_request(args))
    if args.json:
        document = plan_json(planned)
        if notes:
            document["launch_command_notes"] = list(notes)
        print(json.dumps(document, indent=2))
        return 0
    print(plan_text(planned))
    for note in notes:
        print(f"note: {note}")
    return 0
