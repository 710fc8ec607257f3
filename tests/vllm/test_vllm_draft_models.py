"""vLLM's separate draft model (``--speculative-config '{"method": "draft_model", "model": DRAFT}'``, SGLang's
``--speculative-algorithm STANDALONE``), each rule against a hand-computed expectation.

Sources (vLLM 0.20.2 to 0.34.0): ``vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py
StandaloneARSpeculator.load_draft_model`` (0.34.0) and ``vllm/v1/spec_decode/draft_model.py DraftModelProposer``
(0.20.2 to 0.33.0): the draft is built under the ``draft_model`` prefix with the target's dtype and cache config, so its
attention layers join the target's KV cache groups; its ``make_layers`` splits them over the target's pipeline group
(``vllm/distributed/utils.py get_pp_indices``). Each expectation is also vLLM's own answer through the bridge
(``golden/vllm-0.34.0/vllm-standalone-*.json``, ``tools/record_golden.py --engine vllm``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.vllm.strategies.drafts import speculative_request
from kvstrategies.vllm.strategies.engine_args import vllm_deployment

GIB = 2**30


def _case(release: str = "0.34.0", **fields: Any) -> Any:
    base: dict[str, Any] = {"preset": "qwen3-8b", "engine": "vllm", "vllm_version": release, "page_size": 32,
                            "kv_cache_dtype": "bf16", "available_bytes": 40 * GIB,
                            "speculative_algorithm": "STANDALONE", "speculative_eagle_topk": 1,
                            "speculative_num_steps": 3, "speculative_num_draft_tokens": 4,
                            "eagle_draft_num_layers": 2}  # fmt: skip
    return parse_case({**base, **fields})


def _answer(case: Any) -> Any:
    answer = plan(case.settings, case.available_bytes).vllm
    assert answer is not None
    return answer


def _layers(answer: Any) -> list[int]:
    """The layers of the stage's groups."""
    return sorted(layer for group in answer.stage_groups for layer in group.layers)


def test_a_standalone_target_launches_a_draft_model() -> None:
    case = _case()
    draft = vllm_deployment(case.settings, case.available_bytes).draft
    assert draft is not None and draft.method == "draft_model" and draft.is_head
    # the draft is the case's 2 layers with the target's attention: Qwen3-8B's 8 KV heads of 128
    assert (draft.num_layers, draft.num_kv_heads, draft.head_dim, draft.num_speculative_tokens) == (2, 8, 128, 3)
    assert draft.speculative_config("<draft>") == {"method": "draft_model", "num_speculative_tokens": 3,
                                                   "model": "<draft>"}  # fmt: skip


def test_the_draft_layers_join_the_targets_group() -> None:
    # a layer's block: 2 (K, V) x 32 tokens x 8 heads x 128 x 2 B = 131,072 B; 36 target + 2 draft layers =
    # 4,980,736 B a block; 40 GiB // 4,980,736 = 8,623 blocks (vLLM 0.34.0 and 0.33.0 record 8,623, layers 0-37)
    answer = _answer(_case())
    assert answer.bytes_per_block == 38 * 131_072 == 4_980_736
    assert answer.num_gpu_blocks == 40 * GIB // 4_980_736 == 8_623
    assert [list(group.layers) for group in answer.groups] == [list(range(38))]


def test_a_draft_model_holds_the_last_stages_share_of_its_layers() -> None:
    # PP 2: the draft's make_layers splits its 2 layers over the target's pipeline group, get_pp_indices(2, 1, 2)
    # = (1, 2): the last stage holds target layers 18-35 and draft layer 1 (index 36 + 1 = 37), 19 x 131,072 B =
    # 2,490,368 B a block, 40 GiB // 2,490,368 = 17,246 blocks on both stages (vLLM records layer 37 alone)
    last = _answer(_case(pp_size=2, pp_rank=1))
    assert _layers(last) == [*range(18, 36), 37]
    assert last.num_gpu_blocks == 40 * GIB // (19 * 131_072) == 17_246
    assert _answer(_case(pp_size=2, pp_rank=0)).num_gpu_blocks == 17_246
    # PP 3: get_pp_indices(2, 2, 3) = (2, 2): the stage that runs the draft holds none of its layers; Llama-3.1-70B
    # TP 4, 16-token blocks: 2 heads x 128 x 2 x 2 B x 16 = 16,384 B a layer, 26 layers (54-79) = 425,984 B,
    # 40 GiB // 425,984 = 100,824 on that stage; stage 0's 27 layers (442,368 B) set 97,090 for all
    none = _answer(_case(preset="llama-3.1-70b", tp_size=4, pp_size=3, pp_rank=2, page_size=16))
    assert _layers(none) == list(range(54, 80))
    assert none.num_gpu_blocks == 40 * GIB // (27 * 16_384) == 97_090


