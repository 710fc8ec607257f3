"""SGLang up to 0.5.10 sizes its pools inline in the ModelRunner: one adapter gives it the bridge's interface.

SGLang 0.5.11 moved the sizing into ``model_executor/pool_configurator.py`` (``calculate_pool_sizes``
and ``calculate_pool_sizes_from_max_tokens`` of one configurator per family). Before it,
``ModelRunnerKVCacheMixin._resolve_memory_pool_config`` does it in three of the runner's methods:

* ``profile_max_num_token``: ``int(rest_gib * 2**30) // get_cell_size_per_token(num_layers)``;
* ``_resolve_token_capacity``: ``min(profiled, --max-total-tokens)``, aligned down to the page;
* ``_resolve_hybrid_swa_tokens``: for a hybrid-SWA model, the aligned capacity priced at
  ``F * n_full + S * n_swa`` bytes a token, re-split as ``full = capacity * that / (F * n_full +
  r * S * n_swa)`` and ``swa = full * r`` (each aligned down).

:class:`RunnerProfile` answers the two entry points by calling those methods on the bridge's
ModelRunner, so every number is the release's own. The bytes it is handed are the rest after the
Mamba reservation, as the bridge hands a configurator (``handle_max_mamba_cache`` runs on its own
in the bridge, as it runs inside ``profile_max_num_token``). The pipeline-parallel MIN over stages
(an ``all_reduce`` in ``_resolve_token_capacity``) is not run: the bridge sizes one stage, as it
does for the later releases, whose ``_apply_token_constraints`` it does not run either.
"""

from __future__ import annotations

import importlib
from typing import Any


class RunnerProfile:
    """``calculate_pool_sizes`` / ``calculate_pool_sizes_from_max_tokens`` of a 0.5.10 ModelRunner."""

    #: the name documents give for SGLang's sizing class up to 0.5.10 (there is no configurator)
    name = "ModelRunnerKVCacheMixin"

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        #: ``get_cell_size_per_token`` for the layers ``profile_max_num_token`` counts
        self._cell_size = int(runner.get_cell_size_per_token(_profiled_layers(runner)))

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> Any:
        """The profiling path: ``available_bytes // cell`` (``profile_max_num_token``), then the runner's resolution."""
        return self._resolved(int(available_bytes) // self._cell_size, None)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> Any:
        """The user's cap: ``--max-total-tokens`` is what ``_resolve_token_capacity`` takes the MIN with."""
        return self._resolved(int(max_total_num_tokens), int(max_total_num_tokens))

    def _resolved(self, profiled: int, user_limit: int | None) -> Any:
        """``_resolve_memory_pool_config`` after profiling, with ``max_running_requests`` left to the caller."""
        runner = self.runner
        mixin = importlib.import_module("sglang.srt.model_executor.model_runner_kv_cache_mixin")
        saved = (runner.server_args.max_total_tokens, runner.pp_size)
        runner.server_args.max_total_tokens = user_limit
        runner.pp_size = 1  # one stage: no all_reduce (see the module docstring)
        try:
            capacity = int(runner._resolve_token_capacity(profiled))
            full = swa = None
            if runner.is_hybrid_swa:
                capacity, full, swa = (int(x) for x in runner._resolve_hybrid_swa_tokens(capacity))
        finally:
            runner.server_args.max_total_tokens, runner.pp_size = saved
        return mixin.MemoryPoolConfig(
            max_total_num_tokens=capacity,
            max_running_requests=None,
            full_max_total_num_tokens=full,
            swa_max_total_num_tokens=swa,
            mem_fraction_static=runner.server_args.mem_fraction_static,
        )


def _profiled_layers(runner: Any) -> int:
    """The layer count ``profile_max_num_token`` prices: a draft's ``num_nextn_predict_layers`` (else its
    effective layers), a Mamba hybrid's full-attention layers of the stage, else the stage's layers."""
    if runner.is_draft_worker:
        return int(getattr(runner.model_config.hf_config, "num_nextn_predict_layers", runner.num_effective_layers))
    mambaish = runner.mambaish_config
    if mambaish is not None:
        return sum(1 for i in mambaish.full_attention_layer_ids if runner.start_layer <= i < runner.end_layer)
    return int(runner.num_effective_layers)
