"""Weights from the checkpoint itself: safetensors headers or the index's ``total_size``.

Two sources, best first (:func:`read_checkpoint`):

* **headers**: every ``*.safetensors`` file of the folder (the ones the index names, else all
  of them). Only the 8-byte little-endian header length and the JSON header are read, never
  tensor data; the header is capped at :data:`MAX_HEADER_BYTES` (the safetensors format's own
  100 MB limit) and only regular files are opened (a symlink is followed, as in the Hugging
  Face cache, and its target must be a regular file). Each tensor's bytes are its
  ``data_offsets`` span, so every dtype (FP8, packed int4, FP4, E8M0 scales) counts exactly.
* **index**: ``model.safetensors.index.json``'s ``metadata.total_size`` (bytes of all tensors),
  when the shards themselves are not there.

Nothing a checkpoint says is believed unchecked. A header is read as the safetensors format
defines it (``safetensors``' ``Metadata::validate``): a JSON object of entries whose ``dtype`` is a
safetensors dtype, whose ``shape`` is a list of non-negative integers and whose ``data_offsets``
``[begin, end]`` lie inside the file's data, do not overlap, and span exactly ``numel x bits / 8``
bytes; an empty header is refused. An index names shard files inside its own folder (plain file
names; ``../x`` or ``/abs`` is refused before anything is opened) and a ``total_size`` that is a
positive whole number. A folder without an index must hold every shard its file names count
(``model-00001-of-00004.safetensors`` needs 00002..00004). :func:`check_matches_config` compares
the checkpoint with the config it is planned for: the language model's layer count, the
embedding's width, and the stored total within :data:`TOTAL_FACTOR` of the config's estimate.

:func:`rank_bytes` splits header tensors the way SGLang's loaders shard them over TP x PP
(``sglang/srt/layers/linear.py``: ``ColumnParallelLinear`` splits the output dim,
``RowParallelLinear`` the input dim, ``QKVParallelLinear`` replicates KV heads when
``tp > num_key_value_heads``; ``layers/vocab_parallel_embedding.py``: embedding and lm_head rows
padded to a multiple of 64 then split; ``layers/moe``: with TP-MoE every expert is split over
its intermediate dim; norms, routers, the MLA down-projections ``q_a_proj`` /
``kv_a_proj_with_mqa`` and per-tensor scales are replicated). Pipeline stages own
``get_pp_indices`` layer ranges; the embedding lives on the first stage, the final norm and
lm_head on the last (a tied lm_head is a second copy there when ``pp > 1``). Layers past
``num_hidden_layers`` (a DeepSeek-style checkpoint's NextN/MTP layer) and ``mtp.*`` tensors are
skipped unless the MTP draft is served. Floating tensors load in the serving dtype (a float32
checkpoint served as bfloat16 takes 2 bytes per value); quantized tensors and their scales keep
their stored bytes.
"""

from __future__ import annotations

import math
import os
import re
import stat
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core.validate import finite_float
from ..errors import KVCacheConfigError
from .weights import get_pp_indices

MAX_HEADER_BYTES = 100 * 1000 * 1000  # the safetensors format's header limit
INDEX_NAME = "model.safetensors.index.json"
VOCAB_PADDING = 64  # sglang.srt.layers.vocab_parallel_embedding.DEFAULT_VOCAB_PADDING_SIZE

