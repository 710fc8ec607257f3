"""What the golden group's modules do at their edges: the JSON reader's size limits and the
build check's allocated bytes (kvstrategies.jsonio, kvstrategies.report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvstrategies.case import parse_case
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.jsonio import MAX_JSON_BYTES, read_json_file, read_regular_bytes

CASES = Path(__file__).parents[1] / "cases"


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # a sparse file: no disk written
    return path


def test_a_json_input_may_hold_64_mib_and_not_one_byte_more(tmp_path: Path) -> None:
    assert MAX_JSON_BYTES == 64 * 2**20
    with pytest.raises(KVCacheConfigError) as at_limit:
        read_json_file(_sparse(tmp_path / "limit.json", 64 * 2**20))  # read whole: NUL bytes are no JSON
    assert "larger than" not in str(at_limit.value)
    with pytest.raises(KVCacheConfigError, match="larger than 64 MiB, far more than any config or case file"):
        read_json_file(_sparse(tmp_path / "over.json", 64 * 2**20 + 1))


def test_a_file_one_byte_over_the_limit_is_refused_and_the_limit_is_said_in_its_unit(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (2**20 + 1))
    assert read_regular_bytes(data, 2**20 + 1, "a file", "why") == b"x" * (2**20 + 1)
    with pytest.raises(KVCacheConfigError, match=r"larger than 1 MiB, why"):  # 2**20: said in MiB
        read_regular_bytes(data, 2**20, "a file", "why")
    with pytest.raises(KVCacheConfigError, match=r"larger than 1,048,575 bytes, why"):  # below 1 MiB: in bytes
        read_regular_bytes(data, 2**20 - 1, "a file", "why")


def test_the_build_check_counts_the_state_pools_too() -> None:
    """``plan --build-check`` allocates on ``meta`` and reports what the token-to-KV pool and the
    extra pools allocated: for a Mamba hybrid the state pool is most of it."""
    from kvstrategies.api import plan
    from kvstrategies.case import read_json_file as read_case
    from kvstrategies.report import plan_document

    case = parse_case(read_case(CASES / "bridge-odd-budget-nemotron-h-8b-tp1-bf16-p1-mamba64.json"))
    planned = plan(case.settings, case.available_bytes, max_tokens=case.max_tokens,
                   pool_max_tokens=case.pool_max_tokens, pool_max_running_requests=case.pool_max_running_requests,
                   pool_max_mamba_cache_size=case.pool_max_mamba_cache_size)  # fmt: skip
    extra = sum(layout.planned_bytes for layout in planned.layout.extra)
    assert extra > 0
    document = plan_document(planned, measure=True)
    assert document["allocated_bytes"] == planned.layout.token_to_kv.planned_bytes + extra
    assert document["allocated_bytes"] == plan_document(planned)["allocated_bytes"]
