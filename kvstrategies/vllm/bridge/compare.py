"""Compare the project's vLLM plan document with vLLM's own for one case; explain known differences.

:func:`comparable` keeps what both answer (:data:`COMPARED_KEYS`: resolved settings, backends,
block size, layer specs, groups, blocks, tensors, capacity, concurrency and the log line), in the
golden form (floats as ``repr`` strings); vLLM's log excerpt and the stubbed ops it touched are
the bridge's notes, not answers. :func:`difference_lines` names each field that differs
(:mod:`kvstrategies.golden.diff`); :func:`explain` matches them against
:data:`KNOWN_DIFFERENCES`, each with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...core.releases import VLLM, parse_release
from ...golden.diff import diff_documents
from ...golden.snapshot import stable
from ...models.architectures import vllm_model_rule
from ...models.hf import text_config
from ...sglang.bridge.compare import KnownDifference

COMPARED_KEYS: tuple[str, ...] = (
    "gpu",
    "vllm_settings",
    "attention_backends",
    "block_size",
    "kv_cache_layout",
    "layer_specs",
    "kv_cache_groups",
    "num_gpu_blocks",
    "kv_cache_tensors",
    "kv_cache_size_tokens",
    "max_concurrency",
    "capacity_log",
)


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a vLLM plan document both sides answer, floats as their ``repr`` strings."""
    return {key: stable(document.get(key)) for key in COMPARED_KEYS}


