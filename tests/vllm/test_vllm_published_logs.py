"""``plan --engine vllm`` against public vLLM start-up logs (``tests/fixtures/vllm_logs/``, each with its source).

Three checks, each against the log's own lines:

* **exact given the KV memory**: with ``--kv-cache-memory-bytes`` at either end of the logged
  "Available KV cache memory" (two decimals: +-0.005 GiB), the planned "GPU KV cache size" brackets
  the logged one: from the budget on, the plan is vLLM's own arithmetic;
* **the budget model, with the logged weights**: the predicted KV memory is within the spread of the
  fitted constants (:func:`tolerance_bytes`, derived from the logs by ``tools/fit_vllm_overhead.py``);
* **end to end**: the project's weight estimate in place of the logged weights; the tolerance adds
  the weight estimate's own spread over these logs.

Each log is predicted under its release's rule: before vLLM 0.21 the CUDA-graph estimate is not
deducted ("CUDA graph memory profiling is enabled (default since v0.21.0)", the message of
``vllm/v1/worker/gpu_worker.py Worker.determine_available_memory``), which
``VLLMPlanRequest.estimate_cudagraphs=False`` reproduces. Logs marked ``in_stats: false`` are
checked and reported beside the statistics (the file says why); ``excluded`` logs enter nothing.

Logs in ``tests/fixtures/vllm_logs/held_out/`` were found after the constants were fitted: the fit never
reads them (``tools/fit_vllm_overhead.py`` globs the parent folder only), every per-log check above runs on
them, and their statistics are reported on their own (:func:`test_held_out_logs_statistics`), apart from
the statistics of the logs the constants come from.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kvstrategies.vllm.planner import overhead

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


FIT = _tool("fit_vllm_overhead")
REPORT = _tool("vllm_log_report")  # plans each log's launch (tools/vllm_log_report.py request)
LOGS = REPORT.LOGS
FITTED = FIT.fit(FIT.load_logs())
SPREAD = FIT.spreads(FITTED)
planned = REPORT.planned
end_to_end_error = REPORT.end_to_end_error


def with_tokens() -> list[str]:
    return sorted(k for k, log in LOGS.items() if "kv_cache_tokens" in log.logged)


def tolerance_bytes(log: Any) -> float:
    """The spread of the constants this log's prediction uses (bytes): the sampler's over its logs times
    ``R x vocab``, the resident constant of its rule, the multi-GPU constant at more than one GPU."""
    shape = FIT.shape(log)
    s = log.settings
    requests = min(int(s["max_num_seqs"]), int(s["max_num_batched_tokens"]))
    graphs = bool(log.doc["cuda_graph_deducted"]) and not s["enforce_eager"]
    out = SPREAD["SAMPLER_BYTES_PER_LOGIT"] * requests * shape.vocab_size
    out += SPREAD["RESIDENT_WITH_GRAPHS_BYTES" if graphs else "RESIDENT_NO_GRAPHS_BYTES"]
    if log.world > 1:
        out += SPREAD["MULTI_GPU_EXTRA_BYTES"]
    return float(out)


def weight_spread() -> float:
    """The weight estimate's largest miss against the logged "Model loading took" over these logs (bytes)."""
    misses = [abs(planned(log).budget.stages[0].weights - log.logged["model_loading_gib"] * GIB)
              for log in LOGS.values() if "model_loading_gib" in log.logged and log.world == 1]  # fmt: skip
    return max(misses)


WEIGHT_SPREAD = weight_spread()


def test_the_constants_are_the_medians_of_their_logs() -> None:
    for name, (value, samples) in FITTED.items():
        assert getattr(overhead, name) == value, f"{name}: rerun tools/fit_vllm_overhead.py ({len(samples)} logs)"
        assert len(samples) >= 3, f"{name} rests on {len(samples)} logs"


def test_every_log_names_its_source_and_release_rule() -> None:
    for key, log in LOGS.items():
        doc = log.doc
        assert doc["source"] and doc["gpu"] and doc["tp"] >= 1 and doc["settings"], key
        assert doc["vllm_rule"] and isinstance(doc["cuda_graph_deducted"], bool), key


@pytest.mark.parametrize("key", with_tokens())
def test_given_the_logged_kv_memory_the_tokens_are_vllms(key: str) -> None:
    """vLLM's arithmetic from the budget on: the logged tokens lie between the plans at the logged
    KV memory -+0.005 GiB (its two-decimal rounding)."""
    log = LOGS[key]
    low, high = REPORT.given_kv_bracket(log)
    inside = low <= log.logged["kv_cache_tokens"] <= high
    if "exact_known_difference" in log.doc:
        assert not inside, f"{key}: now exact; drop its exact_known_difference"
        return
    assert inside, f"{key}: logged {log.logged['kv_cache_tokens']:,} outside [{low:,}, {high:,}]"


