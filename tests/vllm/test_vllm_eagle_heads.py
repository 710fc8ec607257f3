"""vLLM's speculative decoding with a separate EAGLE / EAGLE3 draft head, each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.__init__``
(``start_layer_id = num_hidden_layers``: the head's decoder layers numbered after the target's, each a
``LlamaAttention`` built with the cache config), ``llama_eagle.py EagleLlamaForCausalLM``,
``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py set_eagle3_aux_hidden_state_layers`` (0.34.0) and
``vllm/v1/worker/gpu_model_runner.py GPUModelRunner.load_model`` (0.33.0): "Model does not support EAGLE3
interface" beside a model class without ``SupportsEagle3``; ``vllm/model_executor/models/falcon_h1.py`` (its Mamba
layers named ``num_hidden_layers + i``).
"""

from __future__ import annotations

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.dtypes import DType
from kvstrategies.core.releases import VLLM, parse_release
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.models import parse_hf_config
from kvstrategies.vllm.bridge.bridge import draft_head_config
from kvstrategies.vllm.strategies.drafts import VLLMDraft, check_eagle3_target, head_layer_spec
from kvstrategies.vllm.strategies.specs import FullAttentionSpec, MambaSpec, SlidingWindowSpec

GIB = 2**30


def _vllm(preset: str, algorithm: str | None = "EAGLE3", release: str = "0.34.0", **fields: object) -> object:
    spec = {} if algorithm is None else {"speculative_algorithm": algorithm, "speculative_eagle_topk": 1,
                                         "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}  # fmt: skip
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **spec, **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_an_eagle3_head_is_one_more_full_attention_layer_of_the_target_s_group() -> None:
    # Llama-3.1-8B bf16, --block-size 16: a page of 16 x 8 heads x 128 x 2 (K, V) x 2 B = 65,536; the head's layer
    # (model.layers.32) joins the one group: 33 pages a block, 2,162,688 B; 40 GiB // that = 19,859 blocks
    # (317,744 tokens; without the head 32 pages: 20,480 blocks)
    drafted, plain = _vllm("llama-3.1-8b", page_size=16), _vllm("llama-3.1-8b", None, page_size=16)
    assert drafted.bytes_per_block == 33 * 65_536 == 2_162_688
    assert drafted.num_gpu_blocks == 40 * GIB // 2_162_688 == 19_859
    assert plain.num_gpu_blocks == 40 * GIB // (32 * 65_536) == 20_480
    (group,) = drafted.groups
    assert group.layers[-1] == 32 and len(group.layers) == 33
    assert drafted.launch.settings_document()["num_speculative_tokens"] == 3


def test_the_head_s_kv_heads_are_split_over_tensor_parallel_ranks() -> None:
    # Qwen3-8B at TP 4: 8 KV heads, 2 a rank, head size 128; the head's layer is index 36 (after 36 layers)
    planned = _vllm("qwen3-8b", "EAGLE", tp_size=4, page_size=16)
    specs = dict((layer, spec) for layers, spec in planned.layer_specs for layer in layers)
    assert specs[36] == FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=128, head_size_v=128,
                                          dtype=DType.BFLOAT16)  # fmt: skip


def test_head_layer_spec_keeps_one_replicated_head_and_the_cache_quantization() -> None:
    # 8 KV heads at TP 16: max(1, 8 // 16) = 1 head a rank; an fp8 cache records its quantization mode
    draft = VLLMDraft("eagle3", 3, 1, num_kv_heads=8, head_dim=64)
    spec = head_layer_spec(draft, 16, DType.FLOAT8_E4M3FN, 64, "FP8_PER_TENSOR")
    assert (spec.num_kv_heads, spec.head_size, spec.page_size_bytes) == (1, 64, 64 * 1 * 64 * 2 * 1)
    assert spec.kv_quant_mode == "FP8_PER_TENSOR"
    with pytest.raises(ValueError, match="names no head geometry"):
        head_layer_spec(VLLMDraft("eagle", 3, 1), 1, DType.BFLOAT16, 16, None)


