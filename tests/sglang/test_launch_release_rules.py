"""One test per launch rule that differs between SGLang releases, with hand-computed expectations.

Each docstring names the SGLang module and function of the releases compared (read in each
release's own source); ``golden/sglang-<release>-launch`` holds the same launches resolved by
that release. The planner follows the release named by ``release=`` (``--sglang-version``).
"""

from __future__ import annotations

import dataclasses

import pytest

from kvstrategies.core.releases import parse_release
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.launch.defaults import LaunchSettings, model_facts_from_hf_config, resolve_launch_defaults
from kvstrategies.sglang.launch.defaults.core import LaunchModelFacts, LaunchResolution

H100, H200, B200, A100 = lookup_gpu("H100-80GB"), lookup_gpu("H200"), lookup_gpu("B200"), lookup_gpu("A100-80GB")
RTX4090 = lookup_gpu("RTX-4090")
R = {v: parse_release(v) for v in ("0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9",
                                    "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17",
                                    "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")}  # fmt: skip


def facts(preset: str) -> LaunchModelFacts:
    return model_facts_from_hf_config(load_preset_config(preset))


def resolve(preset: str, gpu: object, release: str, tp: int = 1, **settings: object) -> LaunchResolution:
    return resolve_launch_defaults(
        facts(preset), gpu, tp_size=tp, settings=LaunchSettings(**settings), release=R[release]  # type: ignore[arg-type]
    )


def test_mla_prefill_graph_is_a_flat_2048_before_0_5_23() -> None:
    """MLA prefill-graph ``max_bs``: 0.5.22 sets a flat 2048 (whatever the chunk), 0.5.23
    ``min(8192, chunked_prefill_size)``. SGLang: ``arg_groups.memory_hook.handle_gpu_memory_settings``
    (``prefill_cuda_graph_config.max_bs``) in both. DeepSeek-V3 on H200 (143,771 MiB < 160 GiB:
    chunk 8192): 8192 -> 58 batch sizes; 2048 -> 42 (4..32/4 = 8, 48..256/16 = 14, 288..512/32 = 8,
    576..1024/64 = 8, 1280..2048/256 = 4)."""
    new, old = resolve("deepseek-v3", H200, "0.5.23", 8), resolve("deepseek-v3", H200, "0.5.22", 8)
    assert (new.prefill_graph_max_bs, new.prefill_graph_bs_count) == (8192, 58)
    assert (old.prefill_graph_max_bs, old.prefill_graph_bs_count) == (2048, 42)
    off_new = resolve("deepseek-v3", H200, "0.5.23", 8, chunked_prefill_size=-1)
    off_old = resolve("deepseek-v3", H200, "0.5.22", 8, chunked_prefill_size=-1)
    assert (off_new.prefill_graph_max_bs, off_new.prefill_graph_bs_count) == (-1, 0)
    assert (off_old.prefill_graph_max_bs, off_old.prefill_graph_bs_count) == (2048, 42)
    # the MLA prefill-graph reserve is a flat 1536 MiB either way: the fraction does not move
    assert new.mem_fraction_static == old.mem_fraction_static


def test_dflash_takes_the_sm100_mha_default_from_0_5_23() -> None:
    """DFLASH without ``--speculative-eagle-topk`` on B200: 0.5.23's ``get_default_attn_backend``
    counts it as topk 1 (``model_override_base._forces_eagle_topk_one``) -> ``trtllm_mha`` and its
    page rule 64; 0.5.22 has no such exception -> ``flashinfer``, page 1."""
    dflash = {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "draft"}
    new, old = resolve("llama-3.1-8b", B200, "0.5.23", **dflash), resolve("llama-3.1-8b", B200, "0.5.22", **dflash)
    assert (new.attention_backend, new.page_size) == ("trtllm_mha", 64)
    assert (old.attention_backend, old.page_size) == ("flashinfer", 1)


def test_dsv4_auto_backend_resolves_from_0_5_23() -> None:
    """DeepSeek-V4: 0.5.23's ``deepseek_v4_hook.apply_deepseek_v4_defaults`` declares
    ``dsv4_attn_backend`` from ``_default_dsv4_attention_backend`` (flashmla unless V4.1 on SM100);
    0.5.20-0.5.22 leave the field at ``auto``; before 0.5.20 there is no such field."""
    from kvstrategies.sglang.bridge.launch_check import planner_fields

    for release, expected in (("0.5.23", "flashmla"), ("0.5.22", "auto"), ("0.5.20", "auto"), ("0.5.19", None)):
        res = resolve("deepseek-v4-flash", H200, release, 8)
        assert planner_fields(res, R[release])["dsv4_attn_backend"] == expected, release


def test_decode_graph_capped_by_requests_from_0_5_22() -> None:
    """``--max-running-requests 64``: 0.5.22's ``memory_hook.handle_gpu_memory_settings`` cuts the
    capacity tier's decode max_bs to it (``decode_max_bs_is_default``); 0.5.21's keeps the tier.
    Falcon-7B on H200 (143,771 MiB), TP 1: tier (8192, 256); R = 512 + 1.5 * 8192 + 1/8 * 1024 +
    2 * dmb + 8 * 58 = 13392 + 2 * dmb: dmb 64 -> 13520 -> round(130251 / 143771, 3) = 0.906;
    dmb 256 -> 13904 -> round(129867 / 143771, 3) = 0.903."""
    new = resolve("falcon-7b", H200, "0.5.22", max_running_requests=64)
    old = resolve("falcon-7b", H200, "0.5.21", max_running_requests=64)
    assert (new.cuda_graph_max_bs, new.reserved_mib, new.mem_fraction_static) == (64, 13520, 0.906)
    assert (old.cuda_graph_max_bs, old.reserved_mib, old.mem_fraction_static) == (256, 13904, 0.903)


def test_dsa_dcp_overrides_from_0_5_22() -> None:
    """DSA with ``--dcp-size 2``: 0.5.22's ``model_overrides.deepseek_v2._dsa_dcp_overrides`` sets
    both DSA backends to ``trtllm`` (Hopper too); 0.5.21 has no such override, so H200's bf16 DSA
    split stays (``flashmla_sparse``, ``fa3``)."""
    kw = {"tp_size": 8, "dcp_size": 2, "settings": LaunchSettings()}
    new = resolve_launch_defaults(facts("deepseek-v3.2"), H200, release=R["0.5.22"], **kw)  # type: ignore[arg-type]
    old = resolve_launch_defaults(facts("deepseek-v3.2"), H200, release=R["0.5.21"], **kw)  # type: ignore[arg-type]
    assert (new.dsa_prefill_backend, new.dsa_decode_backend) == ("trtllm", "trtllm")
    assert (old.dsa_prefill_backend, old.dsa_decode_backend) == ("flashmla_sparse", "fa3")


def test_dsa_index_kpool_page_from_0_5_22() -> None:
    """A DSA config with ``index_kpool 4``: 0.5.22's ``deepseek_v2._deepseek_family_overrides``
    forces page ``64 * 4 = 256`` and refuses ``--dcp-size 2`` (a pooled key spans DCP ranks);
    0.5.21 has no index pooling: page 64, DCP planned."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    pooled = model_facts_from_hf_config({**load_preset_config("deepseek-v3.2"), "index_kpool": 4})
    assert resolve_launch_defaults(pooled, H200, tp_size=8, release=R["0.5.22"]).page_size == 256
    assert resolve_launch_defaults(pooled, H200, tp_size=8, release=R["0.5.21"]).page_size == 64
    with pytest.raises(KVCacheConfigError, match="index_kpool=4"):
        resolve_launch_defaults(pooled, H200, tp_size=8, dcp_size=2, release=R["0.5.22"])
    assert resolve_launch_defaults(pooled, H200, tp_size=8, dcp_size=2, release=R["0.5.21"]).page_size == 64


def test_mimo_v2_flash_is_served_from_0_5_22() -> None:
    """MiMo-V2-Flash (``model_type mimo_v2_flash``): SGLang 0.5.21 pins transformers 5.12.1, whose
    AutoConfig does not know the model type, so ``configs.model_config.ModelConfig`` fails at
    launch; 0.5.22 (transformers 5.19.0) loads it. The model-type row's ``first_release`` is 0.5.22."""
    import pytest

    from kvstrategies.errors import UnsupportedConfigurationError

    assert resolve("mimo-v2-flash", H200, "0.5.22", 4).attention_backend is not None
    with pytest.raises(UnsupportedConfigurationError, match="SGLang 0.5.21 cannot load .* model_type 'mimo_v2_flash'"):
        resolve("mimo-v2-flash", H200, "0.5.21", 4)


def test_swa_ratio_explicit_record_from_0_5_21() -> None:
    """DeepSeek-V4's model-declared ``swa_full_tokens_ratio`` 0.1: 0.5.21's
    ``kv_cache_hook._handle_cache_compatibility`` records it as explicitly set (non-None before
    the 0.8 fallback); 0.5.20 keeps no such record (the field does not exist there), so SGLang
    reports False. The resolved ratio is 0.1 in both."""
    from kvstrategies.sglang.bridge.launch_check import planner_fields

    for release, explicit in (("0.5.21", True), ("0.5.20", False)):
        res = resolve("deepseek-v4-flash", H200, release, 8)
        assert res.swa_full_tokens_ratio == 0.1
        assert planner_fields(res, R[release])["swa_full_tokens_ratio_explicit"] is explicit


def test_kda_disables_the_prefill_graph_from_0_5_20() -> None:
    """Kimi-Linear (KDA layers, MLA attention) on H200, TP 4: 0.5.20's
    ``cuda_graph_hook.apply_cuda_graph_compatibility`` disables the breakable prefill graph for KDA
    (``uses_kda_attention``); 0.5.19's list has no KDA entry, so the graph stays and its MLA
    reserve (1536 MiB) counts: R = 512 + 1.5 * 8192 + 4/8 * 1024 + 2 * 512 = 14336 (+ 1536 =
    15872) -> round(129435 / 143771, 3) = 0.9 vs round(127899 / 143771, 3) = 0.89."""
    new, old = resolve("kimi-linear-48b-a3b", H200, "0.5.20", 4), resolve("kimi-linear-48b-a3b", H200, "0.5.19", 4)
    assert (new.prefill_cuda_graph, new.reserved_mib, new.mem_fraction_static) == ("disabled", 14336, 0.9)
    assert (old.prefill_cuda_graph, old.reserved_mib, old.mem_fraction_static) == ("breakable", 15872, 0.89)


def test_qwen3_vl_large_hopper_path_from_0_5_20() -> None:
    """Qwen3-VL on H100 (>= 60 GiB Hopper): 0.5.20's
    ``model_overrides.qwen3_vl._qwen3vl_hopper_serving_overrides`` moves features over CUDA IPC
    (the 1024 MiB ``SGLANG_MM_FEATURE_CACHE_MB`` pool reserved, the 100 MiB embedding cache off)
    and sets the flashinfer decode backend; 0.5.19 has no such path: the embedding cache's 100 MiB
    (``kv_cache_configurator.mm_runtime_reservation_gb``) and no decode backend."""
    from kvstrategies.sglang.bridge.launch_grid import launch_config

    vl = model_facts_from_hf_config(launch_config("synthetic:qwen3-vl"))
    new = resolve_launch_defaults(vl, H100, release=R["0.5.20"])
    old = resolve_launch_defaults(vl, H100, release=R["0.5.19"])
    assert (new.multimodal_reserve_mib, new.decode_attention_backend) == (1024.0, "flashinfer")
    assert (old.multimodal_reserve_mib, old.decode_attention_backend) == (100.0, None)


