"""The speculative draft worker's own KV pools, for the breakdown of a target's deployment.

SGLang's draft worker (``EAGLEWorkerV2.alloc_memory_pool``) builds pools of its own for its layers,
sized from the target's ``memory_pool_config`` (``KVCacheConfigurator._resolve_memory_pool_config``,
its draft branch): the target's tokens, the draft's layers. Where they are paid from:

* **in the KV budget** when the target priced its draft's layers into its cell
  (``eagle_draft_num_layers`` set: a draft model path, or one SGLang's launch sets to the model
  path, ``speculative_hook``): the budget's draft share;
* **from the runtime slack** otherwise (a path-less MTP head such as Qwen3.5's, whose target cell
  has no draft layers, ``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``): allocated after
  the target's pool is sized, out of what ``mem_fraction_static`` left.

Planned as a draft-worker case (``is_draft_worker``) with the target's settings and budget
(:func:`kvstrategies.api.plan`, which lays the draft's pools out for the target's final sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import plan
from ..case import Case, parse_case
from ..pools.layout import PoolLayout


@dataclass(frozen=True)
class DraftPools:
    """The draft worker's token-to-KV and state pools, and whether the KV budget priced them."""

    pools: tuple[PoolLayout, ...]
    in_budget: bool
    layers: int

    @property
    def planned_bytes(self) -> int:
        return sum(pool.planned_bytes for pool in self.pools)


def draft_pools(case: Case) -> DraftPools | None:
    """The draft worker's pools of an EAGLE-family target ``case`` (``None`` without a draft worker)."""
    settings = case.settings
    spec = settings.speculative
    if settings.is_draft_worker or not spec.enabled or not spec.algorithm.is_eagle_family:
        return None
    draft_case = parse_case({**case.raw, "is_draft_worker": True})
    planned = plan(draft_case.settings, case.available_bytes, max_tokens=case.max_tokens)
    layout = planned.layout
    from ..context import draft_num_layers

    pools = tuple(pool for pool in (layout.token_to_kv, *layout.extra) if pool.planned_bytes > 0)
    draft_layers = spec.eagle_draft_num_layers
    return DraftPools(pools, bool(draft_layers), draft_num_layers(planned.ctx))
