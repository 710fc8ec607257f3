"""MODEL as the planner plans it: :func:`.model_source.resolve_model`, then the checkpoint
folder's ``hf_quant_config.json`` read as SGLang reads it (:mod:`.hf_quant`), so a ModelOpt
checkpoint in the HF cache or on disk is planned in its own quantization, never as 16-bit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .hf_quant import with_hf_quant_config
from .model_source import ModelSource, resolve_model


def resolve_for_planning(model: str, environ: Mapping[str, str] | None = None) -> ModelSource:
    """The resolved model with its checkpoint's quantization file applied (described when used)."""
    source = resolve_model(model, environ)
    if source.config is None or source.folder is None:
        return source
    config, note = with_hf_quant_config(source.config, source.folder)
    if note is None:
        return source
    return replace(source, config=config, description=f"{source.description}; {note}")
