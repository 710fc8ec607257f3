"""Hand-computed expectations for planner rules the other planner tests did not pin down.

Each test names the SGLang function it reproduces (SGLang 0.5.23 sources), or the planner's own rule
when the rule is ours (the fix search, the bounds on what is read).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.budget import weights_per_rank
from kvstrategies.planner.checkpoint import (
    CheckpointWeights,
    ShardingFacts,
    TensorInfo,
    rank_bytes,
    read_safetensors_header,
)
from kvstrategies.planner.config_fields import MAX_CONFIG_DEPTH, validate_config_fields
from kvstrategies.planner.fixes import _fraction_guess
from kvstrategies.planner.flag_names import flag_wording
from kvstrategies.planner.gpus import Accelerator, lookup_gpu
from kvstrategies.planner.launch_command import MAX_COMMAND_CHARS, split_command
from kvstrategies.planner.preload import GIB, preload_memory, profile_for
from kvstrategies.planner.report import answer_text

#: a two-layer Llama: h 64, 8 heads of 8 (2 KV heads), MLP 128, vocab 1000
SMALL = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
}  # fmt: skip
#: its parameters: embedding + head 2 x 1000 x 64, per layer q/o 2 x 64^2 + k/v 2 x 16 x 64 + MLP 3 x 128 x 64
#: + norms 2 x 64, and the final norm 64
SMALL_PARAMS = 2 * 1000 * 64 + 2 * (2 * 64 * 64 + 2 * 16 * 64 + 3 * 128 * 64 + 2 * 64) + 64


def _request(config: dict[str, Any], **kw: Any) -> DeploymentRequest:
    return DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu(kw.pop("gpu", "H100")), **kw)


# --- budget.weights_per_rank ---------------------------------------------------------------------


def test_the_weight_source_names_expert_parallelism_only_above_one() -> None:
    """The estimate's note says how the weights split: ``TP x PP`` and, only when experts are spread
    (``--ep-size`` > 1), over which EP size; EP 1 is no expert split and is not named."""
    _, source = weights_per_rank(_request(SMALL), SMALL)
    assert "split over TP 1 x PP 1 (fullest rank)" in source and "EP" not in source


def test_a_multimodal_class_without_a_vision_tower_adds_no_tower_bytes() -> None:
    """A ``*ForConditionalGeneration`` class counts as multimodal (``launch_facts``), but with no
    ``vision_config`` there is no tower to count: the weights are the language model's alone,
    2 B x 197,952 parameters = 395,904 B at TP 1 (the same as the ``*ForCausalLM`` class)."""
    assert SMALL_PARAMS == 197_952
    for arch in ("LlamaForCausalLM", "LlamaForConditionalGeneration"):
        config = {**SMALL, "architectures": [arch]}
        nbytes, source = weights_per_rank(_request(config), config)
        assert (nbytes, "vision tower" in source) == (2 * SMALL_PARAMS, False)


# --- checkpoint: safetensors dtypes and the per-rank shares -------------------------------------


def _one_tensor_file(path: Path, dtype: str, shape: list[int], nbytes: int) -> None:
    raw = json.dumps({"t": {"dtype": dtype, "shape": shape, "data_offsets": [0, nbytes]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * nbytes)


@pytest.mark.parametrize(
    ("dtype", "shape", "nbytes"),
    [
        # the safetensors format's Dtype::bitsize: 8-bit types are one byte per element
        ("BOOL", [3], 3), ("U8", [3], 3), ("I8", [3], 3), ("F8_E5M2", [3], 3), ("F8_E4M3", [3], 3),
        ("F8_E8M0", [3], 3),
        ("F4", [2, 3], 3),  # 6 x 4 bits
        ("F6_E2M3", [4], 3), ("F6_E3M2", [4], 3),  # 4 x 6 bits
        ("I16", [3], 6), ("U16", [3], 6), ("F16", [3], 6), ("BF16", [3], 6),
        ("I32", [3], 12), ("U32", [3], 12), ("F32", [3], 12),
        ("C64", [3], 24), ("F64", [3], 24), ("I64", [3], 24), ("U64", [3], 24),
    ],
)  # fmt: skip
def test_every_safetensors_dtype_has_its_width(tmp_path: Path, dtype: str, shape: list[int], nbytes: int) -> None:
    """A header entry's ``data_offsets`` span ``numel x bits / 8`` bytes (safetensors' own check):
    the right span reads, one byte more or less is refused."""
    _one_tensor_file(tmp_path / "a.safetensors", dtype, shape, nbytes)
    (tensor,) = read_safetensors_header(tmp_path / "a.safetensors")
    assert (tensor.dtype, tensor.nbytes) == (dtype, nbytes)
    for wrong in (nbytes - 1, nbytes + 1):
        _one_tensor_file(tmp_path / "b.safetensors", dtype, shape, wrong)
        with pytest.raises(KVCacheConfigError, match="not a valid checkpoint"):
            read_safetensors_header(tmp_path / "b.safetensors")


FACTS = ShardingFacts(num_layers=2, num_heads=8, num_kv_heads=2, vocab_size=1000, tied=True, serve_bytes=2)


def _headers(*tensors: TensorInfo) -> CheckpointWeights:
    return CheckpointWeights(Path("m"), "headers", sum(t.nbytes for t in tensors), tensors)


def test_a_fused_qkv_tensor_keeps_the_heads_of_one_rank() -> None:
    """``QKVParallelLinear`` (sglang/srt/layers/linear.py): a rank holds ``nh / tp`` query heads and
    ``max(1, nkv / tp)`` KV heads each for K and V. The fused [(8 + 2 x 2) x 8, 64] BF16 tensor
    (12,288 B) of 8 heads and 2 KV heads of dim 8 keeps at TP 2 (4 + 2 x 1) x 8 rows = 6,144 B and at
    TP 4 (2 + 2 x 1) x 8 rows (one KV head replicated per rank) = 4,096 B."""
    qkv = TensorInfo("model.layers.0.self_attn.qkv_proj.weight", "BF16", (96, 64), 96 * 64 * 2)
    ckpt = _headers(qkv)
    assert rank_bytes(ckpt, FACTS) == 12_288
    assert rank_bytes(ckpt, FACTS, tp=2) == 48 * 64 * 2 == 6_144
    assert rank_bytes(ckpt, FACTS, tp=4) == 32 * 64 * 2 == 4_096


def test_a_one_row_embedding_is_padded_to_64_rows() -> None:
    """``VocabParallelEmbedding`` (sglang/srt/layers/vocab_parallel_embedding.py) pads the vocab to a
    multiple of 64 (``pad_vocab_size``): a [1, 1] BF16 table loads 64 x 1 rows x 2 B = 128 B (tied, so
    no separate head)."""
    embed = TensorInfo("model.embed_tokens.weight", "BF16", (1, 1), 2)
    assert rank_bytes(_headers(embed), FACTS) == 64 * 1 * 2


# --- config_fields: how deep the validator reads -------------------------------------------------


def _at_depth(depth: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """SMALL with ``leaf`` as the object ``depth`` levels below the top (depth 1: ``config["extra"]``)."""
    node = leaf
    for _ in range(depth - 1):
        node = {"a": node}
    return {**SMALL, "extra": node}


def test_the_config_validator_reads_eight_objects_deep() -> None:
    """``validate_config_fields`` checks known integer fields in every nested object down to
    ``MAX_CONFIG_DEPTH`` = 8 levels below the top (real configs nest 3 deep) and stops there, so a
    hostile config cannot make it walk without bound: a bad ``num_attention_heads`` in the object
    8 levels down is refused, one 9 levels down is not read."""
    assert MAX_CONFIG_DEPTH == 8
    bad = {"num_attention_heads": -1}
    with pytest.raises(KVCacheConfigError, match=r"extra(\.a){7}\.num_attention_heads"):
        validate_config_fields(_at_depth(8, bad))
    validate_config_fields(_at_depth(9, bad))  # not read


# --- fixes: the straight-line guess of the smallest --mem-fraction-static ------------------------


def _planned(capacity: int, context: int) -> Any:
    return SimpleNamespace(fit=SimpleNamespace(capacity_tokens=capacity, context_len=context))


def test_the_fraction_guess_draws_its_line_from_one_thousandth() -> None:
    """The fix search's own rule (planner/fixes.py, ``_fraction_guess``): between the current plan
    (``now`` thousandths, ``low`` tokens) and the plan at ``stop`` (``high`` tokens), the context
    ``need`` = context - low more tokens is reached at ``now + ceil(need x (stop - now) / (high - low))``.
    From 0.001 (1,000 tokens) to 0.900 (900,000 tokens) for a 131,072-token context:
    1 + ceil(130,072 x 899 / 899,000) = 1 + ceil(130.072) = 132. Below 1 thousandth there is no plan."""
    search = SimpleNamespace(current=_planned(1_000, 131_072))
    assert _fraction_guess(search, 1, _planned(900_000, 131_072), 900) == 132  # type: ignore[arg-type]
    assert _fraction_guess(search, 0, _planned(900_000, 131_072), 900) is None  # type: ignore[arg-type]


def test_every_listed_gpu_capacity_is_positive() -> None:
    """``_larger_gpu`` (planner/fixes.py) sorts the larger GPUs by ``capacity_mib or 0``; the ``or 0``
    is never taken because no listed capacity is 0 (the allow-list entry for it relies on this)."""
    from kvstrategies.planner.gpus import GPUS

    assert all(g.capacity_mib is None or g.capacity_mib > 0 for g in GPUS)


# --- flag names, GPUs, pasted commands, memory before the weights --------------------------------


def test_an_unknown_case_field_keeps_its_wording() -> None:
    """``flag_wording`` turns ``case field 'tp_size'`` into ``--tp``; a case field with no ``plan``
    flag keeps the whole phrase, quotes and all."""
    assert flag_wording("case field 'tp_size' must be >= 1") == "--tp must be >= 1"
    assert flag_wording("case field 'head_dim' must be >= 1") == "case field 'head_dim' must be >= 1"


def test_cuda_major_11_is_blackwell() -> None:
    """``is_blackwell`` (sglang/srt/utils/common.py): ``_check_cuda_device_version`` with
    ``device_capability_majors=[10, 11, 12]`` -- SM110 (Jetson Thor) is Blackwell too; SM90 is not."""
    assert [Accelerator("x", 1024.0, "cuda", (major, 0)).is_blackwell for major in (9, 10, 11, 12)] == [
        False, True, True, True,
    ]  # fmt: skip


def test_a_pasted_command_may_hold_64_kib_of_characters() -> None:
    """``split_command`` reads at most ``MAX_COMMAND_CHARS`` = 64 x 1024 = 65,536 characters (real
    commands are under 200 words): exactly that many are split, one more is refused."""
    assert MAX_COMMAND_CHARS == 65_536
    head = ["python", "-m", "sglang.launch_server", "--model-path"]
    fill = 65_536 - sum(len(t) for t in head)
    assert split_command([*head, "m" * fill])[-1] == "m" * fill
    with pytest.raises(KVCacheConfigError, match="65,536 characters"):
        split_command([*head, "m" * (fill + 1)])


def test_pipeline_parallelism_adds_one_peer_before_the_weights() -> None:
    """``preload_memory``: a rank's communication buffers grow per peer it talks to, its TP peers
    (tp - 1) and, under PP, one more (the neighbouring stage): TP 1 x PP 2 has one peer, TP 2 x PP 2 two;
    called without a layout it is one GPU alone."""
    gpu = lookup_gpu("H100")
    profile = profile_for(gpu)
    alone = preload_memory(gpu)  # the defaults: TP 1 x PP 1, no peer, no communication buffers
    assert (alone.interconnect.endswith(", 0 peer(s)"), alone.communication_bytes) == (True, 0)
    for tp, peers in ((1, 1), (2, 2)):
        mem = preload_memory(gpu, tp=tp, pp=2)
        assert mem.interconnect.endswith(f", {peers} peer(s)")
        assert mem.communication_bytes == int((profile.per_peer_gib * peers + profile.multi_rank_gib) * GIB)


# --- load refusals: block-FP8 linears -------------------------------------------------------------

BLOCK_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
CT_BLOCK_FP8 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
    "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}}  # fmt: skip


def _block_llama(heads: int, kv_heads: int, qcfg: dict[str, Any], hidden: int = 2048, inter: int = 8192) -> dict:
    """A 16-layer Llama with head_dim 64 whose linears are 128 x 128 block FP8 (``qcfg``)."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": 16, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16", "quantization_config": qcfg,
    }  # fmt: skip



