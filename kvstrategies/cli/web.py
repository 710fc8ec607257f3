"""The web page's entry point (``web/``, built by ``tools/build_web.py``): run one
``kvstrategies`` command line in-process and return what the terminal would show.

The page runs the package in the browser (Pyodide) and calls :func:`run_command` with the same
arguments a user types, so ``plan --json`` in the page is exactly ``kvstrategies plan --json``:
the CLI's own parsing, planning and JSON (:func:`kvstrategies.cli.app.main`), nothing duplicated.
No command imports this module.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence

from .app import main


def run_command(argv: Sequence[str]) -> str:
    """``{"rc": exit code, "stdout": ..., "stderr": ...}`` of ``kvstrategies ARGV``, as JSON text."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(arg) for arg in argv])
        except SystemExit as exc:  # --help, --version
            rc = exc.code if isinstance(exc.code, int) else 0
    return json.dumps({"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})


def catalog() -> str:
    """What the page's choices list, as JSON text: the presets and shipped checkpoints, the GPU
    table, and the SGLang and vLLM releases modelled (newest last)."""
    from ..checkpoints import shipped_checkpoints
    from ..core.releases import SGLANG_RELEASES, VLLM_RELEASES
    from ..planner.gpus import GPUS
    from ..presets import preset_index

    return json.dumps({
        "presets": sorted(preset_index()),
        "checkpoints": sorted(shipped_checkpoints(), key=str.lower),
        "gpus": [{"name": g.name, "capacity_mib": g.capacity_mib} for g in GPUS],
        "sglang_releases": [r.text for r in SGLANG_RELEASES],
        "vllm_releases": [r.text for r in VLLM_RELEASES],
    })  # fmt: skip
