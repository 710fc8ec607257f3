"""Shipped public checkpoints: the ``config.json`` (and, where the checkpoint has them,
``hf_quant_config.json`` and the published ``model.safetensors.index.json`` total) of HF
checkpoints people deploy, so that ``kvstrategies plan ORG/NAME`` works offline.

``index.json`` maps each HF id to its folder here and says, file by file, where the copy came
from (``repo@commit:path`` of a public repository that vendors the HF file, or the quoting
source). Every file is a copy of the published one; nothing is derived. A checkpoint is the
exact repository it names: an id resolves only to itself (any case), never to a sibling in
another quantization (:mod:`kvstrategies.planner.known_models`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.jsonio import parse_json_text, read_json_object, require_object
from ..errors import KVCacheConfigError

ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ShippedCheckpoint:
    """One shipped checkpoint: its HF id, its folder and where each file came from."""

    hf_id: str
    folder: Path
    sources: tuple[tuple[str, str], ...]

    def config(self) -> dict[str, Any]:
        """The checkpoint's ``config.json`` as published."""
        return read_json_object(self.folder / "config.json", f"the shipped config.json of {self.hf_id}")

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.sources)


@cache
def shipped_checkpoints() -> dict[str, ShippedCheckpoint]:
    """``{HF id: checkpoint}`` for every shipped checkpoint."""
    text = (ROOT / "index.json").read_text(encoding="utf-8")
    raw = require_object(parse_json_text(text, "checkpoints/index.json"), "checkpoints/index.json", "the index")
    out: dict[str, ShippedCheckpoint] = {}
    for hf_id, entry in raw.items():
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(files, dict) or "config.json" not in files:
            raise KVCacheConfigError(f"checkpoints/index.json: {hf_id!r} needs a 'files' object with config.json")
        out[hf_id] = ShippedCheckpoint(
            hf_id, ROOT / str(entry["folder"]), tuple((str(k), str(v)) for k, v in files.items())
        )
    return out


def find_shipped(name: str) -> ShippedCheckpoint | None:
    """The shipped checkpoint ``name`` names exactly: its HF id, or the part after ``org/`` when
    one checkpoint has it; any case. ``None`` otherwise (no fuzzy match)."""
    key = name.strip().lower()
    catalog = shipped_checkpoints()
    for hf_id, ckpt in catalog.items():
        if hf_id.lower() == key:
            return ckpt
    if "/" in key:
        return None
    named = [ckpt for hf_id, ckpt in catalog.items() if hf_id.split("/", 1)[1].lower() == key]
    return named[0] if len(named) == 1 else None
