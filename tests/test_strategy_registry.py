"""The built-ins load only when a context could select them, and select as asking every one would.

:func:`kvstrategies.strategies.builtin.select_builtin` skips a strategy whose condition does not
hold without importing it; that is the same answer only if each ``is_applicable`` implies its
condition. Both are checked on every catalog case (``cases/``), every preset, the preset
variants that reach the NPU, DSV4 and request-capped SWA strategies, each supported release, and
vLLM contexts (which only the vLLM strategies serve).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvstrategies.case import load_case, parse_case
from kvstrategies.context import KVCacheSettings
from kvstrategies.presets import preset_names
from kvstrategies.releases import supported_releases
from kvstrategies.strategies import builtin
from kvstrategies.strategies.registry import select_configurator_class

CASES = sorted((Path(__file__).parents[1] / "cases").glob("*.json"))


def _contexts() -> list[KVCacheSettings]:
    out = [load_case(path).settings for path in CASES]
    for preset in preset_names():
        capped = {"max_running_requests": 8, "disable_radix_cache": True, "chunked_prefill_size": 4096}
        for fields in ({}, {"device": "npu"}, {"disable_hybrid_swa_memory": True}, capped):
            try:
                out.append(parse_case({"preset": preset, "available_bytes": 2**34, **fields}).settings)
            except Exception:  # noqa: BLE001 - a variant SGLang refuses is no context to select for
                continue
    for release in supported_releases()[:: max(1, len(supported_releases()) // 4)]:
        for preset in ("deepseek-v4-flash", "gemma-3-27b", "qwen3-next-80b-a3b"):
            case = {"preset": preset, "available_bytes": 2**34, "sglang_version": release.text}
            out.append(parse_case(case).settings)
    for preset in ("llama-3.1-8b", "gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2", "deepseek-v4-flash"):
        out.append(parse_case({"preset": preset, "available_bytes": 2**34}, engine="vllm").settings)  # vLLM's own
    return out


CONTEXTS = _contexts()


def test_the_catalog_reaches_every_builtin() -> None:
    chosen = {builtin.select_builtin(ctx) for ctx in CONTEXTS}
    assert chosen == set(builtin.builtin_order())


@pytest.mark.parametrize("index", range(len(CONTEXTS)))
def test_each_builtin_implies_its_loading_condition_and_the_choice_is_the_eager_one(index: int) -> None:
    ctx = CONTEXTS[index]
    order = builtin.builtin_order()
    serves = [s for s in order if s.engine == ctx.release.engine]  # registry.serves: each engine its own
    for (_, _, may_apply), strategy in zip(builtin._ENTRIES, order, strict=True):
        if strategy in serves and strategy.is_applicable(ctx):
            assert may_apply(ctx), f"{strategy.__name__} applies where its loading condition does not hold"
    eager = next(strategy for strategy in serves if strategy.is_applicable(ctx))
    assert builtin.select_builtin(ctx) is eager
    assert select_configurator_class(ctx) is eager


def test_the_old_tuple_is_still_there() -> None:
    assert builtin.builtin_order() == builtin.BUILTIN_ORDER
    assert builtin.BUILTIN_ORDER[-1].__name__ == "DefaultPoolConfigurator"
