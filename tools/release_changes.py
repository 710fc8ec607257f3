#!/usr/bin/env python3
"""Write ``docs/sglang-releases.md``: what changed between consecutive SGLang releases, and why.

    python tools/release_changes.py            # rewrite docs/sglang-releases.md
    python tools/release_changes.py --check    # exit 1 if the committed page is stale

For each consecutive pair of supported releases it reads the committed answers of SGLang itself
(``golden/sglang-<version>/``, and ``golden/sglang-<version>-launch/resolutions.jsonl`` where a
release has one) and lists every catalog case and launch whose answer moved, field by field
(``old -> new``). Moved cases are grouped by cause: the release rules of the project
(``kvstrategies releases A B``) that differ between the two releases, each tried on its own: a
rule is a cause of a case when planning the case for the newer release with that one rule as in
the older release moves the project's answer (``(alone)`` when it gives the older answer).
Nothing here runs SGLang.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvstrategies.cli.releases import load_rule_modules, table_rows_between  # noqa: E402
from kvstrategies.core.releases import (  # noqa: E402
    SGLANG_RELEASES,
    EngineRelease,
    ReleaseRule,
    ReleaseSpan,
    rules_differing,
)
from kvstrategies.errors import KVCacheConfigError  # noqa: E402
from kvstrategies.golden.diff import diff_documents  # noqa: E402

PAGE = ROOT / "docs" / "sglang-releases.md"
CASES = ROOT / "cases"
#: snapshot keys that name the recording rather than the answer
_IGNORED = ("engine", "golden_format", "case")

#: hand-written verdicts for a release pair, placed above the generated lists
VERDICTS: dict[tuple[str, str], str] = {}
VERDICT_FILE = ROOT / "docs" / "sglang-extraction-verdict.md"


@functools.cache
def _snapshot_text(version: str, name: str) -> str | None:
    """``_snapshot`` as JSON text, read once (each release's answers are compared with two neighbours)."""
    found = _read_snapshot(version, name)
    return None if found is None else json.dumps(found)


def _snapshot(version: str, name: str) -> dict[str, Any] | None:
    text = _snapshot_text(version, name)
    return None if text is None else dict(json.loads(text))


def _read_snapshot(version: str, name: str) -> dict[str, Any] | None:
    path = ROOT / "golden" / f"sglang-{version}" / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    out = {k: v for k, v in data.items() if k not in _IGNORED}
    for pool in (out.get("pools") or {}).values():  # attribute order is not part of the answer
        if isinstance(pool, dict) and isinstance(pool.get("buffers"), list):
            pool["buffers"] = sorted(pool["buffers"], key=lambda b: _natural(str(b.get("name"))))
    if isinstance(out.get("error"), str):  # a refusal names its release: the same refusal on both sides
        out["error"] = out["error"].replace(f"SGLang {version} ", "SGLang <release> ")
    return out


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _launches(version: str) -> dict[str, dict[str, Any]]:
    """SGLang's resolution of each grid launch: ``{launch name: {field: value}}`` (or ``{"refused": why}``).

    ``resolutions.jsonl`` holds a header line naming the fields, then one record per launch:
    ``{"spec": {"name": ...}, "sglang": {"fields": [...]} or {"refused": ...}}``.
    """
    path = ROOT / "golden" / f"sglang-{version}-launch" / "resolutions.jsonl"
    if not path.is_file():
        return {}
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    names: list[str] = list(lines[0].get("fields") or []) if lines else []
    out: dict[str, dict[str, Any]] = {}
    for record in lines[1:]:
        answer = record.get("sglang") or {}
        if "fields" in answer:
            out[str(record["spec"]["name"])] = dict(zip(names, answer["fields"], strict=True))
        else:
            out[str(record["spec"]["name"])] = {"refused": str(answer.get("refused", answer))[:160]}
    return out


@contextlib.contextmanager
def _as_in(rule: ReleaseRule, older: EngineRelease) -> Iterator[None]:
    """Make ``rule`` answer every release as it answers ``older`` while the block runs."""
    original = rule.span
    # every release of the engine, or none (a span of no engine holds for no release)
    pinned = ReleaseSpan(original.engine) if rule.holds(older) else ReleaseSpan("")
    object.__setattr__(rule, "span", pinned)
    try:
        yield
    finally:
        object.__setattr__(rule, "span", original)


def _project_answer(case: Path, release: EngineRelease) -> str:
    from kvstrategies.sglang.bridge.verify import project_document

    try:
        return json.dumps(project_document(case, release.text), sort_keys=True, default=str)
    except KVCacheConfigError as exc:
        return f"refused: {type(exc).__name__}: {exc}".replace(f"SGLang {release.text} ", "SGLang <release> ")


#: ``(case, release) -> (answer, ids of the release spans the planning consulted)``, rules as defined
_PLAIN: dict[tuple[Path, EngineRelease], tuple[str, frozenset[int]]] = {}


def _plain_answer(case: Path, release: EngineRelease) -> tuple[str, frozenset[int]]:
    """The project's answer with every rule as defined, and the spans it asked (``in`` or ``describe``).

    Planning is deterministic and reads a rule only through its span, so a rule whose span the
    planning never asked cannot move the answer when it is set back: :func:`causes` skips it.
    """
    key = (case, release)
    if key not in _PLAIN:
        seen: set[int] = set()
        contains, describe = ReleaseSpan.__contains__, ReleaseSpan.describe

        def watched_contains(span: ReleaseSpan, other: object) -> bool:
            seen.add(id(span))
            return contains(span, other)

        def watched_describe(span: ReleaseSpan) -> str:
            seen.add(id(span))
            return describe(span)

        ReleaseSpan.__contains__ = watched_contains  # type: ignore[method-assign]
        ReleaseSpan.describe = watched_describe  # type: ignore[method-assign]
        try:
            answer = _project_answer(case, release)
        finally:
            ReleaseSpan.__contains__ = contains  # type: ignore[method-assign]
            ReleaseSpan.describe = describe  # type: ignore[method-assign]
        _PLAIN[key] = (answer, frozenset(seen))
    return _PLAIN[key]


def _outcome(answer: str) -> str:
    """An answer as compared between releases: a refusal by its error class (its text names releases)."""
    return ":".join(answer.split(":")[:2]) if answer.startswith("refused") else answer


#: the cause named when the project refuses the case on both releases (SGLang's bridge sized it)
REFUSED_BOTH = "the project refuses this layout on both releases (a known difference of `verify`)"


def causes(case: Path, older: EngineRelease, newer: EngineRelease, rules: list[ReleaseRule]) -> list[str]:
    """The rules that, each set back to ``older`` on its own, move the project's answer of the case.

    A rule is listed with ``(alone)`` when setting it back restores the older answer by itself.
    """
    target, _ = _plain_answer(case, older)
    now, consulted = _plain_answer(case, newer)
    if target == now or (target.startswith("refused") and now.startswith("refused")):
        return [REFUSED_BOTH] if now.startswith("refused") else []
    found = [f"model table: {row}" for row in table_rows_between(older, newer)
             if target.startswith("refused") and row.split("'")[1] in target]  # fmt: skip
    if found:
        return found
    for rule in rules:
        if id(rule.span) not in consulted:  # never asked while planning for `newer`: cannot move it
            continue
        with _as_in(rule, older):
            answer = _project_answer(case, newer)
        if _outcome(answer) == _outcome(target):
            found.append(f"`{rule.key}` (alone)")
        elif _outcome(answer) != _outcome(now):
            found.append(f"`{rule.key}`")
    return found


def pair_section(older: EngineRelease, newer: EngineRelease) -> list[str]:
    rules = rules_differing(older, newer)
    out = [f"## {older.text} -> {newer.text}", ""]
    verdict = VERDICTS.get((older.text, newer.text))
    if verdict:
        out += [verdict, ""]
    out.append(f"Release rules that differ ({len(rules)}; `kvstrategies releases {older.text} {newer.text}`):")
    out.append("")
    out += [f"- `{r.key}` ({r.span.describe()}): {r.summary}. {r.source}." for r in rules] or ["- none"]
    out += [f"- {row}." for row in table_rows_between(older, newer)]
    out.append("")
    by_cause: dict[str, list[str]] = {}
    moved = 0
    for case in sorted(CASES.glob("*.json")):
        old, new = _snapshot(older.text, case.stem), _snapshot(newer.text, case.stem)
        if old is None or new is None or old == new:
            continue
        moved += 1
        lines = diff_documents(old, new)[:6]
        cause = ", ".join(causes(case, older, newer, rules)) or "no modelled rule"
        by_cause.setdefault(cause, []).append(f"- `{case.stem}`: " + "; ".join(lines))
    out.append(f"Catalog cases whose SGLang answer moved: {moved}.")
    out.append("")
    for cause, entries in sorted(by_cause.items()):
        out.append(f"### caused by {cause} ({len(entries)} cases)")
        out.append("")
        out += entries
        out.append("")
    old_launches, new_launches = _launches(older.text), _launches(newer.text)
    if old_launches and new_launches:
        changed: dict[str, list[str]] = {}
        for name, record in new_launches.items():
            before = old_launches.get(name)
            if before is None or before == record:
                continue
            if ("refused" in before) != ("refused" in record):
                group = "refused, now started" if "refused" in before else "started, now refused"
                why = before.get("refused") or record.get("refused")
                changed.setdefault(group, []).append(f"- `{name}`: {why}")
                continue
            fields = sorted(k for k in set(record) | set(before) if record.get(k) != before.get(k))
            group = "refused both times, for another reason" if "refused" in record else "fields " + ", ".join(fields)
            changed.setdefault(group, []).append(
                f"- `{name}`: " + "; ".join(f"{k} {before.get(k)!r} -> {record.get(k)!r}" for k in fields[:4])
            )
        total = sum(len(v) for v in changed.values())
        out.append(f"Launches of the shipped grid whose resolution moved: {total}.")
        out.append("")
        for fields, entries in sorted(changed.items()):
            out.append(f"### launches: {fields} ({len(entries)} launches)")
            out.append("")
            out += entries[:25]
            if len(entries) > 25:
                out.append(f"- ... and {len(entries) - 25} more")
            out.append("")
    return out


def page() -> str:
    load_rule_modules()
    if VERDICT_FILE.is_file():
        VERDICTS[("0.5.15", "0.5.16")] = VERDICT_FILE.read_text(encoding="utf-8").strip()
    lines = [
        "# SGLang releases: what moved between them, and why",
        "",
        "Generated by `python tools/release_changes.py` from SGLang's own recorded answers",
        "(`golden/sglang-<version>/`, `golden/sglang-<version>-launch/`); do not edit by hand. A case is",
        "listed under the project's release rules that explain it: each rule, set back to the older",
        "release on its own, moves the project's answer of the case (`(alone)`: all the way back to the",
        "older answer). `kvstrategies releases A B` lists the rules of any two releases. The oldest line",
        f"is {SGLANG_RELEASES[0].text}, the first 0.5 release on the package registry (0.5.0 is not there: it cannot "
        "be installed, so it is not modelled).",
        "",
    ]
    for older, newer in zip(SGLANG_RELEASES, SGLANG_RELEASES[1:], strict=False):
        lines += pair_section(older, newer)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/sglang-releases.md is stale")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != text:
            print(f"{PAGE} is stale: run python tools/release_changes.py")
            return 1
        print(f"{PAGE} is current")
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
