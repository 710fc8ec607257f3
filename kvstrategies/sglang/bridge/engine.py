"""Run many cases through SGLang: one import for every case without its own environment.

SGLang reads several ``SGLANG_*`` knobs at import, so cases with an ``env`` run in a child
process per distinct environment (``python -m kvstrategies.sglang.bridge.engine``, which
reads case paths on argv and writes one JSON result per case on stdout). Everything else runs
in this process after one :func:`~kvstrategies.sglang.bridge.runtime.import_sglang`.

A result is ``{"document": {...}}`` or ``{"error": "..."}`` (SGLang refused the case), plus
``"seconds"`` spent on the case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...case_validation import child_environment, validate_case_files
from ...core.jsonio import read_json_object
from ...errors import KVCacheConfigError
from .bridge import env_of, environment_matches, sglang_document
from .runtime import import_sglang

Result = dict[str, Any]


def load_case_dict(path: Path) -> dict[str, Any]:
    """The case file's JSON object (unreadable or not an object: :class:`KVCacheConfigError`)."""
    return read_json_object(path, "a case file")


def run_one(path: Path) -> Result:
    """SGLang's document for one case file, in this process."""
    started = time.perf_counter()
    try:
        document = sglang_document(load_case_dict(path), base_dir=path.parent)
        result: Result = {"document": document}
    except KVCacheConfigError as exc:
        result = {"error": str(exc)}
    result["seconds"] = time.perf_counter() - started
    return result


def _child(paths: list[Path], env: Mapping[str, str]) -> dict[str, Result]:
    environment = child_environment(env)  # an allow-list of this process's env + the checked case knobs
    command = [sys.executable, "-m", "kvstrategies.sglang.bridge.engine", *map(str, paths)]
    run = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        tail = run.stderr.strip().splitlines()[-5:]
        message = f"the SGLang child process for env {dict(env)} failed: {' | '.join(tail)}"
        return {p.stem: {"error": message, "seconds": 0.0} for p in paths}
    results: dict[str, Result] = json.loads(run.stdout.strip().splitlines()[-1])
    return results


def run_cases(paths: Iterable[Path]) -> tuple[dict[str, Result], dict[str, float]]:
    """SGLang's results for case files (by stem), and timings: ``import`` and ``total`` seconds."""
    paths = list(paths)
    validate_case_files(paths)  # every case checked before SGLang is imported or a child starts
    started = time.perf_counter()
    import_sglang()
    timings = {"import": time.perf_counter() - started}
    here: list[Path] = []
    groups: dict[tuple[tuple[str, str], ...], list[Path]] = {}
    for path in paths:
        case = load_case_dict(path)
        if not env_of(case) or environment_matches(case):
            here.append(path)
        else:
            groups.setdefault(tuple(sorted(env_of(case).items())), []).append(path)
    results: dict[str, Result] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in here:
            results[path.stem] = run_one(path)
    for env, members in groups.items():
        results.update(_child(members, dict(env)))
    timings["total"] = time.perf_counter() - started
    return results, timings


def main(argv: list[str] | None = None) -> int:
    """Child process: the cases on argv, in this process's environment; one JSON line on stdout."""
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    import_sglang()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {path.stem: run_one(path) for path in paths}
    sys.stdout.write(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
