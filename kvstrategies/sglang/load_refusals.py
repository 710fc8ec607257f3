"""What SGLang refuses while it builds and loads the weights, refused here before planning.

A launch can pass every argument check and still stop when the model is built, because the
weights do not split over the ranks the way the quantization kernels need. Each check below is
the one SGLang runs (module and function named in the message, with the fix):

* expert parallelism: ``--ep-size`` must divide ``--tp`` (``runtime_context.derive_parallel_widths``
  gives ``moe_tp = tp // ep``), and ``FusedMoE.__init__`` asserts that the routed experts divide
  over ``ep`` and the expert intermediate size over ``moe_tp``
  (``sglang/srt/layers/moe/fused_moe_triton/layer.py``);
* block-FP8 routed experts: the columns a rank holds of each expert must be whole blocks,
  ``intermediate / moe_tp`` a multiple of ``block_n`` (and of ``block_k`` when ``moe_tp > 1``)
  (``sglang/srt/layers/quantization/fp8.py``, ``Fp8MoEMethod.create_fp8_moe_weight_``;
  compressed-tensors: ``CompressedTensorsW8A8Fp8MoE.create_weights``). ROCm's aiter MoE pads the
  columns to 128 instead when the blocks are 128 x 128; the FlashInfer TRT-LLM runner pads them
  too, and then ``check_quantized_moe_compatibility``
  (``model_executor/model_runner_components/moe_ep_setup.py``) refuses the same split after
  loading when the config names ``moe_intermediate_size``;
* block-FP8 linear layers: column-parallel and merged (qkv, gate_up) outputs a multiple of
  ``block_n``, row-parallel inputs a multiple of ``block_k``
  (``fp8.py``, ``Fp8LinearMethod.validate_block_quant_shapes``; compressed-tensors:
  ``sglang/srt/layers/quantization/fp8_utils.py``, ``validate_fp8_block_shape``);
* NVFP4 linear layers: each rank's input width a multiple of 16
  (``modelopt_quant.py``, ``ModelOptFp4LinearMethod.create_weights``);
* MXFP4 checkpoints on ROCm parts older than gfx950 (MI300X, MI325X)
  (``mxfp4.py``, ``Mxfp4Config.from_config``);
* compressed-tensors weight-only INT (W4A16 / W8A16) up to SGLang 0.5.3, which builds it from vLLM's scheme and
  refuses without vLLM, not a dependency of SGLang (``compressed_tensors.py``,
  ``CompressedTensorsConfig._get_scheme_from_parts``);
* on CUDA, a rotary head size other than 64, 128, 256 or 512 up to SGLang 0.5.6, whose ``RotaryEmbedding``
  takes its kernel from vLLM for those (``layers/rotary_embedding.py``, ``RotaryEmbedding.__init__``:
  ``from vllm._custom_ops import rotary_embedding``; sgl-kernel's from 0.5.7);
* ModelOpt MIXED_PRECISION checkpoints before SGLang 0.5.15 (0.5.9 reads them as FP8 and refuses; 0.5.10 to
  0.5.14 build the layers the map does not name as 128 x 128 block FP8, which a Gated-DeltaNet ``in_proj_ba``
  does not split into: ``modelopt_quant.py``, ``ModelOptMixedPrecisionConfig``);
* a quantization method on a CUDA GPU below the method's minimum compute capability
  (``model_loader/loader.py``, ``_get_quantization_config``: each config class's
  ``get_min_capability``; NVFP4 needs SM100 up to SGLang 0.5.12).

Modules an exclusion list leaves in 16 bits are not checked (they load unquantized), nor the
linear layers a model builds with ``skip_block_quant_check=True`` (:func:`skipped_block_checks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..core.releases import ByRelease, ReleaseRule, span
from ..errors import UnsupportedConfigurationError
from ..models.architectures import rows_for
from ..models.hf import architectures, text_config
from ..planner.model_reading import ModelReading
from ..planner.moe_layout import MoELayout, moe_layout, override_quantization, quantization_method
from ..planner.request import DeploymentRequest
from ..planner.weights import UNQUANTIZED, ParamGroup, ParamKind, WeightEstimate


@dataclass(frozen=True)
class BlockFP8:
    """A block-FP8 scheme: ``[block_n, block_k]`` and which loader creates the weights."""

    block_n: int
    block_k: int
    loader: str  # "fp8" or "compressed-tensors"


def skipped_block_checks(config: Mapping[str, Any]) -> frozenset[str]:
    """The linear layers (last module name) the config's model class builds with
    ``skip_block_quant_check=True``: the architecture rows' ``skips_block_check`` (MiMo-V2-Flash's
    ``qkv_proj``, ``sglang/srt/models/mimo_v2.py``, ``MiMoV2Attention.__init__``)."""
    return frozenset().union(*(row.skips_block_check for row in rows_for(architectures(config))))


def block_fp8(config: Mapping[str, Any], override: str | None) -> BlockFP8 | None:
    """The block-FP8 scheme of the checkpoint, ``None`` when it is not block-quantized FP8."""
    if override not in (None, "fp8"):
        return None
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not isinstance(qcfg, Mapping):
        return None
    method = str(qcfg.get("quant_method") or "").lower().replace("-", "_")
    block = qcfg.get("weight_block_size")
    if method == "fp8" and isinstance(block, (list, tuple)) and _pair(block):
        return BlockFP8(int(block[0]), int(block[1]), "fp8")
    if method == "compressed_tensors" and override is None:
        for group in (qcfg.get("config_groups") or {}).values():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if (isinstance(weights, Mapping) and str(weights.get("strategy")).lower() == "block"
                    and _pair(weights.get("block_structure"))):  # fmt: skip
                structure = weights["block_structure"]
                return BlockFP8(int(structure[0]), int(structure[1]), "compressed-tensors")
    return None


def _pair(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    )


def request_layout(req: DeploymentRequest, config: Mapping[str, Any]) -> MoELayout | None:
    """The MoE layout ``req`` gives ``config`` (see :mod:`.moe_layout`)."""
    return moe_layout(
        config,
        tp=req.tp_size,
        ep=req.ep_size,
        gpu=req.gpu,
        quantization=override_quantization(config, req.weight_quantization),
        runner=req.moe_runner_backend,
        a2a=str(req.launch_extras.get("moe_a2a_backend") or "none"),
        aiter=req.rocm_aiter,
        release=req.release,
        flag=req.weight_quantization,
    )


def check_weight_load(req: DeploymentRequest, model: ModelReading) -> None:
    """Refuse what SGLang refuses while building and loading the weights of ``model`` for ``req``."""
    if req.device == "cpu":
        return
    config = model.config
    _check_ep_divides_tp(req)
    layout = request_layout(req, config)
    if layout is not None:
        _check_expert_split(req, layout)
    estimate = model.weights(req.weight_dtype or req.model_dtype, req.weight_quantization, req.release)
    block = block_fp8(config, req.weight_quantization)
    if block is not None and layout is not None and _quantized(estimate, ParamKind.EXPERT):
        _check_block_experts(req, config, layout, block)
    if block is not None:
        _check_block_linears(req, config, estimate, block)
    if estimate.fmt.name == "nvfp4":
        _check_nvfp4_linears(req, config, estimate)
    _check_mxfp4_platform(req, config)
    _check_min_capability(req, config)
    _check_wna16_needs_vllm(req, estimate)
    _check_modelopt_mixed(req, config)
    _check_fbgemm_fp8(req, config)
    _check_gptq_needs_marlin(req, config)
    _check_rotary_needs_vllm(req, model)


def _check_ep_divides_tp(req: DeploymentRequest) -> None:
    if req.ep_size <= req.tp_size and req.tp_size % req.ep_size == 0:
        return
    divisors = [d for d in range(1, req.tp_size + 1) if req.tp_size % d == 0]
    raise UnsupportedConfigurationError(
        f"--ep-size {req.ep_size} does not divide --tp {req.tp_size}: {req.release} splits the routed experts over "
        f"the EP ranks and each expert over tp / ep ranks (sglang/srt/runtime_context.py, derive_parallel_widths: "
        f"moe_tp_size = tp_size // ep_size; sglang/srt/layers/moe/fused_moe_triton/layer.py, FusedMoE.__init__). "
        f"Use an --ep-size that divides {req.tp_size}: {', '.join(map(str, divisors))}"
    )


def _check_expert_split(req: DeploymentRequest, layout: MoELayout) -> None:
    if layout.experts % layout.ep:
        good = [e for e in range(1, req.tp_size + 1) if req.tp_size % e == 0 and layout.experts % e == 0]
        raise UnsupportedConfigurationError(
            f"the model's {layout.experts} routed experts do not divide over {layout.ep} expert-parallel ranks; "
            f"{req.release} refuses it when it builds the MoE layers (sglang/srt/layers/moe/fused_moe_triton/layer.py, "
            f"FusedMoE.__init__: num_experts % ep_size). Use --ep-size {' or '.join(map(str, good))}"
        )
    if layout.intermediate % layout.moe_tp:
        raise UnsupportedConfigurationError(
            f"the experts' intermediate size {layout.intermediate} does not divide over the expert-TP size "
            f"{layout.moe_tp} (--tp {req.tp_size} / --ep-size {layout.ep}); {req.release} refuses it when it builds "
            "the MoE layers (sglang/srt/layers/moe/fused_moe_triton/layer.py, FusedMoE.__init__: intermediate_size % "
            "moe_tp_size). Raise --ep-size so that tp / ep divides it"
        )


def _quantized(estimate: WeightEstimate, kind: ParamKind) -> bool:
    """Whether some group of ``kind`` is quantized (an exclusion list may leave them all in 16 bits)."""
    base = estimate.fmt.base_bytes
    for layer in estimate.distinct_layers():
        for pos, group in enumerate(estimate.groups_of(layer)):
            if group.kind is kind and estimate.price(layer, pos) not in (base, UNQUANTIZED):
                return True
    return False


def _valid_ep(req: DeploymentRequest, layout: MoELayout, block: BlockFP8) -> list[int]:
    """The ``--ep-size`` values at this TP whose per-rank expert columns are whole blocks."""
    out = []
    for ep in range(1, req.tp_size + 1):
        moe_tp = req.tp_size // ep
        if req.tp_size % ep or layout.experts % ep or layout.intermediate % moe_tp:
            continue
        columns = layout.intermediate // moe_tp
        if columns % block.block_n == 0 and (moe_tp == 1 or columns % block.block_k == 0):
            out.append(ep)
    return out


def _check_block_experts(req: DeploymentRequest, config: Mapping[str, Any], layout: MoELayout, block: BlockFP8) -> None:
    columns = layout.stored_columns(fp8_experts=True, nvfp4_experts=False)
    aiter_pads = block.loader == "fp8" and layout.aiter and block.block_n == block.block_k == 128
    if block.loader == "fp8" and aiter_pads:
        return  # Fp8MoEMethod: aiter pads the columns to 128 instead of refusing
    bad_n = columns % block.block_n
    bad_k = layout.moe_tp > 1 and columns % block.block_k
    if bad_n or bad_k:
        check = (
            "sglang/srt/layers/quantization/fp8.py, Fp8MoEMethod.create_fp8_moe_weight_"
            if block.loader == "fp8"
            else "sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_w8a8_fp8_moe.py, "
            "CompressedTensorsW8A8Fp8MoE.create_weights"
        )
        which = ("block_n", block.block_n) if bad_n else ("block_k", block.block_k)
        raise UnsupportedConfigurationError(_expert_message(req, layout, block, columns, which, check))
    named = text_config(config).get("moe_intermediate_size") is not None
    unpadded = layout.columns
    if block.loader == "fp8" and named and unpadded % block.block_n:  # padded by the TRT-LLM runner
        check = (
            "sglang/srt/model_executor/model_runner_components/moe_ep_setup.py, check_quantized_moe_compatibility, "
            "after the weights load"
        )
        raise UnsupportedConfigurationError(
            _expert_message(req, layout, block, unpadded, ("block_n", block.block_n), check)
        )


def _expert_message(
    req: DeploymentRequest, layout: MoELayout, block: BlockFP8, columns: int, which: tuple[str, int], check: str
) -> str:
    fixes = [e for e in _valid_ep(req, layout, block) if e != layout.ep]
    fix = (
        "add expert parallelism: " + " or ".join(
            f"--ep-size {e} ({layout.experts // e} whole experts per rank, {layout.intermediate // (req.tp_size // e)} "
            "columns each)" for e in fixes
        )
        if fixes
        else "choose a --tp whose expert split is whole blocks"
    )
    return (
        f"the routed experts are block-FP8 ({block.block_n} x {block.block_k} blocks); at --tp {req.tp_size} "
        f"--ep-size {layout.ep} each rank holds {layout.intermediate} / {layout.moe_tp} = {columns} columns of every "
        f"expert, not a whole number of blocks ({columns} % {which[1]} = {columns % which[1]}). {req.release} refuses "
        f"it at weight load ({check}: intermediate_size_per_partition % {which[0]} != 0). Fix: {fix}; "
        "ROCm's aiter MoE (SGLANG_USE_AITER=1) pads 128 x 128 blocks instead"
    )


def _check_block_linears(
    req: DeploymentRequest, config: Mapping[str, Any], est: WeightEstimate, block: BlockFP8
) -> None:
    """Column-parallel / merged outputs % block_n, row-parallel inputs % block_k (module doc)."""
    t = text_config(config)
    tp = req.tp_size
    attn_tp = max(1, tp // max(1, req.attn_dp_size))
    merged_last_free = block.loader == "compressed-tensors"  # validate_fp8_block_shape's exemption
    unchecked = skipped_block_checks(config)
    for group in _quantized_linears(est):
        if group.module.rsplit(".", 1)[-1] in unchecked:
            continue
        shape = _linear_shape(t, group.name, group.module, tp, attn_tp)
        if shape is None:
            continue
        outputs, tp_split, row_input = shape
        sizes = outputs if tp_split or not merged_last_free else outputs[:-1]
        for size in sizes if (tp_split or len(outputs) > 1) else []:
            if size % block.block_n:
                _refuse_linear(req, group.module, f"output partition {size}", f"block_n = {block.block_n}", block)
        if row_input is not None and row_input % block.block_k:
            _refuse_linear(req, group.module, f"input partition {row_input}", f"block_k = {block.block_k}", block)


def _quantized_linears(est: WeightEstimate) -> list[ParamGroup]:
    """One quantized linear group per distinct shape (the first layer that has it); found once
    per estimate (every TP of a sweep or ``fit`` reads the same list)."""
    return est.remember("quantized_linears", lambda: _find_quantized_linears(est))


def _find_quantized_linears(est: WeightEstimate) -> list[ParamGroup]:
    seen: set[tuple[str, str]] = set()
    out = []
    for layer in est.distinct_layers():
        for pos, group in enumerate(est.groups_of(layer)):
            if group.kind not in (ParamKind.ATTENTION, ParamKind.DENSE) or not group.module:
                continue
            if est.price(layer, pos) in (est.fmt.base_bytes, UNQUANTIZED):
                continue
            key = (group.name, group.module)  # the module within the layer (no model.layers.N.)
            if key not in seen:
                seen.add(key)
                out.append(replace(group, module=est.module_name(layer, group)))
    return out


def _linear_shape(
    t: Mapping[str, Any], name: str, module: str, tp: int, attn_tp: int
) -> tuple[list[int], bool, int | None] | None:
    """``(output partition sizes, TP-split, row-parallel input per rank)`` of one SGLang linear."""
    h = int(t["hidden_size"])
    nh = int(t.get("num_attention_heads") or 0)
    tail = module.rsplit(".", 1)[-1]
    if tail == "qkv_proj" and name == "q_proj":
        nkv = int(t.get("num_key_value_heads") or nh)
        hd = int(t.get("head_dim") or h // max(1, nh))
        kv_per = max(1, nkv // attn_tp)
        return [nh // attn_tp * hd, kv_per * hd, kv_per * hd], attn_tp > 1 and nkv >= attn_tp, None
    if tail == "o_proj" and attn_tp > 1:
        vd = int(t.get("v_head_dim") or t.get("head_dim") or h // max(1, nh))
        return [h], False, nh * vd // attn_tp
    if tail in ("q_b_proj", "kv_b_proj", "q_proj") and t.get("kv_lora_rank"):
        nope, rope, vd = int(t["qk_nope_head_dim"]), int(t["qk_rope_head_dim"]), int(t["v_head_dim"])
        width = nope + (vd if tail == "kv_b_proj" else rope)
        return [nh * width // attn_tp], attn_tp > 1, None
    if tail == "gate_up_proj":
        inter = _mlp_width(t, module)
        return [inter // tp, inter // tp], tp > 1, None
    if tail == "down_proj" and tp > 1:
        return [h], False, _mlp_width(t, module) // tp
    return None


def _mlp_width(t: Mapping[str, Any], module: str) -> int:
    if "shared_expert" in module:
        # Nemotron-H: moe_shared_expert_intermediate_size (NemotronHMoE.shared_experts, as weights._moe)
        size = (t.get("shared_expert_intermediate_size") or t.get("moe_shared_expert_intermediate_size")
                or t.get("moe_intermediate_size") or 0)  # fmt: skip
        return int(size) * max(1, int(t.get("n_shared_experts") or 1)) if "shared_experts" in module else int(size)
    size = t.get("intermediate_size_mlp") or t.get("ffn_hidden_size") or t.get("intermediate_size") or 0
    return int(size)


def _refuse_linear(req: DeploymentRequest, module: str, what: str, which: str, block: BlockFP8) -> None:
    check = (
        "sglang/srt/layers/quantization/fp8.py, Fp8LinearMethod.validate_block_quant_shapes"
        if block.loader == "fp8"
        else "sglang/srt/layers/quantization/fp8_utils.py, validate_fp8_block_shape"
    )
    raise UnsupportedConfigurationError(
        f"{module} is block-FP8 ({block.block_n} x {block.block_k}); at --tp {req.tp_size} its {what} is not a "
        f"multiple of {which}. {req.release} refuses it at weight load ({check}). Use a --tp that splits it into whole "
        "blocks"
    )


def _check_nvfp4_linears(req: DeploymentRequest, config: Mapping[str, Any], est: WeightEstimate) -> None:
    """NVFP4 row-parallel inputs per rank must be multiples of 16 (module doc)."""
    t = text_config(config)
    attn_tp = max(1, req.tp_size // max(1, req.attn_dp_size))
    for group in _quantized_linears(est):
        shape = _linear_shape(t, group.name, group.module, req.tp_size, attn_tp)
        row_input = None if shape is None else shape[2]
        if row_input is not None and row_input % 16:
            raise UnsupportedConfigurationError(
                f"{group.module} is NVFP4; at --tp {req.tp_size} each rank's input width {row_input} is not a "
                f"multiple of 16. {req.release} refuses it at weight load "
                "(sglang/srt/layers/quantization/modelopt_quant.py, ModelOptFp4LinearMethod.create_weights: "
                "'in features size is not multiple of 16'). Use a --tp that splits it into multiples of 16"
            )


def _check_mxfp4_platform(req: DeploymentRequest, config: Mapping[str, Any]) -> None:
    gpu = req.gpu
    if gpu is None or not gpu.is_hip or gpu.is_gfx95:
        return
    if quantization_method(config, req.weight_quantization) != "mxfp4":
        return
    raise UnsupportedConfigurationError(
        f"an MXFP4 checkpoint does not load on {gpu.name} ({gpu.gfx_arch}): {req.release} supports MXFP4 on ROCm only "
        "from gfx950 (MI350/MI355X) and raises at weight load (sglang/srt/layers/quantization/mxfp4.py, "
        "Mxfp4Config.from_config: 'Current platform ... not support mxfp4 computation'). Use an MI355X or a CUDA GPU"
    )


#: the minimum CUDA compute capability (major x 10 + minor) of the quantization methods SGLang resolves
#: for a checkpoint or ``--quantization``, as each config class's ``get_min_capability`` answers
#: (``layers/quantization/``: ``Fp8Config``, ``ModelOptFp8Config``, ``W8A8Fp8Config``, ``AWQConfig``,
#: ``GPTQConfig``, ``CompressedTensorsConfig``, ``W8A8Int8Config``, ``W4AFp8Config``)
MIN_CAPABILITY: dict[str, int] = {
    "fp8": 80, "modelopt_fp8": 89, "w8a8_fp8": 89, "awq": 75, "gptq": 60, "compressed_tensors": 70,
    "w8a8_int8": 75, "w4afp8": 90,
}  # fmt: skip

#: ``ModelOptFp4Config.get_min_capability``: Blackwell only up to 0.5.12; from 0.5.13 NVFP4 loads from SM80
#: (``layers/quantization/modelopt_quant.py``)
NVFP4_MIN_CAPABILITY: ByRelease[int] = ByRelease(
    "load-nvfp4-min-capability",
    (("0.5.1", 100), ("0.5.13", 80)),
    "the minimum CUDA compute capability of an NVFP4 (ModelOpt FP4) checkpoint",
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptFp4Config.get_min_capability "
    "(checked by sglang.srt.model_loader.loader._get_quantization_config)",
    topic="weights",
)


def _check_min_capability(req: DeploymentRequest, config: Mapping[str, Any]) -> None:
    gpu = req.gpu
    if gpu is None or not gpu.is_cuda or gpu.compute_capability is None:
        return
    method = quantization_method(config, req.weight_quantization)
    if method is None:
        return
    # ModelOptMixedPrecisionConfig.get_min_capability is ModelOptFp4Config's
    nvfp4 = method in ("modelopt_fp4", "modelopt_mixed")
    needed = NVFP4_MIN_CAPABILITY.at(req.release) if nvfp4 else MIN_CAPABILITY.get(method)
    major, minor = gpu.compute_capability
    capability = major * 10 + minor
    if needed is None or capability >= needed:
        return
    raise UnsupportedConfigurationError(
        f"{req.release} does not load {method} weights on {gpu.name}: the method needs compute capability "
        f"{needed}, the GPU has {capability} (sglang/srt/model_loader/loader.py, _get_quantization_config: 'The "
        f"quantization method ... is not supported for the current GPU'). Use a GPU of capability {needed} or more"
        + (", or SGLang 0.5.13 or later (NVFP4 from SM80)" if nvfp4 and needed > 80 else "")
    )


#: compressed-tensors weight-only INT layers come from vLLM's ``CompressedTensorsWNA16`` up to 0.5.3 (refused without
#: vLLM); from 0.5.4 SGLang has its own scheme
WNA16_NEEDS_VLLM = ReleaseRule(
    "load-wna16-needs-vllm",
    span(None, "0.5.3"),
    "compressed-tensors W4A16 / W8A16 needs vLLM installed (not an SGLang dependency): refused at weight load",
    "sglang.srt.layers.quantization.compressed_tensors.compressed_tensors.CompressedTensorsConfig."
    "_get_scheme_from_parts ('vllm is not installed, to use ... CompressedTensorsWNA16, please install vllm')",
    topic="weights",
)


def _check_wna16_needs_vllm(req: DeploymentRequest, estimate: WeightEstimate) -> None:
    if not WNA16_NEEDS_VLLM.holds(req.release) or not estimate.fmt.name.startswith("compressed-tensors int"):
        return
    raise UnsupportedConfigurationError(
        f"{req.release} builds compressed-tensors weight-only INT layers ({estimate.fmt.name}) from vLLM's "
        "CompressedTensorsWNA16 and refuses without vLLM, which SGLang does not install "
        "(sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py, "
        "CompressedTensorsConfig._get_scheme_from_parts: 'vllm is not installed'). Use SGLang 0.5.4 or later, or "
        "install vLLM beside SGLang"
    )


#: up to 0.5.6 ``RotaryEmbedding`` on CUDA imports vLLM's kernel for a head size its own kernel lacks
ROTARY_HEAD_NEEDS_VLLM = ReleaseRule(
    "load-rotary-head-needs-vllm",
    span(None, "0.5.6"),
    "on CUDA, a rotary head size other than 64 / 128 / 256 / 512 takes vLLM's kernel (not an SGLang dependency): "
    "refused at model build without vLLM (from 0.5.7: sgl-kernel's)",
    "sglang.srt.layers.rotary_embedding.RotaryEmbedding.__init__ (from vllm._custom_ops import rotary_embedding)",
    topic="weights",
)
#: the rotary head sizes SGLang's own CUDA kernel takes (``RotaryEmbedding.__init__``)
ROTARY_HEAD_SIZES = (64, 128, 256, 512)


def _check_rotary_needs_vllm(req: DeploymentRequest, model: ModelReading) -> None:
    gpu = req.gpu
    if gpu is None or not gpu.is_cuda or not ROTARY_HEAD_NEEDS_VLLM.holds(req.release):
        return
    head = model.geometry.head_dim  # 0 for MLA (its rotary part is qk_rope_head_dim, 64)
    if head in (0, *ROTARY_HEAD_SIZES):
        return
    raise UnsupportedConfigurationError(
        f"{req.release} builds the rotary embedding of head size {head} with vLLM's kernel on CUDA and fails "
        "without vLLM, which SGLang does not install (sglang/srt/layers/rotary_embedding.py, "
        "RotaryEmbedding.__init__: 'from vllm._custom_ops import rotary_embedding' for head sizes other than "
        f"{', '.join(map(str, ROTARY_HEAD_SIZES))}). Use SGLang 0.5.7 or later, or install vLLM beside SGLang"
    )


#: ModelOpt MIXED_PRECISION checkpoints load from 0.5.15 (the recordings of nvidia/Qwen3.6-27B-NVFP4 and
#: -35B-A3B-NVFP4: refused by every release before)
MODELOPT_MIXED_LOADS = ReleaseRule(
    "load-modelopt-mixed",
    span("0.5.15"),
    "a ModelOpt MIXED_PRECISION checkpoint loads, each module in its map's algorithm, the others 16-bit (before: "
    "0.5.9 reads it as FP8 and refuses it; 0.5.10 to 0.5.14 build the unnamed layers as 128 x 128 block FP8, "
    "refusing a Gated-DeltaNet in_proj_ba)",
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptMixedPrecisionConfig.get_quant_method "
    "(0.5.9: sglang.srt.configs.model_config.ModelConfig._parse_modelopt_quant_config)",
    topic="weights",
)


def _check_modelopt_mixed(req: DeploymentRequest, config: Mapping[str, Any]) -> None:
    if MODELOPT_MIXED_LOADS.holds(req.release) or quantization_method(config, req.weight_quantization) != (
        "modelopt_mixed"
    ):
        return
    raise UnsupportedConfigurationError(
        f"{req.release} does not load a ModelOpt MIXED_PRECISION checkpoint: 0.5.9 and older read it as FP8 "
        "(ModelOptFp8Config: 'only supports static FP8 quantization'), 0.5.10 to 0.5.14 build the layers its "
        "quantized_layers map does not name as 128 x 128 block FP8 and refuse one whose outputs are not whole "
        "blocks (sglang/srt/layers/quantization/modelopt_quant.py, ModelOptMixedPrecisionConfig; fp8.py, "
        "Fp8LinearMethod.validate_block_quant_shapes). Use SGLang 0.5.15 or later"
    )


#: SGLang's quantization registry holds ``fbgemm_fp8`` up to 0.5.15; from 0.5.16 a checkpoint of that method
#: (Meta's Llama-3.1-405B-Instruct-FP8) is an unknown method (vLLM serves it)
FBGEMM_FP8_REMOVED = ReleaseRule(
    "load-fbgemm-fp8-removed",
    span("0.5.16"),
    "a quant_method fbgemm_fp8 checkpoint is refused as an unknown quantization method (FBGEMMFp8Config left "
    "QUANTIZATION_METHODS)",
    "sglang.srt.configs.model_config.ModelConfig._verify_quantization; sglang.srt.layers.quantization "
    "QUANTIZATION_METHODS",
    topic="weights",
)


#: SGLang's CUDA quantization registry holds plain ``gptq`` up to 0.5.19; from 0.5.20 a GPTQ checkpoint loads only
#: as ``gptq_marlin`` (``GPTQMarlinConfig.override_quantization_method``), and one Marlin cannot take is an unknown
#: method
GPTQ_MARLIN_ONLY = ReleaseRule(
    "load-gptq-marlin-only",
    span("0.5.20"),
    "a quant_method gptq checkpoint on CUDA loads only as gptq_marlin (GPTQConfig left the CUDA QUANTIZATION_METHODS): "
    "one Marlin cannot take (compute capability below 8.0, bits other than 4 / 8, asymmetric, a group size other "
    "than -1 / 32 / 64 / 128, or a field missing) is refused as an unknown quantization method",
    "sglang.srt.layers.quantization.gptq.gptq GPTQMarlinConfig.is_gptq_marlin_compatible; marlin_utils "
    "_check_marlin_supported; sglang.srt.configs.model_config.ModelConfig._verify_quantization",
    topic="weights",
)
#: ``marlin_utils.py MARLIN_SUPPORTED_GROUP_SIZES`` and ``GPTQMarlinConfig.TYPE_MAP``'s (bits, sym) keys
MARLIN_GROUP_SIZES = (-1, 32, 64, 128)
MARLIN_GPTQ_TYPES = ((4, True), (8, True))


def gptq_marlin_compatible(qcfg: Mapping[str, Any], capability: int) -> bool:
    """``GPTQMarlinConfig.is_gptq_marlin_compatible`` on a GPU of ``capability`` (major x 10 + minor): every field
    given, (bits, sym) one Marlin type, a Marlin group size, capability 8.0 or more."""
    fields = [qcfg.get(key) for key in ("bits", "group_size", "sym", "desc_act")]
    if any(value is None for value in fields):
        return False
    bits, group, sym, _ = fields
    return (bits, sym) in MARLIN_GPTQ_TYPES and group in MARLIN_GROUP_SIZES and capability >= 80


def _check_gptq_needs_marlin(req: DeploymentRequest, config: Mapping[str, Any]) -> None:
    gpu = req.gpu
    if not GPTQ_MARLIN_ONLY.holds(req.release) or gpu is None or not gpu.is_cuda or gpu.compute_capability is None:
        return
    if req.weight_quantization not in (None, "marlin", "gptq_marlin", "gptq"):
        return
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not isinstance(qcfg, Mapping) or str(qcfg.get("quant_method") or "").lower() != "gptq":
        return
    major, minor = gpu.compute_capability
    capability = major * 10 + minor
    if req.weight_quantization != "gptq" and gptq_marlin_compatible(qcfg, capability):
        return
    if req.weight_quantization == "gptq":
        why, fix = "--quantization gptq forces it", "drop --quantization gptq, "
    else:
        why = (f"Marlin does not take it on {gpu.name} (capability {capability}; bits {qcfg.get('bits')!r}, sym "
               f"{qcfg.get('sym')!r}, group_size {qcfg.get('group_size')!r}, desc_act {qcfg.get('desc_act')!r})")
        fix = "use a GPU of capability 8.0 or more, " if capability < 80 else (
            "use a checkpoint Marlin takes (4 or 8 symmetric bits, group size -1 / 32 / 64 / 128, bits, group_size, "
            "sym and desc_act all given), ")
    raise UnsupportedConfigurationError(
        f"{req.release} refuses: Unknown quantization method: gptq (sglang/srt/configs/model_config.py, "
        f"ModelConfig._verify_quantization: from 0.5.20 a GPTQ checkpoint loads on CUDA only as gptq_marlin, "
        f"GPTQMarlinConfig.is_gptq_marlin_compatible, and {why}). {fix[0].upper()}{fix[1:]}SGLang 0.5.19 or older "
        "(--sglang-version 0.5.19), or plan it for vLLM (--engine vllm)"
    )


def _check_fbgemm_fp8(req: DeploymentRequest, config: Mapping[str, Any]) -> None:
    if not FBGEMM_FP8_REMOVED.holds(req.release) or quantization_method(config, req.weight_quantization) != (
        "fbgemm_fp8"
    ):
        return
    raise UnsupportedConfigurationError(
        f"{req.release} refuses: Unknown quantization method: fbgemm_fp8 (sglang/srt/configs/model_config.py, "
        "ModelConfig._verify_quantization: FBGEMMFp8Config is no longer in QUANTIZATION_METHODS from 0.5.16). "
        "Use SGLang 0.5.15 or older (--sglang-version 0.5.15), the checkpoint's bf16 base with --quantization fp8, "
        "or plan it for vLLM (--engine vllm), which serves fbgemm_fp8"
    )
