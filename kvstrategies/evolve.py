"""``evolve(value, **changes)``: a changed copy of a ``@frozen`` value, as ``dataclasses.replace`` makes it, cheaply.

``dataclasses.replace`` reads every field and calls ``__init__`` again; a launch resolution of 34
fields is copied once per applied default (some fifty per plan, and a plan's fix search plans up to
a dozen deployments), which made it the planner's largest single cost. For a ``@frozen`` class with
nothing to run at construction (no ``__post_init__``, every field an ``__init__`` field) the copy is
its field values with ``changes`` over them: that is all :func:`evolve` does. A class with a
``__post_init__`` is refused (its check would be skipped: use ``dataclasses.replace``), and so is a
name that is not one of the class's fields, as ``dataclasses.replace`` refuses it.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from .frozen import fields, is_frozen

_T = TypeVar("_T")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    """The fields :func:`evolve` copies; a class it cannot copy this way is a ``TypeError``."""
    if not is_frozen(cls):
        raise TypeError(f"evolve copies @frozen values, not {cls.__name__}")
    if "__slots__" in vars(cls):
        raise TypeError(f"{cls.__name__} keeps its fields in slots: use dataclasses.replace")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} checks its values in __post_init__: use dataclasses.replace")
    own = fields(cls)
    if any(not f.init for f in own):
        raise TypeError(f"{cls.__name__} has fields outside __init__: use dataclasses.replace")
    return frozenset(f.name for f in own)


def evolve(value: _T, /, **changes: Any) -> _T:
    """``dataclasses.replace(value, **changes)`` for a ``@frozen`` value without ``__post_init__``."""
    cls: type = type(value)
    names = _field_names(cls)
    if not names.issuperset(changes):
        raise TypeError(f"{cls.__name__} has no field {sorted(set(changes) - names)[0]!r}")
    state = value.__dict__
    # only its fields: copied whole; else values cached beside them (functools.cached_property) stay behind
    fields = state.copy() if len(state) == len(names) else {name: state[name] for name in names}
    fields.update(changes)
    copy: _T = object.__new__(cls)
    object.__setattr__(copy, "__dict__", fields)
    return copy