def test_reasons_cite_the_releases_own_source() -> None:
    """Up to 0.5.18 the launch decisions are ``ServerArgs`` methods run by ``__post_init__``
    (``server_args.ServerArgs._handle_gpu_memory_settings``); from 0.5.19 they live in the
    ``arg_groups`` hooks (``arg_groups.memory_hook.handle_gpu_memory_settings``)."""
    old = resolve("llama-3.1-8b", H100, "0.5.18").reasons("mem_fraction_static")[-1].reason
    new = resolve("llama-3.1-8b", H100, "0.5.19").reasons("mem_fraction_static")[-1].reason
    assert old.endswith("(sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings)")
    assert new.endswith("(sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings)")


def test_pp_keeps_the_breakable_prefill_graph_before_0_5_19() -> None:
    """PP 2: 0.5.19's ``cuda_graph_hook.apply_cuda_graph_compatibility`` makes the breakable
    prefill graph opt-in under PP (disabled by default); 0.5.18's ``ServerArgs`` keeps it (its PP
    rule covers only tc_piecewise: ``_disable_tc_piecewise_cudagraph_if_incompatible``), so its
    reserve counts. Llama-3.1-8B on B200 (183,359 MiB), TP 8: chunk 16384, dmb 512; R = 512 +
    1.5 * 16384 + 8 * 2 / 8 * 1024 + 2 * 512 = 28160 (+ 8 * 74 = 28752) -> 0.846 vs 0.843."""
    new = resolve_launch_defaults(facts("llama-3.1-8b"), B200, tp_size=8, pp_size=2, release=R["0.5.19"])
    old = resolve_launch_defaults(facts("llama-3.1-8b"), B200, tp_size=8, pp_size=2, release=R["0.5.18"])
    assert (new.prefill_cuda_graph, new.reserved_mib, new.mem_fraction_static) == ("disabled", 28160, 0.846)
    assert (old.prefill_cuda_graph, old.reserved_mib, old.mem_fraction_static) == ("breakable", 28752, 0.843)
    assert (old.prefill_graph_max_bs, old.prefill_graph_bs_count) == (16384, 74)


def test_nemotron_h_blackwell_backends_from_0_5_19() -> None:
    """Nemotron-H on B200 without ``--attention-backend``: 0.5.19's
    ``model_overrides.nemotron_h._nemotron_h_overrides`` picks ``trtllm_mha`` (``triton`` for an
    EAGLE tree, topk 4); 0.5.18's ``arg_groups.overrides._nemotron_h_overrides`` sets
    ``flashinfer`` on SM100 whatever the speculation."""
    tree = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4, "speculative_num_steps": 3,
            "speculative_num_draft_tokens": 8}  # fmt: skip
    assert resolve("nemotron-h-8b", B200, "0.5.19", 8).attention_backend == "trtllm_mha"
    assert resolve("nemotron-h-8b", B200, "0.5.19", 8, **tree).attention_backend == "triton"
    assert resolve("nemotron-h-8b", B200, "0.5.18", 8).attention_backend == "flashinfer"
    assert resolve("nemotron-h-8b", B200, "0.5.18", 8, **tree).attention_backend == "flashinfer"
    assert resolve("nemotron-h-8b", H200, "0.5.18", 8).attention_backend == "fa3"  # not SM100: the generic default


def test_mla_loses_the_breakable_prefill_graph_up_to_0_5_17() -> None:
    """``ServerArgs._disable_breakable_cudagraph_if_incompatible``: 0.5.15-0.5.16 disable it for
    every MLA model ("MLA attention"), 0.5.17 for MLA except DSA ("MLA attention (non-DSA)"),
    0.5.18 has no MLA entry. DeepSeek-V3 on H200, TP 8 (chunk 8192, dmb 512): R = 512 + 1.5 *
    8192 + 1024 + 2 * 512 = 14848, + 1536 for an MLA prefill graph = 16384 -> 0.897 vs 0.886."""
    old, new = resolve("deepseek-v3", H200, "0.5.17", 8), resolve("deepseek-v3", H200, "0.5.18", 8)
    assert (old.prefill_cuda_graph, old.reserved_mib, old.mem_fraction_static) == ("disabled", 14848, 0.897)
    assert (new.prefill_cuda_graph, new.reserved_mib, new.mem_fraction_static) == ("breakable", 16384, 0.886)
    assert resolve("deepseek-v3.2", H200, "0.5.17", 8).prefill_cuda_graph == "breakable"  # DSA exempt
    assert resolve("deepseek-v3.2", H200, "0.5.16", 8).prefill_cuda_graph == "disabled"


def test_nemotron_h_loses_the_breakable_prefill_graph_in_0_5_17() -> None:
    """0.5.17's breakable rules list "NemotronH (hybrid Mamba2 prefill)" (``is_nemotron_h``); 0.5.16
    and 0.5.18 do not."""
    graphs = {v: resolve("nemotron-h-8b", H200, v, 8).prefill_cuda_graph for v in ("0.5.16", "0.5.17", "0.5.18")}
    assert graphs == {"0.5.16": "breakable", "0.5.17": "disabled", "0.5.18": "breakable"}


def test_kimi_k2_5_prefill_graph_is_tc_piecewise_up_to_0_5_17() -> None:
    """Kimi-K2.5 (multimodal, on the piecewise allow-list
    ``multimodal_piecewise_cuda_graph_supported_model_archs``): 0.5.16-0.5.17's
    ``ServerArgs._apply_cuda_graph_compatibility`` moves its breakable prefill graph to
    ``tc_piecewise``; from 0.5.18 it is on the breakable allow-list too, which keeps it
    breakable. With DP attention the tc_piecewise rules disable it."""
    from kvstrategies.sglang.bridge.launch_grid import launch_config

    kimi = model_facts_from_hf_config(launch_config("synthetic:kimi-k2.5"))
    assert resolve_launch_defaults(kimi, H200, tp_size=8, release=R["0.5.17"]).prefill_cuda_graph == "tc_piecewise"
    assert resolve_launch_defaults(kimi, H200, tp_size=8, release=R["0.5.18"]).prefill_cuda_graph == "breakable"
    dp = resolve_launch_defaults(kimi, H200, tp_size=8, attn_dp_size=8, release=R["0.5.17"])
    assert dp.prefill_cuda_graph == "disabled"


def test_multimodal_kv_reserve_from_0_5_18() -> None:
    """0.5.18's ``kv_cache_configurator.mm_runtime_reservation_gb`` holds the multimodal embedding
    cache (``SGLANG_VLM_CACHE_SIZE_MB`` 100 MiB) out of the KV budget; 0.5.17 has no such reserve."""
    assert resolve("qwen3.5-35b-a3b", H200, "0.5.18", 8).multimodal_reserve_mib == 100.0
    assert resolve("qwen3.5-35b-a3b", H200, "0.5.17", 8).multimodal_reserve_mib == 0.0


def test_dp_attention_loses_the_breakable_prefill_graph_up_to_0_5_16() -> None:
    """0.5.15-0.5.16's ``ServerArgs._disable_breakable_cudagraph_if_incompatible`` lists "DP
    attention" (DP-attn x BCG not validated); 0.5.17 drops it. Llama-3.1-8B on H200, TP 8, DP 8
    (the chunk 8192 // 8 = 1024 re-clamps the graph only while it is on)."""
    old = resolve_launch_defaults(facts("llama-3.1-8b"), H200, tp_size=8, attn_dp_size=8, release=R["0.5.16"])
    new = resolve_launch_defaults(facts("llama-3.1-8b"), H200, tp_size=8, attn_dp_size=8, release=R["0.5.17"])
    assert (old.prefill_cuda_graph, old.prefill_graph_max_bs) == ("disabled", 8192)
    assert (new.prefill_cuda_graph, new.prefill_graph_max_bs, new.prefill_graph_bs_count) == ("breakable", 1024, 38)


def test_deepep_keeps_the_breakable_prefill_graph_from_0_5_17() -> None:
    """``--moe-a2a-backend deepep``: 0.5.15-0.5.16's breakable rules refuse any MoE A2A backend
    but ``none``; 0.5.17 tolerates deepep, megamoe and flashinfer, and
    ``cuda_graph_hook.apply_deepep_adjustments`` aligns the 2048 default's buckets to multiples
    of 8 (38 sizes, max 2048). Qwen3-30B-A3B on H200, TP 8: R = 512 + 1.5 * 8192 + 1024 + 2 * 512
    = 14848, + 2048 for DeepEP decode graphs = 16896 -> 0.882; with the graph: + 8 * 38 + 1024
    (breakable with DeepEP) = 18224 -> 0.873."""
    old = resolve("qwen3-30b-a3b", H200, "0.5.16", 8, moe_a2a_backend="deepep")
    new = resolve("qwen3-30b-a3b", H200, "0.5.17", 8, moe_a2a_backend="deepep")
    assert (old.prefill_cuda_graph, old.reserved_mib, old.mem_fraction_static) == ("disabled", 16896, 0.882)
    assert (new.prefill_cuda_graph, new.prefill_graph_max_bs, new.prefill_graph_bs_count) == ("breakable", 2048, 38)
    assert (new.reserved_mib, new.mem_fraction_static) == (18224, 0.873)


