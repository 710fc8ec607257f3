"""vLLM's ``--enable-expert-parallel`` (EP = TP at DP 1), each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/model_executor/layers/fused_moe/layer.py FusedMoE.__init__``
(``determine_expert_map``: each rank holds ``ceil`` or ``floor`` of ``E / ep`` whole experts and an int32 map of
the ``E`` global experts), ``vllm/model_executor/layers/quantization/utils/fp8_utils.py
validate_fp8_block_shape_moe`` (the experts' split is checked over ``moe_tp_size``, 1 under EP). The recordings
are vLLM's own models built on meta (``golden/vllm-<v>-weights/*-ep8.json``, ``tools/record_weights.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.checkpoints import shipped_checkpoints
from kvstrategies.core.dtypes import DType
from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.presets import load_preset_config
from kvstrategies.vllm.planner.load_refusals import check_weight_load
from kvstrategies.vllm.planner.weight_catalog import recorded
from kvstrategies.vllm.planner.weights import vllm_weights

BF16 = DType.BFLOAT16
GOLDEN = Path(__file__).parents[2] / "golden"


def _total(release: str, name: str) -> int:
    document = json.loads((GOLDEN / f"vllm-{release}-weights" / f"{name}.json").read_text(encoding="utf-8"))
    return max(int(rank["total"]) for rank in document["ranks"])


@pytest.mark.parametrize(("preset", "maps"), [
    ("deepseek-v3", 58 * 256 * 4),  # 58 MoE layers (3 dense first) x 256 experts x int32 = 59,392 B
    ("qwen3-235b-a22b", 94 * 128 * 4),  # 94 MoE layers x 128 experts = 48,128 B
])  # fmt: skip
def test_even_experts_cost_only_the_expert_maps(preset: str, maps: int) -> None:
    config = load_preset_config(preset)
    tp = vllm_weights(config, tp=8, pp=1, dtype=BF16).fullest
    ep = vllm_weights(config, tp=8, pp=1, dtype=BF16, expert_parallel=True).fullest
    assert ep - tp == maps
    name = f"{preset}-h200-tp8"
    for release in ("0.33.0", "0.34.0"):  # vLLM's own models: the same difference between its EP and TP builds
        assert _total(release, f"{name}-ep8") - _total(release, name) == maps


def test_uneven_experts_put_one_more_whole_expert_on_the_first_ranks() -> None:
    # Qwen3-30B-A3B with 6 experts at EP 4: a rank holds ceil(6 / 4) = 2 whole experts where the TP split holds
    # 6 / 4 = 1.5 experts' bytes: half an expert more, 3 x 2,048 x 768 = 4,718,592 parameters x 2 B / 2 a layer,
    # over 48 MoE layers, and 48 maps of 6 int32
    config = {**load_preset_config("qwen3-30b-a3b"), "num_experts": 6}
    tp = vllm_weights(config, tp=4, pp=1, dtype=BF16).fullest
    ep = vllm_weights(config, tp=4, pp=1, dtype=BF16, expert_parallel=True).fullest
    assert ep - tp == 48 * (3 * 2_048 * 768 * 2 // 2) + 48 * 6 * 4 == 226_493_568


def test_whole_experts_load_where_the_tp_split_of_block_fp8_experts_is_refused() -> None:
    # Qwen3-30B-A3B-FP8 at TP 16: 768 / 16 = 48 columns of [128, 128] blocks, refined to gcd 16 < 32: refused;
    # under EP every rank holds whole experts (moe_tp_size 1) and vLLM 0.34.0 builds it: 2,001,788,032 B a rank
    checkpoint = shipped_checkpoints()["Qwen/Qwen3-30B-A3B-FP8"]
    config = json.loads(Path(checkpoint.folder, "config.json").read_text(encoding="utf-8"))
    with pytest.raises(UnsupportedConfigurationError, match="or --enable-expert-parallel"):
        check_weight_load(config, 16, "0.34.0")
    check_weight_load(config, 16, "0.34.0", expert_parallel=True)
    weights = vllm_weights(config, tp=16, pp=1, dtype=BF16, checkpoint=str(checkpoint.folder), expert_parallel=True)
    assert weights.per_stage == (2_001_788_032,)
    assert "experts over EP 16 (8 of 128 whole experts a rank" in weights.source


def test_a_recorded_ep_case_is_vllm_s_build() -> None:
    from kvstrategies.sglang.weight_catalog import catalog

    case = next(c for c in catalog() if c.name == "qwen3-235b-a22b-fp8-h200-tp8-ep8")
    assert recorded(case, "0.34.0")["case"]["ep"] == 8


def test_expert_parallel_before_its_recordings_is_refused() -> None:
    from kvstrategies.core.releases import VLLM, parse_release
    from kvstrategies.vllm.planner.request import VLLMPlanRequest

    config = load_preset_config("qwen3-30b-a3b")
    with pytest.raises(KVCacheConfigError, match="--enable-expert-parallel is planned for vLLM 0.33.0 and later"):
        VLLMPlanRequest(model="qwen3-30b-a3b", source={}, config=config, gpu="H100", enable_expert_parallel=True,
                        release=parse_release("0.32.0", VLLM))  # fmt: skip


def test_a_pasted_command_with_expert_parallelism_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    code = main(["plan", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B-FP8", "--tensor-parallel-size",
                 "16", "--enable-expert-parallel"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "TP 16 x PP 1, experts over EP 16" in out
