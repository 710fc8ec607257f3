"""vLLM's release rules, each against a hand computation and the recordings of both releases.

``kvstrategies releases 0.31.0 0.34.0`` lists them; each is data beside the code it changes
(``kvstrategies.core.releases``): the default block (``backends.py``), GDN and Mamba2 prefill checkpoints
(``strategies.py``), the KV cache dtype names (``layers.py``), the extensible KV cache budget
(``vllm/planner/budget.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.errors import UnsupportedConfigurationError

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]


def _vllm(release: str, preset: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def _recorded(release: str, case: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "golden" / f"vllm-{release}" / f"{case}.json").read_text("utf-8"))
    return document


@pytest.mark.parametrize(("release", "block"), [("0.32.0", 1056), ("0.33.0", 1088), ("0.34.0", 1088)])
def test_gdn_prefill_checkpoints_align_the_hybrid_block_from_0_33_0(release: str, block: int) -> None:
    """Qwen3.5-35B-A3B TP 1 bf16: attention 2 KV heads x (256 + 256) x 2 B = 2,048 B a token; a GDN state
    3 x 8,192 x 2 B + 32 x 128 x 128 x 4 B = 2,146,304 B. 0.32.0 (no checkpoints): kernel 16,
    16 x cdiv(2,146,304, 16 x 2,048) = 16 x 66 = 1,056; 0.33.0 on: kernel lcm(16, 64) = 64 (0.34.0's default
    block 64 too), 64 x cdiv(2,146,304, 64 x 2,048) = 64 x 17 = 1,088."""
    planned = _vllm(release, "qwen3.5-35b-a3b")
    assert planned.block_size == block
    assert _recorded(release, "hybrid-linear-qwen3.5-35b-a3b-tp1-bf16-p1")["block_size"] == block
    spec = next(s for _layers, s in planned.layer_specs if type(s).__name__ == "MambaSpec")
    assert spec.num_prefill_checkpoint_blocks == (0 if release == "0.32.0" else 1)


@pytest.mark.parametrize(
    ("release", "words"),
    [("0.32.0", "1 validation error for CacheConfig cache_dtype Input should be 'auto', 'float16'"),
     ("0.33.0", "Invalid kv_cache_dtype: 'mxfp8'. Valid values are: ['auto', 'float16'")],
)  # fmt: skip
def test_an_unknown_kv_cache_dtype_is_refused_in_each_releases_words(release: str, words: str) -> None:
    with pytest.raises(UnsupportedConfigurationError) as info:
        _vllm(release, "llama-3.1-8b", kv_cache_dtype="mxfp8", page_size=64)
    assert words in str(info.value)
    assert words in _recorded(release, "mxfp8-llama-3.1-8b-tp1-p64")["error"]


def test_octave_names_are_0_33_0s() -> None:
    from kvstrategies.core.releases import parse_release
    from kvstrategies.vllm.strategies.layers import KV_CACHE_DTYPE_NAMES

    old, _ = KV_CACHE_DTYPE_NAMES.at(parse_release("0.32.0", "vllm"))
    new, _ = KV_CACHE_DTYPE_NAMES.at(parse_release("0.34.0", "vllm"))
    assert set(new) - set(old) == {"octave_k3v4", "octave_k3v3", "octave_k3v3_compact"}
    assert len(old) == 19


@pytest.mark.parametrize(("release", "per_request"), [("0.31.0", 6 * 2 + 8), ("0.32.0", 6 * 3 + 8)])
def test_mamba2_prefill_checkpoints_from_0_32_0(release: str, per_request: int) -> None:
    """``MambaMixer2.get_kv_cache_spec`` (0.32.0) adds one prefill checkpoint block to each Mamba2 group.
    Nemotron-H-8B TP 1 bf16, 2,520 blocks of 1,040 tokens (the recorded case): six Mamba groups of 2 blocks a
    request (3 from 0.32.0) and the attention group's 8 at 8,192 tokens: 2,520 / 20 = 126.0 requests, 1,032,192
    tokens in 0.31.0; 2,520 / 26 = 96.92, int(96.92 x 8,192) = 793,993 tokens from 0.32.0."""
    recorded = _recorded(release, "hybrid-linear-nemotron-h-8b-tp1-bf16-p1")
    assert sum(group["blocks_per_request"] for group in recorded["kv_cache_groups"]) == per_request
    assert recorded["kv_cache_size_tokens"] == int(2_520 / per_request * 8_192)
    case = parse_case(json.loads((ROOT / "cases" / "hybrid-linear-nemotron-h-8b-tp1-bf16-p1.json").read_text("utf-8")),
                      engine="vllm", vllm_version=release)  # fmt: skip
    planned = plan(case.settings, case.available_bytes).vllm
    spec = next(s for _layers, s in planned.layer_specs if type(s).__name__ == "MambaSpec")
    assert spec.num_prefill_checkpoint_blocks == (0 if release == "0.31.0" else 1)
    assert (planned.num_gpu_blocks, planned.capacity.tokens) == (2_520, int(2_520 / per_request * 8_192))


def test_ultraquant_is_0_32_0s() -> None:
    """0.31.0's ``CacheDType`` Literal has neither the octave_* names nor ``ultraquant_4bit``."""
    from kvstrategies.core.releases import parse_release
    from kvstrategies.vllm.strategies.layers import KV_CACHE_DTYPE_NAMES

    old, kind = KV_CACHE_DTYPE_NAMES.at(parse_release("0.31.0", "vllm"))
    new, _ = KV_CACHE_DTYPE_NAMES.at(parse_release("0.32.0", "vllm"))
    assert (set(new) - set(old), kind, len(old)) == ({"ultraquant_4bit"}, "literal", 18)
