"""The planner's output: the ``"planner"`` JSON section and the human-readable sections
(defaults applied, budget and its assumptions, the breakdown table, the fit and its fixes).

The ``plan --json`` document of :mod:`kvstrategies.document` is left as is; everything here
goes under its own ``"planner"`` key.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..sglang.run_command import SGLangCommand, sglang_command
from .deployment import DeploymentPlan
from .request import DeploymentRequest

if TYPE_CHECKING:
    from .fixes import Fix

GIB = 2**30


def _gib(nbytes: int | float) -> str:
    return f"{nbytes / GIB:,.2f}"


def launch_document(plan: DeploymentPlan) -> dict[str, Any] | None:
    """Every resolved launch setting (``applied`` is reported as ``defaults``)."""
    if plan.launch is None:
        return None
    fields = asdict(plan.launch)
    fields.pop("applied")
    return fields


def workers(plan: DeploymentPlan) -> tuple[int, int]:
    """``(attention-DP workers per replica, data-parallel replicas)``: each worker has its own pool."""
    replicas = 1 if plan.request is None else plan.request.dp_replicas
    return plan.fit.attn_dp_size, replicas


def answer_document(plan: DeploymentPlan) -> dict[str, Any]:
    """The answer in numbers: per pool (one attention-DP worker) and in total over all workers."""
    dp, replicas = workers(plan)
    scale = dp * replicas
    return {
        "tokens_per_worker": plan.sizes.max_total_num_tokens,
        "max_running_requests_per_worker": plan.sizes.max_running_requests,
        "attention_dp_workers": dp,
        "dp_replicas": replicas,
        "tokens_total": plan.sizes.max_total_num_tokens * scale,
        "concurrency": [
            {"request_length": item.request_length, "per_worker": item.requests, "total": item.requests * scale,
             "limited_by": item.limited_by, "served": item.served}
            for item in plan.fit.lengths
        ],
        "context_fits": plan.fit.context_fits,
        "max_fitting_length": plan.fit.max_fitting_length,
    }  # fmt: skip


def answer_text(plan: DeploymentPlan) -> list[str]:
    """The answer first: tokens, requests and concurrency at the asked lengths (details follow)."""
    dp, replicas = workers(plan)
    scale = dp * replicas
    where = ""
    if plan.budget.source == "gpu" and plan.request is not None:
        req = plan.request
        where = f" on {plan.budget.gpu_name}, TP {req.tp_size}" + (f", PP {req.pp_size}" if req.pp_size > 1 else "")
    unit = []
    if dp > 1:
        unit.append(f"{dp} attention-DP workers")
    if replicas > 1:
        unit.append(f"{replicas} DP replicas" if dp == 1 else f"x {replicas} DP replicas")
    per = " per attention-DP worker" if dp > 1 else (" per replica" if replicas > 1 else "")
    release = plan.case.settings.release if plan.request is None else plan.request.release
    lines = [f"answer{where} ({release.label} launch defaults)"]
    if plan.request is not None and plan.request.model_description:
        lines.append(f"  model          {plan.request.model_description}")
    for assumed in plan.derived:
        if assumed.setting == "architecture":
            lines.append(f"  assumed        {assumed.reason}")
    lines += [
        f"  KV cache       {plan.sizes.max_total_num_tokens:,} tokens{per}, max_running_requests "
        f"{plan.sizes.max_running_requests:,}{per}",
    ]
    if scale > 1:
        lines.append(f"  in total       {plan.sizes.max_total_num_tokens * scale:,} tokens over {' '.join(unit)}")
    for item in plan.fit.lengths:
        if not item.served:
            lines.append(f"  {item.request_length:>9,}-token requests: {item.limited_by}")
            continue
        total = f" ({item.requests * scale:,} in total)" if scale > 1 else ""
        lines.append(
            f"  {item.request_length:>9,}-token requests: {item.requests:,} at once{per}{total}, limited by "
            f"{item.limited_by}"
        )
    fit = plan.fit
    if fit.context_fits:
        lines.append(f"  one request of the whole context ({fit.context_len:,} tokens) fits")
    else:
        lines.append(
            f"  one request of the whole context ({fit.context_len:,} tokens) does NOT fit; the longest that "
            f"fits is {fit.max_fitting_length:,} tokens (fixes below)"
        )
    return lines


def planner_document(plan: DeploymentPlan) -> dict[str, Any]:
    """The JSON-able ``"planner"`` section."""
    budget = asdict(plan.budget)
    budget["assumptions"] = list(plan.budget.assumptions)
    return {
        "sglang_version": (plan.case.settings.release if plan.request is None else plan.request.release).text,
        "answer": answer_document(plan),
        "model_folder": None if plan.request is None or plan.request.model_folder is None
        else str(plan.request.model_folder),
        "model_source": None if plan.request is None else plan.request.model_description,
        "mode": plan.budget.source,
        "gpu": plan.budget.gpu_name,
        "defaults": [asdict(item) for item in plan.defaults],
        "launch": launch_document(plan),
        "budget": budget,
        "breakdown": plan.breakdown.to_dict(),
        "tokens": plan.sizes.max_total_num_tokens,
        "max_running_requests": plan.sizes.max_running_requests,
        "final_sizes": plan.sizes.to_dict(),
        "fit": plan.fit.to_dict(),
        "fixes": [fix_document(fix, plan.request) for fix in plan.fixes],
        "sglang_command": None if plan.request is None else sglang_command(plan.request).to_dict(),
    }


def fix_document(fix: Fix, req: DeploymentRequest | None) -> dict[str, Any]:
    """A fix as JSON, with the launch command that applies it."""
    out = fix.to_dict()
    out["sglang_command"] = None if req is None else sglang_command(fix.request(req)).to_dict()
    return out


def command_lines(command: SGLangCommand, indent: str = "  ") -> list[str]:
    """The command on its own line (ready to paste), then what it cannot say."""
    return [f"{indent}{command.text}", *(f"{indent}# {note}" for note in command.notes)]


def run_text(plan: DeploymentPlan) -> list[str]:
    """``run it``: the launch command that realizes the plan (none for a case-file plan)."""
    if plan.request is None:
        return []
    return [f"run it ({plan.request.release.label})", *command_lines(sglang_command(plan.request))]


def fix_lines(fix: Fix, req: DeploymentRequest | None, baseline: int | None, indent: str = "    ") -> list[str]:
    """One ranked fix: what it gives (tokens, longest request), its cost, and its command."""
    gain = f" (x{fix.capacity_tokens / baseline:.2f})" if baseline else ""
    whole = "whole context fits" if fix.context_fits else "the whole context still does not fit"
    note = f"; {fix.note}" if fix.note else ""
    lines = [f"{indent}{fix.flag:<32} -> {fix.capacity_tokens:,} tokens{gain}, longest request "
             f"{fix.max_fitting_length:,}: {whole}{note}"]  # fmt: skip
    if fix.cost:
        lines.append(f"{indent}    cost: {fix.cost}")
    if req is not None:
        command = sglang_command(fix.request(req))
        lines.append(f"{indent}    run:  {command.text}")
        lines += [f"{indent}          # {text}" for text in command.notes]
    return lines


def fixes_text(plan: DeploymentPlan, indent: str = "  ") -> list[str]:
    if not plan.fixes:
        return []
    lines = [f"{indent}fixes, each planned again (cheapest first):"]
    for fix in plan.fixes:
        lines += fix_lines(fix, plan.request, plan.fit.answer_tokens, indent + "  ")
    return lines


def brief_text(plan: DeploymentPlan) -> str:
    """``--brief``: the answer, the command that realizes it, and the ranked fixes when the
    whole context does not fit."""
    return "\n".join([*answer_text(plan), *run_text(plan), *fixes_text(plan)])


def defaults_text(plan: DeploymentPlan) -> list[str]:
    req = plan.request
    if plan.launch is None:
        head = "defaults applied (no --gpu: SGLang's field defaults, no launch heuristics)"
    else:
        where = "" if req is None else f" for {plan.budget.gpu_name}, tp {req.tp_size}, pp {req.pp_size}"
        release = plan.case.settings.release if req is None else req.release
        head = f"defaults applied ({release.label} launch{where}; last one wins)"
    lines = [head]
    if not plan.defaults:
        lines.append(
            "  none: every setting was given" if req is not None else "  none: the case file gives every setting"
        )
    for item in plan.defaults:
        lines.append(f"  {item.setting:<30}{item.value!s:<16}{item.reason}")
    return lines


def budget_text(plan: DeploymentPlan) -> list[str]:
    b = plan.budget
    if b.source == "gpu":
        head = (
            f"budget step    {b.gpu_name} {_gib(b.capacity_bytes or 0)} GiB, mem_fraction_static "
            f"{b.mem_fraction_static:g}, weights {_gib(b.weight_bytes or 0)} GiB per rank "
            f"({b.weight_origin or 'estimate'}) -> KV budget "
            f"{_gib(b.available_bytes)} GiB per rank"
        )
    else:
        head = f"budget step    skipped: KV budget {_gib(b.available_bytes)} GiB per rank given"
    return [head, *(f"  - {text}" for text in b.assumptions)]


def breakdown_text(plan: DeploymentPlan) -> list[str]:
    bd = plan.breakdown
    whole = bd.capacity_bytes or bd.total_bytes
    area = {"gpu": "gpu", "kv-budget": "KV", "slack": "slack"}
    lines = [f"{'breakdown (one rank)':<62}{'bytes':>18}{'GiB':>10}{'share':>8}"]
    for row in bd.rows:
        share = f"{100 * row.nbytes / whole:.1f}%" if whole else ""
        lines.append(f"  {area[row.area]:<6}{row.label:<54}{row.nbytes:>18,}{_gib(row.nbytes):>10}{share:>8}")
    lines.append(f"  {'KV budget':<60}{bd.budget_bytes:>18,}{_gib(bd.budget_bytes):>10}")
    lines.append(f"  {'KV pools charged to it':<60}{bd.pools_bytes:>18,}{_gib(bd.pools_bytes):>10}")
    lines.append(f"  {'left':<60}{bd.left_bytes:>18,}{_gib(bd.left_bytes):>10}")
    if bd.capacity_bytes is not None:
        lines.append(f"  {'GPU capacity':<60}{bd.capacity_bytes:>18,}{_gib(bd.capacity_bytes):>10}")
    lines.extend(f"note: {text}" for text in bd.notes)
    lines.extend(f"WARNING: {text}" for text in bd.warnings)
    return lines


def fit_text(plan: DeploymentPlan) -> list[str]:
    fit = plan.fit
    dp, replicas = workers(plan)
    scale = dp * replicas
    per = " per attention-DP worker" if dp > 1 else (" per replica" if replicas > 1 else "")
    lines = [
        f"fit            {fit.capacity_tokens:,} tokens (page {fit.page_size}), "
        f"max_running_requests {fit.max_running_requests:,}{per}",
    ]
    if scale > 1:
        lines.append(f"  {'request length':>16}{'per worker':>14}{'total':>10}  limited by")
    else:
        lines.append(f"  {'request length':>16}{'concurrency':>14}  limited by")
    for item in fit.lengths:
        total = f"{item.requests * scale:>10,}" if scale > 1 else ""
        lines.append(f"  {item.request_length:>16,}{item.requests:>14,}{total}  {item.limited_by}")
    if fit.context_fits:
        lines.append(f"  one request of the model's whole context ({fit.context_len:,} tokens) fits")
    else:
        lines.append(
            f"  one request of the model's whole context ({fit.context_len:,} tokens) does NOT fit; "
            f"the longest that fits is {fit.max_fitting_length:,} tokens"
        )
        lines += fixes_text(plan)
    lines.append(f"  SGLang's own limit: max_req_len = min(context_len - 1, capacity - 1) = {fit.sglang_max_req_len:,}")
    return lines


def planner_text(plan: DeploymentPlan) -> str:
    """The planner's human-readable sections."""
    sections = (defaults_text(plan), budget_text(plan), breakdown_text(plan), fit_text(plan))
    return "\n\n".join("\n".join(section) for section in sections)
