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


def test_trtllm_mha_keeps_16_to_128_and_snaps_the_rest_to_64() -> None:
    """trtllm_mha keeps page 16, 32, 64 or 128 and snaps others to 64
    (ServerArgs._handle_attention_backend_compatibility)."""
    b200 = lookup_gpu("B200")
    for page, snapped in ((16, 16), (32, 32), (128, 128), (17, 64), (8, 64)):
        settings = LaunchSettings(attention_backend="trtllm_mha", page_size=page)
        assert resolve_launch_defaults(LLAMA, b200, settings=settings).page_size == snapped, page


def test_max_prefill_tokens_defaults_to_16384() -> None:
    """ServerArgs.max_prefill_tokens = 16384 unless given."""
    h100 = lookup_gpu("H100")
    assert resolve_launch_defaults(LLAMA, h100).max_prefill_tokens == 16384
    given = LaunchSettings(max_prefill_tokens=8192)
    assert resolve_launch_defaults(LLAMA, h100, settings=given).max_prefill_tokens == 8192


def test_every_pre_0_5_19_source_names_a_server_args_function() -> None:
    """Before 0.5.19 each launch step cites the ServerArgs method (or helper) that ran it: a full
    ``sglang.srt.<module>.<function>`` path, never a bare module or a bare method name."""
    import re

    from kvstrategies.planner.launch_defaults import core
    from kvstrategies.releases import parse_release

    hooks = {name: hook for name, hook in vars(core).items() if isinstance(hook, core.SglangHook)}
    assert len(hooks) >= 10
    for name, hook in hooks.items():
        source = hook.at(parse_release("0.5.18"))
        assert source == hook.server_args and hook.at(parse_release("0.5.19")) == hook.arg_groups
        assert re.match(r"^sglang\.srt\.[A-Za-z_.]+\.[A-Za-z_]\w*( \(.*\))?$", source), (name, source)


def test_dp_attention_2_turns_the_breakable_prefill_graph_off_until_0_5_16() -> None:
    """SGLang 0.5.16 disables the breakable prefill cuda graph under DP attention (attn DP 2 is
    enough: ServerArgs._handle_cuda_graph_config); 0.5.17 keeps it."""
    from kvstrategies.releases import parse_release

    h100 = lookup_gpu("H100")
    old = resolve_launch_defaults(LLAMA, h100, tp_size=2, attn_dp_size=2, release=parse_release("0.5.16"))
    new = resolve_launch_defaults(LLAMA, h100, tp_size=2, attn_dp_size=2, release=parse_release("0.5.17"))
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "breakable")


def test_kv_budget_keeps_half_a_gib() -> None:
    """``int((avail - pre x (1 - mfs)) x 2**30)``: 5.5 - 10 x 0.5 = 0.5 GiB -> 536,870,912 B
    (sglang.srt.model_executor.model_runner.ModelRunner.profile_max_num_token)."""
    from kvstrategies.planner.launch_defaults import kv_budget_bytes

    assert kv_budget_bytes(10.0, 5.5, 0.5) == 536_870_912


def test_dp_attention_graph_reserve_adds_the_wide_term_above_300() -> None:
    """DP attention reserves ``3 x dmb x dp`` MiB, plus ``1.5 x dmb x dp`` when dmb > 300
    (ServerArgs._handle_gpu_memory_settings): TP 2, attn DP 2: dmb 299 -> 300 adds 2 + 3 x 2 = 8 MiB,
    300 -> 301 adds 8 + 1.5 x 301 x 2 = 911 MiB."""
    h100 = lookup_gpu("H100")
    reserve = {
        dmb: resolve_launch_defaults(
            LLAMA, h100, tp_size=2, attn_dp_size=2, settings=LaunchSettings(cuda_graph_max_bs=dmb)
        ).reserved_mib  # fmt: skip
        for dmb in (299, 300, 301)
    }
    assert (reserve[300] - reserve[299], reserve[301] - reserve[300]) == (8, 8 + 1.5 * 301 * 2)


