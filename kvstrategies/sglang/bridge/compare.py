"""Compare the project's plan document with SGLang's for one case, and explain known differences.

:func:`comparable` reduces either engine's ``plan --case --json`` document to what both answer
(:data:`COMPARED_KEYS` and the pools; buffers as ``name``/``shape``/``dtype``; SGLang's kernel pointer and
stride tables left out, see :data:`POINTER_TABLE`). :func:`difference_lines` names each field or
buffer that differs (:mod:`kvstrategies.golden.diff`). :func:`explain` matches a case's
differences against :data:`KNOWN_DIFFERENCES`: the deliberate ones, each with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...core.releases import parse_release
from ...golden.diff import diff_buffers, diff_documents
from ...models.architectures import model_type_row
from ...strategies.default import ZERO_KV_RULE
from ...strategies.hybrid_linear import MAMBA_SPEC_STATE_JOINT  # the same change added SGLang's zero-slot check
from ...strategies.request_math import REQUESTS_FROM_RESOLVED_TOKENS

#: SGLang pools also hold tables of raw data pointers and strides for their kernels
#: (``k_data_ptrs``, ``data_ptrs``, ``data_strides``, ...): addresses, not KV storage.
POINTER_TABLE = re.compile(r"(^|\.)([a-z0-9_]*_)?(data_ptrs|ptrs|data_strides|strides)(\[|$)")
#: private attributes (``_intermediate_conv_window_phys``) hold backing storage engines address only
#: through views; the plan document lists those under ``allocations``, not ``pools``
PRIVATE = re.compile(r"(^|\.)_")
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
        if POINTER_TABLE.search(str(entry["name"])) or PRIVATE.search(str(entry["name"])):
            continue
        out.append({"name": entry["name"], "shape": list(entry["shape"]), "dtype": entry["dtype"]})
    return sorted(out, key=lambda e: _natural(e["name"]))  # attribute order is not part of the answer


def _backing(document: Mapping[str, Any]) -> list[str]:
    """Storage behind views, as sorted ``shape dtype`` signatures (names differ between the sides).

    SGLang's document lists it as private pool attributes (``_intermediate_conv_window_phys``) and
    the bases of views no attribute holds (``k_buffer[0]._base``, the fused K/V tensor of
    ``MHATokenToKVPool._create_buffers_normal``); ours as the allocations its buffers are views of
    (``kv_storage[0]``) and private allocations (``mamba._intermediate_conv_window_phys[0]``).
    Empty when every buffer owns its bytes.
    """
    if "allocations" in document:
        viewed = {str(e["view_of"]) for e in document.get("pools") or [] if e.get("view_of")}
        entries = [e for e in document["allocations"] or []
                   if str(e["name"]) in viewed or PRIVATE.search(str(e["name"]))]  # fmt: skip
    else:
        entries = [e for e in document.get("pools") or [] if PRIVATE.search(str(e["name"]))]
    return sorted(
        f"{list(e['shape'])} {e['dtype']}" for e in entries if not POINTER_TABLE.search(str(e["name"]))
    )


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a plan document both engines answer (either engine's document)."""
    out: dict[str, Any] = {key: document.get(key) for key in COMPARED_KEYS}
    # a plan document names SGLang's class beside its own (Mamba hybrids and Ascend layouts are
    # DefaultPoolConfigurator numbers in SGLang); SGLang's own document has only "configurator"
    out["configurator"] = document.get("sglang_configurator") or out["configurator"]
    cell = out["cell_size"]
    if isinstance(cell, float) and cell.is_integer():
        out["cell_size"] = cell  # SGLang reports hybrid cells as floats; both sides keep their type
    out["pools"] = _buffers(document.get("pools"))
    out["backing"] = _backing(document)
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
    # storage behind views is compared where both sides built the pool ("not built by" says the rest)
    skip = ("pools", "req_to_token_pool") + (("backing",) if a["pools"] is None or b["pools"] is None else ())
    scalar_a = {k: v for k, v in a.items() if k not in skip}
    scalar_b = {k: v for k, v in b.items() if k not in skip}
    lines.extend(diff_documents(scalar_a, scalar_b))
    for key, pool in (("pools", "token_to_kv"), ("req_to_token_pool", "req_to_token")):
        left, right = a[key], b[key]
        if key == "req_to_token_pool":
            if left is None or right is None:  # a draft shares its target's request pool: not the draft's
                continue
            if left["pool_class"] != right["pool_class"]:
                lines.append(f"pools.{pool}.pool_class: {left['pool_class']} -> {right['pool_class']}")
            left, right = left["buffers"], right["buffers"]
        if left is None or right is None:
            if left is not right:
                side = "ours" if left is None else "SGLang"
                lines.append(f"pools.{pool}: not built by {side}")
            continue
        buffer_lines = diff_buffers(pool, left, right)
        if buffer_lines and _signatures(left) == _signatures(right):
            buffer_lines = [f"pools.{pool}: same buffers under other names ({len(left)} buffers)"]
        lines.extend(buffer_lines)
    for key in ("layout_error", "sizing_error"):
        if (key in ours) != (key in theirs):
            text = theirs.get(key) if key in theirs else ours.get(key)
            lines.append(f"{key}: {'added' if key in theirs else 'removed'} ({text})")
    return lines


