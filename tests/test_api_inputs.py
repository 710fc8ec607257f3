"""The Python API checks what a caller passes: wrong types are one KVCacheConfigError naming the
argument, never a bare TypeError / AttributeError / RuntimeError or a silently planned value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import kvstrategies
from kvstrategies.allocators.requests import RequestSlotAllocator
from kvstrategies.api import MAX_WHAT_IF_REQUESTS
from kvstrategies.case import parse_case
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError
from kvstrategies.planner import DeploymentRequest
from kvstrategies.planner.gpus import lookup_gpu

from .helpers import case_settings
from .pools import test_write_path as W

H100 = lookup_gpu("H100")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("kv_cache_dtype", {}, "kv_cache_dtype must be a string or None, got dict"),  # was planned as auto
        ("speculative_algorithm", [], "speculative_algorithm must be a string"),
        ("speculative_draft_model_path", 4, "speculative_draft_model_path must be a string"),
        ("disable_radix_cache", "yes", "disable_radix_cache must be true or false"),
        ("allow_context_length_override", 1, "allow_context_length_override must be true or false"),
        ("source", "x", "source must be a mapping"),
        ("source", {"preset": "llama-3.1-8b", "hf_config": {}}, "exactly one of 'preset' or 'hf_config'"),
        ("source", {"hf_config": "config.json"}, r"source\['hf_config'\] must be a config.json object"),
        ("launch_extras", [], "launch_extras must be a mapping"),
        ("launch_extras", {"bogus": 1}, "'bogus' is not a LaunchSettings field"),
        ("launch_extras", {"kv_cache_dtype": "fp8_e4m3"}, "set kv_cache_dtype as the request's own field"),
        ("launch_extras", {"max_prefill_tokens": "8k"}, r"launch_extras\['max_prefill_tokens'\] must be an integer"),
        ("launch_extras", {"disable_cuda_graph": 1}, "must be true or false"),
        ("model", None, "model must be a string"),
        ("model_folder", 3, "model_folder must be a pathlib.Path"),
        ("device", None, "device must be a string"),
        ("model_description", "x\0y", "model_description must be a string"),
    ],
)
def test_deployment_request_checks_every_field_type(field: str, value: Any, match: str) -> None:
    kwargs: dict[str, Any] = {"model": "llama-3.1-8b", "source": {"preset": "llama-3.1-8b"}, "gpu": H100}
    kwargs[field] = value
    with pytest.raises(KVCacheConfigError, match=match):
        DeploymentRequest(**kwargs)


def test_a_well_typed_request_still_plans() -> None:
    from kvstrategies.planner import plan_deployment

    req = DeploymentRequest("m", {"preset": "llama-3.1-8b", "checkpoint": Path("/nonexistent")}, gpu=H100,
                            model_folder=None, launch_extras={"max_prefill_tokens": 8192})  # fmt: skip
    assert req.launch_extras == {"max_prefill_tokens": 8192}
    plain = DeploymentRequest("m", {"preset": "llama-3.1-8b"}, gpu=H100, launch_extras={"max_prefill_tokens": 8192})
    assert plan_deployment(plain, suggest=False).sizes.max_total_num_tokens > 0


META_ROWS = torch.empty(2, dtype=torch.int64, device="meta")


@pytest.mark.parametrize("rows", [1.5, None, "3", [1.5], torch.tensor([1.5]), META_ROWS])
def test_the_request_slot_allocator_refuses_rows_that_are_not_integers(rows: Any) -> None:
    allocator = RequestSlotAllocator(8)
    held = allocator.alloc(2)
    with pytest.raises(KVCacheConfigError, match="rows must be an int|integer tensor|meta tensor"):
        allocator.free(rows)
    assert allocator.available_size() == 6 and held == [7, 8]  # nothing changed
    allocator.free(torch.tensor(held))
    assert allocator.available_size() == 8


@pytest.fixture(scope="module")
def paged() -> Any:
    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**26, "page_size": 16})
    return kvstrategies.build(kvstrategies.plan(case.settings, case.available_bytes), "cpu").allocator


@pytest.mark.parametrize("state", [(), (1, 2), None, (torch.zeros(1), [], 0), "state"])
def test_restore_state_needs_a_state_from_backup_state(paged: Any, state: Any) -> None:
    before = paged.available_size()
    with pytest.raises(KVCacheConfigError, match="restore_state needs a state returned by its backup_state"):
        paged.restore_state(state)
    assert paged.available_size() == before
    paged.restore_state(paged.backup_state())  # its own state: fine


def test_alloc_decode_checks_its_tensors(paged: Any) -> None:
    one = torch.tensor([17], dtype=torch.int64)
    with pytest.raises(KVCacheConfigError, match="seq_lens must be a 1-D integer tensor, got list"):
        paged.alloc_decode([1], [0], [0])
    with pytest.raises(KVCacheConfigError, match=r"differ in length \(seq_lens 1, seq_lens_cpu 1, last_loc 2\)"):
        paged.alloc_decode(one, one, torch.tensor([15, 16]))  # planned before: a silent wrong answer
    with pytest.raises(KVCacheConfigError, match="integer tensor"):
        paged.alloc_decode(one.float(), one, one)
    with pytest.raises(KVCacheConfigError, match="extend_num_tokens must be a non-negative int"):
        paged.alloc_extend(one, one, one, one, one, -1)
    meta = torch.empty(1, dtype=torch.int64, device="meta")
    with pytest.raises(KVCacheConfigError, match="meta tensor, which holds no values"):
        paged.alloc_decode(meta, meta, one)  # found by the fuzz: Tensor.item() on a meta tensor
    with pytest.raises(KVCacheConfigError, match="meta tensor"):
        paged.alloc_decode(one, one, meta)


def test_a_pool_write_of_an_empty_batch_is_a_no_op() -> None:
    """Was a bare RuntimeError (``reshape(0, -1)``) in the store kernels."""
    empty = torch.empty(0, dtype=torch.int64)

    def rows(*shape: int) -> torch.Tensor:
        return torch.empty(0, *shape, dtype=torch.bfloat16)

    mha = W.mha_pool()
    before = mha.get_key_buffer(0).clone()
    mha.set_kv_buffer(0, empty, rows(2, 8), rows(2, 8))
    mha.set_kv_buffer(0, empty, rows(2, 8), rows(2, 8), k_scale=2.0, v_scale=2.0)
    mha.move_kv_cache(empty, empty)
    assert torch.equal(mha.get_key_buffer(0), before)
    W.mha_pool(W.DType.FLOAT8_E4M3FN).set_kv_buffer(0, empty, rows(2, 8), rows(2, 8))
    mla = W.mla_pool()
    mla.set_mla_kv_buffer(10, empty, rows(16), rows(8))
    mla.set_kv_buffer(10, empty, rows(1, 24), None)
    dsa = W.dsa_pool()
    dsa.set_mla_kv_buffer(3, empty, rows(128), rows(16))
    dsa.set_index_k_scale_buffer(3, empty, torch.empty(0, 128, dtype=torch.float8_e4m3fn), torch.empty(0))
    W.swa_pool().set_kv_buffer(1, empty, rows(1, 4), rows(1, 4))


HUGE_INT = 10**5000  # 5,001 digits: str() refuses it (Python's 4,300-digit limit), JSON cannot hold it


@pytest.mark.parametrize("field", ["available_bytes", "tp_size", "page_size", "swa_full_tokens_ratio",
                                   "mamba_full_memory_ratio", "speculative_num_steps"])  # fmt: skip
def test_an_integer_too_long_to_print_is_refused_naming_its_field(field: str) -> None:
    """Formatting the error itself raised ValueError before (and ``float(10**400)`` OverflowError)."""
    with pytest.raises(KVCacheConfigError, match=f"case field '{field}' is <an integer of about 5,001 digits>"):
        parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**34, field: HUGE_INT})
    with pytest.raises(KVCacheConfigError, match=r"hf_config\.rope_scaling\.factor"):
        parse_case({"hf_config": {"rope_scaling": {"factor": HUGE_INT}}, "available_bytes": 2**34})
    with pytest.raises(KVCacheConfigError, match="request field 'tp_size' is <an integer of about 5,001 digits>"):
        DeploymentRequest("m", {"preset": "llama-3.1-8b"}, gpu=H100, tp_size=HUGE_INT)


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_an_integer_beyond_the_float_range_is_refused_not_an_overflow(value: int) -> None:
    """Round two's fix escaped again for ints: ``float(10**400)`` raises OverflowError; every int
    beyond the float range has more than 1,024 bits, so the up-front scan names it (and
    ``validate.finite_float`` keeps the range checks safe for direct callers)."""
    from kvstrategies.core.validate import check_float
    from kvstrategies.presets import load_preset_config

    with pytest.raises(KVCacheConfigError, match="x must be a finite number > 0.0, got -?<an integer of about 401"):
        check_float(value, "x", low=0.0)
    with pytest.raises(KVCacheConfigError, match="case field 'mamba_full_memory_ratio' is -?<an integer of about 401"):
        parse_case({"preset": "nemotron-h-8b", "available_bytes": 2**34, "mamba_full_memory_ratio": value})
    config = {**load_preset_config("llama-3.1-8b"), "rope_scaling": {"rope_type": "llama3", "factor": value}}
    with pytest.raises(KVCacheConfigError, match="rope_scaling.factor"):
        parse_case({"hf_config": config, "available_bytes": 2**34})


# ---- what-if layouts and host-sized builds at their edges (kvstrategies/api.py) ----------------------------


LLAMA = "llama-3.1-8b"  # 32 layers, 8 KV heads of 128, context 131,072


def test_a_what_if_layout_holds_eight_requests_unless_told() -> None:
    # the case files' pool_max_running_requests default 8: ReqToTokenPool rows R + 1 = 9 of 131,072 + 4 columns
    # (KVCacheConfigurator._build_req_to_token_pool, extra 4 + 0 draft tokens)
    planned = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256)
    assert planned.pool_sizes.max_running_requests == 8
    assert planned.layout.req_to_token.buffers[0].shape == (9, 131076)
    one = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256, pool_max_running_requests=1)
    assert one.layout.req_to_token.buffers[0].shape == (2, 131076)  # 1 + 1 rows
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests"):
        kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256, pool_max_running_requests=0)


def test_a_cpu_build_that_exactly_fits_the_host_goes_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvstrategies.core import host_memory
    from kvstrategies.pools.runtime import factory

    planned = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256)
    built = object()
    monkeypatch.setattr(factory, "build_typed_pools", lambda *args, **kwargs: built)
    monkeypatch.setattr(host_memory, "available_host_bytes", lambda: planned.planned_bytes)
    assert kvstrategies.build(planned, "cpu") is built  # room == planned: it fits
    monkeypatch.setattr(host_memory, "available_host_bytes", lambda: planned.planned_bytes - 1)
    with pytest.raises(InsufficientMemoryError, match="building on 'cpu'"):
        kvstrategies.build(planned, "cpu")


def test_a_one_token_cap_passes_the_argument_check_and_serves_no_request() -> None:
    # plan()'s token arguments need >= 1. A cap of 1 token then serves min(2048, 1 // 2) = 0 requests
    # (KVCacheConfigurator.resolve_max_num_reqs), refused as such; 2 tokens serve 1; a what-if of 1 token is laid out
    settings = case_settings(LLAMA)
    with pytest.raises(KVCacheConfigError, match="the plan serves 0 requests"):
        kvstrategies.plan(settings, 2**30, max_tokens=1)
    capped = kvstrategies.plan(settings, 2**30, max_tokens=2).sizes_from_max_tokens
    assert capped is not None and (capped.max_total_num_tokens, capped.max_running_requests) == (2, 1)
    assert kvstrategies.plan(settings, 2**30, pool_max_tokens=1).pool_sizes.max_total_num_tokens == 1
    for name in ("max_tokens", "pool_max_tokens"):
        with pytest.raises(KVCacheConfigError, match=name):
            kvstrategies.plan(settings, 2**30, **{name: 0})


def test_a_what_if_may_ask_for_up_to_2_to_the_20_requests() -> None:
    # api.MAX_WHAT_IF_REQUESTS = 2**20 = 1,048,576 rows of the request table (+ 1 padding row)
    assert MAX_WHAT_IF_REQUESTS == 1048576
    settings = case_settings(LLAMA)
    most = kvstrategies.plan(settings, 2**30, pool_max_tokens=256, pool_max_running_requests=1048576)
    assert most.layout.req_to_token.buffers[0].shape == (1048577, 131076)
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests"):
        kvstrategies.plan(settings, 2**30, pool_max_tokens=256, pool_max_running_requests=1048577)