def test_a_draft_model_leaves_async_scheduling_off_before_0_28_0() -> None:
    # 0.27.1's VllmConfig.__post_init__ turns the default async scheduling off for a method not of the EAGLE / MTP
    # kind (draft_model among them): one batch in flight at PP 1, 8,192 tokens; 0.28.0 keeps it on: 2 batches (the
    # V1 runner at PP 1). The blocks are the same, 8,623 (both recorded by vLLM)
    older, newer = _answer(_case("0.27.1")), _answer(_case("0.28.0"))
    assert (older.launch.async_scheduling, older.launch.max_concurrent_batches) == (False, 1)
    assert (newer.launch.async_scheduling, newer.launch.max_concurrent_batches) == (True, 2)
    assert older.num_gpu_blocks == newer.num_gpu_blocks == 8_623


def test_a_draft_of_other_attention_makes_one_uniform_type_group() -> None:
    # Llama-3.1-8B TP 2: 4 KV heads x 128 x 2 x 2 B x 16 = 32,768 B a target layer; the draft's 4 heads of 64 at
    # TP 2: 2 x 64 x 2 x 2 B x 16 = 8,192 B; the pages differ, so the full-attention layers form one
    # UniformTypeKVCacheSpecs group of 32 x 32,768 + 4 x 8,192 = 1,081,344 B a block: 40 GiB // that = 39,718
    answer = _answer(_case(preset="llama-3.1-8b", tp_size=2, page_size=16, eagle_draft_num_layers=4,
                           eagle_draft_num_kv_heads=4, eagle_draft_head_dim=64))  # fmt: skip
    assert [type(group.spec).__name__ for group in answer.groups] == ["UniformTypeKVCacheSpecs"]
    assert answer.bytes_per_block == 32 * 32_768 + 4 * 8_192 == 1_081_344
    assert answer.num_gpu_blocks == 40 * GIB // 1_081_344 == 39_718


def test_a_partition_refuses_a_draft_model_in_vllms_words() -> None:
    # VLLM_PP_LAYER_PARTITION 30,50: the draft's get_pp_indices checks the same partition against its 2 layers
    case = _case(preset="llama-3.1-70b", tp_size=4, pp_size=2, pp_rank=1, page_size=16,
                 env={"SGLANG_PP_LAYER_PARTITION": "30,50"})  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError,
                       match=r"sum\(partitions\)=80 does not match num_hidden_layers=2"):  # fmt: skip
        plan(case.settings, case.available_bytes)


def test_draft_models_are_planned_from_0_20_2() -> None:
    # 0.20.2's DraftModelProposer (v1/spec_decode/draft_model.py) builds the same layers: Qwen3-8B + 2 draft layers,
    # 32-token blocks, 38 x 131,072 B = 4,980,736 B a block, 40 GiB // 4,980,736 = 8,623 blocks (recorded by 0.20.2)
    assert _answer(_case("0.20.2")).num_gpu_blocks == 40 * GIB // (38 * 131_072) == 8_623
    # 0.19.1's drafter has no llm_base_proposer for the bridge to drive: speculative decoding is not modelled there
    case = _case("0.19.1")
    with pytest.raises(UnsupportedConfigurationError, match="vLLM's speculative decoding adds draft layers"):
        plan(case.settings, case.available_bytes)


