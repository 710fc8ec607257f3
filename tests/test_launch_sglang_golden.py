"""The planner's launch defaults against SGLang 0.5.23's recorded launch resolutions.

``golden/sglang-0.5.23-launch/resolutions.jsonl`` holds what ``ServerArgs(**fields).resolve_once()``
answered for every launch of the shipped grid (recorded live by ``tox -e sglang-launch``); these
tests need no SGLang. ``KVSTRATEGIES_SGLANG_LIVE=1`` with SGLang installed also re-resolves a
few launches live and checks the recording is still SGLang's answer.
"""

from __future__ import annotations

import os

import pytest

from kvstrategies.integrations.sglang import launch as bridge
from kvstrategies.integrations.sglang.launch_grid import default_grid


@pytest.fixture(scope="module")
def recorded() -> tuple[tuple[bridge.LaunchSpec, ...], dict[str, bridge.LaunchOutcome]]:
    return bridge.load_golden()


@pytest.fixture(scope="module")
def comparisons(recorded: tuple[tuple[bridge.LaunchSpec, ...], dict[str, bridge.LaunchOutcome]]) -> list[
    bridge.LaunchComparison
]:
    specs, answers = recorded
    return bridge.compare_all(specs, answers)


def test_recording_covers_the_shipped_grid(recorded: tuple[tuple[bridge.LaunchSpec, ...], dict[str, object]]) -> None:
    specs, _ = recorded
    assert [s.to_dict() for s in specs] == [s.to_dict() for s in default_grid()]
    assert len(specs) >= 500


def test_sglang_refuses_nothing_the_planner_plans(comparisons: list[bridge.LaunchComparison]) -> None:
    wrong = [line for c in comparisons if c.sglang_refuses_planner_plans for line in bridge.diff_text(c)]
    assert wrong == []
    assert sum(c.sglang.refused is not None for c in comparisons) >= 20  # the grid does exercise refusals


def test_planner_refuses_nothing_sglang_resolves(comparisons: list[bridge.LaunchComparison]) -> None:
    wrong = [line for c in comparisons if c.planner_refuses_sglang_plans for line in bridge.diff_text(c)]
    assert wrong == []


def test_every_resolved_field_agrees_or_is_known(comparisons: list[bridge.LaunchComparison]) -> None:
    unexplained = [line for c in comparisons if c.unexplained for line in bridge.diff_text(c)]
    assert unexplained == [], "\n".join(unexplained[:60])


@pytest.mark.skipif(os.environ.get("KVSTRATEGIES_SGLANG_LIVE") != "1", reason="set KVSTRATEGIES_SGLANG_LIVE=1")
def test_recording_is_still_sglangs_answer(
    recorded: tuple[tuple[bridge.LaunchSpec, ...], dict[str, bridge.LaunchOutcome]],
) -> None:
    pytest.importorskip("sglang")
    specs, answers = recorded
    picked = [s for s in specs if s.preset in ("qwen3-next-80b-a3b", "deepseek-v3.2") and s.gpu in ("H200", "B200")]
    live, _ = bridge.sglang_live_outcomes(picked)
    assert {s.name: live[s.name] for s in picked} == {s.name: answers[s.name] for s in picked}
