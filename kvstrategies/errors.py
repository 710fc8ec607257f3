"""The library's one error model.

Every public entry point either returns a plan that satisfies the invariants or raises
:class:`KVCacheConfigError` (a ``ValueError``) whose message names the field that is wrong,
what was given, and what to change. Subclasses say which kind of problem it was, so an engine
can tell "the budget is too small" from "this input is invalid" without parsing text.
"""

from __future__ import annotations


class KVCacheConfigError(ValueError):
    """An input (config field, setting, case file, CLI flag) that cannot be planned."""


class UnsupportedConfigurationError(KVCacheConfigError):
    """A valid combination that this library (or SGLang 0.5.23) does not support."""


class InsufficientMemoryError(KVCacheConfigError):
    """The budget cannot hold what the plan needs (SGLang raises ``RuntimeError`` here)."""


class SWAPoolTooSmallError(InsufficientMemoryError):
    """The sliding-window pool cannot admit one request (window + page;
    MemoryPoolConfigurator.validate_swa_pool_size)."""


class MissingDependencyError(KVCacheConfigError):
    """An optional dependency (torch, triton, matplotlib) is needed for this call."""


def require(condition: bool, message: str, error: type[KVCacheConfigError] = KVCacheConfigError) -> None:
    """Raise ``error(message)`` unless ``condition`` holds (a readable ``assert`` for inputs)."""
    if not condition:
        raise error(message)
