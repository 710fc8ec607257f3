"""The torch-free planner held to the weights SGLang 0.5.23 itself allocates (no SGLang needed).

``golden/sglang-0.5.23-weights/`` holds, per catalog case (``cases/weights/``), what SGLang's own
model class allocates on each recorded rank when built on ``meta`` for the GPU planned
(``tools/record_weights.py``; docs/weights.md). The planner must refuse exactly the cases SGLang
refuses (0 false, 0 missed: :data:`REFUSAL_DIFFERENCES` lists, with the reason, the one the
planner cannot yet refuse) and plan every other one to the recorded bytes of the fullest rank:
exactly, or within the bound :data:`WEIGHT_DIFFERENCES` states with its reason.
"""

from __future__ import annotations

import json
import statistics

import pytest

from kvstrategies.sglang.weight_catalog import (
    CATALOG,
    Comparison,
    WeightCase,
    catalog,
    compare,
    recorded_weight_bytes,
    recording_dir,
)

VERSION = "0.5.23"
CASES = catalog()
BY_NAME = {case.name: case for case in CASES}

#: case -> (bound on |planned / recorded - 1|, why the planner differs). Every other planned case
#: is exact to the byte.
WEIGHT_DIFFERENCES: dict[str, tuple[float, str]] = {
    # small, bounded: scales and buffers the estimate prices by the parameter, not by the tensor
    "deepseek-r1-b200-tp8": (1e-6, "7,808 B: the e_score_correction_bias and router scale rounding of 58 MoE layers"),
    "deepseek-v3-h200-tp8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-ep8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "deepseek-v3-h200-tp8-dp8-ep8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "kimi-k2-h200-tp8": (1e-6, "7,808 B: as deepseek-r1-b200-tp8"),
    "llama-3.1-70b-fp8-modelopt-b200-tp1": (1e-6, "5,120 B: ModelOpt's per-tensor fp32 input/weight scales"),
    "llama-3.1-70b-fp8-modelopt-h100-tp2": (1e-6, "5,120 B: ModelOpt's per-tensor fp32 input/weight scales"),
    "llama-3.1-8b-online-fp8-h100-tp1": (1e-6, "768 B: the per-tensor fp32 scales online FP8 makes"),
    "llama-3.1-8b-ct-w4a16-h100-tp1": (1e-6, "2,048 B: compressed-tensors' weight_shape int64 tensors"),
    "minimax-m2.5-h200-tp4": (1e-6, "496 B: the fp32 router scale rounding"),
    "minimax-m2.7-h100-tp4": (1e-6, "496 B: as minimax-m2.5-h200-tp4"),
    "nemotron-h-8b-h100-tp1": (1e-6, "6,144 B: Mamba2 per-group norm rounding"),
    "qwen3-next-80b-a3b-h100-tp4": (1e-6, "7,488 B: GDN A_log / dt_bias per-rank rounding"),
    "deepseek-v3.1-nvfp4-b200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales of every linear and expert"),
    "kimi-k2.5-nvfp4-h200-tp8": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "minimax-m2.5-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-b200-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "qwen3-235b-a22b-nvfp4-h100-tp2": (1e-4, "NVFP4 per-tensor fp32 global scales"),
    "deepseek-v3.1-nvfp4-h200-tp8": (5e-4, "NVFP4 global scales; the swizzled copies' padding of the MTP-less layers"),
    "deepseek-v3.2-h200-tp8": (5e-4, "the DSA indexer's fp32 weights_proj and its norm, priced as the model dtype"),
    "glm-5-fp8-h200-tp8": (1e-3, "the DSA indexer's fp32 weights_proj and its norm, priced as the model dtype"),
    "qwen3.5-27b-h100-tp1": (5e-4, "the tower's norms, biases and position table (left out of vision_tower_params)"),
    "qwen3.5-35b-a3b-h100-tp2": (5e-4, "as qwen3.5-27b-h100-tp1"),
    "gemma-3-27b-h100-tp1": (5e-4, "the SigLIP tower's biases, norms and position table (left out of the estimate)"),
    "gemma-3-27b-h100-tp4": (1e-3, "as gemma-3-27b-h100-tp1, and the tower's replicated MLP biases"),
    "llama-3.1-8b-ct-fp8-h100-tp1": (1e-3, "compressed-tensors per-channel FP8: one fp32 scale per output channel"),
    "qwen2.5-7b-gptq-h100-tp1": (1e-3, "GPTQ's g_idx int32 vectors and the qzeros packing"),
    "mimo-v2-flash-h200-tp4": (2e-3, "98.6 MB: the block-FP8 scales of 192-wide partitions (ceil of 192 / 128 blocks)"),
    "mimo-v2-flash-h200-tp8": (3e-3, "98.6 MB: as mimo-v2-flash-h200-tp4"),
    # larger: what the estimate does not model yet
    "qwen3-vl-8b-h100-tp1": (0.02, "the vision tower is approximated (vision_tower_params: ViT blocks and merger, "
                             "without deepstack mergers, norms and the position table)"),
    "qwen3-vl-8b-h100-tp2": (0.02, "as qwen3-vl-8b-h100-tp1"),
    "qwen2.5-vl-7b-h100-tp1": (0.02, "as qwen3-vl-8b-h100-tp1 (window-attention ViT)"),
    "deepseek-v4-flash-h200-tp4": (0.02, "DeepSeek-V4 is estimated approximately (weights.py, _dsv4_attention)"),
    "nemotron-3-nano-nvfp4-h100-tp1": (0.04, "NVFP4 Mamba2 projections and their exclusion list priced per kind"),
    "qwen3.5-397b-a17b-nvfp4-h100-tp4": (0.04, "NVFP4 GDN projections and the MTP-less exclusion list priced per kind"),
    "gpt-oss-120b-h100-tp4": (0.07, "MXFP4 experts: Mxfp4MoEMethod.create_weights pads each rank's 720 columns to "
                              "768 (triton_kernels alignment 64); the planner does not pad"),
    "gpt-oss-20b-b200-tp1": (0.07, "MXFP4 experts on SM100 (flashinfer_mxfp4): hidden and columns padded to 128 "
                             "(Mxfp4MoEMethod.create_weights); the planner does not pad"),
    "qwen3-30b-a3b-online-fp8-h100-tp1": (0.49, "recorded before Fp8MoEMethod.process_weights_after_loading, "
                                          "which quantizes the bf16 experts to fp8 with CUDA kernels (not run on "
                                          "meta); the planner prices them after it, as fp8"),
}

