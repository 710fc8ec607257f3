"""What SGLang 0.5.23 refuses at launch is refused by ``kvstrategies plan`` (one line, exit 2,
naming the flag and SGLang's check), and config fields left to their default are reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.cli.app import main
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.planner.request import check_page_size
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.sglang.launch_refusals import check_context_length, is_served, served_architectures


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one stderr line of a refused ``plan`` (exit code 2, nothing on stdout)."""
    assert main(["plan", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("kvstrategies: error: ") and err.count("\n") == 1, err
    return err


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", *argv, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def write_config(tmp_path: Path, **changes: Any) -> str:
    config = {**load_preset_config("llama-3.1-8b"), **changes}
    for key in [k for k, v in changes.items() if v is None]:
        config.pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


# ---- heads and TP --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [["--gpu", "H100"], ["--available-bytes", "40GiB"]])
def test_tp_3_on_a_32_head_model_is_refused(capsys: pytest.CaptureFixture[str], mode: list[str]) -> None:
    err = refusal(capsys, "llama-3.1-8b", "--tp", "3", *mode)
    assert "--tp 3 does not divide the model's 32 attention heads" in err
    assert "sglang.srt.layers.linear.QKVParallelLinear.__init__" in err
    assert "1, 2, 4, 8, 16, 32" in err


def test_sglang_spelling_of_tp_is_refused_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--tp 6 does not divide" in refusal(capsys, "llama-3.1-70b", "--tensor-parallel-size", "6", "--gpu", "H100")


def test_kv_head_replication_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, num_attention_heads=24, num_key_value_heads=6, head_dim=128)
    # 24 heads split over 8, but 6 KV heads can neither be split over 8 nor replicated evenly
    err = refusal(capsys, config, "--tp", "8", "--available-bytes", "40GiB")
    assert "6 KV heads cannot be split over a KV-TP size of 8" in err and "QKVParallelLinear" in err
    # 6 KV heads over 4 ranks: not a multiple either
    assert "KV-TP size of 4" in refusal(capsys, config, "--tp", "4", "--available-bytes", "40GiB")
    # 12 ranks replicate each of the 6 KV heads twice: SGLang accepts it
    document = plan_json(capsys, config, "--tp", "12", "--available-bytes", "40GiB")
    assert document["planner"]["tokens"] > 0


def test_mla_checks_only_the_query_heads(capsys: pytest.CaptureFixture[str]) -> None:
    assert "128 attention heads" in refusal(capsys, "deepseek-v3", "--tp", "3", "--available-bytes", "40GiB")
    assert plan_json(capsys, "deepseek-v3", "--tp", "16", "--available-bytes", "40GiB")["planner"]["tokens"] > 0


def test_attention_dp_checks_the_attention_tp_size(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-V3 with TP 8 and DP attention 8: attention TP 1 divides everything
    assert plan_json(capsys, "deepseek-v3", "--tp", "8", "--attn-dp", "8", "--gpu", "H200")["planner"]["tokens"] > 0
    err = refusal(capsys, "llama-3.1-8b", "--tp", "6", "--attn-dp", "2", "--available-bytes", "40GiB")
    assert "attention-TP size 3 (--tp 6 / --attn-dp 2)" in err


def test_cpu_pads_heads_instead_of_refusing(capsys: pytest.CaptureFixture[str]) -> None:
    document = plan_json(capsys, "llama-3.1-8b", "--tp", "3", "--device", "cpu", "--available-bytes", "40GiB")
    assert document["planner"]["tokens"] > 0


# ---- context length ------------------------------------------------------------------------------


def test_context_length_above_the_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refusal(capsys, "llama-3.1-8b", "--gpu", "H100", "--context-length", "10000000")
    assert "--context-length 10,000,000 is above the model's maximum context of 131,072 tokens" in err
    assert "ModelConfig._derive_context_length" in err and "--allow-context-length-override" in err


def test_context_length_override_is_explicit_and_reported(capsys: pytest.CaptureFixture[str]) -> None:
    document = plan_json(
        capsys, "llama-3.1-8b", "--gpu", "H100", "--context-length", "200000", "--allow-context-length-override"
    )
    (entry,) = [d for d in document["planner"]["defaults"] if d["setting"] == "context_length"]
    assert entry["value"] == 200000 and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in entry["reason"]
    assert document["planner"]["fit"]["context_len"] == 200000


def test_context_length_at_the_maximum_is_accepted() -> None:
    assert check_context_length(131072, 131072, allow_override=False) is None
    with pytest.raises(UnsupportedConfigurationError):
        check_context_length(131073, 131072, allow_override=False)


# ---- page size -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["0", "-1", "-64"])
@pytest.mark.parametrize("mode", [["--gpu", "H100"], ["--available-bytes", "40GiB"], ["--gpu-memory", "80GiB"]])
def test_page_size_zero_or_negative_is_refused_on_every_path(
    capsys: pytest.CaptureFixture[str], page: str, mode: list[str]
) -> None:
    err = refusal(capsys, "llama-3.1-8b", "--page-size", page, *mode)
    assert f"--page-size must be a positive number of tokens, got {page}" in err
    assert "sglang.srt.arg_groups.validation_hook.check_server_args" in err


def test_sweep_refuses_a_zero_page_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "llama-3.1-8b", "--gpu", "H100", "--page-size", "1,0"]) == 2
    assert "--page-size must be a positive number of tokens, got 0" in capsys.readouterr().err


