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


def _swizzled(name: str, release: str) -> bool:
    got = planned(CASES[name], release)
    assert got.refusal is None
    return "NVFP4 swizzled expert scales" in got.source


@pytest.mark.parametrize(
    ("name", "release", "copy"),
    [("deepseek-v3.1-nvfp4-b200-tp8", "0.5.4", True), ("deepseek-v3.1-nvfp4-b200-tp8", "0.5.5", False),
     ("qwen3-235b-a22b-nvfp4-b200-tp2", "0.5.5", True), ("qwen3-235b-a22b-nvfp4-b200-tp2", "0.5.6", False),
     ("minimax-m2.5-nvfp4-b200-tp2", "0.5.17", True), ("minimax-m2.5-nvfp4-b200-tp2", "0.5.18", False)],
)  # fmt: skip
def test_the_sm100_moe_override_arrives_per_model(name: str, release: str, copy: bool) -> None:
    """On SM100 an NVFP4 MoE keeps a second, swizzled copy of its expert block scales unless the
    FlashInfer TRT-LLM runner is picked (``ModelOptNvFp4FusedMoEMethod.create_weights``). SGLang's
    override picks it for a checkpoint-quantized DeepSeek-V3 from 0.5.5 (0.5.4's
    ``ServerArgs._handle_model_specific_adjustments`` reads only a given ``--quantization modelopt_fp4``),
    Qwen3-MoE from 0.5.6 and MiniMax-M2 (routed) from 0.5.18 (``arg_groups/overrides.py``); before, the
    runner stays ``auto`` (the recordings' ``launch.moe_runner_backend``)."""
    assert _swizzled(name, release) is copy


def test_deepseek_v3_up_to_0_5_4_takes_trtllm_only_from_the_flag() -> None:
    """0.5.4: ``self.quantization == "modelopt_fp4"`` (the flag, before the checkpoint is read) picks the
    TRT-LLM runner for DeepSeek-V3 on SM100."""
    from kvstrategies.planner.gpus import lookup_gpu
    from kvstrategies.planner.moe_layout import moe_runner_backend

    config = load_preset_config("deepseek-v3")
    b200, old = lookup_gpu("B200"), parse_release("0.5.4")
    assert moe_runner_backend(config, b200, "fp8", None, "none", old, None) == "auto"
    assert moe_runner_backend(config, b200, "modelopt_fp4", None, "none", old, "modelopt_fp4") == "flashinfer_trtllm"
    assert moe_runner_backend(config, b200, "fp8", None, "none", parse_release("0.5.5"), None) == "flashinfer_trtllm"


def test_qwen3_next_lm_head_is_float32_up_to_0_5_5() -> None:
    """``Qwen3NextForCausalLM.__init__`` casts its LM head to float32 (``self.lm_head = self.lm_head.float()``)
    up to 0.5.5: 151,936 x 2048 x (4 - 2) B / TP 4 = 155,582,464 B more on each rank (the recordings'
    ``lm_head``: 311,164,928 B up to 0.5.5, 155,582,464 B from 0.5.6)."""
    a = planned(CASES["qwen3-next-80b-a3b-h100-tp4"], "0.5.5").weight_bytes
    b = planned(CASES["qwen3-next-80b-a3b-h100-tp4"], "0.5.6").weight_bytes
    assert a is not None and b is not None and a - b == 151936 * 2048 * 2 // 4


def test_compressed_tensors_w4a16_needs_vllm_up_to_0_5_3() -> None:
    """Up to 0.5.3 ``CompressedTensorsConfig._get_scheme_from_parts`` builds weight-only INT layers from
    vLLM's ``CompressedTensorsWNA16`` and raises 'vllm is not installed' without it (vLLM is no SGLang
    dependency); 0.5.4 has its own scheme (the recordings: refused up to 0.5.3, 5,700,591,616 B from 0.5.4)."""
    old = planned(CASES["llama-3.1-8b-ct-w4a16-h100-tp1"], "0.5.3")
    assert old.refusal is not None and old.refusal.startswith("SGLang 0.5.3 builds") and "not installed" in old.refusal
    assert planned(CASES["llama-3.1-8b-ct-w4a16-h100-tp1"], "0.5.4").refusal is None
    assert planned(CASES["llama-3.1-8b-ct-fp8-h100-tp1"], "0.5.3").refusal is None  # W8A8 FP8: SGLang's own


