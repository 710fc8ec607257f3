"""Weight rules that hold for some SGLang releases only, each computed by hand from the config and
the function of that release named in the test's docstring (the recordings of every release,
``golden/sglang-<v>-weights/``, are compared case by case in test_weight_recordings.py)."""

from __future__ import annotations

import pytest

from kvstrategies.core.releases import parse_release
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.model_reading import ModelReading
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.load_refusals import MIN_CAPABILITY, NVFP4_MIN_CAPABILITY, check_weight_load
from kvstrategies.sglang.weight_catalog import catalog, planned

CASES = {case.name: case for case in catalog()}


@pytest.mark.parametrize(
    ("release", "refused"), [("0.5.1", True), ("0.5.12", True), ("0.5.13", False), ("0.5.23", False)]
)
def test_nvfp4_needs_blackwell_up_to_0_5_12(release: str, refused: bool) -> None:
    """``ModelOptFp4Config.get_min_capability`` is 100 up to 0.5.12 and 80 from 0.5.13
    (``layers/quantization/modelopt_quant.py``); ``model_loader/loader.py``,
    ``_get_quantization_config`` raises when 9 x 10 + 0 = 90 (H100) is below it."""
    assert NVFP4_MIN_CAPABILITY.at(parse_release(release)) == (100 if refused else 80)
    got = planned(CASES["qwen3-235b-a22b-nvfp4-h100-tp2"], release)
    assert (got.refusal is not None) is refused
    if refused:
        assert got.refusal is not None
        assert "needs compute capability 100, the GPU has 90" in got.refusal
        assert "_get_quantization_config" in got.refusal and "0.5.13" in got.refusal


def test_nvfp4_on_blackwell_loads_in_every_release() -> None:
    """B200 is 10 x 10 + 0 = 100: at the bound of the oldest releases, so it loads."""
    for release in ("0.5.1", "0.5.12", "0.5.23"):
        assert planned(CASES["qwen3-235b-a22b-nvfp4-b200-tp2"], release).refusal is None


def test_modelopt_fp8_needs_ada_and_fp8_needs_ampere() -> None:
    """``ModelOptFp8Config.get_min_capability`` is 89 and ``Fp8Config.get_min_capability`` 80
    (``layers/quantization/modelopt_quant.py``, ``fp8.py``): a ModelOpt FP8 checkpoint does not load on
    an A100 (8 x 10 + 0 = 80), ``--quantization fp8`` does."""
    assert MIN_CAPABILITY["modelopt_fp8"] == 89 and MIN_CAPABILITY["fp8"] == 80
    config = load_preset_config("llama-3.1-8b")
    req = DeploymentRequest("m", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("A100-80GB"), weight_quantization="fp8")
    check_weight_load(req, ModelReading(config))  # no refusal
    with pytest.raises(UnsupportedConfigurationError, match=r"modelopt_fp8 weights on .*capability 89, the GPU has 80"):
        check_weight_load(req.replace(weight_quantization="modelopt_fp8"), ModelReading(config))


def test_glm4_moe_router_is_float32_from_0_5_19() -> None:
    """``Glm4MoeGate.weight`` (``sglang/srt/models/glm4_moe.py``) is built in the model dtype up to
    0.5.18 (0.5.12 to 0.5.18 cast a float32 copy at the first forward, after the pool is sized) and in
    float32 from 0.5.19: GLM-4.5's 160 experts x 5120 x (4 - 2) B in each of its 92 - 3 = 89 MoE layers
    = 145,817,600 B more on every rank (the recordings' ``router`` group: 145,874,560 B up to 0.5.18,
    291,692,160 B from 0.5.19)."""
    config = load_preset_config("glm-4.5")

    def router_bytes(release: str) -> float:
        estimate = estimate_weights(config, release=parse_release(release))
        return sum(
            g.count * estimate.price(layer, pos)
            for layer in range(estimate.num_layers)
            for pos, g in enumerate(estimate.groups_of(layer))
            if g.name == "router"
        )

    assert router_bytes("0.5.19") - router_bytes("0.5.18") == 160 * 5120 * (4 - 2) * 89
    assert router_bytes("0.5.18") == router_bytes("0.5.1") and router_bytes("0.5.23") == router_bytes("0.5.19")
