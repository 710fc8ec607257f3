#!/usr/bin/env python3
"""``plan --engine vllm`` against the public vLLM start-up logs: every log, its errors, and the statistics.

    python tools/vllm_log_report.py            # a row per log, then median / worst errors
    python tools/vllm_log_report.py --json     # the same as one JSON document

Reads ``tests/fixtures/vllm_logs/*.json`` (each file: source, vLLM release, GPU, TP / PP, flags and the
logged lines) through ``tools/fit_vllm_overhead.py``'s loader, and ``tests/fixtures/vllm_logs/held_out/*.json``
(logs found after the fit, which the fit never reads: their statistics are reported on their own), and
plans each launch under its release's rule (before vLLM 0.21 no CUDA-graph deduction). Per log:

* **end to end**: the planned "GPU KV cache size" / the logged one - 1 (the logged "Available KV
  cache memory" where no tokens are logged): the project's weight estimate, the fitted profile;
* **leave one out**: end to end with every constant refitted to the other logs (the log's own
  figures out of every median it would otherwise enter);
* **with the logged weights**: the same with "Model loading took" as ``--weight-bytes``;
* **given the KV memory**: ``--kv-cache-memory-bytes`` at the logged "Available KV cache memory"
  (two decimals, so the plans at -+0.005 GiB bracket vLLM's figure): ``exact`` when the logged tokens
  lie in that bracket, and the error at the logged figure itself.

``tests/vllm/test_vllm_published_logs.py`` checks the same numbers; ``docs/vllm-bridge.md`` reports them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tools"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import fit_vllm_overhead as fit  # noqa: E402

from kvstrategies.core.releases import VLLM, EngineRelease, supported_releases  # noqa: E402
from kvstrategies.planner.model_lookup import resolve_for_planning  # noqa: E402
from kvstrategies.presets import load_preset_config  # noqa: E402
from kvstrategies.vllm.planner import overhead  # noqa: E402
from kvstrategies.vllm.planner.deployment import VLLMDeploymentPlan, plan_vllm  # noqa: E402
from kvstrategies.vllm.planner.request import VLLMPlanRequest  # noqa: E402

GIB = 2**30
#: logs found after the constants were fitted (``tests/fixtures/vllm_logs/held_out/``): the fits glob the parent
#: folder only, so these are planned and never fitted to; their statistics are reported on their own
HELD_OUT = fit.LOGS / "held_out"


def load_held_out() -> list[fit.Log]:
    docs = [(p.stem, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(HELD_OUT.glob("*.json"))]
    return [fit.Log(key, doc) for key, doc in docs if "excluded" not in doc]


#: the logs the statistics run over: every loaded log with a model (``in_stats: false`` ones are shown beside)
LOGS = {log.key: log for log in [*fit.load_logs(), *load_held_out()] if log.doc.get("model") is not None}


def is_held_out(log: fit.Log) -> bool:
    return bool(log.doc.get("held_out", False))


def planning_release(version: str | None) -> EngineRelease:
    """The modelled release a log is planned under: its own line when modelled, else the newest modelled
    line not after it (every public log predates 0.34.0, whose 64-token default block differs: 0.33.0)."""
    modelled = supported_releases(VLLM)
    if version is None:
        return modelled[0]
    logged = tuple(int(part) for part in version.split(".")[:3])
    older = [r for r in modelled if r.version <= logged]
    return older[-1] if older else modelled[0]


def request(log: fit.Log, *, kv_bytes: int | None = None, logged_weights: bool = False) -> VLLMPlanRequest:
    """The launch the log shows, as a :class:`VLLMPlanRequest` (its ``settings`` as vLLM resolved them)."""
    doc, s = log.doc, log.settings
    model = doc["model"]
    if isinstance(model, dict):
        source, config, folder = {"hf_config": model["hf_config"]}, model["hf_config"], None
    else:
        found = resolve_for_planning(model)
        source, folder = found.request_source(), found.folder
        config = found.config if found.config is not None else load_preset_config(str(found.preset))
    weights = round(log.logged["model_loading_gib"] * GIB) if logged_weights else None
    return VLLMPlanRequest(
        model=str(model), source=source, config=config, model_folder=None if folder is None else str(folder),
        gpu=doc["gpu"], tensor_parallel_size=doc["tp"], pipeline_parallel_size=doc.get("pp", 1),
        kv_cache_dtype=s["kv_cache_dtype"], block_size=s["block_size"],
        gpu_memory_utilization=s["gpu_memory_utilization"], kv_cache_memory_bytes=kv_bytes,
        max_model_len=s["max_model_len"], max_num_seqs=s["max_num_seqs"],
        max_num_batched_tokens=s["max_num_batched_tokens"], enforce_eager=s["enforce_eager"],
        estimate_cudagraphs=bool(doc["cuda_graph_deducted"]), weight_quantization=doc.get("weight_quantization"),
        weight_bytes=weights, release=planning_release(doc.get("vllm_version")),
    )  # fmt: skip


def planned(log: fit.Log, **kw: Any) -> VLLMDeploymentPlan:
    return plan_vllm(request(log, **kw))


def _error(plan: VLLMDeploymentPlan, log: fit.Log) -> float:
    """Predicted / logged - 1: "GPU KV cache size" where logged, else "Available KV cache memory"."""
    if "kv_cache_tokens" in log.logged:
        return float(plan.answer.capacity.tokens / log.logged["kv_cache_tokens"] - 1)
    return float(plan.budget.available_bytes / (log.logged["available_kv_gib"] * GIB) - 1)


def end_to_end_error(log: fit.Log) -> float:
    return _error(planned(log), log)


def leave_one_out_error(log: fit.Log) -> float:
    """The end-to-end error with every constant refitted without this log (its medians over the others):
    how the model predicts a log it was not fitted to."""
    fitted = fit.fit([other for other in fit.load_logs() if other.key != log.key])
    shipped = {name: getattr(overhead, name) for name in fitted}
    try:
        for name, (value, _) in fitted.items():
            setattr(overhead, name, value)
        return end_to_end_error(log)
    finally:
        for name, value in shipped.items():
            setattr(overhead, name, value)


def given_kv_bracket(log: fit.Log) -> tuple[int, int]:
    """The planned tokens at the logged KV memory -+0.005 GiB (vLLM prints two decimals)."""
    kv = log.logged["available_kv_gib"]
    low = planned(log, kv_bytes=int((kv - 0.005) * GIB)).answer.capacity.tokens
    high = planned(log, kv_bytes=int((kv + 0.005) * GIB)).answer.capacity.tokens
    return low, high


@dataclass(frozen=True)
class LogRow:
    """One log's figures (errors as fractions; ``None`` where the log lacks what the column needs)."""

    key: str
    in_stats: bool
    held_out: bool
    logged: str
    planned: str
    end_to_end: float
    leave_one_out: float
    with_logged_weights: float | None
    given_kv_error: float | None
    given_kv_exact: bool | None


