"""``kvstrategies.evolve.evolve``: the copy ``dataclasses.replace`` makes, for frozen classes without checks."""

from __future__ import annotations

import dataclasses

import pytest

from kvstrategies.evolve import evolve
from kvstrategies.frozen import field, frozen
from kvstrategies.planner.launch_defaults import AppliedDefault, LaunchResolution
from kvstrategies.sizing import PoolSizes


def test_a_copy_equals_dataclasses_replace_and_leaves_the_original() -> None:
    res = LaunchResolution(gpu_mem_mib=81_559.0, page_size=64, applied=(AppliedDefault("page_size", 64, "why"),))
    copy = evolve(res, page_size=128, kv_cache_dtype="fp8_e4m3")
    assert copy == dataclasses.replace(res, page_size=128, kv_cache_dtype="fp8_e4m3")
    assert (copy.page_size, copy.kv_cache_dtype, copy.applied) == (128, "fp8_e4m3", res.applied)
    assert (res.page_size, res.kv_cache_dtype) == (64, "auto")
    assert type(copy) is LaunchResolution and copy is not res


def test_the_copy_is_frozen_and_carries_no_cached_values() -> None:
    sizes = PoolSizes(max_total_num_tokens=1_000, max_running_requests=8)
    copy = evolve(sizes, max_total_num_tokens=2_000)
    assert copy == PoolSizes(max_total_num_tokens=2_000, max_running_requests=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.max_total_num_tokens = 3_000  # type: ignore[misc]
    assert set(vars(copy)) == {f.name for f in dataclasses.fields(PoolSizes)}


def test_an_unknown_field_is_refused_as_dataclasses_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field 'page_sise'"):
        evolve(LaunchResolution(gpu_mem_mib=None), page_sise=1)


def test_classes_it_cannot_copy_this_way_are_refused() -> None:
    @frozen
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    @dataclasses.dataclass
    class Mutable:
        value: int

    @dataclasses.dataclass(frozen=True)
    class Standard:
        value: int

    @frozen
    class Derived:
        value: int
        twice: int = field(init=False, default=0)

    with pytest.raises(TypeError, match="__post_init__: use dataclasses.replace"):
        evolve(Checked(1), value=-1)
    with pytest.raises(TypeError, match="@frozen values, not Mutable"):
        evolve(Mutable(1), value=2)
    with pytest.raises(TypeError, match="@frozen values, not Standard"):
        evolve(Standard(1), value=2)
    with pytest.raises(TypeError, match="fields outside __init__"):
        evolve(Derived(1), value=2)
    with pytest.raises(TypeError, match="@frozen values, not int"):
        evolve(3)

    @frozen
    class Slotted:
        __slots__ = ("value",)
        value: int

    with pytest.raises(TypeError, match="slots: use dataclasses.replace"):
        evolve(Slotted(1), value=2)


def test_values_cached_beside_the_fields_are_not_carried_over() -> None:
    import functools

    @frozen
    class Sized:
        tokens: int

        @functools.cached_property
        def pages(self) -> int:
            return self.tokens // 16

    first = Sized(64)
    assert first.pages == 4  # cached in first's __dict__
    copy = evolve(first, tokens=160)
    assert copy.pages == 10 and set(vars(evolve(first))) == {"tokens"}
