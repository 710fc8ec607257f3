"""From the KV budget to vLLM's blocks, tensors, capacity and concurrency (``vllm/v1/core/kv_cache_planning.py``).

Per pipeline stage (every TP rank of a stage holds the same layers):

* the groups projected to the stage (``_project_kv_cache_groups_to_worker``: a group keeps only
  the stage's layers, and stays when it has none);
* ``bytes_per_block`` = the widest projected group's ``layers x page`` (``_get_kv_cache_bytes_per_block``,
  layer-outermost layouts): every group's blocks come from one pool, so a padded group still
  takes a whole block slot per layer;
* one block is vLLM's null block: a request at ``max_model_len`` must fit in the budget minus one
  block, ``bytes_per_block x sum(blocks_per_request) <= budget - bytes_per_block``, or vLLM refuses
  (``_check_enough_kv_cache_memory``) naming the longest length that fits;
* ``num_blocks = budget // bytes_per_block``, then the smallest over the stages for all of them
  (``get_kv_cache_configs``); each projected group with layers gets one ``KVCacheTensor`` of
  ``num_blocks x bytes_per_block`` bytes (groups alias from byte 0; a layer's region is
  ``num_blocks`` pages, one page a block).

Capacity (``v1/core/kv_cache_utils.py get_kv_cache_capacity``): ``concurrency = num_blocks /
sum over groups of blocks_per_request`` and "GPU KV cache size" ``= int(concurrency x max_model_len)``.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, replace

from ...core.releases import VLLM, ByRelease, EngineRelease, ReleaseRule, parse_release, span
from ...core.sizing import ceil_div
from ...errors import InsufficientMemoryError
from .document import capacity_log_line
from .grouping import KVCacheGroup
from .specs import CacheLimits, KVCacheSpec, UniformTypeKVCacheSpecs

_GIB = 2**30


@dataclass(frozen=True)
class KVCacheTensor:
    """One backing allocation: ``size`` bytes for ``layers``, layer ``l`` at ``offset + l x layer_stride``."""

    size: int
    layers: tuple[int, ...]
    layer_stride: int
    block_stride: int
    offset: int = 0

    def document(self) -> dict[str, object]:
        return {"size": self.size, "layers": list(self.layers), "layer_stride": self.layer_stride,
                "block_stride": self.block_stride, "offset": self.offset}  # fmt: skip


@dataclass(frozen=True)
class SharedKVCacheTensor:
    """vLLM 0.28.0's form (:data:`SHARED_TENSORS`): ``size`` bytes shared by one layer of each group
    (``shared_by``), each group addressing its own blocks of it; its offset and block stride are 0 and
    recorded from 0.24.0 (:data:`TENSOR_OFFSET_FIELDS`)."""

    size: int
    shared_by: tuple[int, ...]
    offset_fields: bool = True
    #: where the layers' pages start in a block, and the block's bytes (0.28.0's DeepSeek-V4 packing; else 0)
    offset: int = 0
    block_stride: int = 0

    def document(self) -> dict[str, object]:
        document: dict[str, object] = {"size": self.size, "shared_by": list(self.shared_by)}
        if self.offset_fields:
            document |= {"offset": self.offset, "block_stride": self.block_stride}
        return document


#: up to vLLM 0.28.0 every layer position has its own tensor of ``num_blocks`` pages, shared by that
#: position's layer of each group; from 0.29.0 one backing allocation holds a group's layers at a layer stride
SHARED_TENSORS = ReleaseRule(
    "vllm-shared-kv-cache-tensors",
    span(last="0.28.0", engine=VLLM),
    "one KV cache tensor of num_blocks pages per layer position, shared by the groups' layers at that position "
    "(KVCacheTensor.shared_by, no layer or block stride)",
    "vllm/v1/core/kv_cache_utils.py get_kv_cache_config_from_groups",
    topic="sizing",
)


#: vLLM 0.24.0 gave ``KVCacheTensor`` an ``offset`` and a ``block_stride`` (0 for a shared tensor); 0.23.0's
#: tensor has its size and ``shared_by`` only. It moves no byte: the documents show the fields or not
TENSOR_OFFSET_FIELDS = ReleaseRule(
    "vllm-kv-cache-tensor-offset",
    span("0.24.0", engine=VLLM),
    "a KV cache tensor records an offset and a block stride (0.23.0: its size and shared_by only)",
    "vllm/v1/kv_cache_interface.py KVCacheTensor",
    topic="sizing",
)


#: from vLLM 0.30.0 a sparse-attention layer that computes its own top-k holds a latent spec of its own
#: (``MLAAttentionSpec.is_index_group_leader``), so a packed buffer has one section per bucket of layers holding
#: the same caches; 0.29.0 (the first packed release) has one section per spec: every latent, then every indexer
LEADER_LATENT_SPEC = ReleaseRule(
    "vllm-dsa-leader-latent-spec",
    span("0.30.0", engine=VLLM),
    "a sparse-attention layer that computes its own top-k has a latent spec of its own: the packed buffer's "
    "sections follow the layers holding the same caches (0.29.0: one latent section, then the indexer's)",
    "vllm/v1/kv_cache_interface.py MLAAttentionSpec.is_index_group_leader; vllm/v1/core/kv_cache_utils.py "
    "get_kv_cache_config_from_groups (layers_by_spec)",
    topic="sizing",
)


#: the module that sizes the KV cache from the groups, which vLLM's refusals name: split out of
#: ``kv_cache_utils.py`` in vLLM 0.33.0
PLANNING_MODULE: ByRelease[str] = ByRelease(
    "vllm-kv-cache-planning-module",
    (("0.11.0", "vllm/v1/core/kv_cache_utils.py"), ("0.33.0", "vllm/v1/core/kv_cache_planning.py")),
    "the module of get_kv_cache_configs and _check_enough_kv_cache_memory",
    "vllm/v1/core/kv_cache_planning.py (0.33.0); vllm/v1/core/kv_cache_utils.py before",
    topic="sizing",
    engine=VLLM,
)


def planning_module(version: str) -> str:
    """:data:`PLANNING_MODULE` of ``version`` (the newest when empty)."""
    release = parse_release(version or None, VLLM, field="--vllm-version")
    return PLANNING_MODULE.at(release)


#: the word vLLM's "one request fits" refusal names the model with: 0.21.0 writes "models's"
REFUSAL_MODEL_WORD: ByRelease[str] = ByRelease(
    "vllm-memory-refusal-wording",
    (("0.11.0", "models's"), ("0.22.1", "model's")),
    "the word the refusal of a budget below one request at max_model_len names the model with",
    "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory",
    topic="sizing",
    engine=VLLM,
)


#: from vLLM 0.29.0 the memory check holds back the null block the block pool keeps (one block of every
#: layer) before asking whether a request at ``max_model_len`` fits; 0.28.0 checks the whole budget
NULL_BLOCK_RESERVED = ReleaseRule(
    "vllm-null-block-reserved",
    span("0.29.0", engine=VLLM),
    "the check that one request at max_model_len fits holds back the null block (budget - bytes_per_block)",
    "vllm/v1/core/kv_cache_utils.py get_kv_cache_configs (_check_enough_kv_cache_memory)",
    topic="sizing",
)


#: vLLM 0.18.1's memory check (``_max_memory_usage_bytes_from_groups``) counts the blocks one request at
#: ``max_model_len`` takes in the first group only, times the widest group's layers; from 0.19.1 it sums the blocks
#: of every group (a sliding-window or Mamba group then adds its own). A model with one group is checked alike
FIRST_GROUP_MEMORY_CHECK = ReleaseRule(
    "vllm-memory-check-first-group",
    span(last="0.18.1", engine=VLLM),
    "the check that one request at max_model_len fits counts the first group's blocks only, times the widest "
    "group's layers (later releases sum every group's): a hybrid whose first group slides passes below a full request",
    "vllm/v1/core/kv_cache_utils.py _max_memory_usage_bytes_from_groups (0.18.1: any_spec = kv_cache_groups[0])",
    topic="sizing",
)


@dataclass(frozen=True)
class StageSizing:
    """One stage's projected groups, bytes per block and tensors (at the deployment's block count)."""

    groups: tuple[KVCacheGroup, ...]
    bytes_per_block: int
    tensors: tuple[KVCacheTensor, ...]


#: from vLLM 0.17.1 a pipeline stage sizes its blocks by its own layers' caches (``get_kv_cache_configs`` with
#: ``_project_kv_cache_groups_to_worker``: a uniform-type group keeps the worker's entries, and the one-request check
#: reads each worker's groups); 0.16.0 hands every worker the global group spec, so a stage's uniform-type block
#: holds every stage's caches (its tensors the stage's layers only), and it checks one request against the global
#: groups
PP_PROJECTED_GROUPS = ReleaseRule(
    "vllm-pp-projected-groups",
    span("0.17.1", engine=VLLM),
    "each pipeline stage sizes its blocks by its own layers (a uniform-type group keeps the stage's entries, the "
    "one-request check reads each stage's groups); before, a stage's uniform-type block holds every stage's caches",
    "vllm/v1/core/kv_cache_utils.py get_kv_cache_configs, _project_kv_cache_groups_to_worker (0.17.1)",
    topic="sizing",
)


def project(groups: list[KVCacheGroup], layers: Container[int], whole_specs: bool = False) -> tuple[KVCacheGroup, ...]:
    """The groups with the stage's layers only (a uniform-type group's spec keeps the stage's entries; a group
    with none of them keeps its whole spec, as ``_project_kv_cache_groups_to_worker`` does, and holds no bytes);
    ``whole_specs``: every group keeps its whole spec (before :data:`PP_PROJECTED_GROUPS`), but for entries vLLM
    merges as one full-attention spec (:attr:`UniformTypeKVCacheSpecs.merges_as_full_attention`: one layer's page)."""
    out = []
    for g in groups:
        mine = tuple(i for i in g.layers if i in layers)
        spec = g.spec
        if isinstance(spec, UniformTypeKVCacheSpecs) and mine and (not whole_specs or spec.merges_as_full_attention):
            spec = spec.restricted(layers)
        out.append(KVCacheGroup(mine, spec))
    return tuple(out)


def _block_bytes(group: KVCacheGroup) -> int:
    """A group's bytes in one block: ``layers x page``, or a uniform-type group's page (all its entries,
    rounded up to their block stride alignment)."""
    if isinstance(group.spec, UniformTypeKVCacheSpecs):
        return group.spec.block_bytes if group.layers else 0
    return len(group.layers) * group.spec.page_size_bytes


def bytes_per_block(groups: tuple[KVCacheGroup, ...]) -> int:
    return max((_block_bytes(g) for g in groups), default=0)


def blocks_per_request(groups: tuple[KVCacheGroup, ...] | list[KVCacheGroup], limits: CacheLimits) -> int:
    return sum(g.spec.blocks_per_request(limits) for g in groups)


def _gib(value: int) -> str:
    """vLLM's ``format_gib``: ``round(bytes / GiB, 2)`` as Python prints it."""
    return f"{round(value / _GIB, 2)}"


def _checked_blocks(groups: tuple[KVCacheGroup, ...], limits: CacheLimits, first_only: bool) -> int:
    """The blocks the memory check counts for one request (:data:`FIRST_GROUP_MEMORY_CHECK`: the first group's)."""
    if first_only and groups and not isinstance(groups[0].spec, UniformTypeKVCacheSpecs):
        return groups[0].spec.blocks_per_request(limits)
    return blocks_per_request(groups, limits)


def check_enough_memory(groups: tuple[KVCacheGroup, ...], budget: int, limits: CacheLimits, version: str) -> None:
    """vLLM's refusal of a budget that cannot hold one request at ``max_model_len`` (null block reserved)."""
    per_block = bytes_per_block(groups)
    if not per_block:
        return
    release = parse_release(version, VLLM, field="--vllm-version") if version else None
    first_only = release is not None and FIRST_GROUP_MEMORY_CHECK.holds(release)
    null_block = NULL_BLOCK_RESERVED.holds(release) if release is not None else True
    available = budget - per_block if null_block else budget
    if available <= 0:
        raise InsufficientMemoryError(
            f"vLLM {version} refuses: No available memory for the cache blocks. Try increasing "
            f"`gpu_memory_utilization` ({planning_module(version)} _check_enough_kv_cache_memory)"
        )
    needed = per_block * _checked_blocks(groups, limits, first_only)
    if needed <= available:
        return
    low, high, best = 1, limits.max_model_len, 0
    while low <= high:
        mid = (low + high) // 2
        at_mid = replace(limits, max_model_len=mid)
        fits = per_block * _checked_blocks(groups, at_mid, first_only) <= available
        if fits:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    estimate = (f"Based on the available memory, the estimated maximum model length is {best}. "
                if best > 0 else "")  # fmt: skip
    model = REFUSAL_MODEL_WORD.at(parse_release(version, VLLM, field="--vllm-version")) if version else "model's"
    raise InsufficientMemoryError(
        f"vLLM {version} refuses: To serve at least one request with the {model} max seq len "
        f"({limits.max_model_len}), ({_gib(needed)} GiB KV cache is needed, which is larger than the available "
        f"KV cache memory ({_gib(available)} GiB). {estimate}Try increasing `gpu_memory_utilization` or "
        f"decreasing `max_model_len` ({planning_module(version)} _check_enough_kv_cache_memory)"
    )


#: from vLLM 0.14.1 the one-request check reads the KV cache groups (``_max_memory_usage_bytes_from_groups`` after
#: ``get_kv_cache_groups``); 0.13.0's ``get_kv_cache_configs`` checks each worker's own layer specs before any
#: grouping (``check_enough_kv_cache_memory``: the sum of their ``max_memory_usage_bytes``), so a chunked or sliding
#: layer counts its window even where the hybrid manager is off and the groups keep it as full attention
MEMORY_CHECK_FROM_GROUPS = ReleaseRule(
    "vllm-memory-check-from-groups",
    span("0.14.1", engine=VLLM),
    "the check that one request at max_model_len fits reads the KV cache groups (before: each worker's own layer "
    "specs, ungrouped, a local layer counting its window)",
    "vllm/v1/core/kv_cache_utils.py get_kv_cache_configs, check_enough_kv_cache_memory (0.13.0)",
    topic="sizing",
)


def check_layer_specs_memory(specs: list[KVCacheSpec], budget: int, limits: CacheLimits, version: str) -> None:
    """0.13.0's refusal of a worker whose layer specs cannot hold one request at ``max_model_len`` (before
    :data:`MEMORY_CHECK_FROM_GROUPS`): the specs' own ``max_memory_usage_bytes`` summed, against the budget."""
    if not specs:
        return
    if budget <= 0:
        raise InsufficientMemoryError(
            f"vLLM {version} refuses: No available memory for the cache blocks. Try increasing "
            f"`gpu_memory_utilization` ({planning_module(version)} check_enough_kv_cache_memory)"
        )

    def needed_at(tokens: int) -> int:
        at = replace(limits, max_model_len=tokens)
        return sum(spec.max_memory_usage_bytes(at) for spec in specs)

    needed = needed_at(limits.max_model_len)
    if needed <= budget:
        return
    low, high, best = 1, limits.max_model_len, 0
    while low <= high:
        mid = (low + high) // 2
        if needed_at(mid) <= budget:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    estimate = (f"Based on the available memory, the estimated maximum model length is {best}. "
                if best > 0 else "")  # fmt: skip
    raise InsufficientMemoryError(
        f"vLLM {version} refuses: To serve at least one request with the models's max seq len "
        f"({limits.max_model_len}), ({_gib(needed)} GiB KV cache is needed, which is larger than the available "
        f"KV cache memory ({_gib(budget)} GiB). {estimate}Try increasing `gpu_memory_utilization` or decreasing "
        f"`max_model_len` ({planning_module(version)} check_enough_kv_cache_memory)"
    )


#: from vLLM 0.12.0 each PP stage's tensors hold the smallest stage's ``num_blocks``; 0.11.0's ``get_kv_cache_configs``
#: lowers only ``num_blocks`` to the smallest and keeps each stage's tensors at its own blocks ("We do not need to
#: shrink the tensor size"), so a stage of fewer layers has larger tensors (Llama-3.1-70B PP 3, rank 2's 26 layers:
#: 1,651,900,416 B a layer against 0.12.0's 1,590,689,792, rank 0's 27 layers' blocks)
STAGE_TENSORS_AT_MIN_BLOCKS = ReleaseRule(
    "vllm-pp-tensors-at-min-blocks",
    span("0.12.0", engine=VLLM),
    "a PP stage's tensors are sized at the smallest stage's num_blocks (before: at the stage's own blocks; only "
    "num_blocks is the smallest)",
    "vllm/v1/core/kv_cache_utils.py get_kv_cache_configs (0.11.0: num_blocks lowered, tensors not shrunk)",
    topic="sizing",
)


def stage_tensors(
    groups: tuple[KVCacheGroup, ...], num_blocks: int, release: EngineRelease
) -> tuple[KVCacheTensor | SharedKVCacheTensor, ...]:
    """The stage's tensors in the release's form (:data:`SHARED_TENSORS`)."""
    if SHARED_TENSORS.holds(release):
        return shared_tensors(groups, num_blocks, offset_fields=TENSOR_OFFSET_FIELDS.holds(release))
    per_block = bytes_per_block(groups)
    uniform = [g.spec for g in groups if isinstance(g.spec, UniformTypeKVCacheSpecs) and g.layers]
    if uniform:
        return _packed_tensors(uniform[0], num_blocks, by_held_caches=LEADER_LATENT_SPEC.holds(release))
    return tuple(
        KVCacheTensor(per_block * num_blocks, g.layers, g.spec.page_size_bytes * num_blocks, g.spec.page_size_bytes)
        for g in groups
        if g.layers
    )


def shared_tensors(
    groups: tuple[KVCacheGroup, ...], num_blocks: int, *, offset_fields: bool = True
) -> tuple[SharedKVCacheTensor, ...]:
    """vLLM 0.28.0's ``get_kv_cache_config_from_groups``: a uniform-type group's layers one tensor each
    (``page x num_blocks``, the layer's own page); else one tensor of ``page x num_blocks`` per position
    ``i`` below the largest group's layer count, shared by the ``i``-th layer of each group that has one."""
    uniform = [g.spec for g in groups if isinstance(g.spec, UniformTypeKVCacheSpecs) and g.layers]
    if uniform:
        held = {layer for g in groups for layer in g.layers}  # the stage's (a whole spec lists every stage's)
        return tuple(SharedKVCacheTensor(part.page_size_bytes * num_blocks, (layer,), offset_fields)
                     for layer, part in uniform[0].entries if layer in held)  # fmt: skip
    width = max((len(g.layers) for g in groups), default=0)
    page = max((g.spec.page_size_bytes for g in groups if g.layers), default=0)
    return tuple(
        SharedKVCacheTensor(page * num_blocks, tuple(g.layers[i] for g in groups if i < len(g.layers)), offset_fields)
        for i in range(width)
    )


def _packed_tensors(
    spec: UniformTypeKVCacheSpecs, num_blocks: int, *, by_held_caches: bool = True
) -> tuple[KVCacheTensor, ...]:
    """A uniform-type group's one buffer of ``num_blocks x page`` bytes, cut into one section per
    distinct spec in order of first appearance, ``num_blocks`` pages a layer, back to back
    (``kv_cache_planning.py get_kv_cache_config_from_groups``: ``layers_by_spec``). From vLLM 0.30.0 a latent
    whose layer computes its own top-k is a spec of its own (:data:`LEADER_LATENT_SPEC`: three sections for
    DeepSeek-V3.2 with ``index_topk_freq`` 4), so ``by_held_caches`` the sections follow the layers that hold
    the same caches: indexer, then latent, per such bucket; 0.29.0 has one latent section, then the indexer's."""
    by_layer: dict[int, list[KVCacheSpec]] = {}
    for layer, entry in spec.entries:
        by_layer.setdefault(layer, []).append(entry)
    buckets: dict[tuple[KVCacheSpec, ...], list[int]] = {}
    if by_held_caches:
        for layer, held in by_layer.items():
            buckets.setdefault(tuple(held), []).append(layer)
    else:
        for layer, entry in spec.entries:
            buckets.setdefault((entry,), []).append(layer)
    size, offset, out = num_blocks * spec.block_bytes, 0, []
    for caches, layers in buckets.items():
        for part in caches:
            stride = num_blocks * part.page_size_bytes
            out.append(KVCacheTensor(size, tuple(layers), stride, part.page_size_bytes, offset))
            offset += stride * len(layers)
    return tuple(out)


@dataclass(frozen=True)
class Capacity:
    """``num_blocks`` and what vLLM logs for it."""

    num_blocks: int
    blocks_per_request: int
    max_model_len: int

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request

    @property
    def tokens(self) -> int:
        """"GPU KV cache size": ``int(concurrency x max_model_len)``."""
        return int(self.max_concurrency * self.max_model_len)

    @property
    def log_line(self) -> str:
        return capacity_log_line(self.tokens, self.max_model_len, self.max_concurrency)


def ceil_pages(bytes_: int, page: int) -> int:
    return ceil_div(bytes_, page)