def test_the_block_fp8_refusal_names_the_query_partition_first() -> None:
    """``Fp8LinearMethod.validate_block_quant_shapes`` (sglang/srt/layers/quantization/fp8.py) walks the
    output partitions in order and raises on the first that is not whole ``block_n`` blocks. 24 heads
    and 8 KV heads of dim 64 at TP 8 split qkv_proj into [24 / 8 x 64, 8 / 8 x 64, 64] = [192, 64, 64]:
    the query's 192 % 128 = 64 is named first."""
    with pytest.raises(UnsupportedConfigurationError, match=r"qkv_proj .* its output partition 192 is not"):
        plan_deployment(_request(_block_llama(24, 8, BLOCK_FP8), tp_size=8), suggest=False)


# --- report: the answer's totals ------------------------------------------------------------------


def test_the_answer_names_replicas_alone_or_times_the_attention_dp_workers() -> None:
    """``answer_text``: the total is per-pool tokens x workers; with one attention-DP worker the workers
    are "2 DP replicas", with 2 attention-DP workers "2 attention-DP workers x 2 DP replicas"."""
    for extra, over in (({}, "over 2 DP replicas"), ({"tp_size": 2, "attn_dp_size": 2},
                                                       "over 2 attention-DP workers x 2 DP replicas")):
        planned = plan_deployment(DeploymentRequest("m", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("H100"),
                                                    dp_replicas=2, **extra), suggest=False)  # fmt: skip
        scale = 2 * planned.fit.attn_dp_size
        total = [line for line in answer_text(planned) if line.startswith("  in total")]
        assert total == [f"  in total       {planned.sizes.max_total_num_tokens * scale:,} tokens {over}"]