def test_kimi_linear_extra_buffer_from_0_5_16() -> None:
    """Kimi-Linear joined ``arg_groups.overrides._MAMBA_EXTRA_BUFFER_ARCHS`` in 0.5.16
    (``supports_mamba_cache_extra_buffer``): 0.5.15's ``_mamba_radix_cache_resolution`` picks
    ``no_buffer`` and turns the overlap scheduler off, and ``ServerArgs._validate_mamba_no_buffer``
    refuses a page above 1 ("no_buffer only supports page_size=1")."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    old, new = resolve("kimi-linear-48b-a3b", H200, "0.5.15", 4), resolve("kimi-linear-48b-a3b", H200, "0.5.16", 4)
    assert (old.mamba_radix_cache_strategy, old.disable_overlap_schedule) == ("no_buffer", True)
    assert (new.mamba_radix_cache_strategy, new.disable_overlap_schedule) == ("extra_buffer", False)
    with pytest.raises(KVCacheConfigError, match="no_buffer only supports page_size=1"):
        resolve("kimi-linear-48b-a3b", H200, "0.5.15", 4, page_size=64)
    assert resolve("kimi-linear-48b-a3b", H200, "0.5.16", 4, page_size=64).page_size == 64


def test_every_launch_rule_is_listed_between_releases() -> None:
    """The launch rules are registered (``kvstrategies.core.releases``): ``rules_differing`` lists,
    from the code alone, the ones that differ between two releases."""
    import kvstrategies.sglang.launch.defaults  # noqa: F401  (registers the launch rules)
    from kvstrategies.core.releases import all_rules, rules_differing

    launch = {r.key for r in all_rules() if r.topic == "launch"}
    assert {"launch-pp-prefill-graph-opt-in", "launch-mla-prefill-graph-follows-chunk",
            "launch-multimodal-kv-reserve"} <= launch  # fmt: skip
    between = {r.key for r in rules_differing(R["0.5.22"], R["0.5.23"]) if r.topic == "launch"}
    assert {"launch-mla-prefill-graph-follows-chunk", "launch-dflash-sm100-mha-default",
            "launch-dsv4-auto-attn-backend"} <= between  # fmt: skip
    assert "launch-pp-prefill-graph-opt-in" not in between


def test_row_facts_hold_for_their_releases() -> None:
    """An architecture row's ``releases`` limits a fact to some releases: Kimi-K2.5 is on SGLang's
    multimodal breakable allow-list from 0.5.18 and on the piecewise one from 0.5.16
    (``configs.model_config``); Kimi-Linear is an extra-buffer Mamba model from 0.5.16
    (``arg_groups.overrides._MAMBA_EXTRA_BUFFER_ARCHS``). Each limited fact is a listed rule."""
    from kvstrategies.core.releases import all_rules
    from kvstrategies.models.architectures import holds_in, names_holding, row_for

    kimi25, linear = row_for("KimiK25ForConditionalGeneration"), row_for("KimiLinearForCausalLM")
    assert kimi25 is not None and linear is not None
    assert [holds_in(kimi25, "breakable_multimodal", R[v]) for v in ("0.5.17", "0.5.18")] == [False, True]
    assert [holds_in(kimi25, "piecewise_multimodal", R[v]) for v in ("0.5.15", "0.5.16")] == [False, True]
    assert "KimiLinearForCausalLM" not in names_holding("mamba_extra_buffer", R["0.5.15"])
    assert "KimiLinearForCausalLM" in names_holding("mamba_extra_buffer", R["0.5.16"])
    assert "mamba_extra_buffer:KimiLinearForCausalLM" in {r.key for r in all_rules()}


def test_workstation_tier_from_0_5_20() -> None:
    """The 20-35 GiB capacity tier (RTX 4090: 24,564 MiB): 0.5.19's ``memory_hook.handle_gpu_memory_settings`` sets
    chunk 2048 and decode max_bs 24 (80 at TP >= 4), 0.5.20's chunk 4096 and 48 (160). Llama-3.1-8B at TP 1, breakable
    prefill graph at the chunk: 0.5.19 R = 512 + 1.5 x 2048 + 1024 / 8 + 2 x 24 + 8 x 42 = 4,096 MiB -> 0.833;
    0.5.20 R = 512 + 1.5 x 4096 + 128 + 2 x 48 + 8 x 50 = 7,280 MiB -> 0.704."""
    old, new = resolve("llama-3.1-8b", RTX4090, "0.5.19"), resolve("llama-3.1-8b", RTX4090, "0.5.20")
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs, old.prefill_graph_bs_count) == (2048, 24, 42)
    assert (new.chunked_prefill_size, new.cuda_graph_max_bs, new.prefill_graph_bs_count) == (4096, 48, 50)
    assert (old.reserved_mib, old.mem_fraction_static) == (4_096, round((24_564 - 4_096) / 24_564, 3)) == (4_096, 0.833)
    assert (new.reserved_mib, new.mem_fraction_static) == (7_280, round((24_564 - 7_280) / 24_564, 3)) == (7_280, 0.704)
    assert resolve("llama-3.1-8b", RTX4090, "0.5.14", 4).cuda_graph_max_bs == 80
    assert resolve("llama-3.1-8b", RTX4090, "0.5.23", 4).cuda_graph_max_bs == 160


def test_prefill_graph_defaults_to_tc_piecewise_up_to_0_5_14() -> None:
    """0.5.14's ``CudaGraphConfig`` defaults the prefill graph to ``tc_piecewise``, checked by
    ``ServerArgs._disable_tc_piecewise_cudagraph_if_incompatible`` (its arch blacklist
    ``piecewise_cuda_graph_disabled_model_archs`` has Qwen3-Next; DP attention is on its list); 0.5.15's default is
    ``breakable``. DeepSeek-V2-Lite (MLA) on H100: 0.5.14 keeps tc_piecewise and reserves 1,536 MiB for it,
    R = 512 + 1.5 x 8192 + 128 + 2 x 256 + 1536 = 14,976 -> 0.816; 0.5.15 drops the breakable graph for MLA,
    R = 13,440 -> 0.835."""
    assert resolve("llama-3.1-8b", H100, "0.5.14").prefill_cuda_graph == "tc_piecewise"
    assert resolve("llama-3.1-8b", H100, "0.5.15").prefill_cuda_graph == "breakable"
    dp = resolve_launch_defaults(facts("llama-3.1-8b"), H100, tp_size=2, attn_dp_size=2, release=R["0.5.14"])
    assert dp.prefill_cuda_graph == "disabled"
    assert resolve("qwen3-next-80b-a3b", H200, "0.5.14", 4).prefill_cuda_graph == "disabled"
    assert resolve("qwen3-next-80b-a3b", H200, "0.5.15", 4).prefill_cuda_graph == "breakable"
    old, new = resolve("deepseek-v2-lite", H100, "0.5.14"), resolve("deepseek-v2-lite", H100, "0.5.15")
    assert (old.prefill_cuda_graph, old.reserved_mib, old.mem_fraction_static) == ("tc_piecewise", 14_976, 0.816)
    assert (new.prefill_cuda_graph, new.reserved_mib, new.mem_fraction_static) == ("disabled", 13_440, 0.835)


def test_deepseek_v3_keeps_the_prefill_graph_on_trtllm_mla_in_0_5_14() -> None:
    """``ServerArgs._disable_prefill_cuda_graph_for_deepseek_trtllm_mla`` (from 0.5.15) turns DeepSeek-V3's prefill
    graph off on the trtllm_mla prefill backend (B200); 0.5.14 has no such step and keeps tc_piecewise. 0.5.18 (no MLA
    rule left for the breakable graph) shows the step alone."""
    old, new = resolve("deepseek-v3", B200, "0.5.14", 8), resolve("deepseek-v3", B200, "0.5.18", 8)
    assert old.attention_backend == new.attention_backend == "trtllm_mla"
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("tc_piecewise", "disabled")


def test_reserve_by_pd_role_from_0_5_15() -> None:
    """``ServerArgs._handle_gpu_memory_settings``: 0.5.15 sizes a PD decode node's activations to its decode batch,
    ``max(256 x 1, 2048) x 1.5``; 0.5.14 to the chunk, ``8192 x 1.5``. Llama-3.1-8B on H100, decode role (the
    prefill graph is off for PD in both): 0.5.14 R = 512 + 12,288 + 128 + 512 = 13,440 -> 0.835; 0.5.15
    R = 512 + 3,072 + 128 + 512 = 4,224, floored at 10,240 on a GPU over 60 GiB -> 0.874."""
    old = resolve("llama-3.1-8b", H100, "0.5.14", disaggregation_mode="decode")
    new = resolve("llama-3.1-8b", H100, "0.5.15", disaggregation_mode="decode")
    assert (old.reserved_mib, old.mem_fraction_static) == (13_440, 0.835)
    assert (new.reserved_mib, new.mem_fraction_static) == (10_240, round((81_559 - 10_240) / 81_559, 3))
    assert new.mem_fraction_static == 0.874


def test_speculative_reserve_before_0_5_14() -> None:
    """``mem_fraction_static`` with a draft: 0.5.13's ``ServerArgs._handle_gpu_memory_settings`` adds
    6144 MiB for STANDALONE and 4096 MiB for any other algorithm but NGRAM after the 10 GiB floor;
    0.5.14's adds nothing. Llama-3.1-8B on H200 (143,771 MiB), TP 1: R = 512 + 1.5 * 8192 + 2 * 256
    + 1/8 * 1024 + 8 * 58 = 13904 -> round(129867 / 143771, 3) = 0.903; EAGLE 18000 ->
    round(125771 / 143771, 3) = 0.875; STANDALONE 20048 -> round(123723 / 143771, 3) = 0.861."""
    cases = (({}, 13904, 0.903), ({"speculative_algorithm": "EAGLE"}, 18000, 0.875),
             ({"speculative_algorithm": "STANDALONE", "speculative_draft_model_path": "d"}, 20048, 0.861),
             ({"speculative_algorithm": "NGRAM"}, 13904, 0.903))  # fmt: skip
    for settings, reserve, fraction in cases:
        old = resolve("llama-3.1-8b", H200, "0.5.13", **settings)
        new = resolve("llama-3.1-8b", H200, "0.5.14", **settings)
        assert (old.reserved_mib, old.mem_fraction_static) == (reserve, fraction), settings
        assert (new.reserved_mib, new.mem_fraction_static) == (13904, 0.903), settings


def test_ngram_and_dflash_turn_overlap_off_before_0_5_14() -> None:
    """0.5.13's ``speculative_hook._handle_ngram`` and ``_handle_dflash`` set
    ``disable_overlap_schedule`` (spec v2 not supported yet), and ``_handle_ngram`` leaves
    ``speculative_num_steps`` None; 0.5.14 keeps the overlap scheduler and sets steps = 12 // 10 = 1."""
    ngram = {"speculative_algorithm": "NGRAM"}
    old, new = resolve("llama-3.1-8b", H200, "0.5.13", **ngram), resolve("llama-3.1-8b", H200, "0.5.14", **ngram)
    assert (old.disable_overlap_schedule, old.speculative_num_steps) == (True, None)
    assert (new.disable_overlap_schedule, new.speculative_num_steps) == (False, 1)
    dflash = {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "draft"}
    assert resolve("llama-3.1-8b", H200, "0.5.13", **dflash).disable_overlap_schedule is True
    assert resolve("llama-3.1-8b", H200, "0.5.14", **dflash).disable_overlap_schedule is False
    # EAGLE keeps the overlap scheduler in both (SGLANG_ENABLE_SPEC_V2 defaults to true in 0.5.13)
    assert resolve("llama-3.1-8b", H200, "0.5.13", speculative_algorithm="EAGLE").disable_overlap_schedule is False


