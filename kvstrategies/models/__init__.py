"""Model geometry: one frozen value per model, parsed from a HF ``config.json``."""

from __future__ import annotations

# Family refinements run in this order after the base parse (each module registers one parser).
# (family modules are appended here)
from .dsv4 import parse_dsv4  # noqa: E402
from .geometry import AttentionArch, DSAGeometry, MLADims, ModelGeometry
from .parse import FAMILY_PARSERS, parse_hf_config

FAMILY_PARSERS.append(parse_dsv4)
from .mamba import parse_mamba  # noqa: E402

FAMILY_PARSERS.append(parse_mamba)
from .minimax import parse_minimax_sparse  # noqa: E402

FAMILY_PARSERS.append(parse_minimax_sparse)
from .hybrid_swa import parse_hybrid_swa  # noqa: E402

FAMILY_PARSERS.append(parse_hybrid_swa)

__all__ = [
    "AttentionArch",
    "DSAGeometry",
    "FAMILY_PARSERS",
    "MLADims",
    "ModelGeometry",
    "parse_hf_config",
]