def test_a_draft_model_runs_on_the_v1_runner_before_0_31_0() -> None:
    # Model Runner V2 takes method draft_model from 0.31.0 (VllmConfig._get_v2_model_runner_unsupported_features);
    # 0.30.0 runs the V1 runner, which overlaps pp = 2 batches at PP 2 with async scheduling (V2: pp + 1 = 3), so
    # max_in_flight_tokens = 2 x 8,192 = 16,384 (0.31.0: 24,576); the layers and blocks are the same: 17,246
    older, newer = _answer(_case("0.30.0", pp_size=2, pp_rank=1)), _answer(_case("0.31.0", pp_size=2, pp_rank=1))
    assert (older.launch.model_runner_v2, older.launch.max_concurrent_batches) == (False, 2)
    assert (newer.launch.model_runner_v2, newer.launch.max_concurrent_batches) == (True, 3)
    assert (older.launch.max_in_flight_tokens, newer.launch.max_in_flight_tokens) == (16_384, 24_576)
    assert older.num_gpu_blocks == newer.num_gpu_blocks == 17_246
    # before 0.30.0 the draft's parallel config keeps the target's PP, which a draft model's class supports
    # (SupportsPP), unlike an MTP draft: 0.29.0 plans it, the last stage holding draft layer 1 (index 37)
    assert _layers(_answer(_case("0.29.0", pp_size=2, pp_rank=1))) == [*range(18, 36), 37]


def test_a_draft_model_needs_its_layers_and_softmax_attention() -> None:
    bare = _case(eagle_draft_num_layers=None)
    with pytest.raises(UnsupportedConfigurationError, match="draft model's layers are not given"):
        plan(bare.settings, bare.available_bytes)
    # GLM-4.5 names one MTP layer: a path-less STANDALONE draft reads it, as SGLang does
    glm = _case(preset="glm-4.5", tp_size=8, page_size=64, eagle_draft_num_layers=None)
    draft = vllm_deployment(glm.settings, glm.available_bytes).draft
    assert draft is not None and draft.num_layers == 1
    mla = _case(preset="deepseek-v2-lite", page_size=64)
    with pytest.raises(UnsupportedConfigurationError, match="a draft beside an MLA model has attention of its own"):
        plan(mla.settings, mla.available_bytes)


def test_a_pasted_speculative_config_takes_a_draft_model() -> None:
    assert speculative_request({"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4}) \
        == ("draft_model", 4, "Qwen/Qwen3-0.6B")  # fmt: skip
    with pytest.raises(ValueError, match="needs the draft"):
        speculative_request({"method": "draft_model", "num_speculative_tokens": 4})


def test_the_planner_adds_a_draft_models_layers_and_weights(tmp_path: Any, capsys: Any) -> None:
    import json

    from kvstrategies.cli import main

    # a 0.6B-shaped draft: 28 layers of 8 KV heads of 128, hidden 1,024, MLP 3,072, tied embeddings
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
              "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "torch_dtype": "bfloat16",
              "tie_word_embeddings": True, "rope_theta": 1000000}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = json.dumps({"method": "draft_model", "model": str(tmp_path), "num_speculative_tokens": 4})
    assert main(["plan", "llama-3.1-70b", "--engine", "vllm", "--kv-cache-memory-bytes", "40G", "--tp", "4",
                 "--speculative-config", spec, "--json"]) == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)["plan"]
    # Llama-3.1-70B TP 4, block 64 (FLASH_ATTN's): 2 heads x 128 x 2 x 2 B x 64 = 65,536 B a layer; the draft's
    # 8 / 4 = 2 heads of 128 give the same page, so one group of 80 + 28 = 108 layers, 7,077,888 B a block:
    # 40 GiB // 7,077,888 = 6,068 blocks
    assert [len(group["layers"]) for group in document["kv_cache_groups"]] == [108]
    assert document["num_gpu_blocks"] == 40 * GIB // (108 * 65_536) == 6_068
    # the budget: the last stage's weights hold the draft model's, as vllm_weights sizes that config at TP 4
    from kvstrategies.core.dtypes import DType
    from kvstrategies.vllm.planner.weights import vllm_weights

    def weights(*extra: str) -> int:
        assert main(["plan", "llama-3.1-70b", "--engine", "vllm", "--gpu", "H100", "--tp", "4", *extra, "--json"]) == 0
        return int(json.loads(capsys.readouterr().out)["budget"]["stages"][-1]["weights_bytes"])

    draft = vllm_weights(config, tp=4, pp=1, dtype=DType.BFLOAT16).per_stage[-1]
    assert weights("--speculative-config", spec) - weights() == draft > 0


