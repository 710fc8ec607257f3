"""The README's Python snippets as one script: plan a model's KV cache (no torch), build the
pools on ``meta``, then write and read K/V in a small what-if pool on the CPU.

Run from the repository root: ``python examples/plan_and_build.py`` (build and write need torch).
"""

from __future__ import annotations

# --- README: In an engine -------------------------------------------------------------------------
from kvstrategies import KVCacheSettings, ParallelLayout, build, parse_hf_config, plan, resolve_kv_cache_dtype
from kvstrategies.presets import load_preset_config

config = load_preset_config("llama-3.1-8b")  # or json.load(open("path/to/config.json"))
geometry = parse_hf_config(config)
ctx = KVCacheSettings(
    geometry=geometry,
    kv_cache_dtype=resolve_kv_cache_dtype("fp8_e4m3", geometry.model_dtype),
    page_size=64,
    parallel=ParallelLayout(tp_size=8),
)
planned = plan(ctx, available_bytes=40 * 2**30)
print(planned.sizes.max_total_num_tokens, planned.sizes.max_running_requests)
pools = build(planned, "meta")  # or "cuda:0"; allocates exactly planned.layout
# --- end ------------------------------------------------------------------------------------------

# --- README: Writing K/V --------------------------------------------------------------------------
import torch

small = plan(ctx, available_bytes=40 * 2**30, pool_max_tokens=4096)  # a small what-if pool
pools = build(small, "cpu")  # or "cuda:0": Triton kernels on CUDA, a torch reference elsewhere
kv, req, alloc = pools.token_to_kv_pool, pools.req_to_token_pool, pools.allocator
row = req.alloc_rows(1)[0]
loc = alloc.alloc(64)  # token slots, whole pages of page_size
req.write((row, slice(0, 64)), loc.to(torch.int32))
layer_id, head_dim = 0, ctx.geometry.head_dim
heads = ctx.geometry.num_kv_heads(ctx.parallel.attn_tp_size)  # per rank: max(1, KV heads // TP)
cache_k = torch.randn(64, heads, head_dim, dtype=torch.bfloat16)
cache_v = torch.randn(64, heads, head_dim, dtype=torch.bfloat16)
kv.set_kv_buffer(layer_id, loc, cache_k, cache_v)  # global layer id; (N, H, D) inputs
k = kv.get_key_buffer(layer_id)[loc]  # stored as FP8 here: compare after dequantizing
# --- end ------------------------------------------------------------------------------------------

assert torch.equal(k.float(), cache_k.to(k.dtype).float())  # FP8 without scales: a plain cast
print(f"wrote {tuple(cache_k.shape)} K/V for layer {layer_id}; read back {tuple(k.shape)} ({k.dtype})")
