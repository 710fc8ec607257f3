"""``@frozen``: ``@dataclass(frozen=True)`` for the package's value classes, built for a short process.

A ``kvstrategies plan --case`` process imports 29 value classes. As ``dataclasses`` makes them
on CPython 3.10 and 3.11, each costs six compiled methods (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``; about 1.5 ms a class here), and
importing ``dataclasses`` loads ``inspect`` (``ast``, ``dis``, ``tokenize``): together more than
the interpreter's own start. ``@frozen`` makes the same classes without either:

* the fields are collected as ``dataclasses`` collects them (annotations in order, base classes'
  fields first, ``ClassVar`` skipped, a plain default or :func:`field`; a mutable default, a
  :func:`field` without annotation, a required field after a defaulted one are the same errors);
* ``__init__``: the same parameters (``inspect.signature(cls)``, annotations resolved in the
  class's module), the fields set in order with ``object.__setattr__``, then ``__post_init__``;
  a shared method at first, replaced at the class's ``COMPILE_AFTER``-th construction by the
  method ``dataclasses`` would have compiled, so a planning loop runs at the standard speed;
* ``__eq__``: same class and equal tuples of the ``compare`` fields, else ``NotImplemented``;
* ``__hash__``: ``hash`` of the tuple of the hashed fields (``hash=None`` follows ``compare``),
  the very value ``dataclasses`` computes, so set orders are unchanged; a ``__hash__`` written
  in the class is kept;
* ``__repr__``: ``Name(field=value!r, ...)`` over the ``repr`` fields, recursion shown as ``...``;
* ``__setattr__`` / ``__delattr__``: ``dataclasses.FrozenInstanceError`` (``object.__setattr__``
  still writes, as it does for ``dataclasses``' frozen classes);
* with ``order=True``, ``__lt__`` / ``__le__`` / ``__gt__`` / ``__ge__`` on the same tuples;
* ``__replace__`` (``copy.replace`` on Python 3.13): :func:`replace`;
* ``__dataclass_fields__`` / ``__dataclass_params__`` are made by ``dataclasses`` itself the first
  time anything reads them, so ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass``
  see an ordinary frozen dataclass; the package's own code uses :func:`fields` and
  :func:`replace` here, which need no ``dataclasses``.

Methods written in the class body are kept, as ``dataclasses`` keeps them. ``InitVar`` and
``KW_ONLY`` annotations are refused (a ``TypeError``: ``kw_only=True`` on the class or the field
says it); ``tests/test_frozen.py`` checks every behaviour against ``dataclasses.dataclass(frozen=True)``.
"""

from __future__ import annotations

import abc
import operator
import reprlib
import sys
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

if TYPE_CHECKING:
    from typing import dataclass_transform
else:  # Python 3.10 has no marker; it only informs type checkers
    dataclass_transform = getattr(typing, "dataclass_transform", lambda **_: lambda decorator: decorator)


_C = TypeVar("_C", bound=type)
_T = TypeVar("_T")


class _Missing:
    """No default (``dataclasses.MISSING``'s role)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """One field of a ``@frozen`` class: what :func:`field` says of it, with its name and annotation."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "kw_only")

    def __init__(
        self, default: Any, default_factory: Any, init: bool, repr: bool, hash: bool | None, compare: bool,
        kw_only: Any, name: str = "", type: Any = None,
    ) -> None:  # fmt: skip
        self.name = name
        self.type = type
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.kw_only = kw_only

    def named(self, name: str, annotation: Any, kw_only: bool) -> Field:
        """This specification as the field ``name`` of a class (``kw_only`` from the class unless set)."""
        return Field(
            self.default, self.default_factory, self.init, self.repr, self.hash, self.compare,
            kw_only if self.kw_only is MISSING else self.kw_only, name, annotation,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r}, init={self.init})"


