"""vLLM's refusals, at launch and at weight load, each against a hand computation and vLLM's recorded words.

Sources (vLLM 0.33.0): ``vllm/config/scheduler.py SchedulerConfig.verify_max_model_len``;
``vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape`` /
``validate_fp8_block_shape_moe``; ``vllm/model_executor/layers/fused_moe/oracle/fp8.py
refine_fp8_moe_block_shape``; ``vllm/model_executor/layers/linear.py
ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch``. The recordings
(``golden/vllm-0.33.0/vllm-refuse-*``, ``vllm-load-*``) are vLLM's own answers through the bridge,
which builds each model on ``meta`` (its weight checks run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import NEWEST_VLLM, VLLM_RELEASE_LINES
from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.vllm.bridge.verify import refusal_reason
from kvstrategies.vllm.planner.load_refusals import BlockFP8, block_fp8, expert_refusal, load_refusal

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "vllm-0.33.0"
BLOCK = BlockFP8(128, 128)


def _config(name: str) -> dict[str, Any]:
    path = ROOT / "kvstrategies" / "checkpoints" / f"Qwen--Qwen3-{name}" / "config.json"
    config: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return config


def _recorded_error(case: str) -> str:
    return str(json.loads((GOLDEN / f"{case}.json").read_text("utf-8"))["error"])


def _vllm(**fields: object) -> Any:
    case = parse_case({"preset": "llama-3.1-8b", "engine": "vllm", "available_bytes": 40 * GIB,
                       "context_length": 8192, **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


# ---- at launch: SchedulerConfig ------------------------------------------------------------------------------


def test_batch_budget_below_the_request_cap_is_refused() -> None:
    with pytest.raises(UnsupportedConfigurationError) as info:
        _vllm(max_running_requests=256, chunked_prefill_size=64)
    text = str(info.value)
    assert "max_num_batched_tokens (64) must be greater than or equal to max_num_seqs (256)" in text
    assert "vllm/config/scheduler.py SchedulerConfig.verify_max_model_len" in text
    assert "--max-num-batched-tokens 256 or more" in text
    # vLLM's own words, as the bridge recorded them, are in the project's refusal
    assert refusal_reason(_recorded_error("vllm-refuse-batch-below-seqs-llama-3.1-8b")) in " ".join(text.split())


def test_the_a100_batch_default_counts_as_the_budget() -> None:
    # EngineArgs.get_batch_defaults on an A100: 2048 tokens, so --max-num-seqs 4096 alone is refused
    with pytest.raises(KVCacheConfigError, match=r"max_num_batched_tokens \(2048\) must be .* max_num_seqs \(4096\)"):
        _vllm(max_running_requests=4096, gpu="A100-80GB")
    # on an H200 the default is 8192: accepted
    assert _vllm(max_running_requests=4096).launch.max_num_seqs == 4096


def test_an_equal_budget_is_accepted() -> None:
    launch = _vllm(max_running_requests=64, chunked_prefill_size=64).launch
    assert (launch.max_num_batched_tokens, launch.max_num_seqs) == (64, 64)


# ---- at weight load: block-FP8 splits -------------------------------------------------------------------------


def test_block_fp8_reads_the_checkpoint() -> None:
    assert block_fp8(_config("235B-A22B-FP8")) == BLOCK
    assert block_fp8(_config("235B-A22B-FP8"), "awq") is None  # another --quantization: not these blocks
    assert block_fp8({"hidden_size": 8}) is None


@pytest.mark.parametrize(
    ("intermediate", "hidden", "tp", "refused"),
    [
        (1536, 4096, 8, False),  # 192 per rank: gcd(128, 128, 192, 4096) = 64 >= 32 -> refined to 64 x 64
        (1536, 4096, 16, False),  # 96: gcd 32 -> refined to 32 x 32
        (1536, 4096, 32, True),  # 48: gcd 16 < 32 -> validate_fp8_block_shape_moe refuses
        (768, 2048, 8, False),  # 96: gcd 32
        (768, 2048, 16, True),  # 48
        (2048, 7168, 16, False),  # 128: whole blocks
    ],
)
def test_expert_split_refined_or_refused(intermediate: int, hidden: int, tp: int, refused: bool) -> None:
    words = expert_refusal(intermediate, hidden, tp, BLOCK)
    assert (words is not None) == refused
    if refused:
        per_rank = intermediate // tp
        assert words == (f"The output_size of gate's and up's weight = {per_rank} is not divisible by weight "
                         "quantization block_n = 128.")  # fmt: skip


@pytest.mark.parametrize(
    ("model", "tp", "case"),
    [
        ("30B-A3B-FP8", 16, "vllm-load-qwen3-30b-a3b-fp8-tp16"),
        ("32B-FP8", 16, "vllm-load-qwen3-32b-fp8-tp16"),
        ("235B-A22B-FP8", 32, "vllm-load-qwen3-235b-a22b-fp8-tp32"),
    ],
)
def test_weight_load_refusals_are_vllms_words(model: str, tp: int, case: str) -> None:
    refusal = load_refusal(_config(model), tp)
    assert refusal is not None
    check, words = refusal
    for release in VLLM_RELEASE_LINES:  # each release through the bridge said its own words (0.13.0: gate_up_proj)
        own = load_refusal(_config(model), tp, version=release)
        assert own is not None
        error = json.loads((ROOT / "golden" / f"vllm-{release}" / f"{case}.json").read_text("utf-8"))["error"]
        assert own[1] in error, release
    assert check.startswith("vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape")


def test_0_13_refuses_qwen3_32b_at_its_merged_gate_up() -> None:
    # vLLM 0.13.0 (golden/vllm-0.13.0/vllm-load-qwen3-32b-fp8-tp16.json): gate_up_proj's outputs 25,600 / 16 = 1,600 a
    # rank, 12.5 blocks of 128, are checked (no mismatch allowance before 0.14.1), and it is built before down_proj
    refusal = load_refusal(_config("32B-FP8"), 16, version="0.13.0")
    assert refusal is not None and "(mlp.gate_up_proj)" in refusal[0]
    assert refusal[1] == "Weight output_partition_size = 1600 is not divisible by weight quantization block_n = 128."
    assert load_refusal(_config("32B-FP8"), 8, version="0.13.0") is None  # 3,200 = 25 blocks


def test_dense_down_proj_input_is_the_first_refusal_of_qwen3_32b() -> None:
    # gate_up [1600, 1600] is merged: _maybe_allow_fp8_block_shape_mismatch lets it through; down_proj's input
    # 25,600 / 16 = 1,600 = 12.5 blocks of 128 is refused
    refusal = load_refusal(_config("32B-FP8"), 16)
    assert refusal is not None and "(mlp.down_proj)" in refusal[0]
    assert refusal[1] == "Weight input_size_per_partition = 1600 is not divisible by weight quantization block_k = 128."
    assert load_refusal(_config("32B-FP8"), 8) is None  # 3,200 = 25 blocks


@pytest.mark.parametrize(("model", "tp"), [("235B-A22B-FP8", 8), ("30B-A3B-FP8", 8)])
def test_loadable_splits_plan_and_match_vllm(model: str, tp: int) -> None:
    assert load_refusal(_config(model), tp) is None
    recorded = json.loads((GOLDEN / f"vllm-load-qwen3-{model.lower()}-tp{tp}.json").read_text("utf-8"))
    assert "error" not in recorded  # vLLM 0.33.0 planned it too


def test_the_planner_refuses_qwen3_235b_fp8_at_tp32_and_names_the_sizes_that_load() -> None:
    from kvstrategies.planner.model_lookup import resolve_for_planning
    from kvstrategies.vllm.planner.deployment import plan_vllm
    from kvstrategies.vllm.planner.request import VLLMPlanRequest

    source = resolve_for_planning("Qwen/Qwen3-235B-A22B-FP8")
    assert source.config is not None

    def request(tp: int) -> VLLMPlanRequest:
        return VLLMPlanRequest(model="Qwen/Qwen3-235B-A22B-FP8", source=source.request_source(), config=source.config,
                               tensor_parallel_size=tp, kv_cache_memory_bytes=40 * GIB)  # fmt: skip

    assert plan_vllm(request(8)).answer.num_gpu_blocks > 0  # refined: vLLM loads it
    with pytest.raises(UnsupportedConfigurationError) as info:
        plan_vllm(request(32))
    text = str(info.value)
    assert f"vLLM {NEWEST_VLLM.text} refuses at weight load: The output_size of gate's and up's weight = 48" in text
    assert "refine_fp8_moe_block_shape" in text and "loads: 1, 2, 4, 8, 16" in text
