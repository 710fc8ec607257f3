"""``kvstrategies compare``: one deployment answered for SGLang and for vLLM side by side.

SGLang's planned deployment beside vLLM's sizing of the same model on the same KV budget
(:mod:`kvstrategies.planner.compare`), and with a GPU each engine on its own rule's budget
(:mod:`kvstrategies.planner.compare_budgets`).
"""

from __future__ import annotations

import argparse
from typing import Any

from .arguments import accelerator, add_deployment_arguments, request_from_arguments


def add_parser(sub: Any, command: str) -> None:
    """The ``compare`` subparser, added to ``sub`` as ``command``."""
    from ..core.releases import NEWEST_VLLM

    compare = sub.add_parser(
        command,
        help="one deployment answered for SGLang and for vLLM side by side (tokens, concurrency, why they differ)",
        description=f"SGLang's planned deployment (its launch defaults and KV budget) beside {NEWEST_VLLM.label}'s "
        "sizing of the same model, GPU, TP and KV dtype on the same KV budget, at each --request-length (default: "
        "8192 and the model's context); with --gpu, a second table has each engine on its own rule's budget "
        "and why the budgets differ.",
    )
    add_deployment_arguments(compare)
    compare.add_argument("--gpu", default=None, help="GPU name (H100-80GB, H200, B200...)")
    compare.add_argument("--tp", "--tp-size", "--tensor-parallel-size", dest="tp", type=int, default=1)
    compare.add_argument("--pp-rank", type=int, default=0)
    compare.add_argument("--kv-cache-dtype", default=None)
    compare.add_argument("--page-size", type=int, default=None, help="SGLang's page size (vLLM picks its block)")
    compare.add_argument("--own-budgets", dest="own_budgets", action="store_const", const=True, default=None,
                         help="also plan vLLM on its own budget (its gpu_memory_utilization rule); the default "
                         "with --gpu, unless the KV budget is given")  # fmt: skip
    compare.add_argument("--vllm-version", default=None, metavar="X",
                         help=f"the vLLM release of the vLLM column (default {NEWEST_VLLM.text})")  # fmt: skip
    compare.add_argument("--no-own-budgets", dest="own_budgets", action="store_const", const=False,
                         help="only the same-budget table")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """``compare``: the SGLang plan beside vLLM's sizing on the same budget (:mod:`kvstrategies.planner.compare`)."""
    from ..planner.compare import compare_engines, comparison_text
    from ..planner.replan import plan_or_replan
    from ..vllm.planner.budget import planning_release

    release = planning_release(args.vllm_version)  # both tables: the same-budget one and vLLM's own budget rule

    lengths = tuple(args.request_lengths or ())
    deployment = plan_or_replan(request_from_arguments(args, accelerator(args.gpu, args.gpu_memory)))
    if not lengths:
        context = deployment.fit.context_len
        lengths = tuple(sorted({min(8192, context), context}))
        deployment = plan_or_replan(
            request_from_arguments(argparse.Namespace(**{**vars(args), "request_lengths": list(lengths)}),
                                   accelerator(args.gpu, args.gpu_memory))  # fmt: skip
        )
    gpu = deployment.request.gpu.name if deployment.request is not None and deployment.request.gpu else None
    print("\n".join(comparison_text(compare_engines(deployment, lengths, gpu, release))))
    own = args.own_budgets
    if own is None:  # each engine's own rule when both have one: a GPU named, SGLang's budget not given
        own = gpu is not None and deployment.request is not None and deployment.budget.source == "gpu"
    if own:
        from ..planner.compare_budgets import own_budget_rows, own_budget_text

        rows = own_budget_rows(deployment, lengths, gpu, release)
        print("\n".join(own_budget_text(deployment, rows, release)))
    return 0