# --- resident extras under PP, weight formats, flag values ---------------------------------------


def test_rocm_int4_index_buffers_follow_the_fullest_pp_stage() -> None:
    """The ROCm W4A16 MoE's g_idx / sort-index buffers (compressed_tensors_wNa16_moe.py,
    ``CompressedTensorsWNA16MoE.create_weights``) are per MoE layer: Kimi-K2.5 at TP 8 keeps
    2 x 384 x (7168 + 256) x 4 B = 22,806,528 B per layer for its 60 MoE layers; at PP 2 the fullest
    stage holds ceil(61 / 2) = 31 of the 61 layers (``get_pp_indices``), so 31 / 61 of them:
    int(22,806,528 x 60 x 31 / 61) = 695,412,165 B."""
    from kvstrategies.planner.load_refusals import request_layout
    from kvstrategies.planner.resident import resident_extras
    from kvstrategies.planner.weights import estimate_weights

    doc = json.loads((Path(__file__).parent / "fixtures" / "published" / "kimi-k2.5.json").read_text())
    config = doc["config"]
    req = DeploymentRequest("k", {"hf_config": config}, tp_size=8, pp_size=2, gpu=lookup_gpu("MI355X"))
    extras = resident_extras(req, config, estimate_weights(config), request_layout(req, config))
    found = {e.name: e.nbytes for e in extras}
    assert 2 * 384 * (7168 + 256) * 4 == 22_806_528
    assert found["ROCm INT4 expert index buffers"] == int(22_806_528 * 60 * 31 / 61) == 695_412_165


