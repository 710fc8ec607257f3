"""``PoolSizes``: how many tokens (and requests, and state slots) each pool gets.

SGLang's field names are kept so engine people recognise them. Unlike SGLang's ``_PoolSizes``
(a msgspec struct holding ``torch.dtype`` fields, which fails to encode), this is a plain
frozen dataclass: hashable, picklable, and round-trips through :meth:`to_dict` /
:meth:`from_dict`. State dtypes are held by name (``"float32"``), never as torch objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import KVCacheConfigError


def align_down(value: int, page_size: int) -> int:
    """``(value // page_size) * page_size``: round down to a page multiple (``align`` in docs/maintainers.md)."""
    return (value // page_size) * page_size


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def ceil_align(value: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is >= ``value``."""
    return ceil_div(value, multiple) * multiple


@dataclass(frozen=True, kw_only=True)
class PoolSizes:
    """Token counts per pool for one rank (SGLang ``MemoryPoolConfig`` / ``_PoolSizes``).

    ``max_running_requests`` is None until resolve fills it (KVCacheConfigurator.resolve_max_num_reqs);
    ``max_mamba_cache_size`` is the Mamba state-slot count of hybrid linear models.
    """

    max_total_num_tokens: int
    max_running_requests: int | None = None
    full_max_total_num_tokens: int | None = None
    swa_max_total_num_tokens: int | None = None
    c4_max_total_num_tokens: int = 0
    c128_max_total_num_tokens: int = 0
    c4_state_pool_size: int = 0
    c128_state_pool_size: int = 0
    c4_state_dtype: str | None = None
    c128_state_dtype: str | None = None
    max_mamba_cache_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict, one key per field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolSizes:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise KVCacheConfigError(f"unknown PoolSizes fields {unknown}; known: {sorted(names)}")
        return cls(**data)

    def replace(self, **changes: Any) -> PoolSizes:
        return replace(self, **changes)


def require_positive_tokens(tokens: int) -> None:
    """SGLang's ``MemoryPoolConfig`` check: a non-positive token count means the budget is too small."""
    from ..errors import InsufficientMemoryError

    if tokens <= 0:
        raise InsufficientMemoryError(
            f"not enough memory for the KV cache: the budget gives {tokens} tokens. Increase "
            "available_bytes (SGLang: --mem-fraction-static), lower the page size, or use a "
            "smaller KV dtype / more TP"
        )


def validate_swa_pool_size(swa_tokens: int, sliding_window_size: int | None, page_size: int) -> None:
    """SGLang's base-class ``validate_swa_pool_size`` (``MemoryPoolConfigurator.validate_swa_pool_size``): the
    prefill admission floor.

    Prefill charges ``min(extend + decode, W) + P`` SWA slots per request, so an SWA pool of
    ``W + P`` tokens or fewer could never admit one and the server would hang: raise when
    ``W + P >= swa_tokens`` (e.g. GPT-OSS, W 127, P 64: 191 >= 128 fails, 192 passes).
    Skipped when the window is unknown (None).
    """
    from ..errors import SWAPoolTooSmallError

    if sliding_window_size is None:
        return
    if sliding_window_size + page_size >= swa_tokens:
        raise SWAPoolTooSmallError(
            f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor "
            f"is sliding_window_size ({sliding_window_size}) + page_size ({page_size}) = "
            f"{sliding_window_size + page_size} tokens. Increase swa_full_tokens_ratio (SGLang "
            "--swa-full-tokens-ratio), the KV budget (available_bytes, or a larger max_tokens cap), "
            "or lower page_size"
        )
