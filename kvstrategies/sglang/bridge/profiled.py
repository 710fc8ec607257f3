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
        #: the cell ``profile_max_num_token`` divides by, for the layers it counts (:func:`profiled_cell_size`)
        self._cell_size = profiled_cell_size(runner)

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


#: the bytes the inline profile is run on: ``2**52 // cell`` has one cell per quotient for any cell under 2**24 B
_PROBE_BYTES = 2**52


def profiled_cell_size(runner: Any) -> int:
    """The cell of the release's own ``profile_max_num_token``: ``int(rest_gib * 2**30) // cell`` (the layers it
    counts are the release's: every full-attention layer of a Mamba hybrid up to 0.5.7, the stage's from 0.5.8; up to
    0.5.6 the cell is computed inline). It is run on ``rest = 2**52`` bytes (the memory probe answers it; the Mamba
    reservation is taken out here as the bridge takes it elsewhere), and the cell is ``2**52 // q`` for its answer
    ``q``: unique, as ``2**52 / q - 2**52 / (q + 1)`` is below 1 for a cell under 2**24 B. A zero cell (a draft
    with no attention layer of its own) is 0. Up to 0.5.6 the KV dtype it reads is resolved first
    (:func:`resolve_inline_kv_dtype`)."""
    row = installed_release()
    if row.inline_sizing:
        resolve_inline_kv_dtype(runner)
    module: Any = importlib.import_module(row.sizing_module)
    saved = (module.get_available_gpu_memory, module.get_world_group, runner.mem_fraction_static)
    module.get_available_gpu_memory = lambda *args, **kwargs: _PROBE_BYTES / 2**30
    module.get_world_group = lambda: types.SimpleNamespace(world_size=1, cpu_group=None)
    runner.handle_max_mamba_cache = lambda rest: rest
    runner.mem_fraction_static = 1.0  # rest = available - total x (1 - fraction), total 0
    args = runner.server_args
    slots = getattr(args, "max_mamba_cache_size", None)  # 0.5.1 has no Mamba hybrid (nor the field)
    if hasattr(args, "max_mamba_cache_size"):
        args.max_mamba_cache_size = 0  # 0.5.3 takes its reservation inline: slots x per-request bytes
    try:
        quotient = int(runner.profile_max_num_token(0))
    except ZeroDivisionError:
        return 0
    finally:
        module.get_available_gpu_memory, module.get_world_group, runner.mem_fraction_static = saved
        if hasattr(args, "max_mamba_cache_size"):
            args.max_mamba_cache_size = slots
        del runner.handle_max_mamba_cache
    cell = _PROBE_BYTES // quotient
    if _PROBE_BYTES // cell != quotient:  # a cell past 2**24 B: the probe cannot tell it
        raise RuntimeError(f"profile_max_num_token answered {quotient} for 2**52 B: no single cell size")
    return cell


class _KVDtypeResolved(Exception):
    """Raised by the stated profile to stop ``init_memory_pool`` right after its KV-dtype step."""


def resolve_inline_kv_dtype(runner: Any) -> None:
    """Up to 0.5.6 ``init_memory_pool`` resolves ``kv_cache_dtype`` first, then profiles: it is run until the profile
    (which raises), so the runner holds the dtype SGLang's own step chose."""

    def stop(total_gpu_memory: int) -> int:
        raise _KVDtypeResolved

    runner.profile_max_num_token = stop
    try:
        runner.init_memory_pool(0, None, None)
    except _KVDtypeResolved:
        pass
    finally:
        del runner.profile_max_num_token


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
        row = installed_release()
        mixin: Any = importlib.import_module(row.sizing_module)
        probe = mixin.get_available_gpu_memory
        mixin.get_available_gpu_memory = lambda *args, **kwargs: 0.0  # read only for the closing log line
        try:
            if row.init_pool_call == "server_args":  # 0.5.7
                runner.init_memory_pool(0, args)
            elif row.init_pool_call == "caps":  # up to 0.5.6: the caps as ModelRunner.initialize hands them
                runner.init_memory_pool(0, args.max_running_requests, args.max_total_tokens)
            else:
                runner.init_memory_pool(0)
        finally:
            del runner.profile_max_num_token
            mixin.get_available_gpu_memory = probe
            args.max_total_tokens, args.max_running_requests, runner.pp_size = saved
        return runner_sizes(runner, resolved_requests=int(runner.req_to_token_pool.size), profiled=profiled,
                            user_tokens=user_tokens)  # fmt: skip


class InitRunnerHost(RunnerHost):
    """A 0.5.4 to 0.5.9 ModelRunner: its sizes come with their request-pool size, and building runs
    ``init_memory_pool``."""

    def __init__(self, runner: Any) -> None:
        super().__init__(runner)
        self.profile = RunnerInitProfile(runner)

    def built_sizes(self) -> Any:
        """The sizes ``init_memory_pool`` built the runner's pools for (its request pool's rows per request)."""
        return runner_sizes(self.runner)

    def resolve_max_num_reqs(self, token_capacity: int) -> int:
        raise NotImplementedError("up to 0.5.9 init_memory_pool sizes the request pool (RunnerInitProfile.run)")

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
    """A 0.5.4 to 0.5.9 runner's sizes after ``init_memory_pool`` (``max_running_requests``: its request pool's
    size)."""
    hybrid = bool(runner.is_hybrid_swa)
    return types.SimpleNamespace(
        max_total_num_tokens=int(runner.max_total_num_tokens),
        max_running_requests=int(runner.req_to_token_pool.size),
        full_max_total_num_tokens=getattr(runner, "full_max_total_num_tokens", None) if hybrid else None,
        swa_max_total_num_tokens=getattr(runner, "swa_max_total_num_tokens", None) if hybrid else None,
        **extra,
    )