def test_integer_weight_formats_take_1_to_64_bits() -> None:
    """``_int_group`` prices ``bits / 8`` B per value plus a 2-byte scale and a packed zero per group:
    1 bit in groups of 128 is 1/8 + (2 + 1/8) / 128 B; 64 bits 8 + (2 + 8) / 128 B; 0 and 65 bits
    are no format (0 would price every linear at 0 B) and are refused naming config.json."""
    from kvstrategies.planner.weight_quant import _int_group

    assert _int_group(1, 128) == 1 / 8 + (2 + 1 / 8) / 128
    assert _int_group(64, 128) == 8 + (2 + 8) / 128
    for bits in (0, 65):
        with pytest.raises(KVCacheConfigError, match=f"{bits} bits per weight is not a format; fix config.json"):
            _int_group(bits, 128)


def test_an_int_override_without_a_quantization_config_uses_groups_of_128() -> None:
    """The weight estimate's own default (planner/weight_quant.py, ``_scheme``): ``--weight-quantization
    gptq`` on a config that carries no ``quantization_config`` is priced as 4 bits in groups of 128
    (the common GPTQ export), 4 / 8 + (2 + 4 / 8) / 128 B per value, and named so."""
    from kvstrategies.planner.weights import estimate_weights

    fmt = estimate_weights(SMALL, quantization="gptq").fmt
    assert fmt.name == "int4-g128"
    # a quantization_config without a group size (or with none) gets the same 128
    for qcfg in ({"quant_method": "gptq", "bits": 4}, {"quant_method": "gptq", "bits": 4, "group_size": None}):
        assert estimate_weights({**SMALL, "quantization_config": qcfg}).fmt.name == "int4-g128"


def test_a_module_path_match_needs_a_dotted_boundary() -> None:
    """``_module_path_match`` (sglang/srt/layers/quantization/utils.py): equal paths, ``ignored + "."``
    as a prefix, or ``"." + ignored + "."`` inside ``"." + prefix + "."``; ``mlp.gate`` does not match
    ``mlp.gate_up_proj``, and a path that merely starts with a dot matches nothing unrelated."""
    from kvstrategies.planner.weight_quant import module_path_match

    cases = {
        ("model.layers.0", "model.layers.0.mlp"): True,  # a dotted prefix
        ("mlp.gate", "model.layers.0.mlp.gate"): True,  # a dotted part run
        ("mlp.gate", "model.layers.0.mlp.gate_up_proj"): False,
        ("mlp.gate", "model.layers.0.shared_mlp.gate"): False,  # "mlp" is not the part "shared_mlp"
        ("lm_head", "lm_head."): True,  # trailing dots are stripped
        ("lm_head", ".visual.proj"): False,
    }
    assert {case: module_path_match(*case) for case in cases} == cases


