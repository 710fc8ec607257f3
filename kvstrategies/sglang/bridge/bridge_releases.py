"""What differs between SGLang releases for the bridge: one row of facts per release line.

Every place where the bridge must drive one release differently from another reads a field of
:class:`BridgeRelease` here; nothing in the bridge compares version strings. Two kinds of fact:

* the CPU environment a release's import chain needs (``tools/sglang_env.py`` installs it): the
  transformers release SGLang pins, and the light packages beyond :data:`COMMON_PACKAGES`;
* how the release exposes the objects the bridge drives (its private API moves between
  releases): where the KV-cache builders live (the ModelRunner mixin up to 0.5.15, the extracted
  ``KVCacheConfigurator`` from 0.5.16), how parallel widths and platform facts are stated, where
  the Mamba slot count is kept, and whether launch resolution runs as ``resolve_once``.

:func:`bridge_release` answers for the installed SGLang (``.postN`` builds are their line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.releases import EngineRelease, parse_release
from ...errors import MissingDependencyError

#: light packages every supported release's sizing import chain needs, at versions tried together
#: on CPU torch 2.13.0 (Python 3.11). Why each is needed: docs/sglang-bridge.md.
COMMON_PACKAGES: tuple[str, ...] = (
    "msgspec==0.23.0",
    "numpy==2.4.6",
    "packaging==26.4",
    "psutil==7.2.2",
    "pydantic==2.14.4",
    "orjson==3.13.0",
    "requests==2.34.2",
    "tqdm==4.70.1",
    "einops==0.8.2",
    "pybase64==1.5.1",
    "triton==3.9.0",
    "pillow==13.0.0",
    "starlette==1.10.0",
    "pyzmq==27.3.0",
    "ipython==9.18.1",
    "aiohttp==3.14.5",
    "dill==0.4.1",
    "sentencepiece==0.2.3",
    "apache-tvm-ffi==0.1.11",
    "compressed-tensors==0.18.0",
    "gguf==0.19.0",
    "openai==2.8.0",
    "partial-json-parser==0.2.1.1.post7",
    "uvicorn==0.38.0",
    "setproctitle==1.3.7",
)


@dataclass(frozen=True)
class BridgeRelease:
    """How the bridge installs and drives one SGLang release line."""

    line: str
    #: the transformers release SGLang pins (``requirements`` of its wheel); configs parse with it
    transformers: str
    #: packages beyond COMMON_PACKAGES the import chain needs, installed with ``--no-deps``
    extra_no_deps: tuple[str, ...] = ()
    #: ``sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator`` exists (0.5.16, PR #31163);
    #: before it the builders are methods of ``ModelRunnerKVCacheMixin`` on a ``ModelRunner``
    configurator: bool = True
    #: ``runtime_context.override_platform`` states platform facts (else: probes are rebound)
    platform_override: bool = True
    #: ``runtime_context.get_schedule()`` holds ``max_mamba_cache_size`` (else ``ServerArgs`` does)
    schedule_bag: bool = True
    #: ``ServerArgs.resolve_once()`` runs launch resolution (else ``ServerArgs.__post_init__`` does);
    #: with it come ``resolved_dict``, ``arg_groups.overrides.resolution_result`` and
    #: ``arg_groups.model_override_base.model_config_of`` (0.5.19, ``arg_groups/pipeline.py``)
    resolve_once: bool = True
    #: ``ServerArgs`` takes ``attn_dp_size`` (0.5.22); before, attention DP is spelled
    #: ``dp_size=N, enable_dp_attention=True``
    attn_dp_field: bool = True
    #: ``kv_cache_configurator.mm_runtime_reservation_gb`` reserves multimodal memory out of the
    #: KV budget (0.5.18); before, nothing is reserved for it
    mm_kv_reserve: bool = True
    #: ``runtime_context.get_context().set_server_args`` publishes the process ``ServerArgs``
    #: (0.5.15); before, ``server_args.set_global_server_args_for_scheduler`` does
    context_server_args: bool = True
    #: ``sglang.srt.runtime_context`` exists (0.5.14: parallel widths, schedule and platform facts in one
    #: place); before, the parallel-state getters alone answer for the rank
    runtime_context: bool = True
    #: the pool configurator has ``finalize_with_max_running_requests`` (0.5.15: sizes request-scoped
    #: pools once the request cap is known); before, the sizes are final when calculated
    finalize_step: bool = True
    #: ``model_executor/pool_configurator.py`` sizes the pools (0.5.11: ``calculate_pool_sizes`` and
    #: ``calculate_pool_sizes_from_max_tokens``); before, ``ModelRunnerKVCacheMixin`` profiles and
    #: sizes inline (``profile_max_num_token``, ``_resolve_token_capacity``, ``_resolve_hybrid_swa_tokens``)
    pool_configurator: bool = True
    #: CUDA kernel modules the release imports at module load on every platform, given stand-ins
    #: (0.5.10: ``mem_cache/memory_pool_host`` imports ``sgl_kernel.kvcacheio``; 0.5.11 guards it; up to
    #: 0.5.7, ``layers/activation.py`` and ``layers/layernorm.py`` import vLLM's layers where sgl-kernel
    #: has no build: a CPU without AMX)
    kernel_stubs: tuple[str, ...] = ()
    #: ``ModelRunnerKVCacheMixin`` resolves the pool sizes in steps (0.5.10: ``_resolve_memory_pool_config``,
    #: then ``_apply_memory_pool_config`` builds); before, ``init_memory_pool`` sizes and builds in one method
    resolution_steps: bool = True
    #: what ``init_memory_pool`` is handed beside the GPU memory: ``"none"`` (0.5.8: it reads ``self.server_args``),
    #: ``"server_args"`` (0.5.7: ``init_memory_pool(total_gpu_memory, server_args)``) or ``"caps"`` (up to 0.5.6:
    #: ``init_memory_pool(total_gpu_memory, max_num_reqs, max_total_tokens)``)
    init_pool_call: str = "none"
    #: the ModelRunner sizes in ``model_runner.py`` itself (up to 0.5.6): no ``ModelRunnerKVCacheMixin``, no
    #: ``get_cell_size_per_token`` (``profile_max_num_token`` computes the cell inline) and no
    #: ``configure_kv_cache_dtype`` (``init_memory_pool`` resolves the KV dtype first)
    inline_sizing: bool = False
    #: the ``ModelConfig`` / ``ModelRunner`` attribute that says hybrid SWA: ``is_hybrid_swa`` (0.5.6 on), ``is_hybrid``
    #: before
    hybrid_attribute: str = "is_hybrid_swa"
    #: ``ServerArgs.__post_init__`` returns at once for the model path ``"dummy"`` (0.5.4); before, it resolves the
    #: launch for any path (reading the model's config), so the bridge builds the resolved values without it
    dummy_model_skip: bool = True
    #: ``server_args.set_global_server_args_for_scheduler`` publishes the process ``ServerArgs`` (0.5.4); before,
    #: the ModelRunner copies ``GLOBAL_SERVER_ARGS_KEYS`` into ``managers.schedule_batch.global_server_args_dict``
    global_server_args: bool = True
    #: the modules defining the platform probes other modules import by name (``get_device_memory_capacity``,
    #: ``is_cuda``...): ``sglang.srt.utils.common`` (0.5.3: ``utils`` is a package); before, the module
    #: ``sglang.srt.utils``, and up to 0.5.1 ``layers.utils`` too (``is_sm90_supported``, ``is_sm100_supported``)
    probes_modules: tuple[str, ...] = ("sglang.srt.utils.common",)
    #: ``runtime_context.publish`` takes the process's ``SpawnRanks`` and derives every group place from it
    #: (0.5.21); before, the ranks live in ``distributed.parallel_state``'s group globals alone
    spawn_ranks: bool = True
    #: ``runtime_context.publish(server_args, role=...)`` publishes the process configuration (0.5.17); before,
    #: the ``ServerArgs`` setter of :attr:`context_server_args` / :attr:`global_server_args` does
    publish: bool = True

    @property
    def sizing_module(self) -> str:
        """The module holding the runner's memory-pool methods and the ``get_available_gpu_memory`` they call."""
        return "sglang.srt.model_executor." + ("model_runner" if self.inline_sizing else "model_runner_kv_cache_mixin")

    @property
    def release(self) -> EngineRelease:
        return parse_release(self.line)