def test_a_head_beside_a_sliding_window_model_joins_the_full_attention_group() -> None:
    # gpt-oss-120b, --block-size 64: 18 sliding and 18 full layers, every page 64 x 8 x 64 x 2 x 2 = 131,072 B; the
    # head's full layer (36) makes the full group 19 layers, so a block spans 19 pages: 50 GiB // 2,490,368 = 21,557
    # blocks (without the head 18 pages: 22,755)
    fields = {"page_size": 64, "available_bytes": 53_687_091_200}
    drafted, plain = _vllm("gpt-oss-120b", **fields), _vllm("gpt-oss-120b", None, **fields)
    sliding, full = drafted.groups
    assert isinstance(sliding.spec, SlidingWindowSpec) and len(sliding.layers) == 18
    assert list(full.layers[-2:]) == [35, 36] and len(full.layers) == 19
    assert drafted.num_gpu_blocks == 53_687_091_200 // (19 * 131_072) == 21_557
    assert plain.num_gpu_blocks == 53_687_091_200 // (18 * 131_072) == 22_755


def test_the_head_follows_falcon_h1_s_mamba_layers_and_takes_the_aligned_attention_block() -> None:
    # Falcon-H1-7B: 44 attention layers (0-43) and 44 Mamba layers named 44-87 (falcon_h1.py ssm_layer_idx), so the
    # 5-layer head is 88-92; its attention takes the cache's block, which the Mamba state aligns (1,584 tokens:
    # 1,584 x 2 heads x 128 x 2 x 2 = 1,622,016 B, the padded state page)
    planned = _vllm("falcon-h1-7b", "EAGLE", eagle_draft_num_layers=5, page_size=16, max_running_requests=32)
    specs = dict((layer, spec) for layers, spec in planned.layer_specs for layer in layers)
    head = [specs[layer] for layer in range(88, 93)]
    assert all(type(spec) is FullAttentionSpec and spec.block_size == 1_584 for spec in head)
    assert head[0].page_size_bytes == 1_584 * 2 * 128 * 2 * 2 == 1_622_016
    assert all(isinstance(specs[layer], MambaSpec) for layer in range(44, 88))


def test_eagle3_beside_a_model_without_auxiliary_hidden_states_is_refused_in_vllm_s_words() -> None:
    # MixtralForCausalLM implements SupportsEagle but not SupportsEagle3 in 0.33.0 / 0.34.0; its EAGLE head runs
    with pytest.raises(UnsupportedConfigurationError, match="Model does not support EAGLE3 interface"):
        _vllm("mixtral-8x7b", tp_size=2)
    assert _vllm("mixtral-8x7b", "EAGLE", tp_size=2).num_gpu_blocks > 0


