#!/usr/bin/env python3
"""Record the weights each rank holds, from SGLang's (or vLLM's) own model built on ``meta``.

    .venv-sglang-0.5.23/bin/python tools/record_weights.py            # write golden/sglang-0.5.23-weights/
    .venv-sglang-0.5.23/bin/python tools/record_weights.py --check    # the live SGLang answers as recorded?
    .venv-sglang-0.5.23/bin/python tools/record_weights.py --case qwen3-8b-h100-tp1   # one case
    .venv-vllm/bin/python tools/record_weights.py --engine vllm      # write golden/vllm-<v>-weights/

For every case of ``cases/weights/`` (:mod:`kvstrategies.sglang.weight_catalog`) the bridge
(:mod:`kvstrategies.sglang.bridge.model_on_meta`) builds SGLang's model class on ``meta`` for
TP rank 0 of each pipeline stage, in a forked process, and this writes one JSON per case: the
bytes per group, the total per rank, the model class and quantization method SGLang chose, which
``process_weights_after_loading`` ran, or SGLang's refusal (exception type and message). Run it
in an SGLang environment (``python tools/sglang_env.py 0.5.23 DIR``); docs/weights.md.

With ``--engine vllm`` the cases vLLM's planner takes
(:mod:`kvstrategies.vllm.planner.weight_catalog`) are
built by vLLM's own ``initialize_model`` for TP rank 0 of each pipeline stage
(:mod:`kvstrategies.vllm.bridge.model_weights`), in a vLLM environment (``python tools/vllm_env.py
0.34.0 DIR``), and written to ``golden/vllm-<v>-weights/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvstrategies.sglang.weight_catalog import WeightCase, catalog, recording_dir  # noqa: E402

#: what a recording keeps of a built rank (the per-tensor list stays out: it is SGLang's naming)
KEPT = ("groups", "total", "buffers", "environment", "launch", "model_class", "quantization", "dtype", "after_loading",
        "refusal")


def case_files(case: WeightCase) -> dict[str, Any]:
    """The checkpoint files SGLang reads for ``case`` (config.json, hf_quant_config.json), as
    published; only ``auto_map`` is dropped (it would make transformers fetch remote code)."""
    from kvstrategies.planner.model_source import resolve_model
    from kvstrategies.presets import load_preset_config

    source = resolve_model(case.model_ref())
    files: dict[str, Any] = {}
    if source.preset is not None:
        files["config.json"] = load_preset_config(source.preset)
    else:
        assert source.folder is not None, f"{case.name}: a weight case names a preset or a checkpoint folder"
        for name in ("config.json", "hf_quant_config.json"):
            path = Path(source.folder) / name
            if path.is_file():
                files[name] = json.loads(path.read_text(encoding="utf-8"))
    config = dict(files["config.json"])
    config.pop("auto_map", None)
    files["config.json"] = config
    return files


def record_vllm_case(case: WeightCase) -> dict[str, Any]:
    """The recording of one case under the installed vLLM."""
    from kvstrategies.sglang.bridge.model_on_meta import config_folder
    from kvstrategies.vllm.bridge.model_weights import build_weights
    from kvstrategies.vllm.planner.weight_catalog import vllm_layout

    tp, dp = vllm_layout(case)
    with config_folder(case_files(case)) as folder:
        version, ranks = build_weights(folder, case.gpu, tp, case.pp, case.quantization,
                                       expert_parallel=case.ep > 1, dp=dp)  # fmt: skip
    return {"vllm": version, "case": {k: v for k, v in vars(case).items() if k != "name"}, "ranks": ranks}


def record_case(case: WeightCase, version: str) -> dict[str, Any]:
    """The recording of one case under the installed SGLang."""
    from kvstrategies.sglang.bridge import model_on_meta as meta

    files = case_files(case)
    with meta.config_folder(files) as folder:
        dep = meta.Deployment(folder=folder, gpu=case.gpu, tp=case.tp, ep=case.ep, pp=case.pp,
                              attn_dp=case.attn_dp, quantization=case.quantization)  # fmt: skip
        built = meta.build_deployment(dep)
    ranks = []
    for rank in built["ranks"]:
        kept = {k: rank[k] for k in ("world_rank", "pp_rank")}
        kept.update({k: rank[k] for k in KEPT if k in rank})
        ranks.append(kept)
    return {
        "sglang": version,
        "case": {k: v for k, v in vars(case).items() if k != "name"},
        "ranks": ranks,
    }


def _main_vllm(args: argparse.Namespace) -> int:
    from kvstrategies.vllm.bridge.model_weights import rank_summary
    from kvstrategies.vllm.bridge.runtime import import_vllm
    from kvstrategies.vllm.planner.weight_catalog import recording_dir as vllm_dir
    from kvstrategies.vllm.planner.weight_catalog import vllm_catalog

    version = import_vllm()
    out = vllm_dir(version)
    out.mkdir(parents=True, exist_ok=True)
    cases = [c for c in vllm_catalog(version) if not args.case or c.name in args.case]
    return _write_or_check(cases, out, record_vllm_case, rank_summary, check=args.check)


def _write_or_check(cases: list[WeightCase], out: Path, record: Callable[[WeightCase], dict[str, Any]],
                    summary: Callable[[dict[str, Any]], str], *, check: bool) -> int:  # fmt: skip
    """Record every case into ``out`` (or, with ``check``, compare with what ``out`` holds); the exit status."""
    differing = 0
    for case in cases:
        text = _dump(record(case))
        path = out / f"{case.name}.json"
        if check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            differing += not same
            print(f"{'same     ' if same else 'DIFFERENT'} {case.name}", flush=True)
            continue
        path.write_text(text, encoding="utf-8")
        print(f"{case.name}: {', '.join(summary(r) for r in json.loads(text)['ranks'])}", flush=True)
    if check:
        print(f"{len(cases) - differing} of {len(cases)} cases as recorded")
    return 1 if differing else 0


def _sglang_summary(rank: dict[str, Any]) -> str:
    return f"{rank['refusal']['type']}" if "refusal" in rank else f"{rank['total'] / 2**30:.2f} GiB"


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed recordings, write nothing")
    parser.add_argument("--case", action="append", default=[], help="only this case (repeatable)")
    parser.add_argument("--engine", choices=("sglang", "vllm"), default="sglang", help="whose model to build")
    args = parser.parse_args(argv)
    if args.engine == "vllm":
        return _main_vllm(args)

    from kvstrategies.sglang.bridge import model_on_meta as meta
    from kvstrategies.sglang.bridge.runtime import import_sglang

    meta.install_package_stubs()
    version = import_sglang()
    out = recording_dir(version)
    out.mkdir(parents=True, exist_ok=True)
    cases = [c for c in catalog() if not args.case or c.name in args.case]
    return _write_or_check(cases, out, lambda case: record_case(case, version), _sglang_summary, check=args.check)


if __name__ == "__main__":
    raise SystemExit(main())