def difference_lines(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """Readable lines naming every field where vLLM (``theirs``) differs from the project."""
    return diff_documents(comparable(ours), comparable(theirs))


def _architectures(case: Mapping[str, Any]) -> list[str]:
    config = case.get("_hf_config") or {}
    return [str(a) for a in (config.get("architectures") or [])] if isinstance(config, Mapping) else []


def _model_type(case: Mapping[str, Any]) -> str:
    config = case.get("_hf_config") or {}
    return str(config.get("model_type", "")) if isinstance(config, Mapping) else ""


_REFUSED = (r"^kvstrategies: refused: ",)
_VLLM_REFUSED = (r"^vllm: refused: ",)


def _case_value(case: Mapping[str, Any], key: str) -> str:
    return str(case.get(key) or "")


def _unmodelled(words: str) -> Callable[[Mapping[str, Any]], bool]:
    """A case the vLLM strategies refuse with ``words`` in their reason (read from the project side)."""

    def applies(case: Mapping[str, Any]) -> bool:
        return words in str(case.get("_our_error") or "")

    return applies


def _load_refusal(case: Mapping[str, Any]) -> bool:
    """The vLLM planner refuses this case's checkpoint at its TP (``load_refusals.load_refusal``)."""
    from ..planner.load_refusals import load_refusal

    config = case.get("_hf_config") or {}
    tp = case.get("tp_size") or 1
    version = case.get("_vllm_version")
    release = version if isinstance(version, str) else None
    return (isinstance(config, Mapping) and isinstance(tp, int) and bool(config)
            and load_refusal(config, tp, version=release) is not None)  # fmt: skip


#: The known differences: layouts vLLM runs that the strategies refuse (naming vLLM's layout), and
#: cases this CPU host's vLLM cannot build though a GPU host would
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "dsa-host-cannot-build",
        "DeepSeek sparse attention (DeepSeek-V3.2, GLM-5) that this CPU host's vLLM cannot build, though a GPU host "
        "does: 0.34.0's B200 sparse-MLA path sets up symmetric memory (a CUDA device); the strategies plan it as "
        "0.33.0 records it",
        lambda case: _hf_get(case, "index_topk") is not None,
        (r"^vllm: refused: .*SymmetricMemory MemPool did not find backend for device type cuda",),
    ),
    KnownDifference(
        "dsv4-not-modelled",
        "DeepSeek-V4's compressed attention before vLLM 0.27.1: other pages than the packed cache groups the "
        "strategies model from 0.27.1 (kvstrategies/vllm/strategies/dsv4.py); the strategies refuse it",
        _unmodelled("DeepSeek-V4"),
        (*_REFUSED, r"^refusals differ: kvstrategies: vLLM [\d.]+: DeepSeek-V4"),
    ),
    KnownDifference(
        "chunked-local-not-modelled",
        "Llama-4's chunked local attention (ChunkedLocalAttentionSpec); the strategies refuse it",
        _unmodelled("chunked local attention"),
        (*_REFUSED, r"^refusals differ: kvstrategies: vLLM [\d.]+: Llama-4"),
    ),
    KnownDifference(
        "state-only-stage",
        "a Mamba hybrid's pipeline stage with no attention layer (a layer partition's first three linear layers): "
        "vLLM keeps that worker's block unaligned (Platform.update_block_size_for_backend finds no attention "
        "backend); the strategies refuse it",
        _unmodelled("holds state layers and no attention layer"),
        _REFUSED,
    ),
    KnownDifference(
        "vision-tower-tp",
        "a multimodal model at a TP its vision encoder's heads do not divide: vLLM asserts while building the "
        "encoder (the strategies plan the language model's KV cache only)",
        lambda case: bool(_hf_get(case, "vision_config")),
        # both refuse where vLLM asserts in the encoder before its selector reaches a cache dtype it refuses
        (r"^vllm: refused: .*AssertionError: \d+ is not divisible by \d+",
         r"^refusals differ: .*\| vllm: .*AssertionError: \d+ is not divisible by \d+"),
    ),
    KnownDifference(
        "unregistered-config",
        "a config whose model type transformers 5.20 (vLLM's pin) does not register (minimax_m3, muse_glimmer): "
        "vLLM refuses to load it or reads it with the generic defaults (another max_model_len)",
        lambda case: vllm_model_rule(_model_type(case)).unregistered,
        (r"^refusals differ: .*minimax_m3", r"^vllm: refused: .*minimax_m3",
         r"^vllm: refused: vLLM [\d.]+ refused: OSError: Can't load image processor", r"^capacity_log: ", r"^kv_cache_",
         r"^max_concurrency: ", r"^num_gpu_blocks: ", r"^vllm_settings\.max_model_len: ", r"^layer_specs"),
    ),
    KnownDifference(
        "weight-load-refusal",
        "a block-FP8 checkpoint whose split over --tensor-parallel-size is not whole blocks: vLLM refuses while it "
        "creates the weights (fp8_utils.py validate_fp8_block_shape[_moe]); the case path sizes the KV cache only, "
        "plan MODEL --engine vllm refuses it with vLLM's words (kvstrategies/vllm/planner/load_refusals.py)",
        _load_refusal,
        (r"^vllm: refused: vLLM [\d.]+ refused: ValueError: .*is not divisible by weight quantization block_[nk]",),
    ),
    KnownDifference(
        "uniform-type-without-hybrid-manager",
        "vLLM 0.27.1 and older with the hybrid manager off record the promoted layers as one "
        "UniformTypeKVCacheSpecs group (the same layers, pages, blocks and tensors as the strategies' one "
        "full-attention group)",
        # 0.13.0 turns the hybrid manager off for chunked local attention by default
        lambda case: _release_at_most(case, "0.27.1") and (bool(case.get("disable_hybrid_swa_memory")) or (
            _release_at_most(case, "0.13.0") and _text_get(case, "attention_chunk_size") is not None)),
        (r"^kv_cache_groups: ",),
    ),
    KnownDifference(
        "per-layer-head-dim",
        "vLLM 0.27.1 and older read head_dim as one value of the config; transformers refuses that read on a "
        "Gemma-4 config whose head dims differ per layer (AmbiguousGlobalPerLayerAttributeError)",
        lambda case: _release_at_most(case, "0.27.1") and _text_get(case, "global_head_dim") is not None,
        (r"^vllm: refused: vLLM [\d.]+ refused: AmbiguousGlobalPerLayerAttributeError: 'head_dim'",),
    ),
    KnownDifference(
        "synthetic-config-unloadable",
        "a synthetic config vLLM's model class cannot build (no tokenizer vocabulary for its OCR head), or whose "
        "model type the release does not register (0.24.0: unlimited-ocr)",
        lambda case: "synthetic" in _case_value(case, "name"),
        (r"^vllm: refused: .*AttributeError: 'NoneType' object has no attribute 'vocab'",
         r"^vllm: refused: .*Transformers does not recognize this architecture",
         r"^refusals differ: .*\| vllm: .*Transformers does not recognize this architecture"),
    ),
)


def _hf_get(case: Mapping[str, Any], key: str) -> Any:
    config = case.get("_hf_config") or {}
    return config.get(key) if isinstance(config, Mapping) else None


def _release_at_most(case: Mapping[str, Any], last: str) -> bool:
    """Whether the case is verified against vLLM ``last`` or an older release."""
    version = case.get("_vllm_version")
    if not isinstance(version, str):
        return False
    return parse_release(version, VLLM, field="--vllm-version") <= parse_release(last, VLLM)


def _text_get(case: Mapping[str, Any], key: str) -> Any:
    """``key`` of the case's text config (a multimodal config's ``text_config``: :func:`text_config`)."""
    config = case.get("_hf_config") or {}
    return text_config(config).get(key) if isinstance(config, Mapping) else None


def explain(case: Mapping[str, Any], lines: list[str]) -> tuple[list[KnownDifference], list[str]]:
    """(the known differences that cover some of ``lines``, the lines none covers)."""
    used: list[KnownDifference] = []
    left: list[str] = []
    applicable = [k for k in KNOWN_DIFFERENCES if k.applies(case)]
    for line in lines:
        match = next((k for k in applicable if k.covers_line(line)), None)
        if match is None:
            left.append(line)
        elif match not in used:
            used.append(match)
    return used, left