@overload
def field(
    *, default: _T, init: bool = True, repr: bool = True, hash: bool | None = None, compare: bool = True,
    kw_only: bool = ...,
) -> _T: ...  # fmt: skip
@overload
def field(
    *, default_factory: Callable[[], _T], init: bool = True, repr: bool = True, hash: bool | None = None,
    compare: bool = True, kw_only: bool = ...,
) -> _T: ...  # fmt: skip
@overload
def field(
    *, init: bool = True, repr: bool = True, hash: bool | None = None, compare: bool = True, kw_only: bool = ...
) -> Any: ...
def field(
    *, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,
    hash: bool | None = None, compare: bool = True, kw_only: Any = MISSING,
) -> Any:  # fmt: skip
    """``dataclasses.field`` for ``@frozen`` classes (the same options, ``metadata`` aside)."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare, kw_only)


def fields(value: Any) -> tuple[Field, ...]:
    """The fields of a ``@frozen`` class or instance, in order (``dataclasses.fields``)."""
    found: tuple[Field, ...] | None = getattr(value, "__frozen_fields__", None)
    if found is None:
        raise TypeError("must be called with a @frozen class or instance")
    return found


def replace(value: _T, /, **changes: Any) -> _T:
    """``dataclasses.replace``: a copy of ``value`` with ``changes``, through ``__init__`` (its checks run)."""
    for f in fields(value):
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
        elif f.name not in changes:
            changes[f.name] = getattr(value, f.name)
    return value.__class__(**changes)


def asdict(value: Any) -> dict[str, Any]:
    """``dataclasses.asdict``: the fields as a dict, ``@frozen`` values, lists, tuples and dicts within
    converted the same way (other values copied with ``copy.deepcopy``, as there)."""
    return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}


_ATOMIC = (int, float, str, bool, type(None), bytes)


def _plain(value: Any) -> Any:
    if type(value) in _ATOMIC:
        return value
    if hasattr(type(value), "__frozen_fields__"):
        return asdict(value)
    standard = sys.modules.get("dataclasses")  # a dataclasses instance exists only once it is loaded
    if standard is not None and standard.is_dataclass(value) and not isinstance(value, type):
        return standard.asdict(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_plain(item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return type(value)((_plain(key), _plain(item)) for key, item in value.items())
    import copy

    return copy.deepcopy(value)


def is_frozen(cls: type) -> bool:
    """Whether ``cls`` was made by ``@frozen`` itself (not inherited from one)."""
    return "__frozen_fields__" in vars(cls)


@overload
def frozen(cls: _C, /) -> _C: ...


@overload
def frozen(*, kw_only: bool = False, order: bool = False) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: Any = None, /, *, kw_only: bool = False, order: bool = False) -> Any:
    """``@frozen`` / ``@frozen(kw_only=True, order=True)``: a frozen dataclass (see the module)."""

    def wrap(cls: _C) -> _C:
        return _make_frozen(cls, kw_only=kw_only, order=order)

    return wrap if cls is None else wrap(cls)


def _make_frozen(cls: _C, *, kw_only: bool, order: bool) -> _C:
    own = dict(vars(cls))
    collected = _collect_fields(cls, own, kw_only)
    names = tuple(f.name for f in collected)
    type.__setattr__(cls, "__frozen_fields__", collected)
    type.__setattr__(cls, "__frozen_order__", order)
    if "__match_args__" not in own:
        type.__setattr__(cls, "__match_args__", tuple(f.name for f in collected if f.init and not f.kw_only))
    for name in ("__dataclass_fields__", "__dataclass_params__"):
        type.__setattr__(cls, name, _StandardRecords(name))
    if "__init__" not in own:  # a body-written __init__ keeps its own signature
        type.__setattr__(cls, "__signature__", _Signature())

    _set_method(cls, own, "__init__", _init_method(cls, collected))
    _set_method(cls, own, "__repr__", _repr_method(tuple(f.name for f in collected if f.repr)))
    compared = _getter(tuple(f.name for f in collected if f.compare))
    _set_method(cls, own, "__eq__", _eq_method(compared))
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    if not explicit_hash:
        hashed = tuple(f.name for f in collected if (f.compare if f.hash is None else f.hash))
        _set_method(cls, own, "__hash__", _hash_method(_getter(hashed)), replace=True)
    for name, make in (("__setattr__", _setattr_method), ("__delattr__", _delattr_method)):
        _refuse_own(cls, own, name)
        _set_method(cls, own, name, make(cls, frozenset(names)))
    _set_method(cls, own, "__replace__", _replace_method())  # copy.replace (Python 3.13), as dataclasses has it
    if order:
        for name, compare in _ORDER:
            _refuse_own(cls, own, name, hint=". Consider using functools.total_ordering")
            _set_method(cls, own, name, _order_method(compared, compare))
    if not cls.__doc__:  # as dataclasses: the signature stands for a missing docstring
        import inspect

        cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    abc.update_abstractmethods(cls)
    return cls


def _collect_fields(cls: type, own: dict[str, Any], kw_only: bool) -> tuple[Field, ...]:
    """The fields of ``cls`` as ``dataclasses`` orders them: the bases' (oldest first), then its own."""
    collected: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        if "__frozen_fields__" in vars(base):
            collected.update((f.name, f) for f in vars(base)["__frozen_fields__"])
        elif "__dataclass_fields__" in vars(base):
            raise TypeError(f"@frozen {cls.__name__}: its base {base.__name__} is a dataclasses class; make it @frozen")
    annotations: dict[str, Any] = own.get("__annotations__", {})
    for name, annotation in annotations.items():
        kind = _annotation_kind(annotation)
        if kind == "ClassVar":
            continue
        if kind == "InitVar":
            raise TypeError(f"@frozen {cls.__name__}: InitVar fields are not supported (field {name!r})")
        if kind == "KW_ONLY":
            raise TypeError(
                f"@frozen {cls.__name__}: KW_ONLY is not supported (field {name!r}); "
                "use @frozen(kw_only=True) or field(kw_only=True)"
            )
        value = own.get(name, MISSING)
        if isinstance(value, types.MemberDescriptorType):  # a name in __slots__: no default (as dataclasses)
            value = MISSING
        spec = _as_spec(value)
        if spec is None:
            spec = Field(value, MISSING, True, True, None, True, MISSING)
        else:  # as dataclasses: the class attribute becomes the plain default, or goes
            if spec.default is MISSING:
                type.__delattr__(cls, name)
            else:
                type.__setattr__(cls, name, spec.default)
        if spec.default is not MISSING and type(spec.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed: use default_factory"
            )
        collected[name] = spec.named(name, annotation, kw_only)
    for name, value in own.items():
        if _as_spec(value) is not None and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    result = tuple(collected.values())
    _check_default_order(result)
    return result


