"""Weights from checkpoint metadata: safetensors headers, the index total, TP/PP sharding."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.checkpoint import (
    INDEX_NAME,
    CheckpointWeights,
    ShardingFacts,
    TensorInfo,
    max_rank_bytes,
    rank_bytes,
    read_checkpoint,
    read_safetensors_header,
)
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.presets import load_preset_config

_ITEM = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], *, data: bool = True) -> int:
    """A real safetensors file (header + zero data; ``data=False``: the data is a sparse hole, nothing
    written); returns the data bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = _ITEM[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        if data:
            f.write(b"\0" * offset)
        else:
            f.truncate(8 + len(raw) + offset)
    return offset


# Published model.safetensors.index.json metadata.total_size of real checkpoints (bytes), as quoted
# in public repositories' docs and tests: these are the checkpoints' own sizes.
PUBLISHED_TOTALS = [
    ("llama-3.1-8b", 16_060_522_496),  # meta-llama/Llama-3.1-8B(-Instruct), 4 shards
    ("llama-3.1-70b", 141_107_412_992),  # meta-llama/Llama-3.1-70B-Instruct, 30 shards
    ("mistral-7b", 14_483_464_192),  # mistralai/Mistral-7B-Instruct-v0.2 (same shapes as v0.1)
    ("qwen2.5-7b", 15_231_233_024),  # Qwen/Qwen2.5-7B-Instruct
    ("mixtral-8x7b", 93_405_585_408),  # mistralai/Mixtral-8x7B
    ("qwen3-8b", 16_381_470_720),  # Qwen/Qwen3-8B
]


@pytest.mark.parametrize(("preset", "total"), PUBLISHED_TOTALS)
def test_index_total_is_the_weight_figure_at_tp1(tmp_path: Path, preset: str, total: int) -> None:
    """With only the index at hand, TP1 weights are the checkpoint's own size (+ nothing else)."""
    config = load_preset_config(preset)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": {}}))
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and (ckpt.source, ckpt.total_bytes) == ("index", total)
    req = DeploymentRequest(preset, {"hf_config": config, "checkpoint": str(tmp_path)}, gpu=lookup_gpu("B200"))
    budget = plan_deployment(req, suggest=False).budget
    assert budget.weight_source is not None and "checkpoint index total" in budget.weight_source
    assert budget.weight_origin == "checkpoint index total"
    rope = budget.weight_bytes - total  # type: ignore[operator]
    assert 0 <= rope < 2**27  # the float32 RoPE cache is all that is added at TP1


@pytest.mark.parametrize(("preset", "total"), PUBLISHED_TOTALS)
def test_config_estimate_matches_published_checkpoint_sizes(preset: str, total: int) -> None:
    """The parameter-count estimate of the dense and MoE presets equals the published total."""
    assert estimate_weights(load_preset_config(preset)).weight_bytes(include_mtp=True) == total


def test_index_total_scales_the_per_rank_split(tmp_path: Path) -> None:
    config = load_preset_config("llama-3.1-70b")
    (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 141_107_412_992}}))
    req = DeploymentRequest("x", {"hf_config": config, "checkpoint": str(tmp_path)}, tp_size=8, gpu=lookup_gpu("H200"))
    est = estimate_weights(config).weight_bytes_per_rank(8)
    weights = plan_deployment(req, suggest=False).budget.weight_bytes
    assert weights is not None and abs(weights - est) < 2**27  # exact ratio 1: only the RoPE cache differs


def _llama_like(layers: int = 2, vocab: int = 1000, h: int = 64, inter: int = 128, nh: int = 8, nkv: int = 2) -> dict:
    hd = h // nh
    t: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, h))}
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {
            p + "input_layernorm.weight": ("BF16", (h,)),
            p + "post_attention_layernorm.weight": ("BF16", (h,)),
            p + "self_attn.q_proj.weight": ("BF16", (nh * hd, h)),
            p + "self_attn.k_proj.weight": ("BF16", (nkv * hd, h)),
            p + "self_attn.v_proj.weight": ("BF16", (nkv * hd, h)),
            p + "self_attn.o_proj.weight": ("BF16", (h, nh * hd)),
            p + "mlp.gate_proj.weight": ("BF16", (inter, h)),
            p + "mlp.up_proj.weight": ("BF16", (inter, h)),
            p + "mlp.down_proj.weight": ("BF16", (h, inter)),
        }
    t |= {"model.norm.weight": ("BF16", (h,)), "lm_head.weight": ("BF16", (vocab, h))}
    return t


FACTS = ShardingFacts(num_layers=2, num_heads=8, num_kv_heads=2, vocab_size=1000, tied=False, serve_bytes=2)


