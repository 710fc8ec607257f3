"""Run many cases through vLLM in this process: one import serves every case.

A result is ``{"document": {...}}``, or ``{"error": "...", "refused_by": "vllm"}`` (vLLM's own
refusal) or ``{"error": "...", "refused_by": "kvstrategies"}`` (the case is not a vLLM deployment
the strategies model: :func:`kvstrategies.vllm.strategies.engine_args.check_vllm_scope`), plus
``"seconds"`` spent on the case.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...core.jsonio import read_json_object
from ...errors import KVCacheConfigError
from .bridge import refusal_is_vllms, run_vllm
from .runtime import import_vllm

Result = dict[str, Any]


def run_one(path: Path) -> Result:
    """vLLM's result for one case file, in this process."""
    started = time.perf_counter()
    try:
        result: Result = {"document": run_vllm(read_json_object(path, "a case file"), path.parent)}
    except KVCacheConfigError as exc:
        result = {"error": str(exc), "refused_by": "vllm" if refusal_is_vllms(exc) else "kvstrategies"}
    result["seconds"] = time.perf_counter() - started
    return result


def run_cases(paths: Iterable[Path]) -> tuple[dict[str, Result], dict[str, float]]:
    """vLLM's results for case files (by stem), and timings: ``import`` and ``total`` seconds."""
    started = time.perf_counter()
    import_vllm()
    timings = {"import": time.perf_counter() - started}
    results: dict[str, Result] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            results[path.stem] = run_one(path)
    timings["total"] = time.perf_counter() - started
    return results, timings
