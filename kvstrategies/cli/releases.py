"""``kvstrategies releases [A B]``: the releases modelled, or which rules and model-table rows
differ between two releases.

The release report (:func:`rule_lines`) is also what ``tools/release_changes.py`` groups moved
cases by. The rules themselves live beside the code they change (``ReleaseRule`` in
:mod:`kvstrategies.core.releases`); this module imports those modules to see every one.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from ..core.releases import (
    ENGINE_NAMES,
    EngineRelease,
    ReleaseRule,
    all_rules,
    parse_release,
    rules_differing,
    supported_releases,
)
from ..errors import KVCacheConfigError


def add_parser(sub: Any, command: str) -> None:
    """The ``releases`` subparser, added to ``sub`` as ``command``."""
    rels = sub.add_parser(
        command, help="the engine releases modelled; with two releases, every rule that differs between them"
    )
    rels.add_argument("pair", nargs="*", metavar="RELEASE",
                      help="two releases of one engine: 0.5.18 0.5.23 (SGLang), 0.33.0 0.34.0 (vLLM)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """``releases [A B]``: the supported releases, or the rules that differ between two of them."""
    if not args.pair:
        for engine, name in ENGINE_NAMES.items():
            print(f"{name}: {', '.join(r.text for r in supported_releases(engine))}")
        return 0
    if len(args.pair) != 2:
        raise KVCacheConfigError("releases: give two releases of one engine to compare, e.g. 'releases 0.5.18 0.5.23' "
                                 "(SGLang) or 'releases 0.33.0 0.34.0' (vLLM)")  # fmt: skip
    first, second = (_release(text) for text in args.pair)
    if first.engine != second.engine:
        raise KVCacheConfigError(f"releases: {first.label} and {second.label} are releases of different engines; "
                                 "compare two releases of one engine")  # fmt: skip
    print("\n".join(rule_lines(first, second)))
    return 0


def _release(text: str) -> EngineRelease:
    """An SGLang release line, else a vLLM one (their version numbers do not overlap); else the error naming both."""
    try:
        return parse_release(text, field="RELEASE")
    except KVCacheConfigError as sglang_error:
        try:
            return parse_release(text, "vllm", field="RELEASE")
        except KVCacheConfigError:
            vllm = ", ".join(r.text for r in supported_releases("vllm"))
            raise KVCacheConfigError(f"{sglang_error}; vLLM releases: {vllm}") from None


#: the modules that define release rules (importing them registers their rules); a test checks
#: that every module defining a ReleaseRule or ByRelease is listed here
RULE_MODULES: tuple[str, ...] = (
    "kvstrategies.case",
    "kvstrategies.sglang.server_arguments",
    "kvstrategies.context",
    "kvstrategies.core.dtypes",
    "kvstrategies.strategies.layer_setup",
    "kvstrategies.models.architectures",
    "kvstrategies.sglang.launch.defaults.backends",
    "kvstrategies.sglang.launch.defaults.core",
    "kvstrategies.sglang.launch.defaults.deepseek",
    "kvstrategies.sglang.launch.defaults.family_backends",
    "kvstrategies.sglang.launch.defaults.graph_rules",
    "kvstrategies.sglang.launch.defaults.graphs",
    "kvstrategies.sglang.launch.defaults.memory",
    "kvstrategies.sglang.launch.defaults.model_overrides",
    "kvstrategies.sglang.launch.defaults.speculative",
    "kvstrategies.sglang.load_refusals",
    "kvstrategies.pools.basic",
    "kvstrategies.pools.dsa",
    "kvstrategies.pools.dsv4",
    "kvstrategies.pools.fp4",
    "kvstrategies.strategies.request_math",
    "kvstrategies.strategies.resolve",
    "kvstrategies.strategies.base",
    "kvstrategies.strategies.checks",
    "kvstrategies.strategies.default",
    "kvstrategies.strategies.dsv4",
    "kvstrategies.strategies.hybrid_linear",
    "kvstrategies.strategies.hybrid_swa",
    "kvstrategies.vllm.strategies.backends",
    "kvstrategies.vllm.planner.budget",
    "kvstrategies.vllm.strategies.strategies",
    "kvstrategies.vllm.strategies.layers",
    "kvstrategies.vllm.strategies.launch",
    "kvstrategies.vllm.strategies.sizing",
    "kvstrategies.vllm.strategies.grouping",
    "kvstrategies.vllm.strategies.drafts",
    "kvstrategies.vllm.strategies.engine_args",
    "kvstrategies.vllm.strategies.specs",
    "kvstrategies.vllm.planner.load_refusals",
    "kvstrategies.vllm.planner.weights",
)


def load_rule_modules() -> tuple[ReleaseRule, ...]:
    """Import every module that defines release rules; return all rules (:func:`all_rules`)."""
    for name in RULE_MODULES:
        importlib.import_module(name)
    return all_rules()


def rule_lines(a: EngineRelease, b: EngineRelease) -> list[str]:
    """What ``kvstrategies releases A B`` prints: every rule that differs between ``a`` and ``b``."""
    load_rule_modules()
    differing = rules_differing(a, b)
    rows = table_rows_between(a, b)
    out = [f"{len(differing)} rules and {len(rows)} model-table rows differ between {a.label} and {b.label}:"]
    for rule in differing:
        where = b.text if rule.holds(b) else a.text
        out.append(f"  [{rule.topic}] {rule.key} ({rule.span.describe()}; holds in {where})")
        out.append(f"      {rule.summary}")
        out.append(f"      {rule.source}")
    out.extend(f"  [models] {row}" for row in rows)
    return out


def table_rows_between(a: EngineRelease, b: EngineRelease) -> list[str]:
    """Model-table rows (``models.architectures``) whose first release lies in ``(min, max]``."""
    from ..models.architectures import MODEL_TYPES

    low, high = min(a, b), max(a, b)
    out: list[str] = []
    if a.engine != "sglang":
        return out  # the table's first releases are SGLang's
    for row in MODEL_TYPES:
        if row.first_release is not None and low < parse_release(row.first_release) <= high:
            out.append(f"model_type {row.name!r} loads from {row.first_release} on")
    return out
