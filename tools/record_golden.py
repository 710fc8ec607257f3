#!/usr/bin/env python3
"""Record or check the golden snapshots (``golden/<case>.json``) of the catalog (``cases/``).

    python tools/record_golden.py                 # record every case (writes only what changed)
    python tools/record_golden.py -k llama -k qwen  # only cases whose name contains a substring
    python tools/record_golden.py --check         # exit 1 on drift, missing or stale snapshots
    python tools/record_golden.py --prune         # also delete stale snapshots (no case file)
    python tools/record_golden.py --engine sglang --out DIR   # SGLang's own answers (live SGLang)
    python tools/record_golden.py --engine sglang --check     # exit 1 if golden/sglang-<version> is stale
    python tools/record_golden.py --engine vllm               # vLLM's answers (live vLLM) -> golden/vllm-<version>
    python tools/record_golden.py --engine vllm --mapping-only golden/vllm-0.16.0   # its mapping refusals, no vLLM

The bytes written are :func:`kvstrategies.golden.snapshot.golden_text`, exactly what
``pytest --snapshot-update`` writes. A case that fails to plan is reported and not recorded
(exit 1). ``--check`` prints, per drifted case, which size moved and by how much and which
buffer changed shape or dtype, appeared or disappeared; it also lists snapshots without a case
(stale) and cases without a snapshot (missing). Planning is torch-free: this tool never imports
torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvstrategies.errors import KVCacheConfigError  # noqa: E402
from kvstrategies.golden.diff import diff_documents  # noqa: E402
from kvstrategies.golden.snapshot import (  # noqa: E402
    case_files,
    catalog_mismatch,
    golden_text,
    load_catalog_case,
    read_snapshot,
    select_names,
    snapshot_path,
)


def _render(path: Path) -> tuple[str | None, str | None]:
    """(golden text, None) or (None, error message) for one case file."""
    try:
        return golden_text(load_catalog_case(path)), None
    except KVCacheConfigError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a strategy in progress may fail in any way; report, do not record
        return None, f"{type(exc).__name__} (not a KVCacheConfigError): {exc}"


def record(cases_dir: Path, golden_dir: Path, names: list[str], *, prune: bool, quiet: bool) -> int:
    golden_dir.mkdir(parents=True, exist_ok=True)
    written, unchanged, failed = [], 0, []
    for name in names:
        text, error = _render(cases_dir / f"{name}.json")
        if text is None:
            failed.append((name, error))
            continue
        target = snapshot_path(golden_dir, name)
        if target.exists() and target.read_bytes() == text.encode("utf-8"):
            unchanged += 1
            continue
        target.write_bytes(text.encode("utf-8"))
        written.append(name)
    stale = catalog_mismatch(cases_dir, golden_dir).stale
    if not quiet:
        for name in written:
            print(f"wrote {snapshot_path(golden_dir, name)}")
    for name, error in failed:
        print(f"FAILED {name}: {error} (not recorded)")
    for name in stale:
        if prune:
            snapshot_path(golden_dir, name).unlink()
            print(f"deleted stale snapshot {snapshot_path(golden_dir, name)}")
        else:
            print(f"stale snapshot {snapshot_path(golden_dir, name)}: no case file (use --prune to delete)")
    print(f"{len(names)} cases: {len(written)} written, {unchanged} unchanged, {len(failed)} failed"
          + (f", {len(stale)} stale" if stale else ""))
    return 1 if failed else 0


def check(cases_dir: Path, golden_dir: Path, names: list[str], *, selected: bool) -> int:
    drifted, failed = [], []
    for name in names:
        text, error = _render(cases_dir / f"{name}.json")
        target = snapshot_path(golden_dir, name)
        if text is None:
            failed.append(name)
            print(f"ERROR {name}: cannot plan: {error}")
            continue
        if not (target.exists() or target.is_symlink()):
            continue  # reported below as missing
        try:  # a folder, FIFO, link loop, non-UTF-8 or deeply nested file is reported, never hangs
            stored, stored_document = read_snapshot(target)
        except KVCacheConfigError as exc:
            drifted.append(name)
            print(f"DRIFT {name} ({target}): the stored snapshot is unreadable: {exc}")
            continue
        if stored == text:
            continue
        drifted.append(name)
        print(f"DRIFT {name} ({target})")
        lines = diff_documents(stored_document, json.loads(text))
        if not lines:
            lines = ["same content, different bytes (formatting): re-record"]
        for line in lines:
            print(f"    {line}")
    mismatch = catalog_mismatch(cases_dir, golden_dir, selected=names if selected else None)
    for line in mismatch.lines(cases_dir, golden_dir):
        print(line)
    problems = len(drifted) + len(failed) + len(mismatch.missing) + len(mismatch.stale)
    print(
        f"{len(names)} cases checked: {len(names) - len(drifted) - len(failed) - len(mismatch.missing)} match, "
        f"{len(drifted)} drifted, {len(failed)} failed to plan, {len(mismatch.missing)} missing, "
        f"{len(mismatch.stale)} stale"
    )
    return 1 if problems else 0


# ---- SGLang as the engine (kvstrategies.sglang.bridge; needs a live SGLang) ----------------


def record_sglang(cases_dir: Path, out: Path | None, names: list[str], *, check_only: bool, quiet: bool) -> int:
    """Record SGLang's snapshots of ``names`` into ``out`` (default ``golden/sglang-<version>``).

    Also writes ``_known.json``: the known differences between the project and these snapshots,
    per case (``verify``'s verdicts). ``check_only``: record into a scratch folder and exit 1 if
    any committed snapshot (or ``_known.json``) differs from the live recording.
    """
    import tempfile
    import time

    from kvstrategies.sglang.bridge.engine import run_cases
    from kvstrategies.sglang.bridge.runtime import check_version, import_sglang
    from kvstrategies.sglang.bridge.snapshots import KNOWN_FILE, snapshot_folder, snapshot_text
    from kvstrategies.sglang.bridge.verify import verdict_for

    started = time.perf_counter()
    version = check_version(import_sglang()).line  # a .postN build records as its release line
    imported = time.perf_counter() - started
    committed = out or snapshot_folder(ROOT / "golden", version)
    target = Path(tempfile.mkdtemp(prefix="kvs-sglang-golden-")) if check_only else committed
    target.mkdir(parents=True, exist_ok=True)
    paths = [cases_dir / f"{name}.json" for name in names]
    results, timings = run_cases(paths)
    known: dict[str, Any] = {}
    written = 0
    for path in paths:
        text = snapshot_text(path.stem, version, results[path.stem])
        file = target / f"{path.stem}.json"
        if not (file.exists() and file.read_text(encoding="utf-8") == text):
            file.write_text(text, encoding="utf-8")
            written += 1
            if not quiet and not check_only:
                print(f"wrote {file}")
        verdict = verdict_for(path, results[path.stem], version)
        if verdict.status != "match":
            known[path.stem] = {"status": verdict.status, "kinds": list(verdict.kinds)}
    recorded = {path.stem for path in paths}
    stored_known_file = committed / KNOWN_FILE
    if stored_known_file.exists():  # a -k subset keeps the other cases' entries
        stored = json.loads(stored_known_file.read_text(encoding="utf-8"))
        known = {**{k: v for k, v in stored.items() if k not in recorded}, **known}
    known_text = json.dumps(known, indent=2, sort_keys=True) + "\n"
    (target / KNOWN_FILE).write_text(known_text, encoding="utf-8")
    unexplained = sorted(n for n, v in known.items() if v["status"] == "DIFF" and n in recorded)
    print(f"SGLang {version}: {len(paths)} cases recorded in {timings['total']:.1f} s "
          f"(import {imported:.1f} s); {len(unexplained)} with unexplained differences"
          + (f": {', '.join(unexplained)}" if unexplained else ""))
    if not check_only:
        print(f"{target}: {written} written")
        return 1 if unexplained else 0
    stale = []
    for path in paths:
        live = (target / f"{path.stem}.json").read_text(encoding="utf-8")
        stored = committed / f"{path.stem}.json"
        if not stored.exists() or stored.read_text(encoding="utf-8") != live:
            stale.append(path.stem)
            print(f"STALE {stored}")
            if stored.exists():
                for line in diff_documents(json.loads(stored.read_text(encoding="utf-8")), json.loads(live)):
                    print(f"    {line}")
    stored_known = committed / KNOWN_FILE
    if not stored_known.exists() or stored_known.read_text(encoding="utf-8") != known_text:
        stale.append(KNOWN_FILE)
        print(f"STALE {stored_known} (the known differences changed)")
    print(f"{len(paths)} SGLang snapshots checked against {committed}: {len(stale)} stale")
    return 1 if stale or unexplained else 0


# ---- vLLM as the engine (kvstrategies.vllm.bridge; needs a live vLLM) ------------------------


#: the folder of vLLM-only cases inside the catalog (recorded into golden/vllm-<version>/ with the rest)
VLLM_CASES = "vllm"


def record_vllm(cases_dir: Path, out: Path | None, names: list[str], *, check_only: bool, quiet: bool) -> int:
    """Record vLLM's snapshots of ``names`` into ``out`` (default ``golden/vllm-<version>``), with
    ``_known.json`` (the known differences between the vLLM strategies and them); ``check_only``:
    exit 1 if a committed snapshot or ``_known.json`` differs from the live recording."""
    import time

    from kvstrategies.vllm.bridge.engine import run_cases
    from kvstrategies.vllm.bridge.runtime import import_vllm
    from kvstrategies.vllm.bridge.snapshots import KNOWN_FILE, snapshot_folder, snapshot_text
    from kvstrategies.vllm.bridge.verify import verdict_for

    started = time.perf_counter()
    version = import_vllm()
    imported = time.perf_counter() - started
    committed = out or snapshot_folder(ROOT / "golden", version)
    # the catalog's vLLM-only deployments (cases/vllm/: GPU families, vLLM's refusals) beside the catalog
    folders = [cases_dir, cases_dir / VLLM_CASES] if (cases_dir / VLLM_CASES).is_dir() else [cases_dir]
    paths = [folder / f"{name}.json" for name in names for folder in folders if (folder / f"{name}.json").is_file()]
    results, timings = run_cases(paths)
    texts = {path.stem: snapshot_text(path.stem, version, results[path.stem]) for path in paths}
    known: dict[str, Any] = {}
    for path in paths:
        verdict = verdict_for(path, results[path.stem], version)
        if verdict.status != "match":
            known[path.stem] = {"status": verdict.status, "kinds": list(verdict.kinds)}
    stored_known_file = committed / KNOWN_FILE
    if stored_known_file.exists():  # a -k subset keeps the other cases' entries
        stored = json.loads(stored_known_file.read_text(encoding="utf-8"))
        known = {**{k: v for k, v in stored.items() if k not in texts}, **known}
    known_text = json.dumps(known, indent=2, sort_keys=True) + "\n"
    unexplained = sorted(n for n, v in known.items() if v["status"] == "DIFF" and n in texts)
    refused = sum(1 for r in results.values() if "error" in r)
    print(f"vLLM {version}: {len(paths)} cases recorded in {timings['total']:.1f} s (import {imported:.1f} s, "
          f"{(timings['total'] - timings['import']) / max(len(paths), 1):.2f} s per case; {refused} refused); "
          f"{len(unexplained)} with unexplained differences" + (f": {', '.join(unexplained)}" if unexplained else ""))
    stale = []
    for name, text in texts.items():
        file = committed / f"{name}.json"
        if file.exists() and file.read_text(encoding="utf-8") == text:
            continue
        if check_only:
            stale.append(name)
            print(f"STALE {file}")
            if file.exists():
                for line in diff_documents(json.loads(file.read_text(encoding="utf-8")), json.loads(text)):
                    print(f"    {line}")
            continue
        committed.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        if not quiet:
            print(f"wrote {file}")
    if check_only:
        if not stored_known_file.exists() or stored_known_file.read_text(encoding="utf-8") != known_text:
            stale.append(KNOWN_FILE)
            print(f"STALE {stored_known_file} (the known differences changed)")
        print(f"{len(paths)} vLLM snapshots checked against {committed}: {len(stale)} stale")
        return 1 if stale or unexplained else 0
    stored_known_file.write_text(known_text, encoding="utf-8")
    return 1 if unexplained else 0


def rebuild_vllm_known(cases_dir: Path, folder: Path) -> int:
    """Write ``folder/_known.json`` from the committed vLLM snapshots in ``folder`` alone (no vLLM needed): the
    verdict of every case that does not match, as :func:`record_vllm` writes it from a live recording. For a
    change to the project's rules after the snapshots were recorded; ``--check`` in the release confirms it."""
    from kvstrategies.vllm.bridge.snapshots import KNOWN_FILE, read_snapshot, result_from_snapshot, snapshot_files
    from kvstrategies.vllm.bridge.verify import verdict_for

    version = folder.name.removeprefix("vllm-")
    folders = [cases_dir, cases_dir / VLLM_CASES] if (cases_dir / VLLM_CASES).is_dir() else [cases_dir]
    cases = {p.stem: p for f in folders for p in case_files(f)}
    known: dict[str, Any] = {}
    for snapshot in snapshot_files(folder):
        verdict = verdict_for(cases[snapshot.stem], result_from_snapshot(read_snapshot(snapshot)), version)
        if verdict.status != "match":
            known[snapshot.stem] = {"status": verdict.status, "kinds": list(verdict.kinds)}
    (folder / KNOWN_FILE).write_text(json.dumps(known, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    unexplained = sorted(n for n, v in known.items() if v["status"] == "DIFF")
    print(f"{folder / KNOWN_FILE}: {len(known)} known, {len(unexplained)} unexplained")
    return 1 if unexplained else 0


def refresh_vllm_mapping(cases_dir: Path, folder: Path, names: list[str], *, check_only: bool, quiet: bool) -> int:
    """Rewrite the mapping refusals of ``folder`` (``golden/vllm-<version>``) from the project's case mapping alone,
    no vLLM needed: a snapshot whose case the mapping refuses (``refused_by: kvstrategies``, written before vLLM is
    called, as :func:`record_vllm` writes it) gets the mapping's words of today. A case whose kind of snapshot would
    change (the mapping now refuses a case vLLM answered or refused, or accepts one it refused) is not written: it
    needs the live release (``--engine vllm`` in that release's venv); exit 1. ``check_only``: write nothing, exit 1
    on any difference."""
    from kvstrategies.core.jsonio import read_json_object
    from kvstrategies.vllm.bridge.bridge import case_deployment
    from kvstrategies.vllm.bridge.snapshots import snapshot_text

    version = folder.name.removeprefix("vllm-")
    folders = [cases_dir, cases_dir / VLLM_CASES] if (cases_dir / VLLM_CASES).is_dir() else [cases_dir]
    paths = [f / f"{name}.json" for name in names for f in folders if (f / f"{name}.json").is_file()]
    stale: list[str] = []
    needs_live: list[str] = []
    for path in paths:
        file = folder / f"{path.stem}.json"
        stored = json.loads(file.read_text(encoding="utf-8")) if file.exists() else None
        stored_mapping = stored is not None and stored.get("refused_by") == "kvstrategies"
        try:
            case_deployment(read_json_object(path, "a case file"), path.parent, version)
        except KVCacheConfigError as exc:
            if stored is not None and not stored_mapping:
                needs_live.append(f"{path.stem}: the mapping now refuses a case vLLM {version} ran")
                continue
            text = snapshot_text(path.stem, version, {"error": str(exc), "refused_by": "kvstrategies"})
            if stored is not None and file.read_text(encoding="utf-8") == text:
                continue
            stale.append(path.stem)
            if check_only:
                print(f"STALE {file}")
                continue
            file.write_text(text, encoding="utf-8")
            if not quiet:
                print(f"wrote {file}")
            continue
        if stored is None or stored_mapping:
            needs_live.append(f"{path.stem}: the mapping accepts it now; vLLM {version} itself must record it")
    for line in needs_live:
        print(f"NEEDS LIVE {line}")
    verb = "stale" if check_only else "rewritten"
    print(f"{len(paths)} cases mapped for vLLM {version} ({folder}): {len(stale)} mapping refusals {verb}, "
          f"{len(needs_live)} need the live release")
    return 1 if needs_live or (check_only and stale) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record or check the golden snapshots of the case catalog.")
    parser.add_argument("-k", dest="substrings", action="append", metavar="SUBSTRING",
                        help="only cases whose name contains SUBSTRING (repeatable: any of them)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on any difference")
    parser.add_argument("--prune", action="store_true", help="delete stale snapshots (snapshot without case file)")
    parser.add_argument("--cases", type=Path, default=ROOT / "cases", help="catalog folder")
    parser.add_argument("--golden", type=Path, default=ROOT / "golden", help="snapshot folder")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not list each written file")
    parser.add_argument("--engine", choices=["kvstrategies", "sglang", "vllm"], default="kvstrategies",
                        help="whose answers to record: this library (default), a live SGLang or a live vLLM")
    parser.add_argument("--out", type=Path, default=None,
                        help="--engine sglang / vllm: snapshot folder (default golden/<engine>-<version>)")
    parser.add_argument("--known-only", type=Path, default=None, metavar="FOLDER",
                        help="--engine vllm: rebuild FOLDER/_known.json from its committed snapshots (no vLLM)")
    parser.add_argument("--mapping-only", type=Path, default=None, metavar="FOLDER",
                        help="--engine vllm: rewrite FOLDER's mapping refusals (refused_by kvstrategies) from the "
                             "project's case mapping, no vLLM; with --check, only compare")
    args = parser.parse_args(argv)
    if not args.cases.is_dir():
        print(f"record_golden: no catalog folder {args.cases}", file=sys.stderr)
        return 2
    all_names = [p.stem for p in case_files(args.cases)]
    if args.engine == "vllm" and (args.cases / VLLM_CASES).is_dir():
        all_names += [p.stem for p in case_files(args.cases / VLLM_CASES)]
    names = select_names(all_names, args.substrings)
    if args.substrings and not names:
        print(f"record_golden: no case name contains any of {args.substrings}", file=sys.stderr)
        return 2
    if args.engine == "sglang":
        return record_sglang(args.cases, args.out, names, check_only=args.check, quiet=args.quiet)
    if args.engine == "vllm" and args.mapping_only is not None:
        return refresh_vllm_mapping(args.cases, args.mapping_only, names, check_only=args.check, quiet=args.quiet)
    if args.engine == "vllm" and args.known_only is not None:
        return rebuild_vllm_known(args.cases, args.known_only)
    if args.engine == "vllm":
        return record_vllm(args.cases, args.out, names, check_only=args.check, quiet=args.quiet)
    if args.check:
        return check(args.cases, args.golden, names, selected=bool(args.substrings))
    return record(args.cases, args.golden, names, prune=args.prune and not args.substrings, quiet=args.quiet)


if __name__ == "__main__":
    sys.exit(main())