def test_mamba_auto_is_no_buffer_before_0_5_14() -> None:
    """0.5.13's ``ServerArgs._handle_missing_default_values`` turns ``auto`` into ``no_buffer`` for
    every model; its ``_handle_mamba_radix_cache`` then forces page 1 (a warning), turns the overlap
    scheduler off without speculation, and refuses speculation on CUDA. 0.5.14's
    ``_handle_mamba_radix_cache`` picks ``extra_buffer`` for Falcon-H1 (overlap on)."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    old = resolve("falcon-h1-7b", H200, "0.5.13", 4, page_size=64)
    assert (old.mamba_radix_cache_strategy, old.page_size, old.disable_overlap_schedule) == ("no_buffer", 1, True)
    assert resolve("falcon-h1-7b", H200, "0.5.13", 4, page_size=2).page_size == 1
    # no page given: nothing to force (the page default fills 1 later, not this rule)
    unset = resolve("falcon-h1-7b", H200, "0.5.13", 4)
    assert not [a for a in unset.applied if a.setting == "page_size" and "no_buffer" in a.reason]
    new = resolve("falcon-h1-7b", H200, "0.5.14", 4, page_size=64)
    assert (new.mamba_radix_cache_strategy, new.page_size, new.disable_overlap_schedule) == ("extra_buffer", 64, False)
    # a model without a Mamba radix cache gets the field too (SGLang sets it for every model)
    assert resolve("llama-3.1-8b", H200, "0.5.13").mamba_radix_cache_strategy == "no_buffer"
    assert resolve("llama-3.1-8b", H200, "0.5.14").mamba_radix_cache_strategy == "auto"
    with pytest.raises(KVCacheConfigError, match="_handle_mamba_radix_cache.*--disable-radix-cache"):
        resolve("falcon-h1-7b", H200, "0.5.13", 4, speculative_algorithm="EAGLE")
    ok = resolve("falcon-h1-7b", H200, "0.5.13", 4, speculative_algorithm="EAGLE", disable_radix_cache=True)
    assert ok.disable_overlap_schedule is False
    # ROCm turns the radix cache off instead of refusing
    assert resolve("falcon-h1-7b", lookup_gpu("MI300X"), "0.5.13", 4, speculative_algorithm="EAGLE").disable_radix_cache
    # trtllm_mha cannot run page 1: the radix cache goes off and the overlap scheduler stays on
    trt = resolve("falcon-h1-7b", H200, "0.5.13", 4, attention_backend="trtllm_mha")
    assert (trt.disable_radix_cache, trt.disable_overlap_schedule) == (True, False)


def test_kimi_linear_runs_without_radix_cache_before_0_5_14() -> None:
    """Kimi-Linear: 0.5.13's ``_handle_model_specific_adjustments`` calls ``_handle_mamba_radix_cache``
    with ``support_mamba_cache=False`` -> the radix cache is turned off (overlap stays on, any page);
    0.5.14 serves it with the no_buffer radix cache -> overlap off, page 64 refused."""
    import pytest

    from kvstrategies.errors import KVCacheConfigError

    old = resolve("kimi-linear-48b-a3b", H200, "0.5.13", 4, page_size=64)
    assert (old.disable_radix_cache, old.disable_overlap_schedule, old.page_size) == (True, False, 64)
    new = resolve("kimi-linear-48b-a3b", H200, "0.5.14", 4)
    assert (new.disable_radix_cache, new.disable_overlap_schedule) == (False, True)
    with pytest.raises(KVCacheConfigError, match="validate_mamba_no_buffer"):
        resolve("kimi-linear-48b-a3b", H200, "0.5.14", 4, page_size=64)


# ---- SGLang 0.5.12 -> 0.5.13 (0.5.11 launches as 0.5.12) ---------------------------------------------------------


def test_trtllm_moe_runner_disables_the_prefill_graph_up_to_0_5_12() -> None:
    """Qwen3-30B-A3B (bf16) on B200: the SM100 model override picks the flashinfer_trtllm MoE runner, and 0.5.12's
    ``ServerArgs._handle_moe_kernel_config`` then turns the tc_piecewise prefill graph off (bypassed top-k), after
    ``_handle_gpu_memory_settings`` counted it: both releases reserve R = 512 + 1.5 x 16384 + 2 x 512 + 1/8 x 1024
    + 8 x 74 = 26,832 MiB -> round(156,527 / 183,359, 3) = 0.854. GLM-4.5 bf16 keeps the graph in 0.5.12 (its
    override takes modelopt_fp4 only before 0.5.15)."""
    old, new = resolve("qwen3-30b-a3b", B200, "0.5.12"), resolve("qwen3-30b-a3b", B200, "0.5.13")
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "tc_piecewise")
    assert old.reserved_mib == new.reserved_mib == 26_832 and old.mem_fraction_static == 0.854
    assert resolve("glm-4.5", B200, "0.5.12", 8).prefill_cuda_graph == "tc_piecewise"
    assert resolve("qwen3-30b-a3b", H200, "0.5.12").prefill_cuda_graph == "tc_piecewise"  # not SM100


def test_dsa_launch_up_to_0_5_12() -> None:
    """DeepSeek-V3.2 on H200, TP 8: 0.5.12 calls the DSA backend ``nsa`` and keeps DeepseekV32 on
    ``piecewise_cuda_graph_disabled_model_archs``, so the prefill graph is off before the reserve: R = 512 + 1.5 x
    8192 + 2 x 512 + 8/8 x 1024 = 14,848 MiB -> 0.897; 0.5.13 adds the MLA prefill graph's 1,536 -> 16,384, 0.886."""
    old, new = resolve("deepseek-v3.2", H200, "0.5.12", 8), resolve("deepseek-v3.2", H200, "0.5.13", 8)
    assert (old.attention_backend, new.attention_backend) == ("nsa", "dsa")
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "tc_piecewise")
    assert (old.reserved_mib, old.mem_fraction_static) == (14_848, 0.897)
    assert (new.reserved_mib, new.mem_fraction_static) == (16_384, 0.886)


def test_eagle_tree_turns_overlap_off_up_to_0_5_12() -> None:
    """EAGLE with ``--speculative-eagle-topk 4``: 0.5.12's ``_handle_speculative_decoding`` disables the overlap
    scheduler (spec v2 supports topk 1 only); 0.5.13 keeps it. Top-k 1 keeps it in both."""
    tree = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8}  # fmt: skip
    assert resolve("llama-3.1-8b", H200, "0.5.12", **tree).disable_overlap_schedule is True
    assert resolve("llama-3.1-8b", H200, "0.5.13", **tree).disable_overlap_schedule is False
    chain = {**tree, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert resolve("llama-3.1-8b", H200, "0.5.12", **chain).disable_overlap_schedule is False
    pair = {**tree, "speculative_eagle_topk": 2}
    assert resolve("llama-3.1-8b", H200, "0.5.12", **pair).disable_overlap_schedule is True


def test_gemma4_is_triton_everywhere_up_to_0_5_12() -> None:
    """Gemma-4 on B200 without a backend: 0.5.13 takes trtllm_mha (page 64), 0.5.12 triton (page 1); 0.5.12 has no
    Gemma-4 backend check, so ``--attention-backend flashinfer`` plans there and is refused from 0.5.13."""
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.sglang.bridge.launch_grid import synthetic_config

    facts_ = model_facts_from_hf_config(synthetic_config("gemma4"))

    def run(release: str, gpu: object, **settings: object) -> LaunchResolution:
        return resolve_launch_defaults(facts_, gpu, settings=LaunchSettings(**settings),  # type: ignore[arg-type]
                                       release=R[release])  # fmt: skip

    assert (run("0.5.12", B200).attention_backend, run("0.5.12", B200).page_size) == ("triton", 1)
    assert (run("0.5.13", B200).attention_backend, run("0.5.13", B200).page_size) == ("trtllm_mha", 64)
    assert run("0.5.12", H100, attention_backend="flashinfer").attention_backend == "flashinfer"
    with pytest.raises(KVCacheConfigError, match="Gemma-4 needs one of"):
        run("0.5.13", H100, attention_backend="flashinfer")


# ---- SGLang 0.5.10 -> 0.5.11 -----------------------------------------------------------------------------------------


def test_speculative_decoding_turns_the_piecewise_graph_off_up_to_0_5_10() -> None:
    """Llama-3.1-8B EAGLE on H200: 0.5.10's ``ServerArgs._handle_piecewise_cuda_graph`` (condition 2) disables the
    tc_piecewise prefill graph before ``_handle_gpu_memory_settings``, so its ``8 x 58`` MiB are not reserved:
    R = 512 + 1.5 x 8192 + 2 x 256 + 1/8 x 1024 + 4096 (speculative) = 17,536 MiB -> round(126,235 / 143,771, 3) =
    0.878; 0.5.11 keeps the graph: 17,536 + 464 = 18,000 -> 0.875. Without speculation both reserve 13,904."""
    old, new = resolve("llama-3.1-8b", H200, "0.5.10", speculative_algorithm="EAGLE"), resolve(
        "llama-3.1-8b", H200, "0.5.11", speculative_algorithm="EAGLE"
    )
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "tc_piecewise")
    assert (old.reserved_mib, old.mem_fraction_static) == (512 + 12_288 + 512 + 128 + 4096, 0.878)
    assert (new.reserved_mib, new.mem_fraction_static) == (17_536 + 8 * 58, 0.875)
    assert resolve("llama-3.1-8b", H200, "0.5.10").reserved_mib == resolve("llama-3.1-8b", H200, "0.5.11").reserved_mib
    assert resolve("llama-3.1-8b", H200, "0.5.10").prefill_cuda_graph == "tc_piecewise"


