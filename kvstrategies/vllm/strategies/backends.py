"""The attention backend vLLM picks per GPU family, and the block size it leads to.

vLLM walks a priority list per compute capability (``vllm/platforms/cuda.py
_get_backend_priorities``) and takes the first backend whose ``validate_configuration`` accepts
the layer (``CudaPlatformBase.get_attn_backend_cls`` / ``get_valid_backends``); with no
``--block-size`` the block size is that backend's preferred one
(``vllm/platforms/interface.py Platform.update_block_size_for_backend`` ->
``vllm/v1/attention/backend.py AttentionBackend.get_preferred_block_size``: 16 when the backend's
``get_supported_kernel_block_sizes`` takes it, else the smallest size it lists). Both answers are
read from vLLM's own classes per GPU family: ``backend_tables/v<release>.py``, written by
``tools/list_vllm_backends.py`` through the bridge's stated platform (every compute capability of
``kvstrategies gpus``). Here the model's attention profile (MLA or not, model dtype, head size, KV
cache dtype, sinks, sliding window, multimodal prefix) picks a row; a ``--block-size`` skips the
backends whose kernel blocks do not divide it, as ``validate_configuration`` does.

Examples (vLLM 0.33.0): MLA on B200 / B300 is ``FLASHINFER_MLA``, kernel blocks 32 and 64, so the
block is 32; on H100 / H200 ``FLASH_ATTN_MLA`` (16) with a 16-bit cache and ``FLASHMLA`` (64) with
fp8; ``TRITON_MLA`` (16) on Ampere, Ada, SM 12.x and Turing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.dtypes import DType
from ...core.releases import NEWEST_VLLM, VLLM, ByRelease, EngineRelease, ReleaseRule, span
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import model_type_row, vllm_model_rule
from .backend_tables import TABLES
from .devices import VLLMDevice

#: every CUDA attention backend's kernel blocks are multiples of 16 tokens (FLASH_ATTN, TRITON_ATTN,
#: FLEX_ATTENTION and the MLA backends ``MultipleOf(16)`` or coarser, FLASHINFER 16 / 32 / 64:
#: ``get_supported_kernel_block_sizes`` in ``vllm/v1/attention/backends/``), so a ``--block-size``
#: that is not one leaves no valid backend (``vllm/platforms/cuda.py`` ``get_attn_backend_cls``)
KERNEL_BLOCK_MULTIPLE = 16


def check_block_size(block_size: int | None, version: str) -> None:
    """Refuse a ``--block-size`` no CUDA attention backend takes, as vLLM does."""
    if block_size is not None and block_size % KERNEL_BLOCK_MULTIPLE:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: No valid attention backend found for cuda with AttentionSelectorConfig(..., "
            f"block_size={block_size}, ...). Reasons: block_size not supported (every CUDA attention backend takes a "
            f"multiple of {KERNEL_BLOCK_MULTIPLE} "
            "tokens; vllm/platforms/cuda.py get_attn_backend_cls); give --block-size 16 or a multiple of it, or "
            "leave it to the backend"
        )


@dataclass(frozen=True)
class BackendChoice:
    """One backend: vLLM's name, its preferred block size, the smallest kernel block it accepts and
    the KV cache layout it puts first (``supported_kv_cache_layouts``; vLLM's default ``LBNHC`` when
    it declares none)."""

    name: str
    preferred_block_size: int = 16
    kernel_block: int = 16
    layout: str = "LBNHC"


#: from vLLM 0.29.0 the engine resolves one KV cache layout from what every layer's backend supports (the
#: plan's ``kv_cache_layout``); 0.28.0 resolves none (its backends declare no layouts)
KV_CACHE_LAYOUTS = ReleaseRule(
    "vllm-kv-cache-layouts",
    span("0.29.0", engine=VLLM),
    "the engine resolves one KV cache layout (LBNHC, BLNHC, ...) from the backends' supported layouts",
    "vllm/v1/engine/core.py EngineCore._initialize_kv_caches (resolve_kv_cache_layout)",
    topic="sizing",
)


#: the block size vLLM starts from without ``--block-size`` (``vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE``);
#: a backend keeps it when its kernels take it, else its smallest kernel block
#: (``AttentionBackend.get_preferred_block_size``)
DEFAULT_BLOCK_SIZE: ByRelease[int] = ByRelease(
    "vllm-default-block-size",
    (("0.11.0", 16), ("0.34.0", 64)),
    "CacheConfig.DEFAULT_BLOCK_SIZE, the block a backend keeps when its kernels take it",
    "vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE; vllm/v1/attention/backend.py "
    "AttentionBackend.get_preferred_block_size",
    topic="sizing",
    engine=VLLM,
)


#: vLLM 0.17.1 fixes an MLA model's block with its config, before any backend is chosen and whatever
#: ``--block-size`` says (``vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config``): the block starts at
#: the given one or 16; on SM 10.x a dense model with ``qk_nope_head_dim`` 128 takes FLASHINFER_MLA (the backend is
#: set: a block of 32 or a multiple of 64, else 64), another dense one CUTLASS_MLA's multiple of 128 (else 128); on
#: Hopper FlashMLA's multiple of 64 (else 64); a sparse model (DeepSeek-V3.2) FLASHMLA_SPARSE's 64 exactly. From
#: 0.18.1 the block is the chosen backend's preferred one (``update_block_size_for_backend``), a given one kept
MLA_CONFIG_BLOCK = ReleaseRule(
    "vllm-mla-config-block",
    span(last="0.17.1", engine=VLLM),
    "an MLA model's block is fixed with the config, a given --block-size overridden: SM 10.x FLASHINFER_MLA 32 or a "
    "multiple of 64 (qk_nope 128; else CUTLASS_MLA's multiple of 128), Hopper a multiple of 64, sparse MLA 64",
    "vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config (0.17.1)",
    topic="sizing",
)
#: from vLLM 0.15.1 ``check_and_update_config`` sets FLASHINFER_MLA for a dense MLA model with ``qk_nope_head_dim``
#: 128 on SM 10.x; 0.14.1 sets CUTLASS_MLA for every dense MLA model there (a block of a multiple of 128, else 128)
MLA_BLACKWELL_FLASHINFER = ReleaseRule(
    "vllm-mla-blackwell-flashinfer",
    span("0.15.1", engine=VLLM),
    "on SM 10.x a dense MLA model with qk_nope_head_dim 128 is set to FLASHINFER_MLA (32 or a multiple of 64); "
    "before, every dense MLA model to CUTLASS_MLA (a multiple of 128)",
    "vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config (0.14.1: use_cutlass_mla on family 100)",
    topic="sizing",
)
#: from vLLM 0.12.0 ``check_and_update_config`` keeps a given MLA block that is a multiple of the one FlashMLA or
#: CUTLASS MLA needs; 0.11.0 sets that one whenever the block differs (``cache_config.block_size != 64``: 64;
#: ``!= 128``: 128), so DeepSeek-V3 with ``--block-size 128`` on H200 runs on 64
MLA_CONFIG_BLOCK_MULTIPLES = ReleaseRule(
    "vllm-mla-config-block-multiples",
    span("0.12.0", engine=VLLM),
    "a given MLA block that is a multiple of FlashMLA's 64 (CUTLASS MLA's 128) is kept (before: set to 64 / 128 "
    "whenever it differs)",
    "vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config (0.11.0: block_size != 64 -> 64)",
    topic="sizing",
)
#: the blocks :data:`MLA_CONFIG_BLOCK` forces: FlashMLA's and FlashInfer MLA's 64, CUTLASS MLA's 128, FlashInfer
#: MLA's other size 32
MLA_CONFIG_BLOCK_64, MLA_CONFIG_BLOCK_128, MLA_CONFIG_BLOCK_32 = 64, 128, 32
#: ``check_and_update_config``: on SM 10.x FLASHINFER_MLA is set for a dense model of this ``qk_nope_head_dim`` only
MLA_CONFIG_FLASHINFER_QK_NOPE = 128


def mla_config_block(geometry: ModelGeometry, gpu: VLLMDevice, block_size: int | None,
                     release: EngineRelease) -> int | None:  # fmt: skip
    """The block :data:`MLA_CONFIG_BLOCK` fixes (``None``: not an MLA model, or a release that does not)."""
    if not geometry.use_mla or geometry.mla is None or not MLA_CONFIG_BLOCK.holds(release):
        return None
    block = block_size or DEFAULT_BLOCK_SIZE.at(release)
    blackwell, hopper, sparse = gpu.capability[0] == 10, gpu.capability[0] == 9, geometry.dsa is not None
    blackwell = blackwell and (sparse or cutlass_mla_forced(gpu, release))  # 0.12.0: SM 10.0 only
    flashinfer = MLA_BLACKWELL_FLASHINFER.holds(release)
    if blackwell and not sparse and geometry.mla.qk_nope_head_dim == MLA_CONFIG_FLASHINFER_QK_NOPE and flashinfer:
        return block if block == MLA_CONFIG_BLOCK_32 or block % MLA_CONFIG_BLOCK_64 == 0 else MLA_CONFIG_BLOCK_64
    exact = not MLA_CONFIG_BLOCK_MULTIPLES.holds(release)  # 0.11.0: the backend's one block, whatever was given
    if blackwell and not sparse:
        return block if block % MLA_CONFIG_BLOCK_128 == 0 and not exact else MLA_CONFIG_BLOCK_128
    if hopper and (block % MLA_CONFIG_BLOCK_64 or exact):
        block = MLA_CONFIG_BLOCK_64
    return MLA_CONFIG_BLOCK_64 if sparse else block


def preferred_block_size(kernel_blocks: tuple[int, ...], release: EngineRelease) -> int:
    """``get_preferred_block_size(DEFAULT_BLOCK_SIZE)``: the default when a kernel block divides it, else the
    smallest kernel block (``-n``: a multiple of n, whose smallest is n)."""
    default = DEFAULT_BLOCK_SIZE.at(release)
    if not kernel_blocks or _accepts(kernel_blocks, default):
        return default
    return min(abs(size) for size in kernel_blocks)


#: the head sizes the tables record for softmax attention; another size answers as ``OTHER_HEAD_SIZE``
#: (FlashInfer takes only 64, 128 and 256; FlashAttention any multiple of 8 up to 256)
RECORDED_HEAD_SIZES = (64, 128, 256, 512)
OTHER_HEAD_SIZE = 80
#: the head sizes a release with :data:`SELECTOR_CHAIN` records besides: its FlashAttention takes 96 and not 80
#: (``vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend.get_supported_head_sizes``, 0.11.0), so 80 does
#: not answer for it (Phi-3-mini's 96: FLASH_ATTN on H200, where the 80 row says FLEX_ATTENTION)
CHAIN_HEAD_SIZES = (96,)
#: the MLA latent head size the tables record (``kv_lora_rank + qk_rope_head_dim``)
MLA_HEAD_SIZE = 576
#: ``vllm/v1/attention/backends/mla/flashinfer_mla.py FlashInferMLABackend.supports_combination``
FLASHINFER_MLA_QK_NOPE = (64, 128, 192)


#: from vLLM 0.25.1 Gemma-3's attention asks the selector for multimodal prefix attention (only Triton takes it);
#: 0.24.0's asks for none (``vllm/model_executor/models/gemma3_mm.py``)
MM_PREFIX_ATTENTION = ReleaseRule(
    "vllm-mm-prefix-attention",
    span("0.25.1", engine=VLLM),
    "a multimodal Gemma-3 asks for multimodal prefix attention (the selector then keeps Triton / FlexAttention)",
    "vllm/v1/attention/selector.py AttentionSelectorConfig.use_mm_prefix; vllm/model_executor/models/gemma3_mm.py",
    topic="sizing",
)
#: vLLM 0.19.1 asks for it too, by model type: ``ModelConfig.is_mm_prefix_lm`` lists gemma3 (with bagel, molmo2 and
#: paligemma) and ``Attention.__init__`` passes it to the selector; 0.20.2 to 0.24.0 ask for none
MM_PREFIX_LM_LIST = ReleaseRule(
    "vllm-mm-prefix-lm-list",
    span(last="0.19.1", engine=VLLM),
    "a multimodal Gemma-3 asks for multimodal prefix attention, by the model-type list of ModelConfig.is_mm_prefix_lm",
    "vllm/config/model.py ModelConfig.is_mm_prefix_lm; vllm/model_executor/layers/attention/attention.py "
    "Attention.__init__",
    topic="sizing",
)


#: from vLLM 0.15.1 the attention backends list ``bfloat16`` among their cache dtypes (``supported_kv_cache_dtypes``;
#: FLASH_ATTN's ``supports_kv_cache_dtype``); 0.14.1's take ``auto`` (and fp8) only, so ``--kv-cache-dtype bfloat16``
#: leaves no valid backend (``vllm/platforms/cuda.py CudaPlatformBase.get_attn_backend_cls``: "kv_cache_dtype not
#: supported"), on every GPU and for MLA and sparse MLA alike
BFLOAT16_CACHE_DTYPE = ReleaseRule(
    "vllm-bfloat16-cache-dtype",
    span("0.15.1", engine=VLLM),
    "the attention backends take --kv-cache-dtype bfloat16 (before: auto or fp8 only; bfloat16 leaves no valid "
    "backend)",
    "vllm/v1/attention/backend.py AttentionBackend.supported_kv_cache_dtypes, "
    "vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend.supports_kv_cache_dtype (0.15.1)",
    topic="launch",
)


#: from vLLM 0.13.0 ``check_and_update_config`` sets CUTLASS_MLA on the SM 10.x family for a dense MLA model only
#: (``attention_config.backend``); 0.12.0 sets it on SM 10.0 alone (``is_device_capability(100)``), sparse models
#: included (``VLLM_ATTENTION_BACKEND``), and CUTLASS_MLA refuses a sparse model ("sparse not supported")
CUTLASS_MLA_FAMILY = ReleaseRule(
    "vllm-cutlass-mla-sm10-family",
    span("0.13.0", engine=VLLM),
    "CUTLASS_MLA is set for dense MLA models on the SM 10.x family (before: on SM 10.0 only, sparse models included, "
    "which it refuses)",
    "vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config (0.12.0: is_device_capability(100))",
    topic="sizing",
)
#: from vLLM 0.13.0 the selector's refusal names an ``AttentionSelectorConfig(...)``; 0.12.0's lists the fields
#: (``No valid attention backend found for cuda with head_size: H, dtype: ...``)
SELECTOR_CONFIG_WORDING = ReleaseRule(
    "vllm-selector-config-wording",
    span("0.13.0", engine=VLLM),
    "the no-valid-backend refusal names an AttentionSelectorConfig (before: head_size: H, dtype: ... listed)",
    "vllm/platforms/cuda.py CudaPlatformBase.get_attn_backend_cls (0.12.0)",
    topic="launch",
)


#: from vLLM 0.12.0 the selector keeps the backends whose ``validate_configuration`` takes the layer (cache dtype
#: included) and picks by priority; 0.11.0's ``get_attn_backend_cls`` picks one backend by an if/else chain on the GPU,
#: the head size, the model dtype, sinks and an fp8 cache, and checks no other cache dtype: ``--kv-cache-dtype
#: bfloat16`` runs on the backend the chain picks (its table row holds that one backend)
SELECTOR_CHAIN = ReleaseRule(
    "vllm-selector-if-else-chain",
    span(last="0.11.0", engine=VLLM),
    "the selector picks one backend by an if/else chain and checks no cache dtype but fp8 (bfloat16 is taken); "
    "from 0.12.0 it validates each backend (bfloat16 refused until 0.15.1)",
    "vllm/platforms/cuda.py CudaPlatformBase.get_attn_backend_cls (0.11.0)",
    topic="launch",
)


def cutlass_mla_forced(gpu: VLLMDevice, release: EngineRelease, sparse: bool = False) -> bool:
    """Whether the config sets CUTLASS_MLA for an MLA model on ``gpu`` (:data:`CUTLASS_MLA_FAMILY`; 0.11.0's
    ``get_attn_backend_cls`` takes FlashMLA sparse for a sparse model before it reads the set backend:
    :data:`SELECTOR_CHAIN`)."""
    if sparse and SELECTOR_CHAIN.holds(release):
        return False
    if CUTLASS_MLA_FAMILY.holds(release):
        return gpu.capability[0] == 10 and not sparse
    return gpu.capability == (10, 0)


def check_cache_dtype_name(kv_cache_dtype: str, gpu: VLLMDevice, family: str, release: EngineRelease,
                           selector: str, dense_mla: bool = False) -> None:  # fmt: skip
    """Refuse ``bfloat16`` where no backend lists it (before :data:`BFLOAT16_CACHE_DTYPE`), as vLLM's selector does;
    a dense MLA model on SM 10.x names the backend its config set (before :data:`MLA_BLACKWELL_FLASHINFER`:
    CUTLASS_MLA, ``get_attn_backend_cls``' "Selected backend ... is not valid")."""
    if kv_cache_dtype != "bfloat16" or BFLOAT16_CACHE_DTYPE.holds(release) or SELECTOR_CHAIN.holds(release):
        return
    if dense_mla and cutlass_mla_forced(gpu, release) and not MLA_BLACKWELL_FLASHINFER.holds(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Selected backend AttentionBackendEnum.CUTLASS_MLA is not valid for this "
            "configuration. Reason: ['kv_cache_dtype not supported'] (vllm/platforms/cuda.py "
            "CudaPlatformBase.get_attn_backend_cls; the config set CUTLASS_MLA on SM 10.x): give --kv-cache-dtype auto"
        )
    raise _no_valid_backend(release, gpu, family, selector, "Reasons: kv_cache_dtype not supported (its backends take "
                            "auto, not bfloat16): give --kv-cache-dtype auto")


def _kv_key(kv_cache_dtype: str) -> str:
    """A cache dtype as the backend tables name it (the model-dtype names are ``auto``)."""
    names = {"fp8": "fp8_e4m3", "bfloat16": "auto", "float16": "auto", "bf16": "auto"}
    return names.get(kv_cache_dtype, kv_cache_dtype)


def profile_key(
    geometry: ModelGeometry, gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease | None = None,
    dcp: bool = False,
) -> str:
    """The table row of a model's softmax-attention layers on ``gpu`` (``tools/list_vllm_backends.py profile_key``;
    ``dcp``: an MLA latent under decode context parallelism, the selector's ``use_dcp``, flag ``d``)."""
    major, minor = gpu.capability
    dtype = geometry.model_dtype.torch_name
    kv = _kv_key(kv_cache_dtype)
    if geometry.use_mla:
        return f"{major}.{minor}|mla|{dtype}|{MLA_HEAD_SIZE}|{kv}|{'d' if dcp else '-'}"
    head = _head_row(geometry.head_dim, release)
    sink = model_type_row(geometry.model_type).attention_sinks
    sliding = geometry.config_sliding_window is not None or geometry.hybrid_swa is not None
    mm = vllm_model_rule(geometry.model_type).mm_prefix and geometry.is_multimodal
    asks = (MM_PREFIX_ATTENTION, MM_PREFIX_LM_LIST)
    mm = mm and any(rule.holds(release or NEWEST_VLLM) for rule in asks)
    flags = "".join(c for c, on in (("k", sink), ("w", sliding), ("m", mm)) if on) or "-"
    return f"{major}.{minor}|mha|{dtype}|{head}|{kv}|{flags}"


def _head_row(head_dim: int, release: EngineRelease | None) -> int:
    """The head size of a layer's table row: its own where recorded (:data:`RECORDED_HEAD_SIZES`; before
    :data:`SELECTOR_CHAIN` also :data:`CHAIN_HEAD_SIZES`), else :data:`OTHER_HEAD_SIZE`."""
    if head_dim in RECORDED_HEAD_SIZES:
        return head_dim
    if release is not None and SELECTOR_CHAIN.holds(release) and head_dim in CHAIN_HEAD_SIZES:
        return head_dim
    return OTHER_HEAD_SIZE


def _accepts(kernel_blocks: tuple[int, ...], block_size: int) -> bool:
    """``AttentionBackend.supports_block_size``: some kernel block (``-n``: a multiple of n) divides it."""
    return any(block_size % abs(size) == 0 for size in kernel_blocks)


def _recorded_choices(release: EngineRelease, key: str, what: str, fix: str) -> tuple[str, tuple[str, ...]]:
    """``(GPU family, valid backends best first)`` of a table row of ``release``, refused when not recorded."""
    valid = TABLES[release.text].selections.get(key)
    if valid is None:
        raise UnsupportedConfigurationError(f"vLLM {release.text}: no recorded {what} for {key} ({fix}")
    return key.split("|", 1)[0], valid


def _choice(name: str, family: str, release: EngineRelease) -> BackendChoice:
    """A recorded backend with the block it prefers, its smallest kernel block and its first layout."""
    kernel_blocks, _recorded, layouts = TABLES[release.text].backends[f"{family}|{name}"]
    return BackendChoice(name, preferred_block_size(kernel_blocks, release), min(abs(size) for size in kernel_blocks),
                         layouts[0] if layouts else "LBNHC")  # fmt: skip


def _takes_block(name: str, family: str, release: EngineRelease, block_size: int | None) -> bool:
    """``supports_block_size`` of a recorded backend: any block when none is given."""
    return block_size is None or _accepts(TABLES[release.text].backends[f"{family}|{name}"][0], block_size)


def _no_valid_backend(release: EngineRelease, gpu: VLLMDevice, family: str, selector: str, fix: str) -> Exception:
    """vLLM's refusal when no backend of the row takes the configuration (``get_attn_backend_cls``; before
    :data:`SELECTOR_CONFIG_WORDING` the fields are listed, ``head_size`` first)."""
    if not SELECTOR_CONFIG_WORDING.holds(release):
        fields = selector.replace("=", ": ")
        return UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: No valid attention backend found for cuda with {fields}, ... on "
            f"{gpu.name} (compute capability {family}; vllm/platforms/cuda.py CudaPlatformBase.get_attn_backend_cls); "
            f"{fix}"
        )
    return UnsupportedConfigurationError(
        f"vLLM {release.text} refuses: No valid attention backend found for cuda with AttentionSelectorConfig("
        f"{selector}, ...) on {gpu.name} (compute capability {family}; vllm/platforms/cuda.py "
        f"CudaPlatformBase.get_attn_backend_cls); {fix}"
    )