def _as_spec(value: Any) -> Field | None:
    """``value`` as a field specification: :func:`field`'s, or ``dataclasses.field``'s; else None."""
    if type(value) is Field:
        return value
    standard = sys.modules.get("dataclasses")  # a dataclasses.Field exists only once it is loaded
    if standard is not None and isinstance(value, standard.Field):
        return Field(
            MISSING if value.default is standard.MISSING else value.default,
            MISSING if value.default_factory is standard.MISSING else value.default_factory,
            value.init, value.repr, value.hash, value.compare,
            MISSING if value.kw_only is standard.MISSING else value.kw_only,
        )  # fmt: skip
    return None


def _annotation_kind(annotation: Any) -> str:
    """``"ClassVar"``, ``"InitVar"``, ``"KW_ONLY"`` or ``""``: what ``dataclasses`` reads the annotation as."""
    if isinstance(annotation, str):  # postponed annotations: the name before any subscript
        head = annotation.partition("[")[0].strip().rpartition(".")[2]
        return head if head in ("ClassVar", "InitVar", "KW_ONLY") else ""
    if annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar:
        return "ClassVar"
    standard = sys.modules.get("dataclasses")  # its markers exist only once it is loaded
    if standard is not None and (annotation is standard.InitVar or isinstance(annotation, standard.InitVar)):
        return "InitVar"
    if standard is not None and annotation is standard.KW_ONLY:
        return "KW_ONLY"
    return ""


