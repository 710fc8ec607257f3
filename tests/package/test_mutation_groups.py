"""``tools/mutation_check.py`` covers the whole package: every module is mutated by a group or
excluded with a reason, and every group runs tests that exist."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import tool_module

ROOT = Path(__file__).resolve().parents[2]
TOOL = tool_module("mutation_check")


def _modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in (ROOT / "kvstrategies").rglob("*.py")}


def _grouped() -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for name, group in TOOL.GROUPS.items():
        for source in group.sources():
            owners.setdefault(source, []).append(name)
    return owners


def test_every_module_is_in_a_group_or_excluded_with_a_reason() -> None:
    owners = _grouped()
    orphans = sorted(_modules() - set(owners) - set(TOOL.EXCLUDED))
    assert orphans == [], f"modules no mutation group covers (add them to GROUPS or EXCLUDED): {orphans}"


def test_no_module_is_both_grouped_and_excluded_and_no_exclusion_is_stale() -> None:
    owners = _grouped()
    assert sorted(set(owners) & set(TOOL.EXCLUDED)) == []
    assert sorted(set(TOOL.EXCLUDED) - _modules()) == []
    assert all(reason.strip() for reason in TOOL.EXCLUDED.values())


def test_each_module_has_one_group() -> None:
    # one group per module: its tests are the ones that must kill its mutants
    assert {source: names for source, names in _grouped().items() if len(names) > 1} == {}


def test_the_issue_s_groups_are_there_with_the_recorded_goldens() -> None:
    groups = TOOL.GROUPS
    for name in ("strategies", "pools", "allocators", "models", "planner", "weights", "launch_defaults",
                 "sglang_compare", "case", "golden", "kernels"):  # fmt: skip
        assert name in groups, name
    for name in ("strategies", "pools", "models", "sizing", "sglang_compare"):
        assert set(TOOL.SGLANG_GOLDENS) <= set(groups[name].tests), name
    for name in ("planner", "launch_defaults", "sglang_compare"):
        assert set(TOOL.LAUNCH_GOLDENS) <= set(groups[name].tests), name
    planner = set(groups["planner"].sources())
    for module in ("planner/checkpoint", "planner/weight_quant", "sglang/preload", "sglang/budget", "planner/fit",
                   "planner/fixes", "sglang/pasted_command", "planner/sweep"):
        assert f"kvstrategies/{module}.py" in planner, module
    assert "kvstrategies/pools/runtime/mha.py" in groups["pools"].sources()
    assert "kvstrategies/sglang/launch/defaults/core.py" in groups["launch_defaults"].sources()


def test_node_patterns_select_recorded_answers_of_one_release() -> None:
    regex = TOOL._node_regex("tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.23-*]")
    assert regex.fullmatch("tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.23-default-llama]")
    assert not regex.fullmatch("tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.2-default-llama]")
    assert not regex.fullmatch("tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.15-default-llama]")


def test_every_listed_test_file_exists() -> None:
    """A test path that names no file is skipped by the tool's expansion, so a typo (or a file that
    was never written) would silently weaken a group: each plain path must exist."""
    missing = sorted({
        f"{name}: {pattern}"
        for name, group in TOOL.GROUPS.items()
        for pattern in group.tests
        if not any(c in pattern.partition("::")[0] for c in "*?[") and not (ROOT / pattern.partition("::")[0]).exists()
    })  # fmt: skip
    assert missing == []
