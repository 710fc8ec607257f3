"""DeepSeek-V4 with vLLM by hand (``kvstrategies/vllm/strategies/dsv4.py``), beside the recordings
(``golden/vllm-0.27.1`` to ``golden/vllm-0.34.0``, 27 DeepSeek-V4 cases each, compared in test_vllm_golden.py).

DeepSeek-V4-Flash: 43 layers, compress ratios 0, 0, then 4 and 128 alternating, the last 0 (21 of ratio 4, 20 of
ratio 128), a 128-token window, index_head_dim 128, kv_lora_rank 512."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.dtypes import DType
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.models import ModelGeometry
from kvstrategies.vllm.strategies import dsv4
from kvstrategies.vllm.strategies.specs import CacheLimits, MLAAttentionSpec, SlidingWindowMLASpec

GIB = 2**30


def _plan(preset: str = "deepseek-v4-flash", version: str = "0.34.0", **fields: object) -> object:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": version, "available_bytes": 100 * GIB,
                       "tp_size": 8, "page_size": 256, **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_pages_are_states_of_584_or_their_width_rounded_up_to_576_bytes() -> None:
    """A 256-token block: the sliding cache 64 rows x 584 B = 37,376 -> 37,440; the ratio-4 KV 64 states x 584 B
    -> 37,440, the ratio-128 KV 2 states -> 1,168 -> 1,728; the indexer 64 states x (128 + 4) B = 8,448 -> 8,640;
    the ratio-4 compressor states 4 tokens x (2 x 2 x 512) x 4 B = 32,768 -> 32,832 and x (2 x 2 x 128) = 8,192 ->
    8,640; the ratio-128 state 8 tokens x (2 x 512) x 4 B = 32,768 -> 32,832."""
    planned = _plan()
    pages = sorted((type(s).__name__, s.block_size, s.page_size_bytes) for _, s in planned.layer_specs)
    assert pages == [("MLAAttentionSpec", 256, 1_728), ("MLAAttentionSpec", 256, 8_640),
                     ("MLAAttentionSpec", 256, 37_440), ("SlidingWindowMLASpec", 4, 8_640),
                     ("SlidingWindowMLASpec", 4, 32_832), ("SlidingWindowMLASpec", 8, 32_832),
                     ("SlidingWindowMLASpec", 64, 37_440)]  # fmt: skip
    assert dsv4.aligned(37_376) == 37_440 and dsv4.aligned(576 * 3) is None


def test_a_layers_caches_in_registration_order() -> None:
    """attention.py DeepseekV4Attention.__init__: the indexer (its key cache, then its compressor's state), the
    sliding cache, the attention's compressed KV, then its compressor's state."""
    specs = dsv4.layer_specs(_geometry(), 256, (9, 0))
    ratio4, ratio128, sliding = specs[2], specs[3], specs[0]
    assert [(type(p).__name__, p.page_size_bytes) for p in ratio4.parts] == [
        ("MLAAttentionSpec", 8_640), ("SlidingWindowMLASpec", 8_640), ("SlidingWindowMLASpec", 37_440),
        ("MLAAttentionSpec", 37_440), ("SlidingWindowMLASpec", 32_832)]  # fmt: skip
    assert [p.page_size_bytes for p in ratio128.parts] == [37_440, 1_728, 32_832]
    assert [p.page_size_bytes for p in sliding.parts] == [37_440]
    assert ratio4.backends == ("DEEPSEEK_V4_INDEXER", "CompressorBackend", "DEEPSEEK_SPARSE_SWA",
                               "FLASHMLA_SPARSE_DSV4", "CompressorBackend")  # fmt: skip
    assert dsv4.attention_backend((12, 0)) == "FLASHINFER_MLA_SPARSE_DSV4"


def _geometry() -> ModelGeometry:
    case = parse_case({"preset": "deepseek-v4-flash", "engine": "vllm", "available_bytes": GIB})
    return case.settings.geometry


def test_the_approximate_gcd_pads_least() -> None:
    """_approximate_gcd([43, 21, 20], 21): d = 21 pads 20 + 0 + 1 = 21, d = 22 pads 1 + 1 + 2 = 4, d = 23 pads
    3 + 2 + 3 = 8; ties take the larger d."""
    assert dsv4.approximate_gcd([43, 21, 20], 21) == 22
    assert dsv4.approximate_gcd([4, 6], 1) == 2  # d = 1 and 2 both pad 0: the larger
    assert dsv4.approximate_gcd([5], 7) == 7  # a floor above every value is taken as it is


def test_flash_packs_into_five_groups() -> None:
    """Buckets: 43 sliding caches (balanced, one page), 62 block-256 caches (21 + 21 + 20: not balanced, one
    group), 42 block-4 states (21 of each of two pages: balanced, mixed, so at least 21 repeats a group) and 20
    block-8 states. Repeats per group: the approximate gcd of 43, 21, 20 from 21 = 22, so the sliding caches split
    into cdiv(43, 22) = 2 groups, every second layer: 22 and 21."""
    planned = _plan()
    assert [(len(g.layers), g.spec.block_size, g.spec.page_size_bytes) for g in planned.groups] == [
        (22, 64, 22 * 37_440), (21, 64, 21 * 37_440), (62, 256, 21 * 8_640 + 21 * 37_440 + 20 * 1_728),
        (42, 4, 21 * 8_640 + 21 * 32_832), (20, 8, 20 * 32_832)]  # fmt: skip
    assert planned.groups[0].layers[:3] == (0, 2, 4) and planned.groups[1].layers[:3] == (1, 3, 5)
    assert planned.kv_cache_layout == "BLHNC" and planned.block_size == 4
    assert planned.backends == ("DEEPSEEK_SPARSE_SWA", "FLASHMLA_SPARSE_DSV4", "DEEPSEEK_V4_INDEXER",
                                "CompressorBackend")  # fmt: skip


def test_capacity_is_blocks_of_the_widest_group_over_the_pages_a_request_needs() -> None:
    """A block strides 1,002,240 B (the block-256 group): 100 GiB // 1,002,240 = 107,134 blocks. A request of
    1,048,576 tokens with 16,384 in flight: sliding cdiv(127 + 16,384, 64) + 1 = 259 (twice), full 4,096, the
    window-8 states cdiv(7 + 16,384, 4) + 1 = 4,099, the window-128 states cdiv(127 + 16,384, 8) + 1 = 2,065:
    10,778 blocks; 107,134 / 10,778 = 9.94x, 10,422,911 tokens."""
    planned = _plan()
    assert planned.bytes_per_block == 1_002_240 and planned.num_gpu_blocks == 107_134
    limits = CacheLimits(1_048_576, 16_384)
    assert [g.spec.blocks_per_request(limits) for g in planned.stage_groups] == [259, 259, 4_096, 4_099, 2_065]
    assert planned.capacity.tokens == int(107_134 / 10_778 * 1_048_576) == 10_422_911


def test_tensors_share_one_allocation_block_outermost() -> None:
    """Every tensor is the whole allocation (107,134 x 1,002,240 B); in the block-256 group the indexer pages
    come first, then the ratio-4 KV at 21 x 8,640 = 181,440, then the ratio-128 KV at 181,440 + 21 x 37,440."""
    planned = _plan()
    assert {t.size for t in planned.tensors} == {107_134 * 1_002_240}
    assert {t.block_stride for t in planned.tensors} == {1_002_240}
    full = [(t.layer_stride, t.offset, len(t.layers)) for t in planned.tensors[2:5]]
    assert full == [(8_640, 0, 21), (37_440, 181_440, 21), (1_728, 181_440 + 21 * 37_440, 20)]


def test_one_gpu_reports_the_layout_as_its_cache_dtype() -> None:
    """_resolve_dsv4_kv_cache_dtype writes fp8_ds_mla back into the CacheConfig; on one GPU the model is built in
    the engine's process, so the launch settings show it; at TP 8 the engine keeps what was asked."""
    assert _plan(tp_size=1).launch.kv_cache_dtype == "fp8_ds_mla"
    assert _plan(kv_cache_dtype="fp8_e4m3").launch.kv_cache_dtype == "fp8_e4m3"


def test_refusals() -> None:
    with pytest.raises(UnsupportedConfigurationError, match="only supports fp8 kv-cache, got bfloat16"):
        _plan(kv_cache_dtype="bf16")
    with pytest.raises(UnsupportedConfigurationError, match="only supports fp8 kv-cache, got bfloat16"):
        _plan(version="0.29.0")  # auto is bfloat16 there
    assert _plan(version="0.29.0", kv_cache_dtype="fp8_e4m3").num_gpu_blocks == 107_134
    with pytest.raises(UnsupportedConfigurationError, match="before vLLM 0.27.1"):
        _plan(version="0.26.0", kv_cache_dtype="fp8_e4m3")
    with pytest.raises(UnsupportedConfigurationError, match="--block-size 256 .the default. or 128"):
        _plan(page_size=64)  # no ratio-128 state in a 64-token block
    # 512 and 384 (recorded live on 0.34.0: 53,109 and 45,191 blocks) pad the block stride to the pages at the
    # 256-token kernel block, e.g. at 512: 1,992,960 -> 18 x lcm(8,640, 37,440, 1,728) = 18 x 112,320 = 2,021,760 B
    for block in (512, 384, 300):
        with pytest.raises(UnsupportedConfigurationError, match="get_block_stride_alignment"):
            _plan(page_size=block)
    with pytest.raises(UnsupportedConfigurationError, match="holds no state"):
        dsv4.layer_specs(_geometry(), 64, (9, 0))


def test_other_blocks_scale_the_compressed_pages() -> None:
    """--block-size 128 (recorded live on 0.34.0): ratio-128 KV 1 state -> 584 -> 1,152; ratio-4 KV 32 states
    -> 18,688 -> 19,008; indexer 32 x 132 = 4,224 -> 4,608; the sliding cache and the states keep their blocks."""
    planned = _plan(page_size=128)
    assert (planned.num_gpu_blocks, planned.capacity.tokens) == (123_289, 8_691_534)  # vLLM 0.34.0 live, 100 GiB
    assert planned.groups[2].spec.page_size_bytes == 21 * 4_608 + 21 * 19_008 + 20 * 1_152
    spec = MLAAttentionSpec(block_size=128, num_kv_heads=1, head_size=512, dtype=DType.UINT8, page_size_padded=1_152)
    assert spec.page_size_bytes == 1_152
    state = SlidingWindowMLASpec(block_size=8, num_kv_heads=1, head_size=1_024, dtype=DType.FLOAT32,
                                 sliding_window=128, page_size_padded=32_832)  # fmt: skip
    assert state.document()["head_size_v"] == 0 and "cache_dtype_str" not in state.document()


def test_the_layer_specs_read_as_vllm_records_them() -> None:
    """Every field of every distinct spec (head sizes, heads, dtypes, windows, padding, cache dtype) as vLLM 0.34.0
    states it for this deployment (golden/vllm-0.34.0/dsv4-deepseek-v4-flash-tp8-p256.json)."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "golden" / "vllm-0.34.0" / "dsv4-deepseek-v4-flash-tp8-p256.json"
    recorded = json.loads(path.read_text(encoding="utf-8"))["layer_specs"]
    planned = _plan(kv_cache_dtype="auto")
    assert [{"layers": list(layers), "spec": spec.document()} for layers, spec in planned.layer_specs] == recorded


@pytest.mark.parametrize(("block", "kv", "indexer", "kv128"), [
    # the page formula at blocks the planner refuses (their block stride is padded), still vLLM's page:
    # 48 states: 48 x 584 = 28,032 -> 28,224; 48 x 132 = 6,336 = 11 x 576 (no padding); 1 state -> 1,152
    (192, (28_032, 28_224), (6_336, None), (584, 1_152)),
    # 72 states: 72 x 584 = 42,048 = 73 x 576 (no padding); 72 x 132 = 9,504 -> 9,792; 2 states -> 1,728
    (288, (42_048, None), (9_504, 9_792), (1_168, 1_728)),
])  # fmt: skip
def test_padding_is_recorded_only_where_the_page_is_not_a_multiple_of_576(
    block: int, kv: tuple[int, int | None], indexer: tuple[int, int | None], kv128: tuple[int, int | None]
) -> None:
    specs = dsv4.layer_specs(_geometry(), block, (9, 0))
    for spec, (page, padded) in ((specs[2].parts[3], kv), (specs[2].parts[0], indexer), (specs[3].parts[1], kv128)):
        assert spec.page_size_bytes == (padded or page)
        assert spec.document().get("page_size_padded") == (padded or page)  # the project records the page it uses
    assert dsv4.aligned(42_048) is None and dsv4.aligned(6_336) is None and dsv4.aligned(9_504) == 9_792


def test_the_approximate_gcd_searches_from_one_to_the_largest_value() -> None:
    # [3, 5] from 1: d = 1 pads 0, 2 pads 2, 3 pads 1, 4 pads 4, 5 pads 2 -> 1; [43] from 1: d = 1 and 43 pad 0 -> 43
    assert dsv4.approximate_gcd([3, 5], 1) == 1
    assert dsv4.approximate_gcd([43], 1) == 43


def test_pro_packs_its_own_pattern() -> None:
    """DeepSeek-V4-Pro (61 layers; ratios 128, 128, then 4 and 128 alternating: 30 of ratio 4, 31 of ratio 128):
    the block-4 states (30 + 30) set the floor 30; approximate gcd of 61, 31, 30 from 30 = 31 (pads 1 + 0 + 1),
    so the sliding caches split cdiv(61, 31) = 2 ways (31 + 30) and the 31 window-128 states stay one group; the
    first layer is ratio 128, so its state group comes before the ratio-4 one."""
    planned = _plan("deepseek-v4-pro")
    assert [(len(g.layers), g.spec.block_size) for g in planned.groups] == [(31, 64), (30, 64), (91, 256), (31, 8),
                                                                          (60, 4)]  # fmt: skip
    assert planned.backends == ("DEEPSEEK_SPARSE_SWA", "FLASHMLA_SPARSE_DSV4", "CompressorBackend",
                                "DEEPSEEK_V4_INDEXER")  # fmt: skip


def test_a_ratio_of_one_is_a_sliding_only_layer_and_no_mixed_pattern_is_refused() -> None:
    """attention.py get_kv_cache_spec: compress_ratio <= 1 is the sliding cache alone. Without a ratio-4 layer no
    bucket mixes page sizes: vLLM then packs by its state-bucket rule, which is not modelled."""
    geometry = _geometry()
    assert geometry.dsv4 is not None
    ones = replace(geometry, dsv4=replace(geometry.dsv4, compress_ratios=(1,) * 44))
    assert all(len(spec.parts) == 1 for spec in dsv4.layer_specs(ones, 256, (9, 0)).values())
    with pytest.raises(UnsupportedConfigurationError, match="no cache pattern mixes page sizes"):
        dsv4.packed_groups(dsv4.entries(dsv4.layer_specs(ones, 256, (9, 0))))


def test_0_28_0_puts_the_mla_group_first_and_shares_a_tensor_per_offset() -> None:
    """vLLM 0.28.0 (_get_kv_cache_groups_uniform_groups): the MLA caches first, then the sliding buckets split by
    the approximate gcd of every bucket's repeats from the MLA group's (21, 43, 21, 20 from 21 -> 22). Its packed
    config (_get_kv_cache_config_packed) lays each group's caches back to back and shares one tensor per offset:
    offset 0 holds the first cache of all five groups; 8,640 the MLA group's second (layer 2's KV, after its
    8,640-byte indexer page) and the block-4 group's second (layer 2's KV state, after its 8,640-byte indexer
    state); 32,832 the window-128 states' second (layer 5); 37,440 both sliding groups' second (layers 2 and 3)."""
    planned = _plan(version="0.28.0", kv_cache_dtype="fp8_e4m3")
    assert [(len(g.layers), g.spec.block_size) for g in planned.groups] == [(62, 256), (22, 64), (21, 64), (42, 4),
                                                                          (20, 8)]  # fmt: skip
    first = [(t.offset, t.shared_by) for t in planned.tensors[:4]]
    assert first == [(0, (2, 0, 1, 2, 3)), (8_640, (2, 2)), (32_832, (5,)), (37_440, (2, 3))]
    assert {t.block_stride for t in planned.tensors} == {1_002_240} and planned.num_gpu_blocks == 107_134
    assert {t.size for t in planned.tensors} == {107_134 * 1_002_240}
    assert planned.kv_cache_layout is None
    # Pro: 91 MLA caches first (31 repeats: the lower bound), gcd of 31, 61, 31, 30 from 31 = 31: the 31
    # window-128 states stay one group, the 61 sliding caches split 31 + 30
    pro = _plan("deepseek-v4-pro", version="0.28.0", kv_cache_dtype="fp8_e4m3")
    assert [(len(g.layers), g.spec.block_size) for g in pro.groups] == [(91, 256), (31, 64), (30, 64), (31, 8),
                                                                      (60, 4)]  # fmt: skip


def test_0_27_1_records_the_mla_rows_v_width_as_its_head_and_the_sliding_ones_none() -> None:
    """vllm-mla-head-size-v-zero: 0.27.1's MLAAttentionSpec keeps AttentionSpec's default head_size_v (the head),
    and its SlidingWindowMLASpec has no such field; the pages, groups and blocks are 0.28.0's."""
    docs = [spec.document() for _, spec in _plan(version="0.27.1", kv_cache_dtype="fp8_e4m3").layer_specs]
    assert [d.get("head_size_v") for d in docs if d["kind"] == "MLAAttentionSpec"] == [132, 512, 512]
    assert all("head_size_v" not in d for d in docs if d["kind"] == "SlidingWindowMLASpec")
    assert _plan(version="0.27.1", kv_cache_dtype="fp8_e4m3").num_gpu_blocks == 107_134


