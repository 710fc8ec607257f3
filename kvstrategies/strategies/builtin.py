"""The built-in strategies in SGLang's selection order (sizing.md 9); first applicable wins."""

from __future__ import annotations

from .base import PoolConfigurator
from .default import DefaultPoolConfigurator

BUILTIN_ORDER: tuple[type[PoolConfigurator], ...] = (
    DefaultPoolConfigurator,
)