def attention_backend(
    geometry: ModelGeometry,
    gpu: VLLMDevice,
    kv_cache_dtype: str,
    release: EngineRelease,
    block_size: int | None = None,
    *,
    dcp: bool = False,
) -> BackendChoice:
    """The backend of the model's softmax-attention layers, as vLLM ``release`` picks it on ``gpu`` (``dcp``: among
    those that take decode context parallelism)."""
    nope = geometry.mla.qk_nope_head_dim if geometry.mla is not None else None
    key = profile_key(geometry, gpu, kv_cache_dtype, release, dcp)
    return _pick(key, gpu, kv_cache_dtype, release, block_size, nope, None if geometry.use_mla else geometry.head_dim)


def head_backend(
    head_dim: int, model_dtype: DType, gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease,
    block_size: int | None = None,
) -> BackendChoice:
    """The backend of a draft head's layers: plain attention of ``head_dim`` (no sink, window or prefix flags)."""
    major, minor = gpu.capability
    kv = _kv_key(kv_cache_dtype)
    head = _head_row(head_dim, release)
    key = f"{major}.{minor}|mha|{model_dtype.torch_name}|{head}|{kv}|-"
    return _pick(key, gpu, kv_cache_dtype, release, block_size, None, head_dim)


def _pick(
    key: str, gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease, block_size: int | None,
    qk_nope_head_dim: int | None, head_size: int | None = None,
) -> BackendChoice:
    """The first valid backend of table row ``key`` that takes the block (``qk_nope_head_dim``: an MLA model's;
    ``head_size``: the layers' own, which a refusal names, where the row's is a stand-in)."""
    head = head_size or key.split("|")[3]
    check_block_size(block_size, release.text)
    family, valid = _recorded_choices(release, key, "attention backend choice", "model dtype, KV cache dtype or GPU "
                                      "outside tools/list_vllm_backends.py's grid); plan it on a listed GPU with a "
                                      "bf16/fp16 model")  # fmt: skip
    check_cache_dtype_name(kv_cache_dtype, gpu, family, release, f"head_size={head}, kv_cache_dtype={kv_cache_dtype}",
                           dense_mla=qk_nope_head_dim is not None)
    for name in valid:
        if name == "FLASHINFER_MLA" and qk_nope_head_dim is not None and qk_nope_head_dim not in (
                FLASHINFER_MLA_QK_NOPE):  # fmt: skip
            continue  # FlashInferMLABackend.supports_combination: qk_nope_head_dim in [64, 128, 192]
        if not _takes_block(name, family, release, block_size):
            continue
        choice = _choice(name, family, release)
        _check_impl(choice, gpu, kv_cache_dtype, release)
        return choice
    given = "" if block_size is None else f", block_size={block_size}"
    raise _no_valid_backend(release, gpu, family, f"head_size={head}, kv_cache_dtype={kv_cache_dtype}{given}",
                            "give --block-size 16 or a multiple of it, or leave it to the backend"
                            if block_size is not None else "choose another --kv-cache-dtype or GPU")  # fmt: skip


