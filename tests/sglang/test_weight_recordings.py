"""The torch-free planner held to the weights SGLang itself allocates, release by release (no SGLang needed).

``golden/sglang-<v>-weights/`` holds, per catalog case (``cases/weights/``), what SGLang ``v``'s own
model class allocates on each recorded rank when built on ``meta`` for the GPU planned
(``tools/record_weights.py``; docs/weights.md). The planner must refuse exactly the cases SGLang
refuses (0 false, 0 missed: ``REFUSAL_DIFFERENCES`` lists, with the reason, the one the
planner cannot yet refuse) and plan every other one to the recorded bytes of the fullest rank:
exactly, or within the bound ``WEIGHT_DIFFERENCES`` states with its reason
(:mod:`kvstrategies.sglang.weight_catalog`).
"""

from __future__ import annotations

import functools
import json
import statistics

import pytest

from kvstrategies.sglang.weight_catalog import (
    CATALOG,
    REFUSAL_DIFFERENCES,
    WEIGHT_DIFFERENCES,
    Comparison,
    WeightCase,
    catalog,
    compare,
    recorded_weight_bytes,
    recording_dir,
    weight_difference,
    weight_releases,
)

VERSION = "0.5.23"
RELEASES = weight_releases()
CASES = catalog()
BY_NAME = {case.name: case for case in CASES}
PAIRS = [(release, name) for release in RELEASES for name in sorted(BY_NAME)]


@functools.cache
def _comparisons(release: str) -> dict[str, Comparison]:
    return {case.name: compare(case, release) for case in CASES}


@pytest.fixture(scope="module")
def comparisons() -> dict[str, Comparison]:
    return _comparisons(VERSION)


@pytest.mark.parametrize("release", RELEASES)
def test_the_catalog_is_recorded(release: str) -> None:
    recorded = {p.stem for p in recording_dir(release).glob("*.json")}
    assert recorded == set(BY_NAME), "record the catalog: tools/record_weights.py (docs/weights.md)"
    assert len(CASES) >= 60


def test_every_supported_release_is_recorded() -> None:
    """The recorder drives every release the project models (0.5.1 to 0.5.23; docs/weights.md), and each
    folder holds that release's own documents."""
    from kvstrategies.core.releases import SGLANG_RELEASES

    assert VERSION in RELEASES and all(document_release(r) == r for r in RELEASES)
    assert set(RELEASES) == {r.text for r in SGLANG_RELEASES}


def document_release(release: str) -> str:
    """The release a recording folder's documents say recorded them (every one the same)."""
    said = {json.loads(p.read_text(encoding="utf-8"))["sglang"] for p in recording_dir(release).glob("*.json")}
    assert len(said) == 1, said
    return said.pop()


def test_every_listed_difference_names_a_catalog_case() -> None:
    assert set(WEIGHT_DIFFERENCES) <= set(BY_NAME)
    assert set(REFUSAL_DIFFERENCES) <= set(BY_NAME)


@pytest.mark.parametrize(("release", "name"), PAIRS, ids=[f"{r}-{n}" for r, n in PAIRS])
def test_refusals_equal_the_recording(release: str, name: str) -> None:
    got = _comparisons(release)[name]
    if name in REFUSAL_DIFFERENCES:
        assert not got.refusals_agree, f"{name} now agrees with SGLang: drop it from REFUSAL_DIFFERENCES"
        return
    assert got.refusals_agree, (
        f"{name}: SGLang {'refuses' if got.recorded_refusal else 'builds'} it "
        f"({got.recorded_refusal}); the planner {'refuses' if got.planned.refusal else 'plans'} it "
        f"({got.planned.refusal})"
    )


@pytest.mark.parametrize(("release", "name"), PAIRS, ids=[f"{r}-{n}" for r, n in PAIRS])
def test_weights_equal_the_recording(release: str, name: str) -> None:
    got = _comparisons(release)[name]
    if got.error is None:
        return  # refused (the refusal test compares it)
    bound, why = weight_difference(name, release)
    assert got.planned.weight_bytes is not None and got.recorded_bytes is not None
    if not why:
        assert got.planned.weight_bytes == got.recorded_bytes, (
            f"{name}: planned {got.planned.weight_bytes:,} B, SGLang allocates {got.recorded_bytes:,} B per rank"
        )
        return
    assert got.planned.weight_bytes != got.recorded_bytes, f"{name} is now exact under {release}: drop its difference"
    assert abs(got.error) <= bound, f"{name}: {got.error:+.4%} beyond the stated {bound:.2%} ({why})"


def test_the_error_over_the_catalog(comparisons: dict[str, Comparison]) -> None:
    """The summary docs/weights.md quotes: most cases exact, the median error zero."""
    errors = [abs(c.error) for c in comparisons.values() if c.error is not None]
    exact = sum(1 for c in comparisons.values() if c.error is not None and c.error == 0)
    assert len(errors) >= 55
    assert exact >= 25
    assert statistics.median(errors) < 1e-5


def test_a_recording_is_what_the_tool_writes() -> None:
    """One recording read back: its case equals the catalog file, every rank has groups or a refusal."""
    case = BY_NAME["mimo-v2-flash-h200-tp8"]
    document = json.loads((recording_dir(VERSION) / f"{case.name}.json").read_text(encoding="utf-8"))
    assert document["sglang"] == VERSION
    assert document["case"] == json.loads((CATALOG / f"{case.name}.json").read_text(encoding="utf-8"))
    (rank,) = document["ranks"]
    assert recorded_weight_bytes(rank) == rank["total"] - rank["groups"].get("other_buffers", 0)


def test_a_case_file_with_an_unknown_field_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.json"
    path.write_text('{"model": "qwen3-8b", "gpu": "H100", "tensor_parallel": 2}', encoding="utf-8")
    with pytest.raises(Exception, match="tensor_parallel"):
        WeightCase.read(path)


def test_verify_weights_compares_the_recordings_without_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    """``kvstrategies verify --against sglang --weights``: one line per case and the summary; 0 when
    every case is as recorded or within its stated difference."""
    from kvstrategies.cli.app import main

    assert main(["verify", "--against", "sglang", "--weights"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(CASES) + 1 and out[-1].startswith(f"all {len(CASES)} weight cases")
    mimo = next(line for line in out if " mimo-v2-flash-h200-tp8 " in line)
    assert mimo.startswith("ok") and "planner" in mimo and "refused" not in mimo


def test_verify_weights_takes_no_case_files(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    assert main(["verify", "--against", "sglang", "--weights", "cases"]) != 0
    assert "--weights compares the weight catalog" in capsys.readouterr().err
    assert main(["verify", "--against", "sglang", "--weights", "--vllm-version", "0.34.0"]) != 0
    assert "--vllm-version goes with --against vllm" in capsys.readouterr().err


def test_verify_weights_of_an_unrecorded_release_names_the_recorded_ones() -> None:
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.sglang.weight_catalog import verify_lines

    recorded = r"no weight recordings for SGLang 0\.5\.0 \(recorded: 0\.5\.1, .*0\.5\.23"
    with pytest.raises(KVCacheConfigError, match=recorded):
        verify_lines("0.5.0")
