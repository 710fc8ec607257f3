"""Shipped checkpoints (kvstrategies/checkpoints): common HF ids plan offline, each as the exact
checkpoint it names, in its own quantization; a near-miss in another quantization is refused."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kvstrategies.checkpoints import ROOT, find_shipped, shipped_checkpoints
from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.hf_quant import modelopt_method, with_hf_quant_config
from kvstrategies.planner.known_models import base_name, near_miss_hint, quant_tags, tuned_base
from kvstrategies.planner.model_lookup import resolve_for_planning
from kvstrategies.planner.model_source import resolve_model

#: one layout each checkpoint's weights fit (the GPU, TP and, where one node is not enough, PP; the answers
#: are the planner's)
LAYOUTS: list[tuple[str, str, int] | tuple[str, str, int, int]] = [
    ("deepseek-ai/DeepSeek-R1", "H200", 8),
    ("google/gemma-4-26B-A4B", "H100", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "H200", 8),
    ("MiniMaxAI/MiniMax-M2.7", "H100", 4),
    ("mistralai/Mixtral-8x22B-v0.1", "H100", 8),
    ("nvidia/DeepSeek-V3.1-NVFP4", "H100", 8),
    ("nvidia/Gemma-4-31B-IT-NVFP4", "H100", 1),
    ("nvidia/Kimi-K2.5-NVFP4", "H200", 8),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "H100", 2),
    ("nvidia/MiniMax-M2.5-NVFP4", "H100", 4),  # TP 2 no longer fits: the swizzled scale copy
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "H100", 2),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "H100", 1),
    ("nvidia/Qwen3-235B-A22B-NVFP4", "H100", 4),  # as above (ModelOptNvFp4FusedMoEMethod)
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", "H200", 4),  # as above
    ("Qwen/Qwen3-0.6B", "H100", 1),
    ("Qwen/Qwen3-1.7B", "H100", 1),
    ("Qwen/Qwen3-235B-A22B-FP8", "H100", 4),
    ("Qwen/Qwen3-30B-A3B-FP8", "H100", 1),
    ("Qwen/Qwen3-32B", "H100", 1),
    ("Qwen/Qwen3-32B-FP8", "H100", 1),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "H200", 8),
    ("Qwen/Qwen3.5-122B-A10B", "H100", 4),
    ("Qwen/Qwen3.5-27B", "H100", 1),
    ("Qwen/Qwen3.5-397B-A17B", "H200", 8),
    ("RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8", "H200", 8),
    ("sgl-project/DeepSeek-V4-Flash-FP8", "H100", 8),
    ("zai-org/GLM-5-FP8", "H200", 8),
    ("moonshotai/Kimi-K2.5", "H200", 8),
    ("moonshotai/Kimi-K3", "H200", 8, 4),
    ("nvidia/DeepSeek-V3.2-NVFP4", "H100", 8),
    ("nvidia/DeepSeek-V4-Flash-NVFP4", "H100", 4),
    ("nvidia/DeepSeek-V4-Pro-NVFP4", "H200", 8),
    ("nvidia/Gemma-4-26B-A4B-NVFP4", "H100", 1),
    ("nvidia/GLM-5-NVFP4", "H100", 8),
    ("nvidia/GLM-5.1-NVFP4", "H100", 8),
    ("nvidia/GLM-5.2-NVFP4", "H200", 8),
    ("nvidia/Kimi-K2.6-NVFP4", "H200", 8),
    ("nvidia/Kimi-K2.7-Code-NVFP4", "H200", 8),
    ("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "H100", 4),
    ("nvidia/MiniMax-M2.7-NVFP4", "H100", 4),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "H100", 8),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "H100", 8),
    ("nvidia/Qwen3.5-122B-A10B-NVFP4", "H100", 2),
    ("nvidia/Qwen3.6-27B-NVFP4", "B200", 1),
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", "H100", 1),
    ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "H100", 1),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", "H100", 8),
    ("Qwen/Qwen3-VL-2B-Instruct", "H100", 1),
    ("Qwen/Qwen3-VL-30B-A3B-Instruct", "H100", 1),
    ("Qwen/Qwen3-VL-32B-Instruct", "H100", 2),
    ("Qwen/Qwen3-VL-32B-Thinking", "H100", 2),
    ("Qwen/Qwen3-VL-4B-Instruct", "H100", 1),
    ("Qwen/Qwen3-VL-8B-Instruct", "H100", 1),
    ("sgl-project/DeepSeek-V4-Pro-FP8", "H200", 8, 2),
    ("XiaomiMiMo/MiMo-7B-Base", "H100", 1),
    ("zai-org/GLM-5.1", "H200", 8, 2),
    ("zai-org/GLM-5.1-FP8", "H200", 8),
    ("zai-org/GLM-5.2", "H200", 8, 2),
    ("zai-org/GLM-5.2-FP8", "H200", 8),
    ("meta-llama/Llama-3.2-3B", "H100", 1),
    ("Qwen/Qwen2.5-14B", "H100", 1),
    ("Qwen/Qwen2.5-32B", "H100", 1),
    ("Qwen/Qwen2.5-3B", "H100", 1),
    ("Qwen/Qwen3-14B", "H100", 1),
    ("Qwen/Qwen3-4B", "H100", 1),
    ("google/gemma-2-2b", "H100", 1),
    ("google/gemma-2-2b-it", "H100", 1),
    ("google/gemma-3-1b-it", "H100", 1),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "H100", 8),
    ("meta-llama/Llama-3.2-11B-Vision-Instruct", "H100", 1),
    ("meta-llama/Llama-3.2-1B-Instruct", "H100", 1),
    ("meta-llama/Llama-3.2-3B-Instruct", "H100", 1),
    ("meta-llama/Llama-3.2-90B-Vision-Instruct", "H100", 4),
    ("microsoft/Phi-3-mini-128k-instruct", "H100", 1),
    ("microsoft/Phi-3.5-MoE-instruct", "H100", 2),
    ("Qwen/Qwen2-7B", "H100", 1),
    ("Qwen/Qwen2.5-0.5B", "H100", 1),
    ("Qwen/Qwen2.5-1.5B", "H100", 1),
    ("Qwen/Qwen2.5-72B", "H100", 4),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "H100", 1),
    ("Qwen/Qwen3-8B-FP8", "H100", 1),
    ("google/gemma-2-9b", "H100", 1),
    ("google/gemma-7b", "H100", 1),
    ("HuggingFaceTB/SmolLM-1.7B", "H100", 1),
    ("meta-llama/Llama-3.1-70B-Instruct", "H100", 4),
    ("meta-llama/Meta-Llama-3-70B", "H100", 4),
    ("microsoft/Phi-3-small-8k-instruct", "H100", 1),
    ("Qwen/Qwen2-VL-2B-Instruct", "H100", 1),
    ("Qwen/Qwen2-VL-7B-Instruct", "H100", 1),
    ("THUDM/chatglm3-6b", "H100", 1),
    ("THUDM/glm-4-9b", "H100", 1),
    ("allenai/OLMo-2-1124-7B-Instruct", "H100", 1),
    ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "H100", 1),
    ("ibm-granite/granite-3.3-8b-instruct", "H100", 1),
    ("LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct", "H100", 1),
    ("llava-hf/llava-1.5-7b-hf", "H100", 1),
    ("liuhaotian/llava-v1.5-7b", "H100", 1),
    ("microsoft/Phi-4-mini-instruct", "H100", 1),
    ("mistralai/Mistral-7B-Instruct-v0.3", "H100", 1),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "H200", 8, 2),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", "H200", 8),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "H100", 8),
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "H100", 1),
    ("openbmb/MiniCPM3-4B", "H100", 1),
    ("Qwen/Qwen2.5-7B-Instruct", "H100", 1),
    ("tiiuae/Falcon3-7B-Instruct", "H100", 1),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "H100", 1),
    ("deepseek-ai/DeepSeek-V3.1", "H200", 8),
    ("meta-llama/Llama-2-13b-hf", "H100", 1),
    ("meta-llama/Llama-2-70b-hf", "H100", 4),
    ("meta-llama/Llama-2-7b-hf", "H100", 1),
    ("MiniMaxAI/MiniMax-M2.1", "H100", 4),
    ("nvidia/DeepSeek-V3-0324-NVFP4", "H100", 8),
    ("Qwen/Qwen3-0.6B-FP8", "H100", 1),
    ("Qwen/Qwen3-0.6B-GPTQ-Int8", "H100", 1),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "H200", 8),
    ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "H100", 1),
    ("Qwen/Qwen3-4B-AWQ", "H100", 1),
    ("Qwen/Qwen3-Coder-Next", "H100", 4),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "H100", 4),
    ("zai-org/GLM-4.7", "H200", 8),
    ("zai-org/GLM-4.7-FP8", "H100", 8),
    ("zai-org/GLM-4.7-Flash", "H100", 1),
]
#: checkpoints the newest SGLang refuses, planned for the newest release that loads them: fbgemm_fp8 left SGLang's
#: quantization registry in 0.5.16 (load_refusals.FBGEMM_FP8_REMOVED)
RELEASE_FOR = {"meta-llama/Llama-3.1-405B-Instruct-FP8": "0.5.15"}
AIC_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+$")


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty HF cache and HF_HUB_OFFLINE: nothing can come from the network or a cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _plan_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_every_shipped_checkpoint_has_a_layout_here() -> None:
    assert {row[0] for row in LAYOUTS} == set(shipped_checkpoints())
    assert len(LAYOUTS) >= 55


@pytest.mark.parametrize("row", LAYOUTS, ids=[row[0] for row in LAYOUTS])
def test_shipped_checkpoint_plans_offline_with_its_weight_origin(
    row: tuple, offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_id, gpu, tp, pp = (*row, 1)[:4]
    argv = ["plan", hf_id, "--gpu", gpu, "--tp", str(tp), "--pp-size", str(pp)]
    if hf_id in RELEASE_FOR:
        argv += ["--sglang-version", RELEASE_FOR[hf_id]]
    planner = _plan_json(argv, capsys)["planner"]
    ckpt = shipped_checkpoints()[hf_id]
    assert planner["tokens"] > 0 and planner["model_source"].startswith(hf_id)
    has_index = (ckpt.folder / "model.safetensors.index.json").is_file()
    assert planner["budget"]["weight_origin"] == ("checkpoint index total" if has_index else "config estimate")


def test_index_names_a_source_for_every_shipped_file() -> None:
    folders = {path.name for path in ROOT.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders == {ckpt.folder.name for ckpt in shipped_checkpoints().values()}
    for hf_id, ckpt in shipped_checkpoints().items():
        assert ckpt.folder.name == hf_id.replace("/", "--")
        shipped = {path.name for path in ckpt.folder.iterdir()}
        assert shipped == set(ckpt.files), hf_id
        for name, source in ckpt.sources:
            assert AIC_SOURCE.match(source) or "search index file" in source, (hf_id, name)
            json.loads((ckpt.folder / name).read_text(encoding="utf-8"))  # each is valid JSON


def test_an_id_resolves_only_to_the_checkpoint_it_names(offline: None) -> None:
    fp8 = resolve_model("Qwen/Qwen3-235B-A22B-FP8")
    assert fp8.kind == "shipped" and fp8.config is not None
    assert fp8.config["quantization_config"]["quant_method"] == "fp8"
    assert resolve_model("qwen/qwen3-235b-a22b-fp8").config == fp8.config  # any case
    assert resolve_model("Qwen3-235B-A22B-FP8").config == fp8.config  # the name part, when unique
    bf16 = resolve_model("Qwen/Qwen3-235B-A22B")
    assert bf16.kind == "preset" and bf16.preset == "qwen3-235b-a22b"
    instruct = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    assert instruct.kind == "shipped" and instruct.config is not None
    assert instruct.config["eos_token_id"] == [128001, 128008, 128009]  # the Instruct file, not the base preset
    assert find_shipped("Qwen/Qwen3-235B-A22B-FP") is None  # never a fuzzy match


@pytest.mark.parametrize(
    ("asked", "sibling"),
    [
        ("Qwen/Qwen3-8B-AWQ", "Qwen/Qwen3-8B"),
        ("Qwen/Qwen3-235B-A22B-FP4", "Qwen/Qwen3-235B-A22B-FP8"),
        ("meta-llama/Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B-Instruct"),
    ],
)
def test_a_near_miss_in_another_quantization_is_refused_with_both_names(
    asked: str, sibling: str, offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", asked, "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert repr(asked) in err and repr(sibling) in err
    assert "another quantization" in err and "not planned in its place" in err or "neither is planned" in err


def test_quantization_tags_and_base_names() -> None:
    assert quant_tags("nvidia/Qwen3-235B-A22B-NVFP4") == {"nvfp4"}
    assert quant_tags("Qwen/Qwen3-8B") == frozenset()
    assert base_name("Qwen/Qwen3-8B-AWQ") == base_name("qwen/qwen3-8b") == "qwen-qwen3-8b"
    assert "did you mean 'llama-3.1-8b'" in near_miss_hint("llama-3.1-8")
    assert near_miss_hint("zz/completely-unrelated-name-xyz") == ""


# --- hf_quant_config.json, as sglang.srt.configs.model_config.ModelConfig reads it --------------


@pytest.mark.parametrize(
    ("algo", "method"),
    [("FP8", "modelopt_fp8"), ("NVFP4", "modelopt_fp4"), ("W4A8_NVFP4_FP8", "modelopt_fp4"), ("MXFP8", "mxfp8"),
     ("MIXED_PRECISION", "w4afp8")],
)  # fmt: skip
def test_modelopt_method_follows_sglang(algo: str, method: str) -> None:
    """ModelConfig._parse_modelopt_quant_config: FP8 -> modelopt_fp8, *FP4* -> modelopt_fp4, ..."""
    assert modelopt_method(algo) == method


def test_mixed_precision_with_nvfp4_layers_is_modelopt_mixed() -> None:
    assert modelopt_method("MIXED_PRECISION", {"model.layers.0.mlp": {"quant_algo": "NVFP4"}}) == "modelopt_mixed"
    with pytest.raises(KVCacheConfigError, match="_parse_modelopt_quant_config"):
        modelopt_method("INT3")


def test_hf_quant_config_applies_only_without_a_quantization_config(tmp_path: Path) -> None:
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps(
            {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
        )
    )
    merged, note = with_hf_quant_config({"architectures": ["LlamaForCausalLM"]}, tmp_path)
    expected = {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}
    assert merged["quantization_config"] == {**expected, "quant_method": "modelopt_fp8"}
    assert note is not None and "hf_quant_config.json" in note
    given = {"quantization_config": {"quant_method": "fp8"}}
    assert with_hf_quant_config(given, tmp_path) == (given, None)
    assert with_hf_quant_config({"a": 1}, tmp_path / "absent") == ({"a": 1}, None)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {}}))
    with pytest.raises(KVCacheConfigError, match="quant_algo"):
        with_hf_quant_config({}, tmp_path)


def test_a_modelopt_folder_is_planned_in_its_quantization(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """nvidia/Llama-3.1-70B-Instruct-FP8 keeps FP8 weights and an FP8 KV cache in hf_quant_config.json:
    without reading it, the folder would be planned as the 16-bit model (twice the weights)."""
    shipped = shipped_checkpoints()["nvidia/Llama-3.1-70B-Instruct-FP8"]
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for name in ("config.json", "hf_quant_config.json"):
        shutil.copy(shipped.folder / name, folder / name)
    source = resolve_for_planning(str(folder))
    assert source.config is not None and source.config["quantization_config"]["quant_method"] == "modelopt_fp8"
    fp8 = _plan_json(["plan", str(folder), "--gpu", "H100", "--tp", "2"], capsys)
    (folder / "hf_quant_config.json").unlink()
    bf16 = _plan_json(["plan", str(folder), "--gpu", "H100", "--tp", "4"], capsys)
    # per-layer weights 1 B/param instead of 2: the 70.55B-parameter model at TP 2 holds about what
    # the 16-bit one holds at TP 4 (embedding and lm_head stay 16-bit: 2 x 1.05B params more)
    ratio = fp8["planner"]["budget"]["weight_bytes"] / bf16["planner"]["budget"]["weight_bytes"]
    assert 1.0 < ratio < 1.1
    kv = {item["setting"]: item for item in fp8["planner"]["defaults"]}["kv_cache_dtype"]
    assert kv["value"] == "torch.float8_e4m3fn" and "checkpoint's FP8 KV" in kv["reason"]  # auto -> FP8 KV
    assert {item["setting"]: item for item in bf16["planner"]["defaults"]}["kv_cache_dtype"][
        "value"
    ] == "torch.bfloat16"


FLOAT8 = {"type": "float", "num_bits": 8}


@pytest.mark.parametrize(
    ("quant", "fp8"),
    [
        ({"kv_cache_quant_algo": "FP8"}, True),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": FLOAT8}, True),
        ({"quant_algo": "FP8", "kv_cache_scheme": "FLOAT8"}, True),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {**FLOAT8, "num_bits": 4}}, False),
        ({"quant_method": "compressed-tensors",
          "kv_cache_scheme": {"type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True}}, True),
        ({"quant_method": "compressed-tensors",
          "kv_cache_scheme": {"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": True}}, False),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, False),
    ],
)  # fmt: skip
def test_checkpoint_kv_scheme_as_sglang_reads_it(quant: dict, fp8: bool) -> None:
    """modelopt_quant.ModelOptFp4Config.from_config: a flat kv_cache_scheme of 8-bit floats is an FP8
    KV cache; compressed-tensors only for a static symmetric per-tensor scheme (is_supported_scheme)."""
    from kvstrategies.models.parse import checkpoint_kv_is_fp8

    assert checkpoint_kv_is_fp8(quant) is fp8


def test_an_nvfp4_checkpoint_with_an_fp8_kv_scheme_plans_an_fp8_cache(capsys: pytest.CaptureFixture[str]) -> None:
    planner = _plan_json(["plan", "nvidia/Qwen3.5-397B-A17B-NVFP4", "--gpu", "B200", "--tp", "4"], capsys)["planner"]
    kv = {item["setting"]: item for item in planner["defaults"]}["kv_cache_dtype"]
    assert kv["value"] == "torch.float8_e4m3fn" and "checkpoint's FP8 KV" in kv["reason"]


# --- an -Instruct / -Chat / -it id planned from its shipped base (known_models.tuned_base) ---------


@pytest.mark.parametrize(
    ("asked", "base"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),
        ("mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-v0.1"),  # the tag inside the name
        ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V2-Lite"),
        ("Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-405B"),  # no organisation: the name part
        ("META-LLAMA/llama-3.1-8b-INSTRUCT", "meta-llama/Llama-3.1-8B"),  # any case
    ],
)
def test_a_tuned_id_names_its_shipped_base(asked: str, base: str) -> None:
    found = tuned_base(asked)
    assert found is not None and found.hf_id == base


@pytest.mark.parametrize(
    "asked",
    [
        "Qwen/Qwen3-30B-A3B-Instruct-2507",  # another part differs: another checkpoint, never its base
        "meta-llama/Llama-3.1-70B-Instruct-FP8",  # a quantization the base lacks
        "someorg/Llama-3.1-70B-Instruct",  # another organisation
        "meta-llama/Llama-3.1-70B",  # no tuning tag
        "instruct",
    ],
)
def test_a_name_that_is_not_a_tuning_of_a_shipped_base_has_none(asked: str) -> None:
    assert tuned_base(asked) is None


def test_an_instruct_id_offline_is_planned_from_its_base_and_served_as_asked(
    offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = "meta-llama/Llama-3.1-405B-Instruct"  # not shipped itself (its -FP8 sibling is)
    tuned = _plan_json(["plan", asked, "--gpu", "H200", "--tp", "8"], capsys)
    base = _plan_json(["plan", "meta-llama/Llama-3.1-405B", "--gpu", "H200", "--tp", "8"], capsys)
    source = tuned["planner"]["model_source"]
    assert source.startswith(f"{asked} planned from its base meta-llama/Llama-3.1-405B (HF_HUB_OFFLINE is set)")
    assert tuned["planner"]["tokens"] == base["planner"]["tokens"] > 0
    command = tuned["planner"]["sglang_command"]["text"] + " "
    assert f"--model-path {asked} " in command  # what the user serves, not the base
    no_org = _plan_json(["plan", "Llama-3.1-405B-Instruct", "--gpu", "H200", "--tp", "8"], capsys)
    assert f"--model-path {asked} " in no_org["planner"]["sglang_command"]["text"] + " "


def test_an_instruct_id_whose_download_fails_is_planned_from_its_base(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    from kvstrategies.planner import model_source

    def refuse(repo_id: str, filename: str) -> Path:
        raise KVCacheConfigError(f"{repo_id!r}: the hub cannot be reached")

    monkeypatch.setattr(model_source, "download_file", refuse)
    env = {"HF_HUB_CACHE": str(tmp_path)}
    source = resolve_model("mistralai/Mistral-7B-Instruct-v0.1", env)
    assert source.kind == "preset" and source.preset == "mistral-7b"
    assert "its config.json could not be downloaded" in source.description
    with pytest.raises(KVCacheConfigError, match="the hub cannot be reached"):
        resolve_model("mistralai/Mistral-7B-Instruct-v0.2", env)  # no shipped base: the download's error


def test_a_shipped_instruct_checkpoint_is_its_own_file_not_its_base(offline: None) -> None:
    source = resolve_model("Qwen/Qwen3-VL-8B-Instruct")
    assert source.kind == "shipped" and "planned from its base" not in source.description