def _check_default_order(collected: tuple[Field, ...]) -> None:
    """A required positional field after a defaulted one is ``dataclasses``' TypeError."""
    seen_default = False
    for f in collected:
        if f.init and not f.kw_only:
            defaulted = f.default is not MISSING or f.default_factory is not MISSING
            if seen_default and not defaulted:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            seen_default = seen_default or defaulted


class _StandardRecords:
    """``__dataclass_fields__`` / ``__dataclass_params__``: made by ``dataclasses`` at the first read.

    A shadow class with the same fields goes through ``dataclasses.dataclass`` (which generates
    nothing for it); its records are then stored on the class in place of this descriptor.
    """

    def __init__(self, attribute: str) -> None:
        self.attribute = attribute

    def __get__(self, instance: Any, owner: type) -> Any:
        import dataclasses

        collected: tuple[Field, ...] = owner.__frozen_fields__  # type: ignore[attr-defined]
        namespace: dict[str, Any] = {
            "__module__": owner.__module__,
            "__qualname__": owner.__qualname__,
            "__annotations__": {f.name: f.type for f in collected},
        }
        for f in collected:
            namespace[f.name] = dataclasses.field(
                default=dataclasses.MISSING if f.default is MISSING else f.default,
                default_factory=dataclasses.MISSING if f.default_factory is MISSING else f.default_factory,
                init=f.init, repr=f.repr, hash=f.hash, compare=f.compare, kw_only=f.kw_only,
            )  # fmt: skip
        shadow: Any = dataclasses.dataclass(type(owner.__name__, (), namespace), init=False, repr=False, eq=False)
        params = shadow.__dataclass_params__
        params.init = params.repr = params.eq = params.frozen = True
        params.order = owner.__frozen_order__  # type: ignore[attr-defined]
        type.__setattr__(owner, "__dataclass_fields__", shadow.__dataclass_fields__)
        type.__setattr__(owner, "__dataclass_params__", params)
        return getattr(owner, self.attribute)


class _Signature:
    """``cls.__signature__`` (what ``inspect.signature(cls)`` reads): built at the first read."""

    def __get__(self, instance: Any, owner: type) -> Any:
        import inspect

        collected: tuple[Field, ...] = owner.__frozen_fields__  # type: ignore[attr-defined]

        def parameter(f: Field) -> inspect.Parameter:
            kind = inspect.Parameter.KEYWORD_ONLY if f.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
            default = _FACTORY if f.default_factory is not MISSING else f.default
            return inspect.Parameter(
                f.name, kind, default=inspect.Parameter.empty if default is MISSING else default, annotation=f.type
            )

        maker = next(klass for klass in owner.__mro__ if "__init__" in vars(klass))
        if not is_frozen(maker):  # a plain subclass with its own __init__: that method's parameters
            return inspect.signature(types.MethodType(maker.__init__, object()))  # type: ignore[misc]
        init_fields = [f for f in collected if f.init]
        signature = inspect.Signature(
            [*(parameter(f) for f in init_fields if not f.kw_only), *(parameter(f) for f in init_fields if f.kw_only)],
            return_annotation=None,
        )
        if is_frozen(owner):  # a plain subclass reads its base's (it may add an __init__ later)
            type.__setattr__(owner, "__signature__", signature)
        return signature