def test_the_dsa_triton_union_takes_sglangs_three_choices() -> None:
    """``--dsa-triton-union`` is declared with ``choices=[0, 2, 4]`` (sglang/srt/arg_groups/fields/exec_.py,
    ``dsa_triton_union``): argparse takes 0, 2 and 4 and refuses any other integer."""
    from kvstrategies.planner.launch_values import check_flag_value

    flag = "--dsa-triton-union"
    assert [check_flag_value(flag, flag, v) for v in ("0", "2", "4")] == ["0", "2", "4"]
    for value in ("1", "3", "5"):
        with pytest.raises(KVCacheConfigError, match="not one of SGLang's choices"):
            check_flag_value(flag, flag, value)


# --- bounds on what is read (the planner's own limits) -------------------------------------------


def test_a_safetensors_header_may_declare_at_most_100_mb(tmp_path: Path) -> None:
    """``read_safetensors_header`` refuses a declared header longer than ``MAX_HEADER_BYTES`` =
    100 x 1000 x 1000 (the safetensors format's own cap) before reading it: a (sparse) file declaring
    100,000,001 bytes is refused naming the cap."""
    from kvstrategies.planner.checkpoint import MAX_HEADER_BYTES

    assert MAX_HEADER_BYTES == 100_000_000
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 100_000_001))
        f.truncate(8 + 100_000_001)
    with pytest.raises(KVCacheConfigError, match="length 100000001 exceeds the 100000000-byte cap"):
        read_safetensors_header(path)


def test_an_index_total_must_stay_below_2_to_the_63(tmp_path: Path) -> None:
    """``read_index_total`` takes ``metadata.total_size`` as a whole number of bytes in (0, 2**63):
    2**62 is read, 2**63 and 0 are refused naming the field."""
    from kvstrategies.planner.checkpoint import INDEX_NAME, read_index_total

    for total, ok in ((2**62, True), (2**63, False), (0, False)):
        (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": {}}))
        if ok:
            assert read_index_total(tmp_path) == (total, ())
        else:
            with pytest.raises(KVCacheConfigError, match="metadata.total_size must be a positive whole number"):
                read_index_total(tmp_path)


def test_sharding_facts_read_missing_counts_as_zero() -> None:
    """``ShardingFacts.from_config``: a count the config does not give is 0 (unknown: no layer is then
    taken for an MTP layer, the vocab comes from the tensor's rows); heads default to 1."""
    facts = ShardingFacts.from_config({"hidden_size": 64}, serve_bytes=2)
    assert (facts.num_layers, facts.num_heads, facts.num_kv_heads, facts.vocab_size) == (0, 1, 1, 0)


def test_a_pasted_command_may_hold_4096_words() -> None:
    """``split_command`` reads at most ``MAX_COMMAND_TOKENS`` = 4,096 words: exactly that many are
    read, one more is refused naming the bound."""
    from kvstrategies.planner.launch_command import MAX_COMMAND_TOKENS

    assert MAX_COMMAND_TOKENS == 4096
    assert len(split_command(["--x"] * 4096)) == 4096
    with pytest.raises(KVCacheConfigError, match="4,097 words"):
        split_command(["--x"] * 4097)


def test_sglang_serve_alone_is_a_command_with_no_flags() -> None:
    """``sglang serve`` (SGLang's CLI entry point, sglang/cli/main.py) starts the server: the two words
    alone are a launcher with no server arguments, like ``python -m sglang.launch_server``."""
    from kvstrategies.planner.launch_command import _strip_launcher

    assert _strip_launcher(["sglang", "serve"]) == ([], [])
    assert _strip_launcher(["python", "-m", "sglang.launch_server"]) == ([], [])


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [("weight_bytes", 2**63 - 1, True), ("weight_bytes", 2**63, False),
     ("available_bytes", 2**63 - 1, True), ("available_bytes", 2**63, False)],
)  # fmt: skip
def test_byte_counts_of_a_request_stay_below_2_to_the_63(field: str, value: int, ok: bool) -> None:
    """``validate_request`` (run when the request is made): byte counts are int64 (what torch sizes
    hold): 2**63 - 1 is read, 2**63 refused naming the flag and the interval."""
    from kvstrategies.planner.request import validate_request

    if ok:
        validate_request(_request(SMALL, **{field: value}))
    else:
        flag = "--" + field.replace("_", "-")
        with pytest.raises(KVCacheConfigError, match=f"{flag} must be in \\[0, {2**63 - 1}\\]"):
            validate_request(_request(SMALL, **{field: value}))


