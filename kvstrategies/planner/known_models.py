"""Model names the planner knows offline: the presets and the shipped checkpoints
(:mod:`kvstrategies.checkpoints`), and what to say about a name it does not know.

An HF id resolves only to the checkpoint it names. A name that is *not* known never resolves
to a neighbour: :func:`near_miss_hint` offers the close names (difflib), and a close name that
is the same model in another quantization (``Qwen/Qwen3-8B`` for ``Qwen/Qwen3-8B-AWQ``) is
named as such, never offered as a substitute: its weights, and so its KV budget, differ. The one
exception is a tuning of a shipped base (:func:`tuned_base`: ``-Instruct``, ``-Chat``, ``-it``,
nothing else different), planned from the base when its own config cannot be read, and the
answer says so (:func:`~.model_source.resolve_model`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoints import find_shipped, shipped_checkpoints
from .hf_quant import with_hf_quant_config

#: name parts that say how a checkpoint's weights are stored (lower case, split on - _ . /)
QUANT_TAGS = frozenset({
    "fp8", "fp4", "nvfp4", "mxfp4", "mxfp8", "awq", "gptq", "int4", "int8", "w4a16", "w8a8", "w8a16", "w4a8",
    "w4afp8", "bnb", "4bit", "8bit", "gguf", "exl2", "quantized", "dynamic", "static", "pertensor", "fp8dynamic",
})  # fmt: skip
#: tags that mean "not quantized": a name with only these is the model in its serving dtype
UNQUANTIZED = frozenset({"bf16", "fp16", "fp32"})
_SPLIT = re.compile(r"[-_./]+")


def quant_tags(name: str) -> frozenset[str]:
    """The quantization tags in ``name`` (``{"fp8"}`` for ``Qwen/Qwen3-8B-FP8``; empty: unquantized)."""
    return frozenset(part for part in _SPLIT.split(name.lower()) if part in QUANT_TAGS)


def base_name(name: str) -> str:
    """``name`` without its quantization and dtype tags: the model it is a checkpoint of."""
    return "-".join(part for part in _SPLIT.split(name.lower()) if part not in QUANT_TAGS | UNQUANTIZED)


def quantization_label(tags: frozenset[str]) -> str:
    return "/".join(sorted(tag.upper() for tag in tags)) if tags else "16-bit (unquantized)"


#: name parts that mark a tuning of a base model that keeps the base's architecture (``-Instruct``,
#: ``-Chat``, Gemma's ``-it``)
TUNING_TAGS = frozenset({"instruct", "chat", "it"})


@dataclass(frozen=True)
class TunedBase:
    """The shipped base of a tuned id: ``hf_id`` (the base's HF id), ``preset`` (its short name,
    when it is a preset) and ``tag`` (the part of the asked name that was dropped)."""

    hf_id: str
    preset: str | None
    tag: str


def tuned_base(model: str) -> TunedBase | None:
    """The shipped base of an ``-Instruct`` / ``-Chat`` / ``-it`` id: the asked name with that one
    dash-separated part dropped (``meta-llama/Llama-3.1-70B-Instruct`` -> ``meta-llama/Llama-3.1-70B``,
    ``mistralai/Mistral-7B-Instruct-v0.1`` -> ``mistralai/Mistral-7B-v0.1``), when that is a preset's
    HF id or a shipped checkpoint's (the organisation, when given, must match; any case). ``None``
    otherwise: a name whose other parts differ (``-Instruct-2507``, a quantization tag the base
    lacks) is another checkpoint, never its base."""
    from ..presets import preset_index

    org, _, name = model.strip().rpartition("/")
    parts = name.split("-")
    ids: dict[str, tuple[str, str | None]] = {hf_id.lower(): (hf_id, short) for short, hf_id in preset_index().items()}
    ids |= {hf_id.lower(): (hf_id, None) for hf_id in shipped_checkpoints()}
    for at, part in enumerate(parts):
        if part.lower() not in TUNING_TAGS or len(parts) == 1:
            continue
        base = "-".join(parts[:at] + parts[at + 1 :]).lower()
        for key, (hf_id, short) in ids.items():
            key_org, _, key_name = key.rpartition("/")
            if key_name == base and (not org or key_org == org.lower()):
                return TunedBase(hf_id, short, part)
    return None


def known_names() -> dict[str, str]:
    """``{lower-case name: name}`` of every preset short name, preset HF id and shipped checkpoint id."""
    from ..presets import preset_index

    index = preset_index()
    names = {name.lower(): name for name in index} | {hf_id.lower(): hf_id for hf_id in index.values()}
    return names | {hf_id.lower(): hf_id for hf_id in shipped_checkpoints()}


@dataclass(frozen=True)
class ShippedModel:
    """A shipped checkpoint ready to plan: its config as SGLang reads it (``hf_quant_config.json``
    applied), its folder (the checkpoint's other files) and a one-line description."""

    hf_id: str
    config: Mapping[str, Any]
    folder: Path
    description: str


def shipped_model(model: str) -> ShippedModel | None:
    """The shipped checkpoint ``model`` names exactly, or ``None``."""
    ckpt = find_shipped(model)
    if ckpt is None:
        return None
    config, note = with_hf_quant_config(ckpt.config(), ckpt.folder)
    description = f"{ckpt.hf_id} (shipped copy of the published config, kvstrategies/checkpoints)"
    return ShippedModel(ckpt.hf_id, config, ckpt.folder, description + (f"; {note}" if note else ""))


def near_miss_hint(model: str) -> str:
    """ "did you mean ..." for close known names, each marked when it is another quantization
    of the asked model; empty when nothing is close."""
    names = known_names()
    close = [names[m] for m in difflib.get_close_matches(model.strip().lower(), list(names), n=3, cutoff=0.6)]
    if not close:
        return ""
    asked = quant_tags(model)
    same_model = [name for name in close if base_name(name) == base_name(model) and quant_tags(name) != asked]
    others = [name for name in close if name not in same_model]
    parts = []
    if same_model:
        labels = "; ".join(f"{name!r} is {quantization_label(quant_tags(name))}" for name in same_model)
        one = len(same_model) == 1
        parts.append(
            f"{labels}: {'that is' if one else 'those are'} the same model in another quantization than the asked "
            f"{quantization_label(asked)}, so {'it is not' if one else 'neither is'} planned in its place "
            f"(the weights, and so the KV budget, differ); pass {model.split('/')[-1]}'s own config.json or "
            "checkpoint folder"
        )
    if others:
        parts.append(f"did you mean {' or '.join(repr(name) for name in others)}?")
    return "; ".join(parts) + " "
