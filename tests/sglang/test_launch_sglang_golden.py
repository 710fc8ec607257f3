"""The planner's launch defaults against every SGLang release's recorded launch resolutions.

``golden/sglang-<release>-launch/resolutions.jsonl`` holds what that release's launch resolution
(``ServerArgs(**fields).resolve_once()`` from 0.5.19, ``ServerArgs.__post_init__`` before)
answered for every launch of the shipped grid, recorded live in that release's environment by
``tox -e sglang-launch-<release>``; these tests need no SGLang and run the planner for the same
release. ``KVSTRATEGIES_SGLANG_LIVE=1`` with SGLang installed also re-resolves a few launches
live under the installed release and checks its recording is still SGLang's answer.
"""

from __future__ import annotations

import os

import pytest

import kvstrategies.sglang.bridge.launch_check as bridge
from kvstrategies.core.releases import EngineRelease, supported_releases
from kvstrategies.sglang.bridge.launch_grid import default_grid

RECORDED = bridge.recorded_releases()
Recording = tuple[tuple[bridge.LaunchSpec, ...], dict[str, bridge.LaunchOutcome]]


def test_every_supported_release_is_recorded() -> None:
    assert supported_releases() == RECORDED


@pytest.fixture(scope="module", params=RECORDED, ids=[r.text for r in RECORDED])
def release(request: pytest.FixtureRequest) -> EngineRelease:
    value: EngineRelease = request.param
    return value


@pytest.fixture(scope="module")
def recorded(release: EngineRelease) -> Recording:
    return bridge.load_golden(release=release)


@pytest.fixture(scope="module")
def comparisons(recorded: Recording, release: EngineRelease) -> list[bridge.LaunchComparison]:
    specs, answers = recorded
    return bridge.compare_all(specs, answers, release)


def test_recording_covers_the_shipped_grid(recorded: Recording) -> None:
    specs, _ = recorded
    assert [s.to_dict() for s in specs] == [s.to_dict() for s in default_grid()]
    assert len(specs) >= 500


def test_sglang_refuses_nothing_the_planner_plans(comparisons: list[bridge.LaunchComparison]) -> None:
    wrong = [line for c in comparisons if c.sglang_refuses_planner_plans for line in bridge.diff_text(c)]
    assert wrong == [], "\n".join(wrong[:40])
    assert sum(c.sglang.refused is not None for c in comparisons) >= 20  # the grid does exercise refusals


def test_planner_refuses_nothing_sglang_resolves(comparisons: list[bridge.LaunchComparison]) -> None:
    wrong = [line for c in comparisons if c.planner_refuses_sglang_plans for line in bridge.diff_text(c)]
    assert wrong == [], "\n".join(wrong[:40])


def test_every_resolved_field_agrees_or_is_known(comparisons: list[bridge.LaunchComparison]) -> None:
    unexplained = [line for c in comparisons if c.unexplained for line in bridge.diff_text(c)]
    assert unexplained == [], "\n".join(unexplained[:60])


def test_recordings_differ_between_releases() -> None:
    """The per-release recordings are not copies of one another: each consecutive pair differs
    on some launch (a recording made under the wrong release would not)."""
    outcomes = [bridge.load_golden(release=r)[1] for r in RECORDED]
    for older, newer, a, b in zip(RECORDED, RECORDED[1:], outcomes, outcomes[1:], strict=False):
        assert a != b, f"SGLang {older.text} and {newer.text} recorded the same answers for every launch"


@pytest.mark.skipif(os.environ.get("KVSTRATEGIES_SGLANG_LIVE") != "1", reason="set KVSTRATEGIES_SGLANG_LIVE=1")
def test_recording_is_still_sglangs_answer() -> None:
    pytest.importorskip("sglang")
    release = bridge.installed_sglang_release()
    specs, answers = bridge.load_golden(release=release)
    picked = [s for s in specs if s.preset in ("qwen3-next-80b-a3b", "deepseek-v3.2") and s.gpu in ("H200", "B200")]
    live, _ = bridge.sglang_live_outcomes(picked)
    assert {s.name: live[s.name] for s in picked} == {s.name: answers[s.name] for s in picked}
