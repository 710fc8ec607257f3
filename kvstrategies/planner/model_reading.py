"""``ModelReading``: a model's ``config.json`` and what the planner derives from the config alone.

A plan reads one model many times: a sizing reads its weights twice (the load refusals and the
GPU budget), the fix search sizes up to a dozen changed deployments of the same model, and a
sweep plans a grid of them. The planner's entry points (:func:`.deployment.plan_deployment`,
:func:`.replan.plan_or_replan`, :func:`.sweep.sweep`) make one reading and pass it down, so the
geometry and each weight estimate are worked out once per reading. A reading never changes its
config; a step that plans another config (``--assume-architecture``) makes a new reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from ..core.dtypes import DType
from ..core.releases import EngineRelease
from ..models import ModelGeometry, parse_hf_config
from .weights import WeightEstimate, estimate_weights


class ModelReading:
    """``config`` and, worked out at first use, its geometry and its weight estimates."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self._estimates: dict[tuple[str | DType | None, str | None, EngineRelease | None], WeightEstimate] = {}

    @cached_property
    def geometry(self) -> ModelGeometry:
        """:func:`~kvstrategies.models.parse_hf_config` of the config."""
        return parse_hf_config(self.config)

    def weights(
        self, dtype: str | DType | None, quantization: str | None, release: EngineRelease | None = None
    ) -> WeightEstimate:
        """:func:`~kvstrategies.planner.weights.estimate_weights` of the config in ``dtype`` and
        ``quantization``, as SGLang ``release`` builds it (default the newest; an estimate that fails
        raises again at the next call)."""
        key = (dtype, quantization, release)
        estimate = self._estimates.get(key)
        if estimate is None:
            estimate = estimate_weights(self.config, dtype=dtype, quantization=quantization, release=release)
            self._estimates[key] = estimate
        return estimate


def as_reading(model: ModelReading | Mapping[str, Any]) -> ModelReading:
    """``model`` itself, or a new reading of the config ``model``."""
    return model if isinstance(model, ModelReading) else ModelReading(model)
