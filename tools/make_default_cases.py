#!/usr/bin/env python3
"""Write the Default-family base cases of the golden catalog into ``cases/``.

Deterministic and rerunnable: the same files, byte for byte, on every run (sorted keys,
two-space indent, trailing newline). One case per file, named ``default-<preset>-...``:

* every Default-family preset x {bf16, fp8_e4m3} x {TP 1, a TP that replicates KV heads} x
  {page 1, page 64}. The replicating TP is the smallest power of two above the model's total KV
  heads (each rank keeps one replicated head); for MLA models (one latent "head") it is TP 8;
* PP stages: the first and the last stage of llama-3.1-70b at pp 3 (80 layers: 26 / 27 / 27);
* EAGLE drafts on deepseek-v3 (draft layers from ``num_nextn_predict_layers`` = 1);
* a user token cap (``max_tokens``, SGLang ``--max-total-tokens``) that is not a page multiple.

Budget: 40 GiB per rank. Models whose stage holds many layers (>= 40) get a what-if pool of
1024 tokens and 8 requests (``pool_max_tokens``) so that the described pool stays small; the
sizing fields still hold the full 40 GiB sizes.

    python tools/make_default_cases.py            # (re)write the files
    python tools/make_default_cases.py --clean    # also delete default-* files no longer generated
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT / "cases"
PREFIX = "default-"
BUDGET = 40 * 2**30  # 42949672960 bytes per rank
MANY_LAYERS = 40
WHAT_IF = {"pool_max_tokens": 1024, "pool_max_running_requests": 8}

# The Default-family presets (geometry read from the shipped preset at run time).
PRESETS: tuple[str, ...] = (
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "mistral-7b",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "qwen3-8b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "phi-3-mini",
    "falcon-7b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "kimi-k2",
    "glm-4.5",
    "gemma-2-9b",
    "gemma-3-27b",
    "minimax-m2.5",
)
DTYPES = (("bf16", "bf16"), ("fp8", "fp8_e4m3"))
PAGES = (1, 64)


def _geometry(preset: str) -> tuple[int, bool, int]:
    """(total KV heads, MLA?, layers the PP split divides) of a shipped preset."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from kvstrategies.models import parse_hf_config
    from kvstrategies.presets import load_preset_config

    geometry = parse_hf_config(load_preset_config(preset))
    return geometry.total_num_kv_heads, geometry.use_mla, geometry.num_pp_layers


def replicating_tp(kv_heads: int, mla: bool) -> int:
    """Smallest power of two above the KV head count (TP 8 for MLA)."""
    if mla:
        return 8
    tp = 1
    while tp <= kv_heads:
        tp *= 2
    return tp


def _case(name: str, description: str, preset: str, layers: int, **fields: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "name": name,
        "description": description,
        "preset": preset,
        "available_bytes": BUDGET,
        **fields,
    }
    if layers >= MANY_LAYERS:
        case.update(WHAT_IF)
    return case


def base_cases() -> list[dict[str, Any]]:
    cases = []
    for preset in PRESETS:
        kv_heads, mla, layers = _geometry(preset)
        tps = (1, replicating_tp(kv_heads, mla))
        for tp in tps:
            for short, kv_dtype in DTYPES:
                for page in PAGES:
                    what = "TP 1" if tp == 1 else f"TP {tp} (> {kv_heads} KV heads: replicated)"
                    cases.append(
                        _case(
                            f"{PREFIX}{preset}-tp{tp}-{short}-p{page}",
                            f"{preset}, {what}, {kv_dtype} KV, page {page}, 40 GiB per rank",
                            preset,
                            layers,
                            tp_size=tp,
                            kv_cache_dtype=kv_dtype,
                            page_size=page,
                        )
                    )
    return cases


def special_cases() -> list[dict[str, Any]]:
    cases = []
    # PP 3 over 80 layers: stages of 26, 27, 27 layers (the last n % pp stages get one more).
    _, _, layers_70b = _geometry("llama-3.1-70b")
    for rank, stage_layers in ((0, 26), (2, 27)):
        for short, kv_dtype, page in (("bf16", "bf16", 1), ("fp8", "fp8_e4m3", 64)):
            cases.append(
                _case(
                    f"{PREFIX}llama-3.1-70b-pp3-rank{rank}-tp1-{short}-p{page}",
                    f"llama-3.1-70b, PP 3 stage {rank} ({stage_layers} of {layers_70b} layers), "
                    f"{kv_dtype} KV, page {page}",
                    "llama-3.1-70b",
                    stage_layers,
                    pp_size=3,
                    pp_rank=rank,
                    kv_cache_dtype=kv_dtype,
                    page_size=page,
                )
            )
    # EAGLE MTP draft: layers from num_nextn_predict_layers (1) of the target config.
    _, _, layers_v3 = _geometry("deepseek-v3")
    for short, kv_dtype, page in (("bf16", "bf16", 1), ("fp8", "fp8_e4m3", 64)):
        cases.append(
            _case(
                f"{PREFIX}deepseek-v3-tp8-{short}-p{page}-eagle",
                f"deepseek-v3, TP 8, {kv_dtype} KV, page {page}, EAGLE (1 MTP draft layer), 3 steps, 4 draft tokens",
                "deepseek-v3",
                layers_v3,
                tp_size=8,
                kv_cache_dtype=kv_dtype,
                page_size=page,
                speculative_algorithm="EAGLE",
                speculative_num_steps=3,
                speculative_eagle_topk=1,
                speculative_num_draft_tokens=4,
            )
        )
    # A user token cap below the profiled count and not a page multiple (100000 -> 99968 at page 64).
    _, _, layers_8b = _geometry("llama-3.1-8b")
    cases.append(
        _case(
            f"{PREFIX}llama-3.1-8b-tp1-bf16-p64-max-tokens",
            "llama-3.1-8b, TP 1, bf16 KV, page 64, --max-total-tokens 100000 (aligned down to 99968)",
            "llama-3.1-8b",
            layers_8b,
            kv_cache_dtype="bf16",
            page_size=64,
            max_tokens=100000,
        )
    )
    return cases


def render(case: dict[str, Any]) -> str:
    return json.dumps(case, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=CASES_DIR, help="catalog folder (default cases/)")
    parser.add_argument("--clean", action="store_true", help="delete default-* case files that are not generated")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cases = base_cases() + special_cases()
    names = [case["name"] for case in cases]
    if len(names) != len(set(names)):
        raise SystemExit("duplicate case names")
    written = 0
    for case in cases:
        path = args.out / f"{case['name']}.json"
        text = render(case)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
    removed = 0
    if args.clean:
        for path in sorted(args.out.glob(f"{PREFIX}*.json")):
            if path.stem not in names:
                path.unlink()
                removed += 1
    print(f"{len(cases)} default cases ({written} written, {removed} removed) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
