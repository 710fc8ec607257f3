"""The vLLM strategies against vLLM 0.33.0's own recorded answers (``golden/vllm-0.33.0/``), no vLLM needed.

``tools/record_golden.py --engine vllm`` wrote one snapshot per catalog case from a live vLLM (and
``_known.json``, the known differences it found). Here every case is planned by the project's vLLM
strategies and compared with its snapshot exactly as ``kvstrategies verify --against vllm`` compares
with a live vLLM: a case matches, or differs only by known differences, and those must be exactly the
recorded ones (a known difference that disappears, or a new one, fails too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.sglang.bridge.verify import CaseVerdict, VerifyReport
from kvstrategies.vllm.bridge.compare import KNOWN_DIFFERENCES
from kvstrategies.vllm.bridge.snapshots import KNOWN_FILE, read_snapshot, result_from_snapshot, snapshot_files
from kvstrategies.vllm.bridge.verify import format_report, verdict_for

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "cases"
#: the vLLM-only deployments (GPU families, vLLM's refusals), recorded beside the catalog
VLLM_CASES = CASES / "vllm"
CASE_PATHS = {p.stem: p for folder in (CASES, VLLM_CASES) for p in folder.glob("*.json")}
VLLM_GOLDEN = ROOT / "golden" / "vllm-0.33.0"
KNOWN = json.loads((VLLM_GOLDEN / KNOWN_FILE).read_text(encoding="utf-8"))
SNAPSHOTS = snapshot_files(VLLM_GOLDEN)


def test_every_catalog_case_has_a_vllm_snapshot() -> None:
    assert {p.stem for p in SNAPSHOTS} == set(CASE_PATHS)


def test_known_kinds_are_all_defined() -> None:
    kinds = {k.kind for k in KNOWN_DIFFERENCES}
    for name, entry in KNOWN.items():
        assert entry["status"] == "known", f"{name}: recorded with an unexplained difference"
        assert set(entry["kinds"]) <= kinds, name


def test_most_cases_are_planned_by_vllm() -> None:
    """The catalog exercises vLLM's sizing, not only its refusals."""
    planned = [p for p in SNAPSHOTS if "error" not in read_snapshot(p)]
    assert len(planned) >= len(SNAPSHOTS) // 2


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.stem)
def test_project_matches_vllm(snapshot: Path) -> None:
    verdict = verdict_for(CASE_PATHS[snapshot.stem], result_from_snapshot(read_snapshot(snapshot)))
    assert verdict.unexplained == (), "\n".join(verdict.unexplained)
    expected = KNOWN.get(snapshot.stem, {"status": "match", "kinds": []})
    assert (verdict.status, list(verdict.kinds)) == (expected["status"], expected["kinds"]), "\n".join(verdict.lines)


# ---- the verify report's lines, by hand --------------------------------------------------------------------


def _report(version: str = "0.33.0") -> VerifyReport:
    diff = ("num_gpu_blocks: 5120 -> 5119", "block_size: 16 -> 32", "max_concurrency: 10.0 -> 9.99")
    kind = KNOWN_DIFFERENCES[0]
    return VerifyReport(
        verdicts=[
            CaseVerdict("a", "match"),
            CaseVerdict("b", "match", lines=("both refuse",)),
            CaseVerdict("cc", "known", kinds=(kind.kind,), lines=("x",)),
            CaseVerdict("d", "DIFF", lines=diff, unexplained=diff),
        ],
        timings={"import": 1.0, "total": 9.0},
        version=version,
    )


def test_vllm_format_report_lines_by_hand() -> None:
    kind = KNOWN_DIFFERENCES[0]
    # names padded to 2, statuses to 5; per case (9.0 - 1.0) / 4 = 2.00 s
    assert format_report(_report()) == [
        "kvstrategies vs vLLM 0.33.0: 4 cases",
        "a   match",
        "b   match  both refuse",
        f"cc  known  {kind.kind}",
        "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more",
        "      num_gpu_blocks: 5120 -> 5119",
        "      block_size: 16 -> 32",
        "      max_concurrency: 10.0 -> 9.99",
        "known differences:",
        f"  {kind.kind} (1 cases): {kind.reason}",
        "total: 4 cases: 2 match, 1 known, 1 unexplained (vLLM import 1.0 s, 2.00 s per case, 9.0 s in all)",
    ]
    recorded = format_report(_report("0.33.0 (recorded in golden/vllm-0.33.0)"))[-1]
    assert recorded == "total: 4 cases: 2 match, 1 known, 1 unexplained (recorded answers, 9.0 s in all)"


def test_vllm_format_report_cuts_a_long_detail_to_the_width() -> None:
    # "num_gpu_blocks: 5120 -> 5119; +2 more" is 28 + 9 = 37 characters: width 20 keeps 17 and adds "..."
    assert format_report(_report(), width=20)[4] == "d   DIFF   num_gpu_blocks: 5..."
    assert format_report(_report(), width=36)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 ..."
    assert format_report(_report(), width=37)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more"
