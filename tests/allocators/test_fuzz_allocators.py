"""The random-operation driver (tests/allocator_driver.py) over every allocator kind.

CI profile: 1,000 operations per kind (about 4 s in all); ``thorough`` (``tox -e property``): 100,000 per kind.
After every operation: free + held == capacity and no id held twice; every misuse raises
``AllocatorMisuseError`` and leaves the allocator unchanged.
"""

from __future__ import annotations

import os

import pytest

from ..allocator_driver import KINDS, run_kind
from ..conftest import PROFILE_ENV

OPS = 100_000 if os.environ.get(PROFILE_ENV) == "thorough" else 1_000


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_random_operations_keep_the_invariants(kind: str) -> None:
    stats = run_kind(kind, OPS)
    assert stats.total >= OPS
    assert stats.misuse > OPS // 20  # misuse is exercised, not just drawn
