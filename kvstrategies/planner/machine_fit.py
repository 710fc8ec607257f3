"""What fits my machine: every shipped model ranked by what it serves on ``count`` GPUs.

For each model of the catalog (the presets and the shipped checkpoints) the planner plans every
layout of the machine -- ``TP = t`` for each divisor ``t`` of ``count`` (``count / t`` replicas of
one TP group), ``EP`` 1 or ``t`` for an MoE model whose routed experts ``t`` divides, each KV dtype
asked -- and keeps the best: the most requests of ``request_length`` tokens held at once on the
whole machine (``requests per worker x attention-DP x replicas``), then the most tokens
(``max_total_num_tokens x replicas``), then the fewest GPUs per replica, then the KV dtype asked
first. A layout the planner refuses keeps its refusal (one line). Plans are made without the fix
search (:func:`~.deployment.plan_deployment` with ``suggest=False``) on one
:class:`~.model_reading.ModelReading` per model. TPs are tried largest first: when every variant
of a TP is refused for memory (:class:`~kvstrategies.errors.InsufficientMemoryError`), the smaller
TPs, which hold more weights per rank, are not planned (one line says so).

The ranking: the models that fit, most requests on the machine first (then most tokens, then
the name); then the models that fit no layout, by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.validate import check_sane_ints, trusted
from ..errors import InsufficientMemoryError, KVCacheConfigError
from .config_fields import validate_config_fields
from .deployment import plan_deployment
from .fit import rejected_reason
from .flag_names import flag_wording
from .gpus import Accelerator
from .model_reading import ModelReading
from .moe_layout import num_routed_experts
from .request import DeploymentRequest

#: the KV dtypes tried when none are named: the launch's choice, then FP8 (half the bytes a token)
DEFAULT_KV_DTYPES: tuple[str | None, ...] = (None, "fp8_e4m3")
#: the request length (tokens) answered without ``--request-length``
DEFAULT_FIT_LENGTH = 8192
#: most GPUs a machine may have (one TP group of them is planned)
MAX_GPU_COUNT = 1024


@dataclass(frozen=True)
class Layout:
    """One way to run a model on the machine: ``replicas`` TP groups of ``tp`` GPUs, ``ep``
    expert-parallel ranks, ``kv`` the KV dtype asked (``None``: the launch's choice)."""

    tp: int
    ep: int
    kv: str | None
    replicas: int

    @property
    def label(self) -> str:
        """``TP 8 EP 8 kv fp8_e4m3 x 1`` (EP shown when above 1)."""
        ep = f" EP {self.ep}" if self.ep > 1 else ""
        return f"TP {self.tp}{ep} kv {self.kv or 'default'} x {self.replicas}"


@dataclass(frozen=True)
class LayoutFit:
    """A planned layout: per-rank ``tokens``, ``requests`` of the length per worker, the total on
    the machine, the KV dtype and page the launch resolved to, what bounds the requests, and the
    request length answered (the model's context when that is shorter than the default)."""

    layout: Layout
    kv_dtype: str
    page_size: int
    tokens: int
    requests: int
    total_tokens: int
    total_requests: int
    limited_by: str
    request_length: int

    def key(self) -> tuple[int, int, int]:
        """Larger is better: total requests, total tokens, fewer GPUs per replica."""
        return (self.total_requests, self.total_tokens, -self.layout.tp)


@dataclass(frozen=True)
class ModelFit:
    """One model on the machine: its best layout (``None`` when none fits) and each refusal."""

    model: str
    kind: str
    best: LayoutFit | None
    refusals: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return self.best is not None

    @property
    def reason(self) -> str | None:
        """Why nothing fits: the refusal of the largest TP planned (one line)."""
        if self.best is not None or not self.refusals:
            return None
        return self.refusals[0][1]

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        out: dict[str, Any] = {"model": self.model, "kind": self.kind, "fits": self.fits}
        if best is not None:
            out |= {"tp": best.layout.tp, "ep": best.layout.ep, "replicas": best.layout.replicas,
                    "kv_cache_dtype": best.kv_dtype, "page_size": best.page_size, "tokens_per_replica": best.tokens,
                    "requests_per_worker": best.requests, "total_tokens": best.total_tokens,
                    "total_requests": best.total_requests, "limited_by": best.limited_by,
                    "request_length": best.request_length}  # fmt: skip
        else:
            out["reason"] = self.reason
        out["refused"] = [{"layout": label, "reason": reason} for label, reason in self.refusals]
        return out


@dataclass(frozen=True)
class MachineFit:
    """The whole catalog on ``count`` x ``gpu`` at ``request_length`` (``None``: the default,
    capped at each model's context), ranked (module doc)."""

    gpu: str
    count: int
    request_length: int | None
    models: tuple[ModelFit, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "count": self.count, "request_length": self.request_length,
                "models": [m.to_dict() for m in self.models]}  # fmt: skip


def one_line_reason(message: str) -> str:
    """The first clause of a refusal, as the user reads it (flag names), at most 200 characters."""
    first = flag_wording(message).split("; ")[0].split(". ")[0]
    return first if len(first) <= 200 else first[:197] + "..."


def divisors(count: int) -> tuple[int, ...]:
    """The TP sizes of ``count`` GPUs, largest first: every divisor of ``count``."""
    return tuple(t for t in range(count, 0, -1) if count % t == 0)


def layouts_of(config: Any, count: int, kv_dtypes: Sequence[str | None]) -> tuple[tuple[Layout, ...], ...]:
    """The layouts of a model, grouped by TP (largest first): EP 1, and EP = TP for an MoE model
    whose routed experts TP divides."""
    experts = num_routed_experts(config)
    groups = []
    for tp in divisors(count):
        eps = (1, tp) if experts and tp > 1 and experts % tp == 0 else (1,)
        groups.append(tuple(Layout(tp, ep, kv, count // tp) for ep in eps for kv in kv_dtypes))
    return tuple(groups)


def plan_layout(base: DeploymentRequest, layout: Layout, model: ModelReading, length: int | None) -> LayoutFit:
    """Plan ``base`` in ``layout`` (no fix search) and read its fit at ``length`` tokens (``None``:
    :data:`DEFAULT_FIT_LENGTH`, or the model's context when shorter). A request longer than the
    context is refused as SGLang refuses it (:func:`~.fit.rejected_reason`)."""
    asked = DEFAULT_FIT_LENGTH if length is None else length
    req = base.replace(tp_size=layout.tp, ep_size=layout.ep, kv_cache_dtype=layout.kv, request_lengths=(asked,))
    plan = plan_deployment(req, suggest=False, model=model)
    item = plan.fit.lengths[0]
    if not item.served:
        if length is not None:
            raise KVCacheConfigError(rejected_reason(length, plan.fit.context_len))
        plan = plan_deployment(req.replace(request_lengths=(plan.fit.context_len,)), suggest=False, model=model)
        item = plan.fit.lengths[0]
    workers = plan.fit.attn_dp_size * layout.replicas
    tokens = plan.sizes.max_total_num_tokens
    return LayoutFit(layout, plan.planned.ctx.kv_cache_dtype.name, plan.planned.ctx.page_size, tokens,
                     item.requests, tokens * layout.replicas, item.requests * workers, item.limited_by,
                     item.request_length)  # fmt: skip


def fit_model_on(
    base: DeploymentRequest, count: int, length: int | None, kv_dtypes: Sequence[str | None], kind: str
) -> ModelFit:
    """The best layout of one model (module doc) and the refusals of the others."""
    try:
        model = ModelReading(base.hf_config())
        groups = layouts_of(model.config, count, kv_dtypes)
        check_sane_ints(model.config, "config")
        validate_config_fields(model.config)
    except KVCacheConfigError as exc:
        return ModelFit(base.model, kind, None, (("any", one_line_reason(str(exc))),))
    with trusted(model.config):  # checked once above: each layout's plan skips scanning it again
        return _best_layout(base, kind, model, groups, length)


def _best_layout(
    base: DeploymentRequest, kind: str, model: ModelReading, groups: tuple[tuple[Layout, ...], ...], length: int | None
) -> ModelFit:
    best: LayoutFit | None = None
    refusals: list[tuple[str, str]] = []
    for index, group in enumerate(groups):
        memory_only = True
        for layout in group:
            try:
                planned = plan_layout(base, layout, model, length)
            except KVCacheConfigError as exc:
                memory_only = memory_only and isinstance(exc, InsufficientMemoryError)
                refusals.append((layout.label, one_line_reason(str(exc))))
                continue
            memory_only = False
            if best is None or planned.key() > best.key():
                best = planned
        if memory_only and index + 1 < len(groups):
            smaller = groups[index + 1][0].tp
            refusals.append((f"TP {smaller} and below", f"not planned: TP {group[0].tp} has too little memory per "
                             "rank already, and a smaller TP holds more weights per rank"))  # fmt: skip
            break
    return ModelFit(base.model, kind, best, tuple(refusals))


def rank(models: Sequence[ModelFit]) -> tuple[ModelFit, ...]:
    """Fitting models by most requests, then most tokens, then name; then the rest by name."""
    fitting = sorted((m for m in models if m.best is not None),
                     key=lambda m: (-m.best.total_requests, -m.best.total_tokens, m.model.lower())  # type: ignore[union-attr]
                     )  # fmt: skip
    rest = sorted((m for m in models if m.best is None), key=lambda m: m.model.lower())
    return (*fitting, *rest)


def catalog_requests(gpu: Accelerator, **fields: Any) -> tuple[tuple[DeploymentRequest, str], ...]:
    """One base request per shipped model: each preset (by short name), then each shipped
    checkpoint (by HF id, its safetensors facts beside it), with ``fields`` set on each."""
    from ..checkpoints import shipped_checkpoints
    from ..presets import preset_index
    from .known_models import shipped_model

    out: list[tuple[DeploymentRequest, str]] = []
    for short in sorted(preset_index()):
        out.append((DeploymentRequest(model=short, source={"preset": short}, gpu=gpu, **fields), "preset"))
    for hf_id in sorted(shipped_checkpoints(), key=str.lower):
        shipped = shipped_model(hf_id)
        if shipped is None:  # pragma: no cover - every index entry resolves to itself
            continue
        source = {"hf_config": shipped.config, "checkpoint": str(shipped.folder)}
        req = DeploymentRequest(model=hf_id, source=source, gpu=gpu, model_folder=shipped.folder,
                                model_description=shipped.description, **fields)  # fmt: skip
        out.append((req, "checkpoint"))
    return tuple(out)


def fit_machine(
    gpu: Accelerator,
    count: int,
    *,
    request_length: int | None = None,
    kv_dtypes: Sequence[str | None] = DEFAULT_KV_DTYPES,
    requests: Sequence[tuple[DeploymentRequest, str]] | None = None,
) -> MachineFit:
    """Rank ``requests`` (default: the whole catalog, :func:`catalog_requests`) on ``count`` x ``gpu``
    for requests of ``request_length`` tokens (``None``: :data:`DEFAULT_FIT_LENGTH`, or a model's
    context when shorter)."""
    from ..core.validate import check_int

    check_int(count, "--count", minimum=1, maximum=MAX_GPU_COUNT)
    if request_length is not None:
        check_int(request_length, "--request-length", minimum=1, maximum=2**31)
    if not kv_dtypes:
        raise KVCacheConfigError("--kv-cache-dtype is empty; give a comma list, e.g. auto,fp8_e4m3")
    from ..sglang.flag_values import check_flag_value

    for name in kv_dtypes:  # a name SGLang refuses is the user's one error, not every model's refusal
        if name is not None:
            check_flag_value("--kv-cache-dtype", "--kv-cache-dtype", name)
    bases = catalog_requests(gpu) if requests is None else requests
    fits = [fit_model_on(base, count, request_length, kv_dtypes, kind) for base, kind in bases]
    return MachineFit(gpu.name, count, request_length, rank(fits))


def fit_table(result: MachineFit) -> str:
    """The ranking as a fixed-width table; a model that fits nowhere shows its refusal instead."""
    header = ("#", "model", "layout", "kv", "tokens", "req len", "requests", "limited by")
    rows = []
    for place, m in enumerate(result.models, 1):
        b = m.best
        if b is None:
            rows.append((str(place), m.model, "does not fit", "-", "-", "-", "-", m.reason or "-"))
            continue
        ep = f" EP {b.layout.ep}" if b.layout.ep > 1 else ""
        layout = f"TP {b.layout.tp}{ep}" + (f" x {b.layout.replicas}" if b.layout.replicas > 1 else "")
        rows.append((str(place), m.model, layout, b.kv_dtype, f"{b.total_tokens:,}", f"{b.request_length:,}",
                     f"{b.total_requests:,}", b.limited_by))  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header[:-1])]
    lines = ["  ".join([*(h.ljust(w) for h, w in zip(header[:-1], widths, strict=True)), header[-1]])]
    lines += ["  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]) for r in rows]
    return "\n".join(lines)
