"""Checks SGLang makes while it sets up a rank's layers, before any pool is sized.

SGLang resolves a rank's layer range in
``sglang.srt.model_executor.model_runner_components.layer_setup.resolve_layer_indices`` and
refuses some layouts there; :func:`check_layer_setup` refuses them the same way, for the release
the context names.
"""

from __future__ import annotations

from ..context import DeviceKind, KVCacheContext, stage_layer_range
from ..core.releases import ReleaseRule, span
from ..errors import UnsupportedConfigurationError

#: a PP stage that does not hold every layer of a model with MTP layers cannot run speculative
#: decoding (the MTP head reads the last layer's hidden states); lifted in 0.5.21
PP_REFUSES_MTP_MODELS = ReleaseRule(
    "pp-refuses-mtp-models",
    span(last="0.5.20"),
    "speculative decoding on a PP stage of a model with MTP layers is refused unless the stage holds every layer",
    "sglang.srt.model_executor.model_runner_components.layer_setup._assert_pp_mtp_compat",
)


def check_layer_setup(ctx: KVCacheContext) -> None:
    """Refuse what ``resolve_layer_indices`` refuses for ``ctx.release`` (a target worker, off NPU)."""
    if ctx.is_draft_worker or ctx.device is DeviceKind.NPU or not PP_REFUSES_MTP_MODELS.holds(ctx.release):
        return
    mtp_layers = ctx.geometry.num_nextn_predict_layers
    if not mtp_layers or not ctx.speculative.enabled:
        return
    start, end = stage_layer_range(ctx)
    if end - start != ctx.geometry.num_pp_layers:
        raise UnsupportedConfigurationError(
            f"{ctx.release.label} refuses speculative decoding ({ctx.speculative.algorithm.value}) on a PP stage "
            f"holding layers [{start}, {end}) of a model with {mtp_layers} MTP layer(s): \"PP is not compatible "
            "with MTP models\" (sglang.srt.model_executor.model_runner_components.layer_setup._assert_pp_mtp_compat); "
            "use pp_size 1, or SGLang 0.5.21 or later (--sglang-version)"
        )
