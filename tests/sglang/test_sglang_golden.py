"""The project against every SGLang release's own recorded answers (``golden/sglang-<version>/``).

``tools/record_golden.py --engine sglang`` wrote one snapshot per catalog case from a live SGLang
of each release (and ``_known.json``, the known differences it found). Here every case is planned
by the project *for that release* and compared with its snapshot exactly as ``kvstrategies verify
--against sglang`` compares with a live SGLang: a case either matches, or differs only by known
differences, and those must be exactly the ones recorded (a known difference that disappears, or a
new one, fails too). No SGLang is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.core.releases import SGLANG_RELEASES
from kvstrategies.sglang.bridge.compare import KNOWN_DIFFERENCES
from kvstrategies.sglang.bridge.snapshots import (
    KNOWN_FILE,
    read_snapshot,
    result_from_snapshot,
    snapshot_files,
)
from kvstrategies.sglang.bridge.verify import verdict_for

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "cases"
FOLDERS = {release.text: ROOT / "golden" / f"sglang-{release.text}" for release in SGLANG_RELEASES}
KNOWN = {version: json.loads((folder / KNOWN_FILE).read_text(encoding="utf-8")) for version, folder in FOLDERS.items()}
SNAPSHOTS = [(version, path) for version, folder in FOLDERS.items() for path in snapshot_files(folder)]


@pytest.mark.parametrize("version", list(FOLDERS))
def test_every_release_has_an_answer_for_every_catalog_case(version: str) -> None:
    assert {p.stem for p in snapshot_files(FOLDERS[version])} == {p.stem for p in CASES.glob("*.json")}


@pytest.mark.parametrize("version", list(FOLDERS))
def test_known_kinds_are_all_defined(version: str) -> None:
    kinds = {k.kind for k in KNOWN_DIFFERENCES}
    for name, entry in KNOWN[version].items():
        assert entry["status"] == "known", f"{version} {name}: recorded with an unexplained difference"
        assert set(entry["kinds"]) <= kinds, name


def test_every_snapshot_names_the_release_that_recorded_it() -> None:
    for version, snapshot in SNAPSHOTS[:: max(1, len(SNAPSHOTS) // 200)]:
        assert read_snapshot(snapshot)["engine"] == f"sglang {version}", snapshot


@pytest.mark.parametrize(("version", "snapshot"), SNAPSHOTS, ids=lambda p: p if isinstance(p, str) else p.stem)
def test_project_matches_sglang(version: str, snapshot: Path) -> None:
    verdict = verdict_for(CASES / snapshot.name, result_from_snapshot(read_snapshot(snapshot)), version)
    assert verdict.unexplained == (), "\n".join(verdict.unexplained)
    expected = KNOWN[version].get(snapshot.stem, {"status": "match", "kinds": []})
    assert (verdict.status, list(verdict.kinds)) == (expected["status"], expected["kinds"]), "\n".join(verdict.lines)


def test_the_release_changes_page_is_current() -> None:
    """``docs/sglang-releases.md`` is generated from these recordings; a new recording or a new
    release rule must regenerate it (``python tools/release_changes.py``)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "release_changes.py"), "--check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
