"""``CacheCost`` (kvstrategies/core/cost.py): bytes for tokens, tokens for a budget, target + draft; hand-computed."""

from __future__ import annotations

import pytest

from kvstrategies.core.cost import CacheCost, Rounding
from kvstrategies.errors import KVCacheConfigError


def test_bytes_for_tokens_is_slope_times_tokens_plus_intercept() -> None:
    cost = CacheCost(131_072, 1_000_000)  # Llama-3.1-8B bf16 cell: 32 layers x 8 heads x 256 x 2 B x 2
    assert cost.bytes_for_tokens(0) == 1_000_000
    assert cost.bytes_for_tokens(3) == 3 * 131_072 + 1_000_000 == 1_393_216
    assert CacheCost(7_086.75).bytes_for_tokens(4) == 28_347.0


@pytest.mark.parametrize("rounding", list(Rounding))
def test_tokens_for_budget_at_the_exact_boundary_and_one_byte_less(rounding: Rounding) -> None:
    cost = CacheCost(131_072, 1_000_000, rounding)
    for tokens in (1, 2, 1_000):
        budget = tokens * 131_072 + 1_000_000
        assert cost.tokens_for_budget(budget) == tokens
        assert cost.tokens_for_budget(budget - 1) == tokens - 1
        assert cost.tokens_for_budget(budget + 131_071) == tokens
    assert cost.tokens_for_budget(1_000_000) == 0
    assert isinstance(cost.tokens_for_budget(1_000_000), int)


def test_the_inverse_of_bytes_for_tokens() -> None:
    cost = CacheCost(1_457, 12_345)
    assert all(cost.tokens_for_budget(int(cost.bytes_for_tokens(t))) == t for t in (0, 1, 46, 47, 10_000))


def test_a_budget_below_the_intercept_floors_negative_or_clamps_at_zero() -> None:
    # 5 bytes under the intercept: (-5) // 2 == -3 (floor), int(-5 / 2) would be -2; clamped: 0
    assert CacheCost(2, 105, Rounding.FLOOR).tokens_for_budget(100) == -3
    assert CacheCost(2, 105, Rounding.FLOOR_AT_ZERO).tokens_for_budget(100) == 0
    assert CacheCost(2, 105, Rounding.TRUNCATE_AT_ZERO).tokens_for_budget(100) == 0
    # a negative budget with no intercept (Default's max(available, 0) // cell)
    assert CacheCost(1, rounding=Rounding.FLOOR_AT_ZERO).tokens_for_budget(-1) == 0
    assert CacheCost(1, rounding=Rounding.TRUNCATE_AT_ZERO).tokens_for_budget(-1) == 0
    assert CacheCost(1, rounding=Rounding.FLOOR).tokens_for_budget(-1) == -1


def test_float_slope_floor_division_and_true_division_are_both_kept() -> None:
    # 0.1 * 3 = 0.30000000000000004 > 0.3: 0.3 // 0.1 == 2.0 (floor of the exact quotient 2.999...),
    # while 0.3 / 0.1 rounds to 2.9999999999999996, truncated 2; 1.0 // 0.1 == 9.0 but 1.0 / 0.1 == 10.0
    assert CacheCost(0.1, rounding=Rounding.FLOOR).tokens_for_budget(1) == 9
    assert CacheCost(0.1, rounding=Rounding.FLOOR_AT_ZERO).tokens_for_budget(1) == 9
    assert CacheCost(0.1, rounding=Rounding.TRUNCATE_AT_ZERO).tokens_for_budget(1) == 10
    # DeepSeek-V4 Flash, no spec, ratio 0.1: bpft 7,086.75 B; 151,513 tokens take 1,073,734,752.75 B and
    # 151,514 take 1,073,741,839.5 B > 1 GiB (1,073,741,824 B)
    dsv4 = CacheCost(7_086.75, rounding=Rounding.TRUNCATE_AT_ZERO)
    assert dsv4.tokens_for_budget(1 << 30) == 151_513
    assert dsv4.tokens_for_budget(7_086) == 0 and dsv4.tokens_for_budget(7_087) == 1
    # exact boundary with a float slope: 4 tokens are exactly 28,347 B
    assert dsv4.tokens_for_budget(28_347) == 4 and dsv4.tokens_for_budget(28_346) == 3
    # a float intercept (cap-mode SWA bytes) leaves a fractional remainder: int((100 - 0.5) / 0.5) = 199
    assert CacheCost(0.5, 0.5, Rounding.TRUNCATE_AT_ZERO).tokens_for_budget(100) == 199


def test_adding_a_draft_adds_slopes_and_intercepts() -> None:
    target = CacheCost(131_072, 10)
    draft = CacheCost(4_096, 5)
    both = target + draft
    assert both == CacheCost(135_168, 15)
    assert both.bytes_for_tokens(2) == target.bytes_for_tokens(2) + draft.bytes_for_tokens(2) == 270_351
    assert both.tokens_for_budget(270_351) == 2 and both.tokens_for_budget(270_350) == 1
    assert target + CacheCost(0) == target
    assert isinstance((target + CacheCost(0)).slope, int)
    # a float draft slope makes the sum a float, added in the order target + draft
    assert (CacheCost(1.5) + CacheCost(2)).slope == 3.5


@pytest.mark.parametrize("layers", [1, 2, 3, 7, 43, 61, 1_000])
def test_a_draft_priced_as_a_ratio_adds_back_to_the_product_bit_for_bit(layers: int) -> None:
    # DSV4 prices an MTP draft as target * (T + 1) / T; the draft's cost is the difference. The
    # product lies in [target, 2 * target], so the difference is exact and target + draft == product.
    inflation = (layers + 1) / layers
    for target in (7_086.75, 26_486.75, 25_155 / 32_768, 0.1, 1 / 3, 31_875.0 * 1.1, 2.0**-1_070, 1e300):
        product = target * inflation
        draft = CacheCost(product - target, rounding=Rounding.TRUNCATE_AT_ZERO)
        assert (CacheCost(target, rounding=Rounding.TRUNCATE_AT_ZERO) + draft).slope == product


def test_adding_costs_of_different_roundings_is_refused() -> None:
    with pytest.raises(KVCacheConfigError, match="same Rounding"):
        _ = CacheCost(1, rounding=Rounding.FLOOR) + CacheCost(1, rounding=Rounding.TRUNCATE_AT_ZERO)


def test_a_negative_slope_is_refused_and_a_zero_slope_has_no_token_count() -> None:
    with pytest.raises(KVCacheConfigError, match="slope >= 0"):
        CacheCost(-1)
    with pytest.raises(KVCacheConfigError, match="slope >= 0"):
        CacheCost(-0.5, 10)
    zero = CacheCost(0, 10)
    assert zero.bytes_for_tokens(1_000) == 10
    for rounding in Rounding:
        with pytest.raises(KVCacheConfigError, match="0 bytes per token"):
            CacheCost(0, rounding=rounding).tokens_for_budget(1 << 30)


def test_the_cost_is_a_frozen_value() -> None:
    cost = CacheCost(2, 3)
    assert cost == CacheCost(2, 3, Rounding.FLOOR_AT_ZERO) and hash(cost) == hash(CacheCost(2, 3))
    assert repr(cost) == "CacheCost(slope=2, intercept=3, rounding=<Rounding.FLOOR_AT_ZERO: 'floor-at-zero'>)"
    with pytest.raises(AttributeError):
        cost.slope = 4  # type: ignore[misc]