def test_a_gpu_capacity_is_in_0_to_2_to_the_63_bytes() -> None:
    """``validate_request``: the GPU capacity in bytes (``capacity_mib x 2**20``) must lie in (0, 2**63):
    1 B (2**-20 MiB) and 2**62 B (2**42 MiB) are read, 2**63 B (2**43 MiB) is refused naming --gpu-memory."""
    from kvstrategies.planner.request import validate_request

    for mib, ok in ((2.0**-20, True), (2.0**42, True), (2.0**43, False)):
        gpu = Accelerator("x", mib, "cuda", (9, 0))
        if ok:
            validate_request(DeploymentRequest("m", {"hf_config": SMALL}, gpu=gpu))
        else:
            with pytest.raises(KVCacheConfigError, match="fix --gpu-memory"):
                validate_request(DeploymentRequest("m", {"hf_config": SMALL}, gpu=gpu))


def test_the_log_requests_level_takes_sglangs_four_choices() -> None:
    """``--log-requests-level`` is declared with ``choices=[0, 1, 2, 3]``
    (sglang/srt/arg_groups/fields/observability.py, ``log_requests_level``)."""
    from kvstrategies.planner.launch_values import check_flag_value

    flag = "--log-requests-level"
    assert [check_flag_value(flag, flag, v) for v in ("0", "1", "2", "3")] == ["0", "1", "2", "3"]
    with pytest.raises(KVCacheConfigError, match="not one of SGLang's choices"):
        check_flag_value(flag, flag, "4")


def test_rocm_per_peer_figure_is_extrapolated_above_tp4() -> None:
    """``preload_memory``: the ROCm per-peer figure is fit to TP 2 and TP 4 logs, so from TP 5 on the
    note says it is extrapolated; at TP 4 it does not."""
    gpu = lookup_gpu("MI355X")
    assert "extrapolated" in preload_memory(gpu, tp=5).note
    assert "extrapolated" not in preload_memory(gpu, tp=4).note


def test_listed_cuda_gpus_carry_nvidias_compute_capabilities() -> None:
    """NVIDIA's published compute capabilities (developer.nvidia.com/cuda-gpus): Hopper 9.0, B200 and
    GB200 10.0, B300 and GB300 10.3, A100 8.0, Ada 8.9, A10 8.6, T4 7.5, RTX 5090 / RTX PRO 6000 12.0."""
    from kvstrategies.planner.gpus import GPUS

    expected = {
        "H100-80GB": (9, 0), "H200": (9, 0), "H20": (9, 0), "H100-NVL": (9, 0), "H100-PCIe": (9, 0), "H800": (9, 0),
        "B200": (10, 0), "GB200": (10, 0), "B300": (10, 3), "GB300": (10, 3), "A100-40GB": (8, 0),
        "A100-80GB": (8, 0), "L40S": (8, 9), "L4": (8, 9), "L40": (8, 9), "RTX-4090": (8, 9), "A10": (8, 6),
        "T4": (7, 5), "RTX-5090": (12, 0), "RTX-PRO-6000": (12, 0),
    }  # fmt: skip
    assert {g.name: g.compute_capability for g in GPUS if g.is_cuda} == expected


def test_block_fp8_costs_a_4_byte_scale_per_block() -> None:
    """Block FP8 (``Fp8LinearMethod.create_weights``, fp8.py): 1 B per value plus one float32 scale per
    ``[block_n, block_k]`` block, 1 + 4 / (128 x 128) B; a block that is not two positive sizes is
    per-channel FP8, 1 B."""
    from kvstrategies.planner.weight_quant import _fp8

    assert _fp8([128, 128]) == 1 + 4 / (128 * 128)
    assert _fp8([1, 1]) == 1 + 4 / 1
    assert _fp8([0, 128]) == _fp8([128, 128, 128]) == _fp8(None) == 1.0


# --- expert parallelism refusals ------------------------------------------------------------------


def test_an_ep_size_that_does_not_divide_tp_lists_every_divisor() -> None:
    """``derive_parallel_widths`` (sglang/srt/runtime_context.py) sets moe_tp_size = tp_size // ep_size,
    so the EP size must divide TP: --ep-size 3 at --tp 8 is refused offering 1, 2, 4, 8."""
    with pytest.raises(UnsupportedConfigurationError, match="Use an --ep-size that divides 8: 1, 2, 4, 8$"):
        plan_deployment(DeploymentRequest("q", {"preset": "qwen3-30b-a3b"}, tp_size=8, ep_size=3,
                                          gpu=lookup_gpu("H100")), suggest=False)  # fmt: skip