# ---- an EAGLE head of the target's MLA latent (vllm-mla-eagle-heads) --------------------------------------------


def _eagle(release: str = "0.34.0", **fields: Any) -> Any:
    return _case(release, **{"speculative_algorithm": "EAGLE", "preset": "deepseek-v2-lite", "page_size": 64,
                             **fields})  # fmt: skip


def test_an_eagle_head_beside_an_mla_model_keeps_its_latent() -> None:
    # DeepSeek-V2-Lite has no MTP layers: the head is DeepSeek MTP-style (deepseek_eagle.py), 2 layers of the
    # target's 512 + 64 = 576-wide latent, bf16, 64 tokens: 576 x 2 B x 64 = 73,728 B a layer, 27 + 2 layers =
    # 2,138,112 B a block, 40 GiB // that = 20,087 blocks (vLLM 0.34.0 and 0.33.0 record 20,087, layers 0-28)
    case = _eagle()
    draft = vllm_deployment(case.settings, case.available_bytes).draft
    assert draft is not None and draft.latent and draft.num_kv_heads is None and draft.num_layers == 2
    answer = _answer(case)
    assert _layers(answer) == list(range(29))
    assert answer.bytes_per_block == 29 * 73_728 == 2_138_112
    assert answer.num_gpu_blocks == 40 * GIB // 2_138_112 == 20_087
    # Kimi-K2 fp8 TP 8, one head layer: 576 x 1 B x 64 = 36,864 B, 62 layers: 40 GiB // 2,285,568 = 18,791
    kimi = _answer(_eagle(preset="kimi-k2", tp_size=8, kv_cache_dtype="fp8_e4m3", eagle_draft_num_layers=1))
    assert kimi.num_gpu_blocks == 40 * GIB // (62 * 36_864) == 18_791


def test_latent_heads_are_planned_from_0_20_2_and_not_as_eagle3() -> None:
    # 0.20.2's EagleDeepseekV3ForCausalLM builds the same 2 layers: 29 x 73,728 B, 20,087 blocks (recorded by 0.20.2)
    assert _answer(_eagle("0.20.2")).num_gpu_blocks == 40 * GIB // (29 * 73_728) == 20_087
    older = _eagle("0.19.1")
    with pytest.raises(UnsupportedConfigurationError, match="vLLM's speculative decoding adds draft layers"):
        plan(older.settings, older.available_bytes)
    eagle3 = _eagle(speculative_algorithm="EAGLE3")
    with pytest.raises(UnsupportedConfigurationError, match="a draft beside an MLA model has attention of its own"):
        plan(eagle3.settings, eagle3.available_bytes)
    # beside DeepSeek sparse attention the head would need its own indexer: refused too (GLM-5 has MTP layers, so
    # its EAGLE case is its MTP; a head shape given makes it a Llama head)
    glm = _eagle(preset="glm-5", tp_size=8, kv_cache_dtype="fp8_e4m3")
    assert vllm_deployment(glm.settings, glm.available_bytes).draft.method == "mtp"  # type: ignore[union-attr]


def test_a_latent_head_beside_kimi_linear_is_a_bucket_of_its_own_in_0_31_0() -> None:
    # Kimi-Linear TP 1 bf16 + 1 head layer, 60 GiB: 20 KDA layers and 7 MLA layers, pages unified at 2,048 tokens:
    # 2,048 x 576 x 2 B = 2,359,296 B a layer. 0.32.0: the head's layer joins the MLA bucket (8), group size 8:
    # 3 KDA groups (7, 7, 6) and 1 MLA group, 8 x 2,359,296 B a block, 60 GiB // 18,874,368 = 3,413 blocks.
    # 0.31.0: MLAAttention records max_tp_shards 1 and Kimi-Linear's MLA none, so the head is a bucket of 1: group
    # size 1, 28 groups of one layer, 60 GiB // 2,359,296 = 27,306 blocks (both recorded by vLLM)
    fields = {"preset": "kimi-linear-48b-a3b", "page_size": 1, "eagle_draft_num_layers": 1,
              "available_bytes": 60 * GIB}  # fmt: skip
    newer, older = _answer(_eagle("0.32.0", **fields)), _answer(_eagle("0.31.0", **fields))
    assert [len(group.layers) for group in newer.groups] == [7, 7, 6, 8]
    assert newer.num_gpu_blocks == 60 * GIB // (8 * 2_359_296) == 3_413
    assert [len(group.layers) for group in older.groups] == [1] * 28
    assert [group.layers for group in older.groups][-1] == (27,)
    assert older.num_gpu_blocks == 60 * GIB // 2_359_296 == 27_306


