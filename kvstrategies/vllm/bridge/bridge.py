"""Run one case through vLLM's own config, layer specs, grouping and sizing; return a vLLM plan document.

The sequence is the one a ``vllm serve`` start-up runs, minus the GPU (vLLM module paths):

1. ``engine/arg_utils.py EngineArgs(...).create_engine_config(UsageContext.OPENAI_API_SERVER)``
   from a folder holding only the case's config.json (``load_format="dummy"``), with the
   arguments of :func:`kvstrategies.vllm.strategies.engine_args.vllm_deployment`;
2. per pipeline stage (what ``Worker.init_device`` / ``load_model`` do): the stage's parallel
   groups, the worker's workspace manager on ``meta`` (``v1/worker/workspace.py
   init_workspace_manager``; 0.23.0's sparse-MLA backend takes its buffers while it is built),
   ``model_executor/model_loader/utils.py initialize_model`` on ``meta`` under the
   model dtype, ``Platform.update_block_size_for_backend`` (backend block size, hybrid Mamba
   alignment), ``v1/worker/gpu/attn_utils.py get_kv_cache_spec`` (each layer's spec after its
   backend's customisation) and the stage's supported KV cache layouts;
3. ``v1/engine/core.py EngineCore._initialize_kv_caches`` unchanged, with a stand-in executor
   that hands it those specs and, as ``Worker.determine_available_memory`` does when
   ``--kv-cache-memory-bytes`` is set, ``multimodal/gpu_ipc_memory.py reserve_mm_ipc_gpu_memory``
   of the budget; it groups the layers, sizes ``num_gpu_blocks``, builds each worker's
   ``KVCacheConfig`` and logs the capacity (``v1/core/kv_cache_utils.py update_kv_cache_capacity``).

The document (:func:`kvstrategies.vllm.strategies.document.vllm_plan_document` writes the same
keys from the project's own strategies) holds vLLM's resolved settings, the attention backends,
the block size, the stage's layer specs, the KV cache groups with their blocks per request,
``num_gpu_blocks``, the stage's ``kv_cache_tensors``, the capacity and concurrency and vLLM's log
line. Layers are named by their global layer index.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import json
import os
import re
import tempfile
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...case import parse_case
from ...core.releases import VLLM
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ...models.hf import text_config
from ...sglang.bridge.bridge import case_hf_config
from ..strategies.document import capacity_log_line, layer_key
from ..strategies.drafts import VLLMDraft
from ..strategies.engine_args import VLLMDeployment, vllm_deployment
from .runner_specs import runner_kv_cache_spec
from .runtime import check_version, cuda_to_meta, gpu_facts, import_vllm, quiet, use_gpu, vllm_module

#: vLLM refused the case (its own exception is named in the message)
VLLMCaseError = UnsupportedConfigurationError
#: vLLM's failures while building its config or sizing the cache (its own checks and asserts)
#: what vLLM raises while it builds a case's configs and model; OSError: a file the case folder lacks that vLLM
#: reads at launch (0.27.1 loads a Transformers-backend model's image processor)
_VLLM_FAILURES = (ValueError, AssertionError, NotImplementedError, RuntimeError, TypeError, KeyError, ImportError,
                  AttributeError, ZeroDivisionError, IndexError, OSError)  # fmt: skip


# ---- the model folder vLLM reads ---------------------------------------------------------------


def sanitized_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """What vLLM can load offline: ``auto_map`` would make transformers fetch remote code."""
    out = {k: v for k, v in config.items() if k != "auto_map"}
    for key in ("text_config", "language_config"):
        sub = out.get(key)
        if isinstance(sub, Mapping):
            out[key] = {k: v for k, v in sub.items() if k != "auto_map"}
    return out


@contextlib.contextmanager
def model_folder(config: Mapping[str, Any]) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="kvs-vllm-model-") as folder:
        Path(folder, "config.json").write_text(json.dumps(sanitized_config(config)), encoding="utf-8")
        yield folder


def draft_head_config(config: Mapping[str, Any], draft: VLLMDraft) -> dict[str, Any]:
    """The config of the draft head a case stands for: a Llama-architecture EAGLE (``LlamaForCausalLM``, which
    vLLM reads as ``EagleLlamaForCausalLM``) or EAGLE3 head (``LlamaForCausalLMEagle3``) of ``draft.num_layers``
    layers with the draft's KV heads and head size, the target's width, vocabulary and positions."""
    text = text_config(config)
    if draft.latent:
        return _latent_head_config(text, draft)
    heads = _positive(text.get("num_attention_heads")) or draft.num_kv_heads or 1
    hidden = _positive(text.get("hidden_size")) or heads * (draft.head_dim or 128)
    if draft.method == "draft_model" and hidden % heads:  # a model of its own, whose width transformers checks
        hidden = heads * (draft.head_dim or 128)  # against its heads (GLM-4.5: 5,120 over 96); no cache reads it
    if draft.method == "dflash":  # a Qwen3 DFlash draft (qwen3_dflash.py DFlashQwen3ForCausalLM)
        layers = _positive(text.get("num_hidden_layers")) or 2
        return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": hidden,
                "num_attention_heads": heads, "num_key_value_heads": draft.num_kv_heads, "head_dim": draft.head_dim,
                "intermediate_size": _positive(text.get("intermediate_size")) or 4 * hidden,
                "num_hidden_layers": draft.num_layers, "vocab_size": _positive(text.get("vocab_size")) or 32000,
                "max_position_embeddings": _positive(text.get("max_position_embeddings")) or 8192,
                "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
                "dflash_config": {"mask_token_id": 0, "target_layer_ids": [1, layers // 2, layers - 2],
                                  "block_size": draft.num_speculative_tokens + 1}}  # fmt: skip
    return {
        "architectures": ["LlamaForCausalLMEagle3" if draft.method == "eagle3" else "LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": draft.num_kv_heads,
        "head_dim": draft.head_dim,
        "intermediate_size": _positive(text.get("intermediate_size")) or 4 * hidden,
        "num_hidden_layers": draft.num_layers,
        "vocab_size": _positive(text.get("vocab_size")) or 32000,
        "max_position_embeddings": _positive(text.get("max_position_embeddings")) or 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    }


#: the target's fields a latent EAGLE head keeps: its MLA latent and query shape, width, vocabulary and positions
_LATENT_HEAD_KEYS = ("hidden_size", "num_attention_heads", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                     "qk_nope_head_dim", "v_head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps",
                     "rope_theta", "intermediate_size")  # fmt: skip


def _latent_head_config(text: Mapping[str, Any], draft: VLLMDraft) -> dict[str, Any]:
    """A DeepSeek MTP-style EAGLE head (``DeepSeekMTPModel``, which vLLM reads as ``EagleDeepSeekMTPModel``:
    ``deepseek_eagle.py EagleDeepseekV3ForCausalLM``) of ``draft.num_layers`` dense MLA layers with the target's
    latent (``kv_lora_rank``, ``qk_rope_head_dim``), heads, width, vocabulary and positions."""
    head = {key: text[key] for key in _LATENT_HEAD_KEYS if key in text}
    return {**head, "architectures": ["DeepSeekMTPModel"], "model_type": "deepseek_v3",
            "num_hidden_layers": draft.num_layers, "num_key_value_heads": head.get("num_attention_heads", 1),
            # dense layers: the head's indices (after the target's) stay below first_k_dense_replace
            "n_routed_experts": 1, "first_k_dense_replace": 2**20, "tie_word_embeddings": False}  # fmt: skip


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def case_deployment(case: Mapping[str, Any], base_dir: Path | None, vllm_version: str | None = None) -> VLLMDeployment:
    """The vLLM launch a case stands for in ``vllm_version`` (the release running it; the project's mapping,
    whose scope follows the release; refusals as :class:`KVCacheConfigError`)."""
    data = {k: v for k, v in case.items() if not k.startswith("_")}
    parsed = parse_case(data, base_dir=base_dir, engine=VLLM, vllm_version=vllm_version)
    return vllm_deployment(parsed.settings, parsed.available_bytes)


# ---- process state ------------------------------------------------------------------------------


def _clear_caches() -> None:
    """vLLM's per-process caches that would carry one case's answers into the next."""
    logger = importlib.import_module("vllm.logger")
    for name in ("_print_debug_once", "_print_info_once", "_print_warning_once", "_print_error_once"):
        clear = getattr(getattr(logger, name, None), "cache_clear", None)
        if callable(clear):
            clear()
    selector = vllm_module("vllm.v1.attention.selector", "vllm.attention.selector")  # 0.11.0: the latter
    # 0.11.0 and 0.12.0 force CUTLASS_MLA on SM 10.0 by assigning envs.VLLM_ATTENTION_BACKEND
    # (CudaPlatformBase.check_and_update_config): a module attribute that vllm/envs.py's __getattr__ no longer
    # answers for, so every later case of this process would take it (one launch a process in a server)
    envs = importlib.import_module("vllm.envs")
    if "VLLM_ATTENTION_BACKEND" in vars(envs):
        delattr(envs, "VLLM_ATTENTION_BACKEND")
    for value in vars(selector).values():
        if callable(value) and hasattr(value, "cache_clear"):
            value.cache_clear()


@contextlib.contextmanager
def launch_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """The launch's ``VLLM_*`` variables set in this process while vLLM builds it (``vllm/envs.py`` reads them when
    asked), and the previous values restored after."""
    before = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _ensure_world(vllm_config: Any) -> Any:
    """A one-process gloo world (created once) and vLLM's parallel groups for this case's model.

    The groups are rebuilt per case: which exist depends on the model (an expert-parallel group
    only for MoE models).
    """
    ps = importlib.import_module("vllm.distributed.parallel_state")
    dist = importlib.import_module("torch.distributed")
    network = vllm_module("vllm.utils.network_utils", "vllm.utils")
    config = importlib.import_module("vllm.config")
    parallel = vllm_config.parallel_config
    dp = parallel.data_parallel_size
    # the one-process world is one DP replica's rank 0: the groups are made at DP 1, and the DP group's size is
    # then stated per stage (:func:`_stage_groups`), as a worker's DP group reports it
    parallel.data_parallel_size = 1
    try:
        with config.set_current_vllm_config(vllm_config):
            if not dist.is_initialized():
                dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{network.get_open_port()}",
                                        world_size=1, rank=0)  # fmt: skip
            ps.init_distributed_environment(1, 0, "env://", 0, "gloo")
            if ps.model_parallel_is_initialized():
                ps.destroy_model_parallel()
            ps.ensure_model_parallel_initialized(1, 1)
    finally:
        parallel.data_parallel_size = dp
    return ps


def _state(group: Any, world: int, rank_in_group: int, ranks: list[int], rank: int) -> None:
    group.world_size, group.rank_in_group, group.ranks, group.rank = world, rank_in_group, ranks, rank


def _stage_groups(ps: Any, tp: int, pp: int, stage: int, dp: int = 1) -> None:
    """The TP and PP groups as TP rank 0 of ``stage`` sees them (every TP rank's specs are the same), and with
    ``dp`` > 1 the data-parallel group of DP rank 0 (one rank a DP replica: ``ParallelConfig``'s world order
    puts DP outside PP x TP)."""
    first = stage * tp
    _state(ps._TP, tp, 0, list(range(first, first + tp)), first)
    _state(ps._PP, pp, stage, [s * tp for s in range(pp)], first)
    if dp > 1:
        _state(ps._DP, dp, 0, [r * tp * pp + first for r in range(dp)], first)


def _dcp_group(ps: Any, dcp: int, first: int) -> None:
    """The decode-context-parallel group of the stage's first TP rank: ``dcp`` consecutive TP ranks (the world is
    made at DCP 1; the group's size is what the attention layers and specs read)."""
    if dcp > 1:
        _state(ps._DCP, dcp, 0, list(range(first, first + dcp)), first)


# ---- the run --------------------------------------------------------------------------------------


class _Executor:
    """What ``EngineCore._initialize_kv_caches`` asks of an executor, answered from the built stages."""

    def __init__(self, specs: list[dict[str, Any]], layouts: list[list[str]], available: int) -> None:
        self.specs, self.layouts, self.available = specs, layouts, available
        self.configs: list[Any] = []

    def get_kv_cache_specs(self) -> list[dict[str, Any]]:
        return self.specs

    def get_supported_kv_cache_layouts(self) -> list[list[str]]:
        return self.layouts

    def set_kv_cache_layout(self, *args: Any) -> None:
        return None

    def determine_available_memory(self) -> list[int]:
        return [self.available] * len(self.specs)

    def collective_rpc(self, *args: Any, **kwargs: Any) -> None:
        return None

    def initialize_from_config(self, configs: list[Any]) -> None:
        self.configs = list(configs)

    def compile_or_warm_up_model(self) -> None:
        return None


def _engine_config(folder: str, deployment: VLLMDeployment) -> Any:
    arg_utils = importlib.import_module("vllm.engine.arg_utils")
    usage = importlib.import_module("vllm.usage.usage_lib")
    arguments = deployment.engine_arguments()
    engine_args = arg_utils.EngineArgs(model=folder, skip_tokenizer_init=True, load_format="dummy", **arguments)
    return engine_args.create_engine_config(usage.UsageContext.OPENAI_API_SERVER)


@contextlib.contextmanager
def meta_construction(vllm_config: Any) -> Iterator[None]:
    """What a worker sets around its model's construction (``Worker.load_model``), on ``meta``: the worker's
    workspace manager (``v1/worker/workspace.py init_workspace_manager``), the current config, the model dtype,
    the meta device, and explicit CUDA allocations sent to meta."""
    torch = importlib.import_module("torch")
    config = importlib.import_module("vllm.config")
    # 0.11.0: set_default_torch_dtype beside initialize_model, and no workspace manager (v1/worker/workspace.py)
    torch_utils = vllm_module("vllm.utils.torch_utils", "vllm.model_executor.model_loader.utils")
    if importlib.util.find_spec("vllm.v1.worker.workspace") is not None:
        workspace = importlib.import_module("vllm.v1.worker.workspace")
        workspace.init_workspace_manager(torch.device("meta"), 2 if vllm_config.parallel_config.enable_dbo else 1)
    dtype = vllm_config.model_config.dtype
    with config.set_current_vllm_config(vllm_config), torch_utils.set_default_torch_dtype(dtype), \
            torch.device("meta"), cuda_to_meta():  # fmt: skip
        yield


def _build_stage(vllm_config: Any, last_stage: bool = True) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """One stage's layer specs, supported layouts and attention backend per layer (the last stage's with the
    speculative draft's: the model runners build it on the last PP rank only)."""
    config = importlib.import_module("vllm.config")
    loader = importlib.import_module("vllm.model_executor.model_loader.utils")
    platforms = importlib.import_module("vllm.platforms")
    worker_base = importlib.import_module("vllm.v1.worker.worker_base")
    layer_base = importlib.import_module("vllm.model_executor.layers.attention_layer_base")
    with meta_construction(vllm_config):
        model = loader.initialize_model(vllm_config=vllm_config)
        _check_eagle3_target(model, vllm_config)
        target_layers = set(config.get_layers_from_vllm_config(vllm_config, layer_base.AttentionLayerBase))
        if last_stage:
            _build_draft(vllm_config)
    with config.set_current_vllm_config(vllm_config):
        # 0.17.1 has no such step: its block size was fixed with the config (CudaPlatformBase.check_and_update_config)
        update_block_size = getattr(platforms.current_platform, "update_block_size_for_backend", None)
        if update_block_size is not None:
            update_block_size(vllm_config)
        specs = _kv_cache_spec(vllm_config)
        _number_draft_layers(specs, target_layers, vllm_config)
        worker = object.__new__(worker_base.WorkerBase)
        worker.vllm_config = vllm_config
        # 0.28.0 and older resolve no KV cache layout (their workers declare none)
        supported = getattr(worker, "get_supported_kv_cache_layouts", None)
        layouts = supported() if supported is not None else []
        layers = config.get_layers_from_vllm_config(vllm_config, layer_base.AttentionLayerBase)
        backends = {name: backend for name, layer in layers.items() if (backend := _backend_name(layer)) is not None}
    return specs, layouts, backends


def _backend_name(layer: Any) -> str | None:
    """The name vLLM gives a layer's backend; None where it gives none (0.11.0's Mamba backends, such as
    ``v1/attention/backends/mamba2_attn.py Mamba2AttentionBackend``, keep ``AttentionBackend.get_name``, which
    raises NotImplementedError)."""
    try:
        return str(layer.get_attn_backend().get_name())
    except NotImplementedError:
        return None


def _kv_cache_spec(vllm_config: Any) -> dict[str, Any]:
    """Each layer's spec: ``v1/worker/gpu/attn_utils.py get_kv_cache_spec`` where the release has it (0.12.0 on),
    else its model runner's (0.11.0: :mod:`.runner_specs`)."""
    if importlib.util.find_spec("vllm.v1.worker.gpu") is None:
        return runner_kv_cache_spec(vllm_config)
    attn_utils = importlib.import_module("vllm.v1.worker.gpu.attn_utils")
    return dict(attn_utils.get_kv_cache_spec(vllm_config))


def _check_eagle3_target(model: Any, vllm_config: Any) -> None:
    """The model runner's refusal of an EAGLE3 draft beside a model without auxiliary hidden states
    (0.34.0: ``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py set_eagle3_aux_hidden_state_layers``; 0.33.0:
    ``GPUModelRunner.load_model``)."""
    speculative = vllm_config.speculative_config
    if speculative is None or speculative.method not in ("eagle3", "dflash"):  # the drafts that read aux states
        return
    interfaces = importlib.import_module("vllm.model_executor.models.interfaces")
    if not interfaces.supports_eagle3(model):
        raise RuntimeError("Model does not support EAGLE3 interface")


def _build_draft(vllm_config: Any) -> None:
    """The speculative draft beside the target, as the worker's proposer builds it (0.20.2 to 0.33.0:
    ``vllm/v1/spec_decode/llm_base_proposer.py SpecDecodeBaseProposer._get_model``; 0.34.0:
    ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py load_eagle_model``): the draft's own ``VllmConfig`` view,
    under the ``eagle_head`` model tag; its attention layers register in the same forward context, so they
    join the target's KV cache specs. Nothing without a speculative config."""
    speculative = vllm_config.speculative_config
    # n-gram lookup builds no drafter model (its config names the target's model config as the draft's)
    if speculative is None or speculative.draft_model_config is None or speculative.method == "ngram":
        return
    config = importlib.import_module("vllm.config")
    loader = importlib.import_module("vllm.model_executor.model_loader.utils")
    backends = importlib.import_module("vllm.compilation.backends")
    if hasattr(speculative, "apply_draft_overrides"):  # 0.34.0: v1/worker/gpu/spec_decode/eagle/utils.py
        draft_config = speculative.apply_draft_overrides(vllm_config)
    else:
        proposer = importlib.import_module("vllm.v1.spec_decode.llm_base_proposer")
        view = types.SimpleNamespace(speculative_config=speculative, vllm_config=vllm_config)
        draft_config = proposer.SpecDecodeBaseProposer._create_draft_vllm_config(view)
    tag, prefix = "eagle_head", ""
    if speculative.method == "draft_model":
        draft_config, tag, prefix = _draft_model_config(vllm_config), "draft_model", "draft_model"
    with backends.set_model_tag(tag), config.set_current_vllm_config(draft_config):
        loader.initialize_model(vllm_config=draft_config, model_config=speculative.draft_model_config, prefix=prefix)


def _draft_model_config(vllm_config: Any) -> Any:
    """A separate draft model's ``VllmConfig``, as the release's own code makes it: 0.34.0's
    ``standalone_ar/speculator.py StandaloneARSpeculator.load_draft_model`` (the draft overrides' view with the
    draft's model config, no quantization and the draft's parallel config at the target's rank), or, 0.20.2 to 0.33.0,
    ``v1/spec_decode/draft_model.py DraftModelProposer._create_draft_vllm_config`` itself on a proposer that holds
    only the two configs it reads (0.31.0 on it also keeps the target's decode context parallelism)."""
    speculative = vllm_config.speculative_config
    if hasattr(speculative, "apply_draft_overrides"):  # 0.34.0
        replace_config = importlib.import_module("vllm.config.utils").replace
        return replace_config(speculative.apply_draft_overrides(vllm_config), quant_config=None,
                              model_config=speculative.draft_model_config,
                              parallel_config=replace_config(speculative.draft_parallel_config,
                                                             rank=vllm_config.parallel_config.rank))  # fmt: skip
    proposer = importlib.import_module("vllm.v1.spec_decode.draft_model").DraftModelProposer
    view = object.__new__(proposer)  # __init__ would allocate the proposer's device buffers
    view.speculative_config, view.vllm_config = speculative, vllm_config
    return proposer._create_draft_vllm_config(view)


#: the draft layers of the case being recorded, by vLLM's name -> the index the documents give them
_DRAFT_KEYS: dict[str, int] = {}


def _number_draft_layers(names: Iterable[str], target_layers: set[str], vllm_config: Any) -> None:
    """Give each draft layer the index after the target's: ``n + i`` for the draft's layer ``i``, ``n`` the index
    after the target's last (``num_hidden_layers``; Falcon-H1's Mamba layers are numbered after its attention ones:
    ``falcon_h1.py ssm_layer_idx``). DeepSeek's MTP layer is ``model.layers.61`` already, Qwen3-Next's
    ``mtp.layers.0``, an EAGLE head's ``model.layers.<num_hidden_layers + i>``; vLLM keeps its own names, which its
    grouping orders by, and only the documents read these."""
    model = vllm_config.model_config
    # 0.11.0 has no get_total_num_hidden_layers: the text config's count its get_layers_start_end_indices reads
    total = getattr(model, "get_total_num_hidden_layers", None)
    layers = total() if total is not None else getattr(model.hf_text_config, "num_hidden_layers", 0)
    keys = [key for key in map(layer_key, target_layers) if isinstance(key, int)]
    first = max(layers, max(keys, default=-1) + 1)
    for name in names:
        index = layer_key(name)
        if name not in target_layers and isinstance(index, int):
            _DRAFT_KEYS[name] = first + (index - layers if index >= layers else index)


def _key(name: str) -> int | str:
    """A layer's index in the documents: a draft layer's from :func:`_number_draft_layers`, else vLLM's."""
    return _DRAFT_KEYS.get(name, layer_key(name))


def run_vllm(case: Mapping[str, Any], base_dir: Path | None = None) -> dict[str, Any]:
    """vLLM's document for one case (vLLM's refusal: :class:`VLLMCaseError`; not a vLLM deployment:
    :class:`KVCacheConfigError` from :func:`case_deployment`)."""
    version = import_vllm()
    deployment = case_deployment(case, base_dir, check_version(version).text)
    config = importlib.import_module("vllm.config")
    core = importlib.import_module("vllm.v1.engine.core")
    facts = gpu_facts(deployment.gpu)
    hf_config = case_hf_config(case, base_dir)
    head = deployment.draft if deployment.draft is not None and deployment.draft.is_head else None
    with model_folder(hf_config) as folder, use_gpu(facts), quiet() as log, \
            contextlib.ExitStack() as stack:  # fmt: skip
        if head is not None:  # the draft head the case stands for, in a folder of its own
            deployment = replace(deployment, draft_model=stack.enter_context(
                model_folder(draft_head_config(hf_config, head))))  # fmt: skip
        _clear_caches()
        _DRAFT_KEYS.clear()
        stack.enter_context(launch_environment(deployment.environment()))
        try:
            vllm_config = _engine_config(folder, deployment)
            tp, pp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size
            ps = _ensure_world(vllm_config)
            specs: list[dict[str, Any]] = []
            layouts: list[list[str]] = []
            backends: dict[str, str] = {}
            for stage in range(pp):
                worker_config = vllm_config if tp * pp == 1 else copy.deepcopy(vllm_config)
                _stage_groups(ps, tp, pp, stage, deployment.data_parallel_size)
                _dcp_group(ps, deployment.decode_context_parallel_size, stage * tp)
                stage_specs, stage_layouts, stage_backends = _build_stage(worker_config, stage == pp - 1)
                specs.extend([stage_specs] * tp)
                layouts.extend([stage_layouts] * tp)
                backends.update(stage_backends)
            available = _reserve_mm_ipc(vllm_config, deployment.kv_cache_memory_bytes)
            executor = _Executor(specs, layouts, available)
            engine = object.__new__(core.EngineCore)
            engine.model_executor = executor
            engine.vllm_config = vllm_config
            with config.set_current_vllm_config(vllm_config):
                initialized = core.EngineCore._initialize_kv_caches(engine, vllm_config)
            if isinstance(initialized, tuple):  # 0.17.1 returns the blocks; EngineCore.__init__ stores them
                vllm_config.cache_config.num_gpu_blocks = initialized[0]
        except Exception as exc:  # vLLM's own checks, asserts, and pydantic's ValidationError of its configs
            if not isinstance(exc, _VLLM_FAILURES) and type(exc).__name__ != "ValidationError":
                raise
            text = _first_lines(exc).replace(folder, "<model folder>")
            if deployment.draft_model is not None:
                text = text.replace(deployment.draft_model, "<draft folder>")
            raise VLLMCaseError(f"vLLM {version} refused: {type(exc).__name__}: {text}") from exc
        worker = deployment.pp_rank * tp
        document = _document(version, facts.name, deployment, vllm_config, executor.configs[worker], specs[worker],
                             backends)  # fmt: skip
    document["vllm_log"] = _log_lines(log.getvalue())
    return document


def _reserve_mm_ipc(vllm_config: Any, kv_cache_memory_bytes: int) -> int:
    """The budget after the frontend's multimodal GPU memory (nothing for a text model): the module function
    from 0.27.1, the worker's own method in 0.25.1 and 0.26.0 (``Worker._reserve_mm_ipc_gpu_memory``); 0.24.0
    reserves nothing (the budget as given)."""
    if importlib.util.find_spec("vllm.multimodal.gpu_ipc_memory") is None:
        return kv_cache_memory_bytes
    ipc = importlib.import_module("vllm.multimodal.gpu_ipc_memory")
    reserve = getattr(ipc, "reserve_mm_ipc_gpu_memory", None)
    if reserve is not None:
        return int(reserve(kv_cache_memory_bytes, vllm_config.model_config.multimodal_config, 1))
    gpu_worker = importlib.import_module("vllm.v1.worker.gpu_worker")
    worker = object.__new__(gpu_worker.Worker)
    worker.model_config, worker.parallel_config = vllm_config.model_config, vllm_config.parallel_config
    return int(gpu_worker.Worker._reserve_mm_ipc_gpu_memory(worker, kv_cache_memory_bytes))


def _first_lines(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    return text[:limit] + ("..." if len(text) > limit else "")


_LOG_KEEP = re.compile(r"KV cache|padding layers|block size|Mamba cache mode|page size|Using .* backend|FlashAttention")


def _log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if _LOG_KEEP.search(line)]


# ---- vLLM's objects as plain data -----------------------------------------------------------


def _dtype(value: Any) -> str:
    return str(value).removeprefix("torch.")


def spec_document(spec: Any) -> dict[str, Any]:
    """One KV cache spec: its class, block size, page bytes and the fields that decide them."""
    out: dict[str, Any] = {"kind": type(spec).__name__, "block_size": spec.block_size,
                           "page_size_bytes": spec.page_size_bytes}  # fmt: skip
    inner = getattr(spec, "kv_cache_specs", None)
    if inner is not None:  # UniformTypeKVCacheSpecs: the distinct layer specs it holds
        distinct: list[dict[str, Any]] = []
        for layer_spec in inner.values():
            entry = spec_document(layer_spec)
            if entry not in distinct:
                distinct.append(entry)
        out["specs"] = distinct
        return out
    for name in ("num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
                 "page_size_padded", "cache_dtype_str", "mamba_cache_mode", "num_speculative_blocks",
                 "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment"):  # fmt: skip
        value = getattr(spec, name, None)
        if value is not None:
            out[name] = value
    if hasattr(spec, "dtype"):
        out["dtype"] = _dtype(spec.dtype)
    if hasattr(spec, "shapes"):
        out["shapes"] = [list(shape) for shape in spec.shapes]
        out["dtypes"] = [_dtype(d) for d in spec.dtypes]
        out["mamba_type"] = str(getattr(spec.mamba_type, "value", spec.mamba_type))
    quant = getattr(spec, "kv_quant_mode", None)
    if quant is not None and int(quant) != 0:
        out["kv_quant_mode"] = str(getattr(quant, "name", quant))
    return out


def _layer_specs(specs: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for name, spec in specs.items():
        document = spec_document(spec)
        for entry in entries:
            if entry["spec"] == document:
                entry["layers"].append(_key(name))
                break
        else:
            entries.append({"layers": [_key(name)], "spec": document})
    return entries


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _tensor_document(tensor: Any) -> dict[str, Any]:
    """One ``KVCacheTensor``: layers at a layer stride (0.29.0 on), or 0.28.0's tensor ``shared_by`` one layer
    of each group (with an offset and a block stride from 0.24.0; 0.23.0's has neither)."""
    if hasattr(tensor, "shared_by"):
        document = {"size": tensor.size, "shared_by": [_key(n) for n in tensor.shared_by]}
        if hasattr(tensor, "offset"):
            document |= {"offset": tensor.offset, "block_stride": tensor.block_stride}
        return document
    return {"size": tensor.size, "layers": [_key(n) for n in tensor.layers], "layer_stride": tensor.layer_stride,
            "block_stride": tensor.block_stride, "offset": tensor.offset}  # fmt: skip


def _max_concurrent_batches(vllm_config: Any) -> int:
    """The batches the engine overlaps: ``VllmConfig.max_concurrent_batches`` from 0.23.0; 0.22.1 asks its
    executor class (``v1/executor/abstract.py Executor.get_class``: ``MultiprocExecutor`` / ``UniProcExecutor``
    ``.max_concurrent_batches``), whose property reads the parallel and scheduler configs only."""
    if hasattr(vllm_config, "max_concurrent_batches"):
        return int(vllm_config.max_concurrent_batches)
    abstract = importlib.import_module("vllm.v1.executor.abstract")
    cls = abstract.Executor.get_class(vllm_config)
    executor = object.__new__(cls)
    executor.vllm_config = vllm_config
    executor.parallel_config = vllm_config.parallel_config
    executor.scheduler_config = vllm_config.scheduler_config
    return int(executor.max_concurrent_batches)


def _capacity(vllm_config: Any, worker_config: Any) -> tuple[int, float]:
    """The tokens and concurrency vLLM logs: stored on the cache config from 0.24.0; 0.23.0 logs each
    worker's from ``kv_cache_utils.py _report_kv_cache_config`` without keeping them, so they are computed
    by its own ``get_max_concurrency_for_kv_cache_config`` for the recorded worker."""
    cache = vllm_config.cache_config
    if hasattr(cache, "kv_cache_size_tokens"):
        return int(cache.kv_cache_size_tokens), float(cache.kv_cache_max_concurrency)
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    concurrency = float(get_max_concurrency_for_kv_cache_config(vllm_config, worker_config))
    return int(concurrency * vllm_config.model_config.max_model_len), concurrency


def _document(
    version: str,
    gpu_name: str,
    deployment: VLLMDeployment,
    vllm_config: Any,
    worker_config: Any,
    stage_specs: Mapping[str, Any],
    backends: Mapping[str, str],
) -> dict[str, Any]:
    cache, scheduler, model = vllm_config.cache_config, vllm_config.scheduler_config, vllm_config.model_config
    groups = []
    for group in worker_config.kv_cache_groups:
        spec = group.kv_cache_spec
        per_request = -(-spec.max_memory_usage_bytes(vllm_config) // spec.page_size_bytes)
        groups.append({"layers": [_key(n) for n in group.layer_names], "spec": spec_document(spec),
                       "blocks_per_request": per_request})  # fmt: skip
    tensors = [_tensor_document(t) for t in worker_config.kv_cache_tensors]
    distinct_backends: list[str] = []
    for name in backends.values():
        if name not in distinct_backends:
            distinct_backends.append(name)
    tokens, concurrency = _capacity(vllm_config, worker_config)
    extra: dict[str, Any] = {} if vllm_config.speculative_config is None else {
        "num_speculative_tokens": int(vllm_config.speculative_config.num_speculative_tokens)}
    if not scheduler.enable_chunked_prefill:  # --no-enable-chunked-prefill, as vLLM kept it
        extra["enable_chunked_prefill"] = False
    dp = int(vllm_config.parallel_config.data_parallel_size)
    if dp > 1:  # the engine cores vLLM's config holds (each sizes its own KV cache as this one)
        extra["data_parallel_size"] = dp
    dcp = int(vllm_config.parallel_config.decode_context_parallel_size)
    if dcp > 1:
        extra["decode_context_parallel_size"] = dcp
    for key in deployment.environment():  # the variables vLLM read while it built the stages, as it read them
        extra[key.lower()] = str(getattr(importlib.import_module("vllm.envs"), key))
    return {
        "engine": f"vllm {version}",
        "gpu": gpu_name,
        "vllm_settings": {
            "tensor_parallel_size": deployment.tensor_parallel_size,
            "pipeline_parallel_size": deployment.pipeline_parallel_size,
            "pp_rank": deployment.pp_rank,
            "kv_cache_dtype": str(cache.cache_dtype),
            "dtype": _dtype(model.dtype),
            "requested_block_size": deployment.block_size,
            "max_model_len": int(model.max_model_len),
            "max_num_batched_tokens": int(scheduler.max_num_batched_tokens),
            "max_num_seqs": int(scheduler.max_num_seqs),
            # 0.25.1 has no in-flight bound (its sliding windows count max_num_batched_tokens): None
            "max_in_flight_tokens": _optional_int(getattr(vllm_config, "max_in_flight_tokens", None)),
            "enable_prefix_caching": bool(cache.enable_prefix_caching),
            "async_scheduling": bool(scheduler.async_scheduling),
            "max_concurrent_batches": _max_concurrent_batches(vllm_config),
            # 0.14.1 has no mamba_cache_mode (its Mamba state is one block a request, or a block of every block_size
            # tokens under prefix caching): None
            "mamba_cache_mode": _optional_str(getattr(cache, "mamba_cache_mode", None)),
            "disable_hybrid_kv_cache_manager": bool(scheduler.disable_hybrid_kv_cache_manager),
            "kv_cache_memory_bytes": deployment.kv_cache_memory_bytes,
            **extra,
        },
        "attention_backends": distinct_backends,
        # the engine's block size, as ``EngineCore._initialize_kv_caches`` sets it (the smallest group block)
        "block_size": int(vllm_config.cache_config.block_size),
        "kv_cache_layout": None if getattr(cache, "kv_cache_layout", None) is None else str(cache.kv_cache_layout),
        "layer_specs": _layer_specs(stage_specs),
        "kv_cache_groups": groups,
        "num_gpu_blocks": int(cache.num_gpu_blocks),
        "kv_cache_tensors": tensors,
        "kv_cache_size_tokens": tokens,
        "max_concurrency": concurrency,
        "capacity_log": capacity_log_line(tokens, int(model.max_model_len), concurrency),
    }


def refusal_is_vllms(error: KVCacheConfigError) -> bool:
    """Whether a bridge error is vLLM's own refusal (else: the case is not a vLLM deployment)."""
    return str(error).startswith("vLLM ") and " refused: " in str(error)
