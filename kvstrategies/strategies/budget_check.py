"""Every plan's K/V pools must fit its KV budget, whatever strategy sized them.

SGLang hands its configurator a budget (``available_bytes``) and allocates the pools the
configurator sizes; a strategy that sizes more K/V than the budget holds would run the engine
out of memory at start-up. :func:`check_layout_within_budget` (run by :func:`kvstrategies.api.plan`
for the built-in and registered strategies alike) compares the layout's K/V bytes -- the
:attr:`~kvstrategies.pools.layout.BufferRole.KV` buffers, what SGLang's ``get_kv_size_bytes``
counts; request state and index tables are reserved or charged elsewhere -- with

    ``available_bytes x dcp + 2 x page_size x dcp x cell_size``

bytes: the budget (per decode-context-parallel rank group: with DCP a rank's pools hold
logical tokens of all ``dcp`` ranks, as SGLang's hybrid-SWA pool does) plus two pages of
padding (SGLang allocates ``size + page_size`` slots, and FP4/FP8 scale rows round up). Layouts
at an asked size -- ``max_tokens`` (``calculate_pool_sizes_from_max_tokens``, an entry point of its
own), a ``pool_max_tokens`` what-if -- and draft workers, whose pools follow other sizes, are not
checked. Where the release's own sizing prices less than its pools store (a rule the release lacks,
:meth:`~kvstrategies.strategies.base.PoolConfigurator.engine_undercounts`), the engine plans those
pools anyway: :func:`overshoot_note` says by how much they exceed the budget, and nothing is refused.
"""

from __future__ import annotations

import math

from ..core.releases import EngineRelease, ReleaseRule
from ..errors import InsufficientMemoryError
from ..pools.layout import BufferRole, KVPoolsLayout


def kv_bytes(layout: KVPoolsLayout) -> int:
    """Bytes of the K/V buffers (role ``kv``) of the token-to-KV pool and the extra pools."""
    return sum(pool.bytes_by_role().get(BufferRole.KV.value, 0) for pool in (layout.token_to_kv, *layout.extra))


def kv_allowance(available_bytes: int, page_size: int, dcp_size: int, cell_size: float) -> int:
    """``available x dcp + 2 pages x dcp x cell`` bytes (module doc)."""
    return available_bytes * dcp_size + math.ceil(2 * page_size * dcp_size * cell_size)


def check_layout_within_budget(
    strategy: str, layout: KVPoolsLayout, available_bytes: int, page_size: int, dcp_size: int, cell_size: float
) -> None:
    """Refuse a layout whose K/V buffers exceed the budget (module doc)."""
    nbytes, allowed = kv_bytes(layout), kv_allowance(available_bytes, page_size, dcp_size, cell_size)
    if nbytes > allowed:
        raise InsufficientMemoryError(
            f"{strategy} lays out {nbytes:,} B of K/V buffers on a KV budget of {available_bytes:,} B "
            f"(at most {allowed:,} B with two pages of padding): its sizing gives more tokens than the budget "
            "holds; fix the strategy's calculate_pool_sizes (SGLang would run out of memory allocating these pools)"
        )


def overshoot_note(
    layout: KVPoolsLayout,
    available_bytes: int,
    dcp_size: int,
    release: EngineRelease,
    rules: tuple[ReleaseRule, ...],
    *,
    adding: tuple[ReleaseRule, ...] = (),
) -> str | None:
    """A plan note when the K/V buffers exceed ``available_bytes x dcp`` because ``release`` lacks ``rules`` (its own
    sizing undercounts its pools) or has ``adding`` (its pools take more than the profiled count): by how many bytes;
    None when they fit. The engine plans them either way."""
    nbytes, budget = kv_bytes(layout), available_bytes * dcp_size
    if not (rules or adding) or nbytes <= budget:
        return None
    why = [f"it lacks {', '.join(f'{rule.key} ({rule.span.describe()})' for rule in rules)}"] if rules else []
    why += [f"it has {', '.join(f'{rule.key} ({rule.span.describe()})' for rule in adding)}"] if adding else []
    return (
        f"{release.label} plans these pools although they store more than its KV budget ({'; '.join(why)}): "
        f"the K/V buffers take {nbytes:,} B, {nbytes - budget:,} B ({(nbytes - budget) / 2**30:.2f} GiB) more than the "
        f"KV budget of {budget:,} B; the deployment may run out of memory allocating them"
    )
