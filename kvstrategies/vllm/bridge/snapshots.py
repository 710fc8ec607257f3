"""vLLM's answers as golden snapshots (``golden/vllm-<version>/<case>.json``), and back.

A snapshot is the bridge's document for one case in the golden format
(:func:`kvstrategies.golden.snapshot.dumps`: sorted keys, floats as ``repr`` strings) under ``case``,
``golden_format`` and ``engine``; or, for a case vLLM cannot run, ``error`` with ``refused_by``:
``"vllm"`` (vLLM's own refusal, its exception named) or ``"kvstrategies"`` (the case is not a
vLLM deployment: a setting with no vLLM counterpart, named). ``_known.json`` records the known
differences between the project's vLLM strategies and these snapshots, per case;
``tests/vllm/test_vllm_golden.py`` recomputes them from the committed snapshots without vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...golden.snapshot import GOLDEN_FORMAT, dumps
from ...sglang.bridge.snapshots import read_snapshot, recorded_snapshot, snapshot_files

__all__ = ["KNOWN_FILE", "read_snapshot", "recorded_snapshot", "result_from_snapshot", "snapshot_files",
           "snapshot_folder", "snapshot_text"]  # fmt: skip

KNOWN_FILE = "_known.json"


def snapshot_folder(root: Path, version: str) -> Path:
    """``golden/vllm-<version>`` under ``root`` (the repository's ``golden/``)."""
    return root / f"vllm-{version}"


def snapshot_document(name: str, version: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of one case from an engine result (``{"document": ...}`` or ``{"error": ...}``)."""
    head: dict[str, Any] = {"case": name, "golden_format": GOLDEN_FORMAT, "engine": f"vllm {version}"}
    document = result.get("document")
    if document is None:
        return {**head, "error": str(result.get("error")), "refused_by": str(result.get("refused_by", "vllm"))}
    return {**head, **{k: v for k, v in document.items() if k != "engine"}}


def snapshot_text(name: str, version: str, result: Mapping[str, Any]) -> str:
    return dumps(snapshot_document(name, version, result))


def result_from_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The engine result a snapshot stands for (what :func:`~.verify.verdict_for` compares)."""
    if "error" in snapshot:
        return {"error": snapshot["error"], "refused_by": snapshot.get("refused_by", "vllm")}
    document = {k: v for k, v in snapshot.items() if k not in ("case", "golden_format")}
    return {"document": document}
