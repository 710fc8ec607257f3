"""``--sglang-version`` on ``plan``, ``sweep``, a pasted launch command and ``verify --launch``."""

from __future__ import annotations

import json

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_SGLANG, parse_release
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.sglang.pasted_command import release_flags, releases_with_flag, translate


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_names_the_release_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--sglang-version", "0.5.20")
    assert code == 0
    assert out.splitlines()[0] == "answer on H100-80GB, TP 1 (SGLang 0.5.20 launch defaults)"
    assert "defaults applied (SGLang 0.5.20 launch for H100-80GB" in out
    code, out, _ = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--sglang-version", "0.5.20.post1", "--json")
    assert code == 0 and json.loads(out)["planner"]["sglang_version"] == "0.5.20"
    code, out, _ = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--json")
    assert json.loads(out)["planner"]["sglang_version"] == NEWEST_SGLANG.text


def test_an_unsupported_release_is_one_line_naming_the_supported(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--sglang-version", "0.5.0")
    assert code == 2 and err.count("\n") == 1
    assert "--sglang-version '0.5.0' is not an SGLang release" in err and "0.5.1, 0.5.2" in err


def test_sweep_plans_for_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    """MiMo-V2-Flash is refused for 0.5.21 (first served in 0.5.22): every cell says so."""
    code, out, _ = run(capsys, "sweep", "mimo-v2-flash", "--gpu", "H200", "--tp", "4", "--sglang-version", "0.5.21")
    assert code == 0
    assert out.splitlines()[0] == "SGLang 0.5.21 launch defaults"
    assert "SGLang 0.5.21 cannot load a config.json of model_type 'mimo_v2_flash'" in out
    code, out, _ = run(capsys, "sweep", "mimo-v2-flash", "--gpu", "H200", "--tp", "4", "--json")
    row = json.loads(out)[0]
    assert row["sglang_version"] == NEWEST_SGLANG.text and "does not load" not in (row["error"] or "")


def test_pasted_command_uses_the_releases_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """``--attn-dp-size`` is a server flag from 0.5.22 on (before: ``--dp-size`` with
    ``--enable-dp-attention``); a pasted 0.5.18 command with it is refused naming the release."""
    old = parse_release("0.5.18")
    assert "--attn-dp-size" not in release_flags(old) and "--attn-dp-size" in release_flags()
    assert releases_with_flag("--attn-dp-size") == (parse_release("0.5.22"), parse_release("0.5.23"))
    with pytest.raises(KVCacheConfigError, match=r"--attn-dp-size is not an SGLang 0.5.18 server flag \(SGLang 0.5.22"):
        translate(["--model-path", "x", "--attn-dp-size", "2"], old)
    assert translate(["--dp-size", "2", "--enable-dp-attention"], old).plan_args == (
        "--dp-size", "2", "--enable-dp-attention",
    )  # fmt: skip
    # an older release's own graph flag changes the default fraction: refused unless it is given
    with pytest.raises(KVCacheConfigError, match="--cuda-graph-max-bs changes SGLang's default"):
        translate(["--cuda-graph-max-bs", "128"], old)
    with pytest.raises(KVCacheConfigError, match="--nsa-prefill-backend changes GPU memory"):
        translate(["--nsa-prefill-backend", "flashmla_sparse"], old)
    argv = ["plan", "--gpu", "H100", "--sglang-version", "0.5.18", "--", "python", "-m", "sglang.launch_server",
            "--model-path", "llama-3.1-8b", "--attn-dp-size", "1"]  # fmt: skip
    code, _, err = run(capsys, *argv)
    assert code == 2 and "not an SGLang 0.5.18 server flag" in err
    argv[argv.index("--attn-dp-size")] = "--dp-size"
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "(SGLang 0.5.18 launch defaults)" in out.splitlines()[0]


def test_verify_launch_recorded_per_release(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    from pathlib import Path

    from kvstrategies.sglang.bridge.launch_check import load_golden

    specs, _ = load_golden(release=parse_release("0.5.21"))
    grid = Path(str(tmp_path)) / "grid.json"
    picked = [s for s in specs if s.preset == "mimo-v2-flash" and s.gpu == "H200"][:3]
    grid.write_text(json.dumps([s.to_dict() for s in picked]), encoding="utf-8")
    code, out, _ = run(capsys, "verify", "--against", "sglang", "--launch", str(grid), "--recorded",
                       "--sglang-version", "0.5.21")  # fmt: skip
    assert code == 0
    assert "SGLang 0.5.21 answers recorded in golden/sglang-0.5.21-launch" in out
    assert "equal on every field          3 (3 refused by both)" in out


def test_every_older_release_flag_is_classified() -> None:
    """Each flag only an older release has (``kvstrategies/sglang/tables/flag_releases.py``) is planned, refused or
    reviewed as not changing memory, in exactly one class (``launch_flag_classes.OLDER_*``)."""
    from kvstrategies.core.releases import supported_releases
    from kvstrategies.sglang.flag_classes import (
        MODELLED,
        OLDER_GRAPH_RESERVE_FLAGS,
        OLDER_NO_EFFECT,
        OLDER_NOT_MODELLED,
        OLDER_RENAMED,
    )

    newest = set(release_flags())
    extra = {canon for r in supported_releases() for opt, (canon, _) in release_flags(r).items() if opt not in newest}
    classes = (set(MODELLED), set(OLDER_NOT_MODELLED), set(OLDER_GRAPH_RESERVE_FLAGS), set(OLDER_NO_EFFECT),
               set(OLDER_RENAMED))  # fmt: skip
    assert set(OLDER_RENAMED.values()) <= MODELLED
    for flag in extra:
        assert sum(flag in c for c in classes) == 1, flag
    assert set().union(*classes[1:]) == extra


def test_run_command_is_in_the_releases_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """``run it`` names the release and spells attention DP the release's way: ``--attn-dp-size``
    from 0.5.22, ``--dp-size N --enable-dp-attention`` before; pasting it back plans the same."""
    argv = ["plan", "llama-3.1-8b", "--gpu", "H200", "--tp", "8", "--attn-dp", "8"]
    code, out, _ = run(capsys, *argv, "--sglang-version", "0.5.18")
    lines = out.splitlines()
    at = lines.index("run it (SGLang 0.5.18)")
    assert code == 0 and lines[at + 1].endswith("--tp-size 8 --dp-size 8 --enable-dp-attention")
    tokens = lines[at + 1].split()
    code, again, _ = run(capsys, "plan", "--gpu", "H200", "--sglang-version", "0.5.18", "--", *tokens)
    assert code == 0 and again.splitlines()[2] == lines[2]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "--tp-size 8 --attn-dp-size 8" in out


def test_the_flag_release_table_is_as_its_tool_writes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kvstrategies/sglang/tables/flag_releases.py`` is generated: read back and written again by
    ``tools/list_sglang_flags.py`` it is the same text, and it has a line for every older release."""
    from kvstrategies.core.releases import supported_releases
    from kvstrategies.sglang.tables.flag_releases import FLAGS_EXTRA, FLAGS_MISSING
    from tests.helpers import TOOLS, tool_module

    monkeypatch.syspath_prepend(str(TOOLS))  # the tool imports its sibling tools/generated_file.py
    tool = tool_module("list_sglang_flags")
    assert tool.render_deltas(tool.read_deltas()) == tool.DELTAS.read_text(encoding="utf-8")
    older = {r.text for r in supported_releases("sglang") if r != NEWEST_SGLANG}
    assert set(FLAGS_MISSING) == set(FLAGS_EXTRA) == older
    # 0.5.15 lacks --attn-dp-size and has its own --dsa-prefill-cp-mode (one value)
    assert "--attn-dp-size" in FLAGS_MISSING["0.5.15"]
    assert FLAGS_EXTRA["0.5.15"]["--dsa-prefill-cp-mode"] == ("--dsa-prefill-cp-mode", "1")


@pytest.mark.parametrize("spelling", ["--sglang-version", "--sglang-ver", "--sglang-v"])
def test_an_abbreviated_release_flag_reads_the_pasted_command_with_that_release(
    spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse accepts a unique prefix of ``--sglang-version``; the pasted command must then be read
    with that release's flags too (0.5.18 has no ``--attn-dp-size``), as with the full spelling."""
    code, _, err = run(capsys, "plan", "--gpu", "H100", spelling, "0.5.18", "--", "python", "-m",
                       "sglang.launch_server", "--model-path", "llama-3.1-8b", "--attn-dp-size", "1")  # fmt: skip
    assert code == 2 and "not an SGLang 0.5.18 server flag" in err
    code, _, err = run(capsys, "plan", "--gpu", "H100", f"{spelling}=0.5.18", "--", "python", "-m",
                       "sglang.launch_server", "--model-path", "llama-3.1-8b", "--attn-dp-size", "1")  # fmt: skip
    assert code == 2 and "not an SGLang 0.5.18 server flag" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "vllm", "--sglang-version", "9.9.9"],
         "--sglang-version is SGLang's; with --engine vllm use --vllm-version"),
        (["plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang", "--vllm-version", "0.33.0"],
         "--vllm-version is a vLLM engine argument; add --engine vllm"),
        (["verify", "--against", "vllm", "--recorded", "--sglang-version", "9.9"],
         "--sglang-version goes with --against sglang"),
        (["verify", "--against", "sglang", "--recorded", "--vllm-version", "0.33.0"],
         "--vllm-version goes with --against vllm"),
    ],
    ids=["plan-vllm-sglang-version", "plan-sglang-vllm-version", "verify-vllm-sglang-version",
         "verify-sglang-vllm-version"],
)
def test_a_release_flag_of_the_engine_not_planned_is_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release flag of the other engine would be silently ignored: it is refused, naming the flag
    that goes with the engine planned."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


