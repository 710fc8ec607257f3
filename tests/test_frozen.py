"""``kvstrategies.frozen.frozen`` makes the class ``dataclasses.dataclass(frozen=True)`` makes.

Each test builds the same class body twice, once with the standard decorator and once with
``@frozen``, and compares what a user of the class can see: construction, defaults, equality,
the hash value itself (set orders depend on it), repr, signature, type hints, the frozen
refusals, ``replace`` / ``asdict`` / pickling, ordering, and the class-definition errors.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import typing
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

import kvstrategies.frozen
from kvstrategies.frozen import asdict, fields, frozen, is_frozen, replace
from kvstrategies.frozen import field as frozen_field

Decorator = Callable[..., Any]
STANDARD: Decorator = dataclasses.dataclass(frozen=True)


def compiled_at_once(cls: Any = None, /, **options: Any) -> Any:
    """``@frozen`` whose classes compile their ``__init__`` at the first construction."""

    def wrap(cls: type) -> type:
        saved = kvstrategies.frozen.COMPILE_AFTER
        kvstrategies.frozen.COMPILE_AFTER = 1
        try:
            return frozen(**options)(cls)
        finally:
            kvstrategies.frozen.COMPILE_AFTER = saved

    return wrap if cls is None else wrap(cls)


#: the standard decorator, ``@frozen`` on its shared ``__init__``, and on its compiled one
BOTH = pytest.mark.parametrize(
    "decorate", [STANDARD, frozen, compiled_at_once], ids=["dataclasses", "frozen", "compiled"]
)
OURS = pytest.mark.parametrize("ours", [frozen, compiled_at_once], ids=["shared", "compiled"])


def _point(decorate: Decorator) -> Any:
    """The same class body under ``decorate``, with its own ``field`` (``dataclasses``' or ours)."""
    field = dataclasses.field if decorate is STANDARD else frozen_field

    @decorate
    class Point:
        """A value with every kind of field."""

        x: int
        label: str = "p"
        tags: list[int] = field(default_factory=list, compare=False)
        secret: int = field(default=3, repr=False)
        weight: int = field(default=4, hash=False)
        derived: int = field(default=9, init=False)

    return Point


Point = _point(frozen)
StandardPoint = _point(STANDARD)


@OURS
def test_construction_defaults_and_fields_match(ours: Decorator) -> None:
    Point = _point(ours)
    for cls in (Point, StandardPoint):
        value = cls(1, "q", [5], 6, 7)
        assert (value.x, value.label, value.tags, value.secret, value.weight, value.derived) == (1, "q", [5], 6, 7, 9)
        bare = cls(2)
        assert (bare.label, bare.tags, bare.secret, bare.weight, bare.derived) == ("p", [], 3, 4, 9)
        assert cls(3).tags is not cls(3).tags  # a fresh list per instance
    for args in [(1,), (1, "q", [5], 6, 7)]:
        assert vars(Point(*args)) == vars(StandardPoint(*args))  # the same instance dict, in order
        assert list(vars(Point(*args))) == list(vars(StandardPoint(*args)))
    assert [f.name for f in dataclasses.fields(Point)] == [f.name for f in dataclasses.fields(StandardPoint)]
    assert Point.__match_args__ == StandardPoint.__match_args__ == ("x", "label", "tags", "secret", "weight")
    assert str(inspect.signature(Point)) == str(inspect.signature(StandardPoint))
    assert typing.get_type_hints(Point.__init__) == typing.get_type_hints(StandardPoint.__init__)
    assert Point.__init__.__qualname__ == StandardPoint.__init__.__qualname__


@OURS
def test_argument_errors_are_type_errors(ours: Decorator) -> None:
    Point = _point(ours)
    Point(0)  # the compiled variant is in place from here on
    for args, kwargs, message in [
        ((), {}, "missing"),
        ((1, "a", [], 3, 4, 5), {}, "positional argument"),
        ((1,), {"x": 2}, "multiple values for argument 'x'"),
        ((1,), {"derived": 2}, "unexpected keyword argument 'derived'"),
        ((1,), {"nope": 2}, "unexpected keyword argument 'nope'"),
    ]:
        for cls in (Point, StandardPoint):
            with pytest.raises(TypeError, match=message):
                cls(*args, **kwargs)


def test_the_compiled_init_takes_over_after_compile_after_constructions() -> None:
    Point = _point(frozen)
    shared = Point.__init__
    values = [Point(i, tags=[i]) for i in range(kvstrategies.frozen.COMPILE_AFTER - 1)]
    assert Point.__init__ is shared
    total = kvstrategies.frozen.COMPILE_AFTER + 20
    values += [Point(i, tags=[i]) for i in range(kvstrategies.frozen.COMPILE_AFTER - 1, total)]
    assert Point.__init__ is not shared
    assert Point.__init__.__qualname__ == shared.__qualname__
    assert Point.__init__.__annotations__ == shared.__annotations__
    assert str(inspect.signature(Point)) == str(inspect.signature(StandardPoint))
    assert typing.get_type_hints(Point.__init__) == typing.get_type_hints(StandardPoint.__init__)
    assert [vars(v) for v in values] == [vars(StandardPoint(i, tags=[i])) for i in range(total)]


def test_a_replaced_init_is_left_alone() -> None:
    Point = _point(frozen)
    shared = Point.__init__

    def custom(self: Any, *args: Any, **kwargs: Any) -> None:
        shared(self, *args, **kwargs)

    Point.__init__ = custom
    for i in range(kvstrategies.frozen.COMPILE_AFTER + 1):
        Point(i)
    assert Point.__init__ is custom


def test_equality_and_the_hash_value_are_the_standard_ones() -> None:
    for args in [(1,), (1, "q", [5], 6, 7), (2, "r", [], 3, 4)]:
        assert hash(Point(*args)) == hash(StandardPoint(*args))
    assert Point(1, tags=[1]) == Point(1, tags=[2])  # tags: compare=False
    assert Point(1, weight=5) != Point(1, weight=6)  # weight: compared, not hashed
    assert hash(Point(1, weight=5)) == hash(Point(1, weight=6))
    assert Point(1) != Point(2)
    assert Point(1).__eq__(StandardPoint(1)) is NotImplemented  # another class is never equal
    assert Point(1) != (1, "p", 3, 4)


def test_repr_shows_the_repr_fields_with_the_qualified_name() -> None:
    assert repr(Point(1, "q", [5], 6, 7)) == repr(StandardPoint(1, "q", [5], 6, 7)).replace("StandardPoint", "Point")
    assert repr(Point(1)).endswith("Point(x=1, label='p', tags=[], weight=4, derived=9)")


@BOTH
def test_recursive_repr_shows_an_ellipsis(decorate: Decorator) -> None:
    @decorate
    class Box:
        items: list[Any]

    box = Box([])
    box.items.append(box)
    assert repr(box) == "test_recursive_repr_shows_an_ellipsis.<locals>.Box(items=[...])"


@BOTH
def test_fields_refuse_assignment_and_deletion(decorate: Decorator) -> None:
    cls = _point(decorate)
    value = cls(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        value.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        value.other = 2  # not a field: refused as well on the class itself
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'x'"):
        del value.x
    object.__setattr__(value, "cached", 5)  # caches beside the fields still write this way
    assert value.cached == 5


def test_a_plain_subclass_may_add_attributes_but_not_touch_fields() -> None:
    class Named(Point):  # type: ignore[misc, valid-type]
        pass

    value = Named(1)
    value.note = "ok"
    assert value.note == "ok"
    del value.note
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.x = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.label


@frozen
class Pickled:
    """A module-level value: pickling finds its class by name."""

    size: int
    name: str = "n"


def test_replace_asdict_and_pickle_work() -> None:
    value = Point(1, "q", [5])
    assert dataclasses.replace(value, x=7) == Point(7, "q", [5])
    assert dataclasses.asdict(value) == dataclasses.asdict(StandardPoint(1, "q", [5]))
    kept = Pickled(3, "m")
    assert pickle.loads(pickle.dumps(kept)) == kept
    params = Point.__dataclass_params__
    assert (params.init, params.repr, params.eq, params.frozen, params.order) == (True, True, True, True, False)


@BOTH
def test_post_init_runs_after_the_fields_are_set(decorate: Decorator) -> None:
    @decorate
    class Checked:
        size: int

        def __post_init__(self) -> None:
            if self.size < 0:
                raise ValueError("size must be >= 0")
            object.__setattr__(self, "double", 2 * self.size)

    assert Checked(3).double == 6
    with pytest.raises(ValueError, match="size must be >= 0"):
        Checked(-1)


@BOTH
def test_kw_only_classes_take_keywords_only(decorate: Decorator) -> None:
    keyword = dataclasses.dataclass(frozen=True, kw_only=True) if decorate is STANDARD else decorate(kw_only=True)

    @keyword
    class Options:
        required: int
        optional: int = 2

    parameters = inspect.signature(Options).parameters
    assert [(p.name, p.kind, p.default) for p in parameters.values()] == [
        ("required", inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty),
        ("optional", inspect.Parameter.KEYWORD_ONLY, 2),
    ]
    assert Options(required=1) == Options(required=1, optional=2)
    with pytest.raises(TypeError):
        Options(1)


@OURS
def test_order_compares_the_compared_fields_as_tuples(ours: Decorator) -> None:
    @ours(order=True)
    class Version:
        engine: str
        number: tuple[int, ...]

    @dataclasses.dataclass(frozen=True, order=True)
    class StandardVersion:
        engine: str
        number: tuple[int, ...]

    pairs = [(("a", (1,)), ("a", (2,))), (("b", (1,)), ("a", (9,))), (("a", (1,)), ("a", (1,)))]
    for left, right in pairs:
        for name in ("__lt__", "__le__", "__gt__", "__ge__"):
            ours = getattr(Version(*left), name)(Version(*right))
            theirs = getattr(StandardVersion(*left), name)(StandardVersion(*right))
            assert ours == theirs, (name, left, right)
    assert Version("a", (1,)).__lt__(StandardVersion("a", (2,))) is NotImplemented
    assert Version.__lt__.__qualname__.endswith("Version.__lt__")
    assert sorted([Version("b", (1,)), Version("a", (2,))]) == [Version("a", (2,)), Version("b", (1,))]


@BOTH
def test_methods_written_in_the_body_are_kept(decorate: Decorator) -> None:
    @decorate
    class Custom:
        value: int

        def __repr__(self) -> str:
            return "custom"

        def __hash__(self) -> int:
            return 7

    assert repr(Custom(1)) == "custom"
    assert hash(Custom(1)) == 7
    assert Custom(1) == Custom(1)


@BOTH
def test_a_body_eq_keeps_a_field_hash(decorate: Decorator) -> None:
    @decorate
    class Loose:
        value: int

        def __eq__(self, other: object) -> bool:
            return True

    assert Loose(1) == Loose(2)
    assert hash(Loose(5)) == hash((5,))


@BOTH
def test_a_value_without_fields(decorate: Decorator) -> None:
    @decorate
    class Empty:
        pass

    assert Empty() == Empty()
    assert hash(Empty()) == hash(())
    assert repr(Empty()).endswith("Empty()")
    assert Empty.__doc__ == "Empty()"  # the signature stands for a missing docstring


@BOTH
def test_a_field_named_self(decorate: Decorator) -> None:
    @decorate
    class Odd:
        self: int

    assert Odd(3).self == 3
    assert Odd(self=4).self == 4


@BOTH
def test_class_definition_errors_are_the_standard_ones(decorate: Decorator) -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @decorate
        class Misordered:
            a: int = 1
            b: int

    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):

        @decorate
        class Settable:
            a: int

            def __setattr__(self, name: str, value: Any) -> None:
                pass

    with pytest.raises(ValueError, match="mutable default"):

        @decorate
        class Shared:
            a: list[int] = []


def test_order_refuses_a_body_comparison() -> None:
    with pytest.raises(TypeError, match="Cannot overwrite attribute __lt__ in class Sorted. Consider using"):

        @frozen(order=True)
        class Sorted:
            a: int

            def __lt__(self, other: object) -> bool:
                return False


def test_init_var_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="InitVar fields are not supported"):

        @frozen
        class WithInitVar:
            a: int
            b: dataclasses.InitVar[int]


