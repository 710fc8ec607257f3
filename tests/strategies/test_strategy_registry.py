"""The built-ins load only when a context could select them, and select as asking every one would.

:func:`kvstrategies.strategies.registry.select_configurator_class` skips a built-in whose family
predicate does not hold without importing it; that is the same answer only if each
``is_applicable`` implies its family predicate. Both are checked on every catalog case
(``cases/``), every preset, the preset variants that reach the NPU, DSV4 and request-capped
SWA strategies, each supported release, and vLLM contexts (which only the vLLM strategies serve).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvstrategies.case import load_case, parse_case
from kvstrategies.context import KVCacheSettings
from kvstrategies.core.releases import supported_releases
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.presets import preset_names
from kvstrategies.strategies import registry
from kvstrategies.strategies.registry import registered, select_configurator_class

CASES = sorted((Path(__file__).parents[2] / "cases").glob("*.json"))


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
            try:
                out.append(parse_case(case).settings)
            except UnsupportedConfigurationError:  # the release cannot load the model (0.5.11: DeepSeek-V4)
                continue
    for preset in ("llama-3.1-8b", "gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2", "deepseek-v4-flash"):
        out.append(parse_case({"preset": preset, "available_bytes": 2**34}, engine="vllm").settings)  # vLLM's own
    # a layout the vLLM strategies refuse as not modelled (MiniMax sparse attention)
    out.append(load_case(CASES[0].parent / "minimax-m3-sparse-synthetic-tp4-bf16-p64.json", engine="vllm").settings)
    return out


CONTEXTS = _contexts()


def test_the_catalog_reaches_every_builtin() -> None:
    chosen = {select_configurator_class(ctx) for ctx in CONTEXTS}
    assert chosen == set(registered())


#: each built-in's family predicate, by class name, as the registry was first written
FAMILIES = {entry.name: entry.family for entry in registry.BUILTINS}  # whatever another test module loaded


@pytest.mark.parametrize("index", range(len(CONTEXTS)))
def test_each_builtin_implies_its_family_and_the_choice_is_the_eager_one(index: int) -> None:
    ctx = CONTEXTS[index]
    serves = [s for s in registered() if s.engine == ctx.release.engine]  # registry.serves: each engine its own
    for strategy in serves:
        family = FAMILIES[strategy.__name__]
        if strategy.is_applicable(ctx) and family is not None:
            assert family(ctx), f"{strategy.__name__} applies where its family predicate does not hold"
    eager = next(strategy for strategy in serves if strategy.is_applicable(ctx))
    assert select_configurator_class(ctx) is eager


def test_default_is_asked_last() -> None:
    assert registered()[-1].__name__ == "DefaultPoolConfigurator"