#: an fp8 cache on MiMo-V2's DIFFKV layers, per release: vLLM 0.31.0 builds them without the cache
#: config (so at the model dtype: ``VLLMModelRule.cache_config_from``), 0.32.0 and 0.33.0 store one
#: byte, 0.34.0's ``FlashAttentionDiffKVImpl.__init__`` refuses it
DIFFKV_FP8: ByRelease[bool] = ByRelease(
    "vllm-diffkv-fp8",
    (("0.11.0", True), ("0.34.0", False)),
    "FLASH_ATTN_DIFFKV takes an fp8 KV cache (0.34.0 refuses it: Unsupported FP8 Diff-KV configuration)",
    "vllm/v1/attention/backends/flash_attn_diffkv.py FlashAttentionDiffKVImpl.__init__",
    topic="launch",
    engine=VLLM,
)


#: from vLLM 0.20.2 MiMo-V2 keeps V at its own width (``FLASH_ATTN_DIFFKV``, :func:`is_diffkv`); 0.19.1's
#: ``MiMoV2Attention.forward`` pads V with zeros to K's width and builds a plain ``Attention`` of one head size, so
#: a page holds ``2 x head_dim`` a head (``vllm/model_executor/models/mimo_v2_flash.py``)
DIFFKV_ATTENTION = ReleaseRule(
    "vllm-diffkv-attention",
    span("0.20.2", engine=VLLM),
    "a model whose V is narrower than K keeps V at its own width (FLASH_ATTN_DIFFKV); before, V is padded to K's "
    "width and the usual backends run it",
    "vllm/model_executor/models/mimo_v2_flash.py MiMoV2Attention.forward (0.19.1: v padded to head_dim)",
    topic="sizing",
)


