"""Golden snapshots: one stable serialisation of a catalog case's plan and layout.

A snapshot (``golden/<case>.json``) freezes what a case plans and lays out, so that any change
of behaviour shows up as a readable diff (see :mod:`kvstrategies.golden.diff`). The document,
built by :func:`golden_document` (torch-free), holds:

* ``case``, ``golden_format``, ``configurator`` (strategy class), ``cell_size``,
  ``available_bytes``;
* ``sizes`` (profiled sizes, finalised), ``sizes_from_max_tokens`` (the user cap's sizes or
  null), ``pool_sizes`` (what the pools below were built for: a what-if size when the case gives
  ``pool_max_tokens``; the sizing fields always hold the full sizes), ``resolved`` (the whole
  resolve pipeline: final sizes after user cap and PP-wide minimum, the PP minimum, the KV
  budget left after state reservations);
* ``pools``: ``req_to_token``, ``token_to_kv`` and ``extra[i]`` (state pools), each with
  ``pool_class``, ``attributes``, ``planned_bytes`` and every buffer in layout order
  (``name``, ``shape``, ``dtype`` as torch spells it, ``nbytes`` of the tensor, ``role``; a view
  has ``view_of`` (its allocation), ``view_index`` and ``view_length``; backing storage that
  engines only address through views has ``engine_facing: false``; host tensors ``device``);
* ``planned_bytes`` / ``allocated_bytes`` of the KV side (token-to-KV plus extra pools, as in
  :func:`kvstrategies.document.plan_document`; allocated is computed from the layout here, the
  golden test measures a real ``meta`` build separately) and ``totals`` over all pools.

Bytes (:func:`dumps`): UTF-8 JSON, keys sorted at every level, two-space indent, a list of
scalars on one line, a list of objects one object per line (compact, keys sorted), a trailing
newline. Numbers: integers stay JSON integers; **every float is written as the string of its
Python ``repr``** (the shortest text that round-trips, identical on every IEEE-754 platform), so
a hybrid-SWA cell of 66355.2 is ``"66355.2"`` and ``float("66355.2") == 66355.2`` exactly; a
float that happens to be integral keeps its type (``"8192.0"``). ``tools/record_golden.py`` and
the syrupy extension of ``tests/golden/test_golden.py`` both write :func:`golden_text`, so their bytes
are identical.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api import Plan, plan
from ..case import Case, load_case
from ..document import buffer_entry, plan_document
from ..errors import KVCacheConfigError
from ..pools.layout import BufferSpec, PoolLayout

#: bumped when the document's shape changes (every snapshot is then re-recorded)
GOLDEN_FORMAT = 1
SNAPSHOT_SUFFIX = ".json"


# ---- planning a case -------------------------------------------------------------------------


def plan_case(case: Case) -> Plan:
    """Plan a case exactly as ``kvstrategies plan --case FILE`` does."""
    return plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
        pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
    )


# ---- the document ----------------------------------------------------------------------------


def buffer_document(buf: BufferSpec) -> dict[str, Any]:
    """One buffer: the report's entry plus its bytes, role, view index/length and placement."""
    entry = buffer_entry(buf)
    entry["nbytes"] = buf.nbytes
    entry["role"] = buf.role.value
    if buf.view is not None:
        entry["view_index"] = list(buf.view.index)
        entry["view_length"] = buf.view.length
        if buf.view.window_axis is not None:  # an overlapping sliding-window view
            entry["view_window_axis"] = buf.view.window_axis
    if not buf.engine_facing:
        entry["engine_facing"] = False
    if buf.device is not None:
        entry["device"] = buf.device
    return entry


def pool_document(layout: PoolLayout) -> dict[str, Any]:
    """One pool: class, attributes, every buffer in layout order, planned bytes."""
    attributes: dict[str, Any] = {}
    for key, value in layout.attributes:
        if key in attributes:
            raise KVCacheConfigError(f"pool {layout.pool_class} reports attribute {key!r} twice")
        attributes[key] = value
    return {
        "pool_class": layout.pool_class,
        "attributes": attributes,
        "buffers": [buffer_document(b) for b in layout.buffers],
        "planned_bytes": layout.planned_bytes,
    }


def golden_document(name: str, planned: Plan) -> dict[str, Any]:
    """The snapshot document of one planned case (plain data; floats still floats)."""
    report = plan_document(planned)
    layout = planned.layout
    resolution = planned.resolution
    pools: dict[str, Any] = {
        "req_to_token": pool_document(layout.req_to_token),
        "token_to_kv": pool_document(layout.token_to_kv),
    }
    for index, extra in enumerate(layout.extra):
        pools[f"extra[{index}]"] = pool_document(extra)
    by_role: dict[str, int] = {}
    for pool in layout.pools:
        for role, nbytes in pool.bytes_by_role().items():
            by_role[role] = by_role.get(role, 0) + nbytes
    document = {
        "case": name,
        "golden_format": GOLDEN_FORMAT,
        "configurator": report["configurator"],
        "cell_size": report["cell_size"],
        "available_bytes": planned.available_bytes,
        "sizes": report["sizes"],
        "sizes_from_max_tokens": report["sizes_from_max_tokens"],
        "pool_sizes": report["pool_sizes"],
        "resolved": {
            "sizes": resolution.sizes.to_dict(),
            "pp_min_tokens": resolution.pp_min_tokens,
            "kv_available_bytes": resolution.reservation.kv_available_bytes,
            "reserved_size_fields": dict(resolution.reservation.size_fields),
        },
        "pools": pools,
        "planned_bytes": report["planned_bytes"],
        "allocated_bytes": report["allocated_bytes"],
        "totals": {
            "req_to_token_bytes": layout.req_to_token.planned_bytes,
            "token_to_kv_bytes": layout.token_to_kv.planned_bytes,
            "extra_bytes": sum(p.planned_bytes for p in layout.extra),
            "all_pools_bytes": layout.planned_bytes,
            "by_role": by_role,
        },
    }
    if "adopted_sizes" in report:  # draft workers only
        document["adopted_sizes"] = report["adopted_sizes"]
    return document


