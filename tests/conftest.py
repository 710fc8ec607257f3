"""Shared test setup: the hypothesis profiles of the property and fuzz tests.

``KVSTRATEGIES_HYPOTHESIS_PROFILE`` picks one (``tox -e property`` and ``tox -e fuzz`` set
``thorough``):

* ``ci`` (default): 40 examples per test; seconds for the whole suite.
* ``thorough``: 2,500 examples per test; >= 10^5 allocator operations per allocator kind
  (test_allocators.py, and the misuse driver of test_fuzz_allocators.py) and 25,000 fuzzed
  inputs over test_fuzz.py's six tests and test_fuzz_cli.py's four (peak RSS about 0.5 GB).

No deadline (a first plan imports modules; a meta build imports torch) and no "too slow" /
"data too large" health checks: the drawn inputs are large on purpose.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "KVSTRATEGIES_HYPOTHESIS_PROFILE"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", max_examples=2500, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))