@pytest.mark.parametrize(("field", "value"), [("vllm_version", "bogus"), ("sglang_version", "9.9")])
def test_a_case_checks_both_release_fields(field: str, value: str) -> None:
    """A case for SGLang with a bogus ``vllm_version`` (or for vLLM with a bogus ``sglang_version``)
    is refused naming the field, though that engine is not the one planned."""
    from kvstrategies.case import parse_case

    case: dict[str, object] = {"preset": "llama-3.1-8b", "available_bytes": 10 * 2**30, field: value}
    if field == "sglang_version":
        case["engine"] = "vllm"
    with pytest.raises(KVCacheConfigError, match=f"case field '{field}'"):
        parse_case(case)


def test_the_release_messages_read_right(capsys: pytest.CaptureFixture[str]) -> None:
    """"not a vLLM release" (not "an vLLM"); verify names only the --launch flags that were given."""
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "vllm", "--vllm-version", "0.1")
    assert code == 2 and "--vllm-version '0.1' is not a vLLM release" in err
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--sglang-version", "0.1")
    assert code == 2 and "--sglang-version '0.1' is not an SGLang release" in err
    code, _, err = run(capsys, "verify", "--against", "vllm", "--recorded", "--json")
    assert code == 2 and "verify: --json goes with --launch" in err and "--record" not in err.replace("--recorded", "")


