"""``kvstrategies plan MODEL --engine vllm`` and ``compare --own-budgets`` from the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_VLLM

GIB = 2**30


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def plan_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(["plan", *argv, "--engine", "vllm", "--json"], capsys)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_the_text_report_prints_what_vllm_would_log(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["plan", "llama-3.1-8b", "--engine", "vllm", "--gpu", "H100", "--vllm-version", "0.33.0"],
                       capsys)  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "vLLM 0.33.0 on H100-80GB, TP 1 x PP 1: llama-3.1-8b"
    assert "  Model loading took 14.99 GiB memory" in lines
    assert "  Available KV cache memory: 52.66 GiB" in lines
    assert "  GPU KV cache size: 431,360 tokens, Maximum concurrency for 131,072 tokens per request: 3.29x" in lines
    assert any(line.startswith("  requested = ceil(total x gpu_memory_utilization 0.92)") for line in lines)


def test_the_newest_release_reports_its_extensible_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """No --vllm-version: 0.34.0, whose log shows the profiled figure at utilization 1.0 (58.99 GiB: it reserves the
    capacity) and the KV cache size the measured bytes hold (6,936 blocks of 64 tokens: 443,904 tokens)."""
    code, out, _ = run(["plan", "llama-3.1-8b", "--engine", "vllm", "--gpu", "H100"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{NEWEST_VLLM.label} on H100-80GB, TP 1 x PP 1: llama-3.1-8b" == "vLLM 0.34.0 on H100-80GB, " \
        "TP 1 x PP 1: llama-3.1-8b"
    assert "  Available KV cache memory: 58.99 GiB" in lines
    assert "  GPU KV cache size: 443,904 tokens, Maximum concurrency for 131,072 tokens per request: 3.39x" in lines
    assert any(line.startswith("  after warmup: free 63.13 GiB") for line in lines)
    assert not any(line.startswith("note: planned for") for line in lines)


def test_json_report_keys(capsys: pytest.CaptureFixture[str]) -> None:
    doc = plan_json(["llama-3.1-8b", "--gpu", "H100", "--request-length", "8192", "--vllm-version", "0.33.0"], capsys)
    assert doc["engine"] == "vLLM 0.33.0" != NEWEST_VLLM.label
    log = doc["vllm_log"]
    assert (log["gpu_kv_cache_size_tokens"], log["available_kv_cache_memory_bytes"]) == (431_360, 56_539_546_176)
    assert doc["budget"]["source"] == "gpu_memory_utilization" and doc["budget"]["stages"][0]["weights_bytes"] > 0
    expected = {"request_length": 8192, "blocks_per_request": 512, "max_concurrency": 26_960 / 512,
                "tokens": int(26_960 / 512 * 8192)}  # 26,960 blocks / (8,192 / 16) a request
    assert doc["request_lengths"] == [expected]
    assert doc["plan"]["num_gpu_blocks"] == 26_960


def test_kv_cache_memory_bytes_is_taken_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    doc = plan_json(["llama-3.1-8b", "--kv-cache-memory-bytes", "40G"], capsys)  # vLLM's 40G = 40 x 2**30
    assert doc["budget"]["source"] == "kv_cache_memory_bytes"
    assert (doc["vllm_log"]["available_kv_cache_memory_bytes"], doc["vllm_log"]["gpu_kv_cache_size_tokens"]) == (
        40 * GIB, 327_680)  # fmt: skip
    assert doc["vllm_log"]["lines"][0] == "Available KV cache memory: 40.0 GiB"


@pytest.mark.parametrize(
    ("flags", "check"),
    [
        (["--gpu-memory-utilization", "0.8"], lambda d: d["budget"]["gpu_memory_utilization"] == 0.8),
        (["--max-model-len", "8k"], lambda d: d["vllm_log"]["max_model_len"] == 8000),
        (["--max-num-seqs", "8"], lambda d: d["plan"]["vllm_settings"]["max_num_seqs"] == 8),
        (["--max-num-batched-tokens", "4096"], lambda d: d["plan"]["vllm_settings"]["max_num_batched_tokens"] == 4096),
        (["--block-size", "32"], lambda d: d["plan"]["block_size"] == 32),
        (["--kv-cache-dtype", "fp8"], lambda d: d["plan"]["vllm_settings"]["kv_cache_dtype"] == "fp8_e4m3"),
        (["--enforce-eager"], lambda d: d["budget"]["stages"][0]["resident_bytes"] < 2**28),
        (["--no-enable-prefix-caching"], lambda d: d["plan"]["vllm_settings"]["enable_prefix_caching"] is False),
        (["--no-async-scheduling"], lambda d: d["plan"]["vllm_settings"]["async_scheduling"] is False),
        (["--tensor-parallel-size", "2"], lambda d: d["budget"]["stages"][0]["multi_gpu_bytes"] > 0),
    ],
)
def test_vllm_flags_are_read_as_vllm_reads_them(
    flags: list[str], check: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(plan_json(["llama-3.1-8b", "--gpu", "H100", *flags], capsys))


def test_fewer_requests_leave_more_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """The sampler's profile scales with max_num_seqs: 8 requests free most of its 4.7 GiB."""
    default = plan_json(["llama-3.1-8b", "--gpu", "H100"], capsys)["vllm_log"]["available_kv_cache_memory_bytes"]
    few = plan_json(["llama-3.1-8b", "--gpu", "H100", "--max-num-seqs", "8"], capsys)
    assert few["vllm_log"]["available_kv_cache_memory_bytes"] - default > 3 * GIB


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "vllm", "--mem-fraction-static", "0.8"],
         "--mem-fraction-static is SGLang's; with --engine vllm use --gpu-memory-utilization"),
        (["--engine", "vllm", "--page-size", "64"], "use --block-size"),
        (["--engine", "vllm", "--attn-dp", "2"], "not modelled for vLLM"),
        (["--gpu-memory-utilization", "0.8"], "add --engine vllm"),
        (["--engine", "vllm", "--max-model-len", "auto"], "--max-model-len auto"),
        (["--engine", "vllm", "--gpu-memory-utilization", "1.5"], "must be in \\(0, 1\\]"),
        (["--engine", "vllm", "--max-num-seqs", "1.5K"], "decimals are not allowed"),
        (["--engine", "vllm", "--kv-cache-dtype", "turboquant_k8v4"], "packs it its own way"),
        (["--engine", "vllm", "--kv-cache-dtype", "fp9"], "Invalid --kv-cache-dtype"),
        (["--engine", "vllm", "--block-size", "8"], r"No valid attention backend found for cuda .*block_size=8"),
        (["--engine", "vllm", "--block-size", "24"], r"block_size not supported"),
    ],
)
def test_wrong_engine_flags_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "llama-3.1-8b", "--gpu", "H100", *argv], capsys)
    assert code == 2
    assert __import__("re").search(message, err), err


