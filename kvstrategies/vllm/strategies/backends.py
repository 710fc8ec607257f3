"""The attention backend vLLM picks per GPU, and the block size it leads to.

vLLM walks a priority list per compute capability (``platforms/cuda.py _get_backend_priorities``)
and takes the first backend whose ``validate_configuration`` accepts the layer; with no
``--block-size`` the block size is that backend's preferred one
(``platforms/interface.py Platform.update_block_size_for_backend``). Modelled here for the cases
that cover most deployments, on vLLM 0.33.0's CUDA wheel (FlashAttention 2/3, FlashMLA and
FlashInfer present):

===========================  =========================================  ==============
layer                        backend (SM 9.x / SM 10.x / other)         preferred block
===========================  =========================================  ==============
MHA / GQA                    FLASH_ATTN / FLASHINFER / FLASH_ATTN       16
MHA / GQA, fp8_e5m2 KV       FLASHINFER (FlashAttention's fp8 is e4m3)  16
multimodal Gemma-3 (mm prefix) TRITON_ATTN (FlashAttention and FlashInfer reject partial-mm prefixes)  16
MLA, 16-bit KV               FLASH_ATTN_MLA / FLASHINFER_MLA / TRITON_MLA  16 / 64 / 16
MLA, fp8 KV                  FLASHMLA / FLASHINFER_MLA / TRITON_MLA     64 / 64 / 16
Mamba2 / GDN / Mamba-1 state  MAMBA2_ATTN / GDN_ATTN / MAMBA1_ATTN       (none)
===========================  =========================================  ==============

Every attention backend here accepts any multiple of 16 tokens (``MultipleOf(16)`` kernel
blocks); FlashMLA takes multiples of 64.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import vllm_model_rule
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
    """One backend: vLLM's name, its preferred block size and the smallest kernel block it accepts."""

    name: str
    preferred_block_size: int = 16
    kernel_block: int = 16


def _major(gpu: VLLMDevice) -> int:
    return gpu.capability[0]


def attention_backend(geometry: ModelGeometry, gpu: VLLMDevice, kv_cache_dtype: str) -> BackendChoice:
    """The backend of the model's softmax-attention layers."""
    major = _major(gpu)
    fp8 = kv_cache_dtype.startswith("fp8")
    if geometry.use_mla:
        if major == 10:
            return BackendChoice("FLASHINFER_MLA", 64, 32)
        if major == 9:
            return BackendChoice("FLASHMLA", 64, 64) if fp8 else BackendChoice("FLASH_ATTN_MLA")
        return BackendChoice("TRITON_MLA")
    if vllm_model_rule(geometry.model_type).mm_prefix and geometry.is_multimodal:
        return BackendChoice("TRITON_ATTN")
    if major == 10 or kv_cache_dtype == "fp8_e5m2":  # FlashAttention's fp8 is e4m3 only
        return BackendChoice("FLASHINFER")
    return BackendChoice("FLASH_ATTN")


#: the state backends of the Mamba families (``vllm/v1/attention/backends``), by mixer kind
STATE_BACKENDS: dict[str, str] = {"gdn": "GDN_ATTN", "mamba2": "MAMBA2_ATTN", "mamba1": "MAMBA1_ATTN"}
#: the class path vLLM's MambaSpec records as ``mamba_type``
STATE_BACKEND_CLASSES: dict[str, str] = {
    "GDN_ATTN": "vllm.v1.attention.backends.gdn_attn.GDNAttentionBackend",
    "MAMBA2_ATTN": "vllm.v1.attention.backends.mamba2_attn.Mamba2AttentionBackend",
    "MAMBA1_ATTN": "vllm.v1.attention.backends.mamba1_attn.Mamba1AttentionBackend",
}
