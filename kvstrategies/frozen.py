"""``@frozen``: ``@dataclass(frozen=True)`` for the package's value classes, built for a short process.

On CPython 3.10 and 3.11 ``dataclasses.dataclass(frozen=True)`` compiles six methods per class,
one ``exec`` each (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``): about 1.5 ms a class on these machines, and ``kvstrategies plan --case`` imports
29 value classes, more than the interpreter's own start. ``@frozen`` makes the same class with
one compile: the standard ``dataclasses`` machinery collects the fields (so ``dataclasses.fields``,
``replace``, ``asdict`` and ``is_dataclass`` see an ordinary frozen dataclass, and its field rules
and errors are the standard ones), ``__init__`` is generated as ``dataclasses`` writes it, and
the other methods are shared functions that read the class's field names:

* ``__eq__``: same class and equal tuples of the ``compare`` fields, else ``NotImplemented``;
* ``__hash__``: ``hash`` of the tuple of the hashed fields (``hash=None`` follows ``compare``),
  the very value ``dataclasses`` computes, so set orders are unchanged; a ``__hash__`` written
  in the class is kept;
* ``__repr__``: ``Name(field=value!r, ...)`` over the ``repr`` fields, recursion shown as ``...``;
* ``__setattr__`` / ``__delattr__``: ``dataclasses.FrozenInstanceError`` for the class's fields
  (``object.__setattr__`` still writes, as it does for ``dataclasses``' frozen classes);
* with ``order=True``, ``__lt__`` / ``__le__`` / ``__gt__`` / ``__ge__`` on the same tuples.

Methods written in the class body are kept, as ``dataclasses`` keeps them. ``InitVar`` fields are
not supported (a ``TypeError``); ``tests/test_frozen.py`` checks every behaviour against
``dataclasses.dataclass(frozen=True)``.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING or sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the marker only informs type checkers

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorator: decorator


_C = TypeVar("_C", bound=type)


@overload
def frozen(cls: _C, /) -> _C: ...


@overload
def frozen(*, kw_only: bool = False, order: bool = False) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: Any = None, /, *, kw_only: bool = False, order: bool = False) -> Any:
    """``@frozen`` / ``@frozen(kw_only=True, order=True)``: a frozen dataclass (see the module)."""

    def wrap(cls: _C) -> _C:
        return _make_frozen(cls, kw_only=kw_only, order=order)

    return wrap if cls is None else wrap(cls)


def _make_frozen(cls: _C, *, kw_only: bool, order: bool) -> _C:
    own = dict(vars(cls))
    has_dataclass_base = any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:])
    # the standard machinery: fields, defaults, their checks and __match_args__; it compiles
    # nothing when it generates no method (a dataclass base asks for frozen=True: its own check)
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=has_dataclass_base, kw_only=kw_only)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = params.frozen = True
    params.order = order
    all_fields: dict[str, dataclasses.Field[Any]] = cls.__dataclass_fields__  # type: ignore[attr-defined]
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in all_fields.values()):  # type: ignore[attr-defined]
        raise TypeError(f"@frozen {cls.__name__}: InitVar fields are not supported; use dataclasses.dataclass")
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)

    _set_method(cls, own, "__init__", _init_method(cls, fields))
    _set_method(cls, own, "__repr__", _repr_method(tuple(f.name for f in fields if f.repr)))
    compared = _getter(tuple(f.name for f in fields if f.compare))
    _set_method(cls, own, "__eq__", _eq_method(compared))
    class_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
    if not explicit_hash:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        _set_method(cls, own, "__hash__", _hash_method(_getter(hashed)), replace=True)
    if not has_dataclass_base:  # else dataclasses wrote the frozen pair (they name the class)
        for name, make in (("__setattr__", _setattr_method), ("__delattr__", _delattr_method)):
            _refuse_own(cls, own, name)
            _set_method(cls, own, name, make(cls, frozenset(names)))
    if order:
        for name, compare in _ORDER:
            _refuse_own(cls, own, name, hint=". Consider using functools.total_ordering")
            _set_method(cls, own, name, _order_method(compared, compare))
    if not cls.__doc__:  # as dataclasses: the signature stands for a missing docstring
        import inspect

        cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    return cls


def _set_method(cls: type, own: dict[str, Any], name: str, method: Any, *, replace: bool = False) -> None:
    """Install ``method`` unless the class body wrote ``name`` (``replace``: the hash rule decided)."""
    if name in own and not replace:
        return
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, method)


def _refuse_own(cls: type, own: dict[str, Any], name: str, hint: str = "") -> None:
    """``dataclasses``' refusal of a body-written method it must generate."""
    if name in own:
        raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}{hint}")