def test_headers_read_exact_bytes_without_data(tmp_path: Path) -> None:
    tensors = _llama_like()
    nbytes = write_safetensors(tmp_path / "model.safetensors", tensors, data=False)  # header only on disk
    read = read_safetensors_header(tmp_path / "model.safetensors")
    assert {t.name: (t.dtype, t.shape) for t in read} == tensors
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and (ckpt.source, ckpt.total_bytes) == ("headers", nbytes)
    layer = 2 * 64 + 2 * 64 * 64 + 2 * 16 * 64 + 3 * 128 * 64  # norms, q/o, k/v (2 heads x 8), mlp
    assert nbytes == 2 * (2 * 1000 * 64 + 2 * layer + 64)
    assert rank_bytes(ckpt, FACTS) == nbytes + 2 * 2 * 24 * 64  # TP1: all, vocab 1000 padded to 1024 rows


def test_tp_sharding_follows_sglang_layers(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "model.safetensors", _llama_like())
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None
    h, vocab_rows = 64, 1024  # pad(1000, 64)
    norms = 2 * (2 * h) + h
    # TP2: q/o/mlp halved, 2 KV heads split 1 per rank, vocab rows 512 each for embed and head
    attn = (64 * 64 + 2 * 16 * 64 + 64 * 64) // 2
    mlp = 3 * 128 * 64 // 2
    tp2 = 2 * (2 * vocab_rows // 2 * h + norms + 2 * (attn + mlp))
    assert rank_bytes(ckpt, FACTS, tp=2) == tp2
    # TP4: KV heads (2) < tp: one head per rank, replicated -> k/v keep 8 x 64 each (not 4 x 64)
    kv4 = 2 * 8 * 64
    tp4 = 2 * (2 * vocab_rows // 4 * h + norms + 2 * ((64 * 64 + 64 * 64) // 4 + kv4 + 3 * 128 * 64 // 4))
    assert rank_bytes(ckpt, FACTS, tp=4) == tp4


def test_pp_stages_and_mtp_layers(tmp_path: Path) -> None:
    tensors = _llama_like(layers=3)  # layer 2 is past num_hidden_layers=2: an MTP/NextN layer
    write_safetensors(tmp_path / "model.safetensors", tensors)
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None
    layer = 2 * (2 * 64 + 2 * 64 * 64 + 2 * 16 * 64 + 3 * 128 * 64)
    embed = head = 2 * 1024 * 64
    assert rank_bytes(ckpt, FACTS, pp=2, pp_rank=0) == embed + layer
    assert rank_bytes(ckpt, FACTS, pp=2, pp_rank=1) == layer + 2 * 64 + head
    assert rank_bytes(ckpt, FACTS, pp=2, pp_rank=1, include_mtp=True) == 2 * layer + 2 * 64 + head
    assert max_rank_bytes(ckpt, FACTS, tp=1, pp=2, include_mtp=False) == layer + 2 * 64 + head


def test_float32_checkpoint_loads_in_the_serving_dtype(tmp_path: Path) -> None:
    write_safetensors(
        tmp_path / "model.safetensors",
        {
            "model.layers.0.mlp.up_proj.weight": ("F32", (128, 64)),
            "model.layers.0.mlp.up_proj.weight_scale": ("F32", (1,)),
        },
    )
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.total_bytes == 128 * 64 * 4 + 4
    assert rank_bytes(ckpt, FACTS) == 128 * 64 * 2 + 4  # values served in bf16, the scale kept fp32


def test_fp8_values_keep_their_bytes(tmp_path: Path) -> None:
    write_safetensors(
        tmp_path / "model.safetensors",
        {
            "model.layers.0.mlp.down_proj.weight": ("F8_E4M3", (64, 256)),
            "model.layers.0.mlp.down_proj.weight_scale_inv": ("F32", (1, 2)),
        },
    )
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None
    assert rank_bytes(ckpt, FACTS, tp=2) == (64 * 256 + 8) // 2  # row-parallel: values and block scales split


def test_index_lists_shards_that_must_all_be_present(tmp_path: Path) -> None:
    a = write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors", {"model.embed_tokens.weight": ("BF16", (64, 8))}
    )
    index = {
        "metadata": {"total_size": 999},
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / INDEX_NAME).write_text(json.dumps(index))
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and (ckpt.source, ckpt.total_bytes) == ("index", 999)  # shard 2 missing
    b = write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"lm_head.weight": ("BF16", (64, 8))})
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and (ckpt.source, ckpt.total_bytes) == ("headers", a + b)


