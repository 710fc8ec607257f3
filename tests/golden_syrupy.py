"""The syrupy extension behind ``tests/golden/test_golden.py``: one ``golden/<case>.json`` per case.

A subclass of syrupy's JSON extension whose snapshot folder is ``golden/`` at the repository
root (``KVSTRATEGIES_GOLDEN_DIR`` overrides it, for tests of the harness itself), whose file is
named after the case (``snapshot(name=<case>)``), and whose bytes are
:func:`kvstrategies.golden.snapshot.dumps`: exactly what ``tools/record_golden.py`` writes. On a mismatch
the structural diff of :mod:`kvstrategies.golden.diff` comes first, then syrupy's line diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from syrupy.data import SnapshotCollections
from syrupy.extensions.json import JSONSnapshotExtension

from kvstrategies.golden.diff import diff_documents
from kvstrategies.golden.snapshot import dumps

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR_ENV = "KVSTRATEGIES_GOLDEN_DIR"


def golden_dir() -> Path:
    """``golden/`` at the repository root, or the folder named by ``KVSTRATEGIES_GOLDEN_DIR``."""
    override = os.environ.get(GOLDEN_DIR_ENV)
    return Path(override).resolve() if override else ROOT / "golden"


class GoldenSnapshotExtension(JSONSnapshotExtension):
    """``golden/<case>.json`` holding :func:`kvstrategies.golden.snapshot.dumps` of the case's document."""

    file_extension = "json"

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(golden_dir())

    @classmethod
    def discovery_dirname(cls, *, test_location: Any) -> str:
        return str(golden_dir())

    @classmethod
    def get_snapshot_name(cls, *, test_location: Any, index: Any = 0) -> str:
        if not isinstance(index, str):
            raise TypeError("golden snapshots are named after their case: use snapshot(name=<case name>)")
        return index

    @classmethod
    def get_file_basename(cls, *, test_location: Any, index: Any) -> str:
        return cls.get_snapshot_name(test_location=test_location, index=index)

    @classmethod
    def matches_test_location(cls, *, test_location: Any, snapshot_location: str) -> bool:
        return Path(snapshot_location).parent == golden_dir()

    def discover_snapshots(self, *, test_location: Any, ignore_extensions: list[str] | None = None) -> Any:
        """Only ``golden/*.json``: sub-folders (``golden/sglang-<version>/``) hold other engines' answers."""

        found = super().discover_snapshots(test_location=test_location, ignore_extensions=ignore_extensions)
        mine = SnapshotCollections()
        for collection in found:
            if Path(collection.location).resolve().parent == golden_dir():
                mine.add(collection)
        return mine

    def serialize(self, data: Any, *, exclude: Any = None, include: Any = None, matcher: Any = None) -> str:
        if isinstance(data, str):
            return data
        return dumps(data)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        try:
            lines = diff_documents(json.loads(str(snapshot_data)), json.loads(str(serialized_data)))
        except json.JSONDecodeError:
            lines = []
        if lines:
            yield "golden diff (snapshot -> received):"
            for line in lines:
                yield f"  {line}"
            yield "line diff:"
        yield from super().diff_lines(serialized_data, snapshot_data)
