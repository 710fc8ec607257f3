"""Fuzzing the public entry points: a plan that satisfies the invariants, or a KVCacheConfigError.

Every test feeds random input through ``parse_hf_config`` / ``parse_case`` / the context
dataclasses / ``plan`` and lets only :class:`KVCacheConfigError` (or a subclass) escape; any
other exception fails the test. Every plan that succeeds must satisfy:

* token counts are page multiples (except the SWA side of SWAChunkCap's max-tokens path,
  SWARequestCapPoolConfigurator.calculate_pool_sizes_from_max_tokens, which SGLang caps by the un-aligned ``M``);
* the planned tokens fit the budget by the strategy's own byte accounting
  (Default family: ``tokens * cell <= available`` after the state reservation);
* the layout's planned bytes equal what ``build(plan, "meta")`` allocates (the layout is a
  small what-if size, ``pool_max_tokens``, so the tensors stay small);
* strategy selection is deterministic (same context, same class).

Example counts come from the hypothesis profile in ``tests/conftest.py``
(``KVSTRATEGIES_HYPOTHESIS_PROFILE``): ``ci`` 40 per test (240 in all), ``thorough`` 2,500 per
test (15,000 in all, ``tox -e fuzz``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvstrategies.api import Plan, build, plan
from kvstrategies.case import CASE_DEFAULTS, load_case, parse_case
from kvstrategies.context import (
    AttentionBackends,
    DeviceKind,
    EngineKnobs,
    KVCacheSettings,
    ParallelLayout,
    Platform,
    SchedulingConfig,
    SpecAlgorithm,
    SpeculativeConfig,
)
from kvstrategies.core.dtypes import resolve_kv_cache_dtype
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.models import parse_hf_config
from kvstrategies.pools.build import build_pools
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.strategies.default import DefaultPoolConfigurator
from kvstrategies.strategies.dsv4 import DSV4PoolConfigurator
from kvstrategies.strategies.hybrid_swa import HybridSWAPoolConfigurator, SWAChunkCapPoolConfigurator
from kvstrategies.strategies.registry import select_configurator

from ..fuzz_configs import budgets, case_fields, fit_page, garbage, hf_configs, mutated
from ..fuzz_stats import event

#: relative slack for float cost models (HybridSWA / DSV4 price a token in float bytes)
FLOAT_SLACK = 1e-9
PRESETS = tuple(preset_names())


def presets() -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(PRESETS).map(load_preset_config)


# ---- invariants --------------------------------------------------------------------------------


def _aligned(value: int | None, page: int) -> bool:
    return value is None or value % page == 0


def check_alignment(planned: Plan) -> None:
    """Every token count of every sizes value is a page multiple (except SWAChunkCap's ``min(cap, M)``)."""
    page = planned.ctx.page_size
    chunk_cap = isinstance(planned.configurator, SWAChunkCapPoolConfigurator)
    if planned.ctx.is_draft_worker:  # a draft adopts the target's sizes: the target's quirk applies to them
        target = select_configurator(dataclasses.replace(planned.ctx, is_draft_worker=False))
        chunk_cap = chunk_cap or isinstance(target, SWAChunkCapPoolConfigurator)
    profiled = planned.sizes
    for sizes in (profiled, planned.sizes_from_max_tokens, planned.resolution.sizes, planned.pool_sizes):
        if sizes is None:
            continue
        assert _aligned(sizes.max_total_num_tokens, page), sizes
        assert _aligned(sizes.full_max_total_num_tokens, page), sizes
        # SWAChunkCap's from_max_tokens path: swa = min(ceil_align(cap, P), M) with un-aligned M, as SGLang does
        if not chunk_cap or sizes is profiled:
            assert _aligned(sizes.swa_max_total_num_tokens, page), sizes


def check_budget(planned: Plan) -> None:
    """The profiled sizes fit ``available_bytes`` by the strategy's own accounting."""
    conf, sizes, available = planned.configurator, planned.sizes, planned.available_bytes
    if planned.ctx.is_draft_worker:
        return  # a draft takes the target's sizes (x DCP); the target's cell priced them
    if isinstance(conf, DefaultPoolConfigurator):
        # HybridLinear and Ascend included; the Mamba state comes out of the budget first
        kv_available = planned.resolution.reservation.kv_available_bytes
        assert kv_available <= available
        # a zero-KV stage takes its token count from the context (KVCacheConfigurator.config_from_budget)
        if conf.cell_size_bytes > 0:
            assert sizes.max_total_num_tokens * conf.cell_size_bytes <= kv_available
    elif isinstance(conf, SWAChunkCapPoolConfigurator):
        # affine with a fixed part: the SWA pool at the request cap, the rest for full tokens
        full, swa = sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens
        assert full is not None and swa is not None
        assert swa * conf.swa_cell + full * conf.full_token_cell <= available
    elif isinstance(conf, HybridSWAPoolConfigurator):
        # piecewise: M full tokens at a float cell (all-SWA: SWA tokens at an int cell)
        assert sizes.max_total_num_tokens * conf.cell_size_bytes <= available * (1 + FLOAT_SLACK)
    elif isinstance(conf, DSV4PoolConfigurator):
        # full tokens at bpft plus the request-scoped fixed bytes for the estimated requests
        # (DSV4PoolConfigurator._fixed_swa_bytes)
        fixed = conf.fixed_bytes(conf.estimated_requests(available))
        assert sizes.max_total_num_tokens * conf.bytes_per_full_token + fixed <= available * (1 + FLOAT_SLACK)


def check_plan(planned: Plan) -> None:
    """All invariants of a successful plan, the meta build included.

    ``build`` may still refuse a plan with a KVCacheConfigError where SGLang's builder asserts
    after sizing (e.g. its pure-SWA allocator needs page 1); the layout's bytes are then
    checked against :func:`build_pools`, the allocation step ``build`` runs first.
    """
    assert type(select_configurator(planned.ctx)) is type(planned.configurator)
    check_alignment(planned)
    check_budget(planned)
    try:
        pools = build(planned, "meta")
    except KVCacheConfigError as exc:
        event(f"build rejected: {type(exc).__name__}")
        pools = build_pools(planned.layout, "meta")
    assert pools.allocated_bytes == planned.layout.planned_bytes
    event(f"planned by {type(planned.configurator).__name__}")


def plan_or_config_error(call: Any) -> Plan | None:
    """Run ``call()``; a KVCacheConfigError is an accepted outcome (recorded), anything else fails."""
    try:
        return call()  # type: ignore[no-any-return]
    except KVCacheConfigError as exc:
        event(f"rejected: {type(exc).__name__}")
        return None


def plan_case(case_dict: dict[str, Any]) -> Plan:
    case = parse_case(case_dict)
    return plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
        pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
    )


