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
from dataclasses import field
from typing import Any

import pytest

from kvstrategies.frozen import frozen

Decorator = Callable[[type], type]
STANDARD: Decorator = dataclasses.dataclass(frozen=True)
BOTH = pytest.mark.parametrize("decorate", [STANDARD, frozen], ids=["dataclasses", "frozen"])


def _point(decorate: Decorator) -> Any:
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


def test_construction_defaults_and_fields_match() -> None:
    for cls in (Point, StandardPoint):
        value = cls(1, "q", [5], 6, 7)
        assert (value.x, value.label, value.tags, value.secret, value.weight, value.derived) == (1, "q", [5], 6, 7, 9)
        bare = cls(2)
        assert (bare.label, bare.tags, bare.secret, bare.weight, bare.derived) == ("p", [], 3, 4, 9)
        assert cls(3).tags is not cls(3).tags  # a fresh list per instance
    assert [f.name for f in dataclasses.fields(Point)] == [f.name for f in dataclasses.fields(StandardPoint)]
    assert Point.__match_args__ == StandardPoint.__match_args__ == ("x", "label", "tags", "secret", "weight")
    assert str(inspect.signature(Point)) == str(inspect.signature(StandardPoint))
    assert typing.get_type_hints(Point.__init__) == typing.get_type_hints(StandardPoint.__init__)
    assert Point.__init__.__qualname__ == StandardPoint.__init__.__qualname__


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
    keyword = frozen(kw_only=True) if decorate is frozen else dataclasses.dataclass(frozen=True, kw_only=True)

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


def test_order_compares_the_compared_fields_as_tuples() -> None:
    @frozen(order=True)
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


def test_a_subclass_of_a_frozen_value_is_one_too() -> None:
    @frozen
    class Base:
        a: int
        b: int = 2

    @frozen
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