#: the cache dtypes FLASH_ATTN_DIFFKV takes: FlashAttention's (``flash_attn.py
#: FlashAttentionBackend.supported_kv_cache_dtypes``, which ``FlashAttentionDiffKVBackend`` inherits)
DIFFKV_KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")


def is_diffkv(geometry: ModelGeometry, release: EngineRelease) -> bool:
    """A model whose attention asks for a DIFFKV backend (``VLLMModelRule.diffkv_backend``) and whose V is
    narrower than K (``vllm/model_executor/models/mimo_v2.py MiMoV2Attention.__init__``: ``v_head_dim != head_dim``),
    in a release that keeps V at its own width (:data:`DIFFKV_ATTENTION`)."""
    rule = vllm_model_rule(geometry.model_type)
    diffkv = rule.diffkv_backend and not geometry.use_mla and geometry.v_head_dim != geometry.head_dim
    return diffkv and DIFFKV_ATTENTION.holds(release)


def diffkv_backend(gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease,
                   block_size: int | None) -> BackendChoice:  # fmt: skip
    """``FLASH_ATTN_DIFFKV``, which ``MiMoV2Attention`` takes where FlashAttention 3 runs (Hopper,
    ``FlashAttentionDiffKVBackend.is_supported_on_current_device``); its kernels are
    FlashAttention's (``MultipleOf(16)``), so the block is the release's default. Elsewhere vLLM
    picks FA4 or ``TRITON_ATTN_DIFFKV`` by the FlashAttention build it finds, which is not modelled."""
    check_block_size(block_size, release.text)
    if gpu.capability != (9, 0):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text}: different K and V head sizes (MiMo-V2) on {gpu.name}: vLLM takes FLASH_ATTN_DIFFKV "
            "where FlashAttention 3 or 4 runs, else TRITON_ATTN_DIFFKV (vllm/model_executor/models/mimo_v2.py "
            "MiMoV2Attention.__init__); the vLLM strategies model it on Hopper (H100, H200, H20) only"
        )
    if kv_cache_dtype not in DIFFKV_KV_DTYPES:
        raise UnsupportedConfigurationError(
            f"vLLM {release.text}: FLASH_ATTN_DIFFKV takes kv_cache_dtype {' / '.join(DIFFKV_KV_DTYPES)}, not "
            f"{kv_cache_dtype!r} (vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend."
            "supported_kv_cache_dtypes); give one of those"
        )
    if kv_cache_dtype.startswith("fp8") and not DIFFKV_FP8.at(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Unsupported FP8 Diff-KV configuration; use an unquantized KV cache "
            "(vllm/v1/attention/backends/flash_attn_diffkv.py FlashAttentionDiffKVImpl.__init__); drop "
            "--kv-cache-dtype or give auto"
        )
    return BackendChoice("FLASH_ATTN_DIFFKV", preferred_block_size((-KERNEL_BLOCK_MULTIPLE,), release),
                         KERNEL_BLOCK_MULTIPLE)  # fmt: skip