_OLD_XGRAMMAR = ("xgrammar==0.2.1",)
#: up to 0.5.16: no ``runtime_context.publish`` (and so no ``SpawnRanks``)
_BEFORE_0_5_17: dict[str, Any] = {"publish": False, "spawn_ranks": False}
#: what 0.5.7 imports from vLLM at module load on a CPU without AMX (the fallback kernels; never called to size)
VLLM_CPU_FALLBACKS = ("vllm.model_executor.layers.activation", "vllm.model_executor.layers.layernorm")
_NEW_XGRAMMAR = ("xgrammar==0.2.7",)


def _before_0_5_8(line: str, transformers: str, xgrammar: str, **facts: Any) -> BridgeRelease:
    """A release up to 0.5.7: the ModelRunner sizes in ``init_memory_pool`` (no configurator, no runtime context, no
    launch pipeline); where sgl-kernel has no build (a CPU without AMX) its layers import vLLM's fallbacks, and its
    ``utils`` import fastapi. ``facts`` are the row's own."""
    return BridgeRelease(line, transformers, (f"xgrammar=={xgrammar}", "fastapi==0.124.4", "annotated-doc==0.0.7"),
                         configurator=False, platform_override=False, schedule_bag=False, resolve_once=False,
                         attn_dp_field=False, mm_kv_reserve=False, context_server_args=False, finalize_step=False,
                         runtime_context=False, pool_configurator=False,
                         kernel_stubs=("sgl_kernel", *VLLM_CPU_FALLBACKS), resolution_steps=False,
                         **_BEFORE_0_5_17, **facts)


