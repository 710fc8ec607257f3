"""Compare the project's vLLM plan document with vLLM's own for one case; explain known differences.

:func:`comparable` keeps what both answer (:data:`COMPARED_KEYS`: resolved settings, backends,
block size, layer specs, groups, blocks, tensors, capacity, concurrency and the log line), in the
golden form (floats as ``repr`` strings); vLLM's log excerpt and the stubbed ops it touched are
the bridge's notes, not answers. :func:`difference_lines` names each field that differs
(:mod:`kvstrategies.golden_diff`); :func:`explain` matches them against
:data:`KNOWN_DIFFERENCES`, each with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...golden import stable
from ...golden_diff import diff_documents

COMPARED_KEYS: tuple[str, ...] = (
    "gpu",
    "vllm_settings",
    "attention_backends",
    "block_size",
    "kv_cache_layout",
    "layer_specs",
    "kv_cache_groups",
    "num_gpu_blocks",
    "kv_cache_tensors",
    "kv_cache_size_tokens",
    "max_concurrency",
    "capacity_log",
)


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a vLLM plan document both sides answer, floats as their ``repr`` strings."""
    return {key: stable(document.get(key)) for key in COMPARED_KEYS}


def difference_lines(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """Readable lines naming every field where vLLM (``theirs``) differs from the project."""
    return diff_documents(comparable(ours), comparable(theirs))


@dataclass(frozen=True)
class KnownDifference:
    """A deliberate difference from vLLM: which cases it can explain, which lines it covers, why."""

    kind: str
    reason: str
    applies: Callable[[Mapping[str, Any]], bool]
    covers: tuple[str, ...]

    def covers_line(self, line: str) -> bool:
        return any(re.search(pattern, line) for pattern in self.covers)


def _architectures(case: Mapping[str, Any]) -> list[str]:
    config = case.get("_hf_config") or {}
    return [str(a) for a in (config.get("architectures") or [])] if isinstance(config, Mapping) else []


def _model_type(case: Mapping[str, Any]) -> str:
    config = case.get("_hf_config") or {}
    return str(config.get("model_type", "")) if isinstance(config, Mapping) else ""


_REFUSED = (r"^kvstrategies: refused: ",)

#: The known differences: kinds vLLM runs that the strategies refuse (with vLLM's own reason)
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "dsa-not-modelled",
        "DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): vLLM packs the MLA and indexer caches of a layer into "
        "one block (UniformTypeKVCacheSpecs, block-stride alignment); the strategies refuse it",
        lambda case: _model_type(case) in ("deepseek_v32", "glm_moe_dsa") or any(
            "V32" in a or "Dsa" in a for a in _architectures(case)),
        _REFUSED,
    ),
    KnownDifference(
        "dsv4-not-modelled",
        "DeepSeek-V4's compressed attention: five cache groups of mixed page sizes in a block-outermost (BLHNC) "
        "layout; the strategies refuse it",
        lambda case: any(a.startswith("DeepseekV4") for a in _architectures(case)),
        _REFUSED,
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
