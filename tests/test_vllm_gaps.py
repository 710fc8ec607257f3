"""Hand-worked edges of the vLLM strategies, planner and verify report, each from vLLM 0.33.0's source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvstrategies.case import parse_case
from kvstrategies.cli import main
from kvstrategies.context import KVCacheSettings
from kvstrategies.dtypes import DType
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.integrations.sglang.verify import CaseVerdict, VerifyReport
from kvstrategies.integrations.vllm.compare import KNOWN_DIFFERENCES
from kvstrategies.integrations.vllm.verify import format_report
from kvstrategies.planner.vllm.command import canonical_flag, translate_vllm
from kvstrategies.planner.vllm.request import VLLMPlanRequest
from kvstrategies.planner.vllm.values import human_readable_int
from kvstrategies.planner.vllm.weights import rope_buffer_bytes, vllm_weights
from kvstrategies.planner.vllm_flags import VLLM_FLAG_VALUES
from kvstrategies.strategies.vllm.deployment import vllm_deployment
from kvstrategies.strategies.vllm.devices import VLLMDevice, vllm_device
from kvstrategies.strategies.vllm.grouping import KVCacheGroup, kv_cache_groups
from kvstrategies.strategies.vllm.launch import batch_defaults
from kvstrategies.strategies.vllm.sizing import check_enough_memory
from kvstrategies.strategies.vllm.specs import CacheLimits, FullAttentionSpec, MambaSpec
from tests.test_checkpoint import write_safetensors

GIB = 2**30
MIB = 2**20


def _report(version: str = "0.33.0") -> VerifyReport:
    diff = ("num_gpu_blocks: 5120 -> 5119", "block_size: 16 -> 32", "max_concurrency: 10.0 -> 9.99")
    kind = KNOWN_DIFFERENCES[0]
    return VerifyReport(
        verdicts=[
            CaseVerdict("a", "match"),
            CaseVerdict("b", "match", lines=("both refuse",)),
            CaseVerdict("cc", "known", kinds=(kind.kind,), lines=("x",)),
            CaseVerdict("d", "DIFF", lines=diff, unexplained=diff),
        ],
        timings={"import": 1.0, "total": 9.0},
        version=version,
    )


def test_vllm_format_report_lines_by_hand() -> None:
    kind = KNOWN_DIFFERENCES[0]
    # names padded to 2, statuses to 5; per case (9.0 - 1.0) / 4 = 2.00 s
    assert format_report(_report()) == [
        "kvstrategies vs vLLM 0.33.0: 4 cases",
        "a   match",
        "b   match  both refuse",
        f"cc  known  {kind.kind}",
        "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more",
        "      num_gpu_blocks: 5120 -> 5119",
        "      block_size: 16 -> 32",
        "      max_concurrency: 10.0 -> 9.99",
        "known differences:",
        f"  {kind.kind} (1 cases): {kind.reason}",
        "total: 4 cases: 2 match, 1 known, 1 unexplained (vLLM import 1.0 s, 2.00 s per case, 9.0 s in all)",
    ]
    recorded = format_report(_report("0.33.0 (recorded in golden/vllm-0.33.0)"))[-1]
    assert recorded == "total: 4 cases: 2 match, 1 known, 1 unexplained (recorded answers, 9.0 s in all)"


def test_vllm_format_report_cuts_a_long_detail_to_the_width() -> None:
    # "num_gpu_blocks: 5120 -> 5119; +2 more" is 28 + 9 = 37 characters: width 20 keeps 17 and adds "..."
    assert format_report(_report(), width=20)[4] == "d   DIFF   num_gpu_blocks: 5..."
    assert format_report(_report(), width=36)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 ..."
    assert format_report(_report(), width=37)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more"


def test_an_ambiguous_prefix_names_the_first_five_matches() -> None:
    # vLLM 0.33.0's serve parser has six flags starting --max-num (active-seqs, batched-tokens, queued-reqs,
    # queued-tokens, scheduled-tokens, seqs); argparse refuses the prefix, the message shows five, sorted
    shown = (
        "--max-num-active-seqs, --max-num-batched-tokens, --max-num-queued-reqs, --max-num-queued-tokens, "
        "--max-num-scheduled-tokens"
    )
    with pytest.raises(KVCacheConfigError) as info:
        canonical_flag("--max-num")
    assert str(info.value) == f"--max-num is ambiguous among vLLM's flags ({shown}); spell it out"
    assert canonical_flag("--max-num-seqs") == ("--max-num-seqs", "1")


def test_disable_sliding_window_is_refused_naming_what_it_changes() -> None:
    with pytest.raises(KVCacheConfigError) as info:
        translate_vllm(["vllm", "serve", "m", "--disable-sliding-window"])
    assert str(info.value).startswith(
        "--disable-sliding-window changes the model's layers or cache specs (sliding-window layers sized as full "
        "attention), which the vLLM plan does not model"
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("1k", 1000), ("2g", 2_000_000_000), ("1.5m", 1_500_000), ("3t", 3 * 10**12), ("4K", 4096), ("1G", GIB)],
)
def test_human_readable_int_suffixes(text: str, value: int) -> None:
    # vllm/utils/argparse_utils.py human_readable_int: k m g t are 10**3 10**6 10**9 10**12, K M G T 2**10 ...
    assert human_readable_int(text, "--max-model-len") == value


def test_checkpoint_headers_add_the_rope_cache(tmp_path: Path) -> None:
    # a replicated norm of 16 bf16 = 32 B; RoPE cos_sin_cache: max_position 32 x rotary (16 / 2 heads = 8) x 2 B
    # = 512 B on every stage (vllm/model_executor/layers/rotary_embedding: a buffer beside the weights)
    write_safetensors(tmp_path / "model.safetensors", {"model.norm.weight": ("BF16", (16,))})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16,
              "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 64,
              "intermediate_size": 32, "max_position_embeddings": 32}  # fmt: skip
    weights = vllm_weights(config, tp=1, pp=1, dtype=DType.BFLOAT16, checkpoint=str(tmp_path))
    assert weights.per_stage == (32 + 512,) and "RoPE" in weights.source


def _ctx(**fields: object) -> KVCacheSettings:
    return parse_case({"preset": "llama-3.1-8b", "engine": "vllm", "available_bytes": 40 * GIB, **fields}).settings


@pytest.mark.parametrize(("page", "block"), [(1, None), (2, 2), (64, 64)])
def test_a_page_above_one_token_is_vllms_block_size(page: int, block: int | None) -> None:
    # SGLang's page 1 is its default: vLLM keeps its backend's block size (--block-size unset); any other page
    # becomes --block-size
    assert vllm_deployment(_ctx(page_size=page), 10 * GIB).block_size == block


def test_chunked_prefill_of_one_token_is_vllms_batch_budget() -> None:
    # vLLM's V1 engine always chunks: --max-num-batched-tokens 1 is a valid (tiny) budget; 0 and -1 are
    # SGLang's "no chunking", which vLLM cannot do
    assert vllm_deployment(_ctx(chunked_prefill_size=1), 10 * GIB).max_num_batched_tokens == 1
    for chunk in (0, -1):
        with pytest.raises(UnsupportedConfigurationError, match=f"chunked_prefill_size {chunk}: vLLM's V1 engine"):
            vllm_deployment(_ctx(chunked_prefill_size=chunk), 10 * GIB)


def test_gb10_stays_on_the_small_batch_tier() -> None:
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: GB10 (DGX Spark, capability 12.1) has >= 70 GiB
    # but keeps 2048 / 256; a 12.0 part of the same size (RTX PRO 6000, 95.6 GiB) gets 8192 / 1024
    assert batch_defaults(VLLMDevice("GB10", (12, 1), 122_570)) == (2048, 256)
    assert batch_defaults(vllm_device("RTX-PRO-6000")) == (8192, 1024)
    # the tiers start at exactly 70 GiB (71,680 MiB) and 160 GiB (163,840 MiB): device_memory >= n * GiB_bytes
    assert batch_defaults(VLLMDevice("X", (9, 0), 71_680)) == (8192, 1024)
    assert batch_defaults(VLLMDevice("X", (9, 0), 71_679)) == (2048, 256)
    assert batch_defaults(VLLMDevice("X", (9, 0), 163_840)) == (16384, 1024)
    assert batch_defaults(VLLMDevice("X", (9, 0), 163_839)) == (8192, 1024)


def _llama_group() -> tuple[KVCacheGroup, ...]:
    # 32 layers x page (16 tokens x 8 heads x 256 x 2 B = 64 KiB) = 2 MiB a block
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    return (KVCacheGroup(tuple(range(32)), spec),)


def test_enough_memory_refusal_names_gib_and_the_length_that_fits() -> None:
    # vllm/v1/core/kv_cache_planning.py _check_enough_kv_cache_memory: 4096 tokens need 256 blocks = 0.5 GiB;
    # budget 2 MiB + 256 MiB leaves 0.25 GiB after the null block: 128 blocks = 2048 tokens fit
    with pytest.raises(InsufficientMemoryError) as info:
        check_enough_memory(_llama_group(), 2 * MIB + 256 * MIB, CacheLimits(4096, 8192), "0.33.0")
    assert str(info.value).startswith(
        "vLLM 0.33.0 refuses: To serve at least one request with the model's max seq len (4096), (0.5 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (0.25 GiB). Based on the available memory, "
        "the estimated maximum model length is 2048. Try increasing `gpu_memory_utilization`"
    )


def test_enough_memory_refusal_without_a_length_when_no_block_fits() -> None:
    # 1 MiB after the null block holds no 2 MiB block: the estimate is 0 and vLLM prints no estimate sentence
    with pytest.raises(InsufficientMemoryError) as info:
        check_enough_memory(_llama_group(), 2 * MIB + MIB, CacheLimits(4096, 8192), "0.33.0")
    assert "(0.0 GiB). Try increasing `gpu_memory_utilization`" in str(info.value)
    assert "estimated maximum model length" not in str(info.value)


def test_enough_memory_refusal_names_a_length_of_one_token() -> None:
    # block 1: 32 layers x (1 x 8 x 256 x 2 B) = 128 KiB a block; 128 KiB after the null block fits 1 token,
    # still > 0, so vLLM names it
    spec = FullAttentionSpec(block_size=1, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    with pytest.raises(InsufficientMemoryError, match=r"\(0\.0 GiB\)\. Based on the available memory, the estimated "
                       r"maximum model length is 1\. Try"):
        check_enough_memory((KVCacheGroup(tuple(range(32)), spec),), 256 * 1024, CacheLimits(4096, 8192), "0.33.0")


def test_mamba_pages_per_request_by_cache_mode() -> None:
    # vllm/v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: align 2 + speculative + checkpoint
    # pages, else 1 + speculative; state 4 x 8 x 2 B + 2 x 16 x 4 B = 192 B a page
    base = MambaSpec(block_size=16, shapes=((4, 8), (2, 16)), dtypes=(DType.BFLOAT16, DType.FLOAT32))
    align, none = CacheLimits(4096, 8192, "align"), CacheLimits(4096, 8192, "none")
    assert base.state_bytes == 192
    assert base.max_memory_usage_bytes(align) == 192 * 2  # no speculative, no checkpoint block by default
    spec = MambaSpec(block_size=16, shapes=((4, 8), (2, 16)), dtypes=(DType.BFLOAT16, DType.FLOAT32),
                     num_speculative_blocks=3, num_prefill_checkpoint_blocks=1)  # fmt: skip
    assert spec.max_memory_usage_bytes(align) == 192 * (2 + 3 + 1)
    assert spec.max_memory_usage_bytes(none) == 192 * (1 + 3)


def _own_budget_lines(argv: list[str], capsys: pytest.CaptureFixture[str], model: str = "llama-3.1-8b") -> list[str]:
    assert main(["compare", model, "--gpu", "H100", "--request-length", "8192", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("each engine on its own budget")) :]


def test_own_budget_row_starts_with_sglangs_columns(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-8B bf16: 131,072 B a token; 10 GiB given to SGLang: 81,920 tokens, 81,920 // 8,192 = 10 requests
    lines = _own_budget_lines(["--available-bytes", "10GiB", "--own-budgets"], capsys)
    assert lines[2].split()[:5] == ["8,192", "81,920", "10", lines[2].split()[3], "GiB"]
    assert lines[2].startswith(f"{8192:>14,}  {81920:>13,}  {10:>15,}  ")


def _gib_terms(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"([\d.]+) GiB", line)]


def test_why_the_budgets_differ_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3.5-35B-A3B (vision tower) at TP 2: SGLang subtracts its multimodal reservation, vLLM adds a multi-GPU term
    lines = _own_budget_lines(["--tp", "2"], capsys, "qwen3.5-35b-a3b")
    why = next(i for i, line in enumerate(lines) if line.startswith("why the budgets differ"))
    sglang, vllm = lines[why + 1], lines[why + 2]
    assert sglang.startswith("  - SGLang: ") and sglang.endswith("(the planner's SGLang budget, docs/validation.md)")
    assert " multimodal = " in sglang
    # capacity - held - weights - slack - multimodal = budget, each printed to 0.01 GiB
    capacity, held, weights, slack, multimodal, budget = _gib_terms(sglang)
    assert abs(capacity - held - weights - slack - multimodal - budget) <= 0.03
    assert vllm.startswith("  - vLLM: ceil(") and vllm.endswith(
        "(vllm/v1/worker/gpu_worker.py Worker.determine_available_memory)"
    )
    # total, requested, weights, profile (= peak + resident + multi-GPU), budget = requested - weights - profile
    _, requested, weights, profile, peak, resident, multi_gpu, available = _gib_terms(vllm)
    assert multi_gpu > 0 and abs(peak + resident + multi_gpu - profile) <= 0.02
    assert abs(requested - weights - profile - available) <= 0.02


def _request(**fields: object) -> VLLMPlanRequest:
    return VLLMPlanRequest("m", {}, {}, gpu="H100", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["tensor_parallel_size", "pipeline_parallel_size"])
def test_parallel_sizes_are_1_to_4096(name: str) -> None:
    assert getattr(_request(**{name: 4096}), name) == 4096 and getattr(_request(**{name: 1}), name) == 1
    for bad in (0, 4097):
        flag = "--" + name.replace("_", "-")
        with pytest.raises(KVCacheConfigError, match=rf"^{flag} must be an integer in \[1, 4,096\]"):
            _request(**{name: bad})


@pytest.mark.parametrize("name", ["block_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens"])
def test_sizes_are_positive_int32(name: str) -> None:
    assert getattr(_request(**{name: 1}), name) == 1 and getattr(_request(**{name: 2**31 - 1}), name) == 2**31 - 1
    for bad in (0, 2**31):
        with pytest.raises(KVCacheConfigError, match=r"must be an integer in \[1, 2,147,483,647\]"):
            _request(**{name: bad})


def test_optimization_level_other_than_2_is_refused_naming_cuda_graphs() -> None:
    assert translate_vllm(["vllm", "serve", "m", "-O2"]).plan_args[:2] == ("--model-path", "m")  # vLLM's default
    with pytest.raises(KVCacheConfigError) as info:
        translate_vllm(["vllm", "serve", "m", "-O3"])
    assert str(info.value).startswith(
        "--optimization-level 3 changes CUDA-graph capture, whose memory vLLM deducts from the budget and compilation, "
        "which the vLLM plan does not model (2 / O2 change nothing)"
    )


def test_rope_cache_of_a_partial_rotary_model() -> None:
    # vllm/model_executor/layers/rotary_embedding get_rope: rotary_dim = head_size x partial_rotary_factor;
    # cos_sin_cache is (max_position, rotary_dim): 4096 x (128 x 0.5 = 64) x 2 B = 524,288 B
    config = {"num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 4096,
              "partial_rotary_factor": 0.5}  # fmt: skip
    assert rope_buffer_bytes(config, DType.BFLOAT16) == 4096 * 64 * 2
    assert rope_buffer_bytes({**config, "partial_rotary_factor": 1.0}, DType.BFLOAT16) == 4096 * 128 * 2


def test_max_lora_rank_choices_are_vllms() -> None:
    # vllm/config/lora.py MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] (LoRAConfig.max_lora_rank)
    assert VLLM_FLAG_VALUES["--max-lora-rank"] == ("int", (1, 8, 16, 32, 64, 128, 256, 320, 512))


def test_a_smaller_page_grows_its_block_to_the_largest_page() -> None:
    # vllm/v1/core/kv_cache_planning.py unify_kv_cache_spec_page_size: 8 heads at block 16 = 16 x 8 x 256 x 2 B
    # = 65,536 B; 4 heads = 32,768 B, ratio 65,536 // 32,768 = 2: its block becomes 16 x 2 = 32 tokens
    eight = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    four = FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    groups = kv_cache_groups({0: eight, 1: four}, disable_hybrid=False)
    assert {g.layers: g.spec.block_size for g in groups} == {(0,): 16, (1,): 32}
    assert {g.spec.page_size_bytes for g in groups} == {65_536}