def test_a_model_that_does_not_fit_is_refused_as_vllm_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "llama-3.1-70b", "--engine", "vllm", "--gpu", "H100"], capsys)
    assert code == 2 and "No available memory for the cache blocks" in err


def test_compare_own_budgets_adds_vllms_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["compare", "llama-3.1-8b", "--gpu", "H100", "--own-budgets", "--request-length", "8192",
                          "--vllm-version", "0.33.0"], capsys)  # fmt: skip
    assert code == 0, err
    assert "the same for both engines" in out
    assert "each engine on its own budget" in out and "vLLM 0.33.0 by gpu_memory_utilization 0.92" in out
    lines = out.splitlines()
    own = lines.index(next(line for line in lines if line.startswith("each engine on its own budget")))
    row = next(line for line in lines[own:] if line.strip().startswith("8,192")).split()
    assert row[0] == "8,192" and row[-1].endswith("x") and row[3] == "52.66"


def _gib_terms(line: str) -> list[float]:
    return [float(x) for x in __import__("re").findall(r"(\d+\.\d\d) GiB", line)]


def test_compare_own_budgets_says_why_the_budgets_differ(capsys: pytest.CaptureFixture[str]) -> None:
    """Each rule's terms add up to its budget (two-decimal GiB, so to 0.02), and the vLLM request is
    ceil(79.18 GiB x 0.92) = 72.85 GiB (vllm/v1/worker/utils.py request_memory on the H100's logged total)."""
    code, out, err = run(["compare", "llama-3.1-8b", "--gpu", "H100", "--own-budgets", "--request-length", "8192",
                          "--vllm-version", "0.33.0"], capsys)  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("why the budgets differ"))
    sglang, vllm = lines[head + 1], lines[head + 2]
    assert sglang.startswith("  - SGLang: ")
    assert vllm.startswith("  - vLLM: ceil(79.18 GiB x gpu_memory_utilization 0.92)")
    capacity, held, weights, slack, available = _gib_terms(sglang)
    assert abs(capacity - held - weights - slack - available) <= 0.02
    total, requested, v_weights, profile, peak, resident, v_available = _gib_terms(vllm)
    assert (total, requested, v_available) == (79.18, 72.85, 52.66)
    assert abs(requested - v_weights - profile - v_available) <= 0.02 and abs(profile - peak - resident) <= 0.02
    diff = float(lines[head].split("(")[1].split(" GiB")[0])
    assert abs(diff - (v_available - available)) <= 0.02


def test_verify_against_vllm_recorded_needs_no_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    case = "cases/default-llama-3.1-8b-tp1-bf16-p1.json"
    code, out, _ = run(["verify", "--against", "vllm", "--recorded", case], capsys)
    assert code == 0
    assert "recorded in" in out.splitlines()[0] and "1 match" in out.splitlines()[-1]


def test_a_block_size_of_sixteens_is_taken_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    """48 = 3 x 16 is a multiple of every CUDA backend's kernel block (vLLM 0.33.0 runs FLASH_ATTN with it, as
    verify --against vllm shows): Llama-3.1-8B's block is 48 x 131,072 B = 6,291,456 B."""
    doc = plan_json(["llama-3.1-8b", "--gpu", "H100", "--block-size", "48", "--vllm-version", "0.33.0"], capsys)
    assert doc["plan"]["block_size"] == 48 and doc["plan"]["attention_backends"] == ["FLASH_ATTN"]
    assert doc["plan"]["num_gpu_blocks"] == doc["vllm_log"]["available_kv_cache_memory_bytes"] // 6_291_456