def test_plan_prints_the_configurator_sglang_has_in_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang's DeepSeek-V4 class is ``DSV4PoolConfigurator`` in every release; up to 0.5.20 the project sizes it with
    its own ``RatioOnlyDSV4PoolConfigurator``, named only beside SGLang's."""
    case = "cases/release-launch-ratio-deepseek-v4-flash-tp1-fp8-p256-no-ratio.json"
    lines = {}
    for version in ("0.5.20", "0.5.21"):
        code, out, _ = run(capsys, "plan", "--case", case, "--sglang-version", version)
        assert code == 0
        lines[version] = next(line for line in out.splitlines() if line.startswith("strategy "))
    assert lines["0.5.20"].split(None, 1)[1] == "DSV4PoolConfigurator (kvstrategies: RatioOnlyDSV4PoolConfigurator)"
    assert lines["0.5.21"].split(None, 1)[1] == "DSV4PoolConfigurator"


def test_undercounted_pools_are_planned_and_the_overshoot_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """GLM-5 fp8 under 0.5.15: SGLang plans 777,728 tokens (576 B a layer priced, 656 stored); the plan does too and
    says the pools exceed the 40 GiB budget by 4,856,534,528 B, and why (not the padding explanation)."""
    case = "cases/release-undercount-glm-5-tp8-fp8-p64.json"
    code, out, _ = run(capsys, "plan", "--case", case, "--sglang-version", "0.5.15")
    assert code == 0 and "tokens         777,728" in out
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert any("lacks mla-cell-prices-pool-row" in n and "4,856,534,528 B (4.52 GiB) more" in n for n in notes)
    assert "note: the pools exceed the KV budget by 4,856,534,528 B: this release's own sizing prices less" in out


