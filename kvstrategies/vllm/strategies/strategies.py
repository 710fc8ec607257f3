"""The vLLM strategies: one deployment's specs, groups, blocks, tensors and capacity, as vLLM 0.33.0 sizes them.

Selected like the SGLang strategies (first applicable in the registry), for contexts whose
``release.engine`` is ``"vllm"``:

* :class:`VLLMAttentionStrategy` -- full attention and MLA, sliding-window and Llama-4's chunked local
  layers included (uniform models, hybrid local attention with the hybrid allocator's groups and padding),
  and DeepSeek sparse attention (DeepSeek-V3.2, GLM-5: each layer's latent and indexer key cache in one
  ``UniformTypeKVCacheSpecs`` group on a sparse-MLA backend, Hopper and SM 10.x fp8);
* :class:`VLLMMambaHybridStrategy` -- Mamba2 / GDN / KDA / Mamba-1 hybrids (MLA attention beside them,
  as in Kimi-Linear, and Falcon-H1's attention and Mamba in every layer included): the attention block is
  enlarged until one attention page holds a Mamba state (``Platform._align_hybrid_block_size``),
  the state page padded to it, states and KV blocks drawn from one pool;
* :class:`VLLMUnmodelledStrategy` -- the families vLLM runs with layouts these strategies do not
  model (DeepSeek-V4, MiniMax sparse): refused, naming vLLM's layout.
  Different K/V head sizes and heads per layer type (MiMo-V2, Gemma-4) are
  :class:`VLLMAttentionStrategy`'s, on ``FLASH_ATTN_DIFFKV`` where K and V differ.

:class:`VLLMStrategy` is a :class:`~kvstrategies.strategies.base.Strategy` of its own, not SGLang's
``PoolConfigurator``: vLLM sizes whole blocks from ``--kv-cache-memory-bytes`` in one step, with no
cell, state reservation or what-if pool of SGLang's. :meth:`VLLMStrategy.vllm_plan` is the whole
answer (:class:`VLLMKVCachePlan`, which also holds its ``cell_size_bytes``); :meth:`~VLLMStrategy.sizes`
and :meth:`~VLLMStrategy.layout` read a plan (``max_total_num_tokens`` is vLLM's "GPU KV cache
size", the layout lists the ``kv_cache_tensors`` as the int8 buffers vLLM allocates).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ...context import KVCacheContext
from ...core.dtypes import DType
from ...core.releases import VLLM, EngineRelease, ReleaseRule, parse_release, span
from ...core.sizing import PoolSizes, ceil_div
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import vllm_model_rule
from ...pools.layout import BufferRole, BufferSpec, KVPoolsLayout, PoolLayout
from ...strategies.base import Strategy
from ...strategies.checks import is_vllm
from . import dsv4 as dsv4_caches
from .backends import (
    DEFAULT_BLOCK_SIZE,
    INDEXER_BACKEND,
    KV_CACHE_LAYOUTS,
    BackendChoice,
    attention_backend,
    diffkv_backend,
    head_backend,
    is_diffkv,
    mla_config_block,
    sparse_mla_backend,
)
from .drafts import check_draft_model, check_draft_pipeline, check_eagle3_target, draft_layer_specs, head_layer_spec
from .engine_args import VLLMDeployment, check_layer_partition, vllm_deployment
from .grouping import PROMOTED_TAKE_FULL_BLOCK, KVCacheGroup, kv_cache_groups, padding_layers, spec_entries
from .launch import VLLMLaunch, check_draft_slots, resolve_model_launch
from .layers import (
    MLA_HEAD_SIZE_V_ZERO,
    SLIDING_OWN_BLOCK,
    attention_kv_quant_mode,
    attention_specs,
    check_kv_cache_dtype,
    flat_sparse_alignment,
    kv_storage_dtype,
    layer_kv_dtype,
    mamba_state,
    model_rule_releases,
    per_release_rules,
    pp_indices,
    state_specs,
)
from .sizing import (
    MEMORY_CHECK_FROM_GROUPS,
    PP_PROJECTED_GROUPS,
    STAGE_TENSORS_AT_MIN_BLOCKS,
    Capacity,
    KVCacheTensor,
    SharedKVCacheTensor,
    blocks_per_request,
    bytes_per_block,
    check_enough_memory,
    check_layer_specs_memory,
    project,
    stage_tensors,
)
from .specs import CacheLimits, FullAttentionSpec, KVCacheSpec, MambaSpec, SparseMLALayerSpec

#: the chunk a GDN layer's prefill checkpoints align to (its FLA kernels' chunk size)
GDN_CHECKPOINT_ALIGNMENT = 64
#: a Mamba hybrid with MLA attention keeps its block a multiple of 128 tokens: the TRTLLM / FlashInfer MLA decode
#: kernels want the kernel blocks a block splits into aligned to 128 (``Platform._align_hybrid_block_size``)
MLA_HYBRID_BLOCK_ALIGNMENT = 128
#: from vLLM 0.27.1 (``Platform._align_hybrid_block_size``); 0.26.0 aligns an MLA hybrid to its kernel block only
MLA_HYBRID_ALIGNMENT = ReleaseRule(
    "vllm-mla-hybrid-block-128",
    span("0.27.1", engine=VLLM),
    "a Mamba hybrid with MLA keeps its block a multiple of 128 tokens (the MLA decode kernels' alignment)",
    "vllm/platforms/interface.py Platform._align_hybrid_block_size",
    topic="sizing",
)

#: from this release every Mamba hybrid's config-level state (``get_mamba_state_shape_from_config``, which
#: ``Platform._align_hybrid_block_size`` sizes the block and pads the state page from) holds the speculative lookahead;
#: before it the classes marked ``VLLMModelRule.config_state_without_lookahead`` (Falcon-H1; in vLLM's source also
#: GraniteMoeHybrid and Zamba2) compute it without ``num_spec``, while their layers' states
#: (``MambaMixer2.get_state_shape``) hold it: the block and padding come from the shorter state, and where the padded
#: page is below the layer's state ``MambaSpec.page_size_bytes`` asserts (Falcon-H1 7B + a 5-layer EAGLE head,
#: 3 tokens: vLLM 0.20.2 to 0.31.0)
HYBRID_CONFIG_STATE_LOOKAHEAD = ReleaseRule(
    "vllm-hybrid-config-state-lookahead",
    span("0.32.0", engine=VLLM),
    "a Mamba hybrid's block and state padding are sized from the state with the speculative lookahead (before: "
    "Falcon-H1's from the state without it, and vLLM asserts where its padded page is below the layer's state)",
    "vllm/model_executor/models/falcon_h1.py FalconH1ForCausalLM.get_mamba_state_shape_from_config (num_spec); "
    "vllm/platforms/interface.py Platform._align_hybrid_block_size; vllm/v1/kv_cache_interface.py "
    "MambaSpec.page_size_bytes",
    topic="sizing",
)

#: vLLM 0.19.1 sizes a Mamba hybrid's block in ``HybridAttentionMambaModelConfig.verify_and_update_config``: the
#: smallest multiple of 16 (an MLA model: 64) whose attention page holds one state, never rounded to the backend's
#: kernel block; then, without ``--block-size``, the executor's ``update_block_size_for_backend`` sets the
#: layers' block back to 16, and ``unify_kv_cache_spec_page_size`` scales it up to the padded state page
HYBRID_MODEL_CONFIG_BLOCK = ReleaseRule(
    "vllm-hybrid-model-config-block",
    span(last="0.19.1", engine=VLLM),
    "a Mamba hybrid's block is the smallest multiple of 16 (MLA: 64) tokens whose page holds a state, and the "
    "attention layers keep the default block without --block-size (unify scales them to the state page)",
    "vllm/model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config; "
    "vllm/platforms/interface.py Platform.update_block_size_for_backend",
    topic="sizing",
)
#: ``HybridAttentionMambaModelConfig``'s ``kernel_block_alignment_size``: FlashAttention's 16, the MLA backends' 64
HYBRID_MODEL_CONFIG_ALIGNMENT = 16
HYBRID_MODEL_CONFIG_MLA_ALIGNMENT = 64
#: vLLM 0.17.1 has no ``update_block_size_for_backend``: without ``--block-size`` the attention layers keep the block
#: ``HybridAttentionMambaModelConfig.verify_and_update_config`` sets (``block_size is None`` -> the aligned block),
#: so one attention page holds a state and nothing is padded; from 0.18.1 the executor sets them back to 16
HYBRID_BLOCK_KEPT = ReleaseRule(
    "vllm-hybrid-block-kept",
    span(last="0.17.1", engine=VLLM),
    "without --block-size a Mamba hybrid's attention layers keep the hybrid block (no update_block_size_for_backend "
    "sets them back to the default 16)",
    "vllm/model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config (0.17.1: "
    "block_size None -> attn_block_size); vllm/platforms/interface.py (0.18.1: update_block_size_for_backend)",
    topic="sizing",
)
#: vLLM 0.17.1 aligns a hybrid's block of 256-wide heads on SM 10.x to 32 tokens (FlashInfer takes no 16-token block
#: at head size 256 on Blackwell: flashinfer-ai/flashinfer#1993); 0.18.1 drops the case
HYBRID_BLACKWELL_HEAD_256 = ReleaseRule(
    "vllm-hybrid-blackwell-head-256-alignment",
    span(last="0.17.1", engine=VLLM),
    "a Mamba hybrid whose attention heads are 256 wide aligns its block to 32 tokens on SM 10.x (else 16)",
    "vllm/model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config "
    "(kernel_block_alignment_size = 32)",
    topic="sizing",
)
HYBRID_BLACKWELL_HEAD_256_ALIGNMENT = 32


@dataclass(frozen=True)
class VLLMKVCachePlan:
    """Everything a vLLM plan answers, for the stage ``pp_rank`` of the deployment."""

    launch: VLLMLaunch
    backends: tuple[str, ...]
    block_size: int
    layer_specs: tuple[tuple[tuple[int, ...], KVCacheSpec], ...]
    groups: tuple[KVCacheGroup, ...]
    stage_groups: tuple[KVCacheGroup, ...]
    bytes_per_block: int
    capacity: Capacity
    tensors: tuple[KVCacheTensor | SharedKVCacheTensor, ...]
    padding_layers: int = 0
    #: ``vllm/v1/attention/backends/utils.py get_supported_kv_cache_layouts``: the backend's first layout
    #: (``None`` where the release resolves none: :data:`~.backends.KV_CACHE_LAYOUTS`)
    kv_cache_layout: str | None = "LBNHC"

    @property
    def num_gpu_blocks(self) -> int:
        return self.capacity.num_blocks

    @property
    def cell_size_bytes(self) -> float:
        """Bytes per token of one block across this stage's layers: ``bytes_per_block / block_size``."""
        return self.bytes_per_block / self.block_size


