"""The vLLM planner's weights held to what vLLM's own model classes allocate (no vLLM needed).

``golden/vllm-<v>-weights/`` holds, per weight case vLLM's planner takes (``cases/weights/`` less
attention DP and EP), what vLLM ``v``'s ``initialize_model`` builds on ``meta`` for TP rank 0 of each
pipeline stage (``tools/record_weights.py --engine vllm``; docs/weights.md). The planner must refuse
what vLLM refuses and plan every other case to the recorded bytes of the fullest stage: exactly, or
within the bound ``WEIGHT_DIFFERENCES`` states with its reason (:mod:`kvstrategies.vllm.planner.weight_catalog`).
The hand tests below pin each vLLM layout step with numbers worked out from the configs.
"""

from __future__ import annotations

import functools
import json

import pytest

from kvstrategies.core.dtypes import DType
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.weight_catalog import CATALOG, Comparison, PlannedWeights, WeightCase
from kvstrategies.vllm.planner.weight_catalog import (
    REFUSAL_DIFFERENCES,
    WEIGHT_DIFFERENCES,
    compare,
    recording_dir,
    verdict,
    vllm_catalog,
    vllm_scope,
    weight_difference,
    weight_releases,
)
from kvstrategies.vllm.planner.weights import (
    attention_layer_scale_bytes,
    attention_scale_bytes,
    tower_bytes,
    vllm_layout,
    vllm_weights,
)

RELEASES = weight_releases()
CASES = vllm_catalog()
BY_NAME = {case.name: case for case in CASES}
PAIRS = [(release, case.name) for release in RELEASES for case in sorted(vllm_catalog(release), key=lambda c: c.name)]
BF16 = DType.from_name("bfloat16")


@functools.cache
def _comparisons(release: str) -> dict[str, Comparison]:
    return {case.name: compare(case, release) for case in vllm_catalog(release)}


def test_the_newest_release_is_recorded() -> None:
    from kvstrategies.core.releases import NEWEST_VLLM

    assert NEWEST_VLLM.text in RELEASES
    assert len(CASES) >= 60


@pytest.mark.parametrize("release", RELEASES)
def test_each_recorded_release_holds_the_whole_catalog(release: str) -> None:
    paths = sorted(recording_dir(release).glob("*.json"))
    names = {case.name for case in vllm_catalog(release)}
    assert {p.stem for p in paths} == names, "record them: tools/record_weights.py --engine vllm"
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["vllm"] == release
        assert json.loads((CATALOG / path.name).read_text(encoding="utf-8")) == document["case"]


def test_the_cases_outside_the_vllm_planner_are_left_out() -> None:
    """EP narrower than TP is an SGLang layout the vLLM planner does not take: not recorded, not compared; EP = TP
    (--enable-expert-parallel) and attention DP (vLLM's --data-parallel-size) are, from vLLM 0.33.0."""
    dp = WeightCase("x", "deepseek-v3", "H200", tp=8, ep=8, attn_dp=8)
    ep = WeightCase("y", "deepseek-v3", "H200", tp=8, ep=8)
    narrow = WeightCase("w", "deepseek-v3", "H200", tp=8, ep=4)
    assert vllm_scope(dp) is None and "attention DP 8" in str(vllm_scope(dp, "0.32.0"))
    assert "EP 4" in str(vllm_scope(narrow))
    assert vllm_scope(ep) is None and "planned for vLLM 0.33.0 and later" in str(vllm_scope(ep, "0.32.0"))
    assert vllm_scope(WeightCase("z", "qwen3-8b", "H100", tp=2)) is None
    assert "deepseek-v3-h200-tp8-ep8" in BY_NAME and "qwen3-8b-h100-tp2" in BY_NAME
    assert "deepseek-v3-h200-tp8-ep8" not in {case.name for case in vllm_catalog("0.32.0")}


def test_every_listed_difference_names_a_vllm_case() -> None:
    from kvstrategies.vllm.planner.weight_catalog import RELEASE_WEIGHT_DIFFERENCES

    assert set(WEIGHT_DIFFERENCES) <= set(BY_NAME)
    assert {name for name, _, _ in RELEASE_WEIGHT_DIFFERENCES} <= set(BY_NAME)
    assert all(first in RELEASES and last in RELEASES for _, first, last in RELEASE_WEIGHT_DIFFERENCES)
    assert set(REFUSAL_DIFFERENCES) <= set(BY_NAME)


