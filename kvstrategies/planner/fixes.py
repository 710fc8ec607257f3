"""Settings that give a deployment more room, each verified by planning the changed deployment
again (never by extrapolating a formula), ranked by what they give and what they cost.

Two uses. :func:`suggest_fixes`: the model's whole context does not fit the plan; every
candidate that adds token capacity (or makes the context fit) is listed. :func:`replan_options`
(via :mod:`.replan`): the deployment cannot be planned at all (the weights do not fit, nothing
is left for the KV cache); every candidate with which it plans is listed.

Candidates, cheapest first (:data:`COST_ORDER`): an FP8 KV cache (when the cache is 16-bit or
wider); FP8 weights quantized at load (``--quantization fp8``, a 16-bit checkpoint on a GPU
budget); the smallest ``--mem-fraction-static`` that fits (GPU mode, steps of 0.001 up to 0.95);
a shorter ``--context-length`` equal to the longest request that fits now; the smallest larger
TP size up to 8 (then TP 8 x PP 2), the per-rank budget recomputed from the GPU (a given
``--available-bytes`` kept per rank, a given ``--weight-bytes`` scaled by ``tp / new_tp``); the
next larger GPU of the same platform in :data:`~.gpus.GPUS` (confirmed capacities only). Each
says its cost in words (:attr:`Fix.cost`) and what it gives (tokens, whether the whole context
fits). Ranked cheapest first, then by the tokens it gives: the kinds of cost are accuracy (FP8),
then risk (less room for activations), then capability (shorter requests), then hardware.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..api import Plan
from ..errors import KVCacheConfigError
from ..sglang.budget import KVBudget
from .fit import FitReport
from .gpus import GPUS, Accelerator
from .request import GIB, DeploymentRequest


class PlannedDeployment(Protocol):
    """What the fixes read of a planned deployment (``planner.deployment.DeploymentPlan`` is one).

    A protocol, so that this module does not import the deployment module that calls it.
    """

    @property
    def fit(self) -> FitReport: ...

    @property
    def budget(self) -> KVBudget: ...

    @property
    def planned(self) -> Plan: ...


class SizedCandidate(Protocol):
    """A changed deployment, sized (``planner.deployment.SizedDeployment`` is one): the search
    reads its fit and budget, and lays out (:meth:`laid_out`) only a candidate it offers."""

    @property
    def fit(self) -> FitReport: ...

    @property
    def budget(self) -> KVBudget: ...

    def laid_out(self) -> object:
        """The planned deployment; raises :class:`KVCacheConfigError` when its pools cannot be laid out."""
        ...


Replan = Callable[[DeploymentRequest], SizedCandidate]
MAX_SUGGESTED_TP = 8
MAX_SUGGESTED_MFS = 0.95
#: the kinds of change, cheapest first: accuracy, then risk, then capability, then hardware
COST_ORDER = ("kv_cache_dtype", "weight_quantization", "mem_fraction_static", "context_length", "tp_size", "gpu")
COST_FP8_KV = (
    "K and V stored in 8 bits (FP8 e4m3, scale 1.0 unless the checkpoint ships KV scales): a small accuracy "
    "loss; check it on your own evaluations"
)
COST_FP8_WEIGHTS = (
    "the 16-bit weights quantized to FP8 as SGLang loads them (per-tensor scales): a small accuracy loss and "
    "a slower start-up"
)


@dataclass(frozen=True)
class Fix:
    """One change, what the re-planned deployment gives with it, and what it costs.

    ``changes`` are the :class:`~.request.DeploymentRequest` fields to replace (``gpu`` holds an
    :class:`~.gpus.Accelerator`); ``context_fits`` says whether one request of the model's whole
    context fits after the change. ``capacity_tokens`` is the token capacity the changed plan's
    answer prints (SGLang's ``max_total_num_tokens``: what the fix's command plans).
    """

    setting: str
    value: str | int | float
    flag: str
    capacity_tokens: int
    max_fitting_length: int
    note: str = ""
    cost: str = ""
    context_fits: bool = True
    changes: tuple[tuple[str, Any], ...] = ()

    @property
    def cost_rank(self) -> int:
        return COST_ORDER.index(self.setting) if self.setting in COST_ORDER else len(COST_ORDER)

    def request(self, req: DeploymentRequest) -> DeploymentRequest:
        """``req`` with this fix applied."""
        return req.replace(**dict(self.changes))

    def to_dict(self) -> dict[str, Any]:
        changes = {k: (v.name if isinstance(v, Accelerator) else v) for k, v in self.changes}
        return {"setting": self.setting, "value": self.value, "flag": self.flag,
                "capacity_tokens": self.capacity_tokens, "max_fitting_length": self.max_fitting_length,
                "context_fits": self.context_fits, "cost": self.cost, "note": self.note,
                "changes": changes}  # fmt: skip


def _try(replan: Replan, req: DeploymentRequest) -> SizedCandidate | None:
    try:
        return replan(req)
    except KVCacheConfigError:
        return None


def _lays_out(candidate: SizedCandidate) -> bool:
    """Whether the candidate's pools can be laid out: a fix is offered only when its whole plan
    succeeds, as a plan of the changed request would."""
    try:
        candidate.laid_out()
    except KVCacheConfigError:
        return False
    return True


def _fix(setting: str, value: str | int | float, flag: str, plan: SizedCandidate, cost: str,
         changes: Mapping[str, Any], note: str = "") -> Fix:  # fmt: skip
    fit = plan.fit
    return Fix(setting, value, flag, fit.answer_tokens, fit.max_fitting_length, note, cost, fit.context_fits,
               tuple(changes.items()))  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """A change that gains (:meth:`Search.gains`), sized but not yet laid out."""

    fix: Fix
    sized: SizedCandidate


def first_laid_out(candidates: Iterable[Candidate]) -> Fix | None:
    """The first candidate, in the order given, whose pools can be laid out."""
    return next((c.fix for c in candidates if _lays_out(c.sized)), None)


@dataclass(frozen=True)
class Search:
    """One search: the request, how to plan a change, and the capacity a fix must beat
    (``baseline`` tokens; 0 when the request itself cannot be planned)."""

    req: DeploymentRequest
    replan: Replan
    baseline: int
    current: PlannedDeployment | None = None

    def gains(self, plan: SizedCandidate | None) -> bool:
        """The changed plan fits the whole context, or holds more tokens than now."""
        return plan is not None and (plan.fit.context_fits or plan.fit.capacity_tokens > self.baseline)

    def candidate(self, setting: str, value: str | int | float, flag: str, cost: str, note: str = "",
                  **changes: Any) -> Candidate | None:  # fmt: skip
        """The change, sized, when it gains (not yet laid out: :func:`first_laid_out`)."""
        changed = _try(self.replan, self.req.replace(**changes))
        if changed is None or not self.gains(changed):
            return None
        return Candidate(_fix(setting, value, flag, changed, cost, changes, note), changed)

    def attempt(self, setting: str, value: str | int | float, flag: str, cost: str, note: str = "",
                **changes: Any) -> Fix | None:  # fmt: skip
        """The change as a fix, when it gains and its pools can be laid out."""
        found = self.candidate(setting, value, flag, cost, note, **changes)
        return None if found is None else first_laid_out((found,))


def _kv_itemsize(search: Search) -> float | None:
    if search.current is not None:
        return float(search.current.planned.ctx.kv_cache_dtype.itemsize)
    kv = search.req.kv_cache_dtype
    return 2.0 if kv in (None, "auto", "bf16", "bfloat16", "fp16", "float16") else None


def _kv_fp8(search: Search) -> Fix | None:
    itemsize = _kv_itemsize(search)
    if itemsize is None or itemsize < 2:
        return None
    return search.attempt("kv_cache_dtype", "fp8_e4m3", "--kv-cache-dtype fp8_e4m3", COST_FP8_KV,
                          kv_cache_dtype="fp8_e4m3")  # fmt: skip


def _weights_fp8(search: Search) -> Fix | None:
    req = search.req
    if req.gpu is None or req.available_bytes is not None or req.weight_bytes is not None:
        return None
    if req.weight_quantization is not None or req.hf_config().get("quantization_config"):
        return None
    return search.attempt("weight_quantization", "fp8", "--quantization fp8", COST_FP8_WEIGHTS,
                          weight_quantization="fp8")  # fmt: skip


def _gpus(count: int) -> str:
    return f"{count} GPUs" + (" (more than one 8-GPU node)" if count > 8 else "")


def _tensor_parallel(search: Search) -> Fix | None:
    req = search.req
    world = req.tp_size * req.pp_size * req.dp_replicas
    layouts = [(tp, req.pp_size) for tp in (req.tp_size * 2**k for k in range(1, 4)) if tp <= MAX_SUGGESTED_TP]
    if req.tp_size * 2 > MAX_SUGGESTED_TP or search.current is None:
        layouts.append((MAX_SUGGESTED_TP, req.pp_size * 2))  # TP 8 x PP 2: two nodes
    short: list[Candidate] = []  # gains, the whole context still does not fit
    for tp, pp in layouts:
        if (tp, pp) == (req.tp_size, req.pp_size):
            continue
        weights = None if req.weight_bytes is None else req.weight_bytes * req.tp_size * req.pp_size // (tp * pp)
        note = "same KV budget per rank (--available-bytes)" if req.available_bytes is not None else ""
        flag = f"--tp {tp}" + (f" --pp-size {pp}" if pp != req.pp_size else "")
        cost = f"{_gpus(tp * pp * req.dp_replicas)} instead of {world}"
        changes = {"tp_size": tp, "pp_size": pp, "weight_bytes": weights}
        found = search.candidate("tp_size", tp, flag, cost, note, **changes)
        if found is not None and found.fix.context_fits:
            if _lays_out(found.sized):
                return found.fix
        elif found is not None:
            short.append(found)
    # else the most tokens (the smallest layout among equals), laid out only now
    return first_laid_out(sorted(short, key=lambda c: -c.fix.capacity_tokens))


def _slack_text(budget: KVBudget) -> str:
    slack, capacity = budget.slack_bytes or 0, budget.capacity_bytes or 1
    return f"{slack / GIB:.2f} GiB ({100 * slack / capacity:.1f}% of the GPU)"


def _mem_fraction(search: Search) -> Fix | None:
    req = search.req
    if req.available_bytes is not None or req.gpu is None:
        return None
    mfs = search.current.budget.mem_fraction_static if search.current is not None else req.mem_fraction_static
    start = 1 if mfs is None else round(mfs * 1000) + 1
    stop = round(MAX_SUGGESTED_MFS * 1000)
    if start > stop:
        return None

    planned: dict[int, SizedCandidate | None] = {}

    def plan_at(thousandths: int) -> SizedCandidate | None:
        """The plan at this fraction when the whole context fits (laid out only then)."""
        if thousandths not in planned:
            changed = _try(search.replan, req.replace(mem_fraction_static=thousandths / 1000))
            fits = changed is not None and changed.fit.context_fits and _lays_out(changed)
            planned[thousandths] = changed if fits else None
        return planned[thousandths]

    top = plan_at(stop)
    if top is None:
        return None
    lo, hi = start, stop  # the smallest fraction that works (monotone): plan_at(hi) always works
    guess = _fraction_guess(search, start - 1, top, stop)
    if guess is not None and lo <= guess < hi:
        if plan_at(guess) is None:
            lo = guess + 1
        elif guess == lo or plan_at(guess - 1) is None:
            lo = hi = guess  # works, and one step less does not: the smallest
        else:
            hi = guess - 1
    while lo < hi:  # binary search in what is left
        mid = (lo + hi) // 2
        if plan_at(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    changed = plan_at(lo)
    assert changed is not None
    was = "" if search.current is None else f", against {_slack_text(search.current.budget)} now"
    cost = (
        f"leaves {_slack_text(changed.budget)} for activations, CUDA graphs and the request table{was}: "
        "out-of-memory risk under peak load or at CUDA-graph capture (a lower --cuda-graph-max-bs-decode or "
        "--chunked-prefill-size makes room)"
    )
    value = lo / 1000
    return _fix("mem_fraction_static", value, f"--mem-fraction-static {value:.3f}", changed, cost,
                {"mem_fraction_static": value})  # fmt: skip


def _fraction_guess(search: Search, now: int, top: SizedCandidate, stop: int) -> int | None:
    """Where the token capacity, straight between the current plan (``now`` thousandths) and the
    plan at ``stop``, reaches the model's context: the first fraction :func:`_mem_fraction` plans
    (then the one below it, which settles the answer when the line was right; a binary search
    over what is left when it was not). ``None`` without a current plan."""
    current = search.current
    if current is None or now < 1:
        return None
    low, high = current.fit.capacity_tokens, top.fit.capacity_tokens
    if high <= low:
        return None
    need = current.fit.context_len - low
    return now + -(-need * (stop - now) // (high - low))


def _context_length(search: Search) -> Fix | None:
    """``--context-length`` = the longest request that fits now, planned again (a shorter
    context also shrinks the RoPE cache, so the capacity can grow a little)."""
    current = search.current
    if current is None or current.fit.max_fitting_length < 1:
        return None
    length = current.fit.max_fitting_length
    cost = f"requests longer than {length:,} tokens are refused (the model's context is {current.fit.context_len:,})"
    return search.attempt("context_length", length, f"--context-length {length}", cost, "serve shorter requests",
                          context_length=length)  # fmt: skip


def _larger_gpu(search: Search) -> Fix | None:
    gpu = search.req.gpu
    if gpu is None or gpu.capacity_mib is None or search.req.available_bytes is not None:
        return None
    larger = sorted((g for g in GPUS if g.platform == gpu.platform and g.source and g.capacity_mib is not None
                     and g.capacity_mib > gpu.capacity_mib), key=lambda g: g.capacity_mib or 0)  # fmt: skip
    short: list[Candidate] = []  # gains, the whole context still does not fit
    for other in larger:
        size = (other.capacity_mib or 0) / 1024
        cost = f"another GPU: {other.name}, {size:.0f} GiB instead of {gpu.capacity_mib / 1024:.0f}"
        found = search.candidate("gpu", other.name, f"--gpu {other.name}", cost, gpu=other)
        if found is not None and found.fix.context_fits:
            if _lays_out(found.sized):
                return found.fix
        elif found is not None:
            short.append(found)
    return first_laid_out(short)  # else the smallest GPU that gains, laid out only now


CANDIDATES: tuple[Callable[[Search], Fix | None], ...] = (
    _kv_fp8, _weights_fp8, _mem_fraction, _context_length, _tensor_parallel, _larger_gpu,
)  # fmt: skip


def rank(fixes: Iterable[Fix | None]) -> tuple[Fix, ...]:
    """Cheapest first (:data:`COST_ORDER`), then more tokens, then the whole context fitting."""
    found = [fix for fix in fixes if fix is not None]
    return tuple(sorted(found, key=lambda f: (f.cost_rank, -f.capacity_tokens, not f.context_fits)))


def suggest_fixes(current: PlannedDeployment, req: DeploymentRequest, replan: Replan) -> tuple[Fix, ...]:
    """Every candidate that adds capacity or makes the model's whole context fit (empty when it
    already does); ``current`` is the plan of ``req``, ``replan`` plans a changed request (without fixes)."""
    if current.fit.context_fits:
        return ()
    search = Search(req, replan, current.fit.capacity_tokens, current)
    return rank(candidate(search) for candidate in CANDIDATES)


def replan_options(req: DeploymentRequest, replan: Replan) -> tuple[Fix, ...]:
    """Every candidate with which ``req``, which cannot be planned, plans."""
    search = Search(req, replan, 0)
    return rank(candidate(search) for candidate in CANDIDATES)