@st.composite
def what_if(draw: st.DrawFn, page: int) -> dict[str, Any]:
    """A what-if pool of a few to a hundred pages (sometimes a partial one), or up to 65,536 tokens.

    Meta tensors cost nothing whatever their shape; the SWA pools need enough pages to clear
    their window floor (DeepSeek-V4 at ratio 0.1: more than 15 pages of 256).
    """
    pages = draw(st.integers(1, 8) | st.integers(9, 128))
    tokens = page * pages + draw(st.sampled_from((0, 0, 0, 1, page // 2)))
    return {
        "pool_max_tokens": draw(st.just(tokens) | st.integers(1, 2**16)),
        "pool_max_running_requests": draw(st.integers(1, 16)),
    }


# ---- (a) plausible contexts ----------------------------------------------------------------------


@given(config=hf_configs(), fields=case_fields(), available=budgets(), data=st.data())
def test_plausible_contexts_plan_or_raise_config_error(
    config: dict[str, Any], fields: dict[str, Any], available: int, data: st.DataObject
) -> None:
    fields = fit_page(data.draw, config, fields)
    case = {**fields, "hf_config": config, "available_bytes": available, **data.draw(what_if(fields["page_size"]))}
    if data.draw(st.integers(0, 3)) == 0:
        case["max_tokens"] = data.draw(st.integers(1, 10**7))
    planned = plan_or_config_error(lambda: plan_case(case))
    if planned is not None:
        check_plan(planned)


@given(config=presets(), fields=case_fields(), available=budgets(), data=st.data())
def test_presets_under_random_settings_plan_or_raise_config_error(
    config: dict[str, Any], fields: dict[str, Any], available: int, data: st.DataObject
) -> None:
    case = {**fields, "hf_config": config, "available_bytes": available, **data.draw(what_if(fields["page_size"]))}
    planned = plan_or_config_error(lambda: plan_case(case))
    if planned is not None:
        check_plan(planned)


# ---- (b) raw config dicts: missing, wrong-typed and absurd fields ----------------------------------


@given(config=mutated(hf_configs() | presets()), available=budgets())
def test_broken_configs_parse_and_plan_or_raise_config_error(config: Any, available: int) -> None:
    def run() -> Plan:
        geometry = parse_hf_config(config)
        kv = resolve_kv_cache_dtype("auto", geometry.model_dtype, checkpoint_kv_fp8=geometry.checkpoint_kv_fp8)
        settings = KVCacheSettings(geometry=geometry, kv_cache_dtype=kv)
        return plan(settings, available, pool_max_tokens=64)

    planned = plan_or_config_error(run)
    if planned is not None:
        check_plan(planned)


# ---- (c) case dicts with garbage fields -------------------------------------------------------------

_CASE_KEYS = sorted(set(CASE_DEFAULTS) - {"hf_config", "preset", "name", "description"})


@given(
    config=hf_configs() | presets(),
    fields=case_fields(),
    bad=st.dictionaries(st.sampled_from(_CASE_KEYS), garbage, min_size=1, max_size=3),
    available=budgets(),
)
def test_case_dicts_with_garbage_fields_raise_config_error(
    config: dict[str, Any], fields: dict[str, Any], bad: dict[str, Any], available: int
) -> None:
    case = {**fields, "hf_config": config, "available_bytes": available, "pool_max_tokens": 512, **bad}
    planned = plan_or_config_error(lambda: plan_case(case))
    if planned is not None and planned.pool_sizes.max_total_num_tokens <= 2**16:
        check_plan(planned)


# ---- (d) context dataclasses and plan() arguments built directly ------------------------------------

def _mostly(valid: st.SearchStrategy[Any], odds: int = 10) -> st.SearchStrategy[Any]:
    """``valid``, except one draw in ``odds`` is garbage."""
    return st.integers(1, odds).flatmap(lambda roll: valid if roll > 1 else garbage)


_count = _mostly(st.integers(-1, 64), odds=20)


@st.composite
def direct_settings(draw: st.DrawFn) -> Any:
    """``KVCacheSettings`` field by field, each sub-value valid or garbage."""
    geometry = parse_hf_config(draw(hf_configs()))
    if draw(st.integers(0, 9)) == 0:  # a hand-built geometry with one garbage field
        field = draw(st.sampled_from([f.name for f in dataclasses.fields(geometry)]))
        value: Any = getattr(geometry, field)
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and draw(st.booleans()):  # MLA, DSA, ...
            inner = draw(st.sampled_from([f.name for f in dataclasses.fields(value)]))
            bad: Any = dataclasses.replace(value, **{inner: draw(garbage)})
        else:
            bad = draw(garbage)
        geometry = dataclasses.replace(geometry, **{field: bad})

    def pick(valid: st.SearchStrategy[Any]) -> Any:
        return draw(valid if draw(st.integers(0, 15)) else garbage)

    parallel = pick(st.builds(ParallelLayout, tp_size=_mostly(st.sampled_from((1, 2, 8, 64)), odds=20),
                              pp_size=st.integers(1, 3)))  # fmt: skip
    scheduling = pick(
        st.builds(
            SchedulingConfig,
            max_running_requests=st.none() | _count,
            max_total_tokens=st.none() | _count,
            chunked_prefill_size=st.none() | _count,
            context_length=st.none() | _count,
            mamba_full_memory_ratio=_mostly(st.floats(0.0, 4.0), odds=20),
            swa_full_tokens_ratio=_mostly(st.none() | st.floats(0.0, 1.2), odds=20),
            max_mamba_cache_size=st.none() | _count,
        )
    )
    speculative = pick(
        st.builds(
            SpeculativeConfig,
            algorithm=st.sampled_from(SpecAlgorithm),
            eagle_draft_num_layers=st.none() | _count,
            num_draft_tokens=st.none() | _count,
            num_steps=st.none() | _count,
            eagle_topk=st.none() | _count,
        )
    )
    knobs = pick(st.builds(EngineKnobs, swa_eviction_interval=_count))
    return KVCacheSettings(
        geometry=geometry if draw(st.integers(0, 7)) else draw(garbage),
        kv_cache_dtype=pick(st.sampled_from(("auto", "fp8_e4m3", "bf16")).map(
            lambda n: resolve_kv_cache_dtype(n, geometry.model_dtype))),
        page_size=pick(st.sampled_from((1, 16, 64, 256))),
        parallel=parallel,
        speculative=speculative,
        device=pick(st.sampled_from(DeviceKind)),
        platform=pick(st.builds(Platform)),
        backends=pick(st.builds(AttentionBackends)),
        scheduling=scheduling,
        knobs=knobs,
        is_draft_worker=pick(st.booleans()),
    )


@given(
    settings_or_error=st.data(),
    available=_mostly(budgets()),
    max_tokens=_mostly(st.none() | st.integers(1, 10**7)),
    pool_max_tokens=_mostly(st.sampled_from((64, 256, 1024, 4096))),
    pool_requests=_mostly(st.integers(1, 16)),
)
def test_directly_built_contexts_and_plan_arguments_raise_config_error(
    settings_or_error: st.DataObject, available: Any, max_tokens: Any, pool_max_tokens: Any, pool_requests: Any
) -> None:
    def run() -> Plan:
        settings = settings_or_error.draw(direct_settings())
        return plan(
            settings,
            available,
            max_tokens=max_tokens,
            pool_max_tokens=pool_max_tokens,
            pool_max_running_requests=pool_requests,
        )

    planned = plan_or_config_error(run)
    if planned is not None and planned.pool_sizes.max_total_num_tokens <= 2**16:
        check_plan(planned)


# ---- (e) files: case files and configs as bytes on disk -----------------------------------------------


@st.composite
def case_texts(draw: st.DrawFn) -> bytes:
    """The bytes of a case file: JSON (a case or garbage), truncated JSON, random bytes, Latin-1."""
    kind = draw(st.sampled_from(("json", "json", "truncated", "bytes", "latin1")))
    config = draw(mutated(hf_configs()) | hf_configs())
    case = {"hf_config": config, "available_bytes": draw(budgets() | garbage), "pool_max_tokens": 256}
    text = json.dumps(case if draw(st.integers(0, 5)) else draw(garbage))
    if kind == "truncated":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))].encode()
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "latin1":
        return text.replace('"', '"\xe9', 1).encode("latin-1")
    return text.encode()


@given(payload=case_texts())
def test_case_files_on_disk_load_and_plan_or_raise_config_error(payload: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "case.json"
        path.write_bytes(payload)

        def run() -> Plan:
            case = load_case(path)
            return plan(case.settings, case.available_bytes, pool_max_tokens=case.pool_max_tokens)

        planned = plan_or_config_error(run)
    if planned is not None:
        check_plan(planned)


def test_profile_selects_example_count() -> None:
    """The fuzz tests above follow the shared profile (conftest.py): ci 40, thorough 2,500 each."""
    from hypothesis import settings

    name = os.environ.get("KVSTRATEGIES_HYPOTHESIS_PROFILE", "ci")
    expected = {"ci": 40, "thorough": 2500}[name]
    assert settings().max_examples == expected