#: the sparse-MLA backends whose pages the strategies model: a latent of ``kv_lora_rank + qk_rope_head_dim``
#: values at the cache dtype. FLASHMLA_SPARSE's ``fp8_ds_mla`` layout (656 bytes a token, what ``fp8`` takes on
#: Hopper) is not modelled, nor SM 12.x's backend; on SM 10.x vLLM puts FA4 first for a 16-bit cache at most 16
#: heads a rank (``_get_backend_priorities``), which the recorded tables cannot show (this host cannot import
#: FA4's CuTe DSL), so a 16-bit cache there is refused too
MODELLED_SPARSE_BACKENDS = ("FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90",
                            "FLASHINFER_MLA_SPARSE")  # fmt: skip
_SIXTEEN_BIT = ("auto", "bfloat16", "float16", "bf16")
#: FLASHMLA_SPARSE's own layout, modelled where the cache dtype names it (vLLM 0.17.1 resolves DeepSeek-V3.2's fp8
#: to it: ``vllm.strategies.launch.DSA_FP8_DS_MLA``)
FP8_DS_MLA_LAYOUT = "fp8_ds_mla"
#: from vLLM 0.12.0 FlashMLA's sparse backend names itself ``FLASHMLA_SPARSE``; 0.11.0's ``get_name`` answers
#: ``FLASHMLA_SPARSE_VLLM_V1`` (the same backend and pages: DeepSeek-V3.2 fp8 TP 8 on H200, 13,961 blocks in both)
SPARSE_BACKEND_NAME = ReleaseRule(
    "vllm-flashmla-sparse-name",
    span("0.12.0", engine=VLLM),
    "FlashMLA's sparse backend is named FLASHMLA_SPARSE (before: FLASHMLA_SPARSE_VLLM_V1)",
    "vllm/v1/attention/backends/mla/flashmla_sparse.py FlashMLASparseBackend.get_name (0.11.0)",
    topic="launch",
)
#: the backends' names before :data:`SPARSE_BACKEND_NAME` (the table of such a release lists them) -> today's
SPARSE_BACKEND_OLD_NAMES = {"FLASHMLA_SPARSE_VLLM_V1": "FLASHMLA_SPARSE"}
#: the indexer's own backend, listed first (``DeepseekV32IndexerBackend``: kernel blocks of 64 on CUDA)
INDEXER_BACKEND = ("DEEPSEEK_V32_INDEXER", 64)


