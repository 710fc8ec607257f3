"""Launch-default and planner rules the worked launches left unpinned (found by
``tools/mutation_check.py``), each with the value SGLang's ServerArgs resolves by hand."""

from __future__ import annotations

from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.launch_defaults import LaunchModelFacts, LaunchSettings, resolve_launch_defaults

LLAMA = LaunchModelFacts(architectures=("LlamaForCausalLM",), context_length=131072, num_kv_heads=8)
DEEPSEEK = LaunchModelFacts(architectures=("DeepseekV3ForCausalLM",), is_mla=True, num_kv_heads=128)


def test_eagle_top1_at_page_1_keeps_fa3_on_hopper() -> None:
    """``is_no_spec_infer_or_topk_one``: EAGLE with top-k 1 at page 1 still takes fa3 on sm90
    (sglang.srt.server_args.ServerArgs.get_default_attn_backend); top-k 2 does not."""
    h100 = lookup_gpu("H100")
    top1 = LaunchSettings(speculative_algorithm="EAGLE", speculative_eagle_topk=1, page_size=1,
                          speculative_num_steps=3, speculative_num_draft_tokens=4)  # fmt: skip
    assert resolve_launch_defaults(LLAMA, h100, settings=top1).attention_backend == "fa3"
    top2 = LaunchSettings(speculative_algorithm="EAGLE", speculative_eagle_topk=2, page_size=1,
                          speculative_num_steps=3, speculative_num_draft_tokens=4)  # fmt: skip
    assert resolve_launch_defaults(LLAMA, h100, settings=top2).attention_backend != "fa3"


def test_hip_mla_backend_counts_kv_heads_over_attention_tp() -> None:
    """On HIP an MLA model takes aiter when ``max(1, kv_heads // max(1, tp // attn_dp))`` is 16 or
    128 (get_default_attn_backend): DeepSeek-V3's 128 heads at TP 1 -> 128 -> aiter; at TP 2 -> 64
    -> triton; at TP 8 -> 16 -> aiter."""
    mi300 = lookup_gpu("MI300X")
    backends = [resolve_launch_defaults(DEEPSEEK, mi300, tp_size=tp).attention_backend for tp in (1, 2, 8)]
    assert backends == ["aiter", "triton", "aiter"]


def test_flashmla_and_trtllm_mla_page_snaps() -> None:
    """flashmla forces page 64; trtllm_mla keeps 32 or 64 and snaps anything else to 64
    (ServerArgs._handle_attention_backend_compatibility)."""
    h200, b200 = lookup_gpu("H200"), lookup_gpu("B200")
    flash = LaunchSettings(attention_backend="flashmla", page_size=16)
    assert resolve_launch_defaults(DEEPSEEK, h200, tp_size=8, settings=flash).page_size == 64
    for page, snapped in ((32, 32), (64, 64), (65, 64), (16, 64)):
        trt = LaunchSettings(attention_backend="trtllm_mla", page_size=page)
        assert resolve_launch_defaults(DEEPSEEK, b200, tp_size=8, settings=trt).page_size == snapped, page
