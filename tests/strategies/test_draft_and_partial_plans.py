"""Differences found by running random cases against SGLang 0.5.23 (each fixed generally).

* a draft worker of an MTP model holds ``num_nextn_predict_layers`` layers (SGLang's
  ``layer_setup._compute_model_num_layers``), whatever the draft count says; without either
  count it holds every layer of the target checkpoint;
* a plan whose layout is refused still reports what the pools were asked for (``pool_sizes``);
* a hybrid linear model with a speculative algorithm needs ``max_running_requests`` and
  ``speculative_num_draft_tokens`` even in the PD prefill role (``_handle_max_mamba_cache``
  asserts both before it branches).
"""

from __future__ import annotations

import pytest

from kvstrategies.api import LayoutError, plan
from kvstrategies.context import draft_num_layers
from kvstrategies.document import partial_plan_document
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.presets import load_preset_config

from ..helpers import GIB, case_settings

SPEC = {"speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}


def test_mtp_draft_holds_the_configs_mtp_layers() -> None:
    ctx = case_settings("deepseek-v3", is_draft_worker=True, speculative_algorithm="STANDALONE",
                        eagle_draft_num_layers=3, page_size=64, **SPEC)  # fmt: skip
    assert draft_num_layers(ctx) == 1  # DeepSeek-V3: num_nextn_predict_layers = 1
    planned = plan(ctx, 10 * GIB)
    # one MLA layer: (kv_lora_rank 512 + rope 64) * 2 B, no draft scaling on a draft worker
    assert planned.cell_size_bytes == 576 * 2
    no_mtp = case_settings("llama-3.1-8b", is_draft_worker=True, speculative_algorithm="EAGLE",
                           eagle_draft_num_layers=3, **SPEC)  # fmt: skip
    assert draft_num_layers(no_mtp) == 3
    # SGLang renames a Qwen3-MoE draft to its one-layer MTP head (num_nextn_predict_layers = 1)
    qwen = case_settings("qwen3-30b-a3b", is_draft_worker=True, speculative_algorithm="EAGLE",
                         eagle_draft_num_layers=3, **SPEC)  # fmt: skip
    assert draft_num_layers(qwen) == 1
    # no count and no MTP layers: the draft is the target checkpoint, every layer of it
    whole = case_settings("mistral-7b", is_draft_worker=True, speculative_algorithm="STANDALONE", **SPEC)
    assert draft_num_layers(whole) == 32
    assert plan(whole, 10 * GIB).cell_size_bytes == 32 * 8 * (128 + 128) * 2


def test_refused_layout_still_reports_the_requested_pool_sizes() -> None:
    # DSA pools need page 64 on CUDA; sizing succeeds, the layout is refused
    ctx = case_settings("glm-5", tp_size=2, page_size=32, kv_cache_dtype="fp8_e5m2")
    with pytest.raises(LayoutError) as info:
        plan(ctx, 50 * GIB)
    document = partial_plan_document(info.value)
    assert document["pools"] is None
    assert document["pool_sizes"] == document["sizes"]
    assert document["pool_sizes"]["max_total_num_tokens"] == info.value.sizes.max_total_num_tokens


def test_mamba_speculation_needs_request_cap_in_prefill_role_too() -> None:
    ctx = case_settings("nemotron-h-8b", page_size=1, disaggregation_mode="prefill",
                        speculative_algorithm="EAGLE", eagle_draft_num_layers=1, **SPEC)  # fmt: skip
    with pytest.raises(KVCacheConfigError, match="max_running_requests"):
        plan(ctx, 40 * GIB)


def test_draft_whose_pool_is_refused_reports_its_own_sizing_and_the_adopted_sizes() -> None:
    # the target's DSA pool is refused at page 32 too: the draft still adopts the target's sizes
    ctx = case_settings("deepseek-v3.2", page_size=32, kv_cache_dtype="fp8_e4m3", is_draft_worker=True,
                        speculative_algorithm="EAGLE", eagle_draft_num_layers=1, **SPEC)  # fmt: skip
    with pytest.raises(LayoutError) as info:
        plan(ctx, 100 * GIB)
    document = partial_plan_document(info.value)
    # the draft's one layer: FP8 MLA row 656 B + DSA index key 128 + 4 scale B = 788 B
    assert document["cell_size"] == 788
    assert document["adopted_sizes"]["max_total_num_tokens"] < document["sizes"]["max_total_num_tokens"]
    assert document["pool_sizes"] == document["adopted_sizes"]


def test_nemotron_h_mtp_draft_is_a_plain_attention_model() -> None:
    """NemotronHConfig's default MTP pattern ``*E`` has no Mamba layer (SGLang's
    ``hybrid_arch.mamba2_config`` returns None for that draft): Default strategy, MHA pool."""
    fields = {"speculative_algorithm": "EAGLE", "max_running_requests": 64, **SPEC}
    draft = plan(case_settings("nemotron-h-8b", is_draft_worker=True, **fields), 10 * GIB)
    assert type(draft.configurator).__name__ == "DefaultPoolConfigurator"
    assert draft.layout.token_to_kv.pool_class == "MHATokenToKVPool"
    # one attention layer: 8 KV heads * (128 + 128) * 2 B
    assert draft.cell_size_bytes == 8 * 256 * 2
    with_mamba = load_preset_config("nemotron-h-8b") | {"mtp_hybrid_override_pattern": "M*"}
    assert type(plan(case_settings(with_mamba, is_draft_worker=True, **fields), 10 * GIB).configurator).__name__ \
        == "HybridLinearPoolConfigurator"


def test_dsv4_without_hybrid_swa_memory_keeps_state_dtypes_and_has_no_pool() -> None:
    """SGLang's _derive_pool_sizes sets the compression-state dtypes for every DeepSeek-V4 model;
    its pool builder then builds the DSV4 pool, which cannot be built without hybrid sizes."""
    ctx = case_settings("deepseek-v4-flash", page_size=256, kv_cache_dtype="fp8_e4m3", disable_hybrid_swa_memory=True)
    with pytest.raises(LayoutError, match="disable_hybrid_swa_memory") as info:
        plan(ctx, 50 * GIB)
    document = partial_plan_document(info.value)
    assert document["configurator"] == "DefaultPoolConfigurator"
    assert (document["sizes"]["c4_state_dtype"], document["sizes"]["c128_state_dtype"]) == ("float32", "float32")
    bf16 = case_settings("deepseek-v4-flash", page_size=256, kv_cache_dtype="fp8_e4m3", disable_hybrid_swa_memory=True,
                         env={"SGLANG_DSV4_COMPRESS_STATE_DTYPE": "bf16"})  # fmt: skip
    with pytest.raises(LayoutError) as info:
        plan(bf16, 50 * GIB)
    assert info.value.sizes.c4_state_dtype == "bfloat16"
