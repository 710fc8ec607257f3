"""``kvstrategies verify --against sglang``: every case planned by both engines, differences named.

One line per case: ``match``, ``known`` (every difference is a deliberate one; the kinds are
named) or ``DIFF`` (the first unexplained difference, naming the field or buffer), then the
reasons of the known kinds used and a total. Exit status 1 on any unexplained difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.releases import parse_release
from ...errors import KVCacheConfigError
from .bridge import case_hf_config
from .compare import KNOWN_DIFFERENCES, difference_lines, explain
from .engine import load_case_dict


def project_document(path: Path, sglang_version: str | None = None) -> dict[str, Any]:
    """``plan --case PATH --json [--sglang-version V]``'s document (the partial one when the layout is refused)."""
    from ...api import LayoutError
    from ...case import load_case
    from ...document import partial_plan_document, plan_document
    from ...golden.snapshot import plan_case

    try:
        return plan_document(plan_case(load_case(path, sglang_version=sglang_version)))
    except LayoutError as exc:
        document = partial_plan_document(exc)
        return document


@dataclass(frozen=True)
class CaseVerdict:
    """One case: ``match`` / ``known`` / ``DIFF``, the known kinds used, every difference line."""

    name: str
    status: str
    kinds: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()
    unexplained: tuple[str, ...] = ()
    sglang_seconds: float = 0.0