def test_a_rotary_head_of_96_needs_vllm_on_cuda_up_to_0_5_6() -> None:
    """Up to 0.5.6 ``RotaryEmbedding.__init__`` (``layers/rotary_embedding.py``) imports
    ``vllm._custom_ops.rotary_embedding`` on CUDA when the head size is not 64 / 128 / 256 / 512: Phi-3-mini's
    3072 / 32 = 96 fails without vLLM (the 0.5.2 recording: ``No module named 'vllm._custom_ops'``); 0.5.7 takes
    sgl-kernel's. MLA (head size 0 here: the rotary part is 64) and 128-wide heads build."""
    phi = planned(CASES["phi-3-mini-h100-tp1"], "0.5.6")
    assert phi.refusal is not None and "head size 96" in phi.refusal and "vllm._custom_ops" in phi.refusal
    assert planned(CASES["phi-3-mini-h100-tp1"], "0.5.7").refusal is None
    assert planned(CASES["llama-3.1-8b-h100-tp1"], "0.5.1").refusal is None
    assert planned(CASES["deepseek-v2-lite-h100-tp1"], "0.5.1").refusal is None


def _cuda(major: int, minor: int) -> object:
    from kvstrategies.planner.gpus import Accelerator

    return Accelerator(f"sm{major}{minor}", 81559.0, "cuda", compute_capability=(major, minor))


#: each config class's ``get_min_capability`` in SGLang's ``layers/quantization/`` (``AWQConfig`` 75,
#: ``CompressedTensorsConfig`` 70, ``Fp8Config`` 80, ``GPTQConfig`` 60, ``ModelOptFp8Config`` 89, ``W4AFp8Config`` 90,
#: ``W8A8Fp8Config`` 89, ``W8A8Int8Config`` 75; the same in 0.5.1 and 0.5.23)
READ_CAPABILITIES = [("awq", 75), ("compressed_tensors", 70), ("fp8", 80), ("gptq", 60), ("modelopt_fp8", 89),
                     ("w4afp8", 90), ("w8a8_fp8", 89), ("w8a8_int8", 75)]  # fmt: skip


def test_the_capability_table_holds_the_methods_read() -> None:
    assert sorted(MIN_CAPABILITY.items()) == READ_CAPABILITIES


@pytest.mark.parametrize(("method", "needed"), READ_CAPABILITIES)
def test_each_method_loads_from_its_minimum_capability(method: str, needed: int) -> None:
    """``_get_quantization_config`` compares ``major x 10 + minor`` with the method's
    ``get_min_capability``: a GPU exactly at the minimum loads, one a step below is refused."""
    from dataclasses import replace

    quant_method = "compressed-tensors" if method == "compressed_tensors" else method
    qcfg: dict[str, str] = {"quant_method": quant_method}
    if method == "modelopt_fp8":
        qcfg = {"quant_method": "modelopt", "quant_algo": "FP8"}
    config = {**load_preset_config("llama-3.1-8b"), "quantization_config": qcfg}
    req = DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu("H100-80GB"))
    from kvstrategies.sglang.load_refusals import _check_min_capability

    major, minor = divmod(needed, 10)
    below = divmod(needed - 1, 10) if minor else (major - 1, 9)

    _check_min_capability(replace(req, gpu=_cuda(major, minor)), config)
    with pytest.raises(UnsupportedConfigurationError, match=f"capability {needed}, the GPU has {below[0]}{below[1]}"):
        _check_min_capability(replace(req, gpu=_cuda(*below)), config)


@pytest.mark.parametrize(("head", "refused"), [(64, False), (128, False), (256, False), (512, False), (80, True),
                                               (96, True), (192, True)])  # fmt: skip
def test_the_rotary_head_sizes_sglang_0_5_6_builds_itself(head: int, refused: bool) -> None:
    """``RotaryEmbedding.__init__`` up to 0.5.6: its own CUDA kernel for 64 / 128 / 256 / 512, vLLM's otherwise."""
    from kvstrategies.sglang.load_refusals import _check_rotary_needs_vllm

    config = {**load_preset_config("llama-3.1-8b"), "head_dim": head}
    req = DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu("H100-80GB"), release=parse_release("0.5.6"))
    if not refused:
        _check_rotary_needs_vllm(req, ModelReading(config))
        return
    with pytest.raises(UnsupportedConfigurationError, match=f"head size {head}"):
        _check_rotary_needs_vllm(req, ModelReading(config))
    _check_rotary_needs_vllm(req.replace(release=parse_release("0.5.7")), ModelReading(config))


