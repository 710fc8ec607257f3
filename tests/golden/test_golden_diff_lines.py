"""What ``kvstrategies.golden.diff`` prints for each kind of change, line by line (the text a
maintainer reads in ``tools/diff_golden.py`` and ``verify`` reports)."""

from __future__ import annotations

from kvstrategies.golden.diff import describe_change, diff_buffers, diff_documents


def _buf(name: str, shape: list[int], nbytes: int, view_of: str | None = None) -> dict[str, object]:
    return {"name": name, "shape": shape, "dtype": "torch.bfloat16", "nbytes": nbytes, "view_of": view_of}


def test_a_delta_of_256_bits_is_still_shown_and_one_of_257_is_not() -> None:
    assert describe_change(0, 2**256 - 1) == f"0 -> {2**256 - 1} (+{2**256 - 1})"
    assert describe_change(1, 2**256 + 1) == f"1 -> {2**256 + 1}"  # delta 2**256 has 257 bits
    assert describe_change(100, 150) == "100 -> 150 (+50, +50%)"


def test_dicts_are_shown_in_braces_with_sorted_keys() -> None:
    assert describe_change({"b": 2, "a": [1, None]}, None) == "{a: [1, null], b: 2} -> null"


def test_removed_added_and_changed_buffers_each_get_a_line() -> None:
    old = [_buf("k_buffer[0]", [8, 2], 32), _buf("gone", [4], 8, view_of="k_buffer[0]")]
    new = [_buf("k_buffer[0]", [16, 2], 64), _buf("new", [2], 4)]
    assert diff_buffers("token_to_kv", old, new) == [
        "pools.token_to_kv: k_buffer[0]: shape [8, 2] -> [16, 2]; nbytes 32 -> 64 (+32, +100%)",
        "pools.token_to_kv: gone: removed (shape [4] torch.bfloat16 8 B, view of k_buffer[0])",
        "pools.token_to_kv: new: added (shape [2] torch.bfloat16 4 B)",
    ]


def test_pool_keys_outside_the_usual_four_are_compared_too() -> None:
    """``pool_class``, ``attributes``, ``buffers`` and ``planned_bytes`` first, then any other key."""
    pool = {"pool_class": "MHATokenToKVPool", "buffers": [], "planned_bytes": 10, "size": 4}
    old = {"pools": {"token_to_kv": pool}}
    new = {"pools": {"token_to_kv": {**pool, "planned_bytes": 20, "size": 8}}}
    lines = diff_documents(old, new)
    assert any(line.startswith("pools.token_to_kv.planned_bytes: 10 -> 20") for line in lines), lines
    assert any(line.startswith("pools.token_to_kv.size: 4 -> 8") for line in lines), lines


def test_per_layer_changes_are_grouped_into_index_ranges_with_their_count() -> None:
    """Layers changed the same way are one line: ``k_buffer[0..1,3]`` with runs as ``a..b``, a
    single index as itself, and the count when the line stands for more than one buffer."""
    old = [_buf(f"k_buffer[{i}]", [8, 2], 32) for i in (0, 1, 3, 5, 6, 9)]
    new = [_buf(f"k_buffer[{i}]", [16, 2], 64) for i in (0, 1, 3, 5, 6, 9)]
    assert diff_buffers("token_to_kv", old, new) == [
        "pools.token_to_kv: k_buffer[0..1,3,5..6,9] (6 buffers): shape [8, 2] -> [16, 2]; nbytes 32 -> 64 (+32, +100%)",
    ]
    two_old, two_new = old[:2], new[:2]
    assert diff_buffers("token_to_kv", two_old, two_new) == [
        "pools.token_to_kv: k_buffer[0..1] (2 buffers): shape [8, 2] -> [16, 2]; nbytes 32 -> 64 (+32, +100%)",
    ]
    assert diff_buffers("token_to_kv", old[2:3], new[2:3]) == [
        "pools.token_to_kv: k_buffer[3]: shape [8, 2] -> [16, 2]; nbytes 32 -> 64 (+32, +100%)",
    ]


def test_a_buffer_without_bytes_is_summarised_without_them() -> None:
    """SGLang's recorded buffers hold name, shape and dtype only: no ``None B`` in the line."""
    old = [{"name": "k_buffer[0]", "shape": [8, 2], "dtype": "torch.bfloat16"}]
    line = "pools.token_to_kv: k_buffer[0]: removed (shape [8, 2] torch.bfloat16)"
    assert diff_buffers("token_to_kv", old, []) == [line]


def test_an_added_or_removed_pool_says_its_bytes_only_when_it_has_them() -> None:
    ours = {"pool_class": "MHATokenToKVPool", "buffers": [{}, {}], "planned_bytes": 1024}
    recorded = {"pool_class": "DSATokenToKVPool", "buffers": [{}, {}, {}]}
    assert diff_documents({"pools": {}}, {"pools": {"token_to_kv": ours}}) == [
        "pools.token_to_kv: added MHATokenToKVPool (2 buffers, 1024 B)"
    ]
    assert diff_documents({"pools": {"token_to_kv": recorded}}, {"pools": {}}) == [
        "pools.token_to_kv: removed DSATokenToKVPool (3 buffers)"
    ]
