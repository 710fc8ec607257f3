"""The weight catalog under vLLM: what each worker holds after ``load_model``, recorded from vLLM's own model.

The cases are SGLang's weight catalog (``cases/weights/``, :mod:`kvstrategies.sglang.weight_catalog`),
less the layouts the vLLM planner does not take (attention data parallelism, expert parallelism:
:func:`vllm_scope`). ``tools/record_weights.py --engine vllm`` builds vLLM's model for each on
``meta`` (:mod:`kvstrategies.vllm.bridge.model_weights`) and writes
``golden/vllm-<v>-weights/<name>.json``: the bytes of every group of parameters and buffers per
pipeline stage, or vLLM's refusal. :func:`planned` answers the same case with the torch-free vLLM
planner (:func:`kvstrategies.vllm.planner.weights.vllm_weights`, with the launch and weight-load
refusals of ``plan --engine vllm``), and a test holds it to the recording (docs/weights.md).

Compared is the whole stage, buffers included (vLLM's ``model_memory_usage``, logged as "Model loading
took", is the torch memory after loading, so the RoPE ``cos_sin_cache`` counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.jsonio import read_json_object
from ...errors import KVCacheConfigError
from ...sglang.weight_catalog import (
    RECORDINGS,
    Comparison,
    PlannedWeights,
    WeightCase,
    catalog,
    judge,
    listed_difference,
    report_lines,
)

#: case -> (bound on |planned / recorded - 1|, why the planner differs), for every vLLM release recorded.
#: Every other case vLLM builds is planned exact to the byte.
WEIGHT_DIFFERENCES: dict[str, tuple[float, str]] = {
    # small, bounded: tensors the estimate prices by the parameter, not by the tensor
    "deepseek-r1-b200-tp8": (1e-6, "6,832 B = 112 B in each of the 61 layers: small tensors (not traced further)"),
    "deepseek-v3-h200-tp8": (1e-6, "6,832 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-ep8": (1e-6, "6,832 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-dp8-ep8": (1e-6, "6,832 B: as deepseek-r1-b200-tp8"),
    "kimi-k2-h200-tp8": (1e-6, "6,832 B: as deepseek-r1-b200-tp8"),
    "gemma-2-9b-h100-tp1": (1e-6, "2 B: Gemma's bfloat16 embedding normalizer buffer"),
    "llama-3.1-70b-fp8-modelopt-b200-tp1": (1e-6, "5,120 B = 64 B a layer: ModelOpt's per-tensor fp32 scales"),
    "llama-3.1-70b-fp8-modelopt-h100-tp2": (1e-6, "5,120 B = 64 B a layer: ModelOpt's per-tensor fp32 scales"),
    "llama-3.1-8b-ct-w4a16-h100-tp1": (1e-6, "2,624 B: compressed-tensors' int64 weight_shape tensors"),
    "qwen3-next-80b-a3b-h100-tp4": (1e-6, "7,488 B of small GDN tensors (not traced further)"),
    "nemotron-h-8b-h100-tp1": (1e-5, "125 kB of small Mamba2 tensors (the estimate prices 125 kB more)"),
    "deepseek-v3.1-nvfp4-b200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales of every linear and expert"),
    "deepseek-v3.1-nvfp4-h200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "llama-3.1-8b-ct-fp8-h100-tp1": (1e-3, "compressed-tensors per-channel FP8: one fp32 scale per output channel "
                                     "(5.5 MB), priced as none"),
    "qwen3-235b-a22b-fp8-h200-tp8": (1e-3, "20.8 MB: the routed experts' block scales on the [64, 64] grid vLLM "
                                     "refines to at TP 8 (refine_fp8_moe_block_shape; 192 columns a rank), priced on "
                                     "the checkpoint's [128, 128]"),
    "mimo-v2-flash-h200-tp4": (1e-6, "576 B: small attention tensors (sink biases, fp8 KV scales) priced by the "
                               "parameter (not traced further)"),
    "mimo-v2-flash-h200-tp8": (1e-6, "3,072 B: as mimo-v2-flash-h200-tp4"),
    "gemma-3-27b-h100-tp1": (5e-4, "10 MB of the SigLIP tower's norms, biases and position table (left out of "
                             "vision_tower_params)"),
    "gemma-3-27b-h100-tp4": (2e-3, "as gemma-3-27b-h100-tp1, and the tower parts that stay whole on every rank"),
    # the vision towers, approximated (vision_tower_params leaves norms and biases out)
    "qwen3-vl-8b-h100-tp1": (5e-4, "the tower's norms and biases (left out of vision_tower_params)"),
    "qwen3-vl-8b-h100-tp2": (1e-3, "as qwen3-vl-8b-h100-tp1, and tower parts whole on every rank"),
    "qwen2.5-vl-7b-h100-tp1": (0.01, "100 MB: the tower's norms and biases, and vLLM's Qwen2.5-VL builds its tower's "
                               "MLP otherwise than vision_tower_params counts it (not traced further)"),
    "qwen3.5-27b-h100-tp1": (5e-3, "the tower as vision_tower_params approximates it (99 MB more)"),
    "qwen3.5-35b-a3b-h100-tp2": (5e-3, "as qwen3.5-27b-h100-tp1"),
    "qwen3.6-27b-nvfp4-b200-tp1": (2e-3, "25 MB: the GDN in_proj_ba the estimate prices as the map's in_proj_qkv, "
                                   "and the tower's norms"),
    "qwen3.6-35b-a3b-nvfp4-b200-tp2": (1e-3, "as qwen3.6-27b-nvfp4-b200-tp1"),
    "kimi-k2.5-nvfp4-h200-tp8": (0.01, "468 MB: the MoonViT tower's parts vLLM does not split over TP, priced "
                                 "split (not traced further)"),
    "llama-4-scout-h100-tp8": (5e-3, "116 MB: the tower and projector (vLLM's Llama-4 vision model), approximated"),
    "llama-4-maverick-h200-tp8": (2e-3, "116 MB: as llama-4-scout-h100-tp8"),
    "minimax-m2.5-h200-tp4": (1e-3, "25 MB the estimate prices more (not traced further)"),
    "minimax-m2.5-h200-tp8": (1e-3, "4.6 MB: as minimax-m2.5-h200-tp4"),
    "minimax-m2.7-h100-tp4": (1e-3, "26 MB: as minimax-m2.5-h200-tp4"),
    "deepseek-v3.2-h200-tp8": (5e-3, "193 MB in the DSA indexer (the estimate approximates it; not traced further)"),
    "glm-5-fp8-h200-tp8": (5e-3, "144 MB in the DSA indexer (as deepseek-v3.2-h200-tp8)"),
    "deepseek-v4-flash-h200-tp4": (0.015, "407 MB: the estimate approximates DeepSeek-V4's compressed attention "
                                   "(sglang weights.py _dsv4_attention; vLLM's attention holds 361 MB less than "
                                   "SGLang's) and leaves out vLLM's 16 MiB top-k index buffer"),
    # larger: what the estimate does not model
    "nemotron-3-nano-nvfp4-h100-tp1": (0.005, "66 MB more than vLLM builds (not traced further); the NVFP4 "
                                       "exclusion list is matched in the model's names (backbone. -> model., one "
                                       "mixer block per layer; was 599 MB fewer)"),
    "qwen3.5-397b-a17b-nvfp4-h100-tp4": (0.05, "2.5 GB: the exclusion list keeps linear_attn, shared experts and "
                                         "attention in bf16 (model.language_model.* names); the estimate prices NVFP4"),
    "gpt-oss-120b-h100-tp4": (0.07, "MXFP4 experts padded for the MoE backend vLLM picks "
                              "(mxfp4_round_up_hidden_size_and_intermediate_size: each rank's 720 columns to 768); "
                              "the planner does not pad"),
    "gpt-oss-20b-b200-tp1": (0.07, "MXFP4 experts on SM100: hidden and columns padded for the backend "
                             "(mxfp4_round_up_hidden_size_and_intermediate_size); the planner does not pad"),
    "llama-3.1-8b-online-fp8-h100-tp1": (0.5, "recorded before process_weights_after_loading, which quantizes the "
                                         "bf16 linears to fp8 (a CUDA kernel, not run on meta); the planner prices "
                                         "them as fp8, as vLLM serves them"),
    "qwen3-30b-a3b-online-fp8-h100-tp1": (0.5, "as llama-3.1-8b-online-fp8-h100-tp1, the experts too"),
}

#: (case, first release, last release) -> (bound, why): how an older release's recording differs from the planner,
#: where that release differs from the entry of :data:`WEIGHT_DIFFERENCES` (which holds otherwise)
RELEASE_WEIGHT_DIFFERENCES: dict[tuple[str, str, str], tuple[float, str]] = {
    ("kimi-k2-h200-tp8", "0.25.1", "0.33.0"): (
        2e-4, "16 MiB: these releases hold Kimi-K2's YaRN RoPE cache in float32 (0.19.1, 0.22.1 and 0.34.0 in the "
        "model dtype, as planned); and 6,832 B as deepseek-r1-b200-tp8"),
    ("kimi-k2.5-nvfp4-h200-tp8", "0.25.1", "0.33.0"): (
        0.01, "as kimi-k2.5-nvfp4-h200-tp8 under 0.34.0, less 32 MiB: the float32 YaRN RoPE cache (as "
        "kimi-k2-h200-tp8)"),
    ("qwen2.5-7b-gptq-h100-tp1", "0.19.1", "0.29.0"): (
        0.65, "recorded without the checkpoint's safetensors: when a GPTQ config names no modules_in_block_to_quantize "
        "these releases find the quantized layers in the safetensors metadata (AutoGPTQConfig.maybe_update_config "
        "in 0.29.0, read in its source; 0.19.1 to 0.25.1 record the same bf16 bytes), and a folder of config.json "
        "alone has none, so every layer is built bf16; a real checkpoint's packed layers are 4-bit, as planned "
        "(0.32.0 on: recorded 4-bit)"),
    ("gpt-oss-20b-b200-tp1", "0.19.1", "0.25.1"): (
        0.1, "MXFP4 experts on SM100 padded further for the backend these releases pick "
        "(mxfp4_round_up_hidden_size_and_intermediate_size): 1.3 GB; the planner does not pad"),
    ("qwen3-vl-8b-h100-tp1", "0.19.1", "0.29.0"): (
        0.015, "190 MB: these releases build Qwen3-VL's tower with more than vision_tower_params counts (not traced "
        "further; 0.32.0 on: 1.5 MB)"),
    ("qwen3-vl-8b-h100-tp2", "0.19.1", "0.29.0"): (
        0.03, "as qwen3-vl-8b-h100-tp1, and the tower whole on every rank (0.32.0 on: split over TP)"),
    ("qwen3.6-27b-nvfp4-b200-tp1", "0.25.1", "0.29.0"): (
        0.01, "as under 0.34.0, and 94 MB more of the tower or the GDN layers these releases build (not traced "
        "further)"),
    ("qwen3.6-35b-a3b-nvfp4-b200-tp2", "0.25.1", "0.29.0"): (0.015, "as qwen3.6-27b-nvfp4-b200-tp1 under 0.25.1"),
    ("qwen3.6-27b-nvfp4-b200-tp1", "0.22.1", "0.22.1"): (
        0.09, "1.8 GB: 0.22.1's ModelOpt MIXED_PRECISION map leaves more of the layers in bf16 than the planner's "
        "(not traced further)"),
    ("qwen3.6-35b-a3b-nvfp4-b200-tp2", "0.22.1", "0.22.1"): (0.05, "as qwen3.6-27b-nvfp4-b200-tp1 under 0.22.1"),
    ("qwen3.6-27b-nvfp4-b200-tp1", "0.19.1", "0.19.1"): (
        0.6, "0.19.1 reads no MIXED_PRECISION map: every layer is built in bf16 (44 GB), which the checkpoint's "
        "packed NVFP4 tensors would not load into; the planner prices the map"),
    ("qwen3.6-35b-a3b-nvfp4-b200-tp2", "0.19.1", "0.19.1"): (0.7, "as qwen3.6-27b-nvfp4-b200-tp1 under 0.19.1"),
}

#: case -> why the planner's refusal differs from vLLM's
REFUSAL_DIFFERENCES: dict[str, str] = {
    "deepseek-v4-flash-h200-tp4": (
        "vLLM 0.19.1 refuses DeepSeek-V4's config (its ModelConfig: 'rope_parameters should have a rope_type key'); "
        "0.22.1 to 0.29.0 refuse to build it with the default --kv-cache-dtype auto ('DeepseekV4 only supports fp8 "
        "kv-cache'); the planner's weight step prices it (its KV step refuses DeepSeek-V4 for vLLM as not "
        "modelled before 0.29.0); 0.32.0 on: built with TileLang's kernels inert, as planned (a listed difference)"),
}


def weight_difference(name: str, release: str) -> tuple[float, str]:
    """:func:`~kvstrategies.sglang.weight_catalog.listed_difference` with vLLM's lists
    (:data:`RELEASE_WEIGHT_DIFFERENCES`, :data:`WEIGHT_DIFFERENCES`)."""
    return listed_difference(name, release, RELEASE_WEIGHT_DIFFERENCES, WEIGHT_DIFFERENCES, "vllm")


def vllm_scope(case: WeightCase, version: str | None = None) -> str | None:
    """Why ``case`` is not a launch ``plan --engine vllm`` takes in vLLM ``version`` (the newest when ``None``;
    ``None``: it is)."""
    from ...core.releases import parse_release
    from ..strategies.engine_args import DATA_PARALLEL
    from .weights import EXPERT_PARALLEL

    release = parse_release(version, "vllm", field="--vllm-version")
    if case.attn_dp != 1 and not DATA_PARALLEL.holds(release):
        return f"attention DP {case.attn_dp}: --data-parallel-size is planned for vLLM {DATA_PARALLEL.span.describe()}"
    if case.ep not in (1, case.tp):
        return f"EP {case.ep}: vLLM's expert parallelism spans TP x DP ({case.tp} here: --enable-expert-parallel)"
    if case.ep > 1 and not EXPERT_PARALLEL.holds(release):
        return f"EP {case.ep}: --enable-expert-parallel is planned for vLLM {EXPERT_PARALLEL.span.describe()}"
    return None


def vllm_layout(case: WeightCase) -> tuple[int, int]:
    """``(--tensor-parallel-size, --data-parallel-size)`` of a weight case's launch, as the case mapping reads
    SGLang's attention DP (:func:`~kvstrategies.vllm.strategies.engine_args.attention_dp_layout`; the experts span
    all ``tp``, whole under EP as SGLang's ``--ep-size tp``)."""
    from ..strategies.engine_args import attention_dp_layout

    return attention_dp_layout(case.tp, case.attn_dp)