_FLOATS = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
#: bits per element of every safetensors dtype (the format's ``Dtype::bitsize``)
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64,
    "I64": 64, "U64": 64,
}  # fmt: skip
#: most tensors one header may list, and most dimensions one tensor may have (real: < 10**5, <= 5)
MAX_TENSORS = 2_000_000
MAX_DIMS = 16
#: a checkpoint whose stored bytes differ from the config's estimate by more than this factor is
#: another model (or part of one): the estimate of a served config is within a few percent of its
#: checkpoint (tests/planner/test_checkpoint.py: six published totals equal it), float32 storage or an
#: unpriced vision tower move it by at most 2x, while an 8B checkpoint for a 70B config is 8.8x
TOTAL_FACTOR = 4.0
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.safetensors$")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors header: name, dtype code, shape, stored bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    begin: int = 0
    end: int = 0

    @property
    def numel(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n


@dataclass(frozen=True)
class CheckpointWeights:
    """What the checkpoint says about its weights.

    ``source`` is ``"headers"`` (``tensors`` holds every tensor) or ``"index"`` (only
    ``total_bytes``, the index's ``metadata.total_size``). ``total_bytes``: all tensors as
    stored, MTP layers and multimodal towers included.
    """

    path: Path
    source: Literal["headers", "index"]
    total_bytes: int
    tensors: tuple[TensorInfo, ...] = ()

    @property
    def label(self) -> str:
        """What the weight figure came from, for the plan's notes."""
        if self.source == "headers":
            return f"checkpoint headers ({len(self.tensors)} tensors, {self.total_bytes:,} B stored, {self.path})"
        return f"checkpoint index total ({self.total_bytes:,} B stored, {self.path / INDEX_NAME})"


# --- reading -----------------------------------------------------------------------------------


def _regular_file(path: Path) -> os.stat_result:
    try:
        info = os.stat(path)  # follows a symlink (the Hugging Face cache links into blobs/)
    except OSError as exc:
        raise KVCacheConfigError(f"cannot read checkpoint file {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise KVCacheConfigError(f"checkpoint file {path} is not a regular file; point at a checkpoint folder")
    return info


def read_safetensors_header(path: str | Path, *, max_header_bytes: int = MAX_HEADER_BYTES) -> tuple[TensorInfo, ...]:
    """The tensors of one ``.safetensors`` file, from its header only (no tensor data read).

    Layout: 8-byte little-endian header length ``n``, then ``n`` bytes of JSON mapping each
    tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (plus an optional
    ``__metadata__``). A header longer than ``max_header_bytes`` or than the file, bad JSON or
    an entry without those fields raises :class:`KVCacheConfigError` naming the file.
    """
    file = Path(path)
    size = _regular_file(file).st_size
    try:
        with open(file, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise KVCacheConfigError(f"{file}: not a safetensors file (shorter than its 8-byte header length)")
            (length,) = struct.unpack("<Q", head)
            if length > max_header_bytes or length > size - 8:
                raise KVCacheConfigError(
                    f"{file}: safetensors header length {length} exceeds "
                    f"{'the file' if length > size - 8 else f'the {max_header_bytes}-byte cap'}; not a valid checkpoint"
                )
            raw = handle.read(length)
    except OSError as exc:
        raise KVCacheConfigError(f"cannot read checkpoint file {file}: {exc.strerror or exc}") from exc
    from ..core.jsonio import parse_json_text

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KVCacheConfigError(f"{file}: safetensors header is not valid JSON (bad UTF-8 at {exc.start})") from exc
    try:
        header = parse_json_text(text, f"{file} (safetensors header)")
    except KVCacheConfigError as exc:
        raise KVCacheConfigError(f"{file}: safetensors header is not valid JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise KVCacheConfigError(f"{file}: safetensors header must be a JSON object")
    entries = {name: entry for name, entry in header.items() if name != "__metadata__"}
    if not entries:
        raise KVCacheConfigError(f"{file}: the safetensors header lists no tensors; not a checkpoint shard")
    if len(entries) > MAX_TENSORS:
        raise KVCacheConfigError(f"{file}: the header lists {len(entries):,} tensors, more than any checkpoint")
    data_bytes = size - 8 - length
    tensors = [_tensor(file, name, entry, data_bytes) for name, entry in entries.items()]
    spans = sorted((t.begin, t.end, t.name) for t in tensors if t.end > t.begin)
    for (_, end_a, name_a), (begin_b, _, name_b) in zip(spans, spans[1:], strict=False):
        if begin_b < end_a:
            raise KVCacheConfigError(f"{file}: tensors {name_a!r:.60} and {name_b!r:.60} overlap in the data")
    return tuple(tensors)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tensor(file: Path, name: str, entry: Any, data_bytes: int) -> TensorInfo:
    """One header entry, checked as the safetensors format checks it (module doc)."""
    where = f"{file}: tensor {name!r:.80}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise KVCacheConfigError(f"{where} needs dtype, shape and data_offsets [begin, end] in the header")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise KVCacheConfigError(f"{where} has dtype {dtype!r:.40}, not a safetensors dtype ({', '.join(DTYPE_BITS)})")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_whole(d) for d in shape):
        raise KVCacheConfigError(f"{where} has shape {shape!r:.60}; a shape is a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(x) for x in offsets)):
        raise KVCacheConfigError(f"{where} has data_offsets {offsets!r:.60}; they are [begin, end] byte offsets")
    begin, end = offsets
    if not begin <= end <= data_bytes:
        raise KVCacheConfigError(
            f"{where} has data_offsets [{begin}, {end}] outside the file's {data_bytes:,} data bytes; the file is "
            "truncated or not a checkpoint"
        )
    numel = math.prod(shape)
    if numel * DTYPE_BITS[dtype] != (end - begin) * 8:
        raise KVCacheConfigError(
            f"{where}: shape {shape} of {dtype} is {numel * DTYPE_BITS[dtype] / 8:,.0f} bytes but its data_offsets "
            f"span {end - begin:,}; not a valid checkpoint"
        )
    return TensorInfo(name, dtype, tuple(shape), end - begin, begin, end)


def read_index_total(folder: str | Path) -> tuple[int, tuple[str, ...]]:
    """``(metadata.total_size, shard file names)`` of ``folder/model.safetensors.index.json``."""
    from ..core.jsonio import read_json_object

    path = Path(folder) / INDEX_NAME
    _regular_file(path)
    index = read_json_object(path, "a safetensors index (model.safetensors.index.json)")
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, Mapping) else None
    number = finite_float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else math.nan
    if not (math.isfinite(number) and 0 < number <= 2**63 - 1 and number == int(number)):
        raise KVCacheConfigError(
            f"{path}: metadata.total_size must be a positive whole number of bytes, got {total!r:.40}; fix the index"
        )
    weight_map = index.get("weight_map")
    if weight_map is None:
        weight_map = {}
    if not isinstance(weight_map, Mapping):
        raise KVCacheConfigError(f"{path}: weight_map must be an object of tensor name -> shard file")
    shards = sorted({_shard_name(path, value) for value in weight_map.values()})
    return int(number) if not isinstance(total, int) else total, tuple(shards)


def _shard_name(index: Path, value: Any) -> str:
    """A shard named by the index: a plain file name inside the index's folder."""
    if isinstance(value, str) and value not in ("", ".", "..") and not any(c in value for c in "/\\\0"):
        return value
    raise KVCacheConfigError(
        f"{index}: weight_map names {value!r:.80}, not a shard file in the checkpoint folder; only files inside "
        "the folder are read"
    )


def _complete_shards(root: Path, names: tuple[str, ...]) -> None:
    """Without an index, every shard of an ``X-0000i-of-0000N.safetensors`` series must be there."""
    series: dict[tuple[str, int], set[int]] = {}
    for name in names:
        match = _SHARD.match(name)
        if match:
            series.setdefault((match["stem"], int(match["count"])), set()).add(int(match["index"]))
    for (stem, count), present in series.items():
        missing = sorted(set(range(1, count + 1)) - present)
        if missing:
            raise KVCacheConfigError(
                f"checkpoint folder {root} holds {len(present)} of the {count} shards of {stem} "
                f"(missing {stem}-{missing[0]:05d}-of-{count:05d}.safetensors) and no {INDEX_NAME}; download the "
                "whole checkpoint (or its index), or pass --weight-bytes"
            )


def require_checkpoint_files(folder: str | Path) -> None:
    """Refuse a folder given as ``--checkpoint`` that holds neither ``*.safetensors`` nor the
    index: its weights would otherwise fall back to the config estimate without a word."""
    root = Path(folder)
    if root.is_dir() and not (root / INDEX_NAME).exists() and next(root.glob("*.safetensors"), None) is None:
        raise KVCacheConfigError(
            f"checkpoint folder {root} holds no *.safetensors file and no {INDEX_NAME}; point --checkpoint "
            "at the folder with the weights, or leave it out to use the config estimate"
        )


def read_checkpoint(folder: str | Path) -> CheckpointWeights | None:
    """The weights a checkpoint folder declares, or ``None`` when it holds no safetensors.

    Headers of every shard when all are present; else the index total; else ``None``.
    """
    root = Path(folder)
    if not root.is_dir():
        raise KVCacheConfigError(f"checkpoint folder {root} does not exist or is not a folder")
    index_total: int | None = None
    shards: tuple[str, ...] = ()
    if (root / INDEX_NAME).exists():
        index_total, shards = read_index_total(root)
    else:
        shards = tuple(sorted(p.name for p in root.glob("*.safetensors")))
        _complete_shards(root, shards)
    if shards and all((root / s).exists() for s in shards):
        tensors: list[TensorInfo] = []
        for shard in shards:
            tensors += read_safetensors_header(root / shard)
        return CheckpointWeights(root, "headers", sum(t.nbytes for t in tensors), tuple(tensors))
    if index_total is not None:
        return CheckpointWeights(root, "index", index_total)
    return None


# --- sharding ----------------------------------------------------------------------------------

_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_EMBED = ("embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embedding")
_COLUMN = {
    "q_proj", "qkv_proj", "query_key_value", "c_attn", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3",
    "c_fc", "fc1", "q_b_proj", "kv_b_proj", "wq_b", "in_proj", "in_proj_qkvz", "in_proj_ba", "in_proj_qkv",
    "in_proj_z", "in_proj_b", "in_proj_a", "dense_h_to_4h", "conv1d", "q_proj_swa",
}  # fmt: skip
_ROW = {"o_proj", "down_proj", "w2", "out_proj", "dense", "dense_4h_to_h", "c_proj", "fc2", "wo", "wo_b"}
_HEAD_SHARDED = {"A_log", "D", "dt_bias", "sinks"}  # per-head vectors split with the heads
_KV = {"k_proj", "v_proj"}
_SCALE_SUFFIXES = ("scale", "scale_inv", "scales", "scale_2", "zeros", "qzeros", "g_idx")


def _module_and_param(name: str) -> tuple[str, str]:
    parts = name.split(".")
    if len(parts) == 1:
        return "", parts[0]
    return parts[-2], parts[-1]


@dataclass(frozen=True)
class ShardingFacts:
    """The config figures sharding needs: layers, heads, vocab, tie, the serving dtype bytes."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    tied: bool
    serve_bytes: int

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], serve_bytes: int) -> ShardingFacts:
        from ..models.hf import text_config

        t = text_config(cfg)

        def get(key: str, default: int = 0) -> int:
            value = t.get(key, cfg.get(key, default))
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

        heads = get("num_attention_heads", 1) or 1
        return cls(
            num_layers=get("num_hidden_layers"),
            num_heads=heads,
            num_kv_heads=get("num_key_value_heads", heads) or heads,
            vocab_size=get("vocab_size"),
            tied=bool(t.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))),
            serve_bytes=serve_bytes,
        )


def _kv_fraction(facts: ShardingFacts, tp: int) -> float:
    """Share of the KV heads one rank holds: ``max(1, nkv // tp) / nkv`` (replicated below tp)."""
    nkv = max(1, facts.num_kv_heads)
    return max(1, nkv // tp) / nkv if tp > 1 else 1.0


_ATTN_MODULES = {"q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "c_attn", "o_proj", "q_b_proj",
                 "kv_b_proj", "wq_b", "wo", "wo_b", "dense"}  # fmt: skip


def _tp_fraction(t: TensorInfo, facts: ShardingFacts, tp: int, attn_tp: int | None = None) -> float:
    """Share of tensor ``t`` one TP rank holds (1.0 = replicated); attention projections use
    ``attn_tp`` (the attention-TP size under DP attention) when given."""
    module, param = _module_and_param(t.name)
    if attn_tp is not None and module in _ATTN_MODULES and ("attn" in t.name or "attention" in t.name):
        tp = attn_tp
    if tp <= 1:
        return 1.0
    if t.numel <= 1:
        return 1.0  # per-tensor scales
    if module in _KV:
        return _kv_fraction(facts, tp)
    if module in ("qkv_proj", "query_key_value") and facts.num_kv_heads < facts.num_heads:
        nh, nkv = facts.num_heads, facts.num_kv_heads
        return (nh / tp + 2 * nkv * _kv_fraction(facts, tp)) / (nh + 2 * nkv)
    if module in _COLUMN:
        return 1.0 / tp
    if module in _ROW:
        return 1.0 if param == "bias" else 1.0 / tp
    if param in _HEAD_SHARDED or module == "experts" or ".experts." in t.name:
        return 1.0 / tp
    return 1.0


def _is_embedding(name: str) -> bool:
    return _LAYER_RE.search(name) is None and any(f"{e}." in name for e in _EMBED) and "norm" not in name


def _is_lm_head(name: str) -> bool:
    return name.startswith("lm_head.") or name.endswith(".lm_head.weight") or name == "output.weight"


def _is_mtp(name: str, layer: int | None, facts: ShardingFacts) -> bool:
    return name.startswith("mtp.") or ".mtp." in name or (layer is not None and layer >= facts.num_layers > 0)


def _loaded_bytes(t: TensorInfo, facts: ShardingFacts) -> float:
    """Bytes once loaded: floats in the serving dtype, quantized values and scales as stored."""
    param = t.name.rsplit(".", 1)[-1]
    if t.dtype in _FLOATS and not param.endswith(_SCALE_SUFFIXES):
        return float(t.numel * facts.serve_bytes)
    return float(t.nbytes)


def _vocab_rows(facts: ShardingFacts, rows: int, tp: int) -> float:
    """Rows of a vocab-parallel table per rank: ``pad(vocab, 64) / tp``."""
    vocab = rows or facts.vocab_size
    padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
    return -(-padded // tp) if tp > 1 else float(padded)


def rank_bytes(
    ckpt: CheckpointWeights,
    facts: ShardingFacts,
    *,
    tp: int = 1,
    pp: int = 1,
    pp_rank: int = 0,
    include_mtp: bool = False,
    attn_tp: int | None = None,
) -> int:
    """Bytes one TP rank of PP stage ``pp_rank`` loads from a header-read checkpoint
    (``attn_tp``: attention-TP size under DP attention; the embedding is sharded over it)."""
    if ckpt.source != "headers":
        raise KVCacheConfigError("rank_bytes needs the safetensors headers; only the index total is known")
    if tp < 1 or pp < 1 or not 0 <= pp_rank < pp:
        raise KVCacheConfigError(f"invalid tp={tp} pp={pp} pp_rank={pp_rank}")
    start, end = get_pp_indices(max(1, facts.num_layers), pp_rank, pp)
    first, last = pp_rank == 0, pp_rank == pp - 1
    total = 0.0
    embedding: TensorInfo | None = None
    has_head = False
    for t in ckpt.tensors:
        match = _LAYER_RE.search(t.name)
        layer = int(match.group(1)) if match else None
        if _is_mtp(t.name, layer, facts):
            if include_mtp and last and not (_is_embedding(t.name) or "shared_head.head" in t.name):
                total += _loaded_bytes(t, facts) * _tp_fraction(t, facts, tp, attn_tp)
            continue
        if _is_embedding(t.name) or _is_lm_head(t.name):
            is_head = _is_lm_head(t.name)
            has_head |= is_head
            if not is_head and embedding is None and t.shape:
                embedding = t
            if (last if is_head else first) and len(t.shape) == 2:
                rows = _vocab_rows(facts, t.shape[0], tp if is_head or attn_tp is None else attn_tp)
                total += rows * t.shape[1] * _loaded_bytes(t, facts) / max(1, t.numel)
            elif last if is_head else first:
                total += _loaded_bytes(t, facts)
            continue
        if layer is not None:
            if start <= layer < end:
                total += _loaded_bytes(t, facts) * _tp_fraction(t, facts, tp, attn_tp)
            continue
        if last:  # final norm and other model-level tensors (multimodal towers: stage 0 too)
            total += _loaded_bytes(t, facts) * _tp_fraction(t, facts, tp)
    if not has_head and last and embedding is not None and len(embedding.shape) == 2 and (pp > 1 or not facts.tied):
        rows = _vocab_rows(facts, embedding.shape[0], tp)
        total += rows * embedding.shape[1] * _loaded_bytes(embedding, facts) / max(1, embedding.numel)
    return int(total)


def max_rank_bytes(
    ckpt: CheckpointWeights, facts: ShardingFacts, *, tp: int, pp: int, include_mtp: bool, attn_tp: int | None = None
) -> int:
    """The fullest rank's bytes over the PP stages (SGLang sizes every rank by the MIN free)."""
    return max(
        rank_bytes(ckpt, facts, tp=tp, pp=pp, pp_rank=r, include_mtp=include_mtp, attn_tp=attn_tp) for r in range(pp)
    )


# --- the checkpoint against the config ---------------------------------------------------------

_TOWER = re.compile(r"vision|visual|audio|mm_projector|multi_modal|image|encoder\.")


def _language_layers(ckpt: CheckpointWeights) -> int | None:
    """Language-model layers the headers hold (``max index + 1``), or None when none are named."""
    top = -1
    for t in ckpt.tensors:
        match = _LAYER_RE.search(t.name)
        if match and not _TOWER.search(t.name) and not t.name.startswith("mtp."):
            top = max(top, int(match.group(1)))
    return top + 1 if top >= 0 else None


def check_matches_config(ckpt: CheckpointWeights, config: Mapping[str, Any], stored_estimate: int) -> None:
    """Refuse a checkpoint that is not the config's model (or only part of it).

    ``stored_estimate``: the config's own estimate of the checkpoint's bytes (all tensors as
    stored). Checked: the stored total is within :data:`TOTAL_FACTOR` of it; from the headers,
    the language model holds at least ``num_hidden_layers`` layers and the embedding is
    ``hidden_size`` wide. Each failure names both figures and the fix.
    """
    from ..models.hf import text_config

    fix = "point --checkpoint at this model's own checkpoint folder, or pass --weight-bytes per rank"
    where = ckpt.path if ckpt.source == "headers" else ckpt.path / INDEX_NAME
    if stored_estimate > 0:
        ratio = ckpt.total_bytes / stored_estimate
        if not 1 / TOTAL_FACTOR <= ratio <= TOTAL_FACTOR:
            raise KVCacheConfigError(
                f"checkpoint {where} stores {ckpt.total_bytes:,} B of weights but the config describes a model of "
                f"about {stored_estimate:,} B ({ratio:.3g}x, beyond the {TOTAL_FACTOR:g}x a checkpoint of this model "
                f"can differ by): it is another model or part of one; {fix}"
            )
    if ckpt.source != "headers":
        return
    t = text_config(config)
    layers = t.get("num_hidden_layers")
    held = _language_layers(ckpt)
    if isinstance(layers, int) and held is not None and held < layers:
        raise KVCacheConfigError(
            f"checkpoint {where} holds {held} transformer layers but the config has num_hidden_layers {layers}: "
            f"it is another model or part of one; {fix}"
        )
    hidden = t.get("hidden_size")
    embedding = next((x for x in ckpt.tensors if _is_embedding(x.name) and len(x.shape) == 2), None)
    floating = embedding is not None and embedding.dtype in _FLOATS
    if isinstance(hidden, int) and embedding is not None and floating and embedding.shape[1] != hidden:
        raise KVCacheConfigError(
            f"checkpoint {where}: the embedding {embedding.name} is {embedding.shape[1]} wide but the config has "
            f"hidden_size {hidden}: it is another model; {fix}"
        )