def test_speculative_checks_accept_their_boundary_cases() -> None:
    """STANDALONE without DP attention and DFLASH at PP 1 resolve; EAGLE top-k 2 on trtllm_mha is
    refused (speculative_hook._handle_eagle_family / _handle_dflash)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    b200 = lookup_gpu("B200")
    standalone = LaunchSettings(speculative_algorithm="STANDALONE", speculative_draft_model_path="draft")
    assert resolve_launch_defaults(LLAMA, b200, settings=standalone).speculative_num_steps == 3
    dflash = LaunchSettings(speculative_algorithm="DFLASH", speculative_draft_model_path="draft")
    assert resolve_launch_defaults(LLAMA, b200, pp_size=1, settings=dflash).speculative_num_steps == 1
    top2 = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=2,
                          speculative_num_draft_tokens=4, attention_backend="trtllm_mha")  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="trtllm_mha backend only supports topk = 1"):
        resolve_launch_defaults(LLAMA, b200, settings=top2)


def test_mamba_no_buffer_needs_page_1() -> None:
    """A Mamba radix cache without the extra-buffer strategy takes no_buffer at page 1 (or unset)
    and refuses page 2 (sglang.srt.arg_groups.mamba_hook.validate_mamba_no_buffer)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    nemotron = LaunchModelFacts(architectures=("NemotronHForCausalLM",), is_mamba_radix=True)
    h100 = lookup_gpu("H100")
    for page in (None, 1):
        res = resolve_launch_defaults(nemotron, h100, settings=LaunchSettings(page_size=page))
        assert res.mamba_radix_cache_strategy == "no_buffer"
    with pytest.raises(KVCacheConfigError, match="validate_mamba_no_buffer"):
        resolve_launch_defaults(nemotron, h100, settings=LaunchSettings(page_size=2))


def test_qwen3_vl_on_a_large_hopper_lifts_the_decode_graph_to_512_requests() -> None:
    """Qwen3-VL on a >= 60 GiB Hopper: the decode graph batch follows --max-running-requests up to
    512 (arg_groups.model_overrides.qwen3_vl.expand_multimodal_decode_graph); 513 keeps the tier's 256."""
    qwen3_vl = LaunchModelFacts(
        architectures=("Qwen3VLForConditionalGeneration",), model_type="qwen3_vl", is_multimodal=True,
        context_length=131072,
    )  # fmt: skip
    h200 = lookup_gpu("H200")
    graphs = [
        resolve_launch_defaults(qwen3_vl, h200, settings=LaunchSettings(max_running_requests=mrr)).cuda_graph_max_bs
        for mrr in (300, 512, 513)
    ]
    assert graphs == [300, 512, 256]