def test_experts_that_do_not_divide_over_ep_offer_the_sizes_that_do() -> None:
    """``FusedMoE.__init__`` (sglang/srt/layers/moe/fused_moe_triton/layer.py) needs num_experts % ep_size
    == 0: 60 routed experts over EP 8 are refused; of the divisors of --tp 8 (1, 2, 4, 8) those that
    divide 60 are 1, 2 and 4."""
    from kvstrategies.presets import load_preset_config

    config = {**load_preset_config("qwen3-30b-a3b"), "num_experts": 60}
    with pytest.raises(UnsupportedConfigurationError, match=r"num_experts % ep_size\)\. Use --ep-size 1 or 2 or 4$"):
        plan_deployment(_request(config, tp_size=8, ep_size=8), suggest=False)


def test_shared_experts_default_to_one() -> None:
    """``DeepseekV2MoE.__init__`` (sglang/srt/models/deepseek_v2.py) sizes the shared experts'
    MLP ``moe_intermediate_size x n_shared_experts``; a config without ``n_shared_experts`` is one
    shared expert: 2048 wide, not 4096."""
    from kvstrategies.planner.load_refusals import _mlp_width

    module = "model.layers.1.mlp.shared_experts.gate_up_proj"
    assert _mlp_width({"moe_intermediate_size": 2048}, module) == 2048
    assert _mlp_width({"moe_intermediate_size": 2048, "n_shared_experts": 2}, module) == 4096


def test_the_engine_table_says_how_sglang_splits_a_mamba_budget_before_the_header() -> None:
    """``comparison_text`` (``kvstrategies compare``): when SGLang splits the budget between its Mamba
    slot pool and its token pool, that line follows the budget line, before the table's header:
    3 GiB with 1 GiB of token pool leaves 2.00 GiB for the slots."""
    from kvstrategies.planner.engines import EngineComparison, comparison_text

    lines = comparison_text(EngineComparison(3 * 2**30, "H100", (), (), sglang_token_bytes=2**30))
    assert lines[0].startswith("KV budget per rank: 3,221,225,472 bytes (3.00 GiB)")
    assert lines[1] == "SGLang splits it: 2.00 GiB for its Mamba slot pool, 1.00 GiB for its token pool"
    assert lines[2].lstrip().startswith("request length")


def test_the_moonvit_tower_splits_over_the_attention_tp_group() -> None:
    """MoonViT's ``VisionAttention`` (sglang/srt/models/kimi_k25.py) splits wqkv and wo over the
    attention-TP group, tp / attn_dp ranks. Kimi-K2.5's tower holds 471,143,920 parameters, of which
    27 x (3456 x 1152 + 3456 + 1152 x 1152) = 143,420,544 are split: at TP 8 with attention DP 8 a rank
    keeps all of them (2 B each: 942,287,840 B); with attention DP 2 (attention TP 4) it keeps a
    quarter of the split part, 471,143,920 - 143,420,544 x 3 / 4 = 363,578,512 parameters = 727,157,024 B."""
    from kvstrategies.planner.budget import _vision_tower_bytes

    config = json.loads((Path(__file__).parent / "fixtures" / "published" / "kimi-k2.5.json").read_text())["config"]
    assert 27 * (3456 * 1152 + 3456 + 1152 * 1152) == 143_420_544
    for attn_dp, nbytes in ((8, 942_287_840), (2, 727_157_024)):
        req = DeploymentRequest("k", {"hf_config": config}, tp_size=8, attn_dp_size=attn_dp, gpu=lookup_gpu("H200"))
        assert _vision_tower_bytes(req, config, 2.0)[0] == nbytes


def test_a_hybrid_swa_fit_has_a_full_pool_from_one_token() -> None:
    """``fit_model`` (planner/fit.py): a hybrid-SWA plan has a full-attention pool and an SWA pool; only
    when SGLang sizes no full-attention tokens at all (``full_max_total_num_tokens`` 0) is the SWA pool
    the only one. gpt-oss-20b on an H100 with the full pool forced to 0 tokens has the SWA pool alone,
    with 1 or 2 tokens both pools."""
    import dataclasses

    from kvstrategies.planner.fit import fit_model

    planned = plan_deployment(DeploymentRequest("g", {"preset": "gpt-oss-20b"}, gpu=lookup_gpu("H100")), suggest=False)
    swa = planned.sizes.swa_max_total_num_tokens
    assert swa is not None and swa > 0
    for full, pools in ((0, [("swa", swa)]), (1, [("full", 1), ("swa", swa)]), (2, [("full", 2), ("swa", swa)])):
        sizes = dataclasses.replace(planned.sizes, full_max_total_num_tokens=full)
        assert [(p.name, p.capacity) for p in fit_model(planned.planned.ctx, sizes).pools] == pools


