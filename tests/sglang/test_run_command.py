"""The SGLang launch command printed for a plan (and for each fix and re-planned option):
pasted back as ``kvstrategies plan --gpu G -- <command>`` it plans the same deployment."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_SGLANG
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.replan import DoesNotFitError, plan_or_replan
from kvstrategies.sglang.run_command import model_path, sglang_command

#: (kvstrategies flags, the plan's own flags): plans of different kinds (preset, shipped FP8
#: checkpoint, MLA with fp8 KV and a context cap, hybrid SWA with a page and a fraction, DP attention)
PLANS = [
    (["--gpu", "H100"], ["llama-3.1-8b"]),
    (["--gpu", "H100", "--request-length", "4096"], ["Qwen/Qwen3-30B-A3B-FP8", "--tp", "2", "--page-size", "64"]),
    (["--gpu", "H200"], ["kimi-k2", "--tp", "8", "--kv-cache-dtype", "fp8_e4m3", "--context-length", "65536"]),
    (["--gpu", "B200"], ["gpt-oss-120b", "--mem-fraction-static", "0.85", "--chunked-prefill-size", "4096"]),
    (["--gpu", "H200"], ["deepseek-r1", "--tp", "8", "--attn-dp", "8", "--max-running-requests", "512"]),
    (["--gpu", "H100"], ["llama-3.1-8b", "--context-length", "200000", "--allow-context-length-override"]),
]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    cut = argv.index("--") if "--" in argv else len(argv)  # kvstrategies' own flags go before the command
    code = main([*argv[:cut], "--json", *argv[cut:]])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _same_answer(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("final_sizes", "fit", "answer", "launch"):
        assert a["planner"][key] == b["planner"][key], key
    assert a["planner"]["budget"]["available_bytes"] == b["planner"]["budget"]["available_bytes"]
    assert a["pools"] == b["pools"]


@pytest.mark.parametrize(("own", "plan"), PLANS, ids=[" ".join(p) for _, p in PLANS])
def test_the_printed_command_pasted_back_gives_the_same_answer(
    own: list[str], plan: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if plan[0] == "deepseek-r1":
        plan = ["deepseek-ai/DeepSeek-R1", *plan[1:]]
    first = _json(["plan", *plan, *own], capsys)
    command = first["planner"]["sglang_command"]
    assert command["argv"][:3] == ["python", "-m", "sglang.launch_server"]
    pasted = _json(["plan", *own, "--", *command["env"], *command["argv"]], capsys)
    _same_answer(first, pasted)
    as_text = _json(["plan", *own, "--", command["text"]], capsys)  # the one line, as printed
    _same_answer(first, as_text)


@pytest.mark.parametrize(("own", "plan"), PLANS, ids=[" ".join(p) for _, p in PLANS])
def test_every_flag_of_a_newest_release_command_is_a_flag_of_that_release(
    own: list[str], plan: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The newest release's command is not checked against its flag table at run time (the
    planner writes it from that table): this checks it, and that nothing is noted as missing."""
    from kvstrategies.sglang.tables.flags import SGLANG_SERVER_FLAGS

    if plan[0] == "deepseek-r1":
        plan = ["deepseek-ai/DeepSeek-R1", *plan[1:]]
    command = _json(["plan", *plan, *own], capsys)["planner"]["sglang_command"]
    flags = [arg for arg in command["argv"] if arg.startswith("--")]
    assert flags and all(flag in SGLANG_SERVER_FLAGS for flag in flags), flags
    assert not any("a later release's flag" in note for note in command.get("notes", [])), command


def test_the_command_is_printed_after_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100", "--tp", "2", "--page-size", "64"]) == 0
    out = capsys.readouterr().out
    head = out.split("\n\n")[0].splitlines()
    assert head[0] == f"answer on H100-80GB, TP 2 ({NEWEST_SGLANG.label} launch defaults)"
    run = head.index(f"run it ({NEWEST_SGLANG.label})")
    assert head[run + 1] == (
        "  python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B-FP8 --tp-size 2 --page-size 64"
    )
    assert head[run + 2] == "  # on 2 x H100-80GB (one node)"


def test_the_model_path_is_what_sglang_loads() -> None:
    preset = DeploymentRequest("llama-3.1-8b", {"preset": "llama-3.1-8b"}, available_bytes=1)
    assert model_path(preset) == "meta-llama/Llama-3.1-8B"
    shipped = DeploymentRequest("qwen3-235b-a22b-fp8", {"hf_config": {}}, available_bytes=1)
    assert model_path(shipped) == "Qwen/Qwen3-235B-A22B-FP8"
    local = DeploymentRequest("/models/mine", {"hf_config": {}}, available_bytes=1)
    assert model_path(local) == "/models/mine"


def test_what_a_command_cannot_say_is_noted() -> None:
    req = DeploymentRequest("llama-3.1-8b", {"preset": "llama-3.1-8b"}, available_bytes=2**34, weight_dtype="fp8")
    notes = " ".join(sglang_command(req).notes)
    assert "--available-bytes" in notes and "--weight-dtype" in notes
    nvfp4 = sglang_command(req.replace(weight_quantization="nvfp4"))
    assert nvfp4.argv[-2:] == ("--quantization", "modelopt_fp4")
    assert "stored in that format" in " ".join(nvfp4.notes)