def vllm_catalog(version: str | None = None) -> tuple[WeightCase, ...]:
    """The weight cases recorded under vLLM ``version`` (the newest when ``None``)."""
    return tuple(case for case in catalog() if vllm_scope(case, version) is None)


def recording_dir(version: str) -> Path:
    """``golden/vllm-<version>-weights``."""
    return RECORDINGS / f"vllm-{version}-weights"


def weight_releases() -> tuple[str, ...]:
    """The vLLM releases whose weights are recorded, oldest first."""
    from ...core.releases import parse_release

    names = [p.name.removeprefix("vllm-").removesuffix("-weights") for p in RECORDINGS.glob("vllm-*-weights")]
    return tuple(sorted(names, key=lambda name: parse_release(name, "vllm")))


def recorded(case: WeightCase, version: str) -> dict[str, Any]:
    """The recording of ``case`` under vLLM ``version``."""
    return read_json_object(recording_dir(version) / f"{case.name}.json", f"the vLLM weight recording of {case.name}")


def recorded_stage_bytes(rank: Mapping[str, Any]) -> int:
    """The bytes one recorded stage holds: every group, buffers included (module doc)."""
    return int(rank["total"])


def planned(case: WeightCase, version: str) -> PlannedWeights:
    """The vLLM planner's bytes of the fullest stage for ``case`` under vLLM ``version``, or its refusal: the
    steps ``plan --engine vllm --gpu`` takes before the budget (the launch, the weight-load refusals)."""
    from ...core.releases import parse_release
    from ...planner.model_lookup import resolve_for_planning
    from ...presets import load_preset_config
    from .deployment import resolved_launch, serving_dtype
    from .load_refusals import check_weight_load
    from .request import VLLMPlanRequest
    from .weights import vllm_weights

    source = resolve_for_planning(case.model_ref())
    config = source.config if source.config is not None else load_preset_config(str(source.preset))
    req = VLLMPlanRequest(
        model=case.model,
        source=source.request_source(),
        config=config,
        model_folder=None if source.folder is None else str(source.folder),
        gpu=case.gpu,
        tensor_parallel_size=vllm_layout(case)[0],
        data_parallel_size=vllm_layout(case)[1],
        pipeline_parallel_size=case.pp,
        weight_quantization=case.quantization,
        release=parse_release(version, "vllm", field="--vllm-version"),
        enable_expert_parallel=case.ep > 1,
    )
    try:
        resolved_launch(req)
        check_weight_load(req.config, req.tensor_parallel_size, req.release.text, req.weight_quantization,
                          req.enable_expert_parallel, req.data_parallel_size)  # fmt: skip
    except KVCacheConfigError as exc:
        return PlannedWeights(None, str(exc))
    weights = vllm_weights(req.config, tp=req.tensor_parallel_size, pp=case.pp, dtype=serving_dtype(req),
                           quantization=case.quantization, checkpoint=req.model_folder,
                           release=req.release, expert_parallel=req.enable_expert_parallel,
                           moe_tp=req.moe_parallel_size)  # fmt: skip
    return PlannedWeights(weights.fullest, None, weights.source)