def test_dflash_refuses_dp_attention_2() -> None:
    """DFLASH with attention DP 2 needs --enable-dp-lm-head (speculative_hook._handle_dflash)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    dflash = LaunchSettings(speculative_algorithm="DFLASH", speculative_draft_model_path="draft")
    with pytest.raises(KVCacheConfigError, match="enable-dp-lm-head"):
        resolve_launch_defaults(LLAMA, lookup_gpu("B200"), tp_size=2, attn_dp_size=2, settings=dflash)


def test_nemotron_h_on_b200_takes_trtllm_mha_only_at_top_k_1() -> None:
    """Nemotron-H on sm100: trtllm_mha without speculation or with top-k 1, triton for top-k 2
    (arg_groups.model_overrides.nemotron_h._nemotron_h_overrides)."""
    nemotron = LaunchModelFacts(architectures=("NemotronHForCausalLM",), is_mamba_radix=True, num_kv_heads=8)
    b200 = lookup_gpu("B200")
    backends = [
        resolve_launch_defaults(
            nemotron, b200,
            settings=LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=k,
                                    speculative_num_draft_tokens=drafts),
        ).attention_backend
        for k, drafts in ((1, 4), (2, 6))
    ]  # fmt: skip
    assert backends == ["trtllm_mha", "triton"]


def test_dsa_dcp_refuses_index_kpool_2_on_cuda() -> None:
    """--dcp-size 2 with a DSA model: index_kpool 1 resolves, 2 is refused
    (arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    def dsa(kpool: int) -> LaunchModelFacts:
        return LaunchModelFacts(architectures=("DeepseekV32ForCausalLM",), is_mla=True, is_dsa=True,
                                index_kpool=kpool, num_kv_heads=128)  # fmt: skip

    h200 = lookup_gpu("H200")
    assert resolve_launch_defaults(dsa(1), h200, tp_size=8, dcp_size=2).attention_backend == "dsa"
    with pytest.raises(KVCacheConfigError, match="index_kpool=2"):
        resolve_launch_defaults(dsa(2), h200, tp_size=8, dcp_size=2)


def test_npu_table_boundary_at_32_gib() -> None:
    """Ascend, TP 1: up to 32,768 MiB chunk 4,096 and decode graph 16; above it 8,192 and 64
    (sglang.srt.arg_groups.platform_hook.handle_platform_defaults)."""
    from kvstrategies.planner.gpus import Accelerator

    rows = [
        (res.chunked_prefill_size, res.cuda_graph_max_bs)
        for res in (resolve_launch_defaults(LLAMA, Accelerator("npu", mem, "npu")) for mem in (32768, 32769))
    ]
    assert rows == [(4096, 16), (8192, 64)]


def test_dp_attention_does_not_reclamp_a_deepep_graph_list_at_its_own_size() -> None:
    """DeepEP fixes the prefill graph list to the 2,048 default's buckets aligned to 8 (38 sizes,
    cuda_graph_hook.apply_deepep_adjustments); DP attention 2 with chunk 4,096 halves the chunk to
    2,048, not above max_bs 2,048, so the list stays (parallel_hook re-clamps only a larger one)."""
    moe = LaunchModelFacts(architectures=("Qwen3MoeForCausalLM",), context_length=40960, num_kv_heads=4)
    settings = LaunchSettings(moe_a2a_backend="deepep", chunked_prefill_size=4096)
    res = resolve_launch_defaults(moe, lookup_gpu("H100"), tp_size=2, attn_dp_size=2, settings=settings)
    assert (res.chunked_prefill_size, res.prefill_graph_max_bs, res.prefill_graph_bs_count) == (2048, 2048, 38)


def test_reserve_counts_at_least_2048_prefill_tokens() -> None:
    """Chunked prefill off: ``tokens = max(max_prefill_tokens, 2048)`` in ``R = 512 + 1.5 tokens + ...``
    (memory_hook.handle_gpu_memory_settings); on a 46,068 MiB L40S (no 10,240 floor) 1,024 and
    2,048 reserve the same, 4,096 adds 1.5 x 2,048 = 3,072 MiB."""
    l40s = lookup_gpu("L40S")
    reserve = {
        tokens: resolve_launch_defaults(
            LLAMA, l40s, settings=LaunchSettings(chunked_prefill_size=-1, max_prefill_tokens=tokens)
        ).reserved_mib
        for tokens in (1024, 2048, 4096)
    }
    assert reserve[1024] == reserve[2048]
    assert reserve[4096] - reserve[2048] == 1.5 * 2048


def test_eagle_top_k_2_backend_check_applies_only_above_page_1() -> None:
    """Top-k > 1 at page > 1 needs flashinfer, fa3 or triton (speculative_hook._handle_eagle_family):
    torch_native passes with the page unset and is refused at page 2."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    def eagle(page: int | None) -> LaunchSettings:
        return LaunchSettings(
            speculative_algorithm="EAGLE",
            speculative_num_steps=3,
            speculative_eagle_topk=2,
            speculative_num_draft_tokens=6,
            page_size=page,
            attention_backend="torch_native",
        )

    h100 = lookup_gpu("H100")
    assert resolve_launch_defaults(LLAMA, h100, settings=eagle(None)).attention_backend == "torch_native"
    with pytest.raises(KVCacheConfigError, match="page_size > 1 needs"):
        resolve_launch_defaults(LLAMA, h100, settings=eagle(2))


def test_reserve_counts_no_decode_graph_as_zero_batches() -> None:
    """``reserved_memory_mib`` reads an unset decode-graph batch as 0: the DP-attention term
    ``3 x dmb x dp`` then adds nothing, exactly as dmb 0 (memory_hook.handle_gpu_memory_settings)."""
    from dataclasses import replace

    from kvstrategies.planner.launch_defaults import reserved_memory_mib
    from kvstrategies.planner.launch_defaults.core import LaunchInputs

    l40s = lookup_gpu("L40S")
    inp = LaunchInputs(LLAMA, l40s, 2, 1, 2)
    res = resolve_launch_defaults(LLAMA, l40s, tp_size=2, attn_dp_size=2)
    unset, zero = replace(res, cuda_graph_max_bs=None), replace(res, cuda_graph_max_bs=0)
    assert reserved_memory_mib(inp, unset) == reserved_memory_mib(inp, zero)
    assert reserved_memory_mib(inp, replace(res, cuda_graph_max_bs=1)) - reserved_memory_mib(inp, zero) == 2 + 3 * 2


def test_speculative_step_reads_an_unset_page_as_page_1() -> None:
    """``speculative_step`` on its own (it is public) treats an unset page as 1: top-k 2 with
    torch_native passes the page > 1 backend check."""
    from dataclasses import replace

    from kvstrategies.planner.launch_defaults import speculative_step
    from kvstrategies.planner.launch_defaults.core import LaunchInputs

    h100 = lookup_gpu("H100")
    settings = LaunchSettings(
        speculative_algorithm="EAGLE",
        speculative_num_steps=3,
        speculative_eagle_topk=2,
        speculative_num_draft_tokens=6,
        attention_backend="torch_native",
    )
    res = replace(resolve_launch_defaults(LLAMA, h100, settings=settings), page_size=None)
    assert speculative_step(LaunchInputs(LLAMA, h100, settings=settings), res).page_size is None
