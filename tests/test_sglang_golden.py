"""The project against SGLang 0.5.23's own recorded answers (``golden/sglang-0.5.23/``), no SGLang needed.

``tools/record_golden.py --engine sglang`` wrote one snapshot per catalog case from a live SGLang
(and ``_known.json``, the known differences it found). Here every case is planned by the project
and compared with its snapshot exactly as ``kvstrategies verify --against sglang`` compares with a
live SGLang: a case either matches, or differs only by known differences, and those must be
exactly the ones recorded (a known difference that disappears, or a new one, fails too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.integrations.sglang.compare import KNOWN_DIFFERENCES
from kvstrategies.integrations.sglang.snapshots import (
    KNOWN_FILE,
    read_snapshot,
    result_from_snapshot,
    snapshot_files,
)
from kvstrategies.integrations.sglang.verify import verdict_for

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases"
SGLANG_GOLDEN = ROOT / "golden" / "sglang-0.5.23"
KNOWN = json.loads((SGLANG_GOLDEN / KNOWN_FILE).read_text(encoding="utf-8"))
SNAPSHOTS = snapshot_files(SGLANG_GOLDEN)


def test_every_catalog_case_has_an_sglang_snapshot() -> None:
    assert {p.stem for p in SNAPSHOTS} == {p.stem for p in CASES.glob("*.json")}


def test_known_kinds_are_all_defined() -> None:
    kinds = {k.kind for k in KNOWN_DIFFERENCES}
    for name, entry in KNOWN.items():
        assert entry["status"] == "known", f"{name}: recorded with an unexplained difference"
        assert set(entry["kinds"]) <= kinds, name


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.stem)
def test_project_matches_sglang(snapshot: Path) -> None:
    verdict = verdict_for(CASES / snapshot.name, result_from_snapshot(read_snapshot(snapshot)))
    assert verdict.unexplained == (), "\n".join(verdict.unexplained)
    expected = KNOWN.get(snapshot.stem, {"status": "match", "kinds": []})
    assert (verdict.status, list(verdict.kinds)) == (expected["status"], expected["kinds"]), "\n".join(verdict.lines)
