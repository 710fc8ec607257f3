"""Time planning at large sizes: 200-layer models at TP 64, 10^7-token pools, 2**62-byte budgets.

Usage: ``python tools/bench_large.py [--repeat N]``. Prints, per scenario, the median wall time
of ``parse_case`` (config to context), ``plan`` (strategy, sizes, layout) and a ``meta`` build,
in milliseconds. Planning never imports torch; the build column does (first build pays it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from kvstrategies.api import build, plan
from kvstrategies.case import parse_case
from kvstrategies.presets import load_preset_config

GIB = 2**30


def _dense_200() -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 200,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 8192,
        "max_position_embeddings": 131072,
    }


def scenarios() -> dict[str, dict[str, Any]]:
    """Case dicts by name (the case-file format of :mod:`kvstrategies.case`)."""
    gpt_oss = {**load_preset_config("gpt-oss-120b"), "num_hidden_layers": 200,
               "layer_types": ["sliding_attention", "full_attention"] * 100}  # fmt: skip
    nemotron = {**load_preset_config("nemotron-h-8b"), "hybrid_override_pattern": "M-M*" * 50}
    dsv4 = {**load_preset_config("deepseek-v4-flash"), "num_hidden_layers": 200,
            "compress_ratios": [0, 4, 128, 4] * 50 + [0]}  # fmt: skip
    return {
        "dense 200L tp64": {"hf_config": _dense_200(), "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB},
        "mla 200L tp64": {"hf_config": {**load_preset_config("deepseek-v3"), "num_hidden_layers": 200},
                          "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB},  # fmt: skip
        "dsa 200L tp64": {"hf_config": {**load_preset_config("deepseek-v3.2"), "num_hidden_layers": 200},
                          "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB},  # fmt: skip
        "hybrid-swa 200L tp64": {"hf_config": gpt_oss, "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB},
        "mamba 200L tp64": {"hf_config": nemotron, "tp_size": 64, "page_size": 64, "available_bytes": 40 * GIB},
        "dsv4 200L tp64": {"hf_config": dsv4, "tp_size": 64, "page_size": 256, "available_bytes": 400 * GIB},
        "dense 200L pp8": {"hf_config": _dense_200(), "tp_size": 8, "pp_size": 8, "pp_rank": 7, "page_size": 64,
                           "available_bytes": 40 * GIB},  # fmt: skip
        "llama-8b 1e7 tokens": {"preset": "llama-3.1-8b", "available_bytes": 2**40, "max_tokens": 10**7},
        "llama-8b 2**62 B": {"preset": "llama-3.1-8b", "available_bytes": 2**62},
    }


def _median_ms(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'scenario':<24}{'parse ms':>10}{'plan ms':>10}{'build ms':>10}{'tokens':>20}{'tensors':>9}")
    for name, case_dict in scenarios().items():
        parse_ms, case = _median_ms(lambda c=case_dict: parse_case(c), args.repeat)  # type: ignore[misc]
        plan_ms, planned = _median_ms(
            lambda c=case: plan(c.settings, c.available_bytes, max_tokens=c.max_tokens),  # type: ignore[misc]
            args.repeat,
        )
        build_ms, pools = _median_ms(lambda p=planned: build(p, "meta"), args.repeat)  # type: ignore[misc]
        tensors = sum(len(pool.layout.buffers) for pool in pools.pools)
        tokens = planned.pool_sizes.max_total_num_tokens
        print(f"{name:<24}{parse_ms:>10.2f}{plan_ms:>10.2f}{build_ms:>10.2f}{tokens:>20,}{tensors:>9}")


if __name__ == "__main__":
    main()