def test_spec_v2_is_off_by_default_up_to_0_5_10() -> None:
    """``SGLANG_ENABLE_SPEC_V2`` defaults to False in 0.5.10 (``sglang.srt.environ``), so
    ``ServerArgs._handle_speculative_decoding`` turns the overlap scheduler off for EAGLE / EAGLE3 / STANDALONE;
    0.5.11 defaults it to True and keeps it. MiMo-V2-Flash's EAGLE override turns spec v2 on in 0.5.10 too, and
    then a given top-k > 1 is refused."""
    for algo in ("EAGLE", "EAGLE3", "STANDALONE"):
        assert resolve("llama-3.1-8b", H200, "0.5.10", speculative_algorithm=algo).disable_overlap_schedule is True
        assert resolve("llama-3.1-8b", H200, "0.5.11", speculative_algorithm=algo).disable_overlap_schedule is False
    # the override keys on the architecture (0.5.10's transformers cannot load a mimo_v2_flash config.json, so the
    # architecture is put on a Llama config here)
    mimo = dataclasses.replace(facts("llama-3.1-8b"), architectures=("MiMoV2FlashForCausalLM",))

    def run(**settings: object) -> LaunchResolution:
        return resolve_launch_defaults(mimo, H200, settings=LaunchSettings(**settings),  # type: ignore[arg-type]
                                       release=R["0.5.10"])  # fmt: skip

    assert run(speculative_algorithm="EAGLE", disable_overlap_schedule=True).disable_overlap_schedule is False
    assert run(speculative_algorithm="EAGLE3").disable_overlap_schedule is True
    tree = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="Spec v2 currently only supports topk = 1"):
        run(**tree)
    with pytest.raises(KVCacheConfigError, match="Spec v2 currently only supports topk = 1"):
        run(**{**tree, "speculative_eagle_topk": 2})
    chain = {**tree, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert run(**chain).disable_overlap_schedule is False  # a given top-k of 1 is accepted
    assert resolve("llama-3.1-8b", H200, "0.5.10", **tree).disable_overlap_schedule is True


def test_no_buffer_mamba_keeps_the_page_up_to_0_5_10() -> None:
    """Nemotron-H 8B ``--page-size 64`` (no_buffer Mamba radix cache): 0.5.11's ``_handle_mamba_radix_cache`` sets
    the page to 1 with a warning, 0.5.10 keeps 64; both turn the overlap scheduler off."""
    old, new = resolve("nemotron-h-8b", H200, "0.5.10", 8, page_size=64), resolve(
        "nemotron-h-8b", H200, "0.5.11", 8, page_size=64
    )
    assert (old.page_size, new.page_size) == (64, 1)
    assert old.disable_overlap_schedule is new.disable_overlap_schedule is True


def test_qwen3_next_keeps_a_given_page_on_sm100_up_to_0_5_10() -> None:
    """Qwen3-Next TP 8 on B200 with ``--page-size 64`` (no_buffer radix cache, no speculation: page 1 needed, so
    the SM100 override picks triton): 0.5.11 forces triton's page 1 over the user's, 0.5.10's
    ``_handle_model_specific_adjustments`` sets only the backend and the 64 stays."""
    old = resolve("qwen3-next-80b-a3b", B200, "0.5.10", 8, page_size=64)
    new = resolve("qwen3-next-80b-a3b", B200, "0.5.11", 8, page_size=64)
    assert (old.attention_backend, new.attention_backend) == ("triton", "triton")
    assert (old.page_size, new.page_size) == (64, 1)
    assert resolve("qwen3-next-80b-a3b", B200, "0.5.10", 8).page_size == 1  # no page given: the default 1


def test_dsa_hopper_fp8_prefill_backend_is_flashmla_auto_up_to_0_5_10() -> None:
    """DeepSeek-V3.2 fp8 KV on H200: 0.5.10's ``ServerArgs._set_default_nsa_backends`` picks ``flashmla_auto`` for
    prefill (it dispatches at run time), 0.5.11 ``flashmla_kv``; decode is ``flashmla_kv`` in both."""
    old = resolve("deepseek-v3.2", H200, "0.5.10", 8, kv_cache_dtype="fp8_e4m3")
    new = resolve("deepseek-v3.2", H200, "0.5.11", 8, kv_cache_dtype="fp8_e4m3")
    assert (old.dsa_prefill_backend, new.dsa_prefill_backend) == ("flashmla_auto", "flashmla_kv")
    assert old.dsa_decode_backend == new.dsa_decode_backend == "flashmla_kv"


def test_dflash_is_left_unresolved_by_0_5_10() -> None:
    """0.5.10's ``_handle_speculative_decoding`` knows no DFLASH: no request cap, no steps (its scheduler then
    refuses the name in ``SpeculativeAlgorithm.from_string``, as the planner's request check does)."""
    dflash = {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": "draft"}
    old, new = resolve("llama-3.1-8b", H200, "0.5.10", **dflash), resolve("llama-3.1-8b", H200, "0.5.11", **dflash)
    assert (old.max_running_requests, old.speculative_num_steps) == (None, None)
    assert (new.max_running_requests, new.speculative_num_steps) == (48, 1)


# ---- SGLang 0.5.9 -> 0.5.10 -----------------------------------------------------------------------------------------


def test_piecewise_graph_is_opt_in_up_to_0_5_9() -> None:
    """Llama-3.1-8B on H200: 0.5.9's piecewise prefill graph needs ``--enable-piecewise-cuda-graph``, so
    ``_handle_gpu_memory_settings`` reserves no ``8 x 58`` MiB for it: R = 512 + 1.5 x 8192 + 2 x 256 + 1/8 x 1024
    = 13,440 MiB -> round(130,331 / 143,771, 3) = 0.907; 0.5.10 keeps the graph: 13,904 -> 0.903. With EAGLE 0.5.9
    adds a 2,048 MiB draft reserve (15,488 -> 0.892), 0.5.10 4,096 (and turns the graph off: 17,536 -> 0.878)."""
    old, new = resolve("llama-3.1-8b", H200, "0.5.9"), resolve("llama-3.1-8b", H200, "0.5.10")
    assert (old.prefill_cuda_graph, new.prefill_cuda_graph) == ("disabled", "tc_piecewise")
    assert (old.reserved_mib, old.mem_fraction_static) == (512 + 12_288 + 512 + 128, 0.907)
    assert (new.reserved_mib, new.mem_fraction_static) == (13_440 + 8 * 58, 0.903)
    eagle = {"speculative_algorithm": "EAGLE"}
    old_e, new_e = resolve("llama-3.1-8b", H200, "0.5.9", **eagle), resolve("llama-3.1-8b", H200, "0.5.10", **eagle)
    assert (old_e.reserved_mib, old_e.mem_fraction_static) == (13_440 + 2048, 0.892)
    assert (new_e.reserved_mib, new_e.mem_fraction_static) == (13_440 + 4096, 0.878)


def test_gpt_oss_on_trtllm_turns_hybrid_swa_memory_off_up_to_0_5_9() -> None:
    """GPT-OSS-120B on B200 takes trtllm_mha; 0.5.9's ``_handle_model_specific_adjustments`` then disables hybrid-SWA
    memory (no SWA index translation in that backend yet); 0.5.10 keeps it."""
    old, new = resolve("gpt-oss-120b", B200, "0.5.9"), resolve("gpt-oss-120b", B200, "0.5.10")
    assert old.attention_backend == new.attention_backend == "trtllm_mha"
    assert (old.disable_hybrid_swa_memory, new.disable_hybrid_swa_memory) == (True, False)
    assert resolve("gpt-oss-120b", H200, "0.5.9").disable_hybrid_swa_memory is False  # fa3 on Hopper


def test_dsa_fp8_keeps_the_hopper_backends_on_sm100_up_to_0_5_9() -> None:
    """DeepSeek-V3.2 fp8 KV on B200: 0.5.9's ``_set_default_nsa_backends`` has no SM 10 branch for fp8
    (flashmla_auto / flashmla_kv); 0.5.10 takes trtllm for both."""
    old = resolve("deepseek-v3.2", B200, "0.5.9", 8, kv_cache_dtype="fp8_e4m3")
    new = resolve("deepseek-v3.2", B200, "0.5.10", 8, kv_cache_dtype="fp8_e4m3")
    assert (old.dsa_prefill_backend, old.dsa_decode_backend) == ("flashmla_auto", "flashmla_kv")
    assert (new.dsa_prefill_backend, new.dsa_decode_backend) == ("trtllm", "trtllm")


def test_no_buffer_mamba_speculation_turns_the_radix_cache_off_up_to_0_5_9() -> None:
    """Falcon-H1 with EAGLE (no_buffer Mamba radix cache): 0.5.9's ``_handle_mamba_radix_cache`` turns the radix
    cache off; 0.5.10 refuses the launch on CUDA."""
    assert resolve("falcon-h1-7b", H200, "0.5.9", 4, speculative_algorithm="EAGLE").disable_radix_cache is True
    with pytest.raises(KVCacheConfigError, match="not compatible with the radix cache"):
        resolve("falcon-h1-7b", H200, "0.5.10", 4, speculative_algorithm="EAGLE")


def test_qwen3_next_is_triton_on_sm100_up_to_0_5_9() -> None:
    """Qwen3-Next TP 8 on B200 with the extra-buffer Mamba strategy (page 1 not needed): 0.5.10 takes trtllm_mha
    (page 64); 0.5.9's override names triton whatever the launch."""
    extra = {"mamba_radix_cache_strategy": "extra_buffer"}
    old = resolve("qwen3-next-80b-a3b", B200, "0.5.9", 8, **extra)
    new = resolve("qwen3-next-80b-a3b", B200, "0.5.10", 8, **extra)
    assert (old.attention_backend, new.attention_backend) == ("triton", "trtllm_mha")
    assert (old.page_size, new.page_size) == (1, 64)


# ---- SGLang 0.5.8 -> 0.5.9 -----------------------------------------------------------------------------------------


def test_piecewise_token_list_starts_its_64_steps_at_640_up_to_0_5_8() -> None:
    """``_generate_piecewise_cuda_graph_tokens``: 0.5.8's step-64 range is 640..1024 (0.5.9: 576..1024), one size
    fewer at a chunk of 8192 (57, 58). The graph is opt-in in both, so the reserve does not move."""
    old, new = resolve("llama-3.1-8b", H200, "0.5.8"), resolve("llama-3.1-8b", H200, "0.5.9")
    assert (old.prefill_graph_bs_count, new.prefill_graph_bs_count) == (57, 58)
    assert old.mem_fraction_static == new.mem_fraction_static == 0.907


def test_dsa_backend_fields_default_to_flashmla_sparse_and_fa3_up_to_0_5_8() -> None:
    """0.5.8's ``nsa_prefill_backend`` / ``nsa_decode_backend`` default to flashmla_sparse / fa3 for every model (0.5.9:
    unset, filled for DSA models); a DSA model keeps them with bf16 below SM 10, takes flashmla_sparse for both on
    SM 10+ (0.5.9: flashmla_sparse / trtllm)."""
    old, new = resolve("llama-3.1-8b", H200, "0.5.8"), resolve("llama-3.1-8b", H200, "0.5.9")
    assert (old.dsa_prefill_backend, old.dsa_decode_backend) == ("flashmla_sparse", "fa3")
    assert (new.dsa_prefill_backend, new.dsa_decode_backend) == (None, None)
    sm100 = {"kv_cache_dtype": "bfloat16"}
    old_b = resolve("deepseek-v3.2", B200, "0.5.8", 8, **sm100)
    new_b = resolve("deepseek-v3.2", B200, "0.5.9", 8, **sm100)
    assert (old_b.dsa_prefill_backend, old_b.dsa_decode_backend) == ("flashmla_sparse", "flashmla_sparse")
    assert (new_b.dsa_prefill_backend, new_b.dsa_decode_backend) == ("flashmla_sparse", "trtllm")
    fp8 = resolve("deepseek-v3.2", H200, "0.5.8", 8, kv_cache_dtype="fp8_e4m3")  # forced over the defaults
    assert (fp8.dsa_prefill_backend, fp8.dsa_decode_backend) == ("flashmla_auto", "flashmla_kv")


def test_mamba_radix_cache_is_handled_per_model_up_to_0_5_8() -> None:
    """0.5.8's ``_handle_model_specific_adjustments`` keeps the no_buffer block in GLM-4 MoE's branch: GLM-4.5 loses the
    overlap scheduler and Qwen3-Next keeps it (0.5.9: the reverse); Falcon-H1 keeps the radix cache under EAGLE
    (0.5.9 turns it off); with the radix cache off Falcon-H1 on B200 takes the generic trtllm_mha (page 64, 0.5.9:
    triton page 1); Nemotron-H with EAGLE on B200 turns the radix cache off before choosing a backend
    (trtllm_mha; 0.5.9: flashinfer)."""
    assert resolve("glm-4.5", H100, "0.5.8", 8).disable_overlap_schedule is True
    assert resolve("glm-4.5", H100, "0.5.9", 8).disable_overlap_schedule is False
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.8", 8).disable_overlap_schedule is False
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.9", 8).disable_overlap_schedule is True
    eagle = {"speculative_algorithm": "EAGLE"}
    assert resolve("falcon-h1-7b", H100, "0.5.8", 4, **eagle).disable_radix_cache is False
    assert resolve("falcon-h1-7b", H100, "0.5.9", 4, **eagle).disable_radix_cache is True
    off = resolve("falcon-h1-7b", B200, "0.5.8", 4, disable_radix_cache=True)
    assert (off.attention_backend, off.page_size) == ("trtllm_mha", 64)
    chain = {**eagle, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "speculative_num_steps": 3}
    old_n = resolve("nemotron-h-56b", B200, "0.5.8", 8, **chain)
    new_n = resolve("nemotron-h-56b", B200, "0.5.9", 8, **chain)
    assert (old_n.attention_backend, new_n.attention_backend) == ("trtllm_mha", "flashinfer")
    assert old_n.disable_radix_cache is new_n.disable_radix_cache is True


def test_gpt_oss_speculation_turns_hybrid_swa_memory_off_up_to_0_5_8() -> None:
    """GPT-OSS-120B with EAGLE on H100 (fa3): 0.5.8 disables hybrid-SWA memory for speculation; 0.5.9 keeps it."""
    eagle = {"speculative_algorithm": "EAGLE"}
    assert resolve("gpt-oss-120b", H100, "0.5.8", 8, **eagle).disable_hybrid_swa_memory is True
    assert resolve("gpt-oss-120b", H100, "0.5.9", 8, **eagle).disable_hybrid_swa_memory is False


def test_unknown_capacity_fraction_per_release() -> None:
    """SGLang cannot read the GPU's capacity (``gpu_mem is None``): ``handle_gpu_memory_settings`` takes 0.88 up to
    0.5.19 (``ServerArgs._handle_gpu_memory_settings``) and 0.95 from 0.5.20 (``arg_groups.memory_hook``); the VLM cut
    (``adjust_mem_fraction_for_vlm``) still applies: Gemma-3-27B with ``--enable-multimodal`` (27 vision layers,
    hidden 1152) -> ``x 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))``."""
    unknown = H100.with_capacity(None)
    assert resolve("llama-3.1-8b", unknown, "0.5.19").mem_fraction_static == 0.88
    assert resolve("llama-3.1-8b", unknown, "0.5.20").mem_fraction_static == 0.95
    assert resolve("llama-3.1-8b", unknown, "0.5.11").mem_fraction_static == 0.88
    cut = 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))
    gemma = resolve("gemma-3-27b", unknown, "0.5.20", enable_multimodal=True)
    assert gemma.mem_fraction_static == pytest.approx(0.95 * cut) and gemma.reserved_mib is None


