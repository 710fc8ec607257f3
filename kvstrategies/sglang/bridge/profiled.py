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
import types
from typing import Any

from .hosts import RunnerHost
from .runtime import installed_release


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


class RunnerInitProfile(RunnerProfile):
    """Up to 0.5.9: ``init_memory_pool`` sizes and builds in one method; it is run with the profiled token count
    stated (``profile_max_num_token`` answers it), and its own steps do the rest.

    ``init_memory_pool`` caps the profiled count by ``--max-total-tokens`` (then page-aligns it, then splits it
    for hybrid SWA), and takes its request-pool size from the **profiled** count (``min(max(T / context x 512,
    2048), 4096)``) or ``--max-running-requests``, capped by the Mamba slots. So the capped path keeps the
    profiled count of the last :meth:`calculate_pool_sizes` (the bridge sizes a case in that order), and the
    answer's ``max_running_requests`` is the request-pool size (``req_to_token_pool.size``). The pools of the
    last run are the ones built: :meth:`build` runs it again for the config it is given.
    """

    def __init__(self, runner: Any) -> None:
        super().__init__(runner)
        self._profiled: int | None = None

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> Any:
        self._profiled = int(available_bytes) // self._cell_size
        return self.run(self._profiled, None, None)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> Any:
        profiled = self._profiled if self._profiled is not None else int(max_total_num_tokens)
        return self.run(profiled, int(max_total_num_tokens), None)

    def run(
        self,
        profiled: int,
        user_tokens: int | None,
        user_requests: int | None,
        *,
        shared: tuple[Any, Any] | None = None,
    ) -> Any:
        """``init_memory_pool`` with ``profiled`` tokens and the two user caps; the runner keeps the pools (a draft
        runner is handed the target's request pool and allocator first, as the speculative worker does)."""
        runner = self.runner
        args = runner.server_args
        saved = (args.max_total_tokens, args.max_running_requests, runner.pp_size)
        args.max_total_tokens, runner.pp_size = user_tokens, 1  # one stage: no all_reduce
        if user_requests is not None:
            args.max_running_requests = user_requests
        runner.req_to_token_pool, runner.token_to_kv_pool_allocator = shared if shared is not None else (None, None)
        runner.profile_max_num_token = lambda total_gpu_memory: profiled  # stated: what it would measure
        mixin: Any = importlib.import_module("sglang.srt.model_executor.model_runner_kv_cache_mixin")
        probe = mixin.get_available_gpu_memory
        mixin.get_available_gpu_memory = lambda *args, **kwargs: 0.0  # read only for the closing log line
        try:
            if installed_release().init_pool_takes_server_args:
                runner.init_memory_pool(0, args)
            else:
                runner.init_memory_pool(0)
        finally:
            del runner.profile_max_num_token
            mixin.get_available_gpu_memory = probe
            args.max_total_tokens, args.max_running_requests, runner.pp_size = saved
        return runner_sizes(runner, resolved_requests=int(runner.req_to_token_pool.size), profiled=profiled,
                            user_tokens=user_tokens)  # fmt: skip


class InitRunnerHost(RunnerHost):
    """A 0.5.9 ModelRunner: its sizes come with their request-pool size, and building runs ``init_memory_pool``."""

    def __init__(self, runner: Any) -> None:
        super().__init__(runner)
        self.profile = RunnerInitProfile(runner)

    def built_sizes(self) -> Any:
        """The sizes ``init_memory_pool`` built the runner's pools for (its request pool's rows per request)."""
        return runner_sizes(self.runner)

    def resolve_max_num_reqs(self, token_capacity: int) -> int:
        raise NotImplementedError("0.5.9 sizes its request pool inside init_memory_pool (RunnerInitProfile.run)")

    def build(self, config: Any, *, shared: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        """``init_memory_pool`` again for ``config``: its profiled count and cap, and the request-pool size when
        it was set from outside (the bridge's what-if pool); a draft gets the target's pools handed over."""
        runner = self.runner
        given = config.max_running_requests if config.max_running_requests != config.resolved_requests else None
        if shared is not None:  # what the target's init_memory_pool left on its (the shared) ServerArgs
            runner.server_args.draft_runner_cache_size, runner.server_args.max_num_reqs = config.handover
        self.profile.run(config.profiled, config.user_tokens, given, shared=shared)
        if shared is None:
            args = runner.server_args
            config.handover = (getattr(args, "draft_runner_cache_size", None), getattr(args, "max_num_reqs", None))
        return runner.req_to_token_pool, runner.token_to_kv_pool


def runner_sizes(runner: Any, **extra: Any) -> Any:
    """A 0.5.9 runner's sizes after ``init_memory_pool`` (``max_running_requests``: its request pool's size)."""
    hybrid = bool(runner.is_hybrid_swa)
    return types.SimpleNamespace(
        max_total_num_tokens=int(runner.max_total_num_tokens),
        max_running_requests=int(runner.req_to_token_pool.size),
        full_max_total_num_tokens=getattr(runner, "full_max_total_num_tokens", None) if hybrid else None,
        swa_max_total_num_tokens=getattr(runner, "swa_max_total_num_tokens", None) if hybrid else None,
        **extra,
    )

