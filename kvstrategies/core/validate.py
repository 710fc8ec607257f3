"""Range and type checks for values that cross the library's boundary.

Each check raises :class:`~kvstrategies.errors.KVCacheConfigError` with one message that names
the field, shows what was given, says what is allowed, and (when the caller knows one) how to
fix it. Bounds are generous: they exist so that absurd input (``1e308`` layers, a ``2**100``
byte budget) is rejected up front instead of overflowing a float or looping for hours.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import KVCacheConfigError

#: the largest byte count or token count accepted (what an int64 holds, as SGLang's tensors do)
MAX_INT64 = 2**63 - 1
#: the largest count a setting may hold (requests, draft tokens, chunk sizes, context lengths)
MAX_SETTING_INT = 2**40
#: the most layers a model (or a draft model) may have; real models have at most a few hundred
MAX_LAYERS = 10_000
#: the largest Mamba : KV memory ratio (``r`` of the ``r / (1 + r)`` split; 10**6 already gives 0.999999)
MAX_MEMORY_RATIO = 1e6
#: the largest page size accepted (tokens); SGLang's pages are 1..256 in practice
MAX_PAGE_SIZE = 2**20


def shown(value: Any, width: int = 80) -> str:
    """``repr(value)`` for a message, at most ``width`` characters; an integer too long to print
    (Python refuses ``str()`` of more than 4,300 digits) is described by its size instead."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        digits = int(value.bit_length() * 0.30103) + 1
        return f"{'-' if value < 0 else ''}<an integer of about {digits:,} digits>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


#: the most bits an integer given to the library may have (the largest real one is an int64)
MAX_INT_BITS = 1024
#: the most values one scan looks at (a config.json has a few thousand)
_MAX_SCANNED = 2_000_000


def check_sane_ints(value: Any, where: str) -> None:
    """Refuse an integer of more than :data:`MAX_INT_BITS` bits anywhere in ``value`` (nested
    dicts, lists and tuples; bounded), naming its place (``where`` and the key path). JSON files
    cannot hold one (:mod:`kvstrategies.core.jsonio` refuses them), a Python caller can: ``10**5000``
    cannot even be printed in a message. The scan keeps no key paths; only when it finds such an
    integer does a second scan name its place."""
    if _has_huge_int(value):
        path, item = _huge_int_path(value)
        place = f"{where} field {path.lstrip('.')!r}" if path else where
        raise KVCacheConfigError(f"{place} is {shown(item)}, far beyond any size, count or budget; fix it")


def _is_huge(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > MAX_INT_BITS


#: value types that cannot hold an integer (looked up by exact type: the common case of a scan)
_LEAF_TYPES = frozenset({str, float, bool, type(None)})


#: containers already scanned whole and held unchanged while a caller plans them many times (``id`` -> the
#: object, kept alive so that its ``id`` stays its own): :func:`trusted` fills it for the span of a ``with``
_TRUSTED: dict[int, object] = {}


@contextmanager
def trusted(*values: object) -> Iterator[None]:
    """Within the ``with``, the scans skip ``values`` (each checked by :func:`check_sane_ints` and the config field
    rules before): ``fit`` plans one config in every layout, which would otherwise scan it again for each."""
    added = [v for v in values if id(v) not in _TRUSTED]
    _TRUSTED.update((id(v), v) for v in added)
    try:
        yield
    finally:
        for value in added:
            _TRUSTED.pop(id(value), None)


def is_trusted(value: object) -> bool:
    """``value`` is one :func:`trusted` holds now."""
    return id(value) in _TRUSTED and _TRUSTED[id(value)] is value


def _has_huge_int(value: Any) -> bool:
    stack: list[Any] = [value]
    seen = 0
    while stack and seen < _MAX_SCANNED:
        item = stack.pop()
        seen += 1
        kind = type(item)
        if kind in _LEAF_TYPES:
            continue
        if kind is int:
            if item.bit_length() > MAX_INT_BITS:
                return True
        elif _TRUSTED and is_trusted(item):
            continue
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif _is_huge(item):
            return True
    return False


def _huge_int_path(value: Any) -> tuple[str, int]:
    """The key path and value of the first huge integer :func:`_has_huge_int` finds (same order)."""
    stack: list[tuple[str, Any]] = [("", value)]
    seen = 0
    while stack and seen < _MAX_SCANNED:
        path, item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}", child) for key, child in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
        elif _is_huge(item):
            return path, item
    return "", 0