# ---- SGLang 0.5.7 -> 0.5.8 -----------------------------------------------------------------------------------------


def test_fa3_is_the_hopper_default_for_listed_models_only_up_to_0_5_7() -> None:
    """0.5.7's ``_handle_attention_backend`` picks fa3 on Hopper only for ``is_fa3_default_architecture`` (Llama, Qwen,
    Gemma-2/3, GLM-4 MoE ...): Falcon-7B gets flashinfer, Llama-3.1-8B fa3; 0.5.8 takes fa3 for every MHA model."""
    assert resolve("falcon-7b", H100, "0.5.7").attention_backend == "flashinfer"
    assert resolve("falcon-7b", H100, "0.5.8").attention_backend == "fa3"
    assert resolve("llama-3.1-8b", H100, "0.5.7").attention_backend == "fa3"
    assert resolve("qwen2.5-7b", H200, "0.5.7").attention_backend == "fa3"


def test_eagle_auto_parameters_default_to_the_wide_set_up_to_0_5_7() -> None:
    """``auto_choose_speculative_params``: 0.5.7 gives every model but its narrow list (DeepSeek, GPT-OSS, GLM-4
    MoE ...) ``(5, 4, 8)``; 0.5.8 gives every model but Llama and Grok ``(3, 1, 4)``."""
    eagle = {"speculative_algorithm": "EAGLE"}
    old, new = resolve("falcon-7b", H100, "0.5.7", **eagle), resolve("falcon-7b", H100, "0.5.8", **eagle)
    auto = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    assert tuple(getattr(old, f) for f in auto) == (5, 4, 8)
    assert tuple(getattr(new, f) for f in auto) == (3, 1, 4)
    assert tuple(getattr(resolve("deepseek-v3", H200, "0.5.7", 8, **eagle), f) for f in auto) == (3, 1, 4)
    assert tuple(getattr(resolve("llama-3.1-8b", H100, "0.5.8", **eagle), f) for f in auto) == (5, 4, 8)


def test_gpt_oss_always_turns_hybrid_swa_memory_off_up_to_0_5_7() -> None:
    """0.5.7's GPT-OSS override sets ``disable_hybrid_swa_memory = True`` whatever the launch; 0.5.8 only with
    trtllm_mha or speculative decoding (H100: fa3, no speculation -> kept)."""
    assert resolve("gpt-oss-120b", H100, "0.5.7", 8).disable_hybrid_swa_memory is True
    assert resolve("gpt-oss-120b", H100, "0.5.8", 8).disable_hybrid_swa_memory is False


def test_no_buffer_block_is_in_qwen3_next_override_up_to_0_5_7() -> None:
    """0.5.7's ``_handle_model_specific_adjustments`` keeps the no_buffer block in Qwen3-Next's branch (overlap off with
    the radix cache on), GLM-4 MoE's has none; 0.5.8 moved it into GLM-4 MoE's (the reverse)."""
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.7", 8).disable_overlap_schedule is True
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.8", 8).disable_overlap_schedule is False
    assert resolve("glm-4.5", H100, "0.5.7", 8).disable_overlap_schedule is False
    assert resolve("glm-4.5", H100, "0.5.8", 8).disable_overlap_schedule is True
    noradix = resolve("qwen3-next-80b-a3b", H100, "0.5.7", 8, disable_radix_cache=True)
    assert noradix.disable_overlap_schedule is False


def test_nemotron_h_keeps_the_radix_cache_under_speculation_up_to_0_5_7() -> None:
    """Nemotron-H-56B with an EAGLE chain (top-k 1): 0.5.7 keeps the radix cache, so its override turns the overlap
    scheduler off and, on B200, names flashinfer (page 1); 0.5.8 turns the radix cache off first (B200: trtllm_mha,
    page 64)."""
    chain = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
             "speculative_num_steps": 3}  # fmt: skip
    old, new = (resolve("nemotron-h-56b", H100, v, 8, **chain) for v in ("0.5.7", "0.5.8"))
    assert (old.disable_radix_cache, new.disable_radix_cache) == (False, True)
    assert old.disable_overlap_schedule is True
    old_b, new_b = (resolve("nemotron-h-56b", B200, v, 8, **chain) for v in ("0.5.7", "0.5.8"))
    assert (old_b.attention_backend, old_b.page_size) == ("flashinfer", 1)
    assert (new_b.attention_backend, new_b.page_size) == ("trtllm_mha", 64)


def test_eagle_tree_at_page_above_one_needs_flashinfer_or_fa3_up_to_0_5_12() -> None:
    """``speculative_eagle_topk > 1`` with ``page_size > 1``: up to 0.5.12 ``_handle_speculative_decoding`` accepts
    flashinfer and fa3 only; 0.5.13's ``speculative_hook._handle_eagle_family`` adds triton. Llama-3.1-8B on H100
    with triton, page 64, top-k 4."""
    tree = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "speculative_num_steps": 5, "attention_backend": "triton", "page_size": 64}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="flashinfer or fa3, got triton"):
        resolve("llama-3.1-8b", H100, "0.5.12", **tree)
    assert resolve("llama-3.1-8b", H100, "0.5.13", **tree).page_size == 64
    # 0.5.7's wide auto parameters (top-k 4) meet the same check: Falcon-H1 on B200 (triton) at page 64
    with pytest.raises(KVCacheConfigError, match="flashinfer or fa3, got triton"):
        resolve("falcon-h1-7b", B200, "0.5.7", 4, speculative_algorithm="EAGLE", page_size=64)


def test_prefill_graph_follows_the_chunk_on_coarse_sizes_up_to_0_5_7() -> None:
    """``_generate_piecewise_cuda_graph_tokens`` of 0.5.7: 4..32/4 (8), 48..256/16 (14), 288..512/32 (8), 640..4096/128
    (28), 4352../256; its max tokens is the chunk for MLA too. DeepSeek-V3 on H200 (chunk 8192): 0.5.7 8192 tokens,
    ``8 + 14 + 8 + 28 + 16 = 74`` sizes; 0.5.8 the flat MLA 2048, ``8 + 14 + 8 + 7 + 4 = 41``. Llama-3.1-8B on an
    RTX 4090 (chunk 2048): 0.5.7 ``8 + 14 + 8 + 12 = 42``, 0.5.8 41."""
    old, new = resolve("deepseek-v3", H200, "0.5.7", 8), resolve("deepseek-v3", H200, "0.5.8", 8)
    assert (old.prefill_graph_max_bs, old.prefill_graph_bs_count) == (8192, 8 + 14 + 8 + 28 + 16)
    assert (new.prefill_graph_max_bs, new.prefill_graph_bs_count) == (2048, 8 + 14 + 8 + 7 + 4)
    small_old, small_new = resolve("llama-3.1-8b", RTX4090, "0.5.7"), resolve("llama-3.1-8b", RTX4090, "0.5.8")
    assert (small_old.prefill_graph_max_bs, small_old.prefill_graph_bs_count) == (2048, 8 + 14 + 8 + 12)
    assert small_new.prefill_graph_bs_count == 41
    off = resolve("deepseek-v3", H200, "0.5.7", 8, chunked_prefill_size=-1)
    assert (off.prefill_graph_max_bs, off.prefill_graph_bs_count) == (-1, 0)
    # a chunk one short of the tail's second size: 4352 fits, 4608 does not (8 + 14 + 8 + 28 + 1)
    odd = resolve("llama-3.1-8b", H200, "0.5.7", chunked_prefill_size=4607)
    assert (odd.prefill_graph_max_bs, odd.prefill_graph_bs_count) == (4607, 8 + 14 + 8 + 28 + 1)


# ---- SGLang 0.5.6 -> 0.5.7 -----------------------------------------------------------------------------------------


def test_mha_on_sm100_defaults_to_flashinfer_up_to_0_5_6() -> None:
    """0.5.6's ``_handle_attention_backend_compatibility`` has no SM100 rule for MHA models: flashinfer on B200 (page
    1); 0.5.7 takes trtllm_mha (page 64). MLA keeps flashinfer on SM100 in both."""
    old, new = resolve("falcon-7b", B200, "0.5.6"), resolve("falcon-7b", B200, "0.5.7")
    assert (old.attention_backend, old.page_size) == ("flashinfer", 1)
    assert (new.attention_backend, new.page_size) == ("trtllm_mha", 64)


