"""vLLM's speculative decoding with a model's own MTP layers, each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/config/speculative.py SpeculativeConfig.hf_config_override`` (the
MTP draft's architecture and ``n_predict``), ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py
load_eagle_model`` (the drafter's layers in the same forward context, its embedding and head shared),
``vllm/v1/worker/gpu/model_runner.py`` (the drafter on the last PP rank only),
``vllm/model_executor/layers/mamba/mamba_utils.py`` (``conv_kernel - 1 + num_spec``) and
``vllm/model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec`` (``num_speculative_blocks``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.dtypes import DType
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.presets import load_preset_config
from kvstrategies.vllm.planner.weights import vllm_weights
from kvstrategies.vllm.strategies.drafts import mtp_tokens
from kvstrategies.vllm.strategies.specs import MambaSpec

GIB = 2**30
#: an MTP chain of ``steps`` tokens, in the case's (SGLang's) words
MTP = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1}


def _vllm(preset: str, release: str = "0.33.0", steps: int | None = 3, **fields: object) -> object:
    spec = {} if steps is None else {**MTP, "speculative_num_steps": steps, "speculative_num_draft_tokens": steps + 1}
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **spec, **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_the_mtp_layer_joins_the_target_s_mla_group() -> None:
    # DeepSeek-V3 TP 8, fp8_e4m3, --block-size 64: a latent page of 64 x 576 x 1 B = 36,864; 61 layers + the MTP
    # layer (model.layers.61) = 62 pages a block, 2,285,568 B; 40 GiB // that = 18,791 blocks (61 layers: 19,099)
    fields = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    drafted, plain = _vllm("deepseek-v3", **fields), _vllm("deepseek-v3", steps=None, **fields)
    assert drafted.bytes_per_block == 62 * 36_864 == 2_285_568
    assert drafted.num_gpu_blocks == 40 * GIB // 2_285_568 == 18_791
    assert plain.num_gpu_blocks == 40 * GIB // (61 * 36_864) == 19_099
    assert drafted.groups[0].layers[-1] == 61
    assert drafted.launch.settings_document()["num_speculative_tokens"] == 3
    assert "num_speculative_tokens" not in plain.launch.settings_document()


def test_the_draft_layer_is_the_last_stage_s() -> None:
    # PP 2: the model runners build the drafter on the last PP rank only; stage 0 holds layers 0-30 (31 pages a
    # block), stage 1 layers 31-60 and the MTP layer (31 pages)
    fields = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "pp_size": 2}
    first, last = _vllm("deepseek-v3", **fields), _vllm("deepseek-v3", pp_rank=1, **fields)
    assert 61 not in {layer for g in first.stage_groups for layer in g.layers}
    assert 61 in {layer for g in last.stage_groups for layer in g.layers}
    assert first.bytes_per_block == last.bytes_per_block == 31 * 36_864


def test_gdn_conv_windows_and_state_blocks_hold_the_lookahead() -> None:
    # Qwen3-Next TP 4, 3 speculative tokens: the GDN conv window is 4 - 1 + 3 = 6 tokens of 2,048 channels
    # (24,576 B in bf16) beside the (8, 128, 128) bf16 state (262,144 B): 286,720 B, which the 64-token kernel
    # block aligns to 64 x cdiv(286,720, 64 x 1,024) = 320 tokens; without prefix caching a request holds
    # 1 + 3 state blocks (num_speculative_blocks); the MTP layer is one more full-attention layer (48)
    planned = _vllm("qwen3-next-80b-a3b", tp_size=4, page_size=64, disable_radix_cache=True)
    state = next(s for _, s in planned.layer_specs if isinstance(s, MambaSpec))
    assert state.shapes == ((6, 2_048), (8, 128, 128))
    assert state.state_bytes == 6 * 2_048 * 2 + 8 * 128 * 128 * 2 == 286_720
    assert (state.num_speculative_blocks, planned.block_size) == (3, 320)
    assert state.max_memory_usage_bytes(_limits(planned)) == 4 * 327_680
    attention = [g for g in planned.groups if not isinstance(g.spec, MambaSpec)]
    assert [g.layers[-1] for g in attention] == [48]


def _limits(planned: object) -> object:
    from kvstrategies.vllm.strategies.specs import CacheLimits

    launch = planned.launch  # type: ignore[attr-defined]
    return CacheLimits(launch.max_model_len, launch.max_in_flight_tokens, launch.mamba_cache_mode)


def test_a_sparse_attention_draft_layer_computes_its_own_top_k() -> None:
    # DeepSeek-V3.2: the MTP layer is a sparse-attention layer with its own indexer keys (132 B a token beside
    # the 576-entry latent): one more (indexer, latent) pair in the one UniformTypeKVCacheSpecs group
    planned = _vllm("deepseek-v3.2", tp_size=8, page_size=64)
    by_width = {spec.head_size: layers for layers, spec in planned.layer_specs}  # type: ignore[attr-defined]
    assert 61 in by_width[132] and 61 in by_width[576]
    (group,) = planned.groups
    assert [layer for layer, _ in group.spec.entries].count(61) == 2


@pytest.mark.parametrize(("fields", "words"), [
    ({"speculative_eagle_topk": 4}, "speculative_eagle_topk 4: vLLM's drafts propose a chain (top-k 1)"),
    ({"speculative_algorithm": "EAGLE3"}, "a draft beside an MLA model has attention of its own"),
    ({"speculative_algorithm": "DSPARK"}, "only the model's own MTP layers (EAGLE or NEXTN), EAGLE / EAGLE3"),
])  # fmt: skip
def test_other_speculation_is_refused_with_its_reason(fields: dict[str, object], words: str) -> None:
    case = {"preset": "deepseek-v3", "tp_size": 8, **fields}
    preset = str(case.pop("preset"))
    with pytest.raises(UnsupportedConfigurationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _vllm(preset, **case)


def test_0_19_refuses_mtp_in_its_old_words() -> None:
    # 0.19.1's drafter is not driven by the bridge: MTP is modelled from 0.20.2, and 0.19.1 keeps the plain refusal
    with pytest.raises(UnsupportedConfigurationError) as raised:
        _vllm("deepseek-v3", "0.19.1", tp_size=8)
    assert str(raised.value).startswith("speculative_algorithm EAGLE: vLLM's speculative decoding adds draft "
                                        "layers and lookahead slots; the vLLM strategies")  # fmt: skip


@pytest.mark.parametrize(("config", "tokens"), [
    ({"method": "mtp", "num_speculative_tokens": 3}, 3),
    ({"method": "deepseek_mtp", "num_speculative_tokens": 1}, 1),
    ({"method": "mtp", "num_speculative_tokens": 64}, 64),
])  # fmt: skip
def test_speculative_config_takes_mtp(config: dict[str, object], tokens: int) -> None:
    assert mtp_tokens(config) == tokens


@pytest.mark.parametrize(("config", "words"), [
    ({"method": "eagle3", "num_speculative_tokens": 3}, "method 'eagle3'"),
    ({"method": "mtp", "num_speculative_tokens": 0}, "num_speculative_tokens must be an integer in"),
    ({"method": "mtp", "num_speculative_tokens": 65}, "num_speculative_tokens must be an integer in"),
    ({"num_speculative_tokens": 2}, "method None"),
    ({"method": "mtp", "num_speculative_tokens": True}, "num_speculative_tokens must be an integer in"),
    ({"method": "mtp", "num_speculative_tokens": 2, "model": "x"}, "key 'model' is not modelled"),
    (["mtp"], "must be a JSON object"),
])  # fmt: skip
def test_speculative_config_refuses_what_is_not_mtp(config: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        mtp_tokens(config)


def test_the_weights_hold_the_draft_layers_on_the_last_stage() -> None:
    # a dense 2-layer model with one MTP layer, bf16 over TP 2: the draft adds a decoder layer split over TP
    # (attention 4 x 1,024^2 and MLP 3 x 1,024 x 4,096 parameters, / 2 ranks x 2 B = 16,777,216 B) and what each
    # rank keeps whole: the layer's two norms and the draft's enorm / hnorm / final norm (5 x 1,024) and eh_proj
    # (2 x 1,024^2, a plain nn.Linear in vLLM's MTP layer), x 2 B = 4,204,544 B; its embedding and head are the
    # target's (shared), so they add nothing; stage 0 holds no draft
    config = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 1024,
              "intermediate_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 1000, "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16",
              "max_position_embeddings": 4096, "first_k_dense_replace": 2}  # fmt: skip
    plain = vllm_weights(config, tp=2, pp=2, dtype=DType.BFLOAT16)
    drafted = vllm_weights(config, tp=2, pp=2, dtype=DType.BFLOAT16, mtp=True)
    sharded = (4 * 1024 * 1024 + 3 * 1024 * 4096) // 2 * 2
    whole = (5 * 1024 + 2 * 1024 * 1024) * 2
    assert drafted.per_stage[0] == plain.per_stage[0]
    assert drafted.per_stage[1] - plain.per_stage[1] == sharded + whole == 20_981_760
    assert "; + 0.02 GiB of MTP draft layers on the last stage" in drafted.source  # 20,981,760 B


def test_plan_prints_the_draft(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli import main

    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
    assert main(["plan", "deepseek-v3", "--engine", "vllm", "--gpu", "H200", "--tp", "8", "--speculative-config",
                 spec]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "speculative: 2 tokens a step from the model's 1 MTP layer(s)" in out
    assert "of MTP draft layers on the last stage" in out
    assert main(["plan", "--gpu", "H200", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size",
                 "8", "--speculative-config.method", "mtp"]) == 2  # fmt: skip
    assert "give --speculative-config as one JSON object" in capsys.readouterr().err


def test_mtp_at_pp_2_runs_from_0_30() -> None:
    # vLLM 0.30.0's create_draft_parallel_config gives the draft PP 1; 0.29.0's gives it the target's PP 2, and
    # ModelConfig.verify_with_parallel_config refuses DeepSeekMTP, which does not implement SupportsPP
    fields = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "pp_size": 2}
    with pytest.raises(UnsupportedConfigurationError, match="vLLM 0.29.0 refuses: Pipeline parallelism is not "
                       "supported for this model"):  # fmt: skip
        _vllm("deepseek-v3", "0.29.0", **fields)
    assert _vllm("deepseek-v3", "0.30.0", pp_rank=1, **fields).bytes_per_block == 31 * 36_864
    assert _vllm("deepseek-v3", "0.29.0", steps=None, **fields).bytes_per_block == 31 * 36_864


def test_two_mtp_layers_follow_the_target_s() -> None:
    # a DeepSeek-V3 config with num_nextn_predict_layers 2: DeepSeekMTP builds model.layers.61 and 62, each one
    # more latent page of 64 x 576 x 1 B: 63 x 36,864 = 2,322,432 B a block
    config = {**load_preset_config("deepseek-v3"), "num_nextn_predict_layers": 2}
    case = parse_case({"hf_config": config, "engine": "vllm", "vllm_version": "0.33.0", "available_bytes": 40 * GIB,
                       "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, **MTP,
                       "speculative_num_steps": 2})  # fmt: skip
    planned = plan(case.settings, case.available_bytes).vllm
    assert planned.groups[0].layers[-2:] == (61, 62)
    assert planned.bytes_per_block == 63 * 36_864


def test_the_draft_tokens_stand_for_the_steps_when_none_are_given() -> None:
    # SGLang's chain of top-k 1 proposes num_draft_tokens - 1 tokens a step: 4 draft tokens are 3 speculative tokens
    planned = _vllm("deepseek-v3", steps=None, tp_size=8, speculative_algorithm="EAGLE", speculative_eagle_topk=1,
                    speculative_num_draft_tokens=4)  # fmt: skip
    assert planned.launch.settings_document()["num_speculative_tokens"] == 3
    for draft_tokens in ({"speculative_num_draft_tokens": 1}, {}):  # one draft token, or none given: no lookahead
        with pytest.raises(UnsupportedConfigurationError, match="give speculative_num_steps"):
            _vllm("deepseek-v3", steps=None, tp_size=8, speculative_algorithm="EAGLE", speculative_eagle_topk=1,
                  **draft_tokens)  # fmt: skip


def test_the_planner_spells_vllm_s_mtp_as_a_chain() -> None:
    from kvstrategies.vllm.planner.deployment import case_fields
    from kvstrategies.vllm.planner.request import VLLMPlanRequest

    config = load_preset_config("deepseek-v3")
    request = VLLMPlanRequest(model="deepseek-v3", source={"preset": "deepseek-v3"}, config=config, gpu="H200",
                              tensor_parallel_size=8, num_speculative_tokens=3)  # fmt: skip
    fields = case_fields(request, 1)
    assert {k: fields[k] for k in fields if k.startswith("speculative")} == {
        "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1, "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 4}  # fmt: skip
    assert not any(k.startswith("speculative") for k in case_fields(VLLMPlanRequest(
        model="deepseek-v3", source={"preset": "deepseek-v3"}, config=config, gpu="H200"), 1))  # fmt: skip


def test_a_checkpoint_s_own_mtp_tensors_are_the_draft_s_weights(tmp_path: Path) -> None:
    # a Llama-shaped checkpoint of 3 layers for a 2-layer config: layer 2 is its MTP layer. With the draft, the
    # last stage of PP 2 holds it too, from the headers: 2 x (2 x 64 + 2 x 64^2 + 2 x 16 x 64 + 3 x 128 x 64)
    # = 69,888 B in bf16 (embedding and head shared with the target)
    from ..planner.test_checkpoint import _llama_like, write_safetensors

    write_safetensors(tmp_path / "model.safetensors", _llama_like(layers=3))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
              "max_position_embeddings": 128, "torch_dtype": "bfloat16"}  # fmt: skip
    plain = vllm_weights(config, tp=1, pp=2, dtype=DType.BFLOAT16, checkpoint=str(tmp_path))
    drafted = vllm_weights(config, tp=1, pp=2, dtype=DType.BFLOAT16, checkpoint=str(tmp_path), mtp=True)
    layer = 2 * (2 * 64 + 2 * 64 * 64 + 2 * 16 * 64 + 3 * 128 * 64)
    assert drafted.per_stage[0] == plain.per_stage[0]
    assert drafted.per_stage[1] - plain.per_stage[1] == layer == 69_888
    assert drafted.source.startswith("from the checkpoint headers")
    assert "+ 0.00 GiB of MTP draft layers" in drafted.source


@pytest.mark.parametrize(("text", "words"), [
    ("[" * 100_000, "JSON nested too deeply"),
    ('{"method": "mtp", "method": "mtp", "num_speculative_tokens": 1}', "key 'method' appears twice"),
    ("not json", "invalid JSON at line 1 column 1"),
    ('{"method": "mtp", "num_speculative_tokens": 1e999}', "must be an integer in [1, 64], got inf"),
])  # fmt: skip
def test_a_hostile_speculative_config_is_one_clean_error(text: str, words: str, capsys: pytest.CaptureFixture[str]
                                                         ) -> None:  # fmt: skip
    from kvstrategies.cli import main

    assert main(["plan", "deepseek-v3", "--engine", "vllm", "--gpu", "H200", "--tp", "8", "--speculative-config",
                 text]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_mimo_v2_s_mtp_layer_is_local_attention() -> None:
    # MiMo-V2-Flash TP 4: MiMoV2MTPModel's one layer is sliding-window attention (2 KV heads a rank, K 192, V 128).
    # The groups share one pool of 9 pages a block (the 9 full layers; a page 16 x 2 x 320 x 2 = 20,480 B, the
    # full layers' 32-token block of 1 head the same): 40 GiB // 184,320 = 233,016 blocks either way, and the draft
    # layer (48) takes the last sliding group's padding slot (39 sliding layers in 5 groups of 8: 6 padding -> 5)
    drafted = _vllm("mimo-v2-flash", tp_size=4, steps=2)
    plain = _vllm("mimo-v2-flash", tp_size=4, steps=None)
    last = drafted.groups[-1]
    assert type(last.spec).__name__ == "SlidingWindowSpec" and last.layers[-1] == 48 and len(last.layers) == 8
    assert drafted.bytes_per_block == plain.bytes_per_block == 9 * 20_480
    assert drafted.num_gpu_blocks == plain.num_gpu_blocks == 40 * GIB // 184_320 == 233_016
    assert (plain.padding_layers, drafted.padding_layers) == (6, 5)


def test_mimo_v2_s_mtp_draft_exists_from_0_21() -> None:
    # vLLM 0.20.2's SpeculativeConfig.hf_config_override maps no MTP architecture for mimo_v2_flash, so the method
    # stays unknown; 0.21.0 maps MiMoV2MTPModel
    with pytest.raises(UnsupportedConfigurationError, match="vLLM 0.20.2 refuses: Unsupported speculative "
                       "method: 'mtp'"):  # fmt: skip
        _vllm("mimo-v2-flash", "0.20.2", tp_size=4, steps=2)
    assert _vllm("mimo-v2-flash", "0.21.0", tp_size=4, steps=2).groups[-1].layers[-1] == 48


def test_a_draft_kind_the_layers_lack_is_a_clean_refusal() -> None:
    # MiMo-V2's MTP layer is local attention; given only a full-attention layer to copy, the draft is refused
    # with the reason (not a bare StopIteration)
    from kvstrategies.models.parse import parse_hf_config
    from kvstrategies.vllm.strategies.drafts import VLLMDraft, draft_layer_specs
    from kvstrategies.vllm.strategies.specs import FullAttentionSpec

    geometry = parse_hf_config(load_preset_config("mimo-v2-flash"))
    full = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=192, head_size_v=128, dtype=DType.BFLOAT16)
    with pytest.raises(UnsupportedConfigurationError, match="MTP layer is of the SlidingWindowSpec kind"):
        draft_layer_specs(geometry, {0: full}, VLLMDraft("mtp", num_speculative_tokens=2, num_layers=1))
