"""``kvstrategies verify``: compare with the engine's own code, or with its recorded answers.

Case files through SGLang's (or vLLM's) sizing and pool builders, or with ``--launch`` the launch
defaults against SGLang's own resolution; ``--recorded`` reads the answers under ``golden/``
instead of running the engine. Every case file is checked before an engine is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import KVCacheConfigError


def add_parser(sub: Any, command: str) -> None:
    """The ``verify`` subparser, added to ``sub`` as ``command``."""
    from ..core.releases import NEWEST_VLLM

    verify = sub.add_parser(
        command, help="compare with SGLang's own code: case files (docs/sglang-bridge.md) or launch defaults"
    )
    verify.add_argument("--against", choices=["sglang", "vllm"], required=True,
                        help="the engine to compare with (vllm: docs/vllm-bridge.md)")  # fmt: skip
    verify.add_argument("cases", nargs="*", type=Path, help="case files or folders (default: cases/)")
    verify.add_argument("-v", "--verbose", action="store_true", help="every difference of every case")
    verify.add_argument(
        "--launch", nargs="?", const="", default=None, metavar="GRID",
        help="launch defaults: resolve each launch of GRID (a JSON list; default: the shipped grid) with "
        "SGLang's ServerArgs.resolve_once and with the planner, and diff every field",
    )  # fmt: skip
    verify.add_argument("--weights", action="store_true",
                        help="the weight catalog (cases/weights/): the planner's weights per rank and load refusals "
                        "against the engine's recorded model builds (golden/sglang-<v>-weights, "
                        "golden/vllm-<v>-weights; docs/weights.md)")
    verify.add_argument("--recorded", action="store_true",
                        help="use the engine's recorded answers (golden/sglang-*, golden/vllm-*; no engine needed)")
    verify.add_argument("--vllm-version", default=None, metavar="X",
                        help=f"with --against vllm --recorded: the release (default {NEWEST_VLLM.text})")  # fmt: skip
    verify.add_argument(
        "--sglang-version", default=None, metavar="X",
        help="the SGLang release to check (default: the installed one; with --recorded the newest recorded); "
        "with --launch live it must be the installed one",
    )  # fmt: skip
    verify.add_argument("--record", type=Path, default=None, metavar="DIR", help="write SGLang's live answers to DIR")
    verify.add_argument("--jobs", type=int, default=None, help="resolution workers (default: the CPUs, at most 8)")
    verify.add_argument("--show-equal", action="store_true", help="also list the launches that agree")
    verify.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    """``verify --against sglang``: the catalog's cases through SGLang's own sizing and pool
    builders (:mod:`kvstrategies.sglang.bridge.verify`), or with ``--launch [GRID]`` the
    launch defaults against SGLang's own resolution (:mod:`kvstrategies.sglang.bridge.launch_check`)."""
    if args.weights:
        return _verify_weights(args)
    if args.launch is not None and args.against == "vllm":
        raise KVCacheConfigError("verify: --launch compares SGLang's launch defaults; use --against sglang")
    if args.launch is not None:
        if args.cases:
            raise KVCacheConfigError("verify: case files and --launch are separate checks; run them one at a time")
        from ..sglang.bridge.launch_check import run_verify_launch

        grid = Path(args.launch) if args.launch else None
        return run_verify_launch(
            grid, recorded=args.recorded, record=args.record, workers=args.jobs, as_json=args.json,
            show_equal=args.show_equal, sglang_version=args.sglang_version,
        )
    other = {"vllm": ("sglang_version", "--sglang-version", "sglang"),
             "sglang": ("vllm_version", "--vllm-version", "vllm")}  # fmt: skip
    dest, flag, engine = other[args.against]
    if getattr(args, dest, None) is not None:  # the other engine's release would be ignored
        raise KVCacheConfigError(f"verify: {flag} goes with --against {engine}; drop it or verify against {engine}")
    given = [flag for flag, value in (("--record", args.record), ("--jobs", args.jobs)) if value is not None]
    given += [flag for flag, value in (("--show-equal", args.show_equal), ("--json", args.json)) if value]
    if given:
        raise KVCacheConfigError(f"verify: {' and '.join(given)} go{'es' if len(given) == 1 else ''} with --launch")
    if args.against == "vllm":
        from ..vllm.bridge.verify import format_report as format_vllm
        from ..vllm.bridge.verify import verify as verify_vllm

        if args.recorded:
            from ..core.releases import NEWEST_VLLM, parse_release
            from ..vllm.bridge.verify import verify_recorded as verify_vllm_recorded

            release = parse_release(args.vllm_version or NEWEST_VLLM.text, "vllm", field="--vllm-version")
            recorded = Path(__file__).resolve().parents[2] / "golden" / f"vllm-{release.text}"
            vllm_report = verify_vllm_recorded(_case_paths(args.cases, vllm=True), recorded, release.text)
        else:
            vllm_report = verify_vllm(_case_paths(args.cases, vllm=True))
        for line in format_vllm(vllm_report, verbose=args.verbose):
            print(line)
        return 0 if vllm_report.ok else 1
    from ..sglang.bridge.verify import format_report, verify, verify_recorded

    paths = _case_paths(args.cases)
    if args.recorded:
        from ..core.releases import parse_release

        release = parse_release(args.sglang_version)
        recorded = Path(__file__).resolve().parents[2] / "golden" / f"sglang-{release.text}"
        report = verify_recorded(paths, recorded, release.text)
    else:
        report = verify(paths, args.sglang_version)
    for line in format_report(report, verbose=args.verbose):
        print(line)
    return 0 if report.ok else 1


