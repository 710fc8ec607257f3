"""Weight-estimate rules the published-log tests left unpinned (found by ``tools/mutation_check.py``)."""

from __future__ import annotations

from kvstrategies.planner.weights import _dsv4_ratio


def test_dsv4_layers_past_compress_ratios_have_no_compressor() -> None:
    """A layer index past ``compress_ratios`` (the MTP layer of a list that covers only the decoder)
    reads ratio 0: no compressor weights (sglang.srt.models.deepseek_v4 builds one only where the
    ratio is non-zero)."""
    ratios = {"compress_ratios": [0, 4, 128]}
    assert [_dsv4_ratio(ratios, i) for i in range(5)] == [0, 4, 128, 0, 0]
    assert _dsv4_ratio({}, 0) == 0