def test_bad_headers_are_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(KVCacheConfigError, match="header length .* exceeds the file"):
        read_safetensors_header(bad)
    bad.write_bytes(struct.pack("<Q", 4) + b"{nop")
    with pytest.raises(KVCacheConfigError, match="not valid JSON"):
        read_safetensors_header(bad)
    bad.write_bytes(b"abc")
    with pytest.raises(KVCacheConfigError, match="not a safetensors file"):
        read_safetensors_header(bad)
    big = tmp_path / "big.safetensors"
    big.write_bytes(struct.pack("<Q", 64) + b" " * 64)
    with pytest.raises(KVCacheConfigError, match="64-byte cap|exceeds the 32-byte cap"):
        read_safetensors_header(big, max_header_bytes=32)
    bad.write_bytes(struct.pack("<Q", 24) + b'{"t": {"dtype": "BF16"}}')
    with pytest.raises(KVCacheConfigError, match="needs dtype, shape and data_offsets"):
        read_safetensors_header(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_only_regular_files_are_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        read_safetensors_header(fifo)
    real = tmp_path / "blob"
    write_safetensors(real, {"x.weight": ("BF16", (2, 2))})
    link = tmp_path / "link.safetensors"
    link.symlink_to(real)  # the Hugging Face cache's snapshots/ link into blobs/
    assert read_safetensors_header(link)[0].nbytes == 8


def test_model_folder_on_the_command_line_uses_its_headers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    config = load_preset_config("llama-3.1-8b")
    (tmp_path / "config.json").write_text(json.dumps(config))
    stored = write_safetensors(tmp_path / "model.safetensors", _llama_like(32, 128256, 4096, 14336, 32, 8), data=False)
    assert stored == 16_060_522_496  # meta-llama/Llama-3.1-8B's published index total: the same tensors
    assert main(["plan", str(tmp_path), "--gpu", "H100", "--json"]) == 0
    planner = json.loads(capsys.readouterr().out)["planner"]
    assert f"checkpoint headers ({32 * 9 + 3} tensors, 16,060,522,496 B stored" in planner["budget"]["weight_source"]
    assert planner["budget"]["weight_origin"] == "checkpoint headers"


def test_checkpoint_flag_without_safetensors_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    assert main(["plan", "llama-3.1-8b", "--gpu", "H100", "--checkpoint", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds no *.safetensors file" in err and "--checkpoint" in err


# ---- nothing a checkpoint says is believed unchecked ------------------------------------------------


def _raw_header(path: Path, header: Any, data: int = 0) -> None:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + data)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"dtype": "BF16", "shape": ["64", 8], "data_offsets": [0, 1024]}, "a list of non-negative integers"),
        ({"dtype": "BF16", "shape": [True, 8], "data_offsets": [0, 16]}, "a shape is a list"),
        ({"dtype": "BF16", "shape": [1e400, 8], "data_offsets": [0, 16]}, "a shape is a list"),
        ({"dtype": "Q4_K", "shape": [64, 8], "data_offsets": [0, 1024]}, "not a safetensors dtype"),
        ({"dtype": "BF16", "shape": [64, 8], "data_offsets": [0, 10**15]}, r"outside the file's 1,024 data bytes"),
        ({"dtype": "BF16", "shape": [64, 8], "data_offsets": [0, 512]}, "is 1,024 bytes but its data_offsets span 512"),
        ({"dtype": "BF16", "shape": [64, 8], "data_offsets": [512, 0]}, "outside the file"),
        ({"dtype": "BF16", "shape": [64, 8], "data_offsets": [0]}, r"they are \[begin, end\] byte offsets"),
        ({"dtype": "BF16", "shape": [2**40, 2**40], "data_offsets": [0, 1024]}, "is .* bytes but its data_offsets"),
        ("BF16", "needs dtype, shape and data_offsets"),
    ],
)
def test_malformed_header_entries_are_refused(tmp_path: Path, entry: Any, match: str) -> None:
    path = tmp_path / "model.safetensors"
    raw = json.dumps({"t.weight": entry}).replace("Infinity", "1e400").encode()
    _raw_header(path, raw, data=1024)
    with pytest.raises(KVCacheConfigError, match=match):
        read_safetensors_header(path)


def test_an_empty_header_and_overlapping_tensors_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    _raw_header(path, {"__metadata__": {"format": "pt"}})
    with pytest.raises(KVCacheConfigError, match="lists no tensors"):
        read_safetensors_header(path)
    _raw_header(path, {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                       "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}, data=12)  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="overlap"):
        read_safetensors_header(path)


@pytest.mark.parametrize("total", [0, -1, 1.5, 1e400, True, "16GB", 2**70, None])
def test_an_index_total_that_is_not_a_positive_whole_number_is_refused(tmp_path: Path, total: Any) -> None:
    text = json.dumps({"metadata": {"total_size": total}}).replace("Infinity", "1e400")
    (tmp_path / INDEX_NAME).write_text(text)
    with pytest.raises(KVCacheConfigError, match="total_size must be a positive whole number"):
        read_checkpoint(tmp_path)


@pytest.mark.parametrize("shard", ["../../etc/passwd", "/etc/passwd", "..", "sub/model.safetensors", "", 7])
def test_an_index_naming_a_file_outside_the_folder_is_refused_before_opening_it(tmp_path: Path, shard: Any) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    write_safetensors(tmp_path / "outside.safetensors", {"x.weight": ("BF16", (4, 4))})
    (folder / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 32}, "weight_map": {"x.weight": shard}}))
    with pytest.raises(KVCacheConfigError, match="not a shard file in the checkpoint folder"):
        read_checkpoint(folder)