def compare(case: WeightCase, version: str) -> Comparison:
    """The vLLM recording of ``case`` beside the planner's answer."""
    ranks = recorded(case, version)["ranks"]
    refusal = next((r["refusal"] for r in ranks if "refusal" in r), None)
    plan = planned(case, version)
    host = next((r["environment"] for r in ranks if "environment" in r), None)
    if host is not None:
        return Comparison(case, version, None, None, plan, f"{host['type']}: {host['message']}")
    if refusal is not None:
        return Comparison(case, version, None, f"{refusal['type']}: {refusal['message']}", plan)
    return Comparison(case, version, max(recorded_stage_bytes(r) for r in ranks), None, plan)


def verdict(comparison: Comparison) -> tuple[bool, str]:
    """:func:`~kvstrategies.sglang.weight_catalog.judge` with vLLM's lists (:data:`REFUSAL_DIFFERENCES`,
    :func:`weight_difference`)."""
    return judge(comparison, weight_difference, REFUSAL_DIFFERENCES, "vLLM")


def verify_lines(version: str) -> tuple[bool, list[str]]:
    """``kvstrategies verify --against vllm --weights``: every vLLM weight case against its recording."""
    if not recording_dir(version).is_dir():
        releases = ", ".join(weight_releases()) or "none"
        raise KVCacheConfigError(
            f"no weight recordings for vLLM {version} (recorded: {releases}); record them in that release's "
            "environment with tools/record_weights.py --engine vllm (docs/weights.md), or give --vllm-version one "
            "of those"
        )
    cases = vllm_catalog(version)
    return report_lines((compare(case, version) for case in cases), verdict, "vLLM", recording_dir(version))