def test_compare_says_why_deepseek_v4_differs() -> None:
    """compare's reasons name vLLM's packing for DeepSeek-V4 (it is a sliding-window model too, but its window
    groups are not the whole story)."""
    from kvstrategies.planner.compare import why_they_differ

    reasons = why_they_differ(_geometry())
    assert reasons[0].startswith("DeepSeek-V4: vLLM packs every layer's caches") and len(reasons) == 2


def test_a_stage_without_some_groups_keeps_their_whole_spec_and_no_bytes() -> None:
    """PP 43, the last stage (layer 42, ratio 4): the odd-layer sliding group and the window-128 state group have
    none of its layers. _project_kv_cache_groups_to_worker keeps their whole spec (so a request still counts their
    blocks, 5,635 and 45,073 with PP 43's tokens in flight) while the packed layout holds only the stage's caches:
    a block strides 8,640 + 37,440 = 46,080 B (the MLA group), 2**36 // 46,080 = 1,491,308 blocks. The same
    numbers as vLLM 0.34.0 answered live for this deployment (tools' bridge, this stop's note)."""
    planned = _plan(pp_size=43, pp_rank=42, available_bytes=2**36)
    assert [len(g.layers) for g in planned.stage_groups] == [1, 0, 2, 2, 0]
    assert planned.stage_groups[1].spec.page_size_bytes == 21 * 37_440  # the whole group's spec
    assert planned.bytes_per_block == 46_080 and planned.num_gpu_blocks == 2**36 // 46_080 == 1_491_308
    assert planned.capacity.tokens == 10_386_637
    assert len(planned.tensors) == 5 and {t.block_stride for t in planned.tensors} == {46_080}
    old = _plan(version="0.28.0", kv_cache_dtype="fp8_e4m3", pp_size=43, pp_rank=42, available_bytes=2**36)
    assert {t.block_stride for t in old.tensors} == {46_080}