class VLLMStrategy(Strategy):
    """The shared vLLM sizing; subclasses say which models they take."""

    family: ClassVar[str] = "vllm"
    engine: ClassVar[str] = VLLM
    vllm_builder: ClassVar[str] = "vllm/v1/core/kv_cache_planning.py get_kv_cache_configs"

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        return is_vllm(ctx) and cls.takes(ctx.geometry)

    @classmethod
    def takes(cls, geometry: ModelGeometry) -> bool:
        raise NotImplementedError

    # ---- the vLLM answer -------------------------------------------------------------------
    def vllm_plan(self, available_bytes: int) -> VLLMKVCachePlan:
        """vLLM's sizing of the deployment with ``--kv-cache-memory-bytes available_bytes``."""
        return self._plan(available_bytes)

    def _plan(self, available: int) -> VLLMKVCachePlan:
        ctx, geometry = self.ctx, self.ctx.geometry
        version = ctx.release.text
        deployment = vllm_deployment(ctx, available)
        check_model_type(geometry.model_type, ctx.release)
        check_draft_model(geometry, deployment.draft, ctx.release)
        check_draft_pipeline(deployment.draft, deployment.pipeline_parallel_size, ctx.release)
        check_eagle3_target(geometry, deployment.draft, ctx.release)
        check_kv_cache_dtype(deployment.kv_cache_dtype, geometry, version)
        _check_model(geometry, deployment.tensor_parallel_size, deployment.max_model_len, version)
        _check_builds(geometry, version)
        check_decode_context_parallel(geometry, deployment, version)
        draft, parts = deployment.draft, deployment.pp_layer_partition
        if parts is not None and draft is not None and draft.method == "draft_model":
            # the draft model's make_layers splits its own layers by the same VLLM_PP_LAYER_PARTITION
            check_layer_partition(parts, deployment.pipeline_parallel_size, draft.num_layers, version)
        launch = resolve_model_launch(deployment, geometry, version)
        check_draft_slots(launch, ctx.release)
        sparse = geometry.dsa is not None
        dcp = deployment.decode_context_parallel_size > 1
        kv_dtype = kv_storage_dtype(launch.kv_cache_dtype, geometry.model_dtype, sparse)
        layer_dtype = layer_kv_dtype(geometry, launch.kv_cache_dtype, ctx.release)
        if layer_dtype != launch.kv_cache_dtype:
            kv_dtype = kv_storage_dtype(layer_dtype, geometry.model_dtype, sparse)
        # an MLA block fixed with the config (MLA_CONFIG_BLOCK: vLLM 0.17.1) stands for the given one
        given = mla_config_block(geometry, launch.gpu, deployment.block_size, ctx.release) or deployment.block_size
        if is_diffkv(geometry, ctx.release):
            backend = diffkv_backend(launch.gpu, layer_dtype, ctx.release, given)
        elif geometry.dsa is not None:
            backend = sparse_mla_backend(
                launch.gpu,
                layer_dtype,
                ctx.release,
                given,
                geometry.num_attention_heads // deployment.tensor_parallel_size,
                dcp=dcp,
            )
        else:
            backend = attention_backend(geometry, launch.gpu, layer_dtype, ctx.release, given, dcp=dcp)
        block = given or backend.preferred_block_size
        specs = self._layer_specs(launch, backend, kv_dtype, block, layer_dtype)
        head = None
        if deployment.draft is not None and deployment.draft.is_head and not deployment.draft.latent:
            # a Llama head: the cache dtype as configured, the cache's block (a Mamba hybrid's aligned one)
            head_block = next((s.block_size for s in specs.values() if type(s) is FullAttentionSpec), block)
            head = head_layer_spec(deployment.draft, deployment.tensor_parallel_size,
                                   kv_storage_dtype(launch.kv_cache_dtype, geometry.model_dtype), head_block,
                                   attention_kv_quant_mode(launch.kv_cache_dtype, ctx.release))  # fmt: skip
        drafts = draft_layer_specs(geometry, specs, deployment.draft, head, deployment.pipeline_parallel_size,
                                   ctx.release)  # fmt: skip
        head_names: tuple[str, ...] = ()
        if head is not None:  # the head's layers list their own backend after the target's (a Llama attention)
            head_names = (head_backend(head.head_size, geometry.model_dtype, launch.gpu, launch.kv_cache_dtype,
                                       ctx.release, head.block_size).name,)  # fmt: skip
        specs.update(drafts)
        groups = kv_cache_groups(specs, disable_hybrid=launch.disable_hybrid_kv_cache_manager,
                                 promote_to_full_block=PROMOTED_TAKE_FULL_BLOCK.holds(ctx.release), version=version)
        # the smallest block of the groups, as ``EngineCore._initialize_kv_caches`` sets ``cache_config.block_size``
        # (a Mamba group's too: without prefix caching its block is max_model_len, which may be the smaller)
        block = min((g.spec.block_size for g in groups), default=block)
        limits = CacheLimits(launch.max_model_len, launch.max_in_flight_tokens, launch.mamba_cache_mode,
                             deployment.decode_context_parallel_size)
        pp = deployment.pipeline_parallel_size
        n = geometry.num_hidden_layers
        # the draft's layers are the last stage's (the model runners build the drafter on the last PP rank only)
        last = frozenset(drafts)
        projected = PP_PROJECTED_GROUPS.holds(ctx.release)
        parts = deployment.pp_layer_partition
        _check_stages_hold_attention(specs, [self._stage_layers(*pp_indices(n, s, pp, parts)) for s in range(pp)])
        stages = [project(groups, self._with_drafts(self._stage_layers(*pp_indices(n, s, pp, parts)), last,
                                                    s == pp - 1),
                          whole_specs=not projected) for s in range(pp)]  # fmt: skip
        if not MEMORY_CHECK_FROM_GROUPS.holds(ctx.release):  # 0.13.0: each worker's own layer specs, ungrouped
            for s in range(pp):
                held = self._with_drafts(self._stage_layers(*pp_indices(n, s, pp, parts)), last, s == pp - 1)
                check_layer_specs_memory([spec for layer, spec in specs.items() if layer in held], available, limits,
                                         version)  # fmt: skip
        else:
            for checked in stages if projected else [tuple(groups)]:  # before 0.17.1 the global groups, once
                check_enough_memory(checked, available, limits, version)
        counts = []
        for stage in stages:
            per_block = bytes_per_block(stage)
            counts.append(available // per_block if per_block else 1)
        num_blocks = min(counts)
        mine = stages[deployment.pp_rank]
        start, end = pp_indices(geometry.num_hidden_layers, deployment.pp_rank, pp, parts)
        stage_layers = self._with_drafts(self._stage_layers(start, end), last, deployment.pp_rank == pp - 1)
        stage_specs = {k: v for k, v in specs.items() if k in stage_layers}
        return VLLMKVCachePlan(
            launch=launch,
            backends=tuple(dict.fromkeys(self._backends(specs, backend) + head_names)),
            block_size=block,
            kv_cache_layout=backend.layout if KV_CACHE_LAYOUTS.holds(ctx.release) else None,
            layer_specs=_distinct(stage_specs, version),
            groups=tuple(groups),
            stage_groups=mine,
            bytes_per_block=bytes_per_block(mine),
            capacity=Capacity(num_blocks, blocks_per_request(mine, limits), launch.max_model_len),
            tensors=stage_tensors(mine, num_blocks if STAGE_TENSORS_AT_MIN_BLOCKS.holds(ctx.release)
                                  else counts[deployment.pp_rank], ctx.release),
            padding_layers=padding_layers(list(groups)),
        )

    def _layer_specs(
        self, launch: VLLMLaunch, backend: BackendChoice, kv_dtype: DType, block: int, cache_dtype: str
    ) -> dict[int, Any]:
        geometry, tp = self.ctx.geometry, launch.deployment.tensor_parallel_size
        specs = dict(attention_specs(geometry, tp, kv_dtype, block, cache_dtype, self._sliding_block(backend),
                                     self.ctx.release))
        for layer, spec in specs.items():  # a flat sparse cache's row alignment (0.31.0)
            if isinstance(spec, SparseMLALayerSpec):
                alignment = flat_sparse_alignment(backend.name, spec.latent, self.ctx.release)
                specs[layer] = replace(spec, latent=replace(spec.latent, block_stride_alignment=alignment))
        return dict(sorted(specs.items()))

    def _sliding_block(self, backend: BackendChoice) -> int | None:
        """The sliding-window layers' own block (:data:`SLIDING_OWN_BLOCK`), else ``None``: the primary block."""
        return backend.kernel_block if SLIDING_OWN_BLOCK.holds(self.ctx.release) else None

    def _backends(self, specs: dict[int, KVCacheSpec], backend: BackendChoice) -> tuple[str, ...]:
        if self.ctx.geometry.dsa is not None:  # the indexer's backend, then the sparse-MLA one
            return (INDEXER_BACKEND[0], backend.name)
        return (backend.name,)

    @staticmethod
    def _with_drafts(layers: Collection[int], drafts: frozenset[int], last_stage: bool) -> Collection[int]:
        """A stage's layers, the draft's too on the last stage."""
        return frozenset(layers) | drafts if last_stage else layers

    def _stage_layers(self, start: int, end: int) -> Collection[int]:
        """The spec keys of the decoder layers ``[start, end)`` (one key per layer here)."""
        return range(start, end)

    # ---- what a plan reports, read from the vLLM answer -------------------------------------
    def sizes(self, planned: VLLMKVCachePlan) -> PoolSizes:
        """``max_total_num_tokens``: vLLM's "GPU KV cache size"; ``max_running_requests``: ``max_num_seqs``."""
        return PoolSizes(max_total_num_tokens=planned.capacity.tokens,
                         max_running_requests=planned.launch.max_num_seqs)  # fmt: skip

    def refuse_max_tokens(self) -> None:
        """A token cap: SGLang's ``--max-total-tokens`` has no vLLM counterpart."""
        raise UnsupportedConfigurationError(
            "max_tokens: SGLang's --max-total-tokens has no vLLM counterpart (vLLM caps blocks with "
            "--num-gpu-blocks-override)"
        )

    def layout(self, planned: VLLMKVCachePlan) -> KVPoolsLayout:
        """The ``kv_cache_tensors`` as the int8 buffers vLLM allocates; the block tables are not charged."""
        buffers = tuple(
            BufferSpec(f"kv_cache_tensor[{i}]", (t.size,), DType.INT8, BufferRole.KV)
            for i, t in enumerate(planned.tensors)
        )
        return KVPoolsLayout(
            req_to_token=PoolLayout("vLLM block tables (not charged to the KV budget)", ()),
            token_to_kv=PoolLayout("vLLM KVCacheTensors", buffers, (("num_gpu_blocks", planned.num_gpu_blocks),)),
        )


def _distinct(specs: dict[int, KVCacheSpec], version: str = "") -> tuple[tuple[tuple[int, ...], KVCacheSpec], ...]:
    """The distinct layer specs in vLLM's order (:func:`.grouping.spec_entries`; a DeepSeek-V4 layer's caches in
    its own order), with their layers (a sparse-MLA layer's two caches apart); specs whose documents are equal are
    one entry, as the bridge lists vLLM's (a field no document records, e.g. ``max_tp_shards``, splits none)."""
    if any(isinstance(whole, dsv4_caches.DSV4LayerSpec) for whole in specs.values()):
        ordered = [(layer, part) for layer, whole in specs.items()
                   for part in (whole.parts if isinstance(whole, dsv4_caches.DSV4LayerSpec) else (whole,))]
    else:
        ordered = spec_entries(specs, version)
    entries: list[tuple[list[int], KVCacheSpec]] = []
    for layer, spec in ordered:
        for layers, known in entries:
            if known == spec or known.document() == spec.document():
                layers.append(layer)
                break
        else:
            entries.append(([layer], spec))
    return tuple((tuple(layers), spec) for layers, spec in entries)


#: vLLM 0.18.1 pins transformers below 5: a config of a model type that transformers 4.x registers no class for,
#: and that 0.18.1's own registry does not list either (``VLLMModelRule.transformers_4_refuses``), is refused when
#: ``ModelConfig`` reads it (the checkpoints' remote code aside); from 0.19.1 transformers 5 reads each of these,
#: or vLLM falls back to the generic config
TRANSFORMERS_4_CONFIGS = ReleaseRule(
    "vllm-transformers-4-configs",
    span(last="0.18.1", engine=VLLM),
    "transformers 4 (the release's pin) registers no config class for NemotronH, MiniMax-M2/M3, MiMo-V2, GLM-5, "
    "DeepSeek-V4, Gemma-4 or Muse-Glimmer, nor does vLLM's own registry: ModelConfig refuses the config",
    "vllm/transformers_utils/config.py _CONFIG_REGISTRY, get_config (transformers AutoConfig)",
    topic="launch",
)


#: the model types vLLM's own ``_CONFIG_REGISTRY`` reads from a release on (``VLLMModelRule.vllm_registry_from``),
#: and that release, one rule per release for the listings; before it a release pinning transformers 4 refuses the
#: config (vLLM 0.17.1 lists no ``kimi_k2``, which 0.18.1 reads as ``DeepseekV3Config``)
CONFIG_REGISTRY_FROM = model_rule_releases("vllm_registry_from")
CONFIG_REGISTRY_RULES = per_release_rules(
    CONFIG_REGISTRY_FROM, "vllm-config-registry",
    "vLLM's own config registry reads the config (before it, transformers 4 registers no class for it and "
    "ModelConfig refuses it)", "vllm/transformers_utils/config.py _CONFIG_REGISTRY (0.18.1: kimi_k2=DeepseekV3Config), "
    "get_config", topic="launch",
)  # fmt: skip


#: the model types whose model class vLLM builds from a release on (``VLLMModelRule.vllm_builds_from``), one rule per
#: release; before it vLLM fails while building the model (0.12.0's Kimi-Linear:
#: ``vllm/model_executor/models/kimi_linear.py`` builds ``MLAModules`` without its ``indexer_rotary_emb``)
MODEL_BUILDS_FROM = model_rule_releases("vllm_builds_from")
MODEL_BUILDS_RULES = per_release_rules(
    MODEL_BUILDS_FROM, "vllm-model-builds",
    "vLLM's model class builds the model (before it, building it fails)",
    "vllm/model_executor/models/kimi_linear.py KimiMLAAttention (0.12.0: MLAModules without indexer_rotary_emb)",
    topic="launch",
)  # fmt: skip


def check_model_type(model_type: str, release: EngineRelease) -> None:
    """vLLM's refusal of a config its transformers cannot read (:data:`TRANSFORMERS_4_CONFIGS`; a model type vLLM's
    own registry reads only from a later release: :data:`CONFIG_REGISTRY_FROM`), the first check of a launch
    (``EngineArgs.create_model_config``)."""
    first = CONFIG_REGISTRY_FROM.get(model_type)
    unread = vllm_model_rule(model_type).transformers_4_refuses or (first is not None and release < first)
    if unread and TRANSFORMERS_4_CONFIGS.holds(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: 1 validation error for ModelConfig Value error, The checkpoint you are "
            f"trying to load has model type `{model_type}` but Transformers does not recognize this architecture "
            "(vllm/transformers_utils/config.py get_config; transformers 4 registers no config class for it)"
        )


def _check_builds(geometry: ModelGeometry, version: str) -> None:
    """vLLM's failure while building a model its release cannot build (:data:`MODEL_BUILDS_FROM`)."""
    first = MODEL_BUILDS_FROM.get(geometry.model_type)
    if first is not None and version and parse_release(version, VLLM, field="--vllm-version") < first:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: {vllm_model_rule(geometry.model_type).vllm_build_error} (its model class "
            f"fails while the model is built; vLLM {first.text} builds it)"
        )


def _check_model(geometry: ModelGeometry, tp: int, max_model_len: int | None, version: str) -> None:
    """vLLM's launch checks that refuse a model/layout before sizing (``config/vllm.py``, ``config/model.py``)."""
    heads = geometry.num_attention_heads
    if heads % tp:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: Total number of attention heads ({heads}) must be divisible by tensor "
            f"parallel size ({tp}) (vllm/config/model.py ModelConfig.verify_with_parallel_config)"
        )
    if max_model_len is not None and max_model_len > geometry.context_len:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: User-specified max_model_len ({max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={geometry.context_len} or model_max_length=None in model's "
            "config.json) (vllm/config/model.py _get_and_verify_max_len; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 allows it)"
        )


class VLLMAttentionStrategy(VLLMStrategy):
    """Full attention, MLA and sliding-window layers (one group, or hybrid groups with padding)."""

    family: ClassVar[str] = "vllm-attention"

    @classmethod
    def takes(cls, geometry: ModelGeometry) -> bool:
        return geometry.mamba is None and _unmodelled(geometry) is None


class VLLMMambaHybridStrategy(VLLMStrategy):
    """Mamba2 / GDN / KDA / Mamba-1 hybrids: states and KV blocks in one pool, the block aligned to a state."""

    family: ClassVar[str] = "vllm-mamba-hybrid"

    @classmethod
    def takes(cls, geometry: ModelGeometry) -> bool:
        return geometry.mamba is not None and _unmodelled(geometry) is None

    def _layer_specs(
        self, launch: VLLMLaunch, backend: BackendChoice, kv_dtype: DType, block: int, cache_dtype: str
    ) -> dict[int, Any]:
        """``_align_hybrid_block_size``: the smallest block (a multiple of the kernel alignment) whose
        attention page holds one Mamba state; the state page is padded to that attention page."""
        geometry, tp = self.ctx.geometry, launch.deployment.tensor_parallel_size
        mode = launch.mamba_cache_mode
        lookahead = launch.deployment.draft.num_speculative_tokens if launch.deployment.draft is not None else 0
        state = mamba_state(geometry, tp, self.ctx.release, lookahead)
        state_bytes = sum(math.prod(s) * d.itemsize for s, d in zip(state.shapes, state.dtypes, strict=True))
        if geometry.mla is not None:  # one latent row a token (MLAAttentionSpec)
            per_token = geometry.mla.latent_dim * kv_dtype.itemsize
        else:
            per_token = geometry.num_kv_heads(tp) * (geometry.head_dim + geometry.v_head_dim) * kv_dtype.itemsize
        # KDA layers (KimiGatedDeltaNetAttention) export no prefill checkpoints
        assert geometry.mamba is not None
        checkpoint = None if geometry.mamba.is_kda else _checkpoint_alignment(state.backend, mode, self.ctx.release)
        if HYBRID_MODEL_CONFIG_BLOCK.holds(self.ctx.release):
            return self._model_config_specs(launch, kv_dtype, cache_dtype, state_bytes, per_token)
        kernel = max(backend.kernel_block, block)
        if geometry.use_mla and MLA_HYBRID_ALIGNMENT.holds(self.ctx.release):  # the MLA decode kernels' 128
            kernel = max(kernel, MLA_HYBRID_BLOCK_ALIGNMENT)
        if mode == "align":
            kernel = math.lcm(kernel, checkpoint or 1)
        sizing_bytes = self._config_state_bytes(tp, lookahead, state_bytes)
        aligned = kernel * ceil_div(sizing_bytes, kernel * per_token)
        aligned = backend.kernel_block * ceil_div(aligned, backend.kernel_block)
        block = max(block, aligned)
        page = block * per_token
        padded = page if page != sizing_bytes else None
        if page < state_bytes:  # HYBRID_CONFIG_STATE_LOOKAHEAD: padded below the layer's own state
            if padded is None:
                raise UnsupportedConfigurationError(
                    f"speculative decoding: the {geometry.model_type} state with the lookahead ({state_bytes:,} B) "
                    f"exceeds the attention page ({page:,} B) in vLLM {self.ctx.release.text}, which is not modelled; "
                    f"plan it for vLLM {HYBRID_CONFIG_STATE_LOOKAHEAD.span.describe()}"
                )
            raise UnsupportedConfigurationError(
                f"vLLM {self.ctx.release.text} refuses: AssertionError (MambaSpec.page_size_bytes: "
                f"page_size_padded {page:,} B < the state's {state_bytes:,} B: {geometry.model_type}'s config-level "
                f"Mamba state, which sizes the block and the padding, leaves out the {lookahead} speculative tokens "
                f"its layers' conv states hold; vLLM {HYBRID_CONFIG_STATE_LOOKAHEAD.span.describe()} sizes them "
                "with it); plan fewer speculative tokens, a larger --block-size, or a later vLLM"
            )
        # the state's own block: the attention block when aligned, else a whole request (max_model_len)
        state_block = block if mode == "align" else launch.max_model_len
        alignment = checkpoint if checkpoint is None or checkpoint == 1 else math.lcm(checkpoint, block)
        specs = dict(attention_specs(geometry, tp, kv_dtype, block, cache_dtype, self._sliding_block(backend),
                                     self.ctx.release))
        offset = self._state_offset()
        states = state_specs(geometry, tp, state_block, mode, padded, alignment, self.ctx.release, lookahead)
        specs.update({k + offset: v for k, v in states.items()})
        return dict(sorted(specs.items()))

    def _config_state_bytes(self, tp: int, lookahead: int, state_bytes: int) -> int:
        """The state the block and padding are sized from: the layer's own (``state_bytes``), or, before
        :data:`HYBRID_CONFIG_STATE_LOOKAHEAD` for a class whose config-level state leaves out the lookahead, the
        state without it."""
        geometry, release = self.ctx.geometry, self.ctx.release
        if (not lookahead or HYBRID_CONFIG_STATE_LOOKAHEAD.holds(release)
                or not vllm_model_rule(geometry.model_type).config_state_without_lookahead):  # fmt: skip
            return state_bytes
        state = mamba_state(geometry, tp, release, 0)
        return sum(math.prod(s) * d.itemsize for s, d in zip(state.shapes, state.dtypes, strict=True))

    def _model_config_specs(
        self, launch: VLLMLaunch, kv_dtype: DType, cache_dtype: str, state_bytes: int, per_token: int
    ) -> dict[int, Any]:
        """:data:`HYBRID_MODEL_CONFIG_BLOCK`: ``block = a x cdiv(state, a x per_token)`` tokens (``a`` 16, MLA 64),
        or ``--block-size`` where larger; the state page padded to ``block x per_token`` bytes; the attention
        layers' own block the default 16 when no ``--block-size`` was given."""
        geometry, tp, release = self.ctx.geometry, launch.deployment.tensor_parallel_size, self.ctx.release
        given = launch.deployment.block_size
        alignment = HYBRID_MODEL_CONFIG_MLA_ALIGNMENT if geometry.use_mla else HYBRID_MODEL_CONFIG_ALIGNMENT
        if (not geometry.use_mla and geometry.head_dim == 256 and launch.gpu.capability[0] == 10
                and HYBRID_BLACKWELL_HEAD_256.holds(release)):  # fmt: skip
            alignment = HYBRID_BLACKWELL_HEAD_256_ALIGNMENT
        default = DEFAULT_BLOCK_SIZE.at(release)
        block = max(given or default, alignment * ceil_div(state_bytes, alignment * per_token))
        block = mla_config_block(geometry, launch.gpu, block, release) or block  # after the hybrid's (0.17.1)
        page = block * per_token
        state_block = block if launch.mamba_cache_mode == "align" else launch.max_model_len
        kept = given or HYBRID_BLOCK_KEPT.holds(release)
        specs = dict(attention_specs(geometry, tp, kv_dtype, block if kept else default, cache_dtype, None, release))
        states = state_specs(geometry, tp, state_block, launch.mamba_cache_mode, page if page != state_bytes else None,
                             None, self.ctx.release)
        offset = self._state_offset()
        specs.update({k + offset: v for k, v in states.items()})
        return dict(sorted(specs.items()))

    def _state_offset(self) -> int:
        """Where a parallel hybrid's Mamba mixers are numbered: Falcon-H1 builds attention and Mamba in
        every layer, and vLLM numbers the mixer of layer ``i`` as ``i + num_hidden_layers``
        (``vllm/model_executor/models/falcon_h1.py FalconH1ParallelHybrid.__init__``: ``ssm_layer_idx``);
        0 otherwise."""
        mamba = self.ctx.geometry.mamba
        assert mamba is not None
        parallel = set(mamba.full_attention_layer_ids) & set(mamba.mamba_layer_ids)
        return self.ctx.geometry.num_hidden_layers if parallel else 0

    def _stage_layers(self, start: int, end: int) -> Collection[int]:
        """A parallel hybrid's stage holds both specs of its layers (the mixers' keys offset)."""
        offset = self._state_offset()
        return frozenset(range(start, end)) | frozenset(range(start + offset, end + offset))

    def _backends(self, specs: dict[int, KVCacheSpec], backend: BackendChoice) -> tuple[str, ...]:
        """The backends in layer order (vLLM lists each the first time a layer uses it)."""
        state = mamba_state(self.ctx.geometry, 1).backend
        names: list[str] = []
        for layer in sorted(specs):
            name = state if isinstance(specs[layer], MambaSpec) else backend.name
            if name not in names:
                names.append(name)
        return tuple(names)


#: GDN layers take prefill checkpoints on their kernels' chunk from vLLM 0.33.0 on
#: (``vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py get_prefill_checkpoint_alignment``), and
#: ``Platform._align_hybrid_block_size`` aligns the block to it (``get_mamba_prefill_checkpoint_alignment``);
#: 0.32.0's GDN layers declare none (Qwen3-Next / Qwen3.5 blocks 1,056 instead of 1,088 tokens)
GDN_PREFILL_CHECKPOINTS = ReleaseRule(
    "vllm-gdn-prefill-checkpoints",
    span("0.33.0", engine=VLLM),
    "GDN layers take prefill checkpoints every 64 tokens with prefix caching (align mode); the hybrid block is "
    "aligned to them and each request holds one checkpoint block",
    "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py get_prefill_checkpoint_alignment; "
    "vllm/platforms/interface.py Platform._align_hybrid_block_size",
)


#: Mamba2 layers declare one prefill checkpoint block, at any token, from vLLM 0.32.0 on; 0.31.0's declare none
#: (Nemotron-H: two blocks a request instead of three)
MAMBA2_PREFILL_CHECKPOINTS = ReleaseRule(
    "vllm-mamba2-prefill-checkpoints",
    span("0.32.0", engine=VLLM),
    "Mamba2 layers hold one prefill checkpoint block per request (alignment 1 token)",
    "vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2.get_kv_cache_spec",
)


def _checkpoint_alignment(backend: str, mode: str, release: EngineRelease) -> int | None:
    """The Mamba layers' prefill checkpoint alignment (``get_prefill_checkpoint_alignment``): GDN its
    kernels' chunk with prefix caching ("align", :data:`GDN_PREFILL_CHECKPOINTS`), Mamba2 one token
    (:data:`MAMBA2_PREFILL_CHECKPOINTS`), Mamba-1 none."""
    if backend == "GDN_ATTN":
        return GDN_CHECKPOINT_ALIGNMENT if mode == "align" and GDN_PREFILL_CHECKPOINTS.holds(release) else None
    return 1 if backend == "MAMBA2_ATTN" and MAMBA2_PREFILL_CHECKPOINTS.holds(release) else None


#: from vLLM 0.27.1 DeepSeek-V4's caches are the ones :mod:`.dsv4` builds (0.26.0 and older: other state pages)
DSV4_PACKED = ReleaseRule(
    "vllm-dsv4-packed-caches",
    span("0.27.1", engine=VLLM),
    "DeepSeek-V4's sliding, compressed, indexer and compressor-state caches packed in one allocation strided by "
    "the widest group's page (before: other pages, not modelled)",
    "vllm/models/deepseek_v4/attention.py; vllm/v1/core/kv_cache_utils.py _get_kv_cache_config_packed",
    topic="sizing",
)
#: from vLLM 0.29.0 the generic packer groups DeepSeek-V4's caches in order of first appearance and lays each
#: group's caches out by page size (BLHNC); 0.28.0 puts the MLA group first and shares a tensor per offset
DSV4_GENERIC_PACKING = ReleaseRule(
    "vllm-dsv4-generic-packing",
    span("0.29.0", engine=VLLM),
    "DeepSeek-V4's groups in order of first appearance, each group's caches by page size in one tensor per "
    "section (before: the MLA group first, one tensor per in-block offset)",
    "vllm/v1/core/kv_cache_planning.py _get_packed_kv_cache_groups; 0.28.0: kv_cache_utils.py "
    "_get_kv_cache_groups_uniform_groups, _get_kv_cache_config_packed",
    topic="sizing",
)
#: from vLLM 0.30.0 ``--kv-cache-dtype auto`` resolves to DeepSeek-V4's fp8_ds_mla layout; 0.29.0 refuses it
DSV4_AUTO_KV = ReleaseRule(
    "vllm-dsv4-auto-kv-dtype",
    span("0.30.0", engine=VLLM),
    "DeepSeek-V4 takes --kv-cache-dtype auto as fp8 (its fp8_ds_mla layout; before: refused as bfloat16)",
    "vllm/models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype",
    topic="sizing",
)
#: DeepSeek-V4's block without ``--block-size`` (its backends' preferred block, as vLLM 0.34.0 records it)
DSV4_DEFAULT_BLOCK = 256


class VLLMDeepSeekV4Strategy(VLLMStrategy):
    """DeepSeek-V4: five kinds of caches a layer (:mod:`.dsv4`), packed block-outermost (``BLHNC``): a block ID
    addresses one page of every group at a stride of the widest group's page."""

    family: ClassVar[str] = "vllm-dsv4"

    @classmethod
    def takes(cls, geometry: ModelGeometry) -> bool:
        return geometry.dsv4 is not None

    def _plan(self, available: int) -> VLLMKVCachePlan:
        ctx, geometry = self.ctx, self.ctx.geometry
        version = ctx.release.text
        deployment = vllm_deployment(ctx, available)
        check_model_type(geometry.model_type, ctx.release)
        check_kv_cache_dtype(deployment.kv_cache_dtype, geometry, version)
        if not DSV4_PACKED.holds(ctx.release):
            raise UnsupportedConfigurationError(
                f"vLLM {version}: DeepSeek-V4's caches are laid out otherwise before vLLM 0.27.1; the vLLM "
                "strategies do not model it (kvstrategies verify --against vllm runs vLLM's own sizing)"
            )
        draft = deployment.draft
        if draft is not None and draft.is_head:
            raise UnsupportedConfigurationError(
                "speculative_config: a separate draft (an EAGLE head or a draft model) beside DeepSeek-V4 is not "
                "modelled with vLLM (its MTP layer is); "
                "plan it with the model's MTP layers or without --speculative-config"
            )
        _check_model(geometry, deployment.tensor_parallel_size, deployment.max_model_len, version)
        launch = resolve_model_launch(deployment, geometry, version)
        dsv4_caches.check_kv_cache_dtype(launch.kv_cache_dtype, version, DSV4_AUTO_KV.holds(ctx.release))
        if deployment.tensor_parallel_size * deployment.pipeline_parallel_size == 1:
            # one GPU: the model is built in the engine's own process (UniProcExecutor), whose CacheConfig
            # _resolve_dsv4_kv_cache_dtype rewrites to the layout's name
            launch = replace(launch, kv_cache_dtype="fp8_ds_mla")
        block = deployment.block_size or DSV4_DEFAULT_BLOCK
        dsv4_caches.check_block_size(block)
        drafts = draft.num_layers if draft is not None else 0
        specs = dsv4_caches.layer_specs(geometry, block, launch.gpu.capability,
                                        v_zero=MLA_HEAD_SIZE_V_ZERO.holds(ctx.release), draft_layers=drafts)
        generic = DSV4_GENERIC_PACKING.holds(ctx.release)
        entries = dsv4_caches.entries(specs)
        groups = dsv4_caches.packed_groups(entries) if generic else dsv4_caches.layer_tuple_groups(entries)
        limits = CacheLimits(launch.max_model_len, launch.max_in_flight_tokens, launch.mamba_cache_mode,
                             deployment.decode_context_parallel_size)
        pp, n = deployment.pipeline_parallel_size, geometry.num_hidden_layers
        # the MTP layers are the last stage's (the model runners build the drafter on the last PP rank only)
        last = frozenset(range(n, n + drafts))
        parts = deployment.pp_layer_partition
        stages = [project(groups, self._with_drafts(range(*pp_indices(n, s, pp, parts)), last, s == pp - 1))
                  for s in range(pp)]  # fmt: skip
        counts = []
        for stage in stages:
            check_enough_memory(stage, available, limits, version)
            counts.append(available // bytes_per_block(stage))
        num_blocks = min(counts)
        mine = stages[deployment.pp_rank]
        layers = self._with_drafts(range(*pp_indices(n, deployment.pp_rank, pp, parts)), last,
                                   deployment.pp_rank == pp - 1)  # fmt: skip
        return VLLMKVCachePlan(
            launch=launch,
            backends=dsv4_caches.backends(specs),
            block_size=min(g.spec.block_size for g in groups),
            kv_cache_layout=dsv4_caches.LAYOUT if KV_CACHE_LAYOUTS.holds(ctx.release) else None,
            layer_specs=_distinct({k: v for k, v in specs.items() if k in layers}),
            groups=tuple(groups),
            stage_groups=mine,
            bytes_per_block=bytes_per_block(mine),
            capacity=Capacity(num_blocks, blocks_per_request(mine, limits), launch.max_model_len),
            tensors=(dsv4_caches.block_outermost_tensors(mine, num_blocks) if generic
                     else dsv4_caches.offset_tensors(mine, num_blocks)),
        )


def _unmodelled(geometry: ModelGeometry) -> str | None:
    """Why vLLM's layout of this model is not modelled (None: it is)."""
    dsa = geometry.dsa
    if dsa is not None and (dsa.indexer_types is not None or dsa.cli_factor > 1 or geometry.mamba is not None):
        return ("DeepSeek sparse attention with per-layer indexer types, a shared-top-k factor or Mamba layers: "
                "vLLM's indexer layout for them is not modelled")  # fmt: skip
    if geometry.minimax_sparse is not None:
        return "MiniMax sparse attention: vLLM's sparse layers carry their own cache specs"
    swa = geometry.hybrid_swa
    if swa is not None and geometry.config_sliding_window is None and not geometry.model_type.startswith("llama4"):
        return "a hybrid sliding-window model without a config sliding_window"
    return None


class VLLMUnmodelledStrategy(VLLMStrategy):
    """Refuses the families whose vLLM layout the strategies do not model, naming that layout."""

    family: ClassVar[str] = "vllm-unmodelled"

    @classmethod
    def takes(cls, geometry: ModelGeometry) -> bool:
        return _unmodelled(geometry) is not None

    def _plan(self, available: int) -> VLLMKVCachePlan:
        deployment = vllm_deployment(self.ctx, available)  # the deployment's own refusals first
        check_model_type(self.ctx.geometry.model_type, self.ctx.release)
        check_kv_cache_dtype(deployment.kv_cache_dtype, self.ctx.geometry, self.ctx.release.text)
        raise UnsupportedConfigurationError(
            f"vLLM {self.ctx.release.text}: {_unmodelled(self.ctx.geometry)}; the vLLM strategies do not model "
            "it yet (kvstrategies verify --against vllm runs vLLM's own sizing)"
        )


VLLM_STRATEGIES: tuple[type[VLLMStrategy], ...] = (
    VLLMDeepSeekV4Strategy,
    VLLMUnmodelledStrategy,
    VLLMMambaHybridStrategy,
    VLLMAttentionStrategy,
)


def _check_stages_hold_attention(specs: dict[int, KVCacheSpec], stages: list[Collection[int]]) -> None:
    """Refuse a Mamba hybrid's pipeline stage that holds state layers and no attention layer: there vLLM finds no
    attention backend, so it keeps the cache block unaligned for that worker's state pages
    (``vllm/platforms/interface.py Platform.update_block_size_for_backend`` returns before
    ``_align_hybrid_block_size``), which these strategies do not model."""
    for rank, layers in enumerate(stages):
        kinds = [isinstance(specs[k], MambaSpec) for k in layers if k in specs]
        if kinds and all(kinds):
            raise UnsupportedConfigurationError(
                f"pipeline stage {rank} holds state layers and no attention layer: vLLM keeps that worker's block "
                "unaligned (Platform.update_block_size_for_backend finds no attention backend), which the vLLM "
                "strategies do not model; give a layer partition whose every stage holds an attention layer"
            )


def check_decode_context_parallel(geometry: ModelGeometry, deployment: VLLMDeployment, version: str) -> None:
    """``--decode-context-parallel-size`` D > 1: vLLM's own launch check for GQA / MQA (``vllm/config/model.py
    ModelConfig.verify_with_parallel_config``: TP must exceed the KV heads), and what the strategies model: the MLA
    latent's token positions spread over D ranks (a sparse model's indexer too), no sliding-window or state layer."""
    dcp, tp = deployment.decode_context_parallel_size, deployment.tensor_parallel_size
    if dcp == 1:
        return
    if not geometry.use_mla:
        heads = geometry.total_num_kv_heads
        if tp <= heads:
            raise UnsupportedConfigurationError(
                f"vLLM {version} refuses: Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` "
                f"({tp}) to be greater than the model's total number of KV heads ({heads}). Increase "
                "`--tensor-parallel-size` or set `--decode-context-parallel-size 1`. (vllm/config/model.py "
                "ModelConfig.verify_with_parallel_config)"
            )
        raise UnsupportedConfigurationError(
            f"--decode-context-parallel-size {dcp} with GQA / MQA attention (TP {tp} over {heads} KV heads): the "
            "vLLM strategies model decode context parallelism for MLA models only; plan it without, or for SGLang"
        )
    if geometry.mamba is not None or geometry.hybrid_swa is not None or geometry.config_sliding_window is not None:
        raise UnsupportedConfigurationError(
            f"--decode-context-parallel-size {dcp} beside sliding-window or state layers: vLLM does not spread "
            "those over the DCP ranks, which the vLLM strategies do not model; plan it without"
        )