def test_fa3_list_without_qwen3_vl_up_to_0_5_6() -> None:
    """0.5.6's ``is_fa3_default_architecture`` has no Qwen3-VL: flashinfer on H100 for a Qwen3-VL config; 0.5.7 fa3.
    Qwen2 is on both lists."""
    vl = model_facts_from_hf_config(
        {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "num_hidden_layers": 36,
         "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "head_dim": 128,
         "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}
    )  # fmt: skip
    old = resolve_launch_defaults(vl, H100, tp_size=1, settings=LaunchSettings(), release=R["0.5.6"])
    new = resolve_launch_defaults(vl, H100, tp_size=1, settings=LaunchSettings(), release=R["0.5.7"])
    assert (old.attention_backend, new.attention_backend) == ("flashinfer", "fa3")
    assert resolve("qwen2.5-7b", H100, "0.5.6").attention_backend == "fa3"


def test_eagle_auto_parameters_of_glm_up_to_0_5_6() -> None:
    """``auto_choose_speculative_params``: 0.5.6's narrow list has DeepSeek, GPT-OSS and Bailing, not GLM-4 MoE
    (``(5, 4, 8)``); 0.5.7 lists it (``(3, 1, 4)``). DeepSeek-V3 is narrow in both."""
    auto = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    eagle = {"speculative_algorithm": "EAGLE"}
    assert tuple(getattr(resolve("glm-4.5", H100, "0.5.6", 8, **eagle), f) for f in auto) == (5, 4, 8)
    assert tuple(getattr(resolve("glm-4.5", H100, "0.5.7", 8, **eagle), f) for f in auto) == (3, 1, 4)
    assert tuple(getattr(resolve("deepseek-v3", H200, "0.5.6", 8, **eagle), f) for f in auto) == (3, 1, 4)


def test_prefill_graph_is_a_flat_4096_up_to_0_5_6() -> None:
    """0.5.6's ``piecewise_cuda_graph_max_tokens`` keeps its field default 4096 whatever the chunk (0.5.7: the chunk):
    the coarse list up to 4096 has ``8 + 14 + 8 + 28 = 58`` sizes. DeepSeek-V3 on H200: 4096 / 58 (0.5.7: 8192 / 74);
    with chunked prefill off too."""
    old, new = resolve("deepseek-v3", H200, "0.5.6", 8), resolve("deepseek-v3", H200, "0.5.7", 8)
    assert (old.prefill_graph_max_bs, old.prefill_graph_bs_count) == (4096, 8 + 14 + 8 + 28)
    assert (new.prefill_graph_max_bs, new.prefill_graph_bs_count) == (8192, 74)
    off = resolve("deepseek-v3", H200, "0.5.6", 8, chunked_prefill_size=-1)
    assert (off.prefill_graph_max_bs, off.prefill_graph_bs_count) == (4096, 58)


def test_mamba_overrides_of_0_5_6() -> None:
    """0.5.6's ``_handle_model_specific_adjustments``: Falcon-H1 and Nemotron-H have no Mamba override (the overlap
    scheduler stays on with the radix cache; 0.5.7 turns it off); Qwen3-Next turns it off with the radix cache on,
    and on SM100 takes triton even over a given backend (0.5.7: only when none is given)."""
    assert resolve("falcon-h1-7b", H100, "0.5.6", 4).disable_overlap_schedule is False
    assert resolve("falcon-h1-7b", H100, "0.5.7", 4).disable_overlap_schedule is True
    assert resolve("nemotron-h-56b", H100, "0.5.6", 8).disable_overlap_schedule is False
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.6", 8).disable_overlap_schedule is True
    given = {"attention_backend": "flashinfer"}
    assert resolve("qwen3-next-80b-a3b", B200, "0.5.6", 8, **given).attention_backend == "triton"
    assert resolve("qwen3-next-80b-a3b", B200, "0.5.7", 8, **given).attention_backend == "flashinfer"


# ---- SGLang 0.5.5 -> 0.5.6 -----------------------------------------------------------------------------------------


def test_dsa_attention_dp_is_the_tp_size_up_to_0_5_5() -> None:
    """0.5.5's DeepSeek NSA override sets ``enable_dp_attention`` and ``dp_size = tp_size`` (0.5.6 keeps the given
    dp_size): DeepSeek-V3.2 at TP 8 on H100 runs DP attention 8, so the chunk is ``8192 // 8 = 1024`` (0.5.6: 8192).
    The memory fraction is resolved before the override, at the given DP size, so it does not move."""
    old, new = resolve("deepseek-v3.2", H100, "0.5.5", 8), resolve("deepseek-v3.2", H100, "0.5.6", 8)
    assert (old.attn_dp_size, new.attn_dp_size) == (8, None)
    assert (old.chunked_prefill_size, new.chunked_prefill_size) == (8192 // 8, 8192)
    assert old.mem_fraction_static == new.mem_fraction_static


def test_llama4_needs_a_given_backend_up_to_0_5_5() -> None:
    """0.5.5's Llama-4 override asserts the backend is fa3 / aiter / triton / trtllm_mha before any default is picked:
    a launch without ``--attention-backend`` is refused; 0.5.6 picks one per GPU (H100: fa3)."""
    with pytest.raises(KVCacheConfigError, match="Llama-4 needs one of"):
        resolve("llama-4-scout", H100, "0.5.5", 4)
    assert resolve("llama-4-scout", H100, "0.5.6", 4).attention_backend == "fa3"
    assert resolve("llama-4-scout", H100, "0.5.5", 4, attention_backend="fa3").attention_backend == "fa3"


def test_eagle_tree_at_page_above_one_needs_flashinfer_up_to_0_5_5() -> None:
    """``_handle_speculative_decoding``: top-k > 1 at page > 1 runs on flashinfer only in 0.5.5 (0.5.6 adds fa3, 0.5.13
    triton). Llama-3.1-8B on H100 with fa3 and page 64, top-k 4."""
    tree = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "speculative_num_steps": 5, "attention_backend": "fa3", "page_size": 64}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="needs flashinfer, got fa3"):
        resolve("llama-3.1-8b", H100, "0.5.5", **tree)
    assert resolve("llama-3.1-8b", H100, "0.5.6", **tree).page_size == 64


def test_qwen3_next_has_no_mamba_override_up_to_0_5_5() -> None:
    """0.5.5 has no Qwen3-Next override: the overlap scheduler stays on with the radix cache, and B200 takes the generic
    flashinfer (0.5.6: overlap off, triton)."""
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.5", 8).disable_overlap_schedule is False
    assert resolve("qwen3-next-80b-a3b", H100, "0.5.6", 8).disable_overlap_schedule is True
    assert resolve("qwen3-next-80b-a3b", B200, "0.5.5", 8).attention_backend == "flashinfer"
    assert resolve("qwen3-next-80b-a3b", B200, "0.5.6", 8).attention_backend == "triton"


# ---- SGLang 0.5.4 -> 0.5.5 -----------------------------------------------------------------------------------------


def test_the_default_backend_is_left_to_the_model_runner_up_to_0_5_4() -> None:
    """0.5.4's ``ServerArgs`` leaves ``attention_backend`` unset (the ModelRunner's ``model_specific_adjustment`` picks
    one at start-up), so the launch checks see None: a paged EAGLE tree (top-k 4 at page 64) is refused unless
    flashinfer is given; 0.5.5 picks fa3 on H100 and checks that. A model override still names its backend (GPT-OSS:
    fa3 on H200)."""
    assert resolve("falcon-7b", H100, "0.5.4").attention_backend is None
    assert resolve("llama-3.1-8b", H100, "0.5.5").attention_backend == "fa3"
    assert resolve("gpt-oss-120b", H200, "0.5.4", 8).attention_backend == "fa3"
    tree = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "speculative_num_steps": 5, "page_size": 64}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="needs flashinfer, got None"):
        resolve("llama-3.1-8b", H100, "0.5.4", **tree)
    assert resolve("llama-3.1-8b", H100, "0.5.4", attention_backend="flashinfer", **tree).page_size == 64


def test_fa3_keeps_an_e5m2_cache_up_to_0_5_4() -> None:
    """0.5.5's ``_handle_attention_backend_compatibility`` turns fa3 with an fp8_e5m2 KV cache into triton; 0.5.4 keeps
    fa3 (GPT-OSS-120B on H200, its override's fa3)."""
    e5m2 = {"kv_cache_dtype": "fp8_e5m2"}
    assert resolve("gpt-oss-120b", H200, "0.5.4", 8, **e5m2).attention_backend == "fa3"
    assert resolve("gpt-oss-120b", H200, "0.5.5", 8, **e5m2).attention_backend == "triton"


def test_dsa_kv_dtype_up_to_0_5_4() -> None:
    """0.5.4's DeepSeek NSA override forces fp8_e4m3 on SM 10+ over any value (its prefill and decode backends both
    flashmla_kv) and leaves the value as given below, ``auto`` included and fp8_e5m2 unchecked; 0.5.5 resolves
    ``auto`` to bfloat16 on Hopper (fp8_e4m3 on SM 10+, prefill flashmla_auto) and refuses fp8_e5m2."""
    old_h, new_h = resolve("deepseek-v3.2", H200, "0.5.4", 8), resolve("deepseek-v3.2", H200, "0.5.5", 8)
    assert (old_h.kv_cache_dtype, new_h.kv_cache_dtype) == ("auto", "bfloat16")
    old_b, new_b = resolve("deepseek-v3.2", B200, "0.5.4", 8), resolve("deepseek-v3.2", B200, "0.5.5", 8)
    assert old_b.kv_cache_dtype == new_b.kv_cache_dtype == "fp8_e4m3"
    assert (old_b.dsa_prefill_backend, old_b.dsa_decode_backend) == ("flashmla_kv", "flashmla_kv")
    assert (new_b.dsa_prefill_backend, new_b.dsa_decode_backend) == ("flashmla_auto", "flashmla_kv")
    assert resolve("deepseek-v3.2", H200, "0.5.4", 8, kv_cache_dtype="fp8_e5m2").kv_cache_dtype == "fp8_e5m2"
    with pytest.raises(KVCacheConfigError, match="DSA models accept"):
        resolve("deepseek-v3.2", H200, "0.5.5", 8, kv_cache_dtype="fp8_e5m2")


def test_workstation_decode_graph_is_16_up_to_0_5_4() -> None:
    """``_handle_gpu_memory_settings``, the 20-35 GiB tier (chunk 2048) below TP 4: decode cuda-graph max_bs 16 in
    0.5.4, 24 from 0.5.5 (Llama-3.1-8B on an RTX 4090); 80 at TP 4 in both."""
    old = resolve("llama-3.1-8b", RTX4090, "0.5.4")
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs) == (2048, 16)
    assert resolve("llama-3.1-8b", RTX4090, "0.5.5").cuda_graph_max_bs == 24
    assert resolve("llama-3.1-8b", RTX4090, "0.5.4", 4).cuda_graph_max_bs == 80  # TP >= 4: the same in both


# ---- SGLang 0.5.3 -> 0.5.4 -----------------------------------------------------------------------------------------


def test_no_prefill_graph_up_to_0_5_3() -> None:
    """0.5.3's ``ServerArgs`` has no piecewise prefill graph (no ``piecewise_cuda_graph_max_tokens``): no sizes;
    0.5.4 keeps the opt-in graph's field default, 4096 tokens in 58 sizes (4..32/4 = 8, 48..256/16 = 14, 288..512/32
    = 8, 640..4096/128 = 28), off unless asked for."""
    old, new = resolve("llama-3.1-8b", H100, "0.5.3"), resolve("llama-3.1-8b", H100, "0.5.4")
    assert (old.prefill_cuda_graph, old.prefill_graph_max_bs, old.prefill_graph_bs_count) == ("disabled", None, 0)
    assert (new.prefill_cuda_graph, new.prefill_graph_max_bs, new.prefill_graph_bs_count) == ("disabled", 4096, 58)


def test_deepseek_v3_on_sm100_has_no_launch_backend_up_to_0_5_3() -> None:
    """0.5.4's ``_handle_model_specific_adjustments`` gives DeepSeek-V3 on SM100 trtllm_mla (and its page 64); 0.5.3
    has no such branch: the field stays unset, the page 1."""
    old, new = resolve("deepseek-v3", B200, "0.5.3", 8), resolve("deepseek-v3", B200, "0.5.4", 8)
    assert (old.attention_backend, old.page_size) == (None, 1)
    assert (new.attention_backend, new.page_size) == ("trtllm_mla", 64)


def test_dsa_launch_of_0_5_3() -> None:
    """0.5.3's DeepSeek NSA override also forces ``mem_fraction_static = 0.8`` (over a given value too), and an fp8
    cache sets ``nsa_prefill`` / ``nsa_decode`` to flashmla_decode (0.5.4: ``nsa_*_backend`` flashmla_kv); the
    fields default to flashmla_prefill / fa3 (0.5.4: flashmla_sparse / fa3)."""
    old_b, new_b = resolve("deepseek-v3.2", B200, "0.5.3", 8), resolve("deepseek-v3.2", B200, "0.5.4", 8)
    assert old_b.mem_fraction_static == 0.8 != new_b.mem_fraction_static
    assert resolve("deepseek-v3.2", B200, "0.5.3", 8, mem_fraction_static=0.7).mem_fraction_static == 0.8
    assert (old_b.dsa_prefill_backend, old_b.dsa_decode_backend) == ("flashmla_decode", "flashmla_decode")
    assert (new_b.dsa_prefill_backend, new_b.dsa_decode_backend) == ("flashmla_kv", "flashmla_kv")
    old_h = resolve("deepseek-v3.2", H200, "0.5.3", 8)  # bf16 ("auto") on Hopper: the field defaults stay
    assert (old_h.dsa_prefill_backend, old_h.dsa_decode_backend) == ("flashmla_prefill", "fa3")
    assert resolve("llama-3.1-8b", H100, "0.5.3").dsa_prefill_backend == "flashmla_prefill"


