#!/usr/bin/env python3
# ruff: noqa: E501
"""Write the ``bridge-*`` catalog cases: coverage the SGLang bridge showed thin (issue 14).

PP stages, DCP, attention DP, speculative variants (targets and draft workers), page sizes, odd
budgets, DeepSeek-V4 with an explicit fp8 KV dtype (so SGLang builds its pool), Mamba slot counts
given and derived. Each case was checked against SGLang 0.5.23 (``kvstrategies verify --against
sglang cases/bridge-*.json``) before its snapshots were recorded.

    python tools/make_bridge_cases.py     # (re)writes cases/bridge-*.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
ODD = 23 * GIB + 123_456_789  # a budget no GiB float produces

CASES: list[tuple[str, str, dict[str, Any]]] = [
    # ---- pipeline-parallel stages ----
    ("pp2-rank0-llama-3.1-70b-tp4-fp8-p16", "PP 2, first stage", {"preset": "llama-3.1-70b", "tp_size": 4, "pp_size": 2, "pp_rank": 0, "kv_cache_dtype": "fp8_e4m3", "page_size": 16}),
    ("pp2-rank1-llama-3.1-70b-tp4-fp8-p16", "PP 2, last stage", {"preset": "llama-3.1-70b", "tp_size": 4, "pp_size": 2, "pp_rank": 1, "kv_cache_dtype": "fp8_e4m3", "page_size": 16}),
    ("pp4-rank3-llama-3.1-405b-tp8-bf16-p64", "PP 4, last of 126 layers", {"preset": "llama-3.1-405b", "tp_size": 8, "pp_size": 4, "pp_rank": 3, "kv_cache_dtype": "bf16", "page_size": 64}),
    ("pp3-rank1-qwen3-235b-a22b-tp4-bf16-p32", "PP 3 middle stage, page 32", {"preset": "qwen3-235b-a22b", "tp_size": 4, "pp_size": 3, "pp_rank": 1, "kv_cache_dtype": "bf16", "page_size": 32}),
    ("pp2-rank1-deepseek-v3-tp8-fp8-p64", "MLA, PP 2 last stage", {"preset": "deepseek-v3", "tp_size": 8, "pp_size": 2, "pp_rank": 1, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}),
    ("pp2-rank0-gpt-oss-120b-tp2-bf16-p64", "hybrid SWA, PP 2 first stage", {"preset": "gpt-oss-120b", "tp_size": 2, "pp_size": 2, "pp_rank": 0, "kv_cache_dtype": "bf16", "page_size": 64, "pool_max_tokens": 2048}),
    ("pp2-rank1-qwen3-next-80b-a3b-tp2-bf16-p64", "Mamba hybrid, PP 2 last stage, default layer split", {"preset": "qwen3-next-80b-a3b", "tp_size": 2, "pp_size": 2, "pp_rank": 1, "kv_cache_dtype": "bf16", "page_size": 64, "pool_max_tokens": 1024}),
    ("pp2-rank1-gemma-3-27b-tp2-bf16-p16", "Gemma 3 (all layers priced), PP 2", {"preset": "gemma-3-27b", "tp_size": 2, "pp_size": 2, "pp_rank": 1, "kv_cache_dtype": "bf16", "page_size": 16}),
    # ---- decode context parallel ----
    ("dcp2-deepseek-v3-tp8-bf16-p64", "MLA with DCP 2", {"preset": "deepseek-v3", "tp_size": 8, "dcp_size": 2, "kv_cache_dtype": "bf16", "page_size": 64}),
    ("dcp4-deepseek-v3-tp8-fp8-p64", "MLA with DCP 4", {"preset": "deepseek-v3", "tp_size": 8, "dcp_size": 4, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}),
    ("dcp8-kimi-k2-tp8-fp8-p64", "MLA with DCP 8", {"preset": "kimi-k2", "tp_size": 8, "dcp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}),
    ("dcp2-glm-5-tp8-fp8-p64", "DSA with DCP 2", {"preset": "glm-5", "tp_size": 8, "dcp_size": 2, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}),
    ("dcp4-deepseek-v3.2-tp8-bf16-p64", "DSA with DCP 4", {"preset": "deepseek-v3.2", "tp_size": 8, "dcp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64}),
    ("dcp2-deepseek-v3-tp8-bf16-p64-eagle-draft", "MTP draft under DCP 2: own sizing, adopted target sizes", {"preset": "deepseek-v3", "tp_size": 8, "dcp_size": 2, "kv_cache_dtype": "bf16", "page_size": 64, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "is_draft_worker": True, "pool_max_tokens": 4096}),
    # ---- attention data parallel ----
    ("attn-dp8-deepseek-v3-tp8-fp8-p64-mrr512", "attention DP 8, 512 requests", {"preset": "deepseek-v3", "tp_size": 8, "attn_dp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "max_running_requests": 512}),
    ("attn-dp4-qwen3-235b-a22b-tp4-bf16-p64", "attention DP 4, default requests", {"preset": "qwen3-235b-a22b", "tp_size": 4, "attn_dp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64}),
    ("attn-dp2-glm-4.5-tp8-fp8-p32-mrr100", "attention DP 2, 100 requests (odd split)", {"preset": "glm-4.5", "tp_size": 8, "attn_dp_size": 2, "kv_cache_dtype": "fp8_e4m3", "page_size": 32, "max_running_requests": 100}),
    ("attn-dp2-qwen3-next-80b-a3b-tp4-bf16-p64", "Mamba slots per DP shard", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "attn_dp_size": 2, "kv_cache_dtype": "bf16", "page_size": 64, "pool_max_tokens": 1024}),
    ("attn-dp2-gpt-oss-120b-tp2-bf16-p64", "hybrid SWA under attention DP 2", {"preset": "gpt-oss-120b", "tp_size": 2, "attn_dp_size": 2, "kv_cache_dtype": "bf16", "page_size": 64, "pool_max_tokens": 2048}),
    # ---- speculative decoding: targets ----
    ("spec-eagle3-llama-3.1-8b-tp1-bf16-p16", "EAGLE3 target, 1-layer draft", {"preset": "llama-3.1-8b", "kv_cache_dtype": "bf16", "page_size": 16, "speculative_algorithm": "EAGLE3", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "pool_max_tokens": 1024}),
    ("spec-eagle-topk4-deepseek-v3-tp8-fp8-p64", "MTP target, tree draft (topk 4, 8 tokens)", {"preset": "deepseek-v3", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}),
    ("spec-standalone-qwen3-8b-tp1-bf16-p32", "STANDALONE draft model", {"preset": "qwen3-8b", "kv_cache_dtype": "bf16", "page_size": 32, "speculative_algorithm": "STANDALONE", "eagle_draft_num_layers": 2, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}),
    ("spec-dflash-qwen3-8b-tp1-bf16-p1", "DFLASH, 4 draft layers", {"preset": "qwen3-8b", "kv_cache_dtype": "bf16", "page_size": 1, "speculative_algorithm": "DFLASH", "eagle_draft_num_layers": 4, "speculative_num_draft_tokens": 8}),
    ("spec-mtp-qwen3-next-80b-a3b-tp4-fp8-p64-mamba300", "Mamba MTP with max_mamba_cache_size given", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "max_running_requests": 48, "max_mamba_cache_size": 300, "pool_max_tokens": 1024}),
    ("spec-eagle3-gpt-oss-120b-tp1-bf16-p64-mrr32", "hybrid SWA EAGLE3 with a request cap", {"preset": "gpt-oss-120b", "kv_cache_dtype": "bf16", "page_size": 64, "speculative_algorithm": "EAGLE3", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "max_running_requests": 32, "pool_max_tokens": 2048}),
    # ---- speculative decoding: draft workers ----
    ("draft-eagle3-llama-3.1-8b-tp1-bf16-p16", "EAGLE3 draft worker", {"preset": "llama-3.1-8b", "kv_cache_dtype": "bf16", "page_size": 16, "speculative_algorithm": "EAGLE3", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "is_draft_worker": True, "pool_max_tokens": 1024}),
    ("draft-eagle-deepseek-v3-tp8-fp8-p64", "MTP draft worker, full budget", {"preset": "deepseek-v3", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "is_draft_worker": True}),
    ("draft-mtp-qwen3-next-80b-a3b-tp4-bf16-p64", "Mamba hybrid MTP draft worker", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "max_running_requests": 64, "is_draft_worker": True, "pool_max_tokens": 1024}),
    ("draft-eagle-glm-5-tp8-fp8-p64", "DSA MTP draft worker", {"preset": "glm-5", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "is_draft_worker": True, "pool_max_tokens": 4096}),
    # ---- page sizes ----
    ("page128-llama-3.1-8b-tp1-fp8", "page 128", {"preset": "llama-3.1-8b", "kv_cache_dtype": "fp8_e4m3", "page_size": 128}),
    ("page256-qwen3-30b-a3b-tp2-bf16", "page 256", {"preset": "qwen3-30b-a3b", "tp_size": 2, "kv_cache_dtype": "bf16", "page_size": 256}),
    ("page32-mixtral-8x7b-tp2-fp8-e5m2", "page 32, fp8_e5m2", {"preset": "mixtral-8x7b", "tp_size": 2, "kv_cache_dtype": "fp8_e5m2", "page_size": 32}),
    ("page16-gemma-2-9b-tp1-bf16", "Gemma 2 page 16", {"preset": "gemma-2-9b", "kv_cache_dtype": "bf16", "page_size": 16}),
    ("page128-mimo-v2-flash-tp8-bf16", "hybrid SWA page 128", {"preset": "mimo-v2-flash", "tp_size": 8, "kv_cache_dtype": "bf16", "page_size": 128, "pool_max_tokens": 4096}),
    # ---- odd budgets and caps ----
    ("odd-budget-llama-3.1-8b-tp1-bf16-p64", "23 GiB + 123,456,789 B", {"preset": "llama-3.1-8b", "kv_cache_dtype": "bf16", "page_size": 64, "available_bytes": ODD}),
    ("odd-budget-qwen3-next-80b-a3b-tp4-bf16-p64", "odd KV budget, Mamba slots derived", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "available_bytes": ODD, "pool_max_tokens": 1024}),
    ("odd-budget-nemotron-h-8b-tp1-bf16-p1-mamba64", "odd KV budget, 64 Mamba slots given", {"preset": "nemotron-h-8b", "kv_cache_dtype": "bf16", "page_size": 1, "available_bytes": 7 * GIB + 12345, "max_mamba_cache_size": 64, "pool_max_tokens": 1024}),
    ("small-budget-gpt-oss-20b-tp1-bf16-p16", "1 GiB + 1 B on hybrid SWA", {"preset": "gpt-oss-20b", "kv_cache_dtype": "bf16", "page_size": 16, "available_bytes": GIB + 1, "pool_max_tokens": 1024}),
    ("max-tokens-odd-qwen2.5-7b-tp1-bf16-p64", "--max-total-tokens 77,777 (not a page multiple)", {"preset": "qwen2.5-7b", "kv_cache_dtype": "bf16", "page_size": 64, "max_tokens": 77777}),
    ("max-tokens-gpt-oss-120b-tp1-bf16-p16", "hybrid SWA with a token cap", {"preset": "gpt-oss-120b", "kv_cache_dtype": "bf16", "page_size": 16, "max_tokens": 50001, "pool_max_tokens": 2048}),
    ("context-8k-llama-3.1-70b-tp8-bf16-p64", "--context-length 8192 (request estimate)", {"preset": "llama-3.1-70b", "tp_size": 8, "kv_cache_dtype": "bf16", "page_size": 64, "context_length": 8192}),
    ("noradix-mrr64-nemotron-h-56b-tp8-bf16-p64", "Mamba, radix off, 64 requests", {"preset": "nemotron-h-56b", "tp_size": 8, "kv_cache_dtype": "bf16", "page_size": 64, "disable_radix_cache": True, "max_running_requests": 64, "pool_max_tokens": 1024}),
    ("pd-decode-qwen3-next-80b-a3b-tp4-bf16-p64-mrr16", "Mamba hybrid, PD decode role", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "disaggregation_mode": "decode", "max_running_requests": 16, "pool_max_tokens": 1024, "pool_max_running_requests": 16}),
    ("pd-decode-llama-3.1-8b-tp1-bf16-p16-mrr24", "PD decode role: extra request slots", {"preset": "llama-3.1-8b", "kv_cache_dtype": "bf16", "page_size": 16, "disaggregation_mode": "decode", "max_running_requests": 24}),
    ("pd-decode-falcon-7b-tp2-fp8-p1-mrr200", "PD decode role, 200 requests: no extra slots, still DecodeReqToTokenPool", {"preset": "falcon-7b", "tp_size": 2, "kv_cache_dtype": "fp8_e4m3", "page_size": 1, "disaggregation_mode": "decode", "max_running_requests": 200}),
    ("context-override-gemma-2-9b-tp1-bf16-p1", "--context-length 32768 above the model's 8192, allowed by env (own SGLang process)", {"preset": "gemma-2-9b", "kv_cache_dtype": "bf16", "page_size": 1, "context_length": 32768, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}}),
    ("spec-mtp-kimi-linear-48b-a3b-tp4-bf16-p64-mrr32", "KDA MTP: dense conv window (no dedup)", {"preset": "kimi-linear-48b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "max_running_requests": 32, "pool_max_tokens": 1024}),
    ("pd-prefill-mtp-qwen3-next-80b-a3b-tp4-bf16-p64-mrr32", "Mamba MTP in the PD prefill role: no speculative state reserved", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "disaggregation_mode": "prefill", "speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "max_running_requests": 32, "pool_max_tokens": 1024}),
    ("extra-buffer-lazy-qwen3-next-80b-a3b-tp4-bf16-p64", "Mamba radix extra_buffer_lazy", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "mamba_radix_cache_strategy": "extra_buffer_lazy", "pool_max_tokens": 1024}),
    ("skip-lock-qwen3-next-80b-a3b-tp4-bf16-p64", "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK (own SGLang process)", {"preset": "qwen3-next-80b-a3b", "tp_size": 4, "kv_cache_dtype": "bf16", "page_size": 64, "env": {"SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": "1"}, "pool_max_tokens": 1024}),
    ("eagle3-tree-llama-3.1-8b-tp1-bf16-p16", "EAGLE3 tree: topk 8, 64 draft tokens", {"preset": "llama-3.1-8b", "kv_cache_dtype": "bf16", "page_size": 16, "speculative_algorithm": "EAGLE3", "eagle_draft_num_layers": 1, "speculative_num_steps": 5, "speculative_eagle_topk": 8, "speculative_num_draft_tokens": 64, "pool_max_tokens": 4096}),
    # ---- DeepSeek-V4 with the fp8 KV its launch resolves to ----
    ("dsv4-fp8-deepseek-v4-flash-tp8-p256", "explicit fp8_e4m3: SGLang builds the pool too", {"preset": "deepseek-v4-flash", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 256, "pool_max_tokens": 8192}),
    ("dsv4-fp8-deepseek-v4-pro-tp8-p256-cap-mrr64", "explicit fp8_e4m3, cap mode", {"preset": "deepseek-v4-pro", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 256, "max_running_requests": 64, "chunked_prefill_size": 8192, "pool_max_tokens": 8192}),
    ("dsv4-fp8-deepseek-v4-flash-tp4-p256-ratio0.2", "explicit fp8_e4m3, ratio 0.2", {"preset": "deepseek-v4-flash", "tp_size": 4, "kv_cache_dtype": "fp8_e4m3", "page_size": 256, "swa_full_tokens_ratio": 0.2, "pool_max_tokens": 8192}),
]


def main() -> int:
    out = ROOT / "cases"
    for suffix, description, fields in CASES:
        name = f"bridge-{suffix}"
        case = {"name": name, "description": f"{description} (checked against SGLang 0.5.23)",
                "available_bytes": 40 * GIB, **fields}
        (out / f"{name}.json").write_text(json.dumps(case, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(CASES)} cases written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