#: case -> why the planner's refusal differs from SGLang's
REFUSAL_DIFFERENCES: dict[str, str] = {
    "falcon-7b-h100-tp1": "SGLang 0.5.23 has no native Falcon and refuses transformers 5.19's FalconForCausalLM for "
    "its Transformers backend (model_loader/utils.py, resolve_transformers_arch); the architecture table still "
    "lists it as served through that backend",
}


@pytest.fixture(scope="module")
def comparisons() -> dict[str, Comparison]:
    return {case.name: compare(case, VERSION) for case in CASES}


def test_the_catalog_is_recorded() -> None:
    recorded = {p.stem for p in recording_dir(VERSION).glob("*.json")}
    assert recorded == set(BY_NAME), "record the catalog: tools/record_weights.py (docs/weights.md)"
    assert len(CASES) >= 60


def test_every_listed_difference_names_a_catalog_case() -> None:
    assert set(WEIGHT_DIFFERENCES) <= set(BY_NAME)
    assert set(REFUSAL_DIFFERENCES) <= set(BY_NAME)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_refusals_equal_the_recording(name: str, comparisons: dict[str, Comparison]) -> None:
    got = comparisons[name]
    if name in REFUSAL_DIFFERENCES:
        assert not got.refusals_agree, f"{name} now agrees with SGLang: drop it from REFUSAL_DIFFERENCES"
        return
    assert got.refusals_agree, (
        f"{name}: SGLang {'refuses' if got.recorded_refusal else 'builds'} it "
        f"({got.recorded_refusal}); the planner {'refuses' if got.planned.refusal else 'plans'} it "
        f"({got.planned.refusal})"
    )


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_weights_equal_the_recording(name: str, comparisons: dict[str, Comparison]) -> None:
    got = comparisons[name]
    if got.error is None:
        return  # refused (the refusal test compares it)
    bound, why = WEIGHT_DIFFERENCES.get(name, (0.0, ""))
    assert got.planned.weight_bytes is not None and got.recorded_bytes is not None
    if not why:
        assert got.planned.weight_bytes == got.recorded_bytes, (
            f"{name}: planned {got.planned.weight_bytes:,} B, SGLang allocates {got.recorded_bytes:,} B per rank"
        )
        return
    assert got.planned.weight_bytes != got.recorded_bytes, f"{name} is now exact: drop it from WEIGHT_DIFFERENCES"
    assert abs(got.error) <= bound, f"{name}: {got.error:+.4%} beyond the stated {bound:.2%} ({why})"


def test_the_error_over_the_catalog(comparisons: dict[str, Comparison]) -> None:
    """The summary docs/weights.md quotes: most cases exact, the median error zero."""
    errors = [abs(c.error) for c in comparisons.values() if c.error is not None]
    exact = sum(1 for c in comparisons.values() if c.error is not None and c.error == 0)
    assert len(errors) >= 55
    assert exact >= 25
    assert statistics.median(errors) < 1e-5


def test_a_recording_is_what_the_tool_writes() -> None:
    """One recording read back: its case equals the catalog file, every rank has groups or a refusal."""
    case = BY_NAME["mimo-v2-flash-h200-tp8"]
    document = json.loads((recording_dir(VERSION) / f"{case.name}.json").read_text(encoding="utf-8"))
    assert document["sglang"] == VERSION
    assert document["case"] == json.loads((CATALOG / f"{case.name}.json").read_text(encoding="utf-8"))
    (rank,) = document["ranks"]
    assert recorded_weight_bytes(rank) == rank["total"] - rank["groups"].get("other_buffers", 0)


def test_a_case_file_with_an_unknown_field_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.json"
    path.write_text('{"model": "qwen3-8b", "gpu": "H100", "tensor_parallel": 2}', encoding="utf-8")
    with pytest.raises(Exception, match="tensor_parallel"):
        WeightCase.read(path)
