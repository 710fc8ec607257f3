"""A pasted ``vllm serve ...`` command read as ``plan --engine vllm`` flags
(:mod:`kvstrategies.vllm.planner.command`)."""

from __future__ import annotations

import json

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_VLLM
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.vllm.planner.command import canonical_flag, is_vllm_command, translate_vllm
from kvstrategies.vllm.planner.flag_classes import NO_EFFECT, PLANNED, REFUSED, REFUSED_UNLESS
from kvstrategies.vllm.planner.request import VLLMPlanRequest
from kvstrategies.vllm.planner.values import human_readable_int
from kvstrategies.vllm.tables.flags import VLLM_FLAG_VALUES, VLLM_SERVE_FLAGS


def test_every_vllm_flag_is_in_exactly_one_class() -> None:
    classes = [set(PLANNED), set(REFUSED), set(REFUSED_UNLESS), set(NO_EFFECT)]
    for flag in VLLM_FLAG_VALUES:
        assert sum(flag in c for c in classes) == 1, flag
    assert set().union(*classes) == set(VLLM_FLAG_VALUES)
    assert {canon for canon, _ in VLLM_SERVE_FLAGS.values()} == set(VLLM_FLAG_VALUES)


def test_a_serve_command_becomes_plan_flags() -> None:
    got = translate_vllm(["vllm", "serve", "meta-llama/Llama-3.1-70B", "--tensor-parallel-size", "4",
                          "--max-model-len", "32K", "--port", "8000", "--trust-remote-code"])  # fmt: skip
    assert got.plan_args == ("--model-path", "meta-llama/Llama-3.1-70B", "--engine", "vllm",
                             "--tensor-parallel-size", "4", "--max-model-len", "32K")  # fmt: skip
    assert got.ignored == ("--port", "--trust-remote-code")


def test_vllms_own_spellings_are_read_as_vllm_reads_them() -> None:
    """Underscores, ``=``, short options, a unique prefix, ``--model`` and the module launcher."""
    command = ("CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 python -m vllm.entrypoints.openai.api_server "
               "--model llama-3.1-8b -tp 2 --max_num_seqs=64 --gpu-memory-util 0.8 --no-enable-prefix-caching "
               "--quantization fp8")
    got = translate_vllm(command.split(" "))
    assert got.plan_args == ("--model-path", "llama-3.1-8b", "--engine", "vllm", "--tensor-parallel-size", "2",
                             "--max-num-seqs", "64", "--gpu-memory-utilization", "0.8", "--no-enable-prefix-caching",
                             "--weight-quantization", "fp8")  # fmt: skip
    assert got.ignored == ("CUDA_VISIBLE_DEVICES=0,1", "VLLM_USE_V1=1")
    got = translate_vllm(["vllm serve llama-3.1-8b -O2 --data-parallel-size 4 --prefill-context-parallel-size 1"])
    assert got.ignored == ("--optimization-level", "--prefill-context-parallel-size")
    assert got.plan_args[-2:] == ("--data-parallel-size", "4")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("vllm serve m --swap-space 0", f"--swap-space is not a {NEWEST_VLLM.label} `vllm serve` flag"),
        ("vllm serve m --spec-method mtp", "speculative decoding"),
        ("vllm serve m --compilation-config.mode 3", "CUDA-graph capture"),
        ("vllm serve m -O0", "--optimization-level 0 changes"),
        ("vllm serve m --prefill-context-parallel-size 2", "prefill context parallelism"),
        ("vllm serve m --cpu-offload-gb 4", "offloaded to the CPU"),
        ("vllm serve m --num-gpu-blocks-override 100", "the number of KV blocks"),
        ("vllm serve m --quantization bitsandbytes", "--quantization bitsandbytes is not modelled"),
        ("vllm serve m --enable", "ambiguous among vLLM's flags"),
        ("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 vllm serve m", "whether the CUDA-graph estimate is deducted"),
        ("VLLM_SOMETHING_NEW=1 vllm serve m", "not reviewed"),
        ("vllm serve --port 8000", "names no model"),
        ("vllm serve a --model b", "two models"),
        ("vllm bench serve m", "not vLLM's server"),
        ("vllm serve m --enforce-eager=1", "is a switch and takes no value"),
    ],
)
def test_refusals_name_the_flag(command: str, message: str) -> None:
    with pytest.raises(KVCacheConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        translate_vllm([command])


def test_vllm_and_sglang_commands_are_told_apart() -> None:
    assert is_vllm_command(["vllm", "serve", "m"])
    assert is_vllm_command(["python3", "-m", "vllm.entrypoints.openai.api_server"])
    assert not is_vllm_command(["python", "-m", "sglang.launch_server", "--model-path", "m"])
    assert not is_vllm_command(["sglang", "serve", "--model-path", "m"])
    assert canonical_flag("--disable_log_stats") == ("--disable-log-stats", "0")


def test_a_pasted_vllm_command_plans_for_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                 "--port", "8000"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("vLLM 0.34.0 on H100-80GB")  # the newest release: its extensible KV cache (budget.py)
    assert "Maximum concurrency for 8,192 tokens per request" in out
    assert "note: ignored from the vLLM command (no effect on the KV answer): --port" in out


def test_flags_before_the_dash_dash_win(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--gpu", "H100", "--json", "--max-model-len", "4096", "--", "vllm", "serve", "llama-3.1-8b",
                 "--max-model-len", "8192", "--host", "0.0.0.0"])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["vllm_log"]["max_model_len"] == 4096
    assert document["launch_command_notes"] == ["ignored from the vLLM command (no effect on the KV answer): --host"]


# ---- flag spellings, values and request bounds, by hand ----------------------------------------------------


GIB = 2**30


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


def test_max_lora_rank_choices_are_vllms() -> None:
    # vllm/config/lora.py MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] (LoRAConfig.max_lora_rank)
    assert VLLM_FLAG_VALUES["--max-lora-rank"] == ("int", (1, 8, 16, 32, 64, 128, 256, 320, 512))