def _signatures(buffers: list[dict[str, Any]]) -> list[tuple[tuple[int, ...], str]]:
    return sorted((tuple(b["shape"]), str(b["dtype"])) for b in buffers)


@dataclass(frozen=True)
class KnownDifference:
    """A deliberate (or environmental) difference from SGLang 0.5.23.

    ``applies(case)`` says which cases it can explain, ``covers`` which difference lines (regular
    expressions on :func:`difference_lines` output; an SGLang refusal is the line
    ``sglang: refused: ...``). A case is *known* when every line is covered by a difference that
    applies to it; anything else is unexplained.
    """

    kind: str
    reason: str
    applies: Callable[[Mapping[str, Any]], bool]
    covers: tuple[str, ...]

    def covers_line(self, line: str) -> bool:
        return any(re.search(pattern, line) for pattern in self.covers)


def _hf(case: Mapping[str, Any]) -> Mapping[str, Any]:
    config = case.get("_hf_config") or {}
    return config if isinstance(config, Mapping) else {}


def _architectures(case: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (_hf(case).get("architectures") or [])]


def _is_dsv4(case: Mapping[str, Any]) -> bool:
    return any(a.startswith("DeepseekV4") for a in _architectures(case))


def _all_swa(case: Mapping[str, Any]) -> bool:
    config = _hf(case)
    text = config.get("language_config") or config.get("text_config") or config
    return model_type_row(text.get("model_type", config.get("model_type"))).all_sliding or (
        isinstance(text.get("layer_types"), list)
        and all(str(t) == "sliding_attention" for t in text["layer_types"])
    )


#: the first release with the zero-KV rule (earlier ones divide by a zero cell)
_ZERO_KV_FIRST = ZERO_KV_RULE.span.first.text if ZERO_KV_RULE.span.first is not None else "the zero-KV rule"

_NOT_BUILT = (r"^token_to_kv_pool_class: \S+ -> null$", r"^pools\.token_to_kv: not built by SGLang$",
              r"^layout_error: added ")

