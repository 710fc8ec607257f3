"""``kvstrategies.jsonout.dumps`` is ``json.dumps(value, indent=2)``, byte for byte."""

from __future__ import annotations

import contextlib
import enum
import io
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstrategies.cli import main
from kvstrategies.jsonout import dumps


class Level(int, enum.Enum):
    LOW = 3


class Name(str, enum.Enum):
    X = "x\u00e9"


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)
)
keys = st.one_of(st.text(max_size=6), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5),
                            st.lists(inner, max_size=3).map(tuple)),  # fmt: skip
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_json_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert dumps(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize(
    "value",
    [
        {}, [], (), "", 0, -0.0, math.nan, math.inf, -math.inf, 1e300, True, None, [1, 2, 3], [[1], [2, [3, {}]]],
        {"shape": [2, 327681, 8, 128], "nested": {"a": None, "b": [True, 1.5]}}, [Level.LOW, Name.X, (1, True)],
        {3: "int key", 2.5: "float key", True: "bool key", None: "null key", "é\n\"": "escaped"},
    ],
)
def test_edge_values(value: Any) -> None:
    assert dumps(value) == json.dumps(value, indent=2)


def test_what_json_refuses_is_refused_the_same_way() -> None:
    for bad in ({"a": object()}, {(1, 2): 3}, [{1, 2}]):
        with pytest.raises(TypeError) as ours:
            dumps(bad)
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad, indent=2)
        assert str(ours.value) == str(theirs.value)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference detected"):
        dumps(loop)


@pytest.mark.parametrize("argv", [["plan", "qwen3-235b-a22b", "--gpu", "H200", "--tp", "8", "--json"],
                                  ["plan", "kimi-k2", "--gpu", "H200", "--tp", "8", "--json"]])  # fmt: skip
def test_a_plan_document_reads_back_and_rewrites_to_the_same_text(argv: list[str]) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    text = out.getvalue()
    assert text == json.dumps(json.loads(text), indent=2) + "\n"
