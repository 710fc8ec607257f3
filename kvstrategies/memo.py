"""Planning sessions: what a plan works out from a config, worked out once per session.

One ``kvstrategies plan`` plans the deployment, then up to a dozen changed deployments (the fix
search: :mod:`kvstrategies.planner.fixes`), and a sweep plans a grid; each of those reads the
same ``config.json`` into the same geometry and the same weight estimate. Inside
:func:`session` (entered by the planner's entry points, nested entries join the outer one),
:func:`remember` keeps such a result under its key; outside a session it computes every time,
as before. Nothing outlives the outermost ``with``.

A key names its config by identity (``id(config)``): the session holds the config itself beside
the result, so the id cannot be reused while the session lives, and the planner never changes a
config it reads. Exceptions are not remembered (the next call raises again).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any, ParamSpec, TypeVar

_T = TypeVar("_T")
_P = ParamSpec("_P")

_SESSION: ContextVar[dict[Hashable, tuple[object, Any]] | None] = ContextVar("kvstrategies_session", default=None)


@contextmanager
def session() -> Iterator[None]:
    """Remember results until the outermost ``with session()`` ends (nested ones join it)."""
    if _SESSION.get() is not None:
        yield
        return
    token = _SESSION.set({})
    try:
        yield
    finally:
        _SESSION.reset(token)


def in_session(function: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run ``function`` inside :func:`session`."""

    @wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with session():
            return function(*args, **kwargs)

    return wrapper


def remember(key: Hashable, compute: Callable[[], _T], keep: object = None) -> _T:
    """``compute()``, once per session for ``key``; ``keep`` (the config whose ``id`` is in the
    key) is held with the result."""
    cache = _SESSION.get()
    if cache is None:
        return compute()
    hit = cache.get(key)
    if hit is not None:
        result: _T = hit[1]
        return result
    value = compute()
    cache[key] = (keep, value)
    return value


def active() -> bool:
    """Whether a session is open."""
    return _SESSION.get() is not None
