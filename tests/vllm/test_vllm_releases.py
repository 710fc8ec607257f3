"""vLLM's release rules, each against a hand computation and the recordings of both releases.

``kvstrategies releases 0.32.0 0.34.0`` lists them; each is data beside the code it changes
(``kvstrategies.core.releases``): the default block (``backends.py``), GDN prefill checkpoints
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