@pytest.mark.parametrize(("release", "name"), PAIRS, ids=[f"{r}-{n}" for r, n in PAIRS])
def test_weights_equal_the_recording(release: str, name: str) -> None:
    got = _comparisons(release)[name]
    if got.environment is not None:
        return  # not built on this host (a GPU image's kernel package): nothing to compare
    if name not in REFUSAL_DIFFERENCES:
        assert got.refusals_agree, (got.recorded_refusal, got.planned.refusal)
    if got.error is None:
        return
    bound, why = weight_difference(name, release)
    assert got.planned.weight_bytes is not None and got.recorded_bytes is not None
    if not why:
        assert got.planned.weight_bytes == got.recorded_bytes, (
            f"{name}: planned {got.planned.weight_bytes:,} B, vLLM {release} allocates {got.recorded_bytes:,} B"
        )
        return
    assert got.planned.weight_bytes != got.recorded_bytes, f"{name} is now exact under {release}: drop its difference"
    assert abs(got.error) <= bound, f"{name}: {got.error:+.4%} beyond the stated {bound:.2%} ({why})"


def test_most_cases_are_exact() -> None:
    """The summary docs/weights.md quotes for vLLM 0.34.0."""
    comparisons = _comparisons("0.34.0")
    exact = sum(1 for c in comparisons.values() if c.error == 0)
    within = sum(1 for c in comparisons.values() if c.error is not None and abs(c.error) < 1e-3)
    assert exact >= 20 and within >= 45


def test_a_case_the_host_cannot_build_is_skipped_not_compared() -> None:
    """vLLM 0.29.0 reads Qwen2.5-VL's image processor from the model folder, which holds config.json alone here
    (a real checkpoint ships it): the recording says so (``environment``, an ``OSError``), and the verdict passes it
    without a comparison."""
    document = json.loads((recording_dir("0.29.0") / "qwen2.5-vl-7b-h100-tp1.json").read_text(encoding="utf-8"))
    (rank,) = document["ranks"]
    assert rank["environment"]["type"] == "OSError" and "refusal" not in rank
    got = _comparisons("0.29.0")["qwen2.5-vl-7b-h100-tp1"]
    good, text = verdict(got)
    assert good and text.startswith("not built on this host")


def test_a_refusal_the_planner_misses_fails_the_verdict() -> None:
    case = BY_NAME["qwen3-8b-h100-tp1"]
    missed = Comparison(case, "0.34.0", None, "ValueError: no", PlannedWeights(1, None))
    assert verdict(missed) == (False, "refusal differs (vLLM refuses, the planner plans)")
    assert verdict(Comparison(case, "0.34.0", 10, None, PlannedWeights(11, None)))[0] is False
    assert verdict(Comparison(case, "0.34.0", 10, None, PlannedWeights(10, None))) == (True, "equal")


# ---- the vLLM layout steps, by hand ------------------------------------------------------------------------


def test_the_embedding_is_split_over_tp_where_sglang_keeps_it_whole() -> None:
    """Gemma-3-27B: vocabulary 262,208 x hidden 5,376 in bf16 = 2,819,260,416 B; vLLM's VocabParallelEmbedding
    holds a quarter at TP 4 (704,815,104 B: the recorded ``embedding`` group), SGLang's nn.Embedding all of it."""
    from kvstrategies.planner.weights import estimate_weights

    config = load_preset_config("gemma-3-27b")
    sglang = estimate_weights(config, dtype="bfloat16")
    vllm = vllm_layout(sglang)
    (embedding,) = vllm.embedding
    assert embedding.per_rank(4) * 2 == 704_815_104
    assert sglang.embedding[0].per_rank(4) * 2 == 2_819_260_416


def test_the_lm_head_lives_on_the_last_stage_only() -> None:
    """Llama-3.1-70B at TP 4 x PP 2: each stage 40 layers; the first holds the embedding, the last the norm
    and lm_head (128,256 x 8,192 x 2 B / 4 = 525,336,576 B each). Recorded: 17,672,962,688 B and
    17,672,979,072 B (16,384 B apart: the final norm)."""
    config = load_preset_config("llama-3.1-70b")
    stages = vllm_weights(config, tp=4, pp=2, dtype=BF16).per_stage
    assert stages == (17_672_962_688, 17_672_979_072)
    assert stages[1] - stages[0] == 8192 * 2


