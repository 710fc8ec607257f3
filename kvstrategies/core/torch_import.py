"""The one place that imports torch, lazily, with a clear error when it is missing."""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError


def import_torch() -> Any:
    """Return the ``torch`` module or raise :class:`MissingDependencyError` naming the extra."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised in a torch-free env
        raise MissingDependencyError(
            "building pools needs torch: pip install 'kvstrategies[torch]' "
            "(planning does not; `kvstrategies plan` works without it)"
        ) from exc
    return torch