def _set_method(cls: type, own: dict[str, Any], name: str, method: Any, *, replace: bool = False) -> None:
    """Install ``method`` unless the class body wrote ``name`` (``replace``: the hash rule decided)."""
    if name in own and not replace:
        return
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    type.__setattr__(cls, name, method)


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
_MISSING = MISSING

#: constructions of a class before its ``__init__`` is compiled. Measured on these machines for
#: classes of 5, 15 and 42 fields: the shared method takes 7 / 13 / 30 us a call, the compiled one
#: 2 / 5 / 13 us, its compile 0.5 / 0.7 / 1.8 ms, so the compile pays for itself after 85 to 110
#: constructions; a table built once at import (104 architecture rows) stays on the shared one
COMPILE_AFTER = 128


class _InitPlan:
    """What ``__init__`` does for one class: its parameters, and per field where its value comes from."""

    __slots__ = ("positional", "keyword", "accepted", "steps", "post_init")

    def __init__(
        self, positional: tuple[str, ...], keyword: tuple[str, ...], steps: tuple[tuple[str, bool, Any, Any], ...],
        post_init: bool,
    ) -> None:  # fmt: skip
        self.positional = positional
        self.keyword = keyword
        self.accepted = frozenset(positional + keyword)
        #: ``(name, init, default, factory)`` per field in declaration order (``_MISSING``: none)
        self.steps = steps
        self.post_init = post_init

    @classmethod
    def of(cls, owner: type, fields: tuple[Field, ...]) -> _InitPlan:
        """The plan of ``owner``'s ``__init__``."""
        return cls(
            positional=tuple(f.name for f in fields if f.init and not f.kw_only),
            keyword=tuple(f.name for f in fields if f.init and f.kw_only),
            steps=tuple((f.name, f.init, f.default, f.default_factory) for f in fields),
            post_init=hasattr(owner, "__post_init__"),
        )


def _init_method(cls: type, fields: tuple[Field, ...]) -> Callable[..., None]:
    """``__init__`` for ``cls``: the shared one, replaced by a compiled one at the ``COMPILE_AFTER``-th call.

    A process that builds a class a few times (most of them, in a command's life) never compiles
    it; a planning loop gets the compiled method (what ``dataclasses`` writes) after a few dozen.
    Both set the fields with ``object.__setattr__`` in declaration order and then run
    ``__post_init__``; both take the same arguments (:class:`inspect.Signature` of the fields).
    """
    plan = _InitPlan.of(cls, fields)
    module = sys.modules.get(cls.__module__)
    module_globals = vars(module) if module is not None else {"__builtins__": __builtins__}
    annotations = {f.name: f.type for f in fields if f.init} | {"return": None}
    calls = 0
    # the method runs with the class module's globals: what it calls comes in through the closure
    compile_after, run, swap = COMPILE_AFTER, _shared_init, _swap_in_compiled

    def shared(instance: Any, /, *args: Any, **kwargs: Any) -> None:  # positional-only: a field may be "self"
        nonlocal calls
        calls += 1
        if calls == compile_after:
            swap(cls, init, plan, module_globals)
        run(cls, plan, instance, args, kwargs)

    # globals of the class's module: typing.get_type_hints(cls.__init__) resolves the annotations there
    init: Callable[..., None] = types.FunctionType(
        shared.__code__, module_globals, "__init__", None, shared.__closure__
    )
    init.__annotations__ = annotations
    return init


def _swap_in_compiled(cls: type, init: Callable[..., None], plan: _InitPlan, module_globals: dict[str, Any]) -> None:
    """Put the compiled ``__init__`` in place of the shared one (unless something replaced that)."""
    if cls.__dict__.get("__init__") is not init:
        return
    compiled = _compiled_init(plan, module_globals)
    compiled.__qualname__ = init.__qualname__
    compiled.__annotations__ = init.__annotations__
    type.__setattr__(cls, "__init__", compiled)


