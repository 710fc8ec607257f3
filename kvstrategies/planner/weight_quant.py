"""Bytes per parameter from a checkpoint's ``quantization_config``, by kind of tensor group.

:func:`quant_bytes` reads one ``quantization_config`` (``quant_method`` or the ``--quantization``
override) and says what one quantized parameter of the attention, dense-MLP and routed-expert
groups costs, scales and zero points included; ``None`` means "left in the model dtype".
Embeddings, lm_head, routers, norms and biases are never quantized here (every scheme below keeps
them in 16 bits). Formats (bytes per parameter):

* ``fp8`` with ``weight_block_size [b0, b1]``: ``1 + 4 / (b0 * b1)`` (fp32 ``weight_scale_inv``
  per block); per-tensor / per-channel fp8 (``fbgemm_fp8``, ``w8a8_fp8``, ModelOpt FP8):
  ``1`` (one scale per tensor or row, under a thousandth);
* ``mxfp4`` (gpt-oss): routed experts only, ``0.5 + 1/32`` (one E8M0 byte per 32 values);
* NVFP4 (``modelopt_fp4``, ModelOpt ``quant_algo: NVFP4``, compressed-tensors
  ``nvfp4-pack-quantized``): ``0.5 + 1/16`` (one FP8 scale per 16 values);
* AWQ / GPTQ (``bits`` / ``w_bit``, ``group_size`` / ``q_group_size``):
  ``bits/8 + (2 + bits/8) / group`` (packed values, an fp16 scale and a packed zero per group);
  ``group_size: -1`` (per output channel) counts ``bits/8``;
* compressed-tensors (``config_groups``): integer weights as AWQ/GPTQ above (the zero point only
  when ``symmetric`` is false), 8-bit floats as fp8, 4-bit floats as NVFP4; a group whose
  ``targets`` name experts / attention / MLP prices that kind, a ``Linear`` target the rest;
* ``w8a8_int8``: ``1`` (one scale per row).

Modules left unquantized (``modules_to_not_convert``, compressed-tensors ``ignore``, ModelOpt
``exclude_modules``) put their kind back in the model dtype: attention projections, shared /
dense MLPs or routed experts. Patterns that name single layers (``model.layers.3.mlp``) cannot be
priced per layer by a per-kind format: the whole kind is then counted unquantized (an
over-count, never an under-count) and a note says so. Methods this module cannot price
(bitsandbytes, GGUF, ...) raise :class:`~kvstrategies.errors.KVCacheConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KVCacheConfigError

MXFP4 = 0.5 + 1.0 / 32
NVFP4 = 0.5 + 1.0 / 16
KINDS = ("attention", "dense", "expert")


@dataclass(frozen=True)
class QuantBytes:
    """Bytes per parameter of each quantizable kind (``None``: the model dtype), and notes."""

    name: str
    attention: float | None
    dense: float | None
    expert: float | None
    notes: tuple[str, ...] = ()


def _int_group(bits: int, group: int, zero: bool = True) -> float:
    """Packed ``bits``-bit values + a 2-byte scale (+ a packed zero) per ``group`` values."""
    if not 1 <= bits <= 64:  # validation only: 0 bits would price every linear at 0 bytes
        raise KVCacheConfigError(f"quantization_config: {bits} bits per weight is not a format; fix config.json")
    if group <= 0:
        return bits / 8
    return bits / 8 + (2 + (bits / 8 if zero else 0.0)) / group


def _fp8(block: Any) -> float:
    if isinstance(block, (list, tuple)) and len(block) == 2 and all(int(b) > 0 for b in block):
        return 1.0 + 4.0 / (int(block[0]) * int(block[1]))
    return 1.0


_ATTN = re.compile(
    r"self_attn|attention|\battn\b|q_proj|k_proj|v_proj|o_proj|qkv|q_a_proj|q_b_proj|kv_a|kv_b|linear_attn|mixer"
)
_ROUTER = re.compile(r"(mlp\.gate|router|e_score_correction_bias|\bgate)\$?$|shared_expert_gate")
_EXPERT = re.compile(r"experts(?!\w)")
_DENSE = re.compile(r"shared_expert|\bmlp\b|gate_proj|up_proj|down_proj|dense|feed_forward|ffn")
_SKIP = re.compile(r"lm_head|embed|norm|visual|vision|audio|mm_projector|multi_modal")
_LAYER = re.compile(r"layers\.\d+\.")


def unquantized_kinds(patterns: Iterable[Any]) -> tuple[set[str], tuple[str, ...]]:
    """Kinds a ``modules_to_not_convert`` / ``ignore`` list leaves in the model dtype, and notes."""
    kinds: set[str] = set()
    notes: list[str] = []
    for raw in patterns:
        p = str(raw).removeprefix("re:")
        if _SKIP.search(p) or _ROUTER.search(p):
            continue  # embeddings, heads, norms, routers and multimodal parts are unquantized anyway
        kind = (
            "attention" if _ATTN.search(p) else "expert" if _EXPERT.search(p) else "dense" if _DENSE.search(p) else None
        )
        if kind is None:
            continue
        if _LAYER.search(p) and kind not in kinds:
            notes.append(f"{raw!r} leaves single layers unquantized: all {kind} weights counted unquantized")
        kinds.add(kind)
    return kinds, tuple(notes)


def _method(qcfg: Mapping[str, Any], override: str | None) -> str:
    method = override if override is not None else str(qcfg.get("quant_method") or "none")
    return method.lower().replace("-", "_")


def quant_bytes(qcfg: Mapping[str, Any], *, override: str | None = None, expert_dtype: str = "") -> QuantBytes:
    """What one parameter of each quantizable kind costs under ``qcfg`` (see the module doc).

    ``override`` (``fp8``, ``mxfp4``, ``nvfp4``, ``w4a16``) replaces the checkpoint's scheme and
    ignores its lists; ``expert_dtype: fp4`` (DeepSeek-V4) stores routed experts as MXFP4.
    """
    q: Mapping[str, Any] = {} if override is not None else qcfg
    method = _method(qcfg, override)
    skip_patterns = [
        *(q.get("modules_to_not_convert") or ()),
        *(q.get("ignore") or ()),
        *(q.get("exclude_modules") or ()),
    ]
    skipped, notes = unquantized_kinds(skip_patterns)
    result = _scheme(method, q, expert_dtype)
    values = {k: (None if k in skipped else getattr(result, k)) for k in KINDS}
    return QuantBytes(result.name, values["attention"], values["dense"], values["expert"], result.notes + notes)


def _scheme(method: str, q: Mapping[str, Any], expert_dtype: str) -> QuantBytes:
    if method == "fp8":
        block = q.get("weight_block_size") if q else [128, 128]
        per = _fp8(block)
        expert = MXFP4 if expert_dtype.lower() == "fp4" else per
        label = "fp8" + ("-block" if per != 1.0 else "") + ("+fp4-experts" if expert != per else "")
        return QuantBytes(label, per, per, expert)
    if method in ("fbgemm_fp8", "w8a8_fp8", "modelopt_fp8"):
        return QuantBytes("fp8", 1.0, 1.0, 1.0)
    if method == "w8a8_int8":
        return QuantBytes("int8", 1.0, 1.0, 1.0)
    if method == "mxfp4":
        return QuantBytes("mxfp4-experts", None, None, MXFP4)  # gpt-oss: only the routed experts
    if method in ("nvfp4", "modelopt_fp4") or (method == "modelopt" and "FP4" in str(q.get("quant_algo", "")).upper()):
        return QuantBytes("nvfp4", NVFP4, NVFP4, NVFP4)
    if method == "modelopt":
        algo = str(q.get("quant_algo", "FP8")).upper()
        if algo != "FP8":
            raise KVCacheConfigError(
                f"unsupported ModelOpt quant_algo {algo!r} for the weight estimate; give --weight-bytes"
            )
        return QuantBytes("fp8", 1.0, 1.0, 1.0)
    if method in ("w4a16", "awq", "gptq", "awq_marlin", "gptq_marlin", "moe_wna16"):
        bits = int(q.get("bits", q.get("w_bit", 4)))
        group = int(q.get("group_size", q.get("q_group_size", 128)) or 128) if q else 128
        per = _int_group(bits, group)
        notes = ("GPTQ 'dynamic' per-module overrides are not priced",) if q.get("dynamic") else ()
        return QuantBytes(f"int{bits}-g{group}", per, per, per, notes)
    if method == "compressed_tensors":
        return _compressed_tensors(q)
    raise KVCacheConfigError(
        f"unsupported quantization {method!r} for the weight estimate; pass a checkpoint folder (its safetensors "
        "headers give exact bytes), --weight-bytes, or --weight-quantization one of none, fp8, mxfp4, nvfp4, w4a16"
    )


def _ct_group_bytes(weights: Mapping[str, Any], fmt: str) -> tuple[str, float]:
    bits = int(weights.get("num_bits", 8))
    wtype = str(weights.get("type", "int")).lower()
    strategy = str(weights.get("strategy", "tensor")).lower()
    group = int(weights.get("group_size") or 0) if strategy in ("group", "tensor_group") else 0
    if wtype == "float" and bits == 4:
        return "nvfp4", NVFP4
    if wtype == "float" and bits == 8:
        return "fp8" + ("-block" if strategy == "block" else ""), _fp8(
            weights.get("block_structure")
        ) if strategy == "block" else 1.0
    if wtype == "int":
        zero = not bool(weights.get("symmetric", True))
        return f"int{bits}" + (f"-g{group}" if group else ""), _int_group(bits, group, zero)
    raise KVCacheConfigError(
        f"unsupported compressed-tensors weights {dict(weights)!r} (format {fmt!r}); give --weight-bytes"
    )


def _ct_kinds(targets: Iterable[Any]) -> set[str]:
    kinds: set[str] = set()
    for raw in targets:
        t = str(raw).removeprefix("re:")
        if t == "Linear":
            return set(KINDS)
        for kind, pattern in (("expert", _EXPERT), ("attention", _ATTN), ("dense", _DENSE)):
            if pattern.search(t) and not (kind == "dense" and _EXPERT.search(t)):
                kinds.add(kind)
    return kinds


def _compressed_tensors(q: Mapping[str, Any]) -> QuantBytes:
    groups = q.get("config_groups") or {}
    if not isinstance(groups, Mapping) or not groups:
        raise KVCacheConfigError("compressed-tensors quantization_config has no config_groups; give --weight-bytes")
    fmt = str(q.get("format", ""))
    per_kind: dict[str, float] = {}
    names: list[str] = []
    generic: tuple[str, float] | None = None
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue  # activation-only groups do not change weight bytes
        name, per = _ct_group_bytes(weights, fmt)
        names.append(name)
        kinds = _ct_kinds(group.get("targets") or ("Linear",))
        if kinds == set(KINDS):
            generic = (name, per)
        for kind in kinds:
            per_kind.setdefault(kind, per)
    if generic is not None:
        for kind in KINDS:
            per_kind.setdefault(kind, generic[1])
    label = "compressed-tensors " + "+".join(dict.fromkeys(names))
    return QuantBytes(label, per_kind.get("attention"), per_kind.get("dense"), per_kind.get("expert"))