def row(log: fit.Log) -> LogRow:
    plan = planned(log)
    tokens = "kv_cache_tokens" in log.logged
    logged = f"{log.logged['kv_cache_tokens']:,} tokens" if tokens else f"KV {log.logged['available_kv_gib']} GiB"
    shown = f"{plan.answer.capacity.tokens:,}" if tokens else f"{plan.budget.available_bytes / GIB:.2f} GiB"
    weights = _error(planned(log, logged_weights=True), log) if "model_loading_gib" in log.logged else None
    given_error = given_exact = None
    if tokens:
        at = planned(log, kv_bytes=round(log.logged["available_kv_gib"] * GIB)).answer.capacity.tokens
        given_error = at / log.logged["kv_cache_tokens"] - 1
        low, high = given_kv_bracket(log)
        given_exact = low <= log.logged["kv_cache_tokens"] <= high
    return LogRow(log.key, bool(log.doc.get("in_stats", True)), is_held_out(log), logged, shown, _error(plan, log),
                  leave_one_out_error(log), weights, given_error, given_exact)  # fmt: skip


def _stats(values: list[float]) -> dict[str, float]:
    absolute = [abs(v) for v in values]
    return {"n": len(absolute), "median": statistics.median(absolute), "worst": max(absolute)} if absolute else {}


def statistics_of(rows: list[LogRow]) -> dict[str, dict[str, float]]:
    """Median and worst absolute error over the in-statistics logs: tokens (end to end, with the logged
    weights, given the logged KV memory) and the KV-memory-only logs; the held-out logs on their own."""
    held = [r for r in rows if r.held_out and r.in_stats and r.given_kv_error is not None]
    rows = [r for r in rows if not r.held_out]
    tok = [r for r in rows if r.in_stats and r.given_kv_error is not None]
    mem = [r for r in rows if r.in_stats and r.given_kv_error is None]
    return {
        "gpu_kv_cache_size_end_to_end": _stats([r.end_to_end for r in tok]),
        "gpu_kv_cache_size_with_logged_weights": _stats([r.with_logged_weights for r in tok
                                                         if r.with_logged_weights is not None]),  # fmt: skip
        "gpu_kv_cache_size_given_logged_kv_memory": _stats([r.given_kv_error for r in tok
                                                            if r.given_kv_error is not None]),  # fmt: skip
        "gpu_kv_cache_size_leave_one_out": _stats([r.leave_one_out for r in tok]),
        "gpu_kv_cache_size_end_to_end_with_the_logs_beside": _stats([r.end_to_end for r in rows
                                                                     if r.given_kv_error is not None]),  # fmt: skip
        "available_kv_memory_end_to_end": _stats([r.end_to_end for r in mem]),
        "held_out_gpu_kv_cache_size_end_to_end": _stats([r.end_to_end for r in held]),
        "held_out_gpu_kv_cache_size_with_logged_weights": _stats([r.with_logged_weights for r in held
                                                                  if r.with_logged_weights is not None]),  # fmt: skip
    }  # fmt: skip


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [row(log) for log in LOGS.values()]
    stats = statistics_of(rows)
    if args.json:
        print(json.dumps({"logs": [asdict(r) for r in rows], "statistics": stats}, indent=2))
        return 0
    print(f"{'log':<38} {'logged':>16} {'planned':>11} {'end to end':>10} {'left out':>9} {'logged W':>9} "
          f"{'given KV':>9}  bracket")  # fmt: skip
    for r in rows:
        exact = "" if r.given_kv_exact is None else ("exact" if r.given_kv_exact else "outside")
        name = (r.key if r.in_stats else f"({r.key})") + (" [held out]" if r.held_out else "")
        print(f"{name:<38} {r.logged:>16} {r.planned:>11} {_pct(r.end_to_end):>10} {_pct(r.leave_one_out):>9} "
              f"{_pct(r.with_logged_weights):>9} {_pct(r.given_kv_error):>9}  {exact}")  # fmt: skip
    print("(in parentheses: beside the statistics, the log file says why; [held out]: never fitted to, own statistics)")
    for name, s in stats.items():
        if s:
            print(f"{name}: median {s['median']:.2%}, worst {s['worst']:.2%} over {s['n']} logs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