#: up to 0.5.3: ``ServerArgs.__post_init__`` has no dummy-model return and the layers read the module-level dict
_BEFORE_0_5_4 = {"dummy_model_skip": False, "global_server_args": False}

BRIDGE_RELEASES: tuple[BridgeRelease, ...] = (
    _before_0_5_8("0.5.1", "4.55.2", "0.1.23", init_pool_call="caps", inline_sizing=True, hybrid_attribute="is_hybrid",
                  probes_modules=("sglang.srt.utils", "sglang.srt.layers.utils"), **_BEFORE_0_5_4),
    _before_0_5_8("0.5.2", "4.56.1", "0.1.24", init_pool_call="caps", inline_sizing=True, hybrid_attribute="is_hybrid",
                  probes_modules=("sglang.srt.utils",), **_BEFORE_0_5_4),
    _before_0_5_8("0.5.3", "4.57.0", "0.1.24", init_pool_call="caps", inline_sizing=True, hybrid_attribute="is_hybrid",
                  **_BEFORE_0_5_4),
    _before_0_5_8("0.5.4", "4.57.1", "0.1.25", init_pool_call="caps", inline_sizing=True, hybrid_attribute="is_hybrid"),
    _before_0_5_8("0.5.5", "4.57.1", "0.1.25", init_pool_call="caps", inline_sizing=True, hybrid_attribute="is_hybrid"),
    _before_0_5_8("0.5.6", "4.57.1", "0.1.27", init_pool_call="caps", inline_sizing=True),
    _before_0_5_8("0.5.7", "4.57.1", "0.1.27", init_pool_call="server_args"),
    BridgeRelease("0.5.8", "4.57.1", ("xgrammar==0.1.27",), configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  pool_configurator=False, kernel_stubs=("sgl_kernel",), resolution_steps=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.9", "4.57.1", ("xgrammar==0.1.27",), configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  pool_configurator=False, kernel_stubs=("sgl_kernel.kvcacheio",), resolution_steps=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.10", "5.3.0", ("xgrammar==0.1.32",), configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  pool_configurator=False, kernel_stubs=("sgl_kernel.kvcacheio",),
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.11", "5.6.0", ("xgrammar==0.1.32",), configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.12", "5.6.0", ("xgrammar==0.2.0",), configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.13", "5.8.1", _OLD_XGRAMMAR, configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, runtime_context=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.14", "5.8.1", _OLD_XGRAMMAR, configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  context_server_args=False, finalize_step=False, publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.15", "5.12.1", _OLD_XGRAMMAR, configurator=False, platform_override=False,
                  schedule_bag=False, resolve_once=False, attn_dp_field=False, mm_kv_reserve=False,
                  publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.16", "5.12.1", _OLD_XGRAMMAR, platform_override=False, schedule_bag=False, resolve_once=False,
                  attn_dp_field=False, mm_kv_reserve=False, publish=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.17", "5.12.1", _OLD_XGRAMMAR, platform_override=False, resolve_once=False,
                  attn_dp_field=False, mm_kv_reserve=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.18", "5.12.1", _OLD_XGRAMMAR, platform_override=False, resolve_once=False,
                  attn_dp_field=False, spawn_ranks=False),  # fmt: skip
    BridgeRelease("0.5.19", "5.12.1", _OLD_XGRAMMAR, attn_dp_field=False, spawn_ranks=False),
    BridgeRelease("0.5.20", "5.12.1", _OLD_XGRAMMAR, attn_dp_field=False, spawn_ranks=False),
    BridgeRelease("0.5.21", "5.12.1", _NEW_XGRAMMAR, attn_dp_field=False),
    BridgeRelease("0.5.22", "5.19.0", _NEW_XGRAMMAR),
    BridgeRelease("0.5.23", "5.19.0", _NEW_XGRAMMAR),
)
_BY_LINE = {row.line: row for row in BRIDGE_RELEASES}


def bridge_release(version: str) -> BridgeRelease:
    """The row for an installed SGLang ``version`` (``0.5.15.post1`` -> the 0.5.15 row).

    An unsupported release is a :class:`MissingDependencyError` naming the supported ones.
    """
    try:
        release = parse_release(version, field="the installed SGLang")
    except Exception as exc:
        raise MissingDependencyError(
            f"SGLang {version} is installed; the bridge supports {', '.join(_BY_LINE)} "
            f"(python tools/sglang_env.py VERSION DIR makes an environment for one; docs/sglang-releases.md)"
        ) from exc
    return _BY_LINE[release.text]


def install_requirements(row: BridgeRelease, version: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(with_deps, no_deps)``: what ``pip install`` gets for this release (``version``, default
    the line itself, e.g. ``0.5.15.post1``), after CPU torch.

    ``with_deps`` installs under the CPU-torch constraint; ``no_deps`` (SGLang itself and packages
    whose requirements would pull a CUDA build) with ``--no-deps``.
    """
    with_deps = (*COMMON_PACKAGES, f"transformers=={row.transformers}")
    return with_deps, (*row.extra_no_deps, f"sglang=={version or row.line}")