def _verify_weights(args: argparse.Namespace) -> int:
    """``verify --against ENGINE --weights``: the planner against the recorded weights (no engine)."""
    if args.launch is not None or args.cases or args.record is not None:
        raise KVCacheConfigError(
            "verify: --weights compares the weight catalog with the engine's recordings; give only --against and "
            "the release (--sglang-version or --vllm-version); record them with tools/record_weights.py "
            "(docs/weights.md)"
        )
    from ..core.releases import NEWEST_VLLM, parse_release

    if args.against == "vllm":
        if args.sglang_version is not None:
            raise KVCacheConfigError("verify: --sglang-version goes with --against sglang; give --vllm-version")
        from ..vllm.planner.weight_catalog import verify_lines as verify_vllm_lines

        release = parse_release(args.vllm_version or NEWEST_VLLM.text, "vllm", field="--vllm-version")
        ok, lines = verify_vllm_lines(release.text)
    else:
        if args.vllm_version is not None:
            raise KVCacheConfigError("verify: --vllm-version goes with --against vllm; give --sglang-version")
        from ..sglang.weight_catalog import verify_lines

        ok, lines = verify_lines(parse_release(args.sglang_version).text)  # golden/sglang-<v>-weights
    for line in lines:
        print(line)
    return 0 if ok else 1


def _case_paths(given_paths: Sequence[Path], *, vllm: bool = False) -> list[Path]:
    """The case files of ``verify``'s arguments (default: the catalog, cases/; for vLLM also its
    vLLM-only deployments, cases/vllm/)."""
    paths: list[Path] = []
    default = [Path("cases"), Path("cases", "vllm")] if vllm and Path("cases", "vllm").is_dir() else [Path("cases")]
    for given in given_paths or default:
        if given.is_dir():
            paths.extend(sorted(given.glob("*.json")))
        elif given.is_file():
            paths.append(given)
        else:
            raise KVCacheConfigError(f"verify: no case file or folder {given}")
    if not paths:
        raise KVCacheConfigError("verify: no case files found; pass case files or a folder of them")
    from ..case_validation import validate_case_files

    validate_case_files(paths)  # every case checked before SGLang is imported or a child process starts
    return paths