def test_a_kda_conv_window_holds_the_lookahead_from_0_27_1() -> None:
    # Kimi-Linear TP 1 bf16 + 1 head layer, 3 tokens, 60 GiB: a KDA conv state of 3 x 32 x 128 = 12,288 channels.
    # 0.26.0's kda_state_shape leaves the lookahead out: 3 rows (kernel 4 - 1), 3 x 12,288 x 2 B + the float32
    # 32 x 128 x 128 state (2,097,152 B) = 2,170,880 B; the MLA page is 1,152 B a token, so the block is
    # 32 x cdiv(2,170,880, 32 x 1,152) = 1,888 tokens, 2,174,976 B, and 60 GiB // (8 x 2,174,976) = 3,702 blocks.
    # 0.27.1: 6 rows, 2,244,608 B, 128 x cdiv(2,244,608, 128 x 1,152) = 2,048 tokens, 3,413 blocks (both recorded)
    fields = {"preset": "kimi-linear-48b-a3b", "page_size": 1, "eagle_draft_num_layers": 1,
              "available_bytes": 60 * GIB}  # fmt: skip
    older, newer = _answer(_eagle("0.26.0", **fields)), _answer(_eagle("0.27.1", **fields))
    assert older.groups[0].spec.shapes[0] == (3, 12_288) and newer.groups[0].spec.shapes[0] == (6, 12_288)
    assert older.num_gpu_blocks == 60 * GIB // (8 * 1_888 * 1_152) == 3_702
    assert newer.num_gpu_blocks == 60 * GIB // (8 * 2_048 * 1_152) == 3_413