#: from vLLM 0.34.0 FLASHMLA_SPARSE takes a 16-bit cache under decode context parallelism; 0.33.0's implementation
#: refuses it while the model is built
DCP_FLASHMLA_SPARSE_16_BIT = ReleaseRule(
    "vllm-dcp-flashmla-sparse-16-bit",
    span("0.34.0", engine=VLLM),
    "FLASHMLA_SPARSE takes a 16-bit cache under decode context parallelism (before: NotImplementedError at build)",
    "vllm/v1/attention/backends/mla/flashmla_sparse.py FlashMLASparseImpl.__init__",
)


def sparse_profile_key(gpu: VLLMDevice, kv_cache_dtype: str, heads_per_rank: int, dcp: bool = False) -> str:
    """The table row of a DeepSeek sparse-attention latent (``tools/list_vllm_backends.py sparse_profile_key``):
    the cache dtype as given (a 16-bit one as ``auto``), ``h`` when a rank holds at most 16 query heads, ``d`` under
    decode context parallelism."""
    major, minor = gpu.capability
    kv = "auto" if kv_cache_dtype in _SIXTEEN_BIT else kv_cache_dtype
    flags = "s" + ("h" if heads_per_rank <= 16 else "") + ("d" if dcp else "")
    return f"{major}.{minor}|mla|bfloat16|{MLA_HEAD_SIZE}|{kv}|{flags}"


