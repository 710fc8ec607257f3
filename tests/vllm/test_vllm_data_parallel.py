"""vLLM's ``--data-parallel-size`` (one engine core a DP rank), each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/v1/engine/core.py run_engine_core`` (a dense model's DP ranks are
independent engines, ``reconfigure_for_independent_dp_rank``; a MoE model's are ``DPEngineCoreProc``s, each with
its own KV cache), ``vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make`` (the routed
experts span DP x TP ranks: ``flatten_tp_across_dp_and_pcp``; under EP whole experts over them) and
``vllm/config/parallel.py ParallelConfig.use_sequence_parallel_moe``. The recordings are vLLM's own models built on
meta with a DP group of that size (``golden/vllm-<v>-weights/deepseek-v3-h200-tp8-dp8-ep8.json``,
``tools/record_weights.py --engine vllm``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.core.dtypes import DType
from kvstrategies.core.releases import VLLM, parse_release
from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.weight_catalog import WeightCase
from kvstrategies.vllm.planner.load_refusals import check_weight_load
from kvstrategies.vllm.planner.weight_catalog import vllm_layout, vllm_scope
from kvstrategies.vllm.planner.weights import vllm_weights

BF16 = DType.BFLOAT16
GOLDEN = Path(__file__).parents[2] / "golden"
#: Qwen3-30B-A3B's routed experts: 48 MoE layers x 128 experts x 3 x 2,048 x 768 parameters x 2 B
QWEN3_30B_EXPERTS = 48 * 128 * 3 * 2_048 * 768 * 2


def test_routed_experts_split_over_dp_times_tp() -> None:
    # 57,982,058,496 B of experts at TP 1; over DP 4 x TP 1 a rank holds a quarter: 43,486,543,872 B less (vLLM
    # 0.34.0's own build, one-off through the bridge: 61,074,731,776 and 17,588,187,904 B)
    config = load_preset_config("qwen3-30b-a3b")
    assert QWEN3_30B_EXPERTS == 57_982_058_496
    one = vllm_weights(config, tp=1, pp=1, dtype=BF16).fullest
    four = vllm_weights(config, tp=1, pp=1, dtype=BF16, moe_tp=4).fullest
    assert one - four == QWEN3_30B_EXPERTS * 3 // 4 == 43_486_543_872
    # the same split as TP 4 gives the experts, with attention and embeddings whole
    assert vllm_weights(config, tp=1, pp=1, dtype=BF16, moe_tp=4, expert_parallel=True).fullest - four == 48 * 128 * 4


def test_expert_parallel_over_dp_ranks_is_the_recorded_build() -> None:
    # SGLang's TP 8 with attention DP 8 and EP 8 is vLLM's --tensor-parallel-size 1 --data-parallel-size 8
    # --enable-expert-parallel: attention, embedding, head and dense layers whole, 32 of 256 experts a rank
    case = WeightCase(name="deepseek-v3-h200-tp8-dp8-ep8", model="deepseek-v3", gpu="H200", tp=8, ep=8, attn_dp=8)
    assert vllm_layout(case) == (1, 8)
    config = load_preset_config("deepseek-v3")
    tp8 = vllm_weights(config, tp=8, pp=1, dtype=BF16, expert_parallel=True).fullest
    dp8 = vllm_weights(config, tp=1, pp=1, dtype=BF16, moe_tp=8, expert_parallel=True).fullest
    for release in ("0.33.0", "0.34.0"):  # vLLM's own builds: the same difference between the two layouts
        recorded = {}
        for name in ("deepseek-v3-h200-tp8-ep8", case.name):
            document = json.loads((GOLDEN / f"vllm-{release}-weights" / f"{name}.json").read_text(encoding="utf-8"))
            recorded[name] = int(document["ranks"][0]["total"])
        assert recorded[case.name] - recorded["deepseek-v3-h200-tp8-ep8"] == dp8 - tp8


def test_attention_dp_weight_cases_are_in_scope_from_0_33_0() -> None:
    case = WeightCase(name="x", model="deepseek-v3", gpu="H200", tp=8, ep=8, attn_dp=8)
    assert vllm_scope(case, "0.34.0") is None and vllm_scope(case, "0.33.0") is None
    assert "0.33.0" in str(vllm_scope(case, "0.32.0"))


def test_a_block_fp8_expert_split_over_dp_ranks_is_refused_naming_dp() -> None:
    # Qwen3-30B-A3B-FP8: 768 / (DP 16 x TP 1) = 48 columns a rank, not whole [128, 128] blocks (refined: gcd 16 < 32)
    from kvstrategies.checkpoints import shipped_checkpoints

    checkpoint = shipped_checkpoints()["Qwen/Qwen3-30B-A3B-FP8"]
    config = json.loads(Path(checkpoint.folder, "config.json").read_text(encoding="utf-8"))
    check_weight_load(config, 1, "0.34.0", dp=8)  # 768 / 8 = 96: refined to 32, loads
    with pytest.raises(UnsupportedConfigurationError, match=r"--tensor-parallel-size 1 \(experts: x "
                                                            r"--data-parallel-size 16\)"):  # fmt: skip
        check_weight_load(config, 1, "0.34.0", dp=16)
    check_weight_load(config, 1, "0.34.0", expert_parallel=True, dp=16)  # whole experts a rank


def _plan(*flags: str) -> dict[str, Any]:
    import contextlib
    import io

    from kvstrategies.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", *flags, "--engine", "vllm", "--json"]) == 0
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_the_kv_cache_of_a_dp_rank_is_its_tp_layout() -> None:
    # the KV cache is one engine core's: DP changes neither its groups nor its blocks (40 GiB given)
    for model in ("qwen3-30b-a3b", "llama-3.1-8b"):
        base = _plan(model, "--kv-cache-memory-bytes", "40G", "--tp", "2")
        dp = _plan(model, "--kv-cache-memory-bytes", "40G", "--tp", "2", "--data-parallel-size", "4")
        assert dp["vllm_log"] == base["vllm_log"] and dp["plan"] == base["plan"]
        assert dp["data_parallel_size"] == 4


def test_a_dense_models_dp_ranks_are_independent_engines() -> None:
    # llama-3.1-8b at DP 2: each rank the DP 1 launch (weights, budget and the one-GPU overhead: no NCCL group)
    base = _plan("llama-3.1-8b", "--gpu", "H100")
    dp = _plan("llama-3.1-8b", "--gpu", "H100", "--data-parallel-size", "2")
    assert dp["vllm_log"] == base["vllm_log"]
    assert dp["budget"]["stages"][0]["multi_gpu_bytes"] == 0
    # a MoE model's DP ranks share the experts' collectives: the multi-GPU term applies at TP 1
    moe = _plan("qwen3-30b-a3b", "--gpu", "H100", "--data-parallel-size", "2")
    assert moe["budget"]["stages"][0]["multi_gpu_bytes"] > 0


def test_dp_refusals_name_the_fix() -> None:
    from kvstrategies.planner.model_lookup import resolve_for_planning
    from kvstrategies.vllm.planner.request import VLLMPlanRequest

    source = resolve_for_planning("qwen3-30b-a3b")
    config = load_preset_config(str(source.preset))
    common: dict[str, Any] = {"model": "qwen3-30b-a3b", "source": source.request_source(), "config": config,
                              "gpu": "H100"}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match=r"--data-parallel-size is planned for vLLM 0\.33\.0"):
        VLLMPlanRequest(**common, data_parallel_size=2, release=parse_release("0.32.0", VLLM))
    with pytest.raises(KVCacheConfigError, match="use_sequence_parallel_moe"):
        VLLMPlanRequest(**common, data_parallel_size=2, tensor_parallel_size=2, enable_expert_parallel=True)
    VLLMPlanRequest(**common, data_parallel_size=2, tensor_parallel_size=2)  # no EP: the experts split TP-style
    with pytest.raises(KVCacheConfigError, match="--data-parallel-size must be an integer"):
        VLLMPlanRequest(**common, data_parallel_size=0)


def test_a_pasted_dp_ep_command_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    code = main(["plan", "--gpu", "H200", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B", "--data-parallel-size", "4",
                 "--enable-expert-parallel"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "TP 1 x PP 1, DP 4, experts over EP 4" in out
    assert "each of the 4 DP ranks is one engine core" in out


def test_sglang_attention_dp_is_vllm_data_parallel_in_the_case_mapping() -> None:
    # a case's TP 8 with attention DP 8 is vLLM's --tensor-parallel-size 1 --data-parallel-size 8: DeepSeek-V3's fp8
    # latent, 576 B a token in each of 61 layers, blocks of 64: 61 x 64 x 576 = 2,248,704 B a block, and
    # 40 GiB // 2,248,704 = 19,099 blocks, 1,222,336 tokens (vLLM 0.33.0 and 0.34.0 record the same through the
    # bridge with data_parallel_size 8: golden/vllm-0.34.0/bridge-attn-dp8-deepseek-v3-tp8-fp8-p64-mrr512.json)
    from kvstrategies import plan
    from kvstrategies.case import parse_case
    from kvstrategies.errors import UnsupportedConfigurationError
    from kvstrategies.vllm.strategies.engine_args import vllm_deployment

    fields: dict[str, Any] = {"preset": "deepseek-v3", "engine": "vllm", "tp_size": 8, "attn_dp_size": 8,
                              "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "available_bytes": 40 * 2**30}  # fmt: skip
    case = parse_case(fields)
    deployment = vllm_deployment(case.settings, case.available_bytes)
    assert (deployment.tensor_parallel_size, deployment.data_parallel_size) == (1, 8)
    assert deployment.engine_arguments()["data_parallel_size"] == 8
    answer = plan(case.settings, case.available_bytes).vllm
    assert answer is not None
    assert answer.bytes_per_block == 61 * 64 * 576 == 2_248_704
    assert answer.num_gpu_blocks == 40 * 2**30 // 2_248_704 == 19_099
    assert answer.launch.settings_document()["data_parallel_size"] == 8
    older = parse_case({**fields, "vllm_version": "0.32.0"})
    with pytest.raises(UnsupportedConfigurationError, match=r"attn_dp_size 8: .*planned for vLLM 0\.33\.0"):
        plan(older.settings, older.available_bytes)


def test_the_mtp_layers_experts_split_over_dp_times_tp_too() -> None:
    # DeepSeek-V3's MTP layer holds 256 block-FP8 experts of 3 x 7,168 x 2,048 parameters (1 B each) and their
    # [128, 128] block scales (w13: 2 x 2,048 / 128 x 7,168 / 128 = 1,792, w2: 896; float32): 44,040,192 + 10,752 B an
    # expert whole; over DP 8 x TP 1 a rank holds 2,048 / 8 = 256 columns: 5,505,024 + (224 + 112) x 4 = 5,506,368 B
    config = load_preset_config("deepseek-v3")

    def mtp_bytes(moe_tp: int) -> int:
        with_mtp = vllm_weights(config, tp=1, pp=1, dtype=BF16, mtp=True, moe_tp=moe_tp).fullest
        return with_mtp - vllm_weights(config, tp=1, pp=1, dtype=BF16, moe_tp=moe_tp).fullest

    whole, split = 256 * (44_040_192 + 10_752), 256 * (5_505_024 + 1_344)
    assert mtp_bytes(1) - mtp_bytes(8) == whole - split == 9_867_411_456