def _shared_init(cls: type, plan: _InitPlan, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The generated ``__init__``'s work, read from ``plan`` (Python's own argument errors, reworded)."""
    if len(args) > len(plan.positional):
        raise TypeError(
            f"{cls.__qualname__}.__init__() takes {len(plan.positional) + 1} positional arguments "
            f"but {len(args) + 1} were given"
        )
    given = dict(zip(plan.positional, args, strict=False))  # as many values as arguments
    if kwargs:
        for key in kwargs:
            if key in given:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {key!r}")
            if key not in plan.accepted:
                raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {key!r}")
        given.update(kwargs)
    for field_name, init, default, factory in plan.steps:
        if init and field_name in given:
            value = given[field_name]
            if value is _FACTORY:
                value = factory()
        elif factory is not _MISSING:
            value = factory()
        elif not init:
            continue  # its default stays a class attribute, as dataclasses leaves it
        elif default is not _MISSING:
            value = default
        else:
            raise TypeError(f"{cls.__qualname__}.__init__() missing required argument: {field_name!r}")
        object.__setattr__(self, field_name, value)
    if plan.post_init:
        self.__post_init__()


def _compiled_init(plan: _InitPlan, module_globals: dict[str, Any]) -> Callable[..., None]:
    """``__init__`` as ``dataclasses`` writes it for a frozen class: one compile."""
    namespace: dict[str, Any] = {"__set__": object.__setattr__, "__factory__": _FACTORY}
    parameters: dict[str, str] = {}
    body: list[str] = []
    names = {step[0] for step in plan.steps}
    self_name = "__frozen_self__" if "self" in names else "self"
    for field_name, init, default, factory in plan.steps:
        if default is not _MISSING:
            namespace[f"__default_{field_name}__"] = default
        if factory is not _MISSING:
            namespace[f"__make_{field_name}__"] = factory
        if init:
            if factory is not _MISSING:
                parameters[field_name] = f"{field_name}=__factory__"
                value = f"__make_{field_name}__() if {field_name} is __factory__ else {field_name}"
            elif default is not _MISSING:
                parameters[field_name], value = f"{field_name}=__default_{field_name}__", field_name
            else:
                parameters[field_name], value = field_name, field_name
        elif factory is not _MISSING:
            value = f"__make_{field_name}__()"
        else:
            continue  # no __init__ field and no factory: a default stays a class attribute
        body.append(f"  __set__({self_name}, {field_name!r}, {value})")
    if plan.post_init:
        body.append(f"  {self_name}.__post_init__()")
    keyword = [parameters[name] for name in plan.keyword]
    signature = [self_name, *(parameters[name] for name in plan.positional), *(["*", *keyword] if keyword else [])]
    # the names the method reads become closure cells (as dataclasses does), so its globals stay
    # the module's and typing.get_type_hints(cls.__init__) resolves the annotations there
    source = (
        f"def __create_init__({', '.join(namespace)}):\n"
        f" def __init__({', '.join(signature)}):\n" + ("\n".join(body) or "  pass") + "\n return __init__\n"
    )
    scope: dict[str, Any] = {}
    exec(source, module_globals, scope)
    compiled: Callable[..., None] = scope["__create_init__"](**namespace)
    return compiled


def _repr_method(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _replace_method() -> Callable[..., Any]:
    def __replace__(self: Any, /, **changes: Any) -> Any:
        return replace(self, **changes)

    return __replace__


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
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(owner, self).__setattr__(name, value)  # type: ignore[arg-type]  # mypy reads owner as an instance

    return __setattr__


def _delattr_method(owner: type, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is owner or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(owner, self).__delattr__(name)  # type: ignore[arg-type]  # mypy reads owner as an instance

    return __delattr__


def _frozen_error(message: str) -> AttributeError:
    """``dataclasses.FrozenInstanceError`` (what callers catch), loading ``dataclasses`` on this error path."""
    import dataclasses

    return dataclasses.FrozenInstanceError(message)