def test_releases_lists_vllms_lines_and_the_rules_between_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["releases"]) == 0
    lines = ("vLLM: 0.11.0, 0.12.0, 0.13.0, 0.14.1, 0.15.1, 0.16.0, 0.17.1, 0.18.1, 0.19.1, 0.20.2, 0.21.0, 0.22.1, "
             "0.23.0, 0.24.0, 0.25.1, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0")
    assert lines in capsys.readouterr().out
    assert main(["releases", "0.33.0", "0.34.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("6 rules and 0 model-table rows differ between vLLM 0.33.0 and vLLM 0.34.0:")
    assert "vllm-dcp-flashmla-sparse-16-bit (0.34.0 and later; holds in 0.34.0)" in out
    assert "vllm-diffkv-fp8=False (0.34.0 and later; holds in 0.34.0)" in out  # FlashAttentionDiffKVImpl refuses fp8
    assert "[budget] vllm-extensible-kv-cache (0.34.0 and later; holds in 0.34.0)" in out
    assert "vllm-default-block-size=64 (0.34.0 and later; holds in 0.34.0)" in out
    assert "vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE" in out
    assert main(["releases", "0.5.23", "0.34.0"]) == 2
    assert "releases of different engines" in capsys.readouterr().err


def test_compare_takes_the_vllm_release(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-V2-Lite bf16 on 10 GiB: 27 layers x 576 x 2 B = 31,104 B a token; vLLM 0.33.0 blocks of 16
    # (497,664 B): 21,575 blocks; 0.34.0 blocks of 64 (1,990,656 B): 5,393 blocks
    argv = ["compare", "deepseek-v2-lite", "--available-bytes", "10GiB", "--request-length", "8192"]
    assert main([*argv, "--vllm-version", "0.33.0"]) == 0
    old = capsys.readouterr().out
    assert main([*argv, "--vllm-version", "0.34.0"]) == 0
    new = capsys.readouterr().out
    assert "vLLM block size: 16 tokens" in old and "21,575" in old
    assert "vLLM block size: 64 tokens" in new and "5,393" in new


def test_the_mamba_strategy_flag_in_its_0_5_13_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.13 spells the Mamba radix strategy ``--mamba-scheduler-strategy`` (``ServerArgs.mamba_scheduler_strategy``;
    0.5.14 renamed it ``--mamba-radix-cache-strategy`` and kept the old one as a deprecated alias): a pasted command
    with it plans that strategy, and the printed command spells it the release's way."""
    code, out, _ = run(capsys, "plan", "--gpu", "H100", "--sglang-version", "0.5.13", "--json", "--",
                       "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-Next-80B-A3B-Instruct",
                       "--tp", "4", "--mamba-scheduler-strategy", "extra_buffer")  # fmt: skip
    assert code == 0
    doc = json.loads(out)["planner"]
    assert "--mamba-scheduler-strategy extra_buffer" in doc["sglang_command"]["text"]
    assert "--mamba-radix-cache-strategy" not in doc["sglang_command"]["text"]
    code, out, _ = run(capsys, "plan", "qwen3-next-80b-a3b", "--gpu", "H100", "--tp", "4", "--sglang-version", "0.5.13",
                       "--json", "--mamba-radix-cache-strategy", "extra_buffer")  # fmt: skip
    same = json.loads(out)["planner"]
    assert code == 0 and (same["tokens"], same["max_running_requests"]) == (doc["tokens"], doc["max_running_requests"])
    assert same["launch"]["mamba_radix_cache_strategy"] == "extra_buffer"


def test_a_mamba_model_plans_for_a_release_without_the_strategy_argument(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.6 has no ``--mamba-scheduler-strategy``: the launch's no_buffer radix cache reaches the plan as unset, so a
    Mamba model plans (its request cap: the slots // 3) instead of being refused for the argument it never got."""
    code, out, err = run(capsys, "plan", "qwen3-next-80b-a3b", "--gpu", "H100", "--tp", "4",
                         "--sglang-version", "0.5.6", "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    sizes = doc["sizes"]
    assert sizes["max_running_requests"] <= sizes["max_mamba_cache_size"] // 3


def test_a_dsa_model_runs_full_attention_dp_under_0_5_5(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.5's DeepSeek NSA override sets dp_size = tp_size: the plan is per attention-DP worker, 8 of them at TP 8
    (0.5.6 keeps the given DP size: one worker)."""
    code, out, err = run(capsys, "plan", "deepseek-v3.2", "--gpu", "H200", "--tp", "8", "--sglang-version", "0.5.5")
    assert code == 0, err
    assert "over 8 attention-DP workers" in out
    weights = next(line for line in out.splitlines() if line.startswith("budget step")).split("weights ")[1]
    code, out, _ = run(capsys, "plan", "deepseek-v3.2", "--gpu", "H200", "--tp", "8", "--sglang-version", "0.5.6")
    assert code == 0 and "attention-DP" not in out
    # the attention weights are replicated over the 8 DP ranks, as with DP attention asked for in 0.5.6
    code, out, _ = run(capsys, "plan", "deepseek-v3.2", "--gpu", "H200", "--tp", "8", "--sglang-version", "0.5.6",
                       "--attn-dp", "8")  # fmt: skip
    assert code == 0
    asked = next(line for line in out.splitlines() if line.startswith("budget step")).split("weights ")[1]
    assert asked.split(" ")[0] == weights.split(" ")[0]


def test_mamba_ssm_dtype_is_refused_up_to_0_5_1(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.1's argparse has no ``--mamba-ssm-dtype`` (0.5.2 added it with Qwen3-Next): the plan is refused in one
    line naming the flag and the release that has it."""
    code, _, err = run(capsys, "plan", "gpt-oss-20b", "--gpu", "H100", "--sglang-version", "0.5.1",
                       "--mamba-ssm-dtype", "bfloat16")  # fmt: skip
    assert code == 2 and "SGLang 0.5.1 has no --mamba-ssm-dtype server argument" in err and "0.5.2 and later" in err
    code, _, _ = run(capsys, "plan", "gpt-oss-20b", "--gpu", "H100", "--sglang-version", "0.5.2",
                     "--mamba-ssm-dtype", "bfloat16")  # fmt: skip
    assert code == 0
