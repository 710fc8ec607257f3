"""The release report: which rules and model-table rows differ between two releases.

What ``kvstrategies releases A B`` prints and ``tools/release_changes.py`` groups moved cases by.
The rules themselves live beside the code they change (``ReleaseRule`` in
:mod:`kvstrategies.core.releases`); this module imports those modules to see every one.
"""

from __future__ import annotations

import importlib

from ..core.releases import EngineRelease, ReleaseRule, all_rules, parse_release, rules_differing
from ..models.architectures import MODEL_TYPES

#: the modules that define release rules (importing them registers their rules); a test checks
#: that every module defining a ReleaseRule or ByRelease is listed here
RULE_MODULES: tuple[str, ...] = (
    "kvstrategies.case",
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
    "kvstrategies.pools.basic",
    "kvstrategies.pools.dsa",
    "kvstrategies.pools.dsv4",
    "kvstrategies.pools.fp4",
    "kvstrategies.strategies.request_math",
    "kvstrategies.strategies.default",
    "kvstrategies.strategies.dsv4",
    "kvstrategies.strategies.hybrid_linear",
    "kvstrategies.strategies.hybrid_swa",
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
    low, high = min(a, b), max(a, b)
    out = []
    for row in MODEL_TYPES:
        if row.first_release is not None and low < parse_release(row.first_release) <= high:
            out.append(f"model_type {row.name!r} loads from {row.first_release} on")
    return out
