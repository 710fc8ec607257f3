"""A checkpoint's quantization as SGLang reads it when ``config.json`` does not carry it.

ModelOpt checkpoints (``nvidia/*-FP8``, ``nvidia/*-NVFP4``) often keep their quantization in a
separate ``hf_quant_config.json`` beside ``config.json``. SGLang 0.5.23 reads it when the config
has neither ``quantization_config`` nor ``compression_config``
(``sglang.srt.configs.model_config.ModelConfig._parse_quant_hf_config``) and maps its
``quantization.quant_algo`` to a method (``ModelConfig._parse_modelopt_quant_config``): ``FP8``
-> ``modelopt_fp8``, an algorithm naming FP4 -> ``modelopt_fp4``, ``MIXED_PRECISION`` ->
``modelopt_mixed`` / ``w4afp8``, ``MXFP8`` -> ``mxfp8``. The weights and the ``auto`` KV dtype then
follow it (``kv_cache_quant_algo: FP8`` makes ``auto`` an FP8 cache,
``sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype``).

:func:`with_hf_quant_config` returns the config with that quantization written in as the flat
``quantization_config`` ModelOpt's own config classes also accept
(``sglang.srt.layers.quantization.modelopt_quant``: ``quant_algo``, ``kv_cache_quant_algo``,
``exclude_modules``), so the weight estimate and the KV dtype see what SGLang sees. Without the
file, or when the config already says, the config is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.jsonio import read_json_object
from ..core.releases import NEWEST_SGLANG
from ..errors import KVCacheConfigError

HF_QUANT_CONFIG = "hf_quant_config.json"


def modelopt_method(quant_algo: str, quantized_layers: Mapping[str, Any] | None = None) -> str:
    """SGLang's quant method for a ModelOpt ``quant_algo`` (``_parse_modelopt_quant_config``)."""
    if quant_algo == "MIXED_PRECISION":
        nvfp4 = any(
            str(layer.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4")
            for layer in (quantized_layers or {}).values()
            if isinstance(layer, Mapping)
        )
        return "modelopt_mixed" if nvfp4 else "w4afp8"
    if "FP4" in quant_algo:
        return "modelopt_fp4"
    if quant_algo == "FP8":
        return "modelopt_fp8"
    if quant_algo == "MXFP8":
        return "mxfp8"
    raise KVCacheConfigError(
        f"{HF_QUANT_CONFIG}: quant_algo {quant_algo!r} is not one {NEWEST_SGLANG.label} maps to a method "
        "(sglang.srt.configs.model_config.ModelConfig._parse_modelopt_quant_config); give --weight-bytes"
    )


def with_hf_quant_config(config: Mapping[str, Any], folder: str | Path | None) -> tuple[Mapping[str, Any], str | None]:
    """``(config as SGLang reads it, a note naming the file)``; the note is ``None`` when
    ``folder/hf_quant_config.json`` is absent or the config already carries its quantization."""
    if folder is None or config.get("quantization_config") or config.get("compression_config"):
        return config, None
    path = Path(folder) / HF_QUANT_CONFIG
    if not path.is_file():
        return config, None
    raw = read_json_object(path, "a ModelOpt quantization file (hf_quant_config.json)")
    section = raw.get("quantization")
    if not isinstance(section, Mapping) or not isinstance(section.get("quant_algo"), str):
        raise KVCacheConfigError(
            f"{path}: needs a 'quantization' object with a 'quant_algo' string, as ModelOpt writes"
        )
    algo = str(section["quant_algo"])
    quantized = section.get("quantized_layers")
    method = modelopt_method(algo, quantized if isinstance(quantized, Mapping) else None)
    merged = {**section, "quant_method": method, "quant_algo": algo}
    kv = section.get("kv_cache_quant_algo")
    note = f"quantization from {HF_QUANT_CONFIG}: ModelOpt {algo} ({method})" + (f", KV cache {kv}" if kv else "")
    return {**config, "quantization_config": merged}, note
