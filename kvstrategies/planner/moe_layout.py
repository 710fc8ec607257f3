"""How SGLang lays the routed experts of one MoE layer out over the ranks.

``--tp N --ep-size E`` gives each rank ``num_experts / E`` whole experts, each split over the
expert-TP size ``moe_tp = tp / ep`` along its intermediate dimension: a rank holds
``intermediate / moe_tp`` columns of every local expert (``sglang/srt/runtime_context.py``,
``derive_parallel_widths``: ``moe_tp_size = tp_size // moe_ep_size // moe_dp_size``;
``sglang/srt/layers/moe/fused_moe_triton/layer.py``, ``FusedMoE.__init__``). An all-to-all MoE
backend (``--moe-a2a-backend deepep``, ``flashinfer``, ``mori``, ...) spans EP over the whole TP
group (``sglang/srt/arg_groups/overrides.py``, ``_a2a_ep_size``).

Two runner choices change the columns a rank stores, so the weights and the load checks see them:

* the FlashInfer TRT-LLM MoE runner rounds the per-rank columns up to a multiple of 128 before the
  weights are created (``FusedMoE.__init__``, except NVFP4 experts). SGLang picks it by itself on
  SM100 for the DeepSeek family (fp8, ``--quantization modelopt_fp8/fp4/mixed``, 16-bit checkpoints
  and Kimi's INT4), the Qwen3-MoE family (fp8, ``--quantization modelopt_fp4/mixed``, 16-bit) and
  GLM-4-MoE (``--quantization modelopt_fp4``, 16-bit) (``overrides._deepseek_moe_quant_resolution``,
  ``model_overrides/qwen3_moe.py``, ``model_overrides/glm4_moe.py``); they test the flag, else
  config.json's raw ``quant_method`` (:func:`override_quantization`);
* ROCm's aiter MoE (``SGLANG_USE_AITER=1``, which SGLang's ROCm images set in
  ``docker/rocm.Dockerfile``) pads fp8 experts' columns to a multiple of 128
  (``sglang/srt/layers/moe/utils.py``, ``get_moe_weight_sizes`` / ``get_moe_padding_size``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.releases import EngineRelease
from ..models.architectures import holds_in, rows_for
from ..models.hf import architectures, text_config
from .gpus import Accelerator

#: ``overrides._A2A_EP_SPANNING_BACKENDS``: all-to-all backends that make EP the whole TP group.
A2A_EP_SPANNING = frozenset(
    {"megamoe", "deepep", "deepep_v2", "mooncake", "nixl", "ascend_fuseep", "flashinfer", "flashinfer_megamoe",
     "mori", "pplx"}
)  # fmt: skip
TRTLLM_PADDING = 128  # FusedMoE.__init__: round_up(intermediate_size_per_partition, 128)
AITER_PADDING = 128  # sglang/srt/layers/moe/utils.py: AITER_PADDING_SIZE


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def num_routed_experts(config: Mapping[str, Any]) -> int:
    t = text_config(config)
    for key in ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"):
        value = t.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def expert_intermediate(config: Mapping[str, Any]) -> int:
    """One expert's intermediate size: ``moe_intermediate_size``, else ``intermediate_size``."""
    t = text_config(config)
    value = t.get("moe_intermediate_size") or t.get("intermediate_size") or 0
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def quantization_method(config: Mapping[str, Any], override: str | None) -> str | None:
    """SGLang's ``--quantization`` as the launch resolves it: the flag, else the checkpoint's method."""
    if override is not None:
        return {"nvfp4": "modelopt_fp4", "w4a16": "awq"}.get(override, override)
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not isinstance(qcfg, Mapping):
        return None
    method = str(qcfg.get("quant_method") or "").lower().replace("-", "_")
    if method == "modelopt" or "quant_algo" in qcfg:
        algo = str(qcfg.get("quant_algo", "")).upper()
        if algo == "MIXED_PRECISION":  # ModelConfig._parse_modelopt_quant_config (0.5.10 on)
            return "modelopt_mixed"
        return "modelopt_fp4" if "FP4" in algo else "modelopt_fp8"
    return method or None


def override_quantization(config: Mapping[str, Any], flag: str | None) -> str:
    """``quantization`` as SGLang's SM100 MoE-runner overrides see it: the ``--quantization`` flag,
    else config.json's raw ``quantization_config.quant_method`` (``utils/common.py``,
    ``get_quantization_config``), ``"none"`` when there is none. A ModelOpt export names itself
    ``"modelopt"`` there, which none of the overrides' lists holds, so SGLang keeps the auto runner
    for it unless ``--quantization modelopt_fp4`` / ``modelopt_fp8`` is given."""
    if flag is not None:
        return {"nvfp4": "modelopt_fp4", "w4a16": "awq"}.get(flag, flag)
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config")
    method = qcfg.get("quant_method") if isinstance(qcfg, Mapping) else None
    return str(method) if method else "none"