def test_the_planner_reads_a_latent_head_by_its_layers(tmp_path: Any, capsys: Any) -> None:
    import json

    from kvstrategies.cli import main

    head = {"architectures": ["DeepSeekMTPModel"], "model_type": "deepseek_v3", "hidden_size": 2048,
            "num_attention_heads": 16, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_hidden_layers": 2,
            "vocab_size": 102400}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(head))
    spec = json.dumps({"method": "eagle", "model": str(tmp_path), "num_speculative_tokens": 3})
    args = ["plan", "deepseek-v2-lite", "--engine", "vllm", "--speculative-config", spec, "--json"]
    assert main([*args, "--kv-cache-memory-bytes", "40G", "--block-size", "64"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["num_gpu_blocks"] == 20_087  # as the case above
    assert main([*args, "--gpu", "H100"]) != 0
    assert "but its weights are not modelled; give --weight-bytes" in capsys.readouterr().out


# ---- a DFlash draft (vllm-dflash-drafts) ---------------------------------------------------------------------------


def _dflash(release: str = "0.34.0", **fields: Any) -> Any:
    return _case(release, **{"speculative_algorithm": "DFLASH", "speculative_num_steps": None,
                             "speculative_eagle_topk": None, "speculative_num_draft_tokens": 8,
                             "eagle_draft_num_layers": 4, "page_size": 1, **fields})  # fmt: skip


def test_a_dflash_draft_adds_its_layers() -> None:
    # Qwen3-8B with a 4-layer DFlash draft of its own attention, 8 draft tokens (7 speculative): 36 + 4 = 40 layers
    # of 2 x 8 x 128 x 2 B = 4,096 B a token; 0.34.0's block 64: 262,144 B a layer, 10,485,760 B a block, 4,096
    # blocks; 0.33.0's block 16: 16,384 blocks (both recorded by vLLM: bridge-spec-dflash-qwen3-8b-tp1-bf16-p1)
    case = _dflash()
    draft = vllm_deployment(case.settings, case.available_bytes).draft
    assert draft is not None and (draft.method, draft.num_speculative_tokens, draft.num_layers) == ("dflash", 7, 4)
    assert _answer(case).num_gpu_blocks == 40 * GIB // (40 * 64 * 4_096) == 4_096
    assert _answer(_dflash("0.33.0")).num_gpu_blocks == 40 * GIB // (40 * 16 * 4_096) == 16_384
    # the first release with DFlash drafts, 0.20.2 (qwen3_dflash.py), builds the same layers: 16,384 16-token blocks
    assert _answer(_dflash("0.20.2")).num_gpu_blocks == 16_384


def test_a_dflash_draft_is_refused_where_vllm_refuses_it() -> None:
    # the draft reads the target's auxiliary hidden states: Mixtral's class does not implement SupportsEagle3
    mixtral = _dflash(preset="mixtral-8x7b", tp_size=2)
    with pytest.raises(UnsupportedConfigurationError, match="Model does not support EAGLE3 interface"):
        plan(mixtral.settings, mixtral.available_bytes)
    # up to 0.21.0 SpeculativeConfig refuses it first: mixtral contains none of its aux_hidden_states_supported names
    # (0.22.1 leaves it to the model runner, as above)
    listed = _dflash("0.21.0", preset="mixtral-8x7b", tp_size=2)
    with pytest.raises(UnsupportedConfigurationError, match=r"dflash is only supported for \['llama', 'qwen'"):
        plan(listed.settings, listed.available_bytes)
    runner = _dflash("0.22.1", preset="mixtral-8x7b", tp_size=2)
    with pytest.raises(UnsupportedConfigurationError, match="Model does not support EAGLE3 interface"):
        plan(runner.settings, runner.available_bytes)
    older = _dflash("0.19.1")
    with pytest.raises(UnsupportedConfigurationError, match="vLLM's speculative decoding adds draft layers"):
        plan(older.settings, older.available_bytes)
    # up to 0.27.1 every running request's drafting slots come off the step: a DFlash draft of 15 tokens drafts in
    # parallel, 14 slots a request; 8,192 batched tokens - 14 x 1,024 sequences = -6,144, which vLLM refuses
    # (0.28.0 plans it: 17,712 blocks of Llama-3.1-8B + 5 draft layers, as recorded by vLLM)
    slots = _dflash("0.27.1", preset="llama-3.1-8b", eagle_draft_num_layers=5, speculative_num_draft_tokens=16)
    with pytest.raises(UnsupportedConfigurationError, match="max_num_scheduled_tokens is set to -6144"):
        plan(slots.settings, slots.available_bytes)
    # 32 + 5 layers of 2 x 8 x 128 x 2 B = 4,096 B a token, 16-token blocks: 40 GiB // (37 x 65,536) = 17,712
    newer = _answer(_dflash("0.28.0", preset="llama-3.1-8b", eagle_draft_num_layers=5, speculative_num_draft_tokens=16))
    assert newer.num_gpu_blocks == 40 * GIB // (37 * 16 * 4_096) == 17_712
    # a known draft cell must be the draft's shape: 5 layers x 2 x 8 heads x 128 x 2 B = 20,480 B at TP 1
    fits = _dflash(preset="llama-3.1-8b", eagle_draft_num_layers=5, dflash_draft_cell_size_per_token=20_480)
    assert vllm_deployment(fits.settings, fits.available_bytes).draft is not None
    other = _dflash(preset="llama-3.1-8b", eagle_draft_num_layers=5, dflash_draft_cell_size_per_token=16_384)
    with pytest.raises(UnsupportedConfigurationError, match="dflash_draft_cell_size_per_token 16384 is not the cell"):
        plan(other.settings, other.available_bytes)


def test_the_planner_adds_a_dflash_drafts_weights(tmp_path: Any, capsys: Any) -> None:
    import json

    from kvstrategies.cli import main

    # a Qwen3-8B-shaped DFlash draft of 4 layers capturing 3 target layers (vLLM 0.34.0 built it on meta through the
    # bridge: attention 335,544,320 B, MLP 1,207,959,552 B, norms 83,968 B, fc + mask_embedding 100,671,488 B)
    config = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
              "num_hidden_layers": 4, "vocab_size": 151936, "max_position_embeddings": 40960,
              "dflash_config": {"mask_token_id": 0, "target_layer_ids": [1, 18, 34], "block_size": 8}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    # per layer: qkv 4,096 x (4,096 + 2 x 1,024) + o 4,096 x 4,096 + MLP 3 x 4,096 x 12,288 + 2 norms of 4,096 +
    # q_norm and k_norm of 128 = 192,946,432 parameters; 4 layers, fc 4,096 x 3 x 4,096, hidden_norm, norm and
    # mask_embedding 3 x 4,096: 822,129,664 parameters, 1,644,259,328 B in bf16 (the embedding and LM head shared)
    def weights(*extra: str) -> int:
        assert main(["plan", "qwen3-8b", "--engine", "vllm", "--gpu", "H100", *extra, "--json"]) == 0
        return int(json.loads(capsys.readouterr().out)["budget"]["stages"][-1]["weights_bytes"])

    spec = json.dumps({"method": "dflash", "model": str(tmp_path), "num_speculative_tokens": 7})
    assert weights("--speculative-config", spec) - weights() == 822_129_664 * 2 == 1_644_259_328


# ---- n-gram lookup (vllm-ngram-drafts) -----------------------------------------------------------------------------


def test_ngram_lookup_adds_no_layer_but_its_lookahead() -> None:
    # SGLang's NGRAM with 6 draft tokens: vLLM's method ngram with 5 speculative tokens, no draft layer; Llama-3.1-8B
    # keeps its 32 layers of 2 x 8 x 128 x 2 B x 16 = 65,536 B: 40 GiB // 2,097,152 = 20,480 blocks (vLLM 0.34.0
    # and 0.33.0 record 20,480, the same as without speculation)
    case = _case(preset="llama-3.1-8b", page_size=16, speculative_algorithm="NGRAM", speculative_num_steps=None,
                 speculative_eagle_topk=None, speculative_num_draft_tokens=6, eagle_draft_num_layers=None)  # fmt: skip
    draft = vllm_deployment(case.settings, case.available_bytes).draft
    assert draft is not None and (draft.method, draft.num_speculative_tokens, draft.num_layers) == ("ngram", 5, 0)
    assert draft.speculative_config() == {"method": "ngram", "num_speculative_tokens": 5}
    answer = _answer(case)
    assert _layers(answer) == list(range(32))
    assert answer.num_gpu_blocks == 40 * GIB // (32 * 65_536) == 20_480
    older = _case("0.32.0", preset="llama-3.1-8b", speculative_algorithm="NGRAM", speculative_num_steps=None,
                  speculative_eagle_topk=None, speculative_num_draft_tokens=6)  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match=r"NGRAM drafting is modelled for vLLM 0\.33\.0"):
        plan(older.settings, older.available_bytes)


def test_a_pasted_ngram_config_is_read() -> None:
    assert speculative_request({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}) \
        == ("ngram", 5, None)  # fmt: skip
    with pytest.raises(ValueError, match="prompt_lookup_min must be a positive integer"):
        speculative_request({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 0})
    with pytest.raises(ValueError, match="key 'model' is not modelled for method ngram"):
        speculative_request({"method": "ngram", "num_speculative_tokens": 5, "model": "x"})


def test_the_report_names_each_drafts_source(capsys: Any) -> None:
    from kvstrategies.cli import main

    args = ["plan", "qwen3-8b", "--engine", "vllm", "--kv-cache-memory-bytes", "40G", "--speculative-config"]
    assert main([*args, '{"method": "ngram", "num_speculative_tokens": 5}']) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("speculative:"))
    assert line.startswith("speculative: 5 tokens a step from n-gram lookup, no draft layer (Mamba layers hold")
    assert "join the KV cache groups" not in line


