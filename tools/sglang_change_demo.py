#!/usr/bin/env python3
"""The maintainer's workflow on a simulated SGLang change: record, change a pool builder, record, diff.

    python tools/sglang_change_demo.py --change mha-page-padding --out /tmp/sglang-after
    python tools/diff_golden.py --dirs golden/sglang-0.5.23 /tmp/sglang-after

``--change`` monkeypatches one pool builder inside the installed SGLang for this process only,
as a refactor of SGLang's configurator might, then records SGLang's snapshots of the catalog
(``tools/record_golden.py --engine sglang --out DIR``):

* ``mha-page-padding``: ``KVCacheConfigurator._build_mha_kv_pool`` builds every MHA pool one page
  larger than its sizes (an off-by-one-page refactor);
* ``mla-bf16``: ``KVCacheConfigurator._build_mla_kv_pool`` stores MLA latents in bfloat16 whatever
  the KV dtype (a lost fp8 cast);
* ``none``: no change (the "before" recording).

Cases with their own ``env`` run in child processes that do not carry the patch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def _patch(change: str) -> None:
    from kvstrategies.sglang.bridge.runtime import import_sglang

    import_sglang()
    import torch
    from sglang.srt.mem_cache import kv_cache_configurator as kvc_mod

    cls = kvc_mod.KVCacheConfigurator
    if change == "mha-page-padding":
        original = cls._build_mha_kv_pool

        def padded(self: Any, *, max_total_num_tokens: int, **kwargs: Any) -> Any:
            return original(self, max_total_num_tokens=max_total_num_tokens + self.page_size, **kwargs)

        cls._build_mha_kv_pool = padded
    elif change == "mla-bf16":
        original_mla = cls._build_mla_kv_pool

        def bf16(self: Any, **kwargs: Any) -> Any:
            saved = self.kv_cache_dtype
            self.kv_cache_dtype = torch.bfloat16
            try:
                return original_mla(self, **kwargs)
            finally:
                self.kv_cache_dtype = saved

        cls._build_mla_kv_pool = bf16


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--change", choices=["none", "mha-page-padding", "mla-bf16"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("-k", dest="substrings", action="append", default=[])
    args = parser.parse_args()
    if args.change != "none":
        _patch(args.change)
    import record_golden

    extra = [f"-k{s}" for s in args.substrings]
    code = record_golden.main(["--engine", "sglang", "--out", str(args.out), "-q", *extra])
    return 0 if code in (0, 1) else code  # a changed SGLang differs from the project on purpose


if __name__ == "__main__":
    sys.exit(main())
