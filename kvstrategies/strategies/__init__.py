"""Sizing strategies, one module per architecture family, selected through the registry."""

from __future__ import annotations

from .base import PoolConfigurator, StateReservation
from .default import DefaultPoolConfigurator
from .registry import register, registered, select_configurator, select_configurator_class, unregister

__all__ = [
    "DefaultPoolConfigurator",
    "PoolConfigurator",
    "StateReservation",
    "register",
    "registered",
    "select_configurator",
    "select_configurator_class",
    "unregister",
]