def test_the_mtp_layer_is_one_more_sliding_cache_in_the_packed_groups() -> None:
    """vLLM 0.33.0 on: the MTP layer (index 43) compresses as compress_ratios[43] says, 0 in the published config:
    a sliding cache only. 44 sliding caches split by the approximate gcd (22) into two groups of 22; the widest
    group (block-256, 1,002,240 B) is unchanged, so the blocks are too: 107,134 (TP 8 here as the other tests)."""
    drafted = _plan(speculative_algorithm="EAGLE", speculative_eagle_topk=1, speculative_num_steps=1,
                    speculative_num_draft_tokens=2)  # fmt: skip
    holding = [spec for layers, spec in drafted.layer_specs if 43 in layers]
    assert len(holding) == 1 and isinstance(holding[0], SlidingWindowMLASpec)
    assert [len(g.layers) for g in drafted.groups[:2]] == [22, 22] and drafted.groups[1].layers[-1] == 43
    assert drafted.bytes_per_block == 1_002_240 and drafted.num_gpu_blocks == 107_134
    with pytest.raises(UnsupportedConfigurationError, match="DeepSeek-V4's MTP draft is modelled for vLLM 0.33.0"):
        _plan(version="0.32.0", speculative_algorithm="EAGLE", speculative_eagle_topk=1, speculative_num_steps=1)


def test_an_mtp_layer_past_the_ratios_list_is_a_sliding_cache() -> None:
    geometry = _geometry()
    trimmed = replace(geometry, dsv4=replace(geometry.dsv4, compress_ratios=geometry.dsv4.compress_ratios[:43]))
    specs = dsv4.layer_specs(trimmed, 256, (9, 0), draft_layers=2)
    assert len(specs) == 45 and all(len(specs[i].parts) == 1 for i in (43, 44))
    assert len(dsv4.layer_specs(geometry, 256, (9, 0))[2].parts) > 1  # a compressing layer holds more