def case_document(case: Case) -> dict[str, Any]:
    return golden_document(case.name, plan_case(case))


# ---- stable bytes ----------------------------------------------------------------------------


def stable(value: Any) -> Any:
    """``value`` as JSON data with every float replaced by its ``repr`` string (see module doc)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"golden documents need string keys, got {key!r}")
            out[key] = stable(item)
        return out
    if isinstance(value, (list, tuple)):
        return [stable(item) for item in value]
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a golden document")


def float_of(text: str) -> float:
    """The float a golden float string stands for (exact inverse of :func:`stable`)."""
    result = float(text)
    if math.isfinite(result) and repr(result) != text:
        raise ValueError(f"{text!r} is not the repr of a float")
    return result


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(", ", ": "))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, str))


def _write(value: Any, depth: int) -> str:
    pad = "  " * depth
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}  {_scalar(key)}: {_write(value[key], depth + 1)}" for key in sorted(value)]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        if all(_is_scalar(item) for item in value):
            return _compact(value)
        items = [f"{pad}  {_compact(item)}" for item in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return _scalar(value)


def dumps(document: Mapping[str, Any]) -> str:
    """The stable text of a document: what a snapshot file holds, byte for byte."""
    return _write(stable(document), 0) + "\n"


def golden_text(case: Case) -> str:
    return dumps(case_document(case))


# ---- the catalog -----------------------------------------------------------------------------


def case_files(cases_dir: Path) -> list[Path]:
    """Every case file of the catalog, sorted by name."""
    return sorted(cases_dir.glob(f"*{SNAPSHOT_SUFFIX}"))


def read_snapshot(path: Path) -> tuple[str, dict[str, Any]]:
    """A stored snapshot's text and document, read as any JSON input is (:mod:`kvstrategies.core.jsonio`:
    regular files only, bounded, UTF-8, nesting bounded); anything else is a
    :class:`~kvstrategies.errors.KVCacheConfigError` naming the file."""
    from ..core.jsonio import parse_json_text, read_text_file, require_object

    text = read_text_file(path)
    return text, require_object(parse_json_text(text, str(path)), str(path), "a golden snapshot")


def snapshot_path(golden_dir: Path, name: str) -> Path:
    return golden_dir / f"{name}{SNAPSHOT_SUFFIX}"


def load_catalog_case(path: Path) -> Case:
    """A catalog case; its ``name`` must equal the file's stem (the snapshot is named after it)."""
    case = load_case(path)
    if case.name != path.stem:
        raise KVCacheConfigError(
            f"{path.name}: case name {case.name!r} differs from the file name; "
            f"rename the file or set \"name\": {path.stem!r}"
        )
    return case


@dataclass(frozen=True)
class CatalogMismatch:
    """Case files without a snapshot, and snapshots without a case file (stale)."""

    missing: tuple[str, ...]
    stale: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.stale

    def lines(self, cases_dir: Path, golden_dir: Path) -> list[str]:
        out = [f"missing snapshot {snapshot_path(golden_dir, n)} for case {cases_dir / (n + SNAPSHOT_SUFFIX)}"
               for n in self.missing]
        out += [f"stale snapshot {snapshot_path(golden_dir, n)}: no case file {cases_dir / (n + SNAPSHOT_SUFFIX)}"
                for n in self.stale]
        return out


def catalog_mismatch(
    cases_dir: Path, golden_dir: Path, *, selected: Iterable[str] | None = None
) -> CatalogMismatch:
    """Compare the catalog with the snapshot folder (restricted to ``selected`` names if given)."""
    cases = {p.stem for p in case_files(cases_dir)}
    snapshots = {p.stem for p in golden_dir.glob(f"*{SNAPSHOT_SUFFIX}")} if golden_dir.is_dir() else set()
    if selected is not None:
        chosen = set(selected)
        cases &= chosen
        snapshots &= chosen
    return CatalogMismatch(tuple(sorted(cases - snapshots)), tuple(sorted(snapshots - cases)))


def select_names(names: Sequence[str], substrings: Sequence[str] | None) -> list[str]:
    """Names containing any of ``substrings`` (all names when none are given)."""
    if not substrings:
        return list(names)
    return [n for n in names if any(s in n for s in substrings)]
