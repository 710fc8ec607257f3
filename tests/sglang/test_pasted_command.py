"""``kvstrategies plan -- <SGLang launch command>`` and SGLang's flag spellings on ``plan``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.flag_names import flag_wording
from kvstrategies.sglang.pasted_command import (
    MAX_COMMAND_CHARS,
    MODELLED,
    NOT_MODELLED,
    canonical_flag,
    split_command,
    translate,
)
from kvstrategies.sglang.tables.flags import SGLANG_SERVER_FLAGS


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", *argv, "--json"] if "--" not in argv else ["plan", "--json", *argv]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def essentials(document: dict[str, Any]) -> tuple[Any, ...]:
    planner = document["planner"]
    budget = planner["budget"]["available_bytes"]
    return planner["tokens"], planner["max_running_requests"], budget, document["pools"], planner["fit"]


# ---- translation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "launcher",
    [
        ["python", "-m", "sglang.launch_server"],
        ["python3", "-m", "sglang.launch_server"],
        ["/usr/bin/python3.11", "-m", "sglang.launch_server"],
        ["sglang", "serve"],
        [],
    ],
)
def test_launchers_are_stripped(launcher: list[str]) -> None:
    command = translate([*launcher, "--model-path", "m", "--tp-size", "8", "--port", "30000"])
    assert command.plan_args == ("--model-path", "m", "--tp-size", "8")
    assert command.ignored == ("--port",)


def test_one_quoted_string_and_env_assignments() -> None:
    command = translate(
        ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server "
         "--model m --tp 2 --context-length=200000 --trust-remote-code"]
    )  # fmt: skip
    assert command.plan_args == (
        "--allow-context-length-override", "--model-path", "m", "--tp-size", "2", "--context-length", "200000",
    )  # fmt: skip
    assert command.ignored == ("CUDA_VISIBLE_DEVICES=0,1", "--trust-remote-code")
    assert "--trust-remote-code" in command.notes[0]


def test_list_flags_consume_their_values() -> None:
    command = translate(["--model-path", "m", "--mem-fraction-static", "0.8", "--cuda-graph-bs-decode", "1", "2",
                         "4", "--page-size", "64"])  # fmt: skip
    assert command.plan_args == ("--model-path", "m", "--mem-fraction-static", "0.8", "--page-size", "64")
    assert command.ignored == ("--cuda-graph-bs-decode",)


def test_memory_flags_not_modelled_are_errors_naming_the_flag() -> None:
    for flag in ("--cpu-offload-gb", "--enable-lora", "--json-model-override-args", "--max-mamba-cache-size"):
        arity = SGLANG_SERVER_FLAGS[flag][1]
        with pytest.raises(KVCacheConfigError, match=f"^{flag} changes GPU memory"):
            translate(["--model-path", "m", flag, *(["1"] if arity != "0" else [])])


def test_graph_reserve_flags_need_the_fraction() -> None:
    with pytest.raises(KVCacheConfigError, match="--cuda-graph-max-bs-prefill changes SGLang's default"):
        translate(["--model-path", "m", "--cuda-graph-max-bs-prefill", "16"])
    assert translate(["--cuda-graph-max-bs-prefill", "16", "--mem-fraction-static", "0.8"]).ignored == (
        "--cuda-graph-max-bs-prefill",
    )


def test_unknown_flag_and_stray_value() -> None:
    with pytest.raises(KVCacheConfigError, match="--request-length is not an SGLang 0.5.23 server flag.*before"):
        translate(["--model-path", "m", "--request-length", "8192"])
    with pytest.raises(KVCacheConfigError, match="unexpected 'extra'"):
        translate(["--model-path", "m", "--disable-radix-cache", "extra"])
    with pytest.raises(KVCacheConfigError, match="not SGLang's server"):
        translate(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])


def test_abbreviations_resolve_like_sglangs_argparse() -> None:
    assert canonical_flag("--tp") == ("--tp-size", "1")
    assert canonical_flag("--model") == ("--model-path", "1")
    with pytest.raises(KVCacheConfigError, match="ambiguous"):
        canonical_flag("--disable")


def test_quantization_maps_to_the_weight_estimate() -> None:
    assert translate(["--quantization", "fp8"]).plan_args == ("--weight-quantization", "fp8")
    with pytest.raises(KVCacheConfigError, match="--quantization bitsandbytes is not modelled"):
        translate(["--quantization", "bitsandbytes"])


def test_classes_are_real_sglang_flags() -> None:
    """Every classified flag is a canonical flag of some supported release (the newest's table, or
    an older release's own flags in ``kvstrategies/sglang/tables/flag_releases.py``)."""
    from kvstrategies.core.releases import supported_releases
    from kvstrategies.sglang.pasted_command import GRAPH_RESERVE_FLAGS, release_flags

    for flag in (*MODELLED, *NOT_MODELLED, *GRAPH_RESERVE_FLAGS):
        assert any(release_flags(r).get(flag, ("",))[0] == flag for r in supported_releases()), flag
    assert release_flags() is SGLANG_SERVER_FLAGS


def test_flag_list_matches_installed_sglang() -> None:
    """The shipped list is SGLang 0.5.23's own (in a subprocess: importing SGLang here would patch
    triton for the kernel tests that follow, so not even ``importorskip``)."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang is not installed")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "tools/list_sglang_flags.py", "--check"], cwd=root, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


# ---- the CLI -------------------------------------------------------------------------------------


def test_pasted_command_plans_like_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    pasted = plan_json(
        capsys, "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path", "llama-3.1-8b",
        "--tp-size", "2", "--host", "0.0.0.0", "--port", "30000", "--kv-cache-dtype", "fp8_e4m3",
    )  # fmt: skip
    flags = plan_json(capsys, "llama-3.1-8b", "--gpu", "H100", "--tp", "2", "--kv-cache-dtype", "fp8_e4m3")
    assert essentials(pasted) == essentials(flags)
    assert pasted["planner"]["launch_command"]["ignored"] == ["--host", "--port"]


def test_flags_before_the_separator_win(capsys: pytest.CaptureFixture[str]) -> None:
    document = plan_json(capsys, "--gpu", "H100", "--page-size", "16", "--", "sglang", "serve", "--model-path",
                         "llama-3.1-8b", "--page-size", "64")  # fmt: skip
    assert document["planner"]["launch"]["page_size"] == 16


def test_pasted_command_text_lists_ignored_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "H100", "--", "sglang", "serve", "--model", "llama-3.1-8b", "--log-level",
                 "info"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "ignored from the launch command (no effect on the memory plan): --log-level" in out


def test_pasted_unmodelled_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "llama-3.1-8b", "--enable-lora"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--enable-lora changes GPU memory" in err


@pytest.mark.parametrize(
    ("model", "sglang", "ours"),
    [
        ("llama-3.1-70b", ["--tp-size", "4"], ["--tp", "4"]),
        ("llama-3.1-70b", ["--tensor-parallel-size", "4"], ["--tp", "4"]),
        ("llama-3.1-70b", ["--pipeline-parallel-size", "2"], ["--pp-size", "2"]),
        ("deepseek-v3", ["--tp-size", "8", "--dcp-size", "2"], ["--tp", "8", "--dcp", "2"]),
        ("deepseek-v3", ["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention"], ["--tp", "8", "--attn-dp", "8"]),
        ("deepseek-v3", ["--tp-size", "8", "--attn-dp-size", "8"], ["--tp", "8", "--attn-dp", "8"]),
        ("llama-3.1-8b", ["--dtype", "float16"], ["--model-dtype", "float16"]),
    ],
)
def test_sglang_spellings_are_aliases(
    capsys: pytest.CaptureFixture[str], model: str, sglang: list[str], ours: list[str]
) -> None:
    base = ["--gpu", "H200"]
    a = plan_json(capsys, "--model-path", model, *base, *sglang)
    b = plan_json(capsys, model, *base, *ours)
    assert essentials(a) == essentials(b)
    plain = plan_json(capsys, model, *base, *(["--tp", "8"] if model != "llama-3.1-8b" else []))
    assert essentials(a) != essentials(plain)  # the flag did change the plan


def test_launch_extras_reach_the_launch_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    base = plan_json(capsys, "llama-3.1-8b", "--gpu", "H100")
    graph = plan_json(capsys, "llama-3.1-8b", "--gpu", "H100", "--cuda-graph-max-bs-decode", "8")
    assert graph["planner"]["launch"]["cuda_graph_max_bs"] == 8
    assert graph["planner"]["launch"]["mem_fraction_static"] != base["planner"]["launch"]["mem_fraction_static"]


def test_dp_replicas_are_counted_in_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    document = plan_json(capsys, "llama-3.1-8b", "--gpu", "H100", "--dp-size", "4", "--request-length", "8192")
    answer = document["planner"]["answer"]
    assert answer["dp_replicas"] == 4 and answer["attention_dp_workers"] == 1
    assert answer["tokens_total"] == 4 * answer["tokens_per_worker"]
    assert answer["concurrency"][0]["total"] == 4 * answer["concurrency"][0]["per_worker"]


def test_model_given_twice_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--model-path", "qwen3-8b", "--available-bytes", "1GiB"]) == 2
    assert "two models given" in capsys.readouterr().err


def test_ep_size_must_divide_tp(capsys: pytest.CaptureFixture[str]) -> None:
    """moe_tp_size = tp_size // ep_size (sglang/srt/runtime_context.py, derive_parallel_widths): an EP
    size that does not divide TP is refused naming the check; every divisor is planned."""
    assert main(["plan", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--ep-size", "3"]) == 2
    err = capsys.readouterr().err
    assert "--ep-size 3 does not divide --tp 8" in err and "derive_parallel_widths" in err
    assert main(["plan", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--ep-size", "4", "--json"]) == 0
    assert main(["plan", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--expert-parallel-size", "8", "--json"]) == 0


def test_aiter_env_and_moe_runner_flag_are_translated() -> None:
    """SGLANG_USE_AITER=0 turns off the aiter MoE and its fp8 padding (sglang/srt/layers/moe/utils.py,
    get_moe_padding_size); --moe-runner-backend and --ep-size reach the load checks."""
    command = translate(
        ["SGLANG_USE_AITER=0 python -m sglang.launch_server --model m --tp 8 --ep 8 --moe-runner-backend triton"]
    )
    assert command.plan_args == (
        "--no-rocm-aiter", "--model-path", "m", "--tp-size", "8", "--ep-size", "8", "--moe-runner-backend", "triton",
    )  # fmt: skip
    assert translate(["SGLANG_USE_AITER=1 python -m sglang.launch_server --model m"]).ignored == ("SGLANG_USE_AITER=1",)


def test_no_rocm_aiter_brings_the_fp8_moe_refusal_back(capsys: pytest.CaptureFixture[str]) -> None:
    """On MI300X, aiter pads MiniMax-M2.5's 1536 / 8 = 192 columns to 256 (get_moe_weight_sizes), so TP 8
    loads; without aiter Fp8MoEMethod.create_fp8_moe_weight_ tests 192 % 128 and refuses."""
    assert main(["plan", "minimax-m2.5", "--gpu", "MI300X", "--tp", "8", "--json"]) == 0
    capsys.readouterr()
    assert main(["plan", "minimax-m2.5", "--gpu", "MI300X", "--tp", "8", "--no-rocm-aiter"]) == 2
    assert "create_fp8_moe_weight_" in capsys.readouterr().err


# ---- every flag and knob classified; values checked as SGLang's argparse checks them -------------------


def test_every_sglang_flag_is_planned_refused_or_reviewed_as_no_effect() -> None:
    """The invariant: each canonical SGLang flag is in exactly one class (launch_flag_classes)."""
    from kvstrategies.sglang.flag_classes import CONFIG_FLAG, GRAPH_RESERVE_FLAGS, NO_EFFECT, REFUSED_UNLESS
    from kvstrategies.sglang.tables.flags import SGLANG_FLAG_VALUES

    refused = set(NOT_MODELLED) | set(REFUSED_UNLESS) | set(GRAPH_RESERVE_FLAGS) | {CONFIG_FLAG}
    assert not set(NOT_MODELLED) & set(REFUSED_UNLESS) and not (set(NOT_MODELLED) | set(REFUSED_UNLESS)) & set(
        GRAPH_RESERVE_FLAGS
    )
    classes = {"planned": set(MODELLED), "refused": refused, "no effect": set(NO_EFFECT)}
    canonical = {canon for canon, _ in SGLANG_SERVER_FLAGS.values()}
    assert canonical == set(SGLANG_FLAG_VALUES)
    for flag in canonical:
        holders = [label for label, members in classes.items() if flag in members]
        assert len(holders) == 1, f"{flag} is in {holders or 'no class'}"
    listed = set().union(*classes.values())
    assert listed == canonical, sorted(listed ^ canonical)[:5]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--kv-cache-dtype", "float32"], r"--kv-cache-dtype 'float32' is not one of SGLang's choices \(auto, fp8"),
        (["--attention-backend", "nonsense"], "--attention-backend 'nonsense' is not one of SGLang's choices"),
        (["--dtype", "fp8"], "--dtype 'fp8' is not one of SGLang's choices"),
        (["--tp-size", "two"], "--tp-size 'two' is not an integer"),
        (["--mem-fraction-static", "0,8"], "--mem-fraction-static '0,8' is not a number"),
        (["--grammar-backend", "x"], "--grammar-backend 'x' is not one of"),  # an ignored flag: checked too
        (["--max-total-tokens", "1Ki.5"], "is not an integer"),
        (["--config", "server.yaml"], "--config server.yaml makes SGLang read further launch flags from a YAML file"),
        (["--load-format", "bitsandbytes"], r"--load-format bitsandbytes changes GPU memory \(weights loaded"),
        (["--ep-num-redundant-experts", "8"], r"--ep-num-redundant-experts changes GPU memory \(redundant expert"),
        (["--kt-num-gpu-experts", "8"], r"--kt-num-gpu-experts changes GPU memory \(CPU-offloaded experts"),
        (["--model-path="], "--model-path is empty in the pasted command"),
        (["--model-path", " "], "--model-path is empty"),
        (["--disable-radix-cache=1"], "is a switch and takes no value"),
        (["--cuda-graph-backend-decode", "disabled"], "changes SGLang's default --mem-fraction-static"),
        (["--speculative-dflash-block-size", "8"], r"give it as --speculative-num-draft-tokens"),
    ],
)
def test_values_and_flags_sglang_would_refuse_or_that_change_memory_are_refused(argv: list[str], match: str) -> None:
    with pytest.raises(KVCacheConfigError, match=match):
        translate(["python", "-m", "sglang.launch_server", "--model-path", "m", *argv])


def test_harmless_values_of_conditionally_refused_flags_are_ignored() -> None:
    command = translate(["--model-path", "m", "--load-format", "safetensors", "--nnodes", "1", "--kv-canary", "none"])
    assert command.ignored == ("--load-format", "--nnodes", "--kv-canary")
    assert command.plan_args == ("--model-path", "m")


def test_human_readable_sizes_reach_plan_as_sglang_reads_them() -> None:
    """``--max-total-tokens 128k`` is 128,000 (sglang.srt.utils.common.human_readable_int), 1Ki is 1,024."""
    command = translate(["--model-path", "m", "--max-total-tokens", "128k", "--context-length", "32Ki",
                         "--max-prefill-tokens", "8192"])  # fmt: skip
    assert command.plan_args == ("--model-path", "m", "--max-total-tokens", "128000", "--context-length", "32768",
                                 "--max-prefill-tokens", "8192")  # fmt: skip


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ("SGLANG_MAMBA_SSM_DTYPE=float16", "changes KV sizing, which a pasted command does not plan; plan it"),
        ("SGLANG_SWA_EVICTION_INTERVAL=64", "changes KV sizing"),
        ("SGLANG_MOE_PADDING=1", r"changes the weights' format or size on the GPU"),
        ("SGLANG_USE_HND_KVCACHE=1", "selects a feature kvstrategies does not model"),
    ],
)
def test_memory_knobs_in_front_of_the_command_are_refused_by_name(env: str, match: str) -> None:
    with pytest.raises(KVCacheConfigError, match=f"^{env.split('=')[0]} in front of the command {match}"):
        translate([f"{env} python -m sglang.launch_server --model-path m"])


def test_knobs_that_do_not_change_memory_and_other_variables_are_listed_as_ignored() -> None:
    command = translate(["SGLANG_ENABLE_JIT_DEEPGEMM=0 SGLANG_TYPO_KNOB=1 CUDA_VISIBLE_DEVICES=0 "
                         "python -m sglang.launch_server --model-path m"])  # fmt: skip
    assert command.ignored == ("SGLANG_ENABLE_JIT_DEEPGEMM=0", "SGLANG_TYPO_KNOB=1 (not an SGLang knob)",
                               "CUDA_VISIBLE_DEVICES=0")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("python -m sglang.launch_server --model-path 'llama", "no closing quotation"),
        ("python -m sglang.launch_server --model-path llama \\", "no escaped character"),
    ],
)
def test_a_command_a_shell_cannot_split_is_one_clean_error(text: str, match: str) -> None:
    with pytest.raises(KVCacheConfigError, match=f"cannot be split as a shell would \\({match}"):
        translate([text])


def test_a_huge_pasted_command_is_refused_quickly() -> None:
    import time

    started = time.perf_counter()
    with pytest.raises(KVCacheConfigError, match="more than 4,096 words"):
        translate(["--model-path", "m", *["--port", "1"] * 10_000])
    with pytest.raises(KVCacheConfigError, match="more than"):
        translate([" ".join(["--port 1"] * 10_000)])
    assert time.perf_counter() - started < 5  # was 25 s for 20,000 words


def test_cli_pasted_command_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "H100", "--", "python -m sglang.launch_server --model-path 'x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be split" in err[0]


# ---- pasted commands' bounds, flag wording and flag values -------------------------------------------------


def test_an_unknown_case_field_keeps_its_wording() -> None:
    """``flag_wording`` turns ``case field 'tp_size'`` into ``--tp``; a case field with no ``plan``
    flag keeps the whole phrase, quotes and all."""
    assert flag_wording("case field 'tp_size' must be >= 1") == "--tp must be >= 1"
    assert flag_wording("case field 'head_dim' must be >= 1") == "case field 'head_dim' must be >= 1"


def test_a_pasted_command_may_hold_64_kib_of_characters() -> None:
    """``split_command`` reads at most ``MAX_COMMAND_CHARS`` = 64 x 1024 = 65,536 characters (real
    commands are under 200 words): exactly that many are split, one more is refused."""
    assert MAX_COMMAND_CHARS == 65_536
    head = ["python", "-m", "sglang.launch_server", "--model-path"]
    fill = 65_536 - sum(len(t) for t in head)
    assert split_command([*head, "m" * fill])[-1] == "m" * fill
    with pytest.raises(KVCacheConfigError, match="65,536 characters"):
        split_command([*head, "m" * (fill + 1)])


def test_the_dsa_triton_union_takes_sglangs_three_choices() -> None:
    """``--dsa-triton-union`` is declared with ``choices=[0, 2, 4]`` (sglang/srt/arg_groups/fields/exec_.py,
    ``dsa_triton_union``): argparse takes 0, 2 and 4 and refuses any other integer."""
    from kvstrategies.sglang.flag_values import check_flag_value

    flag = "--dsa-triton-union"
    assert [check_flag_value(flag, flag, v) for v in ("0", "2", "4")] == ["0", "2", "4"]
    for value in ("1", "3", "5"):
        with pytest.raises(KVCacheConfigError, match="not one of SGLang's choices"):
            check_flag_value(flag, flag, value)


def test_a_pasted_command_may_hold_4096_words() -> None:
    """``split_command`` reads at most ``MAX_COMMAND_TOKENS`` = 4,096 words: exactly that many are
    read, one more is refused naming the bound."""
    from kvstrategies.sglang.pasted_command import MAX_COMMAND_TOKENS

    assert MAX_COMMAND_TOKENS == 4096
    assert len(split_command(["--x"] * 4096)) == 4096
    with pytest.raises(KVCacheConfigError, match="4,097 words"):
        split_command(["--x"] * 4097)


def test_sglang_serve_alone_is_a_command_with_no_flags() -> None:
    """``sglang serve`` (SGLang's CLI entry point, sglang/cli/main.py) starts the server: the two words
    alone are a launcher with no server arguments, like ``python -m sglang.launch_server``."""
    from kvstrategies.sglang.pasted_command import _strip_launcher

    assert _strip_launcher(["sglang", "serve"]) == ([], [])
    assert _strip_launcher(["python", "-m", "sglang.launch_server"]) == ([], [])


def test_the_log_requests_level_takes_sglangs_four_choices() -> None:
    """``--log-requests-level`` is declared with ``choices=[0, 1, 2, 3]``
    (sglang/srt/arg_groups/fields/observability.py, ``log_requests_level``)."""
    from kvstrategies.sglang.flag_values import check_flag_value

    flag = "--log-requests-level"
    assert [check_flag_value(flag, flag, v) for v in ("0", "1", "2", "3")] == ["0", "1", "2", "3"]
    with pytest.raises(KVCacheConfigError, match="not one of SGLang's choices"):
        check_flag_value(flag, flag, "4")
