"""Model geometry: one frozen value per model, parsed from a HF ``config.json``."""

from __future__ import annotations

from .geometry import AttentionArch, DSAGeometry, MLADims, ModelGeometry
from .parse import FAMILY_PARSERS, parse_hf_config

# Family refinements run in this order after the base parse (each module registers one parser).
# (family modules are appended here)

__all__ = [
    "AttentionArch",
    "DSAGeometry",
    "FAMILY_PARSERS",
    "MLADims",
    "ModelGeometry",
    "parse_hf_config",
]
