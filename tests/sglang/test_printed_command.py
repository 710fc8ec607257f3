"""The printed command is the planned deployment (issue #38): every planned flag that differs
from SGLang's default is printed, a fix promises what its own command plans, a command for an
older release says how to plan it again for that release, and a config.json's folder is the
model path. A property test pastes random deployments back."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_SGLANG


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any] | None]:
    cut = argv.index("--") if "--" in argv else len(argv)
    code = main([*argv[:cut], "--json", *argv[cut:]])
    out, _ = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out = _run(argv, capsys)
    assert code == 0 and out is not None, argv
    return out


def _pasted(command: dict[str, Any]) -> list[str]:
    """The kvstrategies words that plan ``command`` again, as its notes say (or the README's form)."""
    for note in command["notes"]:
        if note.startswith("plan it again: kvstrategies "):
            assert note.endswith(" <this command>"), note
            words = shlex.split(note.removeprefix("plan it again: kvstrategies ").removesuffix(" <this command>"))
            return [*words, *command["env"], *command["argv"]]
    return ["plan", "--", *command["env"], *command["argv"]]


def _tokens(out: dict[str, Any]) -> int:
    return int(out["planner"]["tokens"])


def test_ep_size_and_moe_runner_backend_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(["plan", "minimax-m2.5", "--gpu", "H100", "--tp", "8", "--ep-size", "4",
                 "--moe-runner-backend", "triton"], capsys)  # fmt: skip
    argv = out["planner"]["sglang_command"]["argv"]
    assert argv[argv.index("--ep-size") + 1] == "4"
    assert argv[argv.index("--moe-runner-backend") + 1] == "triton"
    again = _json(["plan", "--gpu", "H100", "--", *argv], capsys)
    assert _tokens(again) == _tokens(out)
    assert again["planner"]["final_sizes"] == out["planner"]["final_sizes"]


def test_the_ep_size_is_kept_by_every_fix_command(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(["plan", "minimax-m2.5", "--gpu", "H100", "--tp", "8", "--ep-size", "4",
                 "--context-length", "196608", "--max-total-tokens", "100000"], capsys)  # fmt: skip
    for fix in out["planner"]["fixes"]:
        assert "--ep-size" in fix["sglang_command"]["argv"], fix


def test_a_dcp_fix_promises_what_its_command_plans(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(["plan", "llama-3.1-8b", "--gpu", "L4", "--tp", "2", "--dcp-size", "2"], capsys)
    fixes = out["planner"]["fixes"]
    assert fixes
    for fix in fixes:
        gpu = str(fix["value"]) if fix["setting"] == "gpu" else "L4"
        again = _json(["plan", "--gpu", gpu, "--", *fix["sglang_command"]["argv"]], capsys)
        assert _tokens(again) == fix["capacity_tokens"], fix["flag"]


def test_a_dcp_fix_gain_is_against_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--gpu", "L4", "--tp", "2", "--dcp-size", "2", "--brief"]) == 0
    text = capsys.readouterr().out
    answer = int(text.split("KV cache")[1].split("tokens")[0].replace(",", ""))
    line = next(line for line in text.splitlines() if "--kv-cache-dtype fp8_e4m3" in line and "->" in line)
    promised = int(line.split("->")[1].split("tokens")[0].replace(",", ""))
    assert f"(x{promised / answer:.2f})" in line


def test_an_older_release_command_carries_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(["plan", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--sglang-version", "0.5.15"], capsys)
    command = out["planner"]["sglang_command"]
    words = _pasted(command)
    assert "--sglang-version" in words and words[words.index("--sglang-version") + 1] == "0.5.15"
    again = _json(words, capsys)
    assert _tokens(again) == _tokens(out)
    newest = _json(["plan", "deepseek-v3", "--gpu", "H200", "--tp", "8"], capsys)
    assert not any("--sglang-version" in note for note in newest["planner"]["sglang_command"]["notes"])
    assert NEWEST_SGLANG.text not in " ".join(newest["planner"]["sglang_command"]["notes"])


def test_a_config_json_path_prints_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.presets import load_preset_config as load_preset

    folder = tmp_path / "my model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(load_preset("llama-3.1-8b")))
    plan = _json(["plan", str(folder / "config.json"), "--gpu", "H100"], capsys)
    argv = plan["planner"]["sglang_command"]["argv"]
    assert argv[argv.index("--model-path") + 1] == str(folder)
    again = _json(["plan", "--gpu", "H100", "--", *argv], capsys)
    assert _tokens(again) == _tokens(plan)


PRESETS = ["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3", "minimax-m2.5", "gpt-oss-20b", "llama-3.1-70b",
           "qwen3-next-80b-a3b"]  # fmt: skip
#: an EAGLE3 head's config.json (the draft model a --speculative-draft-model-path names)
EAGLE3_DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
    "draft_vocab_size": 32000, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "max_position_embeddings": 2048, "model_type": "llama",
}  # fmt: skip


@pytest.fixture(scope="module")
def eagle3_draft(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("eagle3-draft")
    (folder / "config.json").write_text(json.dumps(EAGLE3_DRAFT))
    return str(folder)


def _pasted_back_plans_the_same(
    capsys: pytest.CaptureFixture[str], model: str, gpu: str, tp: int, ep: int = 1, dcp: int = 1, pp: int = 1,
    attn_dp: int = 1, kv: str | None = None, page: int | None = None, release: str | None = None,
    draft: bool | str = False, context: int | None = None, ssm: str | None = None,
) -> bool:  # fmt: skip
    """Plan the deployment; if it plans, its printed command pasted back must plan the same and every
    fix's command what the fix promised. False when the planner refuses the deployment."""
    argv = ["plan", model, "--gpu", gpu, "--tp", str(tp)]
    for flag, value, default in (("--ep-size", ep, 1), ("--dcp-size", dcp, 1), ("--pp-size", pp, 1),
                                 ("--attn-dp", attn_dp, 1), ("--kv-cache-dtype", kv, None),
                                 ("--page-size", page, None), ("--sglang-version", release, None),
                                 ("--context-length", context, None), ("--mamba-ssm-dtype", ssm, None)):  # fmt: skip
        if value != default:
            argv += [flag, str(value)]
    if context is not None:
        argv.append("--allow-context-length-override")
    if draft is True:
        argv += ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2",
                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]  # fmt: skip
    elif draft:  # the folder of a separate EAGLE3 draft model
        argv += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft]
    code, out = _run(argv, capsys)
    if out is None:
        return False
    command = out["planner"]["sglang_command"]
    again = _json(_pasted(command)[:1] + ["--gpu", gpu] + _pasted(command)[1:], capsys)
    assert _tokens(again) == _tokens(out), (argv, command["text"])
    assert again["planner"]["final_sizes"] == out["planner"]["final_sizes"], argv
    for fix in out["planner"]["fixes"]:
        fixed = fix["sglang_command"]
        fix_gpu = str(fix["value"]) if fix["setting"] == "gpu" else gpu
        words = _pasted(fixed)
        promised = _json(words[:1] + ["--gpu", fix_gpu] + words[1:], capsys)
        assert _tokens(promised) == fix["capacity_tokens"], (argv, fix["flag"], fixed["text"])
    return True


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    model=st.sampled_from(PRESETS),
    gpu=st.sampled_from(["H100", "H200", "B200", "L40S", "L4", "A100-40GB"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    ep=st.sampled_from([1, 2, 4]),
    dcp=st.sampled_from([1, 2]),
    pp=st.sampled_from([1, 2]),
    attn_dp=st.sampled_from([1, 2]),
    kv=st.sampled_from([None, "fp8_e4m3"]),
    page=st.sampled_from([None, 16, 64]),
    release=st.sampled_from([None, "0.5.15", "0.5.18", "0.5.21"]),
    draft=st.sampled_from([None, "mtp", "eagle3"]),
    context=st.sampled_from([None, 262144]),
    ssm=st.sampled_from([None, "bfloat16"]),
)
def test_random_deployments_pasted_back_plan_the_same(
    model: str, gpu: str, tp: int, ep: int, dcp: int, pp: int, attn_dp: int, kv: str | None,
    page: int | None, release: str | None, draft: str | None, context: int | None, ssm: str | None,
    capsys: pytest.CaptureFixture[str], eagle3_draft: str,
) -> None:  # fmt: skip
    ep, dcp, attn_dp = min(ep, tp), min(dcp, tp), min(attn_dp, tp)  # fewer deployments refused for their widths
    drafted: bool | str = {None: False, "mtp": True, "eagle3": eagle3_draft}[draft]
    _pasted_back_plans_the_same(capsys, model, gpu, tp, ep, dcp, pp, attn_dp, kv, page, release, drafted, context,
                                ssm)  # fmt: skip


@pytest.mark.parametrize(
    "deployment",
    [
        {"model": "minimax-m2.5", "gpu": "H200", "tp": 8, "ep": 4},
        {"model": "llama-3.1-8b", "gpu": "L4", "tp": 2, "dcp": 2},
        {"model": "llama-3.1-70b", "gpu": "H100", "tp": 4, "draft": True},
        {"model": "deepseek-v3", "gpu": "H200", "tp": 8, "release": "0.5.15"},
        {"model": "qwen3-30b-a3b", "gpu": "H100", "tp": 2, "kv": "fp8_e4m3", "page": 64, "attn_dp": 2},
        {"model": "qwen3-next-80b-a3b", "gpu": "H200", "tp": 4, "ssm": "bfloat16", "draft": True},
        {"model": "llama-3.1-8b", "gpu": "H100", "tp": 1, "draft": "eagle3"},
    ],
    ids=["ep", "dcp", "draft", "older-release", "fp8-attn-dp", "mamba-bf16-state-mtp", "eagle3-draft-model"],
)
def test_the_property_s_kinds_of_deployment_plan_and_paste_back(
    deployment: dict[str, Any], capsys: pytest.CaptureFixture[str], eagle3_draft: str
) -> None:
    """The kinds the property test draws (EP, DCP, drafts, an older release, attention DP, a bf16
    Mamba state, a separate EAGLE3 draft) each plan, so the property is never met by refusals alone."""
    if deployment.get("draft") == "eagle3":
        deployment = {**deployment, "draft": eagle3_draft}
    assert _pasted_back_plans_the_same(capsys, **deployment)
