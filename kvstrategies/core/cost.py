"""``CacheCost``: the bytes a KV cache of ``T`` tokens takes, and the tokens a budget buys.

Every SGLang configurator sizes its token pools from one affine cost (bytes, per rank)::

    bytes(T) = T * slope + intercept

``slope`` is the bytes one unit of ``max_total_num_tokens`` takes over every pool it fills
(the configurator's ``cell_size``: an int, or a float where SGLang prices a pool that follows
the full one at a ratio); ``intercept`` is the bytes taken whatever ``T`` is (a request-capped
SWA pool, DeepSeek-V4's ratio-128 compression state). ``calculate_pool_sizes`` inverts it
(:meth:`CacheCost.tokens_for_budget`) before aligning to the page. A speculative target also
holds its draft's KV: the draft's cost is added to the target's (``target + draft``).

The inverse's rounding differs between SGLang's configurators; :class:`Rounding` names each one
(``sglang/srt/model_executor/pool_configurator.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import KVCacheConfigError


class Rounding(Enum):
    """How a configurator turns ``(available - intercept) / slope`` into a token count."""

    #: ``int((A - c) // m)``, no clamp: a budget below ``c`` gives a negative count
    #: (HybridSWAPoolConfigurator._solve_pool_sizes, SWARequestCapPoolConfigurator.calculate_pool_sizes)
    FLOOR = "floor"
    #: ``max(A - c, 0) // m``: a negative budget buys 0 tokens
    #: (DefaultPoolConfigurator.calculate_pool_sizes)
    FLOOR_AT_ZERO = "floor-at-zero"
    #: ``int(max(A - c, 0) / m)``: true division, truncated (DSV4PoolConfigurator.calculate_pool_sizes)
    TRUNCATE_AT_ZERO = "truncate-at-zero"


@dataclass(frozen=True)
class CacheCost:
    """``bytes(T) = T * slope + intercept`` (bytes; ``slope`` in bytes per token, ``intercept`` in bytes).

    ``rounding`` is the inverse's rounding (:class:`Rounding`); a negative slope is an error.
    """

    slope: int | float
    intercept: int | float = 0
    rounding: Rounding = Rounding.FLOOR_AT_ZERO

    def __post_init__(self) -> None:
        if self.slope < 0:
            raise KVCacheConfigError(
                f"a KV cache cost needs slope >= 0 bytes per token, got {self.slope!r}; "
                "check the cell size the strategy computed"
            )

    def bytes_for_tokens(self, tokens: int) -> int | float:
        """``tokens * slope + intercept`` bytes."""
        return tokens * self.slope + self.intercept

    def tokens_for_budget(self, available_bytes: int) -> int:
        """The token count ``available_bytes`` buys, before page alignment, rounded by :attr:`rounding`.

        A zero slope buys no finite count: SGLang divides by it (``ZeroDivisionError``), so it is a
        :class:`~kvstrategies.errors.KVCacheConfigError`; strategies with a zero-cell rule apply it first.
        """
        if self.slope == 0:
            raise KVCacheConfigError(
                "a KV cache cost of 0 bytes per token has no token count for a budget; the rank holds no "
                "KV layer (a zero-cell rank takes max_total_tokens or the context length instead)"
            )
        if self.rounding is Rounding.FLOOR:
            return int((available_bytes - self.intercept) // self.slope)
        if self.rounding is Rounding.FLOOR_AT_ZERO:
            return int(max(available_bytes - self.intercept, 0) // self.slope)
        return int(max(available_bytes - self.intercept, 0) / self.slope)

    def __add__(self, other: CacheCost) -> CacheCost:
        """Both costs in one budget (a target and its draft): slopes and intercepts add, ``self`` first.

        Both must round alike; adding two different roundings is a ``KVCacheConfigError``.
        """
        if not isinstance(other, CacheCost):
            return NotImplemented
        if other.rounding is not self.rounding:
            raise KVCacheConfigError(
                f"cannot add a KV cache cost rounded {other.rounding.value} to one rounded "
                f"{self.rounding.value}; build both with the same Rounding"
            )
        return CacheCost(self.slope + other.slope, self.intercept + other.intercept, self.rounding)
