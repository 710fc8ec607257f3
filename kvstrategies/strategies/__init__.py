"""Sizing strategies, one module per architecture family, selected through the registry."""

from __future__ import annotations

from .base import PoolConfigurator, StateReservation, Strategy
from .default import DefaultPoolConfigurator
from .registry import (
    register,
    registered,
    select_configurator,
    select_configurator_class,
    select_pool_configurator,
    unregister,
)

__all__ = [
    "DefaultPoolConfigurator",
    "PoolConfigurator",
    "StateReservation",
    "Strategy",
    "register",
    "registered",
    "select_configurator",
    "select_configurator_class",
    "select_pool_configurator",
    "unregister",
]