def test_the_hf_quant_config_note_names_the_kv_cache_algorithm(tmp_path: Path) -> None:
    """``with_hf_quant_config``: a ModelOpt ``hf_quant_config.json`` (read by SGLang's
    ``ModelConfig._parse_modelopt_quant_config``) is noted with its algorithm and method and, when it
    quantizes the KV cache too, that algorithm."""
    from kvstrategies.planner.hf_quant import with_hf_quant_config

    llama = {"architectures": ["LlamaForCausalLM"]}
    for section, tail in (({"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, ", KV cache FP8"),
                          ({"quant_algo": "FP8"}, "")):  # fmt: skip
        (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": section}))
        _, note = with_hf_quant_config(llama, tmp_path)
        assert note == "quantization from hf_quant_config.json: ModelOpt FP8 (modelopt_fp8)" + tail


def test_sglangs_longest_request_is_one_below_the_context_or_the_pool() -> None:
    """``TpModelWorker.alloc_memory_pool`` (sglang/srt/managers/tp_worker.py): ``max_req_len = min(context_len - 1,
    max_total_num_tokens - 1)``. Llama-3.1-8B on an H100 pools far more than its 131,072-token
    context, so the longest request SGLang takes is 131,071 tokens."""
    planned = plan_deployment(DeploymentRequest("l", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("H100")), suggest=False)
    assert planned.fit.context_len == 131_072 and planned.fit.capacity_tokens > 131_073
    assert planned.fit.sglang_max_req_len == 131_071


def test_a_compressed_tensors_ignore_list_must_cover_all_or_none_of_an_experts_projections() -> None:
    """``CompressedTensorsConfig.get_moe_scheme`` (compressed_tensors.py) needs one scheme for all MoE
    projections: ignoring the experts' down_proj but not gate/up (``re:.*down_proj``) is refused when
    the weights are priced; ignoring only ``lm_head`` prices them."""
    from kvstrategies.planner.weights import estimate_weights
    from kvstrategies.presets import load_preset_config

    config = load_preset_config("qwen3-30b-a3b")
    qcfg = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}
    assert estimate_weights({**config, "quantization_config": {**qcfg, "ignore": ["lm_head"]}}).weight_bytes() > 0
    partial = estimate_weights({**config, "quantization_config": {**qcfg, "ignore": ["lm_head", "re:.*down_proj"]}})
    with pytest.raises(UnsupportedConfigurationError, match="covers some but not all projections of model.layers.0"):
        partial.weight_bytes()


def test_compressed_tensors_exempts_only_the_last_merged_output() -> None:
    """``validate_fp8_block_shape`` (sglang/srt/layers/quantization/fp8_utils.py): without a TP split
    a merged linear's partitions but the last must be whole ``block_n`` blocks. A 32-head model with one
    KV head of dim 64 at TP 1 merges qkv_proj as [32 x 64, 64, 64] = [2048, 64, 64]: V (last) is
    exempt, K's 64 % 128 != 0 is refused."""
    with pytest.raises(UnsupportedConfigurationError, match=r"qkv_proj .* its output partition 64 is not a multiple"):
        plan_deployment(_request(_block_llama(32, 1, CT_BLOCK_FP8)), suggest=False)


def test_block_fp8_whole_blocks_are_planned() -> None:
    """``Fp8LinearMethod.validate_block_quant_shapes`` (fp8.py) passes when every partition is whole
    ``block_n`` blocks: 128 heads and 128 KV heads of dim 64 at TP 1 merge qkv_proj as
    [128 x 64] x 3 = [8192, 8192, 8192], gate_up as [16384, 16384]: planned."""
    config = _block_llama(128, 128, BLOCK_FP8, hidden=8192, inter=16384)
    assert plan_deployment(_request(config), suggest=False).sizes.max_total_num_tokens > 0


def test_the_budget_step_prints_gib_of_2_to_the_30_bytes() -> None:
    """``budget_text`` prints sizes in GiB (2**30 B, as SGLang's logs do): a given KV budget of
    3 x 2**30 B reads 3.00 GiB; the H100's 81,559 MiB read 81,559 / 1024 = 79.65 GiB."""
    from kvstrategies.planner.report import budget_text

    llama = {"preset": "llama-3.1-8b"}
    given = plan_deployment(DeploymentRequest("l", llama, available_bytes=3 * 2**30), suggest=False)
    assert budget_text(given)[0] == "budget step    skipped: KV budget 3.00 GiB per rank given"
    h100 = plan_deployment(DeploymentRequest("l", llama, gpu=lookup_gpu("H100")), suggest=False)
    assert budget_text(h100)[0].startswith("budget step    H100-80GB 79.65 GiB, mem_fraction_static")
