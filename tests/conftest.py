"""Shared test setup: the hypothesis profiles of the property and fuzz tests.

``KVSTRATEGIES_HYPOTHESIS_PROFILE`` picks one (``tox -e property`` and ``tox -e fuzz`` set
``thorough``):

* ``ci`` (default): 40 examples per test; seconds for the whole suite.
* ``thorough``: 2,500 examples per test; >= 10^5 allocator operations per allocator kind
  (test_allocators.py, and the misuse driver of test_fuzz_allocators.py) and the fuzzed inputs
  of test_fuzz.py, test_fuzz_cli.py and test_fuzz_surfaces.py (``tox -e fuzz``; expensive
  surfaces run a fraction, see ``scaled`` there).

No deadline (a first plan imports modules; a meta build imports torch) and no "too slow" /
"data too large" health checks: the drawn inputs are large on purpose.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

PROFILE_ENV = "KVSTRATEGIES_HYPOTHESIS_PROFILE"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", max_examples=2500, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))


def pytest_sessionfinish(session: Any) -> None:
    """Under pytest-xdist, a worker hands its fuzz counts to the controller (``workeroutput``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests.fuzz_stats import COUNTS

        workeroutput["kvstrategies_fuzz_counts"] = [[s, o, n] for (s, o), n in COUNTS.items()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The controller adds each worker's fuzz counts to its own, for the table below."""
    from tests.fuzz_stats import COUNTS

    for surface, outcome, n in getattr(node, "workeroutput", {}).get("kvstrategies_fuzz_counts", []):
        COUNTS[(surface, outcome)] += n


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fuzz counts by surface (tests/fuzz_stats.py), when fuzz tests ran."""
    from tests.fuzz_stats import table

    counts = table()
    if not counts:
        return
    terminalreporter.section("fuzzed inputs by surface")
    total = 0
    for surface, outcomes in counts.items():
        n = sum(outcomes.values())
        total += n
        detail = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        terminalreporter.write_line(f"{surface:<28}{n:>7}  ({detail})")
    terminalreporter.write_line(f"{'total':<28}{total:>7}  (escapes, absurd and silent-wrong answers fail the run)")
    target = os.environ.get("KVSTRATEGIES_FUZZ_STATS")
    if target:
        import json

        with open(target, "w", encoding="utf-8") as handle:
            json.dump(counts, handle, indent=2)