def finite_float(value: int | float) -> float:
    """``float(value)``; an int beyond the float range is ``inf`` (``float(10**400)`` raises)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _suffix(fix: str | None) -> str:
    return f"; {fix}" if fix else ""


def check_int(
    value: Any,
    field: str,
    *,
    minimum: int = 0,
    maximum: int = MAX_SETTING_INT,
    fix: str | None = None,
) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (bools, floats and strings rejected)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise KVCacheConfigError(
            f"{field} must be an integer in [{minimum}, {maximum}], got {shown(value)} "
            f"({type(value).__name__}){_suffix(fix)}"
        )
    if not minimum <= value <= maximum:
        raise KVCacheConfigError(f"{field} must be in [{minimum}, {maximum}], got {shown(value)}{_suffix(fix)}")
    return value


def check_opt_int(
    value: Any,
    field: str,
    *,
    minimum: int = 0,
    maximum: int = MAX_SETTING_INT,
    fix: str | None = None,
) -> int | None:
    """None, or :func:`check_int`."""
    return None if value is None else check_int(value, field, minimum=minimum, maximum=maximum, fix=fix)


def check_float(
    value: Any,
    field: str,
    *,
    low: float,
    high: float = math.inf,
    low_inclusive: bool = False,
    fix: str | None = None,
) -> float:
    """``value`` (int or float, finite) as a float in ``(low, high]`` (``[low, high]`` if inclusive)."""
    if math.isinf(high):
        interval = f"{'>=' if low_inclusive else '>'} {low}"
    else:
        interval = f"in {'[' if low_inclusive else '('}{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KVCacheConfigError(
            f"{field} must be a number {interval}, got {shown(value)} ({type(value).__name__}){_suffix(fix)}"
        )
    number = finite_float(value)
    above = number >= low if low_inclusive else number > low
    if not (math.isfinite(number) and above and number <= high):
        raise KVCacheConfigError(f"{field} must be a finite number {interval}, got {shown(value)}{_suffix(fix)}")
    return number


def check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise KVCacheConfigError(f"{field} must be true or false, got {value!r} ({type(value).__name__})")
    return value


def check_opt_str(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise KVCacheConfigError(f"{field} must be a string or None, got {value!r} ({type(value).__name__})")
    return value


def check_instance(value: Any, expected: type | tuple[type, ...], field: str, hint: str) -> None:
    """``isinstance(value, expected)`` or an error saying how to build one (``hint``)."""
    if not isinstance(value, expected):
        kinds = expected if isinstance(expected, tuple) else (expected,)
        names = " or ".join(kind.__name__ for kind in kinds)
        raise KVCacheConfigError(f"{field} must be a {names}, got {type(value).__name__} ({value!r:.80}); {hint}")


class TrackedConfig(dict[str, Any]):
    """A config dict that remembers the last field read, so a failed conversion can name it.

    For best-effort readers of raw ``config.json`` dicts (the weight estimator, the launch
    rules) that convert fields with plain ``int(t["x"])``: wrapped in :func:`reading_config`,
    a ``TypeError`` from ``int([1, 2])`` becomes an error naming ``x`` and its value.
    """

    last_key: Any = None

    def __getitem__(self, key: Any) -> Any:
        self.last_key = key
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.last_key = key
        return super().get(key, default)


@contextmanager
def reading_config(config: TrackedConfig, what: str, fix: str) -> Iterator[None]:
    """Turn a raw-config reader's KeyError / TypeError / ValueError into a KVCacheConfigError.

    ``what`` says which reader failed ("estimating the weights"), ``fix`` what the user can do
    instead; the message names the last field the reader touched and its value.
    """
    try:
        yield
    except KVCacheConfigError:
        raise
    except KeyError as exc:
        raise KVCacheConfigError(
            f"{what}: config field {exc.args[0]!r} is missing; add it to config.json or {fix}"
        ) from exc
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError, AttributeError) as exc:
        key = config.last_key
        field = "a config field" if key is None else f"config field {key!r} = {dict.get(config, key)!r:.60}"
        raise KVCacheConfigError(
            f"{what}: {field} is unusable ({type(exc).__name__}: {exc}); fix config.json or {fix}"
        ) from exc


def check_int_tuple(value: Any, field: str, *, minimum: int = 0, maximum: int = MAX_SETTING_INT) -> tuple[int, ...]:
    """A tuple of ints in ``[minimum, maximum]`` (layer ids, per-layer codes)."""
    if not isinstance(value, tuple):
        raise KVCacheConfigError(f"{field} must be a tuple of integers, got {value!r:.80} ({type(value).__name__})")
    for i, item in enumerate(value):
        check_int(item, f"{field}[{i}]", minimum=minimum, maximum=maximum)
    return value
