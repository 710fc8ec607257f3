"""The MTP self-draft's own embedding and LM head, resident while the target's KV pool is sized.

SGLang builds the draft model (``Qwen3_5ForCausalLMMTP``, ``DeepseekV3ForCausalLMNextN`` ...) with a
``VocabParallelEmbedding`` and a ``ParallelLMHead`` of its own and swaps them for the target's only
in ``EAGLEWorkerV2.alloc_memory_pool`` (``init_lm_head``), after ``Scheduler.init_target_memory_pool``
has read the free memory: kvstrategies/sglang/resident.py, ``_self_draft_copies``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.request import DeploymentRequest
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.sglang.draft_model import vocab_rows_per_rank
from kvstrategies.sglang.load_refusals import request_layout
from kvstrategies.sglang.resident import resident_extras

PACKAGE = Path(__file__).resolve().parents[2] / "kvstrategies"
QWEN35_27B: dict[str, Any] = json.loads((PACKAGE / "checkpoints" / "Qwen--Qwen3.5-27B" / "config.json").read_text())
DEEPSEEK_V3: dict[str, Any] = json.loads((PACKAGE / "presets" / "deepseek-v3.json").read_text())
LLAMA_8B = PACKAGE / "presets" / "llama-3.1-8b.json"
NAME = "draft embedding / head copies"


def _extras(config: dict[str, Any], **fields: Any) -> dict[str, int]:
    req = DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu("H200"), **fields)
    extras = resident_extras(req, config, estimate_weights(config), request_layout(req, config))
    return {e.name: e.nbytes for e in extras}


def test_vocab_rows_pad_to_64_then_to_64_tp_when_tp_does_not_divide() -> None:
    """248,320 = 3,880 x 64 rows: 124,160 a rank at TP 2; TP 3 does not divide it, so the table pads to
    a multiple of 192: ceil(248,320 / 192) x 192 = 248,448, 82,816 a rank; 129,280 at TP 8: 16,160."""
    assert vocab_rows_per_rank(248_320, 1) == 248_320
    assert vocab_rows_per_rank(248_320, 2) == 124_160
    assert vocab_rows_per_rank(248_320, 3) == 82_816
    assert vocab_rows_per_rank(129_280, 8) == 16_160
    assert vocab_rows_per_rank(100, 1) == 128


def test_qwen35_mtp_draft_holds_a_bf16_embedding_and_head_while_the_pool_is_sized() -> None:
    """Qwen3.5-27B (vocab 248,320, hidden 5,120, untied, bf16) at TP 1 with EAGLE: 2 x 248,320 x
    5,120 x 2 B = 5,085,593,600 B (4.74 GiB, the figure of sgl-project/sglang#36452); at TP 2 half."""
    assert _extras(QWEN35_27B, speculative_algorithm="EAGLE")[NAME] == 2 * 248_320 * 5_120 * 2 == 5_085_593_600
    assert _extras(QWEN35_27B, speculative_algorithm="NEXTN", tp_size=2)[NAME] == 2 * 124_160 * 5_120 * 2


def test_deepseek_nextn_draft_copies_at_tp8() -> None:
    """DeepSeek-V3 (vocab 129,280, hidden 7,168) at TP 8: 2 x 16,160 x 7,168 x 2 B = 463,339,520 B."""
    assert _extras(DEEPSEEK_V3, speculative_algorithm="EAGLE", tp_size=8)[NAME] == 463_339_520


def test_tied_embeddings_leave_no_head_of_its_own() -> None:
    """``tie_word_embeddings``: ``Qwen3_5ForCausalLMMTP`` points its head at its embedding."""
    tied = {**QWEN35_27B, "tie_word_embeddings": True}
    assert _extras(tied, speculative_algorithm="EAGLE")[NAME] == 248_320 * 5_120 * 2


@pytest.mark.parametrize(
    "fields",
    [
        {},  # no speculative decoding
        {"speculative_algorithm": "NGRAM"},  # no draft model
        {"speculative_algorithm": "EAGLE", "speculative_draft_model_path": str(LLAMA_8B)},  # another model
    ],
)
def test_no_copies_without_a_self_draft(fields: dict[str, Any]) -> None:
    assert NAME not in _extras(QWEN35_27B, **fields)


def test_a_model_without_mtp_layers_has_no_self_draft() -> None:
    llama = json.loads((PACKAGE / "presets" / "llama-3.1-8b.json").read_text())
    assert NAME not in _extras(llama, speculative_algorithm="EAGLE")


# --- --mamba-ssm-dtype: ServerArgs sets SGLANG_MAMBA_SSM_DTYPE (arg_groups/serving_hook.py), which
# sglang.srt.configs.mamba_utils.mamba2_state_dtype reads before the config's mamba_ssm_dtype ---------


def _mamba_plan(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    from kvstrategies.cli.app import main

    config = str(PACKAGE / "checkpoints" / "Qwen--Qwen3.5-27B" / "config.json")
    assert main(["plan", config, "--available-bytes", "40GiB", "--json", *flags]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_mamba_ssm_dtype_bfloat16_halves_the_temporal_state(capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3.5-27B's 48 GDN layers hold a temporal state of 48 heads x 128 x 128 and a conv state of
    (2 x 16 x 128 + 48 x 128) x 3 = 30,720 bf16 values a slot: float32 (the config's) 48 x (786,432 x 4
    + 30,720 x 2) = 153,944,064 B; bfloat16 48 x (786,432 x 2 + 61,440) = 78,446,592 B a slot, so the
    40 GiB budget buys about twice the slots."""
    default = _mamba_plan(capsys)
    bf16 = _mamba_plan(capsys, "--mamba-ssm-dtype", "bfloat16")
    temporal = {
        doc["pool_sizes"]["max_mamba_cache_size"]: next(p for p in doc["pools"] if p["name"] == "mamba.temporal")
        for doc in (default, bf16)
    }
    slots_default, slots_bf16 = sorted(temporal)
    assert temporal[slots_default]["dtype"] == "torch.float32"
    assert temporal[slots_bf16]["dtype"] == "torch.bfloat16"
    assert temporal[slots_bf16]["shape"] == [48, slots_bf16 + 1, 48, 128, 128]
    assert 48 * (786_432 * 4 + 30_720 * 2) == 153_944_064 and 48 * (786_432 * 2 + 30_720 * 2) == 78_446_592
    assert slots_bf16 > 1.9 * slots_default


def test_mamba_ssm_dtype_is_printed_and_read_back(capsys: pytest.CaptureFixture[str]) -> None:
    """The printed command carries the flag, and a pasted command with it plans the same pools."""
    from kvstrategies.cli.app import main

    config = str(PACKAGE / "checkpoints" / "Qwen--Qwen3.5-27B" / "config.json")
    assert main(["plan", config, "--gpu", "H200", "--mamba-ssm-dtype", "float16", "--brief"]) == 0
    assert "--mamba-ssm-dtype float16" in capsys.readouterr().out
    pasted = ["plan", "--available-bytes", "40GiB", "--json", "--", "python", "-m", "sglang.launch_server",
              "--model-path", config, "--mamba-ssm-dtype", "bfloat16"]  # fmt: skip
    assert main(pasted) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pool_sizes"] == _mamba_plan(capsys, "--mamba-ssm-dtype", "bfloat16")["pool_sizes"]


def test_a_mamba_ssm_dtype_outside_sglangs_choices_is_refused() -> None:
    from kvstrategies.errors import KVCacheConfigError

    with pytest.raises(KVCacheConfigError, match="--mamba-ssm-dtype must be one of float32, bfloat16, float16"):
        DeploymentRequest("m", {"hf_config": QWEN35_27B}, available_bytes=2**30, mamba_ssm_dtype="fp8")


# --- a separate draft model (--speculative-draft-model-path): kvstrategies/sglang/draft_model.py ------

EAGLE3_LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
    "draft_vocab_size": 32000, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "max_position_embeddings": 2048, "model_type": "llama",
}  # fmt: skip


def test_eagle3_head_bytes_by_hand() -> None:
    """``LlamaForCausalLMEagle3`` for Llama-3.1-8B, bf16. TP 1: embedding 128,256 x 4,096 = 525,336,576;
    fc 4,096 x 3 x 4,096 = 50,331,648; qkv 2 x 4,096 x (32 + 2 x 8) x 128 = 50,331,648; o 4,096 x 4,096 =
    16,777,216; MLP 3 x 4,096 x 14,336 = 176,160,768; norms 3 x 4,096 + 4,096; head 32,000 x 4,096 =
    131,072,000: 950,026,240 parameters, 1,900,052,480 B. TP 8: embedding 16,032 rows (65,667,072), fc
    replicated, qkv 2 x 4,096 x (4 + 2 x 1) x 128 = 6,291,456, o 2,097,152, MLP 3 x 4,096 x 1,792 =
    22,020,096, head 4,000 rows (16,384,000): 162,807,808 parameters, 325,615,616 B."""
    from kvstrategies.sglang.draft_model import draft_model_bytes, eagle3_draft_bytes

    assert eagle3_draft_bytes(EAGLE3_LLAMA_8B, tp=1) == 2 * 950_026_240 == 1_900_052_480
    assert eagle3_draft_bytes(EAGLE3_LLAMA_8B, tp=8) == 2 * 162_807_808 == 325_615_616
    tied = {**EAGLE3_LLAMA_8B, "tie_word_embeddings": True}
    assert eagle3_draft_bytes(tied, tp=1) == 2 * (950_026_240 - 131_072_000)
    assert draft_model_bytes(EAGLE3_LLAMA_8B, tp=1, attn_tp=1)[0] == 1_900_052_480


def test_a_draft_model_path_charges_the_draft_and_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The draft's weights are resident while the target's pool is sized; the command that realizes the
    plan names the draft, and pasted back it plans the same tokens."""
    from kvstrategies.cli.app import main

    (tmp_path / "config.json").write_text(json.dumps(EAGLE3_LLAMA_8B))
    llama = json.loads((PACKAGE / "presets" / "llama-3.1-8b.json").read_text())
    fields = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": str(tmp_path)}
    assert _extras(llama, **fields)["draft model weights"] == 1_900_052_480
    argv = ["plan", "llama-3.1-8b", "--gpu", "H100", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", str(tmp_path), "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    command = doc["planner"]["sglang_command"]["argv"]
    assert command[command.index("--speculative-draft-model-path") + 1] == str(tmp_path)
    assert main(["plan", "--gpu", "H100", "--json", "--", *command]) == 0
    assert json.loads(capsys.readouterr().out)["sizes"] == doc["sizes"]