@OURS
def test_a_subclass_of_a_frozen_value_is_one_too(ours: Decorator) -> None:
    @ours
    class Base:
        a: int
        b: int = 2

    @ours
    class Child(Base):
        c: int = 3

    child = Child(1, c=4)
    assert (child.a, child.b, child.c) == (1, 2, 4)
    assert child == Child(1, 2, 4) and child != Base(1, 2)
    assert hash(child) == hash((1, 2, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.c = 5
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclasses.dataclass
        class Mutable(Base):
            d: int = 0


def test_the_package_value_classes_are_frozen_dataclasses() -> None:
    from kvstrategies.api import Plan
    from kvstrategies.context import SchedulingConfig
    from kvstrategies.models.architectures import Architecture

    for cls in (Plan, SchedulingConfig, Architecture):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        assert cls.__setattr__.__qualname__ == f"{cls.__qualname__}.__setattr__"


@OURS
def test_the_package_helpers_equal_the_dataclasses_functions(ours: Decorator) -> None:
    Point = _point(ours)
    value = Point(1, "q", [5], 6, 7)
    assert [f.name for f in fields(value)] == [f.name for f in dataclasses.fields(StandardPoint)]
    assert [(f.init, f.repr, f.hash, f.compare) for f in fields(Point)] == [
        (f.init, f.repr, f.hash, f.compare) for f in dataclasses.fields(StandardPoint)
    ]
    assert replace(value, x=2, label="r") == Point(2, "r", [5], 6, 7)
    assert asdict(value) == dataclasses.asdict(StandardPoint(1, "q", [5], 6, 7))
    with pytest.raises(ValueError, match="field derived is declared with init=False"):
        replace(value, derived=1)
    assert value.__replace__(x=3) == replace(value, x=3)  # what copy.replace calls (Python 3.13)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        replace(value, nope=1)
    with pytest.raises(TypeError, match="@frozen class or instance"):
        fields(StandardPoint)
    assert is_frozen(Point) and not is_frozen(StandardPoint)


def test_asdict_converts_nested_values_as_dataclasses_does() -> None:
    @frozen
    class Inner:
        size: int

    @frozen
    class Outer:
        inner: Inner
        items: tuple[Inner, ...]
        table: dict[str, list[Inner]]
        tags: frozenset[str]

    @dataclasses.dataclass(frozen=True)
    class StandardInner:
        size: int

    @dataclasses.dataclass(frozen=True)
    class StandardOuter:
        inner: StandardInner
        items: tuple[StandardInner, ...]
        table: dict[str, list[StandardInner]]
        tags: frozenset[str]

    ours = Outer(Inner(1), (Inner(2),), {"a": [Inner(3)]}, frozenset({"x"}))
    theirs = StandardOuter(StandardInner(1), (StandardInner(2),), {"a": [StandardInner(3)]}, frozenset({"x"}))
    assert asdict(ours) == dataclasses.asdict(theirs) == dataclasses.asdict(ours)
    table = ours.table
    assert asdict(ours)["table"] is not table  # containers are new, as dataclasses.asdict makes them


def test_the_dataclasses_records_are_made_when_first_read() -> None:
    Point = _point(frozen)
    assert "__dataclass_fields__" not in vars(Point) or not isinstance(vars(Point)["__dataclass_fields__"], dict)
    assert dataclasses.is_dataclass(Point) and dataclasses.is_dataclass(Point(1))
    assert isinstance(vars(Point)["__dataclass_fields__"], dict)  # stored in place of the descriptor
    standard = dataclasses.fields(StandardPoint)
    ours = dataclasses.fields(Point)
    def record(f: dataclasses.Field[Any]) -> tuple[Any, ...]:
        return (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only)

    assert [record(f) for f in ours] == [record(f) for f in standard]
    params = Point.__dataclass_params__
    assert (params.init, params.repr, params.eq, params.frozen, params.order) == (True, True, True, True, False)
    assert dataclasses.replace(Point(1), label="z") == Point(1, "z")


@BOTH
def test_class_attributes_hold_the_plain_defaults(decorate: Decorator) -> None:
    cls = _point(decorate)
    assert cls.label == "p" and cls.secret == 3 and cls.derived == 9
    assert not hasattr(cls, "tags")  # a factory leaves no class attribute
    assert "derived" not in vars(cls(1))  # an init=False default stays on the class


@BOTH
def test_class_variables_are_not_fields(decorate: Decorator) -> None:
    @decorate
    class Counted:
        kind: ClassVar[str] = "counted"
        size: int = 0

    assert [f.name for f in dataclasses.fields(Counted)] == ["size"]
    assert Counted.kind == "counted" and Counted(3).size == 3


def test_a_dataclasses_field_is_read_too() -> None:
    @frozen
    class Mixed:
        a: int = dataclasses.field(default=1, repr=False)
        b: list[int] = dataclasses.field(default_factory=list)

    assert repr(Mixed()).endswith("Mixed(b=[])")
    assert Mixed().b == [] and Mixed().a == 1


def test_field_specifications_need_an_annotation_and_one_default() -> None:
    with pytest.raises(TypeError, match="'a' is a field but has no type annotation"):

        @frozen
        class Unannotated:
            a = frozen_field(default=1)

    with pytest.raises(ValueError, match="cannot specify both default and default_factory"):
        frozen_field(default=1, default_factory=list)


def test_kw_only_markers_are_refused() -> None:
    with pytest.raises(TypeError, match="KW_ONLY is not supported"):

        @frozen
        class Marked:
            a: int
            _: dataclasses.KW_ONLY
            b: int


def test_a_plain_subclass_with_its_own_init_shows_that_signature() -> None:
    class Built(Point):  # type: ignore[misc, valid-type]
        def __init__(self, size: int) -> None:
            super().__init__(size)

    assert str(inspect.signature(Built)) == "(size: 'int') -> 'None'"
    assert Built(4).x == 4


def test_a_body_init_is_kept_with_its_signature() -> None:
    @frozen
    class Own:
        a: int

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "a", int(text))

    assert Own("7").a == 7
    assert str(inspect.signature(Own)) == "(text: 'str') -> 'None'"

