"""``kvstrategies verify --against vllm``: every case planned by the vLLM strategies and by vLLM, differences named.

One line per case: ``match``, ``known`` (every difference is a listed known kind) or ``DIFF`` (the
first unexplained difference), the reasons of the known kinds used, and a total with vLLM's import
time and the time per case. Exit status 1 on any unexplained difference.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.jsonio import read_json_object
from ...core.releases import VLLM
from ...errors import KVCacheConfigError
from ...sglang.bridge.bridge import case_hf_config
from ...sglang.bridge.verify import CaseVerdict, VerifyReport, classified, planned_or_refused, recorded_report
from .compare import KNOWN_DIFFERENCES, difference_lines, explain


def project_document(path: Path, vllm_version: str | None = None) -> dict[str, Any]:
    """``plan --case PATH --engine vllm --json``'s document (the project's vLLM strategies)."""
    from ...case import load_case
    from ...golden.snapshot import plan_case
    from ..strategies.document import vllm_plan_document

    return vllm_plan_document(plan_case(load_case(path, engine=VLLM, vllm_version=vllm_version)))


_REASON = re.compile(r"refused: (?:\w+: )?(?:\d+ validation errors? for \w+ (?:\w+ )?Value error, )?(?P<reason>.*)$")


def refusal_reason(error: str) -> str:
    """vLLM's own words in a bridge refusal: the exception's message (pydantic's wrapper dropped), 60 characters."""
    match = _REASON.search(error)
    return (match.group("reason") if match else error)[:60]


def same_refusal(ours: str, theirs: str, refused_by: str) -> bool:
    """Both sides refuse for the same reason: the same scope refusal, or vLLM's words in ours."""
    if refused_by != "vllm":
        return ours == theirs
    return refusal_reason(theirs) in " ".join(ours.split())


def case_with_config(path: Path) -> dict[str, Any]:
    case = dict(read_json_object(path, "a case file"))
    try:
        case["_hf_config"] = case_hf_config(case, path.parent)
    except (KVCacheConfigError, OSError, ValueError):
        case["_hf_config"] = {}
    return case


def _case_with_error(path: Path, our_error: str | None, vllm_version: str | None = None) -> dict[str, Any]:
    case = case_with_config(path)
    case["_our_error"] = our_error
    case["_vllm_version"] = vllm_version
    return case


def verdict_for(path: Path, vllm: dict[str, Any], vllm_version: str | None = None) -> CaseVerdict:
    """Compare one case's two documents (or refusals) and classify the differences."""
    seconds = float(vllm.get("seconds", 0.0))
    ours, our_error = planned_or_refused(project_document, path, vllm_version)
    theirs = vllm.get("document")
    if ours is None and theirs is None:
        if same_refusal(str(our_error), str(vllm.get("error")), str(vllm.get("refused_by", "vllm"))):
            return CaseVerdict(path.stem, "match", lines=("both refuse",), sglang_seconds=seconds)
        lines = [f"refusals differ: kvstrategies: {our_error} | vllm: {vllm.get('error')}"]
    elif theirs is None:
        lines = [f"vllm: refused: {vllm.get('error')}"]
    elif ours is None:
        lines = [f"kvstrategies: refused: {our_error}"]
    else:
        lines = difference_lines(ours, theirs)
    return classified(path, lines, lambda: _case_with_error(path, our_error, vllm_version), seconds, explain)


def verify(paths: Sequence[Path]) -> VerifyReport:
    """Run vLLM over ``paths`` (one import) and compare each case with the project's vLLM plan."""
    from .engine import run_cases
    from .runtime import import_vllm

    started = time.perf_counter()
    version = import_vllm()
    imported = time.perf_counter() - started
    results, timings = run_cases(paths)
    report = VerifyReport(timings={"import": imported, "total": imported + timings["total"]}, version=version)
    for path in paths:
        report.verdicts.append(verdict_for(path, results[path.stem], version))
    return report


def verify_recorded(paths: Sequence[Path], recorded: Path, version: str) -> VerifyReport:
    """Compare the project's vLLM strategies with vLLM's answers recorded in ``recorded``
    (``golden/vllm-<version>/``, written by ``tools/record_golden.py --engine vllm``), no vLLM needed;
    a case with no recorded answer is a :class:`KVCacheConfigError` naming the folder."""
    from .snapshots import result_from_snapshot

    return recorded_report(paths, recorded, "vLLM", version, result_from_snapshot, verdict_for)


def format_report(report: VerifyReport, *, verbose: bool = False, width: int = 110) -> list[str]:
    """The lines ``verify --against vllm`` prints."""
    out = [f"kvstrategies vs vLLM {report.version}: {len(report.verdicts)} cases"]
    name_width = max((len(v.name) for v in report.verdicts), default=4)
    for verdict in report.verdicts:
        detail = {"match": "", "known": ", ".join(verdict.kinds)}.get(verdict.status)
        if detail is None:
            more = f"; +{len(verdict.unexplained) - 1} more" if len(verdict.unexplained) > 1 else ""
            detail = verdict.unexplained[0] + more
        if verdict.status == "match" and verdict.lines == ("both refuse",):
            detail = "both refuse"
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
        out.extend(f"  {kind} ({count} cases): {reasons[kind]}" for kind, count in sorted(counts.items()))
    tally: dict[str, int] = {}
    for verdict in report.verdicts:
        tally[verdict.status] = tally.get(verdict.status, 0) + 1
    timing = report.timings
    per_case = (timing.get("total", 0.0) - timing.get("import", 0.0)) / max(len(report.verdicts), 1)
    total = timing.get("total", 0.0)
    timing_text = (
        f"recorded answers, {total:.1f} s in all" if "recorded" in report.version
        else f"vLLM import {timing.get('import', 0.0):.1f} s, {per_case:.2f} s per case, {total:.1f} s in all"
    )  # fmt: skip
    out.append(
        f"total: {len(report.verdicts)} cases: {tally.get('match', 0)} match, {tally.get('known', 0)} known, "
        f"{tally.get('DIFF', 0)} unexplained ({timing_text})"
    )
    return out