def test_page_size_check_accepts_one() -> None:
    check_page_size(1)
    check_page_size(None)


# ---- architecture --------------------------------------------------------------------------------


def test_unserved_architecture_is_refused_with_the_ways_forward(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = write_config(tmp_path, architectures=["MyNewModelForCausalLM"])
    err = refusal(capsys, config, "--available-bytes", "40GiB")
    assert "['MyNewModelForCausalLM']" in err and "_ModelRegistry.resolve_model_cls" in err
    assert "--assume-architecture" in err and "kvstrategies presets" in err


def test_missing_architectures_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refusal(capsys, write_config(tmp_path, architectures=None), "--available-bytes", "40GiB")
    assert "no 'architectures' field" in err


def test_assume_architecture_plans_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, architectures=["MyNewModelForCausalLM"])
    document = plan_json(capsys, config, "--available-bytes", "40GiB", "--assume-architecture", "LlamaForCausalLM")
    (entry,) = [d for d in document["planner"]["defaults"] if d["setting"] == "architecture"]
    assert entry["value"] == "LlamaForCausalLM" and "MyNewModelForCausalLM" in entry["reason"]
    reference = plan_json(capsys, "llama-3.1-8b", "--available-bytes", "40GiB")
    assert document["planner"]["tokens"] == reference["planner"]["tokens"]
    assert main(["plan", config, "--available-bytes", "40GiB", "--assume-architecture", "LlamaForCausalLM"]) == 0
    assert "planned as LlamaForCausalLM" in capsys.readouterr().out


def test_assume_architecture_must_itself_be_served(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, architectures=["MyNewModelForCausalLM"])
    err = refusal(capsys, config, "--available-bytes", "40GiB", "--assume-architecture", "AlsoUnknownForCausalLM")
    assert "--assume-architecture AlsoUnknownForCausalLM is not an architecture" in err


def test_every_preset_architecture_is_served() -> None:
    """Every preset but Falcon-7B, whose transformers class SGLang refuses (resolve_transformers_arch)."""
    for name in preset_names():
        served = any(is_served(arch) for arch in load_preset_config(name)["architectures"])
        assert served or name == "falcon-7b", name
    assert not is_served("MyNewModelForCausalLM")
    assert "DeepseekV4ForCausalLM" in served_architectures()


# ---- defaults applied to the config --------------------------------------------------------------


def test_omitted_config_fields_follow_their_default_and_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = write_config(
        tmp_path, num_key_value_heads=None, head_dim=None, max_position_embeddings=None, torch_dtype=None,
        rope_scaling=None,
    )  # fmt: skip
    document = plan_json(capsys, config, "--available-bytes", "40GiB")
    defaults = {d["setting"]: d for d in document["planner"]["defaults"]}
    assert defaults["num_key_value_heads"]["value"] == 32  # = num_attention_heads
    assert defaults["head_dim"]["value"] == 4096 // 32
    assert defaults["max_position_embeddings"]["value"] == 2048  # SGLang's get_context_length default
    assert defaults["torch_dtype"]["value"] == "float32"
    assert "get_total_num_kv_heads" in defaults["num_key_value_heads"]["reason"]
    # the plan follows them: 32 KV heads x 128 x 2 (K, V) x 2 bytes x 32 layers per token
    assert document["cell_size"] == 32 * 128 * 2 * 2 * 32
    assert document["planner"]["fit"]["context_len"] == 2048


def test_a_complete_config_reports_no_config_defaults(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = plan_json(capsys, write_config(tmp_path, head_dim=128), "--available-bytes", "40GiB")
    settings = {d["setting"] for d in document["planner"]["defaults"]}
    assert not settings & {"num_key_value_heads", "head_dim", "max_position_embeddings", "torch_dtype"}


def test_transformers_default_is_reported_as_the_field_value(capsys: pytest.CaptureFixture[str]) -> None:
    # gemma-3's text config omits max_position_embeddings: Gemma3TextConfig's 131072; SGLang 0.5.23
    # with transformers 5.19 applies no rope factor to it (checked with the SGLang bridge)
    document = plan_json(capsys, "gemma-3-27b", "--available-bytes", "40GiB")
    (entry,) = [d for d in document["planner"]["defaults"] if d["setting"] == "max_position_embeddings"]
    assert entry["value"] == 131072 and "gemma3_text" in entry["reason"]
    assert document["planner"]["fit"]["context_len"] == 131072


def test_falcon_is_refused_as_sglang_refuses_its_transformers_class(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang 0.5.23 has no Falcon class and ``resolve_transformers_arch`` (--model-impl auto) refuses a
    transformers class that is not backend-compatible: "FalconForCausalLM has no SGlang implementation and the
    Transformers implementation is not compatible with SGLang." (recorded: golden/sglang-0.5.23-weights/
    falcon-7b-h100-tp1.json). vLLM has a class for it."""
    from kvstrategies.cli.app import main

    assert main(["plan", "falcon-7b", "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert "the Transformers implementation is not compatible with SGLang" in err
    assert "resolve_transformers_arch" in err and "--engine vllm" in err
    assert main(["plan", "falcon-7b", "--gpu", "H100", "--engine", "vllm"]) == 0
