"""Small adapters over the SGLang internals whose shape moves between releases.

Each adapter reads its release's facts from :mod:`.bridge_releases` (or asks the object it is
handed which keywords it takes); the bridge calls these and never compares versions itself.

* :func:`call` -- call an SGLang function or class with the keywords this release accepts (an
  input a release does not have does not exist there: SGLang 0.5.16 has no SWA-draft layer count).
* :func:`parallel_scope` -- state every parallel width and rank of the case's rank 0 for the
  duration of a case (``runtime_context.get_parallel().override``, present in every release).
* :func:`mamba_slot_count` / :func:`pin_mamba_slots` -- the Mamba state-slot count, kept in the
  ``schedule`` config bag from 0.5.17 and on ``ServerArgs`` before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...errors import UnsupportedConfigurationError
from .bridge_releases import BridgeRelease


def accepted_keywords(target: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword names ``target`` takes (a dataclass: its init fields); None if it takes ``**kwargs``."""
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        return frozenset(f.name for f in dataclasses.fields(target) if f.init)
    parameters = inspect.signature(target).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def call(target: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``target(**kwargs)`` minus the keywords this release's ``target`` does not take."""
    known = accepted_keywords(target)
    if known is not None:
        kwargs = {k: v for k, v in kwargs.items() if k in known}
    return target(**kwargs)


@functools.cache
def argparse_choices(server_args_cls: Any) -> Mapping[str, tuple[str, ...]]:
    """``ServerArgs`` field -> the string ``choices`` of its flag in the release's own parser
    (``ServerArgs.add_cli_args``); empty when the class has no parser."""
    import argparse

    add = getattr(server_args_cls, "add_cli_args", None)
    if add is None:
        return {}
    parser = argparse.ArgumentParser(add_help=False)
    add(parser)
    return {a.dest: tuple(str(c) for c in a.choices) for a in parser._actions
            if a.choices is not None and all(isinstance(c, str) for c in a.choices)}  # fmt: skip


def argparse_refusal(row: BridgeRelease, server_args_cls: Any, fields: Mapping[str, Any]) -> str | None:
    """What the release's own argparse says of a string value outside a flag's ``choices`` (None: nothing).

    ``ServerArgs`` itself does not check choices, so a case the release's sizing accepts may still be
    one its launch refuses; the bridge reports that refusal once SGLang's own code has had its say."""
    choices = argparse_choices(server_args_cls)
    refused = sorted(k for k, v in fields.items() if isinstance(v, str) and k in choices and v not in choices[k])
    if not refused:
        return None
    key = refused[0]
    return (f"SGLang {row.line}'s argparse has no choice {fields[key]!r} for {key} (choices {list(choices[key])}; "
            "sglang.srt.server_args.ServerArgs.add_cli_args)")  # fmt: skip


def make_server_args(row: BridgeRelease, server_args_cls: Any, fields: Mapping[str, Any]) -> Any:
    """``ServerArgs`` holding ``fields`` as already-resolved values (no launch resolution runs).

    ``fields`` spell attention DP in its resolved form (``attn_dp_size=N, dp_size=1``); releases
    whose ServerArgs has no ``attn_dp_size`` spell it ``dp_size=N, enable_dp_attention=True``.
    Releases that resolve inside ``ServerArgs.__post_init__`` (before ``resolve_once``) skip it for
    the model path ``"dummy"``; sizing reads the model from ``ModelConfig``, never from here.
    """
    known = accepted_keywords(server_args_cls)
    given = dict(fields)
    if known is not None and "attn_dp_size" not in known:
        attn_dp = int(given.pop("attn_dp_size", 1))
        given.update(dp_size=attn_dp, enable_dp_attention=attn_dp > 1)
    missing = sorted(k for k, v in given.items() if known is not None and k not in known and v is not None)
    if missing:  # SGLang's own argparse would reject the flag: the case cannot be launched
        raise UnsupportedConfigurationError(
            f"SGLang {row.line} has no server argument {', '.join(missing)} (sglang.srt.server_args.ServerArgs)"
        )
    if not row.resolve_once:
        given["model_path"] = "dummy"
    if row.dummy_model_skip:
        server_args = server_args_cls(**given)
    else:  # 0.5.3: no dummy-model return; the values are the resolved ones, so __post_init__ is not run
        post_init = server_args_cls.__post_init__
        server_args_cls.__post_init__ = lambda self: None
        try:
            server_args = server_args_cls(**given)
        finally:
            server_args_cls.__post_init__ = post_init
    # 0.5.14's __post_init__ runs handle_pd_disaggregation before the dummy-model return (a decode role's
    # radix cache goes off): the case's values are the resolved ones, so they are put back
    for key, value in given.items():
        if getattr(server_args, key, value) != value:
            setattr(server_args, key, value)
    # the environment step the dummy model path returns before (_handle_environment_variables): a set
    # --mamba-ssm-dtype becomes SGLANG_MAMBA_SSM_DTYPE, which the Mamba state dtype reads (0.5.8: always, its
    # default float32; mamba_utils.mamba2_state_dtype reads the variable unguarded)
    ssm_dtype = getattr(server_args, "mamba_ssm_dtype", None)
    if ssm_dtype is not None:
        os.environ["SGLANG_MAMBA_SSM_DTYPE"] = str(ssm_dtype)
    return server_args


def parallel_values(case: Mapping[str, Any]) -> dict[str, Any]:
    """Widths and ranks of rank 0 of the case's layout (``attn_tp = tp / attn_dp / attn_cp``)."""
    tp, pp = int(case["tp_size"]), int(case["pp_size"])
    attn_dp, attn_cp, dcp = int(case["attn_dp_size"]), int(case["attn_cp_size"]), int(case["dcp_size"])
    return {
        "world_size": tp * pp,
        "world_rank": 0,
        "tp_size": tp,
        "tp_rank": 0,
        "pp_size": pp,
        "pp_rank": int(case["pp_rank"]),
        "attn_tp_size": tp // attn_dp // attn_cp,
        "attn_tp_rank": 0,
        "attn_cp_size": attn_cp,
        "attn_cp_rank": 0,
        "attn_dp_size": attn_dp,
        "attn_dp_rank": 0,
        "dcp_size": dcp,
        "dcp_rank": 0,
        "dcp_enabled": dcp > 1,
        "attn_dcp_size": dcp,
        "attn_dcp_rank": 0,
        "moe_ep_size": 1,
        "moe_ep_rank": 0,
        "moe_dp_size": 1,
        "moe_dp_rank": 0,
        "moe_tp_size": tp,
        "moe_tp_rank": 0,
    }


def parallel_state(case: Mapping[str, Any]) -> Any:
    """SGLang 0.5.16-0.5.20's ``ParallelState`` for the case's rank 0 (None where it does not exist)."""
    try:
        wrapper = importlib.import_module("sglang.srt.distributed.parallel_state_wrapper")
    except ImportError:
        return None
    return call(wrapper.ParallelState, **parallel_values(case), dp_rank=0, dp_size=1, gpu_id=0)


def _parallel_field_names(runtime_context: Any) -> frozenset[str]:
    names = getattr(runtime_context, "_PARALLEL_FIELDS", None)
    if names is None:
        names = runtime_context._parallel_fields()
    return frozenset(names)


def _probe_answers(case: Mapping[str, Any]) -> dict[str, Any]:
    """What the parallel-state getters answer on rank 0 (read directly by 0.5.15's builders)."""
    values = parallel_values(case)
    return {
        "get_attention_tp_size": values["attn_tp_size"],
        "get_attention_tp_rank": 0,
        "get_attention_dp_size": values["attn_dp_size"],
        "get_attention_dp_rank": 0,
        "get_attention_cp_size": values["attn_cp_size"],
        "get_attn_tensor_model_parallel_world_size": values["attn_tp_size"],
        "get_attn_tensor_model_parallel_rank": 0,
        "get_attn_context_model_parallel_world_size": values["attn_cp_size"],
        "get_tensor_model_parallel_world_size": values["tp_size"],
        "get_tensor_model_parallel_rank": 0,
        "get_dcp_world_size": values["dcp_size"],
        "get_dcp_rank": 0,
    }


@contextlib.contextmanager
def parallel_scope(case: Mapping[str, Any]) -> Iterator[None]:
    """Every parallel value SGLang may ask for, stated for the case's rank 0 while the block runs.

    Through ``runtime_context.get_parallel().override`` (every release), and by answering the
    parallel-state getters that builders import by name (``get_attention_tp_size`` ...) in each
    loaded SGLang module, for releases whose builders call them directly.
    """
    import sys

    try:
        runtime_context = importlib.import_module("sglang.srt.runtime_context")
    except ImportError:  # before 0.5.14: the getters below are all there is
        runtime_context = None
    if runtime_context is not None:
        parallel = runtime_context.get_parallel()
        known = _parallel_field_names(runtime_context)
        values = {k: v for k, v in parallel_values(case).items() if k in known}
        override = parallel.override(**values)
    else:
        override = contextlib.nullcontext()
    saved: list[tuple[Any, str, Any]] = []
    answers = _probe_answers(case)
    try:
        for name, module in list(sys.modules.items()):
            if not name.startswith("sglang") or module is None:
                continue
            namespace = vars(module)
            for probe, answer in answers.items():
                if callable(namespace.get(probe)) and not isinstance(namespace.get(probe), type):
                    saved.append((module, probe, namespace[probe]))
                    setattr(module, probe, _constant(answer))
        with override:
            yield
    finally:
        for module, probe, original in reversed(saved):
            setattr(module, probe, original)


def _constant(value: Any) -> Callable[..., Any]:
    def answer(*args: Any, **kwargs: Any) -> Any:
        return value

    return answer


def mamba_slot_count(row: BridgeRelease, server_args: Any) -> int | None:
    """The slot count ``_handle_max_mamba_cache`` fixed (schedule bag, else the ServerArgs field)."""
    if row.schedule_bag:
        value = importlib.import_module("sglang.srt.runtime_context").get_schedule().max_mamba_cache_size
    else:
        value = server_args.max_mamba_cache_size
    return None if value is None else int(value)


def publish_server_args(row: BridgeRelease, server_args: Any) -> None:
    """Make ``server_args`` the process-wide ``ServerArgs`` the builders read."""
    if row.context_server_args:
        importlib.import_module("sglang.srt.runtime_context").get_context().set_server_args(server_args)
    elif row.global_server_args:
        importlib.import_module("sglang.srt.server_args").set_global_server_args_for_scheduler(server_args)
    else:  # 0.5.3: ModelRunner.__init__ copies the keys the layers read into a module-level dict
        batch = importlib.import_module("sglang.srt.managers.schedule_batch")
        batch.global_server_args_dict.update({k: getattr(server_args, k) for k in batch.GLOBAL_SERVER_ARGS_KEYS})


def finalize_pool_config(row: BridgeRelease, configurator: Any, config: Any) -> Any:
    """The pool configurator's last step once ``config.max_running_requests`` is set (or ``config``)."""
    return configurator.finalize_with_max_running_requests(config) if row.finalize_step else config


def reset_mamba_slots(row: BridgeRelease, server_args: Any, given: int | None) -> None:
    """Undo a previous ``_handle_max_mamba_cache`` call before the next one."""
    if row.schedule_bag:
        importlib.import_module("sglang.srt.runtime_context").get_context().set_server_args(server_args)
    else:
        object.__setattr__(server_args, "max_mamba_cache_size", given)


def set_mamba_slots(row: BridgeRelease, server_args: Any, slots: int) -> None:
    """Fix the Mamba slot count for the rest of the case (a draft reads the target's)."""
    if row.schedule_bag:
        importlib.import_module("sglang.srt.runtime_context").get_context().override(
            "bridge.draft", max_mamba_cache_size=slots
        )
    else:
        object.__setattr__(server_args, "max_mamba_cache_size", slots)


@contextlib.contextmanager
def pin_mamba_slots(row: BridgeRelease, server_args: Any, slots: int | None) -> Iterator[None]:
    """Hold the Mamba slot count at ``slots`` while the block runs (None: leave it)."""
    if slots is None:
        yield
        return
    if row.schedule_bag:
        with importlib.import_module("sglang.srt.runtime_context").get_schedule().override(max_mamba_cache_size=slots):
            yield
        return
    saved = server_args.max_mamba_cache_size
    object.__setattr__(server_args, "max_mamba_cache_size", slots)
    try:
        yield
    finally:
        object.__setattr__(server_args, "max_mamba_cache_size", saved)
