"""Every SGLANG_* knob of SGLang's registry is planned, refused by name, or reviewed as not
changing memory: exactly one of the three (``kvstrategies/sglang/knobs.py``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from kvstrategies.core.releases import NEWEST_SGLANG
from kvstrategies.sglang.knobs import (
    COMMAND_KNOBS,
    NO_EFFECT_KNOBS,
    OUT_OF_SCOPE_KNOBS,
    REFUSED_KNOBS,
    SIZING_KNOBS,
    knob_class,
)
from kvstrategies.sglang.tables.knobs import SGLANG_KNOBS, SGLANG_KNOBS_VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_every_sglang_knob_is_in_exactly_one_class() -> None:
    classes = {"planned": SIZING_KNOBS | COMMAND_KNOBS, "refused": frozenset(REFUSED_KNOBS),
               "no effect": NO_EFFECT_KNOBS}  # fmt: skip
    for name in SGLANG_KNOBS:
        holders = [label for label, members in classes.items() if name in members]
        assert len(holders) == 1, f"{name} is in {holders or 'no class'}"
    listed = set().union(*classes.values())
    assert listed <= set(SGLANG_KNOBS), f"not SGLang knobs: {sorted(listed - set(SGLANG_KNOBS))[:5]}"
    assert len(SGLANG_KNOBS) == sum(len(members) for members in classes.values()) > 800
    assert {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"} == COMMAND_KNOBS & SIZING_KNOBS


def test_the_invariant_test_catches_an_unclassified_or_doubly_classified_knob() -> None:
    """Self-check: a knob added to the registry but not reviewed, or listed twice, is reported."""
    assert knob_class("SGLANG_SURELY_NEW_IN_A_LATER_RELEASE") == "unknown"
    planned = SIZING_KNOBS | COMMAND_KNOBS
    overlap = planned & NO_EFFECT_KNOBS | planned & set(REFUSED_KNOBS) | NO_EFFECT_KNOBS & set(REFUSED_KNOBS)
    assert not overlap


def test_out_of_scope_knobs_are_refused_ones_and_reasons_are_text() -> None:
    assert set(REFUSED_KNOBS) >= OUT_OF_SCOPE_KNOBS
    assert all(reason.startswith(("changes", "selects")) for reason in REFUSED_KNOBS.values())


def test_the_sizing_knobs_are_the_ones_the_case_format_maps() -> None:
    """Each planned knob changes a setting (tests elsewhere pin the effect of each)."""
    assert {
        "SGLANG_SWA_EVICTION_INTERVAL", "SGLANG_DSV4_COMPRESS_STATE_DTYPE", "SGLANG_DSV4_KV_LAYOUT",
        "SGLANG_DSV4_COMPRESSED_KV_LAYOUT", "SGLANG_PP_LAYER_PARTITION", "SGLANG_MAMBA_SSM_DTYPE",
        "SGLANG_MAMBA_CONV_DTYPE", "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    } == SIZING_KNOBS  # fmt: skip


def test_the_knob_table_is_the_newest_release_s() -> None:
    assert NEWEST_SGLANG.label.endswith(SGLANG_KNOBS_VERSION)
    assert SGLANG_KNOBS["SGLANG_SWA_EVICTION_INTERVAL"][1] == (
        "sglang.srt.managers.schedule_batch", "sglang.srt.model_executor.pool_configurator",
    )  # fmt: skip


def test_knob_table_matches_installed_sglang() -> None:
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang is not installed")
    result = subprocess.run(
        [sys.executable, "tools/list_sglang_knobs.py", "--check"], cwd=ROOT, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
