"""A deployment that does not fit, re-planned: instead of only saying why SGLang would stop,
give the changes with which it does start, each checked by planning again
(:func:`.fixes.replan_options`: FP8 KV, FP8 weights, a higher ``--mem-fraction-static``, more
GPUs of the same kind, a GPU with more memory), cheapest first, each with its cost and its
launch command (:mod:`.run_command`).
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING

from ..errors import InsufficientMemoryError
from ..sglang.run_command import gpu_count
from .deployment import DeploymentPlan, plan_deployment, replan_deployment
from .model_reading import ModelReading
from .request import DeploymentRequest

if TYPE_CHECKING:
    from .fixes import Fix

#: SGLang's own advice in its message (``kv_cache_configurator._profile_available_bytes``); said
#: only when speculative decoding is on
SPECULATIVE_SENTENCE = " If using speculative decoding, draft weights are now counted."
#: the budget step's generic advice (:func:`.budget.kv_budget`), replaced by the options
GENERIC_ADVICE = re.compile(r"; use more GPUs \(--tp, --pp-size\), smaller weights \([^)]*\) or a larger GPU")


class DoesNotFitError(InsufficientMemoryError):
    """The deployment cannot be planned; ``options`` are the changes with which it plans."""

    def __init__(self, message: str, request: DeploymentRequest, options: tuple[Fix, ...]) -> None:
        super().__init__(message)
        self.request = request
        self.options = options


def where(req: DeploymentRequest) -> str:
    """``"one H100-80GB at TP 1"`` / ``"4 x H200 (one node) at TP 4"``: the layout that was asked."""
    count = req.tp_size * req.pp_size * req.dp_replicas
    gpu = "the given KV budget" if req.gpu is None else gpu_count(count, req.gpu.name)
    layout = f"TP {req.tp_size}" + (f" x PP {req.pp_size}" if req.pp_size > 1 else "")
    return f"{gpu} at {layout}"


def headline(req: DeploymentRequest, cause: InsufficientMemoryError, options: tuple[Fix, ...]) -> str:
    """The refusal in one line: what was asked and why it does not fit (the generic advice of the
    cause dropped when the re-planned options follow)."""
    reason = str(cause)
    if req.speculative_algorithm is None:
        reason = reason.replace(SPECULATIVE_SENTENCE, "")
    if options:
        reason = GENERIC_ADVICE.sub("", reason)
    count = f"; {len(options)} option{'s' if len(options) > 1 else ''} below" if options else ""
    return f"{req.model} does not fit {where(req)}: {reason.rstrip('.') if count else reason}{count}"


def plan_or_replan(req: DeploymentRequest) -> DeploymentPlan:
    """:func:`.deployment.plan_deployment`, or a :class:`DoesNotFitError` carrying the options."""
    model = ModelReading(req.hf_config())
    try:
        return plan_deployment(req, model=model)
    except InsufficientMemoryError as exc:
        from .fixes import replan_options  # only a deployment that does not fit is re-planned

        options = replan_options(req, partial(replan_deployment, model=model))
        raise DoesNotFitError(headline(req, exc, options), req, options) from exc