# --- each fix's command, pasted back, gives what the fix promised --------------------------------


@pytest.mark.parametrize(("model", "gpu", "tp"), [("llama-3.1-8b", "RTX-4090", 1), ("kimi-k2", "H200", 8)])
def test_each_fix_command_pasted_back_gives_the_fix(
    model: str, gpu: str, tp: int, capsys: pytest.CaptureFixture[str]
) -> None:
    planner = _json(["plan", model, "--gpu", gpu, "--tp", str(tp)], capsys)["planner"]
    assert planner["fixes"]
    for fix in planner["fixes"]:
        on = fix["changes"].get("gpu", gpu)
        command = fix["sglang_command"]
        pasted = _json(["plan", "--gpu", on, "--", *command["argv"]], capsys)["planner"]
        assert (pasted["fit"]["capacity_tokens"], pasted["fit"]["context_fits"]) == (
            fix["capacity_tokens"],
            fix["context_fits"],
        ), fix["flag"]


def test_rtx_4090_fixes_offer_fp8_kv_ranked_by_cost_with_the_cost_said() -> None:
    req = DeploymentRequest("llama-3.1-8b", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("RTX-4090"))
    planned = plan_deployment(req)
    fixes = planned.fixes
    settings = [fix.setting for fix in fixes]
    assert settings[:2] == ["kv_cache_dtype", "weight_quantization"]  # cheapest first: accuracy costs
    assert settings.index("context_length") < settings.index("tp_size") < settings.index("gpu")
    fp8 = fixes[0]
    # the same KV budget, the cell 32 layers x 8 heads x 128 x (K + V) at 1 B = 65,536 B/token instead
    # of 131,072: 1,139,799,247 B // 65,536 = 17,391 tokens instead of // 131,072 = 8,695
    assert planned.budget.available_bytes == 1_139_799_247 and planned.fit.capacity_tokens == 8_695
    assert fp8.capacity_tokens == 17_391
    assert not fp8.context_fits and "accuracy" in fp8.cost
    assert all(fix.cost for fix in fixes)


def test_a_high_memory_fraction_says_what_it_leaves() -> None:
    req = DeploymentRequest("kimi-k2", {"preset": "kimi-k2"}, tp_size=8, gpu=lookup_gpu("H200"))
    fixes = {fix.setting: fix for fix in plan_deployment(req).fixes}
    mfs = fixes["mem_fraction_static"]
    assert mfs.context_fits and "for activations, CUDA graphs" in mfs.cost and "out-of-memory risk" in mfs.cost
    changed = plan_deployment(mfs.request(req), suggest=False)
    slack = changed.budget.slack_bytes
    assert slack is not None and f"{slack / 2**30:.2f} GiB" in mfs.cost


# --- a deployment that does not fit: re-planned options ---------------------------------------


def test_a_launch_that_does_not_fit_gets_replanned_options(capsys: pytest.CaptureFixture[str]) -> None:
    req = DeploymentRequest("llama-3.1-70b", {"preset": "llama-3.1-70b"}, tp_size=2, gpu=lookup_gpu("H100"))
    with pytest.raises(DoesNotFitError) as info:
        plan_or_replan(req)
    message, options = str(info.value), info.value.options
    assert "does not fit 2 x H100-80GB (one node) at TP 2" in message and "speculative" not in message
    assert {option.setting for option in options} >= {"weight_quantization", "tp_size", "gpu"}
    for option in options:  # each planned again, and the plan is what the option says
        again = plan_deployment(option.request(req), suggest=False)
        assert again.fit.capacity_tokens == option.capacity_tokens
    code = main(["plan", "llama-3.1-70b", "--gpu", "H100", "--tp", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert out.startswith("options that fit, each planned again (cheapest first):")
    assert "  --tp 4 " in out and "run:  python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B" in out


def test_json_errors_are_one_object_with_the_same_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, flag in (
        (["plan", "llama-3.1-8b", "--gpu", "H100", "--tp", "3", "--json"], "--tp"),
        (["plan", "llama-3.1-8b", "--gpu", "H100", "--no-such-flag", "--json"], "--no-such-flag"),
        (["plan", "llama-3.1-8b", "--gpu", "H100", "--page-size", "0", "--json"], "--page-size"),
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        document = json.loads(out)
        assert set(document) == {"error", "flag", "fix"} and document["flag"] == flag
        assert err.strip() == f"kvstrategies: error: {document['error']}"
    assert main(["plan", "llama-3.1-70b", "--gpu", "H100", "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["options"] and document["fix"].startswith(document["options"][0]["flag"])
    first = document["options"][0]["sglang_command"]["text"]
    assert shlex.split(first)[:3] == ["python", "-m", "sglang.launch_server"]


def test_brief_is_the_answer_and_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--gpu", "H100", "--brief"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"answer on H100-80GB, TP 1 ({NEWEST_SGLANG.label} launch defaults)" and out[-2:] == [
        "  python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp-size 1",
        "  # on one H100-80GB",
    ]
    assert len(out) <= 15
    assert main(["plan", "llama-3.1-8b", "--gpu", "RTX-4090", "--brief"]) == 0  # context does not fit: + fixes
    brief = capsys.readouterr().out
    assert "fixes, each planned again (cheapest first):" in brief and "defaults applied" not in brief
    assert brief.count("run:  python -m sglang.launch_server") == 5