# ---- the edges of each reading ------------------------------------------------------------------------------------


def test_the_smallest_drafts_are_read() -> None:
    # one token a step from n-gram lookup (2 draft tokens), a 1-layer DFlash draft; none is refused
    ngram = _case(preset="llama-3.1-8b", speculative_algorithm="NGRAM", speculative_num_steps=None,
                  speculative_eagle_topk=None, speculative_num_draft_tokens=2, eagle_draft_num_layers=None)  # fmt: skip
    assert vllm_deployment(ngram.settings, ngram.available_bytes).draft.num_speculative_tokens == 1  # type: ignore[union-attr]
    lone = _case(preset="llama-3.1-8b", speculative_algorithm="NGRAM", speculative_num_steps=None,
                 speculative_eagle_topk=None, speculative_num_draft_tokens=1, eagle_draft_num_layers=None)  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="give speculative_num_draft_tokens"):
        vllm_deployment(lone.settings, lone.available_bytes)
    unnamed = _case(preset="llama-3.1-8b", speculative_algorithm="NGRAM", speculative_num_steps=None,
                    speculative_eagle_topk=None, speculative_num_draft_tokens=None, eagle_draft_num_layers=None)
    with pytest.raises(UnsupportedConfigurationError, match="give speculative_num_draft_tokens"):
        vllm_deployment(unnamed.settings, unnamed.available_bytes)
    one = _dflash(eagle_draft_num_layers=1)
    assert vllm_deployment(one.settings, one.available_bytes).draft.num_layers == 1  # type: ignore[union-attr]
    bare = _dflash(eagle_draft_num_layers=None)
    with pytest.raises(UnsupportedConfigurationError, match="a DFLASH draft's layers are not given"):
        vllm_deployment(bare.settings, bare.available_bytes)
    assert speculative_request({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1,
                                "prompt_lookup_max": 1}) == ("ngram", 2, None)  # fmt: skip


