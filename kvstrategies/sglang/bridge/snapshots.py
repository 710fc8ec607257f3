"""SGLang's answers as golden snapshots (``golden/sglang-<version>/<case>.json``), and back.

A snapshot holds what the bridge reads from a live SGLang for one case, in the golden format
(:func:`kvstrategies.golden.snapshot.dumps`: sorted keys, floats as ``repr`` strings):
``case``, ``golden_format``, ``engine``, ``configurator``, ``cell_size``, ``sizes``,
``sizes_from_max_tokens``, ``pool_sizes`` (``adopted_sizes`` for a draft worker), and
``pools``: ``token_to_kv`` / ``req_to_token``, each ``{"pool_class", "buffers": [{"name",
"shape", "dtype"}, ...]}`` with every tensor SGLang's pool holds (kernel pointer tables
included, so a maintainer's diff sees them move too), or ``{"error": ...}`` when SGLang refused
the case. :func:`kvstrategies.golden.diff.diff_documents` diffs two of them
(``tools/diff_golden.py --dirs A B``).

``_known.json`` in the same folder records, per case, the known differences between the project
and these snapshots (``verify``'s verdicts); ``tests/sglang/test_sglang_golden.py`` recomputes them from
the committed snapshots without SGLang and asserts they are exactly these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import KVCacheConfigError
from ...golden.snapshot import GOLDEN_FORMAT, SNAPSHOT_SUFFIX, dumps

KNOWN_FILE = "_known.json"
_SIZE_KEYS = ("sizes", "sizes_from_max_tokens", "pool_sizes", "adopted_sizes")


def snapshot_folder(root: Path, version: str) -> Path:
    """``golden/sglang-<version>`` under ``root`` (the repository's ``golden/``)."""
    return root / f"sglang-{version}"


def snapshot_document(name: str, version: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of one case from an engine result (``{"document": ...}`` or ``{"error": ...}``)."""
    head: dict[str, Any] = {"case": name, "golden_format": GOLDEN_FORMAT, "engine": f"sglang {version}"}
    document = result.get("document")
    if document is None:
        return {**head, "error": str(result.get("error"))}
    out = dict(head)
    for key in ("configurator", "cell_size", "token_to_kv_pool_class", "layout_error", "sizing_error",
                *_SIZE_KEYS):  # fmt: skip
        if key in document:
            out[key] = document[key]
    pools: dict[str, Any] = {}
    if document.get("pools") is not None:
        pools["token_to_kv"] = {"pool_class": document.get("token_to_kv_pool_class"),
                                "buffers": document["pools"]}  # fmt: skip
    req = document.get("req_to_token_pool")
    if req is not None:
        pools["req_to_token"] = {"pool_class": req.get("pool_class"), "buffers": req.get("buffers")}
    out["pools"] = pools
    return out


def snapshot_text(name: str, version: str, result: Mapping[str, Any]) -> str:
    return dumps(snapshot_document(name, version, result))


def _floats(value: Any) -> Any:
    """Golden float strings back to floats (cells of hybrid strategies)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def result_from_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The engine result a snapshot stands for (what :func:`~.verify.verdict_for` compares)."""
    if "error" in snapshot:
        return {"error": snapshot["error"]}
    skip = ("case", "golden_format", "engine", "pools")
    document: dict[str, Any] = {k: v for k, v in snapshot.items() if k not in skip}
    document["cell_size"] = _floats(document.get("cell_size"))
    pools = snapshot.get("pools") or {}
    kv = pools.get("token_to_kv")
    document["pools"] = None if kv is None else kv["buffers"]
    if kv is not None:
        document["token_to_kv_pool_class"] = kv.get("pool_class")
    req = pools.get("req_to_token")
    document["req_to_token_pool"] = None if req is None else {
        "pool_class": req["pool_class"], "buffers": req["buffers"]}
    return {"document": document}


def snapshot_files(folder: Path) -> list[Path]:
    """The case snapshots of a folder (``_known.json`` and other ``_`` files excluded)."""
    return sorted(p for p in folder.glob(f"*{SNAPSHOT_SUFFIX}") if not p.name.startswith("_"))


def read_snapshot(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a snapshot object")
    return data


def recorded_snapshot(recorded: Path, case: Path, engine: str, version: str) -> dict[str, Any]:
    """The snapshot ``recorded`` (``golden/<engine>-<version>/``) holds for ``case``; none is a
    :class:`KVCacheConfigError` naming the folder and the tool that records it."""
    snapshot = recorded / f"{case.stem}{SNAPSHOT_SUFFIX}"
    if not snapshot.is_file():
        raise KVCacheConfigError(
            f"verify --recorded: no recorded {engine} {version} answer for {case.stem} in {recorded}; record it with "
            f"tools/record_golden.py --engine {engine.lower()} (in the {engine} {version} environment)"
        )
    return read_snapshot(snapshot)