_ORDER = (("__lt__", operator.lt), ("__le__", operator.le), ("__gt__", operator.gt), ("__ge__", operator.ge))


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the named attributes (``()`` for none, a 1-tuple for one)."""
    if not names:
        return lambda value: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda value: (one(value),)
    return operator.attrgetter(*names)


class _NoDefault:
    """Marks a parameter whose default is its field's ``default_factory`` (``dataclasses``' sentinel)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _NoDefault()


def _init_method(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """``__init__`` as ``dataclasses`` writes it for a frozen class, compiled once."""
    namespace: dict[str, Any] = {"__set__": object.__setattr__, "__factory__": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    seen_default = False
    self_name = "__frozen_self__" if any(f.name == "self" for f in fields) else "self"
    for f in fields:
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            namespace[f"__default_{f.name}__"] = f.default
        if has_factory:
            namespace[f"__make_{f.name}__"] = f.default_factory
        if f.init:
            if has_factory:
                parameter = f"{f.name}=__factory__"
                value = f"__make_{f.name}__() if {f.name} is __factory__ else {f.name}"
            elif has_default:
                parameter, value = f"{f.name}=__default_{f.name}__", f.name
            else:
                parameter, value = f.name, f.name
            if f.kw_only:
                keyword.append(parameter)
            else:
                if seen_default and not (has_default or has_factory):
                    raise TypeError(f"non-default argument {f.name!r} follows default argument")
                seen_default = seen_default or has_default or has_factory
                positional.append(parameter)
        elif has_factory:
            value = f"__make_{f.name}__()"
        elif has_default:
            value = f"__default_{f.name}__"
        else:
            continue
        body.append(f"  __set__({self_name}, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append(f"  {self_name}.__post_init__()")
    parameters = [self_name, *positional, *(["*", *keyword] if keyword else [])]
    # the names the method reads become closure cells (as dataclasses does), so its globals stay
    # the module's and typing.get_type_hints(cls.__init__) resolves the annotations there
    source = (
        f"def __create_init__({', '.join(namespace)}):\n"
        f" def __init__({', '.join(parameters)}):\n"
        + ("\n".join(body) or "  pass")
        + "\n return __init__\n"
    )
    module = sys.modules.get(cls.__module__)
    scope: dict[str, Any] = {}
    exec(source, vars(module) if module is not None else {}, scope)  # one compile per class
    init: Callable[..., None] = scope["__create_init__"](**namespace)
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init


def _repr_method(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_method(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, object], Any]:
    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_method(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _order_method(
    key: Callable[[Any], tuple[Any, ...]], compare: Callable[[Any, Any], Any]
) -> Callable[[Any, object], Any]:
    def method(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return compare(key(self), key(other))
        return NotImplemented

    method.__name__ = f"__{compare.__name__}__"
    return method


def _setattr_method(owner: type, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is owner or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(owner, self).__setattr__(name, value)  # type: ignore[arg-type]  # mypy reads owner as an instance

    return __setattr__


def _delattr_method(owner: type, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is owner or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(owner, self).__delattr__(name)  # type: ignore[arg-type]  # mypy reads owner as an instance

    return __delattr__
