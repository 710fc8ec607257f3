"""One test per launch rule the SGLang launch bridge showed the planner was missing.

Each docstring names the SGLang 0.5.23 source (module and function) the rule follows; the
recorded answers in ``golden/sglang-0.5.23-launch`` hold the same launches resolved by SGLang.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner import DeploymentRequest
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.launch.apply import case_fields, dflash_block_size, resolve_launch
from kvstrategies.sglang.launch.defaults import LaunchSettings, model_facts_from_hf_config, resolve_launch_defaults

H100, H200, B200 = lookup_gpu("H100-80GB"), lookup_gpu("H200"), lookup_gpu("B200")


def facts(preset: str):  # type: ignore[no-untyped-def]
    return model_facts_from_hf_config(load_preset_config(preset))


LLAMA, DSV3, DSV32 = facts("llama-3.1-8b"), facts("deepseek-v3"), facts("deepseek-v3.2")


def test_chunked_prefill_off_captures_no_prefill_graph() -> None:
    """``--chunked-prefill-size -1``: prefill graph ``max_bs`` -1, an empty batch list and so no
    graph reserve (non-MLA), activations from ``max_prefill_tokens``.
    SGLang: ``sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings`` / ``reserve_for_graph_mb``."""
    off = resolve_launch_defaults(LLAMA, H200, tp_size=8, settings=LaunchSettings(chunked_prefill_size=-1))
    assert (off.prefill_graph_max_bs, off.prefill_graph_bs_count, off.prefill_cuda_graph) == (-1, 0, "breakable")
    # 512 + 1.5 * 16384 + 1024 + 2 * 512, no prefill-graph term
    assert off.reserved_mib == 27136 and off.mem_fraction_static == 0.811
    mla = resolve_launch_defaults(DSV3, H200, tp_size=8, settings=LaunchSettings(chunked_prefill_size=-1))
    assert mla.prefill_graph_max_bs == -1 and mla.reserved_mib == 512 + 1.5 * 16384 + 1024 + 1024 + 1536


def test_pp_prefill_cap_only_for_a_breakable_graph() -> None:
    """PP > 1 disables the breakable prefill graph first, so the 8192 PP cap never applies by
    default (B200 keeps 16384). SGLang: ``sglang.srt.arg_groups.cuda_graph_hook.
    apply_cuda_graph_compatibility`` then ``memory_hook.handle_gpu_memory_settings``."""
    pp = resolve_launch_defaults(LLAMA, B200, tp_size=8, pp_size=2)
    assert pp.prefill_cuda_graph == "disabled"
    assert (pp.prefill_graph_max_bs, pp.prefill_graph_bs_count) == (16384, 74)


def test_pp_turns_the_overlap_scheduler_off() -> None:
    """PP > 1 forces ``disable_overlap_schedule`` after the Mamba strategy was chosen with
    overlap on (extra_buffer stays), so the plan's Mamba slots per request change.
    SGLang: ``sglang.srt.arg_groups.overrides._pipeline_parallel_overlap_disable``."""
    qwen_next = facts("qwen3-next-80b-a3b")
    one = resolve_launch_defaults(qwen_next, H200, tp_size=4)
    two = resolve_launch_defaults(qwen_next, H200, tp_size=4, pp_size=2)
    assert (one.disable_overlap_schedule, two.disable_overlap_schedule) == (False, True)
    assert two.mamba_radix_cache_strategy == one.mamba_radix_cache_strategy == "extra_buffer"
    req = DeploymentRequest("qwen3-next-80b-a3b", {"preset": "qwen3-next-80b-a3b"}, tp_size=4, pp_size=2, gpu=H200)
    launch = resolve_launch(req, req.hf_config())
    assert case_fields(req, "bfloat16", launch)["disable_overlap_schedule"] is True


def test_dp_attention_reclamps_only_an_enabled_prefill_graph() -> None:
    """DeepSeek-V3 on B200 (trtllm_mla: prefill graph already disabled) keeps max_bs 8192 under
    DP attention; with the graph on it is clamped to the per-DP chunk.
    SGLang: ``sglang.srt.arg_groups.parallel_hook.handle_data_parallelism``."""
    off = resolve_launch_defaults(DSV3, B200, tp_size=8, attn_dp_size=8)
    assert off.prefill_cuda_graph == "disabled" and (off.prefill_graph_max_bs, off.prefill_graph_bs_count) == (8192, 58)
    on = resolve_launch_defaults(DSV3, H200, tp_size=8, attn_dp_size=8)
    assert on.prefill_cuda_graph == "breakable" and on.prefill_graph_max_bs == 1024


def test_dcp_disables_the_prefill_graph_before_the_memory_step() -> None:
    """``--dcp-size > 1`` disables the breakable prefill graph before the fraction is computed.
    SGLang: ``sglang.srt.arg_groups.cuda_graph_hook.disable_breakable_cudagraph_if_incompatible``."""
    base = resolve_launch_defaults(LLAMA, H200, tp_size=8)
    dcp = resolve_launch_defaults(LLAMA, H200, tp_size=8, dcp_size=2)
    assert (base.prefill_cuda_graph, dcp.prefill_cuda_graph) == ("breakable", "disabled")
    assert (base.mem_fraction_static, dcp.mem_fraction_static) == (0.893, 0.897)  # 8 * 58 MiB less reserved
    assert resolve_launch_defaults(DSV3, H200, tp_size=8, dcp_size=2).mem_fraction_static == 0.897  # no 1536


def test_dsa_with_dcp_uses_trtllm_and_refuses_what_sglang_refuses() -> None:
    """DSA with DCP: both DSA backends ``trtllm`` even on Hopper; a topk other than 1 or PD
    disaggregation is refused. SGLang: ``sglang.srt.arg_groups.model_overrides.deepseek_v2.
    _dsa_dcp_overrides`` (the split-backend pass keeps what it set)."""
    hopper = resolve_launch_defaults(DSV32, H200, tp_size=8, dcp_size=2)
    assert (hopper.dsa_prefill_backend, hopper.dsa_decode_backend) == ("trtllm", "trtllm")
    assert hopper.kv_cache_dtype == "bfloat16"
    plain = resolve_launch_defaults(DSV32, H200, tp_size=8)
    assert (plain.dsa_prefill_backend, plain.dsa_decode_backend) == ("flashmla_sparse", "fa3")
    wide = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=2)
    with pytest.raises(KVCacheConfigError, match="_dsa_dcp_overrides"):
        resolve_launch_defaults(DSV32, H200, tp_size=8, dcp_size=2, settings=wide)
    with pytest.raises(KVCacheConfigError, match="PD disaggregation"):
        pd_decode = LaunchSettings(disaggregation_mode="decode")
        resolve_launch_defaults(DSV32, H200, tp_size=8, dcp_size=2, settings=pd_decode)


def test_qwen3_next_on_sm100_forces_its_page_over_the_users() -> None:
    """Qwen3-Next / Qwen3.5 on SM100 without ``--attention-backend``: triton with page 1 forced
    (a user's page 64 too), also with speculation (the generic default then is not trtllm_mha).
    SGLang: ``sglang.srt.arg_groups.model_overrides.qwen3_5._qwen3_5_hybrid_overrides``."""
    qwen_next = facts("qwen3-next-80b-a3b")
    user_page = resolve_launch_defaults(qwen_next, B200, tp_size=8, settings=LaunchSettings(page_size=64))
    assert (user_page.attention_backend, user_page.page_size) == ("triton", 1)
    eagle = resolve_launch_defaults(qwen_next, B200, tp_size=8, settings=LaunchSettings(speculative_algorithm="EAGLE"))
    assert (eagle.attention_backend, eagle.page_size) == ("triton", 1)
    radix_off = resolve_launch_defaults(qwen_next, B200, tp_size=8, settings=LaunchSettings(disable_radix_cache=True))
    assert (radix_off.attention_backend, radix_off.page_size) == ("trtllm_mha", 64)
    hopper = resolve_launch_defaults(qwen_next, H200, tp_size=8, settings=LaunchSettings(page_size=64))
    assert hopper.page_size == 64  # the rule is SM100-only


def test_ngram_defaults_and_refusals() -> None:
    """NGRAM: topk = the BFS breadth 10, draft tokens 12, steps 12 // 10 = 1; topk > 1 at page > 1
    needs flashinfer; no DP attention. SGLang: ``sglang.srt.arg_groups.speculative_hook._handle_ngram``."""
    ngram = LaunchSettings(speculative_algorithm="NGRAM")
    res = resolve_launch_defaults(LLAMA, H200, settings=ngram)
    assert (res.speculative_num_steps, res.speculative_eagle_topk, res.speculative_num_draft_tokens) == (1, 10, 12)
    more = resolve_launch_defaults(
        LLAMA, H200, settings=LaunchSettings(speculative_algorithm="NGRAM", speculative_num_draft_tokens=25)
    )
    assert more.speculative_num_steps == 2
    with pytest.raises(KVCacheConfigError, match="_handle_ngram"):
        resolve_launch_defaults(DSV3, B200, tp_size=8, settings=ngram)  # trtllm_mla, page 64
    with pytest.raises(KVCacheConfigError, match="DP attention"):
        resolve_launch_defaults(LLAMA, H200, tp_size=8, attn_dp_size=8, settings=ngram)


def test_dflash_needs_a_draft_model_and_takes_its_block_size(tmp_path: Path) -> None:
    """DFLASH: refused without ``--speculative-draft-model-path``, with PP > 1 or DP attention;
    steps 1, topk 1, draft tokens = the draft config's block size (16 when it names none).
    SGLang: ``sglang.srt.arg_groups.speculative_hook._handle_dflash``."""
    with pytest.raises(KVCacheConfigError, match="_handle_dflash.*draft-model-path"):
        resolve_launch_defaults(LLAMA, H200, settings=LaunchSettings(speculative_algorithm="DFLASH"))
    given = LaunchSettings(speculative_algorithm="DFLASH", speculative_draft_model_path="draft")
    with pytest.raises(KVCacheConfigError, match="pp_size == 1"):
        resolve_launch_defaults(LLAMA, H200, tp_size=8, pp_size=2, settings=given)
    with pytest.raises(KVCacheConfigError, match="enable-dp-lm-head"):
        resolve_launch_defaults(LLAMA, H200, tp_size=8, attn_dp_size=8, settings=given)
    res = resolve_launch_defaults(LLAMA, H200, settings=given)
    assert (res.speculative_num_steps, res.speculative_eagle_topk, res.speculative_num_draft_tokens) == (1, 1, 16)
    assert res.max_running_requests == 48
    (tmp_path / "config.json").write_text(json.dumps({"dflash_config": {"block_size": 7}, "block_size": 3}))
    assert dflash_block_size(str(tmp_path)) == 7
    (tmp_path / "config.json").write_text(json.dumps({"block_size": 3}))
    assert dflash_block_size(str(tmp_path / "config.json")) == 3
    with pytest.raises(KVCacheConfigError, match="no such file or folder; SGLang could not load the draft"):
        dflash_block_size(str(tmp_path / "missing"))  # a mistyped draft path is refused, not ignored
    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        dflash_block_size("/dev/zero")  # never read without bound
    req = DeploymentRequest(
        "llama-3.1-8b", {"preset": "llama-3.1-8b"}, gpu=H200, speculative_algorithm="DFLASH",
        speculative_draft_model_path=str(tmp_path),
    )  # fmt: skip
    launch = resolve_launch(req, req.hf_config())
    assert launch is not None and launch.speculative_num_draft_tokens == 3
    (tmp_path / "config.json").write_text(json.dumps({"block_size": 3, "num_hidden_layers": 5}))
    assert case_fields(req, "bfloat16", launch)["eagle_draft_num_layers"] == 5  # the draft's layers
    assert case_fields(req.replace(speculative_draft_layers=2), "bfloat16", launch)["eagle_draft_num_layers"] == 2


def test_eagle_params_are_all_auto_or_steps_given() -> None:
    """EAGLE: topk or draft tokens without steps are refused (SGLang chooses all three only when
    none is given); topk > 1 at page > 1 needs flashinfer/fa3/triton.
    SGLang: ``sglang.srt.arg_groups.speculative_hook._handle_eagle_family``."""
    for partial in ({"speculative_num_draft_tokens": 4}, {"speculative_eagle_topk": 1}):
        with pytest.raises(KVCacheConfigError, match="_handle_eagle_family"):
            resolve_launch_defaults(LLAMA, H200, settings=LaunchSettings(speculative_algorithm="EAGLE", **partial))
    with pytest.raises(KVCacheConfigError, match="needs --speculative-eagle-topk"):
        steps_only = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3)
        resolve_launch_defaults(LLAMA, H200, settings=steps_only)
    wide_paged = LaunchSettings(
        speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=4,
        speculative_num_draft_tokens=8, page_size=64, attention_backend="flashmla",
    )  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="page_size > 1"):
        resolve_launch_defaults(DSV3, H200, tp_size=8, settings=wide_paged)
    linear = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=2, speculative_eagle_topk=1)
    ok = resolve_launch_defaults(LLAMA, H200, settings=linear)
    assert ok.speculative_num_draft_tokens == 3


def test_deepseek_v4_eagle_needs_an_explicit_topk_of_one() -> None:
    """DeepSeek-V4 checks the raw flags before any speculative default: EAGLE needs
    ``--speculative-eagle-topk 1`` given (so steps too), NEXTN is refused.
    SGLang: ``sglang.srt.arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults``."""
    v4 = facts("deepseek-v4-flash")
    for settings in (
        LaunchSettings(speculative_algorithm="EAGLE"),
        LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3),
        LaunchSettings(speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1),
    ):
        with pytest.raises(KVCacheConfigError, match="apply_deepseek_v4_defaults"):
            resolve_launch_defaults(v4, B200, tp_size=8, settings=settings)
    given = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1)
    res = resolve_launch_defaults(v4, B200, tp_size=8, settings=given)
    assert (res.speculative_num_draft_tokens, res.max_running_requests) == (4, 256)


def test_trtllm_mla_needs_blackwell() -> None:
    """``--attention-backend trtllm_mla`` is refused off Blackwell, and with an fp8_e5m2 KV cache.
    SGLang: ``sglang.srt.arg_groups.overrides._mla_kv_cache_dtype_checks``."""
    with pytest.raises(KVCacheConfigError, match="_mla_kv_cache_dtype_checks.*Blackwell"):
        resolve_launch_defaults(DSV3, H200, tp_size=8, settings=LaunchSettings(attention_backend="trtllm_mla"))
    e5m2 = LaunchSettings(attention_backend="trtllm_mla", kv_cache_dtype="fp8_e5m2")
    with pytest.raises(KVCacheConfigError, match="fp8_e4m3, bf16 or auto"):
        resolve_launch_defaults(DSV3, B200, tp_size=8, settings=e5m2)
    assert resolve_launch_defaults(DSV3, B200, tp_size=8).attention_backend == "trtllm_mla"


def _synthetic(name: str):  # type: ignore[no-untyped-def]
    from kvstrategies.sglang.bridge.launch_grid import launch_config

    return model_facts_from_hf_config(launch_config("synthetic:" + name))


A100 = lookup_gpu("A100-80GB")


def test_gemma4_attention_backend_per_platform() -> None:
    """Gemma-4 without a backend flag: trtllm_mha on SM100, triton on Hopper and Ampere (the
    generic rule would pick fa3 / flashinfer). SGLang:
    ``sglang.srt.arg_groups.model_overrides.gemma4._gemma4_overrides``."""
    gemma4 = _synthetic("gemma4")
    backends = [resolve_launch_defaults(gemma4, gpu).attention_backend for gpu in (H200, A100, B200)]
    assert backends == ["triton", "triton", "trtllm_mha"]
    assert resolve_launch_defaults(gemma4, B200).page_size == 64  # trtllm_mha page rule
    split = LaunchSettings(decode_attention_backend="triton")
    assert resolve_launch_defaults(gemma4, H200, settings=split).attention_backend == "triton"


def test_gemma4_block_diffusion_variant_keeps_triton_and_skips_the_backend_check() -> None:
    """The block-diffusion Gemma-4 defaults to triton on SM100 too, and the model hook's Gemma-4
    backend list does not name it. SGLang: ``sglang.srt.arg_groups.model_overrides.gemma4.
    _gemma4_overrides`` and ``sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments``."""
    from kvstrategies.models.architectures import names_where
    from kvstrategies.sglang.bridge.launch_grid import launch_config

    (diffusion,) = names_where(lambda row: row.block_diffusion)
    config = {**launch_config("synthetic:gemma4"), "architectures": [diffusion]}
    model = model_facts_from_hf_config(config)
    assert resolve_launch_defaults(model, B200).attention_backend == "triton"
    flashinfer = LaunchSettings(attention_backend="flashinfer")
    assert resolve_launch_defaults(model, H200, settings=flashinfer).attention_backend == "flashinfer"


def test_gemma4_and_llama4_refuse_unsupported_backends() -> None:
    """Gemma-4 takes trtllm_mha/triton/fa4/ascend/intel_xpu/intel_amx/aiter for prefill and
    decode; Llama-4 fa3/aiter/triton/ascend/trtllm_mha/intel_xpu. SGLang:
    ``sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments``."""
    flashinfer = LaunchSettings(attention_backend="flashinfer")
    with pytest.raises(KVCacheConfigError, match="handle_model_specific_adjustments.*Gemma-4"):
        resolve_launch_defaults(_synthetic("gemma4"), H200, settings=flashinfer)
    with pytest.raises(KVCacheConfigError, match="Llama-4"):
        resolve_launch_defaults(facts("llama-4-scout"), H200, tp_size=8, settings=flashinfer)
    assert resolve_launch_defaults(facts("llama-4-scout"), A100, tp_size=8).attention_backend == "triton"


def test_qwen3_vl_on_a_large_hopper_gpu() -> None:
    """Qwen3-VL on a Hopper GPU of >= 60 GiB: decode backend flashinfer, decode graph max_bs up to
    a user request cap <= 512, and the CUDA-IPC feature pool (1 GiB, 3 GiB at >= 400 requests)
    reserved from the KV budget instead of the 100 MiB embedding cache. SGLang:
    ``sglang.srt.arg_groups.model_overrides.qwen3_vl._qwen3vl_hopper_serving_overrides``,
    ``qwen3_vl.expand_multimodal_decode_graph_to_running_limit``,
    ``sglang.srt.mem_cache.kv_cache_configurator.mm_runtime_reservation_gb``."""
    for name in ("qwen3-vl", "qwen3-vl-moe"):
        vl = _synthetic(name)
        hopper = resolve_launch_defaults(vl, H200)
        assert (hopper.attention_backend, hopper.decode_attention_backend) == ("fa3", "flashinfer")
        assert hopper.multimodal_reserve_mib == 1024
        busy = resolve_launch_defaults(vl, H200, settings=LaunchSettings(max_running_requests=400))
        assert (busy.cuda_graph_max_bs, busy.multimodal_reserve_mib) == (400, 3072)
        ampere = resolve_launch_defaults(vl, A100, settings=LaunchSettings(max_running_requests=400))
        assert (ampere.decode_attention_backend, ampere.cuda_graph_max_bs, ampere.multimodal_reserve_mib) == (
            None, 256, 100
        )
    req = DeploymentRequest("vl", {"hf_config": {"architectures": ["LlamaForCausalLM"]}}, gpu=H200)
    assert resolve_launch(req, req.hf_config()).multimodal_reserve_mib == 0  # type: ignore[union-attr]


def test_kimi_k25_vision_config_class_defaults() -> None:
    """Kimi-K2.5's vision config object supplies num_hidden_layers 27 / hidden_size 1152 when the
    raw JSON names them otherwise, so the VLM cut is x0.9098, not the 24 / 1024 fallback.
    SGLang: ``sglang.srt.configs.kimi_k25.KimiK25VisionConfig`` read by
    ``sglang.srt.arg_groups.memory_hook.adjust_mem_fraction_for_vlm``."""
    kimi = _synthetic("kimi-k2.5")
    assert (kimi.vision_layers, kimi.vision_hidden) == (27, 1152)
    res = resolve_launch_defaults(kimi, H200, tp_size=8)
    assert res.mem_fraction_static == pytest.approx(0.886 * 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1)))
    other = model_facts_from_hf_config({"architectures": ["X"], "model_type": "x", "vision_config": {"depth": 4}})
    assert (other.vision_layers, other.vision_hidden) == (None, None)


def test_hopper_keeps_fa3_for_speculation_with_topk_unset_at_any_page() -> None:
    """The generic default on Hopper is fa3 unless a *given* topk > 1 or topk 1 with page > 1: with
    EAGLE and topk still unset, page 64 keeps fa3. SGLang:
    ``sglang.srt.arg_groups.model_override_base.get_default_attn_backend`` with
    ``sglang.srt.utils.common.is_no_spec_infer_or_topk_one``."""
    paged = LaunchSettings(speculative_algorithm="EAGLE", page_size=64)
    assert resolve_launch_defaults(facts("qwen3-8b"), H200, settings=paged).attention_backend == "fa3"
    given = LaunchSettings(
        speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1, page_size=64
    )
    assert resolve_launch_defaults(facts("qwen3-8b"), H200, settings=given).attention_backend == "flashinfer"


def test_nemotron_h_on_sm100_with_a_speculative_tree_uses_triton() -> None:
    """Nemotron-H on Blackwell with speculation: trtllm_mha (page 64) for topk unset/1 on SM100,
    triton otherwise (topk > 1 on SM100 too). SGLang:
    ``sglang.srt.arg_groups.model_overrides.nemotron_h._nemotron_h_overrides``."""
    nemotron = facts("nemotron-h-8b")
    tree = LaunchSettings(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=4,
                          speculative_num_draft_tokens=8)  # fmt: skip
    assert resolve_launch_defaults(nemotron, B200, tp_size=8, settings=tree).attention_backend == "triton"
    chain = resolve_launch_defaults(nemotron, B200, tp_size=8, settings=LaunchSettings(speculative_algorithm="EAGLE"))
    assert (chain.attention_backend, chain.page_size) == ("trtllm_mha", 64)
