"""``kvstrategies compare``: both engines on one KV budget, vLLM's formula per request length, the reasons.

Hand-computed from vLLM 0.33.0's rules (``vllm/v1/core/kv_cache_utils.py``
``get_max_concurrency_for_kv_cache_config``: ``num_blocks / sum over groups of blocks_per_request(L)``;
``vllm/v1/kv_cache_interface.py`` ``FullAttentionSpec.max_memory_usage_bytes`` = ``cdiv(L, block)``
blocks, ``SlidingWindowSpec`` = ``cdiv(min(W - 1 + in-flight tokens, L), block) + 1``) and SGLang's
token pool (``sglang/srt/model_executor/model_runner_kv_cache_mixin.py``: budget // cell bytes).
"""

from __future__ import annotations

import pytest

from kvstrategies.cli.app import main

GIB = 2**30


def compare(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    # the vLLM column's numbers below are vLLM 0.33.0's (16-token default block)
    if "--vllm-version" not in argv:
        argv = [*argv, "--vllm-version", "0.33.0"]
    assert main(["compare", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def row(lines: list[str], length: int) -> list[str]:
    return next(line for line in lines if line.strip().startswith(f"{length:,} ")).split()


def test_uniform_attention_agrees_to_the_block(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3.1-8B, TP 1, bf16: 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B a token.
    10 GiB: SGLang 10 GiB / 131,072 = 81,920 tokens; vLLM blocks of 16 tokens (2 MiB) -> 5,120 blocks,
    8,192-token requests take 512 blocks: 5,120 / 512 = 10.00x; at 131,072 one request needs 16 GiB,
    which vLLM refuses, naming the length that fits (81,920 - the null block's 16 = 81,904)."""
    lines = compare(["llama-3.1-8b", "--available-bytes", "10GiB", "--request-length", "8192",
                     "--request-length", "131072"], capsys)  # fmt: skip
    assert lines[0].startswith("KV budget per rank: 10,737,418,240 bytes (10.00 GiB), the same for both engines")
    assert row(lines, 8192) == ["8,192", "81,920", "10", "81,920", "10.00x", "5,120"]
    refused = " ".join(row(lines, 131072))
    assert "vLLM refuses" in refused and "16.0 GiB KV cache is needed" in refused and "81904" in refused
    assert any("uniform attention" in line for line in lines)


def test_sliding_window_blocks_depend_on_the_request_length(capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-oss-120b, TP 1: 18 full + 18 sliding (W = 128) layers, 8 KV heads x 64, bf16: a 16-token page
    of one layer is 32,768 B and a block of the shared pool 18 x 32,768 = 589,824 B, so 10 GiB is
    10,737,418,240 // 589,824 = 18,204 blocks. In flight: 2 batches x 8,192 tokens (H200's batch
    defaults). L = 8,192: 512 full + cdiv(min(127 + 16,384, 8,192), 16) + 1 = 513 sliding = 1,025
    blocks, 17.76x; L = 131,072: 8,192 + 1,033 = 9,225 blocks, 1.97x."""
    lines = compare(["gpt-oss-120b", "--available-bytes", "10GiB", "--request-length", "8192",
                     "--request-length", "131072"], capsys)  # fmt: skip
    short, long = row(lines, 8192), row(lines, 131072)
    assert short[-1] == long[-1] == "18,204"
    assert short[-2] == f"{18204 / 1025:.2f}x" and long[-2] == f"{18204 / 9225:.2f}x"
    assert short[1] == long[1]  # SGLang's token count does not depend on the request length
    assert any(line.strip().startswith("- sliding window: vLLM's groups share one block pool") for line in lines)


def test_a_mamba_hybrid_gives_vllm_sglangs_whole_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3-Next: SGLang takes its Mamba slot pool out of the budget first and prints the split; vLLM
    draws the states from the same block pool, so it is given the whole budget (the two parts add up)."""
    lines = compare(["qwen3-next-80b-a3b", "--available-bytes", "40GiB", "--request-length", "8192"], capsys)
    assert lines[0].startswith("KV budget per rank: 42,949,672,960 bytes (40.00 GiB)")
    split = next(line for line in lines if line.startswith("SGLang splits it: "))
    mamba, tokens = (float(part.split(" GiB")[0].split()[-1]) for part in split.split(", "))
    assert abs(mamba + tokens - 40.0) <= 0.011
    assert any(line.strip().startswith("- Mamba hybrid:") for line in lines)


@pytest.mark.parametrize(
    ("extra", "shown"),
    [([], True), (["--no-own-budgets"], False), (["--available-bytes", "20GiB"], False),
     (["--available-bytes", "20GiB", "--own-budgets"], True)],
)  # fmt: skip
def test_each_engine_on_its_own_budget_is_the_default_with_a_gpu(
    extra: list[str], shown: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --gpu both engines have a rule of their own, so the second table is shown; a given SGLang
    budget (--available-bytes) is no rule of SGLang's, so it is shown only when asked for."""
    lines = compare(["llama-3.1-8b", "--gpu", "H100", "--request-length", "8192", *extra], capsys)
    assert any(line.startswith("each engine on its own budget") for line in lines) is shown
    assert any(line.startswith("why the budgets differ") for line in lines) is (shown and not extra)
    if "--available-bytes" in extra and shown:
        assert any(line.startswith("each engine on its own budget: SGLang 20.00 GiB given (--available-bytes)")
                   for line in lines)  # fmt: skip


def test_an_mtp_draft_is_in_both_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 TP 8 bf16 with its MTP layer (EAGLE, 3 steps, top-k 1) on 10 GiB: vLLM 0.33.0's 16-token
    latent pages of 16 x 576 x 2 = 18,432 B for 61 + 1 layers, 1,142,784 B a block: 10 GiB // that = 9,395
    blocks; 8,192-token requests take 512: 18.35x. The reasons name the draft; without one they do not."""
    spec = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"]  # fmt: skip
    lines = compare(["deepseek-v3", "--tp", "8", "--available-bytes", "10GiB", "--request-length", "8192", *spec],
                    capsys)  # fmt: skip
    assert row(lines, 8192)[-2:] == ["18.35x", f"{10 * GIB // (62 * 18_432):,}"] == ["18.35x", "9,395"]
    assert any("speculative decoding (EAGLE): vLLM's MTP draft layers join its KV cache groups" in line
               for line in lines)  # fmt: skip
    plain = compare(["deepseek-v3", "--tp", "8", "--available-bytes", "10GiB", "--request-length", "8192"], capsys)
    assert not any("speculative decoding" in line for line in plain)


def test_each_engine_s_own_budget_carries_the_draft(tmp_path: object) -> None:
    """The vLLM column on its own budget plans the same speculation: the model's MTP layers (their weights on the
    last stage), or a separate draft as an EAGLE3 head read from its config (its layer, KV heads and head size,
    and its weights)."""
    import json
    from pathlib import Path

    from kvstrategies.planner.compare_budgets import vllm_request_for
    from kvstrategies.planner.deployment import plan_deployment
    from kvstrategies.planner.gpus import lookup_gpu
    from kvstrategies.planner.request import DeploymentRequest

    head = Path(str(tmp_path))
    (head / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
        "draft_vocab_size": 32000}))  # fmt: skip
    spec = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    h100 = lookup_gpu("H100")
    eagle3 = plan_deployment(DeploymentRequest("llama-3.1-8b", {"preset": "llama-3.1-8b"}, gpu=h100,
                                               speculative_algorithm="EAGLE3", speculative_draft_model_path=str(head),
                                               **spec))  # type: ignore[arg-type]  # fmt: skip
    req = vllm_request_for(eagle3, 8192, "H100")
    assert (req.num_speculative_tokens, req.speculative_method, req.draft_model) == (3, "eagle3", str(head))
    assert req.draft_config is not None and req.draft_config["num_key_value_heads"] == 8
    mtp = plan_deployment(DeploymentRequest("qwen3.5-35b-a3b", {"preset": "qwen3.5-35b-a3b"}, gpu=h100, tp_size=2,
                                            speculative_algorithm="EAGLE", **spec))  # type: ignore[arg-type]  # fmt: skip
    req = vllm_request_for(mtp, 8192, "H100")
    assert (req.num_speculative_tokens, req.speculative_method, req.draft_config) == (3, "mtp", None)
    plain = plan_deployment(DeploymentRequest("qwen3.5-35b-a3b", {"preset": "qwen3.5-35b-a3b"}, gpu=h100, tp_size=2))
    assert vllm_request_for(plain, 8192, "H100").num_speculative_tokens is None


def test_speculation_vllm_does_not_plan_is_a_row_refusal_on_its_own_budget(capsys: pytest.CaptureFixture[str]) -> None:
    lines = compare(["llama-3.1-8b", "--gpu", "H100", "--request-length", "8192", "--speculative-algorithm", "EAGLE",
                     "--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens",
                     "8"], capsys)  # fmt: skip
    assert any("vLLM's plan takes the model's MTP layers or an EAGLE / EAGLE3 head, a chain (top-k 1)" in line
               for line in lines)  # fmt: skip