@pytest.mark.parametrize("key", sorted(k for k, log in LOGS.items() if "model_loading_gib" in log.logged))
def test_the_budget_model_with_the_logged_weights(key: str) -> None:
    log = LOGS[key]
    predicted = planned(log, logged_weights=True).budget.available_bytes
    logged = log.logged["available_kv_gib"] * GIB
    assert abs(predicted - logged) <= tolerance_bytes(log), f"{key}: {(predicted - logged) / GIB:+.3f} GiB"


@pytest.mark.parametrize("key", sorted(LOGS))
def test_end_to_end_within_the_spreads(key: str) -> None:
    log = LOGS[key]
    relative = (tolerance_bytes(log) + WEIGHT_SPREAD) / (log.logged["available_kv_gib"] * GIB)
    error = end_to_end_error(log)
    assert abs(error) <= relative, f"{key}: {error:+.2%} (tolerance {relative:.2%})"


def fitted_set(key: str) -> bool:
    """An in-statistics log of the fitted folder (not held out)."""
    return bool(LOGS[key].doc.get("in_stats", True)) and not REPORT.is_held_out(LOGS[key])


def test_statistics_of_the_logged_gpu_kv_cache_size() -> None:
    """Median and worst end-to-end error over the in-statistics logs that print "GPU KV cache size"
    (``docs/vllm-bridge.md`` reports them): a change that moves them fails here."""
    rows = [k for k in with_tokens() if fitted_set(k)]
    errors = [abs(end_to_end_error(LOGS[k])) for k in rows]
    assert len(rows) >= 5
    assert statistics.median(errors) <= 0.0075
    assert max(errors) <= 0.03


def test_the_report_tool_states_the_same_statistics() -> None:
    """``tools/vllm_log_report.py`` (the figures docs/vllm-bridge.md quotes) over the same rows: the
    end-to-end median and worst are the ones computed here, and given the logged KV memory every
    in-statistics log is within 0.5% (the TP8 run's log prints another worker's figure; the rest exact)."""
    rows = [REPORT.row(LOGS[k]) for k in sorted(LOGS)]
    stats = REPORT.statistics_of(rows)
    errors = [abs(end_to_end_error(LOGS[k])) for k in with_tokens() if fitted_set(k)]
    assert stats["gpu_kv_cache_size_end_to_end"] == {"n": len(errors), "median": statistics.median(errors),
                                                     "worst": max(errors)}  # fmt: skip
    assert stats["gpu_kv_cache_size_given_logged_kv_memory"]["worst"] <= 0.005
    exact = [r.key for r in rows if r.in_stats and not r.held_out and r.given_kv_exact]
    known = [r.key for r in rows if r.given_kv_exact is False]
    assert known == [k for k in sorted(LOGS) if "exact_known_difference" in LOGS[k].doc]
    assert len(exact) >= 5


def test_held_out_logs_never_enter_a_fit() -> None:
    held = {k for k, log in LOGS.items() if REPORT.is_held_out(log)}
    assert held, "tests/fixtures/vllm_logs/held_out/ is empty"
    assert not held & {log.key for log in FIT.load_logs()}
    for _name, (_value, samples) in FITTED.items():
        assert not held & set(samples)


def test_held_out_logs_statistics() -> None:
    """The held-out logs (4x RTX PRO 6000, vLLM 0.27.1, Qwen3-235B-A22B FP8, TP4 and PP4), planned by constants
    fitted without them: end to end +5.37% (TP4) and +7.29% (PP4), median 6.33%; TP4 with its logged weights
    +5.12%. docs/vllm-bridge.md reports these and where the gap comes from (the MoE profile-run workspace and
    non-torch memory on four PCIe sm_120 cards). The bounds are the reached figures rounded up to the next
    quarter percent, so a change that moves them shows here; they are reported figures, not targets."""
    rows = [REPORT.row(LOGS[k]) for k in sorted(LOGS) if REPORT.is_held_out(LOGS[k])]
    stats = REPORT.statistics_of(rows)
    held = stats["held_out_gpu_kv_cache_size_end_to_end"]
    assert held["n"] == 2
    assert held["median"] <= 0.065 and held["worst"] <= 0.075
    assert stats["held_out_gpu_kv_cache_size_with_logged_weights"]["worst"] <= 0.0525
    assert all(r.end_to_end > 0 for r in rows)  # both plan more tokens than the log: the budget is over-estimated