#: The known differences (the project's decisions, each with its reason, and this host's limits).
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "npu-pools-not-buildable",
        "SGLang's Ascend pool classes need torch_npu: on a host without it only SGLang's NPU sizing runs "
        "(sizes are compared; pools are checked by the project's own layout tests)",
        lambda case: str(case.get("device", "cuda")) == "npu",
        _NOT_BUILT,
    ),
    KnownDifference(
        "npu-sizing-needs-torch-npu",
        "SGLang up to 0.5.9 sizes and builds the pools in one ModelRunnerKVCacheMixin.init_memory_pool, and its "
        "Ascend pools import torch_npu: on a host without it no NPU answer is recorded (the project's NPU sizing is "
        "held to the later releases' recordings and to its own layout tests)",
        lambda case: str(case.get("device", "cuda")) == "npu",
        (r"^sglang: refused: SGLang raised ModuleNotFoundError: No module named 'torch_npu'$",),
    ),
    KnownDifference(
        "all-swa-page-size",
        "all-SWA models at page > 1: SGLang sizes and builds the pool but its PureSWATokenToKVPoolAllocator "
        "needs page 1; kvstrategies reports the sizes and refuses the layout",
        lambda case: _all_swa(case) and int(case.get("page_size", 1)) > 1,
        (r"^pools\.", r"^token_to_kv_pool_class: ", r"^layout_error: "),
    ),
    KnownDifference(
        "dsv4-auto-kv-dtype",
        "DeepSeek-V4 with kv_cache_dtype auto: SGLang's launch turns it into fp8 before sizing (the bridge "
        "takes settings as resolved), and its DeepSeekV4TokenToKVPool asserts a uint8 store otherwise; "
        "kvstrategies lays the pool out as the launch would",
        lambda case: _is_dsv4(case) and str(case.get("kv_cache_dtype", "auto")) == "auto",
        _NOT_BUILT,
    ),
    KnownDifference(
        "dsv4-draft-own-sizing",
        "a DeepSeek-V4 draft worker: SGLang's DSV4PoolConfigurator prices it at 0 bytes per full token and its "
        "calculate_pool_sizes divides by zero (a draft never calls it at launch: it adopts the target's sizes); "
        "kvstrategies reports the draft layer's own sizing",
        lambda case: _is_dsv4(case) and bool(case.get("is_draft_worker")),
        (r"^cell_size: ", r"^sizes(_from_max_tokens)?[.:]", r"^sizing_error: "),
    ),
    KnownDifference(
        "draft-no-sizing-of-its-own",
        "SGLang up to 0.5.9 gives a draft worker no sizing of its own: init_memory_pool takes the target's "
        "draft_runner_cache_size, so SGLang's side has no draft sizes (and no draft request pool, which is the "
        "target's: its rows are what the target left, which the bridge's lone draft has not got); kvstrategies "
        "reports the draft's own sizing as for the later releases",
        lambda case: bool(case.get("is_draft_worker"))
        and not REQUESTS_FROM_RESOLVED_TOKENS.holds(parse_release(case.get("sglang_version"))),
        (r"^sizes(_from_max_tokens)?[.:]", r"^sizing_error: added \(SGLang's RunnerInitProfile raised AttributeError: "
         r"'ServerArgs' object has no attribute 'draft_runner_cache_size'\)$", r"^pool_sizes\.max_running_requests: "),
    ),
    KnownDifference(
        "draft-zero-cell-divides",
        f"a draft worker with no attention layer of its own under SGLang before {_ZERO_KV_FIRST} (the zero-KV rule): "
        "its calculate_pool_sizes divides by the zero cell, which a draft never calls at launch (it adopts "
        "the target's sizes); kvstrategies reports the draft's own sizing by the zero-KV rule",
        lambda case: bool(case.get("is_draft_worker"))
        and not ZERO_KV_RULE.holds(parse_release(case.get("sglang_version"))),
        (r"^cell_size: ", r"^sizes(_from_max_tokens)?[.:]", r"^sizing_error: "),
    ),
    KnownDifference(
        "pp-zero-cell-stage",
        "another pipeline stage of this layout has no attention layer: SGLang before "
        f"{_ZERO_KV_FIRST} divides by its zero cell at launch (the zero-KV rule came then), so the deployment "
        "does not start; the bridge sizes this one rank "
        "alone, kvstrategies refuses the layout",
        lambda case: int(case.get("pp_size", 1)) > 1
        and not ZERO_KV_RULE.holds(parse_release(case.get("sglang_version"))),
        (r"^kvstrategies: refused: .*cannot size a rank without attention layers",),
    ),
    KnownDifference(
        "mamba-zero-slots-unchecked",
        "SGLang up to 0.5.12 sizes a hybrid linear model whose Mamba reservation leaves 0 state slots without a "
        "word (max_running_requests 0: the server can admit no request; 0.5.13 raises 'state cache is too small "
        "to serve any requests' in ModelRunnerKVCacheMixin.handle_max_mamba_cache); kvstrategies refuses it",
        lambda case: not MAMBA_SPEC_STATE_JOINT.holds(parse_release(case.get("sglang_version"))),
        (r"^kvstrategies: refused: .*(Mamba state reservation|state cache is too small|max_mamba_cache_size=0)",),
    ),
    KnownDifference(
        "minimax-m3-config-unloadable",
        "SGLang 0.5.23 with transformers 5.19 cannot load a minimax_m3 config.json offline (no config class "
        "registered), so SGLang's side cannot run this case",
        lambda case: str(_hf(case).get("model_type", "")) == "minimax_m3",
        (r"^sglang: refused: .*minimax_m3",),
    ),
)


def explain(case: Mapping[str, Any], lines: list[str]) -> tuple[list[KnownDifference], list[str]]:
    """(the known differences that cover some of ``lines``, the lines none covers)."""
    used: list[KnownDifference] = []
    left: list[str] = []
    applicable = [k for k in KNOWN_DIFFERENCES if k.applies(case)]
    for line in lines:
        match = next((k for k in applicable if k.covers_line(line)), None)
        if match is None:
            left.append(line)
        elif match not in used:
            used.append(match)
    return used, left