def _kimi_int4(config: Mapping[str, Any]) -> bool:
    """``overrides._deepseek_moe_quant_resolution``'s Kimi-K2-Thinking / K2.5 INT4 recipe test."""
    qcfg = text_config(config).get("quantization_config") or config.get("quantization_config") or {}
    groups = qcfg.get("config_groups") if isinstance(qcfg, Mapping) else None
    weights = (groups.get("group_0") or {}).get("weights") if isinstance(groups, Mapping) else None
    if not isinstance(weights, Mapping):
        return False
    recipe = (weights.get("num_bits"), weights.get("group_size"), weights.get("strategy"), weights.get("type"))
    return recipe == (4, 32, "group", "int")


def sm100_trtllm_quantization(config: Mapping[str, Any], quantization: str) -> str | None:
    """``quantization`` when the model's SM100 override picks the FlashInfer TRT-LLM MoE runner for it
    (the row's ``sm100_trtllm_moe``, or the Kimi INT4 recipe), else None."""
    rows = rows_for(architectures(config))
    if not rows:
        return None
    wanted = rows[0].sm100_trtllm_moe
    kimi = "kimi-int4" in wanted and quantization == "compressed-tensors" and _kimi_int4(config)
    return quantization if quantization in wanted or kimi else None


def moe_runner_backend(
    config: Mapping[str, Any],
    gpu: Accelerator | None,
    quantization: str,
    given: str | None,
    a2a: str,
    release: EngineRelease | None = None,
    flag: str | None = None,
) -> str:
    """The MoE runner SGLang ``release`` resolves (module doc; default the newest); ``quantization``
    from :func:`override_quantization`, ``flag`` the ``--quantization`` given, ``given`` is
    ``--moe-runner-backend``. A release without the model's SM100 override keeps ``auto`` (row facts
    ``sm100_moe_override`` / ``sm100_moe_flag_only``)."""
    if given not in (None, "auto"):
        return str(given)
    if gpu is None or not gpu.is_sm100 or a2a != "none":
        return "auto"
    rows = rows_for(architectures(config))
    if not rows:
        return "auto"
    if release is not None and holds_in(rows[0], "sm100_moe_flag_only", release):
        return "flashinfer_trtllm" if flag in ("modelopt_fp4", "nvfp4") else "auto"
    if release is not None and not holds_in(rows[0], "sm100_moe_override", release):
        return "auto"
    if sm100_trtllm_quantization(config, quantization) is not None:
        return "flashinfer_trtllm"
    # MiniMax-M2's override reads ModelConfig's resolved method ("modelopt" NVFP4 -> "modelopt_fp4"),
    # not the raw quant_method (arg_groups/model_overrides/minimax_m2.py, model_config_of(...).quantization)
    routed = rows[0].sm100_trtllm_routed_moe
    if quantization in routed or (quantization == override_quantization(config, None)
                                  and quantization_method(config, None) in routed):  # fmt: skip
        return "flashinfer_trtllm_routed"
    return "auto"


@dataclass(frozen=True)
class MoELayout:
    """One MoE layer's routed experts on one rank.

    ``columns``: the intermediate columns a rank holds of each local expert
    (``intermediate / moe_tp``); ``stored_columns``: after the runner's padding.
    """

    tp: int
    ep: int
    experts: int
    intermediate: int
    runner: str
    aiter: bool

    @property
    def moe_tp(self) -> int:
        return max(1, self.tp // self.ep)

    @property
    def local_experts(self) -> int:
        return self.experts // self.ep

    @property
    def columns(self) -> int:
        return self.intermediate // self.moe_tp

    def stored_columns(self, *, fp8_experts: bool, nvfp4_experts: bool) -> int:
        """``columns`` after the TRT-LLM round-up (not for NVFP4 experts) or aiter's fp8 padding."""
        if self.runner == "flashinfer_trtllm" and not nvfp4_experts:
            return round_up(self.columns, TRTLLM_PADDING)
        if self.aiter and fp8_experts:
            return round_up(self.columns, AITER_PADDING)
        return self.columns


def moe_layout(
    config: Mapping[str, Any],
    *,
    tp: int,
    ep: int,
    gpu: Accelerator | None,
    quantization: str,
    runner: str | None = None,
    a2a: str = "none",
    aiter: bool | None = None,
    release: EngineRelease | None = None,
    flag: str | None = None,
) -> MoELayout | None:
    """The layout of ``config``'s routed experts, ``None`` for a dense model."""
    experts, inter = num_routed_experts(config), expert_intermediate(config)
    if not experts or not inter:
        return None
    effective_ep = tp if a2a in A2A_EP_SPANNING else ep
    use_aiter = (gpu is not None and gpu.is_hip) if aiter is None else (aiter and gpu is not None and gpu.is_hip)
    return MoELayout(
        tp=tp,
        ep=effective_ep,
        experts=experts,
        intermediate=inter,
        runner=moe_runner_backend(config, gpu, quantization, runner, a2a, release, flag),
        aiter=use_aiter,
    )