def test_a_draft_cell_is_one_ranks() -> None:
    from kvstrategies.vllm.strategies.drafts import VLLMDraft, draft_cell_bytes

    # 5 layers x K and V x 8 heads x 128 x 2 B: 20,480 B at TP 1, 10,240 at TP 2, one head (2,560 B) at TP 16
    draft = VLLMDraft("dflash", 7, 5, 8, 128)
    assert [draft_cell_bytes(draft, tp, 2) for tp in (1, 2, 16)] == [20_480, 10_240, 2_560]
    assert draft_cell_bytes(VLLMDraft("dflash", 7, 5, None, 128), 1, 2) == 2_560  # no heads named: one
    assert draft_cell_bytes(VLLMDraft("dflash", 7, 5, 8, None), 1, 2) == 0


def test_a_draft_model_outside_pipelines_keeps_all_its_layers() -> None:
    from kvstrategies.core.dtypes import DType
    from kvstrategies.models.parse import parse_hf_config
    from kvstrategies.presets import load_preset_config
    from kvstrategies.vllm.strategies.drafts import VLLMDraft, draft_layer_specs
    from kvstrategies.vllm.strategies.specs import FullAttentionSpec

    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    geometry = parse_hf_config(load_preset_config("qwen3-8b"))
    target = dict.fromkeys(range(36), spec)
    # no pp given: PP 1, both draft layers (36, 37); at PP 2 the last stage's share, layer 1 (37)
    assert sorted(draft_layer_specs(geometry, target, VLLMDraft("draft_model", 3, 2, 8, 128), spec)) == [36, 37]
    assert sorted(draft_layer_specs(geometry, target, VLLMDraft("draft_model", 3, 2, 8, 128), spec, 2)) == [37]


def test_a_drafts_own_embedding_and_lm_head_stay() -> None:
    from kvstrategies.core.dtypes import DType
    from kvstrategies.sglang.draft_model import vocab_rows_per_rank
    from kvstrategies.vllm.planner.draft_head import draft_head_bytes

    config: dict[str, Any] = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                              "head_dim": 128, "intermediate_size": 12288, "num_hidden_layers": 4,
                              "vocab_size": 151936, "dflash_config": {"target_layer_ids": [1, 18, 34]}}  # fmt: skip
    shared = draft_head_bytes(config, "dflash", tp=2, dtype=DType.BFLOAT16)
    rows = vocab_rows_per_rank(151936, 2) * 4096 * 2  # a vocabulary-parallel table's rank, bf16
    assert draft_head_bytes({**config, "has_own_lm_head": True}, "dflash", tp=2, dtype=DType.BFLOAT16) \
        == shared + rows  # fmt: skip
    assert draft_head_bytes({**config, "has_own_lm_head": True, "has_own_embed_tokens": True}, "dflash", tp=2,
                            dtype=DType.BFLOAT16) == shared + 2 * rows  # fmt: skip
