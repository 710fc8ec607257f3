"""What SGLang's pool configurators are built from: the extracted configurator, or the ModelRunner.

SGLang 0.5.16 (pull request #31163) moved the KV-cache pool builders out of the ModelRunner
mixin (``model_executor/model_runner_kv_cache_mixin.py``) into
``mem_cache/kv_cache_configurator.KVCacheConfigurator``; the pool configurators that size a
rank take whichever object holds them. The bridge drives both through one small interface:

* :class:`ConfiguratorHost` -- 0.5.16 and later: a ``KVCacheConfigurator``.
* :class:`RunnerHost` -- 0.5.15: a ``ModelRunner`` built without its ``__init__`` (no GPU, no
  weights), carrying the attributes the mixin and the configurators read, with the values
  ``ModelRunner.__init__`` / ``initialize`` / ``load_model`` would give it.

Either answers: the configurator source, the request count (``resolve_max_num_reqs``), the Mamba
reservation (``handle_max_mamba_cache``), the sizes a pool is built for, and the built pools.
"""

from __future__ import annotations

import contextlib
import importlib
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .runtime import installed_release


@dataclass
class ConfiguratorHost:
    """SGLang 0.5.16+: everything goes through the extracted ``KVCacheConfigurator``."""

    kvc: Any

    @property
    def source(self) -> Any:
        """What ``create_memory_pool_configurator`` takes."""
        return self.kvc

    @property
    def mambaish_config(self) -> Any:
        return self.kvc.mambaish_config

    def resolve_max_num_reqs(self, token_capacity: int) -> int:
        return int(self.kvc.resolve_max_num_reqs(token_capacity))

    def handle_max_mamba_cache(self, rest_gib: float) -> float:
        return float(self.kvc._handle_max_mamba_cache(rest_gib))

    def derive_pool_sizes(self, config: Any) -> Any:
        return self.kvc._derive_pool_sizes(config=config)

    def shared_pools(self, config: Any) -> tuple[Any, Any]:
        """``(request pool, allocator)`` a draft worker shares: the target's request pool; the draft
        registers with the target's allocator, which the bridge does not need to build."""
        return self.kvc._build_req_to_token_pool(max_num_reqs=int(config.max_running_requests)), None

    def build(self, config: Any, *, shared: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        """``(req_to_token_pool, token_to_kv_pool)`` for a finalised ``config`` (on the host's device).

        A target also registers its allocator (SWA pools then hold its full -> SWA index mapping).
        """
        model_config_mod = importlib.import_module("sglang.srt.configs.model_config")
        hf = self.kvc.model_config.hf_config
        sizes = self.derive_pool_sizes(config)
        req_pool = shared[0] if shared is not None else self.shared_pools(config)[0]
        dsv4 = model_config_mod.is_deepseek_v4(hf)
        pool = self.kvc._build_token_to_kv_pool(
            sizes=sizes, is_dsa_model=model_config_mod.is_deepseek_dsa(hf), is_dsv4_model=dsv4,
            req_to_token_pool=req_pool,
        )  # fmt: skip
        if shared is None:  # SWA pools hold the allocator's index mapping once it is registered
            with contextlib.suppress(Exception):
                self.kvc._build_token_to_kv_pool_allocator(
                    sizes=sizes, token_to_kv_pool=pool, is_dsv4_model=dsv4, req_to_token_pool=req_pool,
                    token_to_kv_pool_allocator=None,
                )  # fmt: skip
        return req_pool, pool


@dataclass
class RunnerHost:
    """SGLang 0.5.15: a ``ModelRunner`` (the KV-cache mixin's methods) with the state they read."""

    runner: Any

    @property
    def source(self) -> Any:
        return self.runner

    @property
    def mambaish_config(self) -> Any:
        runner = self.runner
        if hasattr(type(runner), "mambaish_config"):
            return runner.mambaish_config
        # 0.5.2 / 0.5.3: ModelRunner.is_hybrid_gdn; 0.5.1 serves no Mamba hybrid
        return runner.model_config.hf_config if getattr(runner, "is_hybrid_gdn", False) else None

    def resolve_max_num_reqs(self, token_capacity: int) -> int:
        return int(self.runner._resolve_max_num_reqs(token_capacity))

    def handle_max_mamba_cache(self, rest_gib: float) -> float:
        if hasattr(type(self.runner), "handle_max_mamba_cache"):
            return float(self.runner.handle_max_mamba_cache(rest_gib))
        return hybrid_gdn_reservation(self.runner, rest_gib)

    def derive_pool_sizes(self, config: Any) -> Any:
        """The sizes ``_apply_memory_pool_config`` gives the runner (a draft keeps no c4/c128 pools)."""
        model_config_mod = importlib.import_module("sglang.srt.configs.model_config")
        out = types.SimpleNamespace(**{k: getattr(config, k, None) for k in _POOL_SIZE_FIELDS})
        if self.runner.is_draft_worker:
            out.c4_max_total_num_tokens = out.c128_max_total_num_tokens = 0
            out.c4_state_pool_size = out.c128_state_pool_size = 0
        is_v4 = getattr(model_config_mod, "is_deepseek_v4", None)  # 0.5.11 has no DeepSeek-V4
        if is_v4 is not None and is_v4(self.runner.model_config.hf_config):
            mixin = importlib.import_module("sglang.srt.model_executor.model_runner_kv_cache_mixin")
            getter = getattr(mixin, "_get_dsv4_compress_state_dtypes", None)  # 0.5.13: float32, no knob
            float32 = importlib.import_module("torch").float32
            out.c4_state_dtype, out.c128_state_dtype = getter() if getter is not None else (float32, float32)
        return out

    def shared_pools(self, config: Any) -> tuple[Any, Any]:
        """``(request pool, allocator)`` of the target runner, which a draft worker is handed."""
        self.build(config)
        return self.runner.req_to_token_pool, self.runner.token_to_kv_pool_allocator

    def build(self, config: Any, *, shared: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        """``_apply_memory_pool_config`` -> ``_init_pools`` on the runner; a draft runner is handed
        the target's request pool and allocator, as the speculative worker hands them over."""
        runner = self.runner
        runner.req_to_token_pool, runner.token_to_kv_pool_allocator = shared if shared is not None else (None, None)
        runner._apply_memory_pool_config(config)
        return runner.req_to_token_pool, runner.token_to_kv_pool


def hybrid_gdn_reservation(runner: Any, rest_gib: float) -> float:
    """The Mamba reservation of SGLang 0.5.2 and 0.5.3, which has no method of its own: ``ModelRunner.__init__``
    fixes the slots (``--max-mamba-cache-size``, else ``--max-running-requests``, else 512; divided by the DP width
    under DP attention) and ``profile_max_num_token`` takes ``slots x hf_config.mamba_cache_per_req`` bytes out of the
    rest (GiB in, GiB out; the slot count is left on ``server_args.max_mamba_cache_size``, as SGLang leaves it)."""
    args = runner.server_args
    if args.max_mamba_cache_size is None:
        args.max_mamba_cache_size = args.max_running_requests if args.max_running_requests is not None else 512
    args.max_mamba_cache_size //= args.dp_size if args.enable_dp_attention else 1
    per_request = int(runner.model_config.hf_config.mamba_cache_per_req)
    return float(rest_gib - args.max_mamba_cache_size * per_request / (1 << 30))


_POOL_SIZE_FIELDS = (
    "max_total_num_tokens",
    "max_running_requests",
    "full_max_total_num_tokens",
    "swa_max_total_num_tokens",
    "c4_max_total_num_tokens",
    "c128_max_total_num_tokens",
    "c4_state_pool_size",
    "c128_state_pool_size",
    "c4_state_dtype",
    "c128_state_dtype",
)


def model_runner(
    *,
    server_args: Any,
    model_config: Any,
    model: Any,
    case: Mapping[str, Any],
    model_dtype: Any,
    spec_algorithm: Any,
    layer_range: tuple[int, int],
    num_effective_layers: int,
    eagle_draft_num_layers: int | None,
    dflash_draft_num_layers: int | None,
) -> Any:
    """A 0.5.15 ``ModelRunner`` for one rank, built without ``__init__``.

    The attributes are the ones ``ModelRunner.__init__`` sets from the server arguments and the
    model config, ``initialize`` sets for the layer range, and ``load_model`` sets for the
    sliding window and the KV dtype (``configure_kv_cache_dtype`` runs on the runner itself).
    """
    model_runner_mod = importlib.import_module("sglang.srt.model_executor.model_runner")
    arch = importlib.import_module("sglang.srt.configs.model_config").AttentionArch
    runner: Any = object.__new__(model_runner_mod.ModelRunner)
    attn_dp = int(case["attn_dp_size"])
    values: dict[str, Any] = {
        "server_args": server_args,
        "model_config": model_config,
        "model": model,
        "device": "meta",
        "gpu_id": 0,
        "tp_rank": 0,
        "tp_size": int(case["tp_size"]),
        "dcp_size": int(case["dcp_size"]),
        "dcp_rank": 0,
        "moe_ep_rank": 0,
        "moe_ep_size": 1,
        "dp_rank": 0,
        "dp_size": attn_dp,
        "pp_rank": int(case["pp_rank"]),
        "pp_size": int(case["pp_size"]),
        "attn_cp_rank": 0,
        "attn_cp_size": int(case["attn_cp_size"]),
        "moe_dp_rank": 0,
        "moe_dp_size": 1,
        "is_draft_worker": bool(case["is_draft_worker"]),
        "spec_algorithm": spec_algorithm,
        "page_size": int(case["page_size"]),
        "req_to_token_pool": None,
        "token_to_kv_pool_allocator": None,
        "memory_pool_config": None,
        "is_hybrid_swa": getattr(model_config, installed_release().hybrid_attribute),
        "is_hybrid_swa_compress": getattr(model_config, "is_hybrid_swa_compress", False),
        "use_mla_backend": model_config.attention_arch == arch.MLA,
        "attention_chunk_size": model_config.attention_chunk_size,
        "enable_hisparse": False,
        "draft_model_idx": None,
        "eagle_draft_num_layers": eagle_draft_num_layers,
        "dflash_draft_num_layers": dflash_draft_num_layers,
        "dtype": model_dtype,
        "start_layer": layer_range[0],
        "end_layer": layer_range[1],
        "num_effective_layers": num_effective_layers,
        "forward_stream": None,
        "mem_fraction_static": None,
        "pp_group": types.SimpleNamespace(
            world_size=int(case["pp_size"]), rank_in_group=int(case["pp_rank"]),
            is_first_rank=int(case["pp_rank"]) == 0, is_last_rank=int(case["pp_rank"]) == int(case["pp_size"]) - 1,
        ),  # fmt: skip
    }
    values[installed_release().hybrid_attribute] = values["is_hybrid_swa"]  # 0.5.5 reads it as is_hybrid
    for name, value in values.items():
        object.__setattr__(runner, name, value)
    unset = getattr(model_runner_mod, "_UNSET", None)
    if unset is not None:
        object.__setattr__(runner, "_linear_attn_registry_cache", unset)
    if hasattr(runner, "adjust_hybrid_swa_layers_for_pp"):
        runner.adjust_hybrid_swa_layers_for_pp()  # initialize(): the stage's hybrid-SWA layer lists
    else:
        _stage_layer_lists(runner)
    runner.sliding_window_size = _sliding_window(runner)
    if hasattr(runner, "configure_kv_cache_dtype"):  # up to 0.5.6 init_memory_pool resolves it (bridge.profiled)
        runner.configure_kv_cache_dtype()
    return runner


def _stage_layer_lists(runner: Any) -> None:
    """0.5.11 keeps this step inline in ``ModelRunner.load_model`` (0.5.12 made it
    ``adjust_hybrid_swa_layers_for_pp``): for every model, the full / SWA attention layer ids of
    ``[start_layer, end_layer]`` go back into the model config."""
    config = runner.model_config
    stage = range(runner.start_layer, runner.end_layer + 1)
    full = [i for i in stage if hasattr(config, "full_attention_layer_ids") and i in config.full_attention_layer_ids]
    swa = [i for i in stage if hasattr(config, "swa_attention_layer_ids") and i in config.swa_attention_layer_ids]
    config.swa_attention_layer_ids = swa
    config.full_attention_layer_ids = full


def _sliding_window(runner: Any) -> int | None:
    """``load_model``'s sliding-window rule (0.5.15): the model's method, then the config's window."""
    config = runner.model_config
    if hasattr(runner.model, "get_attention_sliding_window_size"):
        return runner.model.get_attention_sliding_window_size()  # type: ignore[no-any-return]
    if runner.is_hybrid_swa and getattr(config, "sliding_window_size", None) is not None:
        return int(config.sliding_window_size)
    if config.attention_chunk_size is not None:
        return int(config.attention_chunk_size)
    return None