@pytest.mark.parametrize(("release", "refused"), [("0.5.9", True), ("0.5.14", True), ("0.5.15", False)])
def test_modelopt_mixed_precision_loads_from_0_5_15(release: str, refused: bool) -> None:
    """0.5.9's ``ModelConfig._parse_modelopt_quant_config`` reads MIXED_PRECISION as FP8 and
    ``ModelOptFp8Config`` refuses it; 0.5.10 to 0.5.14's ``ModelOptMixedPrecisionConfig`` builds the layers its
    map does not name as 128 x 128 block FP8, and Qwen3.6's ``in_proj_ba`` (48 outputs) is not whole blocks
    (the recordings: 'Weight output_partition_size = 48 is not divisible by weight quantization block_n =
    128'); 0.5.15 builds it."""
    got = planned(CASES["qwen3.6-27b-nvfp4-b200-tp1"], release)
    assert (got.refusal is not None) is refused
    if refused:
        assert got.refusal is not None and "MIXED_PRECISION" in got.refusal and "0.5.15" in got.refusal


@pytest.mark.parametrize(("release", "refused"), [("0.5.1", False), ("0.5.15", False), ("0.5.16", True),
                                                  ("0.5.23", True)])  # fmt: skip
def test_fbgemm_fp8_is_an_unknown_method_from_0_5_16(release: str, refused: bool) -> None:
    """``QUANTIZATION_METHODS`` holds ``fbgemm_fp8`` (``FBGEMMFp8Config``) up to 0.5.15; from 0.5.16
    ``ModelConfig._verify_quantization`` raises "Unknown quantization method: fbgemm_fp8" (checked live on
    Meta's Llama-3.1-405B-Instruct-FP8 config: 0.5.15 sizes it, 0.5.16 refuses it)."""
    from kvstrategies.sglang.load_refusals import _check_fbgemm_fp8

    config = {**load_preset_config("llama-3.1-8b"), "quantization_config": {"quant_method": "fbgemm_fp8"}}
    req = DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu("H100-80GB"), release=parse_release(release))
    if not refused:
        _check_fbgemm_fp8(req, config)
        return
    with pytest.raises(UnsupportedConfigurationError, match="Unknown quantization method: fbgemm_fp8"):
        _check_fbgemm_fp8(req, config)
    _check_fbgemm_fp8(req, load_preset_config("llama-3.1-8b"))  # unquantized: nothing to refuse


GPTQ_INT4 = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}


@pytest.mark.parametrize(("release", "gpu", "qcfg", "quantization", "refused"), [
    ("0.5.19", "T4", GPTQ_INT4, None, False),  # plain gptq still in the CUDA registry
    ("0.5.20", "T4", GPTQ_INT4, None, True),  # capability 75 < 80: no Marlin type at all
    ("0.5.23", "A100-80GB", GPTQ_INT4, None, False),  # converted to gptq_marlin
    ("0.5.23", "A100-80GB", {**GPTQ_INT4, "sym": False}, None, True),  # (4, False) is no Marlin type
    ("0.5.23", "A100-80GB", {**GPTQ_INT4, "bits": 3}, None, True),
    ("0.5.23", "A100-80GB", {**GPTQ_INT4, "group_size": 256}, None, True),  # not -1 / 32 / 64 / 128
    ("0.5.23", "A100-80GB", {**GPTQ_INT4, "group_size": -1}, None, False),
    ("0.5.23", "A100-80GB", {k: v for k, v in GPTQ_INT4.items() if k != "desc_act"}, None, True),  # a field missing
    ("0.5.23", "A100-80GB", GPTQ_INT4, "gptq", True),  # --quantization gptq forces the removed method
    ("0.5.23", "A100-80GB", GPTQ_INT4, "gptq_marlin", False),
])  # fmt: skip
def test_gptq_loads_only_as_marlin_from_0_5_20(
    release: str, gpu: str, qcfg: dict[str, object], quantization: str | None, refused: bool
) -> None:
    """0.5.20 drops ``GPTQConfig`` from the CUDA ``QUANTIZATION_METHODS``: a GPTQ checkpoint loads when
    ``GPTQMarlinConfig.override_quantization_method`` converts it (``is_gptq_marlin_compatible``: every field given,
    (bits, sym) in {(4, True), (8, True)}, group size -1 / 32 / 64 / 128, capability >= 80), else
    ``ModelConfig._verify_quantization`` raises "Unknown quantization method: gptq"."""
    from kvstrategies.sglang.load_refusals import _check_gptq_needs_marlin

    config = {**load_preset_config("qwen3-8b"), "quantization_config": qcfg}
    req = DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu(gpu), release=parse_release(release),
                            weight_quantization=quantization)  # fmt: skip
    if not refused:
        _check_gptq_needs_marlin(req, config)
        return
    with pytest.raises(UnsupportedConfigurationError, match="Unknown quantization method: gptq"):
        _check_gptq_needs_marlin(req, config)
