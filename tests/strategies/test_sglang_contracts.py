"""The two contracts the SGLang comparison settled (what ``available_bytes`` and a draft's ``sizes`` mean).

* ``available_bytes`` is what SGLang hands ``calculate_pool_sizes``: for Mamba hybrids the state
  reservation is already out of it; the ``--gpu`` planner starts from the budget *before* the
  reservation and runs it itself.
* A draft worker's ``sizes`` are its own configurator's; the target sizes it adopts are reported
  beside them (``adopted_sizes``) and are what its pools are built for.
"""

from __future__ import annotations

from kvstrategies.api import plan
from kvstrategies.case import parse_case
from kvstrategies.document import plan_document
from kvstrategies.planner.deployment import state_reserved_fields
from kvstrategies.strategies.registry import select_configurator

GIB = 2**30
QWEN3_NEXT = {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "page_size": 64, "kv_cache_dtype": "bf16"}


def test_available_bytes_is_the_kv_budget_for_mamba_hybrids() -> None:
    case = parse_case({**QWEN3_NEXT, "available_bytes": 30 * GIB})
    planned = plan(case.settings, case.available_bytes)
    cfg = planned.configurator
    # every available byte goes to KV: T = align(30 GiB // cell, page)
    assert planned.sizes.max_total_num_tokens == (30 * GIB // cfg.cell_size_bytes) // 64 * 64
    # the slot count is one whose reservation leaves exactly these bytes
    slots = planned.sizes.max_mamba_cache_size
    budget = cfg.budget_leaving(30 * GIB)  # type: ignore[attr-defined]
    assert budget.max_mamba_cache_size == slots and budget.kv_available_bytes == 30 * GIB
    assert any("max_mamba_cache_size not given" in note for note in plan_document(planned)["notes"])


def test_given_slot_count_is_used_as_is() -> None:
    case = parse_case({**QWEN3_NEXT, "available_bytes": 30 * GIB, "max_mamba_cache_size": 500})
    planned = plan(case.settings, case.available_bytes)
    assert planned.sizes.max_mamba_cache_size == 500
    assert planned.sizes.max_running_requests == 500 // 3  # capped by K // mamba_ratio


def test_the_gpu_planner_reserves_the_state_before_planning() -> None:
    fields = {**QWEN3_NEXT}
    before = 60 * GIB
    reserved = state_reserved_fields(fields, before)
    cfg = select_configurator(parse_case({**fields, "available_bytes": before}).settings)
    forward = cfg.mamba_budget(before)  # type: ignore[attr-defined]
    assert reserved["available_bytes"] == forward.kv_available_bytes < before
    assert reserved["max_mamba_cache_size"] == forward.max_mamba_cache_size
    planned = plan(parse_case(reserved).settings, reserved["available_bytes"])
    assert planned.sizes.max_mamba_cache_size == forward.max_mamba_cache_size
    # a model without request-scoped state keeps its whole budget
    dense = state_reserved_fields({"preset": "llama-3.1-8b"}, before)
    assert dense["available_bytes"] == before and "max_mamba_cache_size" not in dense


def test_draft_sizes_are_its_own_and_the_adopted_target_sizes_sit_beside_them() -> None:
    fields = {"preset": "deepseek-v3", "tp_size": 8, "page_size": 64, "kv_cache_dtype": "fp8_e4m3",
              "speculative_algorithm": "EAGLE", "available_bytes": 40 * GIB}
    target = plan(parse_case(fields).settings, 40 * GIB)
    draft = plan(parse_case({**fields, "is_draft_worker": True}).settings, 40 * GIB)
    cell = draft.configurator.cell_size_bytes  # one MTP layer: 656 B fp8 rows
    assert draft.sizes.max_total_num_tokens == (40 * GIB // cell) // 64 * 64
    assert draft.adopted_sizes is not None
    assert draft.adopted_sizes.max_total_num_tokens == target.sizes.max_total_num_tokens
    assert draft.pool_sizes.max_total_num_tokens == target.pool_sizes.max_total_num_tokens
    assert plan_document(draft)["adopted_sizes"] == draft.adopted_sizes.to_dict()
    assert "adopted_sizes" not in plan_document(target)


def test_the_dedup_conv_window_view_overlaps_its_storage_as_sglang_does() -> None:
    torch = __import__("pytest").importorskip("torch")
    from kvstrategies.api import build

    case = parse_case({**QWEN3_NEXT, "available_bytes": 30 * GIB, "speculative_algorithm": "EAGLE",
                       "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": 4, "max_running_requests": 8})
    planned = plan(case.settings, case.available_bytes, pool_max_tokens=1024)
    pools = build(planned, "cpu")
    mamba = pools.extra[0]
    phys = mamba["mamba._intermediate_conv_window_phys[0]"]
    view = mamba["mamba.intermediate_conv_window[0]"]
    assert tuple(view.shape) == (36, 9, 4, 2048, 3) and view.data_ptr() == phys.data_ptr()
    phys[0, 0, 5, :] = torch.arange(6, dtype=phys.dtype)  # one channel's 6 columns
    # draft step t sees columns [t, t + 3): the windows overlap
    assert view[0, 0, :, 5, :].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