def test_shard_one_of_four_without_an_index_is_refused(tmp_path: Path) -> None:
    """Planned as the whole model before: 5 GiB of a 15 GiB checkpoint."""
    write_safetensors(tmp_path / "model-00001-of-00004.safetensors", {"model.embed_tokens.weight": ("BF16", (8, 8))})
    with pytest.raises(KVCacheConfigError, match=r"holds 1 of the 4 shards of model \(missing model-00002-of-00004"):
        read_checkpoint(tmp_path)
    for i in (2, 3, 4):
        write_safetensors(tmp_path / f"model-0000{i}-of-00004.safetensors", {f"w{i}": ("BF16", (8, 8))})
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.total_bytes == 4 * 128


def test_an_8b_checkpoint_for_a_70b_config_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    (tmp_path / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    assert main(["plan", "llama-3.1-70b", "--gpu", "H100", "--tp", "8", "--checkpoint", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "stores 16,060,522,496 B of weights but the config describes a model of about 141,107,412,992 B" in err[0]
    assert "0.114x, beyond the 4x" in err[0] and "--weight-bytes" in err[0]


def test_headers_with_fewer_layers_or_another_width_than_the_config_are_refused(tmp_path: Path) -> None:
    from kvstrategies.planner.checkpoint import check_matches_config

    config = {"num_hidden_layers": 4, "hidden_size": 64, "vocab_size": 1000}
    write_safetensors(tmp_path / "model.safetensors", _llama_like(layers=2))
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None
    with pytest.raises(KVCacheConfigError, match="holds 2 transformer layers but the config has num_hidden_layers 4"):
        check_matches_config(ckpt, config, ckpt.total_bytes)
    with pytest.raises(KVCacheConfigError, match="is 64 wide but the config has hidden_size 128"):
        check_matches_config(ckpt, {**config, "num_hidden_layers": 2, "hidden_size": 128}, ckpt.total_bytes)
    check_matches_config(ckpt, {**config, "num_hidden_layers": 2}, ckpt.total_bytes)  # its own config: fine


# ---- safetensors dtypes, per-rank shares and the bounds on what is read, by hand ---------------------------


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


TIED_FACTS = ShardingFacts(num_layers=2, num_heads=8, num_kv_heads=2, vocab_size=1000, tied=True, serve_bytes=2)


def _headers(*tensors: TensorInfo) -> CheckpointWeights:
    return CheckpointWeights(Path("m"), "headers", sum(t.nbytes for t in tensors), tensors)


def test_a_fused_qkv_tensor_keeps_the_heads_of_one_rank() -> None:
    """``QKVParallelLinear`` (sglang/srt/layers/linear.py): a rank holds ``nh / tp`` query heads and
    ``max(1, nkv / tp)`` KV heads each for K and V. The fused [(8 + 2 x 2) x 8, 64] BF16 tensor
    (12,288 B) of 8 heads and 2 KV heads of dim 8 keeps at TP 2 (4 + 2 x 1) x 8 rows = 6,144 B and at
    TP 4 (2 + 2 x 1) x 8 rows (one KV head replicated per rank) = 4,096 B."""
    qkv = TensorInfo("model.layers.0.self_attn.qkv_proj.weight", "BF16", (96, 64), 96 * 64 * 2)
    ckpt = _headers(qkv)
    assert rank_bytes(ckpt, TIED_FACTS) == 12_288
    assert rank_bytes(ckpt, TIED_FACTS, tp=2) == 48 * 64 * 2 == 6_144
    assert rank_bytes(ckpt, TIED_FACTS, tp=4) == 32 * 64 * 2 == 4_096


def test_a_one_row_embedding_is_padded_to_64_rows() -> None:
    """``VocabParallelEmbedding`` (sglang/srt/layers/vocab_parallel_embedding.py) pads the vocab to a
    multiple of 64 (``pad_vocab_size``): a [1, 1] BF16 table loads 64 x 1 rows x 2 B = 128 B (tied, so
    no separate head)."""
    embed = TensorInfo("model.embed_tokens.weight", "BF16", (1, 1), 2)
    assert rank_bytes(_headers(embed), TIED_FACTS) == 64 * 1 * 2


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