@dataclass
class VerifyReport:
    verdicts: list[CaseVerdict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    version: str = ""

    @property
    def ok(self) -> bool:
        return all(v.status != "DIFF" for v in self.verdicts)

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for verdict in self.verdicts:
            for kind in verdict.kinds:
                counts[kind] = counts.get(kind, 0) + 1
        return counts


def case_with_config(path: Path, sglang_version: str | None = None) -> dict[str, Any]:
    case = load_case_dict(path)
    if sglang_version is not None:
        case["sglang_version"] = sglang_version
    try:
        case["_hf_config"] = case_hf_config(case, path.parent)
    except (KVCacheConfigError, OSError, ValueError):
        case["_hf_config"] = {}
    return dict(case)


def planned_or_refused(
    document: Callable[[Path, str | None], dict[str, Any]], path: Path, version: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The project's document for one case, or ``None`` and its refusal (a :class:`KVCacheConfigError`)."""
    try:
        return document(path, version), None
    except KVCacheConfigError as exc:
        return None, str(exc)


def classified(
    path: Path, lines: list[str], case: Callable[[], dict[str, Any]], seconds: float,
    explain_lines: Callable[[dict[str, Any], list[str]], tuple[list[Any], list[str]]] = explain,
) -> CaseVerdict:  # fmt: skip
    """``match`` without difference lines; else ``known`` when the engine's known kinds
    (``explain_lines``; SGLang's by default) explain every line (``case()`` loads the case they are
    matched on), ``DIFF`` when some are left."""
    if not lines:
        return CaseVerdict(path.stem, "match", sglang_seconds=seconds)
    used, left = explain_lines(case(), lines)
    status = "DIFF" if left else "known"
    return CaseVerdict(path.stem, status, tuple(k.kind for k in used), tuple(lines), tuple(left), seconds)


def verdict_for(path: Path, sglang: dict[str, Any], sglang_version: str | None = None) -> CaseVerdict:
    """Compare one case's two documents (or refusals) for one SGLang release and classify the differences."""
    seconds = float(sglang.get("seconds", 0.0))
    ours, our_error = planned_or_refused(project_document, path, sglang_version)
    theirs = sglang.get("document")
    if ours is None and theirs is None:
        return CaseVerdict(path.stem, "match", lines=("both refuse",), sglang_seconds=seconds)
    if theirs is None:
        lines = [f"sglang: refused: {sglang.get('error')}"]
    elif ours is None:
        lines = [f"kvstrategies: refused: {our_error}"]
    else:
        lines = difference_lines(ours, theirs)
    return classified(path, lines, lambda: case_with_config(path, sglang_version), seconds)


#: one case's verdict from the engine's answer (path, answer, release planned for)
Verdict = Callable[[Path, dict[str, Any], "str | None"], CaseVerdict]


def recorded_report(
    paths: Sequence[Path], recorded: Path, engine: str, version: str,
    answer: Callable[[dict[str, Any]], dict[str, Any]], verdict: Verdict,
) -> VerifyReport:  # fmt: skip
    """Every case of ``paths`` against ``engine``'s answers recorded in ``recorded`` (a
    ``golden/<engine>-<version>/`` folder): ``answer`` turns a stored snapshot into the engine's
    answer, ``verdict`` compares it with the project; no engine needed."""
    import time

    from .snapshots import recorded_snapshot

    started = time.perf_counter()
    report = VerifyReport(version=f"{version} (recorded in {recorded})")
    for path in paths:
        report.verdicts.append(verdict(path, answer(recorded_snapshot(recorded, path, engine, version)), version))
    report.timings = {"import": 0.0, "total": time.perf_counter() - started}
    return report


def verify_recorded(paths: Sequence[Path], recorded: Path, version: str) -> VerifyReport:
    """Compare the project, planning for ``version``, with SGLang's answers recorded in ``recorded``.

    ``recorded`` is ``golden/sglang-<version>/`` (``tools/record_golden.py --engine sglang``); a
    case with no recorded answer is a :class:`KVCacheConfigError` naming the folder.
    """
    from .snapshots import result_from_snapshot

    return recorded_report(paths, recorded, "SGLang", version, result_from_snapshot, verdict_for)


def verify(paths: Sequence[Path], sglang_version: str | None = None) -> VerifyReport:
    """Run SGLang over ``paths`` (one import; env cases in their own processes) and compare.

    ``sglang_version``, when given, must be the installed SGLang's release line.
    """
    import time

    from .engine import run_cases
    from .runtime import import_sglang

    started = time.perf_counter()
    version = import_sglang()
    if sglang_version is not None and parse_release(sglang_version) != parse_release(version):
        raise KVCacheConfigError(
            f"--sglang-version {sglang_version} but SGLang {version} is installed; a live verify checks the "
            f"installed release (python tools/sglang_env.py {sglang_version} DIR makes an environment for it), "
            "or add --recorded to compare with its recorded answers"
        )
    imported = time.perf_counter() - started
    results, timings = run_cases(paths)
    timings = {"import": imported, "total": imported + timings["total"]}
    report = VerifyReport(timings=timings, version=version)
    for path in paths:
        report.verdicts.append(verdict_for(path, results[path.stem], version))
    return report


def format_report(report: VerifyReport, *, verbose: bool = False, width: int = 110) -> list[str]:
    """The lines ``verify`` prints."""
    out = [f"kvstrategies vs SGLang {report.version}: {len(report.verdicts)} cases"]
    name_width = max((len(v.name) for v in report.verdicts), default=4)
    for verdict in report.verdicts:
        if verdict.status == "match":
            detail = ""
        elif verdict.status == "known":
            detail = ", ".join(verdict.kinds)
        else:
            first = verdict.unexplained[0]
            more = f"; +{len(verdict.unexplained) - 1} more" if len(verdict.unexplained) > 1 else ""
            detail = first + more
        if len(detail) > width:
            detail = detail[: width - 3] + "..."
        out.append(f"{verdict.name:<{name_width}}  {verdict.status:<5}  {detail}".rstrip())
        if verbose or verdict.status == "DIFF":
            shown = verdict.lines if verbose else verdict.unexplained
            out.extend(f"{'':<{name_width}}    {line}" for line in shown)
    counts = report.kind_counts()
    if counts:
        out.append("known differences:")
        reasons = {k.kind: k.reason for k in KNOWN_DIFFERENCES}
        for kind, count in sorted(counts.items()):
            out.append(f"  {kind} ({count} cases): {reasons[kind]}")
    tally: dict[str, int] = {}
    for verdict in report.verdicts:
        tally[verdict.status] = tally.get(verdict.status, 0) + 1
    timing = report.timings
    per_case = (timing.get("total", 0.0) - timing.get("import", 0.0)) / max(len(report.verdicts), 1)
    out.append(
        f"total: {len(report.verdicts)} cases: {tally.get('match', 0)} match, {tally.get('known', 0)} known, "
        f"{tally.get('DIFF', 0)} unexplained (SGLang import {timing.get('import', 0.0):.1f} s, "
        f"{per_case:.2f} s per case, {timing.get('total', 0.0):.1f} s in all)"
    )
    return out
