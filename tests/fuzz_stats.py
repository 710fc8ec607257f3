"""Counts of the fuzzed inputs, by surface and outcome, printed at the end of a run.

Every fuzz test records one outcome per input with :func:`record` (``answer``: planned, exit 0,
sane; ``refused``: one clean error, exit 2). An escape, an absurd or a silent-wrong answer fails
the test instead (hypothesis shrinks it and pytest reports it), so a passing run has 0 of each.
``tests/conftest.py`` prints the table; with ``KVSTRATEGIES_FUZZ_STATS=FILE`` it also writes it as
JSON.
"""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[tuple[str, str]] = Counter()


def record(surface: str, outcome: str) -> None:
    COUNTS[(surface, outcome)] += 1


def table() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (surface, outcome), n in sorted(COUNTS.items()):
        out.setdefault(surface, {})[outcome] = n
    return out


def event(label: str) -> None:
    """``hypothesis.event(label)``, also counted under the running test's name (the round-two fuzz
    tests label each input ``planned ...`` / ``exit 0`` for an answer, anything else a refusal)."""
    import os

    from hypothesis import event as hypothesis_event

    hypothesis_event(label)
    current = os.environ.get("PYTEST_CURRENT_TEST", "?")
    if "test_fuzz_surfaces.py" in current:  # those tests record their own outcome
        return
    test = current.split("::")[-1].split(" ")[0].split("[")[0].removeprefix("test_")
    for tail in ("_plan_or_raise_config_error", "_raise_config_error", "_or_raise_config_error"):
        test = test.removesuffix(tail)
    answer = label.startswith("planned") or label == "exit 0"
    record(f"round two: {test}", "answer" if answer else "refused")