def test_every_attention_layer_holds_four_float32_scales() -> None:
    """``set_default_quant_scales``: ``_k_scale``, ``_v_scale``, ``_q_scale``, ``_prob_scale`` (4 x 4 B) per
    attention layer: 32 x 16 = 512 B on Llama-3.1-8B; Qwen3-Next's 12 full-attention layers of 48 hold them,
    its 36 Gated-DeltaNet layers none (12 x 16 = 192 B)."""
    from kvstrategies.planner.weights import estimate_weights

    llama = estimate_weights(load_preset_config("llama-3.1-8b"))
    next_ = estimate_weights(load_preset_config("qwen3-next-80b-a3b"))
    assert attention_scale_bytes(llama, 1, 0, 16) == 512
    assert attention_scale_bytes(next_, 1, 0, 16) == 192
    assert attention_scale_bytes(llama, 2, 1, 16) == 256  # PP 2: 16 layers a stage


def test_older_releases_hold_three_range_constants_per_attention_layer() -> None:
    """Up to 0.27.1 an attention layer also holds ``q_range``, ``k_range``, ``v_range`` (3 x 4 B): Llama-3.1-8B's
    32 layers hold 32 x 28 = 896 B of them and the scales under 0.25.1 (recorded: 512 B of scales and 3 x 128 B
    of ranges), 512 B under 0.28.0 on."""
    from kvstrategies.core.releases import parse_release
    from kvstrategies.planner.weights import estimate_weights

    llama = estimate_weights(load_preset_config("llama-3.1-8b"))
    old = attention_layer_scale_bytes({}, BF16, None, parse_release("0.25.1", "vllm"))
    new = attention_layer_scale_bytes({}, BF16, None, parse_release("0.28.0", "vllm"))
    assert (old, new) == (28, 16)
    assert attention_scale_bytes(llama, 1, 0, old) == 896
    document = json.loads((recording_dir("0.25.1") / "llama-3.1-8b-h100-tp1.json").read_text(encoding="utf-8"))
    buffers = document["ranks"][0]["buffers"]
    assert [buffers[f"{x}_range (float32)"] for x in "qkv"] == [128, 128, 128]


def test_an_fp8_checkpoint_adds_the_kv_cache_scale_parameters() -> None:
    """``Fp8KVCacheMethod`` gives a non-MLA attention layer ``q_scale``, ``k_scale``, ``v_scale``, ``prob_scale``
    in the model dtype (4 x 2 B); an MLA layer (DeepSeek) and an unquantized one get none."""
    fp8 = {"num_hidden_layers": 2, "quantization_config": {"quant_method": "fp8"}}
    assert attention_layer_scale_bytes(fp8, BF16, None) == 16 + 8
    assert attention_layer_scale_bytes({**fp8, "kv_lora_rank": 512}, BF16, None) == 16
    assert attention_layer_scale_bytes({"num_hidden_layers": 2}, BF16, None) == 16
    assert attention_layer_scale_bytes({"num_hidden_layers": 2}, BF16, "fp8") == 24  # --quantization fp8


def test_the_vision_tower_is_on_the_first_stage_only() -> None:
    """Qwen3-VL-8B: the tower's estimate split over TP on stage 0 (vLLM's ``_mark_tower_model``: encoders run
    on the first stage), nothing on stage 1."""
    from kvstrategies.planner.model_source import resolve_model

    source = resolve_model("Qwen/Qwen3-VL-8B-Instruct")
    assert source.config is not None
    config = source.config
    tower, note = tower_bytes(config, 2, 2.0)
    assert tower > 0 and "vision tower" in note
    planned = vllm_weights(config, tp=2, pp=2, dtype=BF16)
    one, two = planned.per_stage
    assert "vision tower" in planned.source and planned.source.startswith("estimated from the config")
    text_only = vllm_weights({k: v for k, v in config.items() if k != "vision_config"}, tp=2, pp=2, dtype=BF16)
    assert one - text_only.per_stage[0] == tower and two == text_only.per_stage[1]


def test_verify_weights_against_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    assert main(["verify", "--against", "vllm", "--weights"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(CASES) + 1
    assert out[-1] == f"all {len(CASES)} weight cases as vLLM 0.34.0 records them (golden/vllm-0.34.0-weights)"
    line = next(line for line in out if " llama-3.1-70b-h100-tp4-pp2 " in line)
    assert line.startswith("ok") and line.endswith("equal")


def test_verify_weights_refuses_the_other_engines_release(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    assert main(["verify", "--against", "vllm", "--weights", "--sglang-version", "0.5.23"]) != 0
    assert "--sglang-version goes with --against sglang" in capsys.readouterr().err
    assert main(["verify", "--against", "vllm", "--weights", "--vllm-version", "0.20.2"]) != 0
    assert "no weight recordings for vLLM 0.20.2 (recorded: 0.19.1, 0.22.1," in capsys.readouterr().err