def sparse_mla_backend(gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease, block_size: int | None,
                       heads_per_rank: int, *, dcp: bool = False) -> BackendChoice:  # fmt: skip
    """The sparse-MLA backend of a DeepSeek sparse-attention model: the first of the release's recorded valid
    backends (``vllm/platforms/cuda.py _get_backend_priorities``, the sparse tail after the dense MLA backends)
    whose kernels take the block; a block must suit the indexer's 64-token kernels too
    (:data:`MODELLED_SPARSE_BACKENDS` says which pages are modelled)."""
    check_block_size(block_size, release.text)
    if cutlass_mla_forced(gpu, release, sparse=True):  # 0.12.0 on SM 10.0: the config set CUTLASS_MLA
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: Selected backend AttentionBackendEnum.CUTLASS_MLA is not valid for this "
            "configuration. Reason: ['kv_cache_dtype not supported', 'sparse not supported'] (vllm/platforms/cuda.py "
            "CudaPlatformBase.check_and_update_config sets it on SM 10.0, sparse models included)"
        )
    sixteen_bit = kv_cache_dtype in _SIXTEEN_BIT
    if gpu.capability[0] == 10 and sixteen_bit:
        raise UnsupportedConfigurationError(
            f"vLLM {release.text}: DeepSeek sparse attention with a 16-bit cache on {gpu.name} (SM 10.x) goes to FA4 "
            "or FlashMLA by the heads a rank holds (vllm/platforms/cuda.py _get_backend_priorities), which the vLLM "
            "strategies do not model: give --kv-cache-dtype fp8_e4m3"
        )
    key = sparse_profile_key(gpu, kv_cache_dtype, heads_per_rank, dcp)
    family, valid = _recorded_choices(release, key, "sparse-MLA backend choice", "a cache dtype outside "
                                      "tools/list_vllm_backends.py's grid): give --kv-cache-dtype auto or fp8_e4m3")
    check_cache_dtype_name(kv_cache_dtype, gpu, family, release, f"head_size={MLA_HEAD_SIZE}, "
                           f"kv_cache_dtype={kv_cache_dtype}, use_mla=True, use_sparse=True")
    for name in valid:
        if not _takes_block(name, family, release, block_size):
            continue
        ds_mla = kv_cache_dtype == FP8_DS_MLA_LAYOUT  # the layout as such: its page is modelled (specs.py)
        kind = SPARSE_BACKEND_OLD_NAMES.get(name, name)
        if kind not in MODELLED_SPARSE_BACKENDS or (kind == "FLASHMLA_SPARSE" and not sixteen_bit and not ds_mla):
            raise UnsupportedConfigurationError(
                f"vLLM {release.text}: DeepSeek sparse attention with kv_cache_dtype {kv_cache_dtype!r} on {gpu.name} "
                f"takes {name}" + (" and its fp8_ds_mla layout (656 bytes a token)" if name == "FLASHMLA_SPARSE"
                                   else "") + ", which the vLLM strategies do not model (vllm/platforms/cuda.py "
                "_get_backend_priorities): give --kv-cache-dtype fp8_e4m3 or auto on a Hopper or SM 10.x GPU"
            )  # fmt: skip
        if dcp and kind == "FLASHMLA_SPARSE" and sixteen_bit and not DCP_FLASHMLA_SPARSE_16_BIT.holds(release):
            raise UnsupportedConfigurationError(
                f"vLLM {release.text} refused: NotImplementedError: DCP for FlashMLA sparse requires an fp8_ds_mla "
                "kv-cache; the bf16 sparse path is not supported under DCP. (vllm/v1/attention/backends/mla/"
                "flashmla_sparse.py FlashMLASparseImpl.__init__; vLLM 0.34.0 takes it)"
            )
        choice = _choice(name, family, release)
        if block_size is None and choice.preferred_block_size % INDEXER_BACKEND[1]:
            raise UnsupportedConfigurationError(
                f"vLLM {release.text}: DeepSeek sparse attention on {gpu.name} with {name} prefers "
                f"{choice.preferred_block_size}-token blocks, which the indexer's {INDEXER_BACKEND[1]}-token kernels "
                f"do not take; the vLLM strategies do not model the block vLLM settles on: give --block-size "
                f"{INDEXER_BACKEND[1]}"
            )
        return choice
    given = "" if block_size is None else f", block_size={block_size}"
    raise _no_valid_backend(release, gpu, family, f"head_size={MLA_HEAD_SIZE}, kv_cache_dtype={kv_cache_dtype}{given}, "
                            "use_mla=True, use_sparse=True" + (", use_dcp=True" if dcp else ""),
                            "choose another --kv-cache-dtype or GPU")


#: from vLLM 0.26.0 ``TritonMLAImpl.__init__`` refuses the cache dtypes the GPU's Triton cannot run; 0.25.1 builds them
TRITON_MLA_DTYPE_CHECK = ReleaseRule(
    "vllm-triton-mla-dtype-check",
    span("0.26.0", engine=VLLM),
    "Triton MLA refuses an fp8 cache below SM 8.9 and a bfloat16 one below SM 8.0 when its layers are built",
    "vllm/v1/attention/backends/mla/triton_mla.py TritonMLAImpl.__init__",
    topic="launch",
)


#: vLLM 0.11.0's implementations refuse a cache dtype other than ``auto`` (``is_quantized_kv_cache``: anything but
#: ``auto``, ``bfloat16`` included) when its layers are built, where its selector did not check it
#: (:data:`SELECTOR_CHAIN`): Triton MLA always, FlexAttention always, FlashAttention off FlashAttention 3 on Hopper
#: (``flash_attn_supports_fp8``); from 0.12.0 the selector's ``validate_configuration`` keeps such a backend out
IMPL_QUANTIZED_CACHE_REFUSALS = ReleaseRule(
    "vllm-impl-quantized-cache-refusals",
    span(last="0.11.0", engine=VLLM),
    "Triton MLA, FlexAttention and (off Hopper) FlashAttention refuse a non-auto cache dtype while their layers are "
    "built (from 0.12.0 the selector validates the cache dtype per backend)",
    "vllm/v1/attention/backends/mla/triton_mla.py TritonMLAImpl.__init__, flex_attention.py "
    "FlexAttentionImpl.__init__, flash_attn.py FlashAttentionImpl.__init__ (0.11.0)",
    topic="launch",
)
#: the backends :data:`IMPL_QUANTIZED_CACHE_REFUSALS` covers and vLLM's words (FlashAttention's: off Hopper only)
QUANTIZED_CACHE_REFUSALS: dict[str, str] = {
    "TRITON_MLA": "NotImplementedError: TritonMLA V1 with FP8 KV cache not yet supported",
    "FLEX_ATTENTION": "NotImplementedError: FlexAttention does not support quantized kv-cache. Yet",
    "FLASH_ATTN": "NotImplementedError: FlashAttention does not support fp8 kv-cache on this device.",
}


def _check_quantized_cache(choice: BackendChoice, gpu: VLLMDevice, kv_cache_dtype: str,
                           release: EngineRelease) -> None:  # fmt: skip
    """:data:`IMPL_QUANTIZED_CACHE_REFUSALS`: the implementation's refusal of a non-auto cache dtype."""
    words = QUANTIZED_CACHE_REFUSALS.get(choice.name)
    if kv_cache_dtype == "auto" or words is None or not IMPL_QUANTIZED_CACHE_REFUSALS.holds(release):
        return
    if choice.name == "FLASH_ATTN" and gpu.capability[0] == 9:  # FlashAttention 3 stores fp8 on Hopper
        return
    raise UnsupportedConfigurationError(
        f"vLLM {release.text} refuses: {words} ({choice.name} on {gpu.name} with kv_cache_dtype {kv_cache_dtype!r}, "
        "which it counts as quantized; vllm/v1/attention/backends: the implementation's __init__): give "
        "--kv-cache-dtype auto"
    )


