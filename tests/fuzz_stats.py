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
