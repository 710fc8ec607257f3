"""Compare the project's plan document with SGLang's for one case, and explain known differences.

:func:`comparable` reduces either engine's ``plan --case --json`` document to what both answer
(``bridge.COMPARED_KEYS``; buffers as ``name``/``shape``/``dtype``; SGLang's kernel pointer and
stride tables left out, see :data:`POINTER_TABLE`). :func:`difference_lines` names each field or
buffer that differs (:mod:`kvstrategies.golden_diff`). :func:`explain` matches a case's
differences against :data:`KNOWN_DIFFERENCES`: the deliberate ones, each with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...golden_diff import diff_buffers, diff_documents

#: SGLang pools also hold tables of raw data pointers and strides for their kernels
#: (``k_data_ptrs``, ``data_ptrs``, ``data_strides``, ...): addresses, not KV storage.
POINTER_TABLE = re.compile(r"(^|\.)([a-z0-9_]*_)?(data_ptrs|ptrs|data_strides|strides)(\[|$)")
COMPARED_KEYS: tuple[str, ...] = (
    "configurator",
    "cell_size",
    "sizes",
    "sizes_from_max_tokens",
    "pool_sizes",
    "token_to_kv_pool_class",
)


def _buffers(entries: Any) -> list[dict[str, Any]] | None:
    if entries is None:
        return None
    out = []
    for entry in entries:
        if POINTER_TABLE.search(str(entry["name"])):
            continue
        out.append({"name": entry["name"], "shape": list(entry["shape"]), "dtype": entry["dtype"]})
    return sorted(out, key=lambda e: _natural(e["name"]))  # attribute order is not part of the answer


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a plan document both engines answer (either engine's document)."""
    out: dict[str, Any] = {key: document.get(key) for key in COMPARED_KEYS}
    cell = out["cell_size"]
    if isinstance(cell, float) and cell.is_integer():
        out["cell_size"] = cell  # SGLang reports hybrid cells as floats; both sides keep their type
    out["pools"] = _buffers(document.get("pools"))
    req = document.get("req_to_token_pool")
    out["req_to_token_pool"] = None if req is None else {
        "pool_class": req.get("pool_class"),
        "buffers": _buffers(req.get("buffers")),
    }
    return out


def difference_lines(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """Readable lines naming every field or buffer where SGLang (``theirs``) differs from us."""
    a, b = comparable(ours), comparable(theirs)
    lines: list[str] = []
    scalar_a = {k: v for k, v in a.items() if k not in ("pools", "req_to_token_pool")}
    scalar_b = {k: v for k, v in b.items() if k not in ("pools", "req_to_token_pool")}
    lines.extend(diff_documents(scalar_a, scalar_b))
    for key, pool in (("pools", "token_to_kv"), ("req_to_token_pool", "req_to_token")):
        left, right = a[key], b[key]
        if key == "req_to_token_pool":
            if left is None or right is None:
                if (left is None) != (right is None) and a["pools"] is not None and b["pools"] is not None:
                    lines.append(f"pools.{pool}: {'missing in ours' if left is None else 'not built by SGLang'}")
                continue
            if left["pool_class"] != right["pool_class"]:
                lines.append(f"pools.{pool}.pool_class: {left['pool_class']} -> {right['pool_class']}")
            left, right = left["buffers"], right["buffers"]
        if left is None or right is None:
            if left is not right:
                side = "ours" if left is None else "SGLang"
                lines.append(f"pools.{pool}: not built by {side}")
            continue
        lines.extend(diff_buffers(pool, left, right))
    return lines


@dataclass(frozen=True)
class KnownDifference:
    """A deliberate difference from SGLang 0.5.23: a kind, its reason, and which cases it covers."""

    kind: str
    reason: str
    applies: Callable[[Mapping[str, Any]], bool]


def _hf(case: Mapping[str, Any]) -> Mapping[str, Any]:
    config = case.get("_hf_config") or {}
    return config if isinstance(config, Mapping) else {}


def _architectures(case: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (_hf(case).get("architectures") or [])]


def _is_jamba(case: Mapping[str, Any]) -> bool:
    return any("Jamba" in a for a in _architectures(case))


def _is_npu(case: Mapping[str, Any]) -> bool:
    return str(case.get("device", "cuda")) == "npu"


def _all_swa_paged(case: Mapping[str, Any]) -> bool:
    config = _hf(case)
    types = config.get("layer_types") or []
    all_swa = bool(types) and all(str(t) == "sliding_attention" for t in types)
    return all_swa and int(case.get("page_size", 1)) > 1


def _minimax_m3(case: Mapping[str, Any]) -> bool:
    return str(_hf(case).get("model_type", "")) == "minimax_m3"


#: The deliberate differences (spec README decisions, sglang_bridge.md 5), in matching order.
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "jamba-generic-fallback",
        "SGLang 0.5.23 serves Jamba only through its generic fallback, which prices every layer as "
        "attention KV; kvstrategies sizes it as the Mamba hybrid it is (and says so in the plan's notes)",
        _is_jamba,
    ),
    KnownDifference(
        "npu-pools-not-buildable",
        "SGLang's Ascend pool classes need torch_npu: on this host only SGLang's NPU sizing runs, "
        "the pools are compared by the project's own tests",
        _is_npu,
    ),
    KnownDifference(
        "all-swa-page-size",
        "all-SWA models at page > 1: SGLang sizes and builds the pool but its PureSWATokenToKVPoolAllocator "
        "needs page 1; kvstrategies reports the sizes and refuses the layout",
        _all_swa_paged,
    ),
    KnownDifference(
        "minimax-m3-config-unloadable",
        "SGLang 0.5.23 with transformers 5.19 cannot load a minimax_m3 config.json offline (no config "
        "class): SGLang's side cannot run",
        _minimax_m3,
    ),
)


def explain(case: Mapping[str, Any]) -> KnownDifference | None:
    """The known difference that covers this case, if any."""
    for known in KNOWN_DIFFERENCES:
        if known.applies(case):
            return known
    return None