def test_sglang_fields_of_a_release_without_a_prefill_graph() -> None:
    """The bridge reads the graphs of a release before ``cuda_graph_config`` from flat fields: 0.5.3 has neither
    ``enable_piecewise_cuda_graph`` nor ``disable_piecewise_cuda_graph`` (no prefill graph: disabled, no sizes); 0.5.4
    the opt-in flag (off: disabled, its field default 4096 kept); and its DSA fields are ``nsa_prefill`` /
    ``nsa_decode``."""
    from kvstrategies.sglang.bridge.launch_check import sglang_fields

    oldest = sglang_fields({"cuda_graph_max_bs": 256, "disable_cuda_graph": False, "nsa_prefill": "flashmla_prefill",
                            "nsa_decode": "fa3"})  # fmt: skip
    assert (oldest["decode_cuda_graph"], oldest["cuda_graph_max_bs"]) == ("full", 256)
    assert (oldest["prefill_cuda_graph"], oldest["prefill_graph_max_bs"], oldest["prefill_graph_bs_count"]) == (
        "disabled", None, 0)  # fmt: skip
    assert (oldest["dsa_prefill_backend"], oldest["dsa_decode_backend"]) == ("flashmla_prefill", "fa3")
    opt_in = sglang_fields({"cuda_graph_max_bs": 256, "enable_piecewise_cuda_graph": False,
                            "piecewise_cuda_graph_max_tokens": 4096,
                            "piecewise_cuda_graph_tokens": [4, 8]})  # fmt: skip
    assert (opt_in["prefill_cuda_graph"], opt_in["prefill_graph_max_bs"], opt_in["prefill_graph_bs_count"]) == (
        "disabled", 4096, 2)  # fmt: skip


# ---- SGLang 0.5.2 -> 0.5.3 -----------------------------------------------------------------------------------------


def test_flat_reserve_per_capacity_tier_up_to_0_5_2() -> None:
    """0.5.2's ``ServerArgs.__post_init__`` reserves a flat amount per tier (``p = tp x pp``): below 35 GiB ``(2.8 + p /
    10)`` GiB, below 90 ``(9.5 + p / 2)``, below 160 ``(12 + p / 2)``, else 32 GiB; + 2 GiB for a draft (6 for
    STANDALONE), + 4 GiB under DP attention. Chunk 2048 / 8192 / 16384; the decode graph's max_bs only below 35 GiB
    (8 below TP 4, 80 from it). H100 (81,559 MiB) TP 1: ``round((81,559 - 10,240) / 81,559, 3) = 0.874``; 0.5.3
    reserves from the sizes (10,240 MiB floor here too, but max_bs 256)."""
    old, new = resolve("llama-3.1-8b", H100, "0.5.2"), resolve("llama-3.1-8b", H100, "0.5.3")
    assert old.mem_fraction_static == round((81_559 - 10_240) / 81_559, 3) == 0.874
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs) == (8192, None)
    assert (new.chunked_prefill_size, new.cuda_graph_max_bs) == (8192, 256)
    h200 = resolve("llama-3.1-70b", H200, "0.5.2", 8)
    assert h200.mem_fraction_static == round((143_771 - (12 + 8 / 2) * 1024) / 143_771, 3)
    b200 = resolve("llama-3.1-70b", B200, "0.5.2", 8)
    assert (b200.chunked_prefill_size, b200.mem_fraction_static) == (16384, round((183_359 - 32_768) / 183_359, 3))
    rtx = resolve("llama-3.1-8b", RTX4090, "0.5.2")
    assert (rtx.chunked_prefill_size, rtx.cuda_graph_max_bs) == (2048, 8)
    assert rtx.mem_fraction_static == round((24_564 - 2.9 * 1024) / 24_564, 3)
    assert resolve("llama-3.1-8b", RTX4090, "0.5.2", 4).cuda_graph_max_bs == 80
    eagle = resolve("llama-3.1-8b", H100, "0.5.2", speculative_algorithm="EAGLE", speculative_draft_model_path="d")
    assert eagle.mem_fraction_static == round((81_559 - 12_288) / 81_559, 3)
    dp = resolve_launch_defaults(facts("qwen3-235b-a22b"), H200, tp_size=8, attn_dp_size=8, release=R["0.5.2"])
    assert dp.mem_fraction_static == round((143_771 - (12 + 8 / 2 + 4) * 1024) / 143_771, 3)


def test_no_dsa_fields_up_to_0_5_2() -> None:
    """0.5.2's ``ServerArgs`` has no DSA backend fields (no DSA model loads: ``deepseek_v32`` arrives with 0.5.3); its
    decisions are all ``__post_init__``'s own body."""
    old = resolve("llama-3.1-8b", H100, "0.5.2")
    assert (old.dsa_prefill_backend, old.dsa_decode_backend) == (None, None)
    assert resolve("llama-3.1-8b", H100, "0.5.3").dsa_prefill_backend == "flashmla_prefill"
    (fraction,) = old.reasons("mem_fraction_static")
    assert fraction.reason.endswith("(sglang.srt.server_args.ServerArgs.__post_init__)")
    assert resolve("llama-3.1-8b", H100, "0.5.3").reasons("mem_fraction_static")[0].reason.endswith(
        "(sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings)")  # fmt: skip


# ---- SGLang 0.5.1 -> 0.5.2 -----------------------------------------------------------------------------------------


def test_paged_eagle_tree_is_not_checked_up_to_0_5_1() -> None:
    """0.5.2's ``__post_init__`` refuses a top-k > 1 tree at page > 1 off flashinfer; 0.5.1 has no such check (the
    backend stays unset until the ModelRunner picks it), but refuses DeepSeek-V3 / GLM-4.5 MTP at page != 1 on
    flashinfer."""
    tree = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "speculative_num_steps": 5, "page_size": 64}  # fmt: skip
    assert resolve("llama-3.1-8b", H200, "0.5.1", 8, **tree).page_size == 64
    with pytest.raises(KVCacheConfigError, match="needs flashinfer, got None"):
        resolve("llama-3.1-8b", H200, "0.5.2", 8, **tree)
    mtp = {"speculative_algorithm": "EAGLE", "page_size": 64, "attention_backend": "flashinfer"}
    with pytest.raises(KVCacheConfigError, match="page_size != 1 is not supported on flashinfer"):
        resolve("deepseek-v3", H200, "0.5.1", 8, **mtp)
    with pytest.raises(KVCacheConfigError, match="page_size != 1 is not supported on flashinfer"):
        resolve("glm-4.5", H200, "0.5.1", 8, **mtp)
    assert resolve("deepseek-v3", H200, "0.5.2", 8, **mtp).page_size == 64
    assert resolve("llama-3.1-8b", H200, "0.5.1", 8, **mtp).page_size == 64  # not an MTP model: no such check


def test_flat_reserve_tiers_at_their_edges_up_to_0_5_2() -> None:
    """0.5.2's reserve ``R`` (MiB) and tiers on both sides of each capacity edge (``gpu_mem < 35,840 / 92,160 /
    163,840``), ``p = tp x pp``: below 35 GiB ``(2.8 + p / 10) x 1024`` with chunk 2048 and max_bs 8 (80 from TP 4);
    below 90 GiB ``(9.5 + p / 2) x 1024``; below 160 GiB ``(12 + p / 2) x 1024``; else 32 GiB, chunk 16,384; a
    capacity SGLang cannot read keeps chunk 4096 and no max_bs. + 6 GiB for STANDALONE, 2 GiB for EAGLE."""

    def at(capacity: float | None, tp: int = 1, pp: int = 1, **settings: object) -> LaunchResolution:
        gpu = dataclasses.replace(H100, capacity_mib=capacity)
        return resolve_launch_defaults(facts("llama-3.1-8b"), gpu, tp_size=tp, pp_size=pp,
                                       settings=LaunchSettings(**settings), release=R["0.5.2"])  # type: ignore[arg-type]

    below, edge = at(35_839), at(35_840)
    assert (below.reserved_mib, below.chunked_prefill_size, below.cuda_graph_max_bs) == (2.9 * 1024, 2048, 8)
    assert (edge.reserved_mib, edge.chunked_prefill_size, edge.cuda_graph_max_bs) == (10 * 1024, 8192, None)
    assert at(35_839, tp=4).reserved_mib == (2.8 + 4 / 10) * 1024 and at(35_839, tp=4).cuda_graph_max_bs == 80
    assert at(92_159).reserved_mib == 10 * 1024 and at(92_160).reserved_mib == 12.5 * 1024
    assert at(163_839).chunked_prefill_size == 8192 and at(163_839).reserved_mib == 12.5 * 1024
    assert (at(163_840).chunked_prefill_size, at(163_840).reserved_mib) == (16_384, 32 * 1024)
    assert at(81_559, tp=2, pp=2).reserved_mib == (9.5 + 4 / 2) * 1024
    unknown = at(None)
    assert (unknown.chunked_prefill_size, unknown.cuda_graph_max_bs, unknown.mem_fraction_static) == (4096, None, 0.88)
    standalone = at(81_559, speculative_algorithm="STANDALONE", speculative_draft_model_path="d")
    assert standalone.reserved_mib == (10 + 6) * 1024
    assert at(81_559, speculative_algorithm="EAGLE", speculative_draft_model_path="d").reserved_mib == 12 * 1024
    dp2 = resolve_launch_defaults(facts("qwen3-235b-a22b"), H100, tp_size=2, attn_dp_size=2, release=R["0.5.2"])
    assert dp2.reserved_mib == (9.5 + 2 / 2 + 4) * 1024


def test_mtp_page_check_reads_the_given_page_up_to_0_5_1() -> None:
    """0.5.1 refuses DeepSeek-V3 MTP on flashinfer at any page but 1 (2 included); an unset page is 1 there."""
    mtp = {"speculative_algorithm": "EAGLE", "attention_backend": "flashinfer"}
    with pytest.raises(KVCacheConfigError, match="page_size != 1"):
        resolve("deepseek-v3", H200, "0.5.1", 8, page_size=2, **mtp)
    assert resolve("deepseek-v3", H200, "0.5.1", 8, **mtp).page_size in (None, 1)
    assert resolve("deepseek-v3", H200, "0.5.1", 8, page_size=1, **mtp).page_size == 1


@pytest.mark.parametrize(
    ("release", "backend", "takes"),
    [("0.5.1", "triton", False), ("0.5.2", "triton", True), ("0.5.4", "trtllm_mha", False),
     ("0.5.5", "trtllm_mha", True), ("0.5.5", "intel_xpu", False), ("0.5.6", "intel_xpu", True),
     ("0.5.9", "ascend", False), ("0.5.10", "ascend", True)],
)  # fmt: skip
def test_llama4_backends_grow_by_release(release: str, backend: str, takes: bool) -> None:
    """The set Llama-4's check takes (``ServerArgs._handle_model_specific_adjustments``, 0.5.19 on:
    ``arg_groups.model_hook.handle_model_specific_adjustments``): {fa3, aiter} in 0.5.1 ('fa3 or aiter is
    required for Llama4 model'), + triton in 0.5.2, + trtllm_mha in 0.5.5, + intel_xpu in 0.5.6, + ascend in
    0.5.10. A refusal cites the release's function (up to 0.5.2 the steps of ``ServerArgs.__post_init__`` have no
    names)."""
    if takes:
        assert resolve("llama-4-scout", H100, release, 4, attention_backend=backend).attention_backend == backend
        return
    hook = "ServerArgs.__post_init__" if release == "0.5.1" else "ServerArgs._handle_model_specific_adjustments"
    with pytest.raises(KVCacheConfigError, match=f"{hook}.*Llama-4 needs one of .*got {backend}"):
        resolve("llama-4-scout", H100, release, 4, attention_backend=backend)
