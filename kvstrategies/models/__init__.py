"""Model geometry: one frozen value per model, parsed from a HF ``config.json``."""

from __future__ import annotations

from .geometry import AttentionArch, DSAGeometry, MLADims, ModelGeometry
from .parse import FAMILY_PARSERS, parse_hf_config
from .parsers.dsv4 import parse_dsv4
from .parsers.hybrid_swa import parse_hybrid_swa
from .parsers.mamba import parse_mamba
from .parsers.minimax import parse_minimax_sparse

# Family refinements run in this order after the base parse.
FAMILY_PARSERS.extend((parse_dsv4, parse_mamba, parse_minimax_sparse, parse_hybrid_swa))

__all__ = [
    "AttentionArch",
    "DSAGeometry",
    "FAMILY_PARSERS",
    "MLADims",
    "ModelGeometry",
    "parse_hf_config",
]