def _check_impl(choice: BackendChoice, gpu: VLLMDevice, kv_cache_dtype: str, release: EngineRelease) -> None:
    """What a backend's implementation refuses when its layers are built, after the selector took it:
    ``vllm/v1/attention/backends/mla/triton_mla.py TritonMLAImpl.__init__`` (an fp8 cache needs SM 8.9,
    a bf16 one SM 8.0; :data:`TRITON_MLA_DTYPE_CHECK`); before 0.12.0 any non-auto cache
    (:data:`IMPL_QUANTIZED_CACHE_REFUSALS`)."""
    _check_quantized_cache(choice, gpu, kv_cache_dtype, release)
    if choice.name != "TRITON_MLA" or not TRITON_MLA_DTYPE_CHECK.holds(release):
        return
    version = release.text
    major, minor = gpu.capability
    capability = major * 10 + minor
    suggested = "float16" if capability < 80 else "bfloat16"
    if kv_cache_dtype.startswith("fp8") and capability < 89:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: FP8 KV cache is not supported by the Triton MLA backend on NVIDIA {gpu.name} "
            f"(compute capability {major}.{minor}); native FP8 (fp8e4nv) requires SM89+. Re-run with "
            f"--kv-cache-dtype {suggested} (vllm/v1/attention/backends/mla/triton_mla.py TritonMLAImpl.__init__)"
        )
    if kv_cache_dtype == "bfloat16" and capability < 80:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: bfloat16 KV cache is not supported by the Triton MLA backend on NVIDIA "
            f"{gpu.name} (compute capability {major}.{minor}); bfloat16 requires SM80+. Re-run with --kv-cache-dtype "
            "float16 (vllm/v1/attention/backends/mla/triton_mla.py TritonMLAImpl.__init__)"
        )


#: from vLLM 0.15.1 the state and indexer backends have names of their own (``get_name``: GDN_ATTN, MAMBA2_ATTN,
#: DEEPSEEK_V32_INDEXER, ...); 0.14.1's keep ``AttentionBackend.get_name``, which raises NotImplementedError, so
#: the layers' backends name the attention backends only
STATE_BACKEND_NAMES = ReleaseRule(
    "vllm-state-backend-names",
    span("0.15.1", engine=VLLM),
    "the Mamba, linear-attention and sparse-indexer backends have names (get_name); before, only the attention "
    "backends do",
    "vllm/v1/attention/backends/mamba2_attn.py, gdn_attn.py, mla/indexer.py get_name (0.15.1)",
    topic="launch",
)
#: the names :data:`STATE_BACKEND_NAMES` gives
UNNAMED_BEFORE_STATE_NAMES = ("GDN_ATTN", "MAMBA1_ATTN", "MAMBA2_ATTN", "LINEAR_ATTN", "SHORT_CONV_ATTN",
                              "DEEPSEEK_V32_INDEXER")  # fmt: skip


def named_backends(backends: tuple[str, ...], release: EngineRelease) -> list[str]:
    """The backends as the release names them (:data:`STATE_BACKEND_NAMES`)."""
    if STATE_BACKEND_NAMES.holds(release):
        return list(backends)
    return [name for name in backends if name not in UNNAMED_BEFORE_STATE_NAMES]


#: the state backends of the Mamba families (``vllm/v1/attention/backends``), by mixer kind
STATE_BACKENDS: dict[str, str] = {"gdn": "GDN_ATTN", "mamba2": "MAMBA2_ATTN", "mamba1": "MAMBA1_ATTN"}
#: the class path vLLM's MambaSpec records as ``mamba_type``
STATE_BACKEND_CLASSES: dict[str, str] = {
    "GDN_ATTN": "vllm.v1.attention.backends.gdn_attn.GDNAttentionBackend",
    "MAMBA2_ATTN": "vllm.v1.attention.backends.mamba2_attn.Mamba2AttentionBackend",
    "MAMBA1_ATTN": "vllm.v1.attention.backends.mamba1_attn.Mamba1AttentionBackend",
}
#: what vLLM 0.20.2's MambaSpec records as ``mamba_type``: the layer's own ``mamba_type`` string
#: (``mamba_mixer.py``, ``mamba_mixer2.py``, ``gdn_linear_attn.py``; ``kda.py`` answers ``gdn_attention`` too)
STATE_LAYER_TYPES: dict[str, str] = {"GDN_ATTN": "gdn_attention", "MAMBA2_ATTN": "mamba2", "MAMBA1_ATTN": "mamba1"}
#: from vLLM 0.21.0 a MambaSpec records its backend's class path as ``mamba_type``; 0.20.2 the layer's type name
MAMBA_TYPE_CLASS_PATH = ReleaseRule(
    "vllm-mamba-type-class-path",
    span("0.21.0", engine=VLLM),
    "a Mamba spec records its state backend's class path as mamba_type (0.20.2: the layer's type, e.g. mamba2)",
    "vllm/v1/kv_cache_interface.py MambaSpec.mamba_type; vllm/model_executor/layers/mamba/mamba_mixer2.py "
    "MambaMixer2.mamba_type (0.20.2)",
    topic="sizing",
)


#: from vLLM 0.12.0 a GDN layer's type is ``gdn_attention``; 0.11.0's ``Qwen3NextGatedDeltaNet.mamba_type`` answers
#: ``linear_attention`` (the spec records it: Qwen3-Next's GDN groups)
GDN_LAYER_TYPE = ReleaseRule(
    "vllm-gdn-layer-type",
    span("0.12.0", engine=VLLM),
    "a GDN layer's mamba_type is gdn_attention (before: linear_attention)",
    "vllm/model_executor/models/qwen3_next.py Qwen3NextGatedDeltaNet.mamba_type (0.11.0)",
    topic="sizing",
)


def mamba_type(backend: str, release: EngineRelease) -> str:
    """What a Mamba spec records as ``mamba_type`` in ``release`` (:data:`MAMBA_TYPE_CLASS_PATH`,
    :data:`GDN_LAYER_TYPE`)."""
    if MAMBA_TYPE_CLASS_PATH.holds(release):
        return STATE_BACKEND_CLASSES[backend]
    if backend == "GDN_ATTN" and not GDN_LAYER_TYPE.holds(release):
        return "linear_attention"
    return STATE_LAYER_TYPES[backend]
