#!/usr/bin/env python3
"""Fit the vLLM profile-overhead constants (``kvstrategies/vllm/planner/overhead.py``) to the public logs.

    python tools/fit_vllm_overhead.py            # print each constant, the logs it comes from, the samples
    python tools/fit_vllm_overhead.py --check    # exit 1 when the shipped constants are not these medians

Reads every ``tests/fixtures/vllm_logs/*.json`` start-up log (``gpu_totals.json`` aside). Each
constant is a median over several logs; a log enters a fit only when it prints the figures that fit
needs (module doc of ``overhead.py``). ``tests/vllm/test_vllm_budget.py`` runs ``--check``'s comparison.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvstrategies.vllm.planner import overhead  # noqa: E402
from kvstrategies.vllm.planner.gpu_memory import cuda_total  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
GIB = 2**30


@dataclass(frozen=True)
class Log:
    """One fixture: its file stem and the JSON document."""

    key: str
    doc: dict[str, Any]

    @property
    def logged(self) -> dict[str, Any]:
        return dict(self.doc["logged"])

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.doc["settings"])

    @property
    def world(self) -> int:
        return int(self.doc["tp"]) * int(self.doc.get("pp", 1))

    def config(self) -> dict[str, Any] | None:
        model = self.doc.get("model")
        if model is None:
            return None
        if isinstance(model, dict):
            return dict(model["hf_config"])
        from kvstrategies.planner.model_lookup import resolve_for_planning
        from kvstrategies.presets import load_preset_config

        source = resolve_for_planning(str(model))
        if source.preset is not None:
            return dict(load_preset_config(source.preset))
        assert source.config is not None
        return dict(source.config)

    def total_bytes(self) -> int:
        gib = self.logged.get("total_gib")
        return round(gib * GIB) if gib is not None else cuda_total(str(self.doc["gpu"])).total_bytes

    def requested_bytes(self) -> int:
        """``ceil(total x utilization)`` (``vllm/v1/worker/utils.py request_memory``)."""
        return math.ceil(self.total_bytes() * float(self.settings["gpu_memory_utilization"]))


def load_logs() -> list[Log]:
    """Every start-up log but those marked ``excluded`` (their own figures do not add up; the file says why)."""
    docs = [(p.stem, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(LOGS.glob("*.json"))]
    return [Log(key, doc) for key, doc in docs if key != "gpu_totals" and "excluded" not in doc]


def shape(log: Log) -> overhead.ProfileShape:
    config = log.config()
    assert config is not None
    return overhead.ProfileShape.from_config(config, activation_bytes=2)


def transient(log: Log, sampler_bytes: float) -> float:
    """The modelled transient peak of ``log`` (bytes) with a given sampler constant."""
    s, settings = shape(log), log.settings
    tokens, seqs = int(settings["max_num_batched_tokens"]), int(settings["max_num_seqs"])
    hidden = tokens * s.hidden_size * s.activation_bytes
    forward = tokens * 3 * (s.mlp_width // int(log.doc["tp"])) * s.activation_bytes
    return hidden + max(sampler_bytes * min(seqs, tokens) * s.vocab_size, forward)


def sampler_samples(logs: list[Log]) -> dict[str, float]:
    out = {}
    for log in logs:
        peak = log.logged.get("peak_activation_gib")
        if peak is None or log.doc["cuda_graph_deducted"] or log.config() is None:
            continue
        s, settings = shape(log), log.settings
        tokens, seqs = int(settings["max_num_batched_tokens"]), int(settings["max_num_seqs"])
        hidden = tokens * s.hidden_size * s.activation_bytes
        out[log.key] = (peak * GIB - hidden) / (min(seqs, tokens) * s.vocab_size)
    return out


def resident_samples(logs: list[Log], sampler_bytes: float, *, with_graphs: bool) -> dict[str, float]:
    out = {}
    for log in logs:
        logged, settings = log.logged, log.settings
        if log.world != 1 or log.config() is None or "model_loading_gib" not in logged:
            continue
        graphs = bool(log.doc["cuda_graph_deducted"]) and not settings["enforce_eager"]
        if graphs != with_graphs:
            continue
        rest = log.requested_bytes() - logged["model_loading_gib"] * GIB - logged["available_kv_gib"] * GIB
        out[log.key] = rest - transient(log, sampler_bytes)
    return out


def _persistent(log: Log) -> float | None:
    logged = log.logged
    if "non_torch_gib" in logged:
        return float(logged["non_torch_gib"])
    if "consumed_gib" in logged and "model_loading_gib" in logged:
        return float(logged["consumed_gib"] - logged["model_loading_gib"])
    return None


def multi_gpu_samples(logs: list[Log]) -> dict[str, float]:
    one = {rule: [p for log in logs if log.world == 1 and log.doc["cuda_graph_deducted"] == rule
                  and (p := _persistent(log)) is not None] for rule in (False, True)}  # fmt: skip
    out = {}
    for log in logs:
        persistent = _persistent(log)
        if log.world == 1 or persistent is None or not one[bool(log.doc["cuda_graph_deducted"])]:
            continue
        out[log.key] = (persistent - statistics.median(one[bool(log.doc["cuda_graph_deducted"])])) * GIB
    return out


def held_samples(logs: list[Log]) -> dict[str, float]:
    return {log.key: (log.logged["total_gib"] - log.logged["free_at_start_gib"]) * GIB for log in logs
            if log.world == 1 and "free_at_start_gib" in log.logged and "total_gib" in log.logged}  # fmt: skip


def fit(logs: list[Log]) -> dict[str, tuple[float, dict[str, float]]]:
    """Each constant's fitted value (the median) and the samples it is the median of; a constant
    none of ``logs`` can fit is left out (only a subset of the fixtures can lack one)."""
    samples = sampler_samples(logs)
    sampler = round(statistics.median(samples.values()), 2) if samples else overhead.SAMPLER_BYTES_PER_LOGIT
    out: dict[str, tuple[float, dict[str, float]]] = {"SAMPLER_BYTES_PER_LOGIT": (sampler, samples)} if samples else {}
    for name, graphs in (("RESIDENT_NO_GRAPHS_BYTES", False), ("RESIDENT_WITH_GRAPHS_BYTES", True)):
        res = resident_samples(logs, sampler, with_graphs=graphs)
        if res:
            out[name] = (round(statistics.median(res.values())), res)
    for name, got in (("MULTI_GPU_EXTRA_BYTES", multi_gpu_samples(logs)), ("STARTUP_HELD_BYTES", held_samples(logs))):
        if got:
            out[name] = (round(statistics.median(got.values())), got)
    return out


def spread(samples: dict[str, float], median: float) -> float:
    """The largest distance of a sample from the median (the constant's spread over its logs)."""
    return max(abs(v - median) for v in samples.values())


def spreads(fitted: dict[str, tuple[float, dict[str, float]]]) -> dict[str, float]:
    """Each constant's spread (bytes; bytes per logit for the sampler)."""
    return {name: spread(samples, value) for name, (value, samples) in fitted.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped constants")
    args = parser.parse_args(argv)
    fitted = fit(load_logs())
    stale = []
    for name, (value, samples) in fitted.items():
        shipped = getattr(overhead, name)
        unit = "B per logit" if name.startswith("SAMPLER") else "B"
        shown = ", ".join(f"{k} {v / (1 if unit != 'B' else GIB):.4g}" for k, v in samples.items())
        print(f"{name} = {value:,} {unit} (shipped {shipped:,}) from {len(samples)} logs: {shown}"
              + (" [GiB]" if unit == "B" else ""))  # fmt: skip
        if shipped != value:
            stale.append(name)
    if stale and args.check:
        print(f"stale: {', '.join(stale)} (update kvstrategies/vllm/planner/overhead.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