def test_the_eagle3_table_takes_the_newest_row_at_or_before_the_release() -> None:
    # GemmaForCausalLM implements SupportsEagle3 from 0.34.0 (absent from 0.33.0's row)
    gemma = parse_hf_config({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 2048,
                                "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                                "num_hidden_layers": 18, "vocab_size": 256000})  # fmt: skip
    draft = VLLMDraft("eagle3", 3, 1, 1, 256)
    check_eagle3_target(gemma, draft, parse_release("0.34.0", VLLM))
    with pytest.raises(UnsupportedConfigurationError, match="GemmaForCausalLM does not implement SupportsEagle3"):
        check_eagle3_target(gemma, draft, parse_release("0.33.0", VLLM))


@pytest.mark.parametrize(("fields", "words"), [
    # below vllm-eagle-heads (0.20.2): 0.19.1's drafter is out of the mapping's scope altogether
    ({"release": "0.19.1"}, "speculative_algorithm EAGLE3: vLLM's speculative decoding adds draft layers and lookahead "
                            "slots; the vLLM strategies (and the vLLM bridge) do not model it"),
    ({"pp_size": 2}, "an EAGLE / EAGLE3 head at pipeline parallel size > 1 is not modelled"),
])  # fmt: skip
def test_heads_outside_what_is_recorded_are_refused(fields: dict[str, object], words: str) -> None:
    with pytest.raises(UnsupportedConfigurationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _vllm("llama-3.1-8b", **fields)  # type: ignore[arg-type]


def test_the_bridge_s_head_is_a_llama_head_of_the_draft_s_geometry() -> None:
    # what vLLM loads for a case: the EAGLE3 architecture name, the draft's layers, KV heads and head size
    config = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 151936, "intermediate_size": 12288}  # fmt: skip
    head = draft_head_config(config, VLLMDraft("eagle3", 3, 2, num_kv_heads=8, head_dim=128))
    assert head["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (head["num_hidden_layers"], head["num_key_value_heads"], head["head_dim"]) == (2, 8, 128)
    assert (head["hidden_size"], head["vocab_size"]) == (4096, 151936)
    assert draft_head_config(config, VLLMDraft("eagle", 3, 1, 8, 128))["architectures"] == ["LlamaForCausalLM"]


def test_an_mla_model_and_a_llama_head_share_one_uniform_type_group() -> None:
    # DeepSeek-V3 TP 8, fp8, --block-size 64, a head of 8 KV heads x 128 (1 a rank): 61 latent pages of
    # 64 x 576 x 1 B = 36,864 and the head's 64 x 1 x 128 x 2 x 1 = 16,384 in one UniformTypeKVCacheSpecs group:
    # 2,265,088 B a block, 40 GiB // that = 18,961 blocks; its layer lists its own backend after the latents'
    planned = _vllm("deepseek-v3", tp_size=8, kv_cache_dtype="fp8_e4m3", page_size=64, eagle_draft_num_layers=1,
                    eagle_draft_num_kv_heads=8, eagle_draft_head_dim=128, gpu="H100")  # fmt: skip
    (group,) = planned.groups
    assert type(group.spec).__name__ == "UniformTypeKVCacheSpecs" and group.layers[-1] == 61
    assert planned.bytes_per_block == 61 * 36_864 + 16_384 == 2_265_088
    assert planned.num_gpu_blocks == 40 * GIB // 2_265_088 == 18_961
    assert planned.backends == ("FLASHMLA", "FLASH_ATTN")


def test_a_head_with_its_own_shape_is_not_the_model_s_mtp() -> None:
    # Qwen3-Next has an MTP layer; EAGLE with a head's shape given is that head (2 layers of 4 KV heads x 256,
    # 1 a rank at TP 4), not the MTP layer (which would be one layer of the target's 2 x 256)
    planned = _vllm("qwen3-next-80b-a3b", "EAGLE", tp_size=4, page_size=64, eagle_draft_num_layers=2,
                    eagle_draft_num_kv_heads=4, eagle_draft_head_dim=256)  # fmt: skip
    specs = dict((layer, spec) for layers, spec in planned.layer_specs for layer in layers)
    assert [(specs[i].num_kv_heads, specs[i].head_size) for i in (48, 49)] == [(1, 256), (1, 256)]
    assert 50 not in specs


EAGLE3_LLAMA_8B = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
                   "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000,
                   "max_position_embeddings": 2048, "rms_norm_eps": 1e-05}  # fmt: skip


def test_an_eagle3_head_s_resident_bytes() -> None:
    # layer 0: qkv reads 2h: 8,192 x (4,096 + 2 x 1,024) = 50,331,648, o 16,777,216, MLP 3 x 4,096 x 14,336 =
    # 176,160,768, three norms 12,288; fc 3 x 4,096 x 4,096 = 50,331,648; final norm 4,096; LM head 32,000 x 4,096 =
    # 131,072,000: 424,689,664 parameters x 2 B, and the 32,000-row int64 id map (the embedding is the target's)
    from kvstrategies.vllm.planner.draft_head import draft_head, draft_head_bytes

    params = 50_331_648 + 16_777_216 + 176_160_768 + 12_288 + 50_331_648 + 4_096 + 131_072_000
    assert params == 424_689_664
    assert draft_head_bytes(EAGLE3_LLAMA_8B, "eagle3", tp=1, dtype=DType.BFLOAT16) == 2 * params + 8 * 32_000
    # an EAGLE head: h x (q + 2 kv) = 25,165,824, o, MLP, the first layer's one norm, fc 2h x h = 33,554,432
    eagle = 25_165_824 + 16_777_216 + 176_160_768 + 4_096 + 33_554_432
    assert draft_head_bytes(EAGLE3_LLAMA_8B, "eagle", tp=1, dtype=DType.BFLOAT16) == 2 * eagle
    # TP 2: 16 query and 4 KV heads a rank, half the MLP and the LM head's rows
    tp2 = 8_192 * (2_048 + 1_024) + 2_048 * 4_096 + 3 * 4_096 * 7_168 + 12_288 + 50_331_648 + 4_096 + 16_000 * 4_096
    assert draft_head_bytes(EAGLE3_LLAMA_8B, "eagle3", tp=2, dtype=DType.BFLOAT16) == 2 * tp2 + 8 * 32_000
    assert draft_head(EAGLE3_LLAMA_8B, "eagle3").case_fields() == {
        "eagle_draft_num_layers": 1, "eagle_draft_num_kv_heads": 8, "eagle_draft_head_dim": 128}


def test_plan_reads_the_head_from_speculative_config(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from kvstrategies.cli.app import main

    folder = Path(str(tmp_path))
    (folder / "config.json").write_text(json.dumps(EAGLE3_LLAMA_8B))
    spec = json.dumps({"method": "eagle3", "model": str(folder), "num_speculative_tokens": 3})
    code = main(["plan", "llama-3.1-8b", "--engine", "vllm", "--kv-cache-memory-bytes", "40G", "--block-size", "16",
                 "--speculative-config", spec, "--json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "317,744 tokens" in out  # 19,859 blocks of 16 (the first test's deployment, the head read from its file)
    code = main(["plan", "llama-3.1-8b", "--engine", "vllm", "--gpu", "H100", "--speculative-config", spec])
    assert code == 0 and "+ 0.79 GiB of the EAGLE3 draft head on the last stage" in capsys.readouterr().out


@pytest.mark.parametrize(("spec", "words"), [
    ('{"method": "eagle3", "num_speculative_tokens": 3}', 'needs the draft: "model"'),
    ('{"method": "eagle3", "model": "/no/such/head", "num_speculative_tokens": 3}', "no such file or folder"),
    ('{"method": "eagle", "model": "/", "num_speculative_tokens": 0}', "num_speculative_tokens must be an integer"),
])  # fmt: skip
def test_a_head_without_its_config_is_refused(spec: str, words: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    code = main(["plan", "llama-3.1-8b", "--engine", "vllm", "--gpu", "H100", "--speculative-config", spec])
    assert code != 0 and words in capsys.readouterr().err


def test_a_head_s_shape_in_a_case_is_checked() -> None:
    from kvstrategies.errors import KVCacheConfigError

    with pytest.raises(KVCacheConfigError, match="eagle_draft_num_kv_heads"):
        _vllm("llama-3.1-8b", eagle_draft_num_kv_heads=0)


def test_a_head_s_speculative_config_names_its_keys() -> None:
    from kvstrategies.vllm.strategies.drafts import speculative_request

    assert speculative_request({"method": "eagle3", "model": "h", "num_speculative_tokens": 2}) == ("eagle3", 2, "h")
    assert speculative_request({"method": "mtp", "num_speculative_tokens": 1}) == ("mtp", 1, None)
    with pytest.raises(ValueError, match="key 'draft_tensor_parallel_size' is not modelled .method, model and"):
        speculative_request({"method": "eagle", "model": "h", "num_speculative_tokens": 2,
                             "draft_tensor_parallel_size": 1})  # fmt: skip


def test_a_two_layer_head_reads_2h_on_its_first_layer_only() -> None:
    # EAGLE3, 2 layers at TP 16 (8 KV heads: one replicated a rank, 2 query heads): layer 0's qkv reads 8,192,
    # layer 1's 4,096, each into 2 x 128 + 2 x 1 x 128 = 512 columns; o 256 x 4,096; MLP 3 x 4,096 x 896; 3 norms
    from kvstrategies.vllm.planner.draft_head import draft_head_bytes

    config = {**EAGLE3_LLAMA_8B, "num_hidden_layers": 2}
    mlp = 3 * 4_096 * 896
    layers = (8_192 + 4_096) * 512 + 2 * (256 * 4_096 + mlp + 3 * 4_096)
    rest = 3 * 4_096 * 4_096 + 4_096 + 2_000 * 4_096  # fc, final norm, 32,000 rows / 16 (a multiple of 64)
    assert draft_head_bytes(config, "eagle3", tp=16, dtype=DType.BFLOAT16) == 2 * (layers + rest) + 8 * 32_000
    # EAGLE, 2 layers at TP 1: h x 6,144 each, the first layer's one norm and the second's two, fc 2h x h
    eagle = 2 * (4_096 * 6_144 + 4_096 * 4_096 + 3 * 4_096 * 14_336) + 3 * 4_096 + 2 * 4_096 * 4_096
    assert draft_head_bytes(config, "eagle", tp=1, dtype=DType.BFLOAT16) == 2 * eagle


def test_a_head_config_s_defaults_and_bounds() -> None:
    # no intermediate_size: 4h (LlamaConfig's MLP width is the config's; a head naming none is read as 4h); no
    # head_dim: hidden / heads; a count past 2**31 is refused
    from kvstrategies.vllm.planner.draft_head import draft_head, draft_head_bytes

    bare = {k: v for k, v in EAGLE3_LLAMA_8B.items() if k != "intermediate_size"}
    full = {**bare, "intermediate_size": 4 * 4_096}
    assert draft_head_bytes(bare, "eagle", tp=1, dtype=DType.BFLOAT16) == \
        draft_head_bytes(full, "eagle", tp=1, dtype=DType.BFLOAT16)  # fmt: skip
    assert draft_head({**bare, "hidden_size": 8, "num_attention_heads": 16}, "eagle").head_dim == 1
    assert draft_head(bare, "eagle").head_dim == 128
    from kvstrategies.errors import KVCacheConfigError

    with pytest.raises(KVCacheConfigError, match="num_hidden_layers must be a positive integer"):
        draft_head({**bare, "num_hidden_layers": 2**31 + 1}, "eagle")
    assert draft_head({**bare, "num_hidden_layers": 2**31}, "eagle").num_layers == 2**31


def test_the_lookahead_comes_from_the_draft_tokens_when_no_steps_are_given() -> None:
    # SGLang's speculative_num_draft_tokens N without steps: N - 1 tokens a step; N = 1 proposes none: refused
    from kvstrategies.errors import UnsupportedConfigurationError as Refused

    planned = _vllm("llama-3.1-8b", page_size=16, speculative_num_steps=None, speculative_num_draft_tokens=5)
    assert planned.launch.settings_document()["num_speculative_tokens"] == 4
    with pytest.raises(Refused, match="give speculative_num_steps"):
        _vllm("llama-3.1-8b", page_size=16, speculative_num_steps=None, speculative_num_draft_tokens=1)


def test_one_draft_token_is_one_step_and_none_is_refused() -> None:
    # speculative_num_draft_tokens 2 without steps: 1 token a step (planned); neither given: none, refused
    from kvstrategies.errors import UnsupportedConfigurationError as Refused

    planned = _vllm("llama-3.1-8b", page_size=16, speculative_num_steps=None, speculative_num_draft_tokens=2)
    assert planned.launch.settings_document()["num_speculative_tokens"] == 1
    with pytest.raises(Refused, match="give speculative_num_steps"):
        _vllm("llama-3.1-8b", page_size=16, speculative_num_steps=None, speculative_num_draft_tokens=None)


def test_a_query_head_is_replicated_past_the_head_count() -> None:
    # TP 64 over 32 query heads: max(1, 32 // 64) = 1 query head a rank (128 columns), 1 KV head; o 128 x 4,096
    from kvstrategies.vllm.planner.draft_head import draft_head_bytes

    mlp = 3 * 4_096 * 224
    layer = 8_192 * (128 + 2 * 128) + 128 * 4_096 + mlp + 3 * 4_096
    rest = 3 * 4_096 * 4_096 + 4_096 + 500 * 4_096  # 32,000 rows / 64 (a multiple of 64 x 64 is not needed)
    assert draft_head_bytes(EAGLE3_LLAMA_8B, "eagle3", tp=64, dtype=DType.BFLOAT16) == 2 * (layer + rest) + 256_000


def test_before_0_32_0_falcon_h1_sizes_its_block_from_the_state_without_the_lookahead() -> None:
    # vllm-hybrid-config-state-lookahead: Falcon-H1 7B TP 1, a state of conv (3 + k) x 3,584 x 2 B and SSM
    # 24 x 128 x 256 x 2 B = 1,572,864; an attention token 2 heads x (128 + 128) x 2 B = 1,024, kernel 16.
    # 0.31.0 sizes the block from the state without the lookahead: 1,594,368 B -> 16 x cdiv(1,594,368, 16,384) = 1,568
    # tokens, a page of 1,605,632 B; three draft tokens make the layer's state 1,615,872 B, above it: vLLM 0.31.0
    # asserts in MambaSpec.page_size_bytes (recorded); 0.32.0 sizes from 1,615,872 B: 1,584 tokens
    with pytest.raises(UnsupportedConfigurationError, match=r"AssertionError \(MambaSpec.page_size_bytes: "
                       r"page_size_padded 1,605,632 B < the state's 1,615,872 B"):  # fmt: skip
        _vllm("falcon-h1-7b", "EAGLE", "0.31.0", eagle_draft_num_layers=5, page_size=16, max_running_requests=32)
    planned = _vllm("falcon-h1-7b", "EAGLE", "0.32.0", eagle_draft_num_layers=5, page_size=16,
                    max_running_requests=32)  # fmt: skip
    assert planned.groups[0].spec.block_size == 1_584
    # one draft token: 1,601,536 B fits the 1,568-token page, the block the same in both releases (0.31.0 live:
    # 1,568-token blocks, 594 of them)
    one = {"speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
    for release in ("0.31.0", "0.32.0"):
        planned = _vllm("falcon-h1-7b", "EAGLE", release, page_size=16, max_running_requests=32, **one)
        assert (planned.groups[0].spec.block_size, planned.num_gpu_blocks) == (1_568, 594)
