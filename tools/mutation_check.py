#!/usr/bin/env python3
"""Mutation check: do the golden and hand-computed tests notice a wrong formula?

Applies one AST mutation at a time to the files of a module group (:data:`GROUPS`, which
cover every module of the package but those :data:`EXCLUDED` with their reason) in a scratch
copy of the repository (the working tree is never touched, so other people's test runs are
safe), runs that group's tests there (``-x -q`` with a timeout),
and reports each mutant as killed (a test failed, or the mutant broke the import or timed out)
or survived, with the kill rate per group.

Mutations (outside error messages, f-strings, asserts, annotations and docstrings):
``+`` <-> ``-`` (also ``+=``/``-=``), ``*`` <-> ``//``, an integer constant ``c`` -> ``c + 1``,
a sum ``a + b`` -> ``a`` and -> ``b`` (drop a term), ``align_down / ceil_div / ceil_align``
off by one (``f(x, p) + 1`` and ``f(x + 1, p)``), comparison boundaries ``<`` <-> ``<=`` and
``>`` <-> ``>=``.

    python tools/mutation_check.py                                  # every mutant of every group
    python tools/mutation_check.py --sample 40 --seed 1             # 40 random mutants per group
    python tools/mutation_check.py --groups allocators planner --sample 15 -j 2
    python tools/mutation_check.py --files kvstrategies/strategies/default.py --list
    python tools/mutation_check.py --tests tests/strategies/test_default.py -j 8 --timeout 60
    python tools/mutation_check.py --files kvstrategies/strategies/dsv4.py --match 'dsv4.py:4[0-9][0-9] '

Tests that already fail before any mutation (work in progress) are deselected and named.
Equivalent mutants (no input can tell them apart: see :data:`EQUIVALENT`, and ``x + 0`` ->
``x - 0`` / ``x``) are listed apart, never run and left out of the kill rate. Every allow-list
entry must match exactly one mutant (not a line: a line holds several mutants, and a killable
one must never hide behind an equivalent neighbour); the run stops (exit 2) naming any entry
that matches none or several.
``--match REGEX`` keeps the mutants whose label matches (e.g. to re-run a report's survivors).
Exit 0 when the kill rate reaches ``--min-kill-rate`` (default 0: report only), else 1.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = ("kvstrategies/strategies/*.py", "kvstrategies/pools/*.py")
# the allocator choice and the request table (KVCacheConfigurator._build_token_to_kv_pool_allocator,
# ReqToTokenPool), pinned by hand among the write-path tests
ALLOCATOR_CHOICE_TESTS = (
    "tests/pools/test_write_path.py::test_fresh_allocator_rows",
    "tests/pools/test_write_path.py::test_a_draft_worker_reuses_the_target_allocator",
    "tests/pools/test_write_path.py::test_request_table_has_one_padding_row_by_default",
    "tests/pools/test_write_path.py::test_req_to_token_pool_without_the_padding_row_hands_out_row_zero",
)
# the golden snapshots plus the hand-computed strategy tests (whichever exist)
SIZING_TESTS = (
    "tests/golden/test_golden.py::test_golden_snapshot",
    "tests/golden/test_golden.py::test_meta_build",
    "tests/strategies/test_default*.py",
    "tests/package/test_basics.py",
    "tests/strategies/test_hybrid*.py",
    "tests/strategies/test_swa*.py",
    "tests/strategies/test_dsv4*.py",
    "tests/strategies/test_ascend*.py",
    "tests/strategies/test_npu*.py",
    "tests/strategies/test_mamba*.py",
    "tests/pools/test_layout*.py",
    "tests/package/test_examples*.py",
    *ALLOCATOR_CHOICE_TESTS,
)
DEFAULT_TESTS = SIZING_TESTS


@dataclass(frozen=True)
class Group:
    """A module group: the files mutated and the tests that must notice."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    exclude: tuple[str, ...] = ()  # files another group mutates with its own tests

    def sources(self) -> list[str]:
        """The Python files mutated: ``files`` expanded, less ``exclude`` and :data:`EXCLUDED`."""
        return [f for f in _expand(list(self.files)) if f.endswith(".py") and f not in self.exclude
                and f not in EXCLUDED]


# SGLang's recorded answers, read by the project for the newest release, the last ModelRunner-mixin release, and the
# releases that size through the ModelRunner's own methods (0.5.10 to 0.5.4); every catalog case. The other
# releases add time, rarely a kill: their differences are release rules with hand tests
SGLANG_GOLDENS = (
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.23-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.15-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.10-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.9-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.8-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.7-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.6-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.5-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.3-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.2-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.1-*]",
    "tests/sglang/test_sglang_golden.py::test_project_matches_sglang[0.5.4-*]",
)
# the 2,005 recorded launch resolutions of the newest and the oldest release
LAUNCH_GOLDENS = (
    "tests/sglang/test_launch_sglang_golden.py::*[0.5.23]",
    "tests/sglang/test_launch_sglang_golden.py::*[0.5.15]",
)
CATALOG_GOLDENS = ("tests/golden/test_golden.py::test_golden_snapshot",)

#: the sizing steps every strategy shares (``kvstrategies/strategies/``), mutated with the sizing group
SIZING_STEPS = (
    "kvstrategies/strategies/request_math.py", "kvstrategies/strategies/resolve.py",
    "kvstrategies/strategies/mla_dims.py", "kvstrategies/strategies/layer_setup.py",
    "kvstrategies/strategies/budget_check.py",
)

#: every module group the check covers; ``--groups`` picks some (default: all). Each group's tests
#: run fast hand-computed tests first and the recorded goldens last (``-x`` stops at the first kill).
GROUPS: dict[str, Group] = {
    "sizing": Group(
        ("kvstrategies/context.py", "kvstrategies/api.py", *SIZING_STEPS, "kvstrategies/core/sizing.py",
         "kvstrategies/core/dtypes.py", "kvstrategies/core/host_memory.py", "kvstrategies/core/cost.py"),
        ("tests/core/test_cost.py", "tests/test_context.py", "tests/strategies/test_request_math.py",
         "tests/package/test_basics.py", "tests/strategies/test_default.py",
         "tests/strategies/test_release_rules.py", "tests/strategies/test_rounding_rules.py",
         "tests/test_api_inputs.py",
         "tests/package/test_bounded_inputs.py", "tests/strategies/test_dsv4.py",
         "tests/strategies/test_default_advanced.py",
         "tests/strategies/test_hybrid_linear.py", "tests/strategies/test_hybrid_swa.py",
         "tests/strategies/test_ascend.py", "tests/strategies/test_engine_edges.py", *ALLOCATOR_CHOICE_TESTS,
         *CATALOG_GOLDENS, *SGLANG_GOLDENS),
    ),
    "strategies": Group(
        ("kvstrategies/strategies/*.py",),
        (*SIZING_TESTS[2:], "tests/strategies/test_release_rules.py", "tests/strategies/test_rounding_rules.py",
         "tests/strategies/test_strategy_registry.py", *SIZING_TESTS[:2], *SGLANG_GOLDENS),
        exclude=SIZING_STEPS,
    ),
    "pools": Group(
        ("kvstrategies/pools/*.py", "kvstrategies/pools/runtime/*.py"),
        (*SIZING_TESTS[2:], "tests/strategies/test_rounding_rules.py", "tests/allocators/test_allocators.py",
         "tests/pools/test_write_path.py", *SIZING_TESTS[:2], *SGLANG_GOLDENS),
    ),
    "allocators": Group(
        ("kvstrategies/allocators/*.py",),
        ("tests/allocators/test_allocators.py", "tests/allocators/test_fuzz_allocators.py",
         "tests/pools/test_write_path.py"),
    ),
    "models": Group(
        ("kvstrategies/models/*.py", "kvstrategies/models/parsers/*.py", "kvstrategies/presets/__init__.py",
         "kvstrategies/checkpoints/__init__.py"),
        ("tests/models/test_architectures.py", "tests/planner/test_weights.py", "tests/package/test_basics.py",
         "tests/package/test_robustness.py", "tests/strategies/test_hybrid*.py", "tests/strategies/test_dsv4*.py",
         "tests/strategies/test_default*.py",
         "tests/strategies/test_ascend.py", *ALLOCATOR_CHOICE_TESTS, "tests/checkpoints/test_shipped_checkpoints.py",
         "tests/sglang/test_weight_release_rules.py", "tests/planner/test_weights_vision_and_glm.py",
         *CATALOG_GOLDENS, *SGLANG_GOLDENS),
    ),
    "planner": Group(
        ("kvstrategies/planner/*.py", "kvstrategies/sglang/*.py", "kvstrategies/sglang/launch/apply.py",
         "kvstrategies/sglang/tables/flags.py"),
        ("tests/planner/test_checkpoint.py", "tests/planner/test_weights_quant.py",
         "tests/sglang/test_preload.py", "tests/planner/test_planner.py",
         "tests/planner/test_fix_search.py", "tests/sglang/test_pasted_command.py", "tests/planner/test_sweep_grid.py",
         "tests/sglang/test_refusals.py", "tests/sglang/test_load_refusals.py", "tests/sglang/test_run_command.py",
         "tests/strategies/test_draft_and_partial_plans.py", "tests/planner/test_gpus.py",
         "tests/planner/test_model_source.py", "tests/planner/test_machine_fit.py",
         "tests/sglang/test_launch_defaults.py", "tests/cli/test_cli_planner.py", "tests/package/test_robustness.py",
         "tests/sglang/test_published_logs.py", "tests/sglang/test_weight_recordings.py",
         "tests/sglang/test_weight_fixes.py", "tests/sglang/test_weight_release_rules.py", *LAUNCH_GOLDENS),
        # the weight estimate is a group of its own; the knobs are the releases group's
        exclude=("kvstrategies/planner/weights.py", "kvstrategies/sglang/knobs.py"),
    ),
    "weights": Group(
        ("kvstrategies/planner/weights.py",),
        ("tests/planner/test_weights.py", "tests/sglang/test_weight_recordings.py", "tests/sglang/test_weight_fixes.py",
         "tests/sglang/test_weight_release_rules.py", "tests/planner/test_weights_quant.py",
         "tests/planner/test_weights_published.py", "tests/sglang/test_load_refusals.py",
         "tests/planner/test_planner.py", "tests/planner/test_weights_vision_and_glm.py",
         "tests/sglang/test_published_logs.py", "tests/package/test_robustness.py"),
    ),
    "launch_defaults": Group(
        ("kvstrategies/sglang/launch/defaults/*.py",),
        ("tests/sglang/test_launch_defaults.py", "tests/sglang/test_launch_release_rules.py",
         "tests/sglang/test_launch_sglang_rules.py", "tests/planner/test_planner.py",
         "tests/sglang/test_published_logs.py", *LAUNCH_GOLDENS,
         "tests/cli/test_cli_planner.py", "tests/package/test_robustness.py"),
    ),
    "sglang_compare": Group(
        ("kvstrategies/sglang/bridge/compare.py", "kvstrategies/sglang/bridge/snapshots.py",
         "kvstrategies/sglang/bridge/verify.py", "kvstrategies/sglang/bridge/launch_check.py",
         "kvstrategies/sglang/bridge/launch_grid.py", "kvstrategies/sglang/bridge/bridge_releases.py"),
        ("tests/sglang/test_sglang_bridge.py", "tests/sglang/test_launch_sglang_verify.py",
         *SGLANG_GOLDENS, *LAUNCH_GOLDENS),
    ),
    "case": Group(
        ("kvstrategies/case.py", "kvstrategies/case_validation.py", "kvstrategies/core/validate.py"),
        ("tests/core/test_validation_bounds.py", "tests/test_case_validation.py", "tests/test_api_inputs.py",
         "tests/package/test_bounded_inputs.py", "tests/package/test_robustness.py", *CATALOG_GOLDENS),
    ),
    "golden": Group(
        ("kvstrategies/golden/snapshot.py", "kvstrategies/golden/diff.py", "kvstrategies/document.py",
         "kvstrategies/core/jsonio.py"),
        ("tests/golden/test_golden_diff_lines.py", "tests/golden/test_golden_tools_inputs.py",
         "tests/golden/test_golden.py"),
    ),
    "releases": Group(
        ("kvstrategies/core/releases.py", "kvstrategies/cli/releases.py", "kvstrategies/sglang/knobs.py",
         "kvstrategies/sglang/tables/knobs.py"),
        ("tests/core/test_validation_bounds.py", "tests/strategies/test_release_rules.py",
         "tests/sglang/test_launch_release_rules.py",
         "tests/sglang/test_knobs.py", "tests/cli/test_cli_release.py", *SGLANG_GOLDENS),
    ),
    "kernels": Group(
        ("kvstrategies/kernels/reference.py", "kvstrategies/kernels/dispatch.py"),
        ("tests/kernels/test_kernels.py", "tests/pools/test_write_path.py"),
    ),
    "vllm": Group(
        ("kvstrategies/vllm/strategies/*.py", "kvstrategies/vllm/strategies/backend_tables/*.py",
         "kvstrategies/vllm/bridge/compare.py",
         "kvstrategies/vllm/bridge/snapshots.py", "kvstrategies/vllm/bridge/verify.py",
         "kvstrategies/vllm/planner/*.py", "kvstrategies/vllm/tables/flags.py", "kvstrategies/vllm/arguments.py"),
        ("tests/vllm/test_vllm_strategies.py", "tests/vllm/test_vllm_budget.py",
         "tests/vllm/test_vllm_command.py", "tests/vllm/test_vllm_published_logs.py", "tests/vllm/test_vllm_golden.py",
         "tests/vllm/test_vllm_backends.py", "tests/vllm/test_vllm_refusals.py", "tests/vllm/test_vllm_releases.py",
         "tests/vllm/test_vllm_older_releases.py", "tests/vllm/test_vllm_0_17_release.py",
         "tests/vllm/test_vllm_0_16_release.py", "tests/vllm/test_vllm_0_15_release.py",
         "tests/vllm/test_vllm_0_14_release.py", "tests/vllm/test_vllm_0_13_release.py",
         "tests/vllm/test_vllm_0_12_release.py", "tests/vllm/test_vllm_0_11_release.py",
         "tests/vllm/test_vllm_drafts.py",
         "tests/vllm/test_vllm_eagle_heads.py", "tests/vllm/test_vllm_expert_parallel.py",
         "tests/vllm/test_vllm_data_parallel.py", "tests/vllm/test_vllm_pp_partition.py",
         "tests/vllm/test_vllm_decode_context_parallel.py", "tests/vllm/test_vllm_draft_models.py",
         "tests/vllm/test_vllm_chunked_prefill_off.py",
         "tests/vllm/test_vllm_weight_recordings.py", "tests/vllm/test_vllm_dsv4.py"),
    ),
}

#: modules no group mutates, each with the reason (``tests/package/test_mutation_groups.py`` checks that
#: every module of the package is in a group or here)
EXCLUDED: dict[str, str] = {
    "kvstrategies/__init__.py": "re-exports only (lazy names), no formula",
    "kvstrategies/core/lazy_exports.py": "PEP 562 import glue, no formula",
    "kvstrategies/core/torch_import.py": "the lazy torch import, no formula",
    "kvstrategies/errors.py": "the error class, no formula",
    "kvstrategies/cli/app.py": "CLI entry: the top-level parser, dispatch to a command's module and the one-line "
                               "error report, no formula",
    "kvstrategies/cli/arguments.py": "CLI glue: the flags plan, sweep and compare share, read into a DeploymentRequest "
                                     "that kvstrategies/planner/request.py checks (mutated there)",
    "kvstrategies/cli/plan.py": "CLI glue (the plan subparser, printing): the formulas it prints are mutated in "
                                "their modules",
    "kvstrategies/cli/sweep.py": "CLI glue (the sweep subparser, comma lists, the grid-size refusal): each cell is "
                                 "a plan, mutated in kvstrategies/planner/",
    "kvstrategies/cli/compare.py": "CLI glue (the compare subparser): the comparison is mutated in "
                                   "kvstrategies/planner/compare.py",
    "kvstrategies/cli/verify.py": "CLI glue (the verify subparser, the case files): the checks are the bridges', "
                                  "mutated in the sglang_compare and vllm groups",
    "kvstrategies/cli/fit.py": "CLI glue (the fit subparser, the KV dtype list, printing): the ranking is mutated in "
                               "kvstrategies/planner/machine_fit.py",
    "kvstrategies/cli/web.py": "the web page's entry: runs a command line in-process and returns its output (the "
                               "browser test, tests/web, compares it with the CLI), no formula",
    "kvstrategies/cli/listings.py": "CLI glue: prints the shipped tables (presets, checkpoints, architectures, "
                                    "GPUs), no formula",
    "kvstrategies/__main__.py": "python -m entry: calls cli.main, no formula",
    "kvstrategies/core/quantization_names.py": "a name table, no formula",
    "kvstrategies/sglang/tables/flag_releases.py": "a generated table of option strings, no formula",
    "kvstrategies/allocators/__init__.py": "re-exports only",
    "kvstrategies/pools/runtime/__init__.py": "re-exports only",
    "kvstrategies/models/__init__.py": "re-exports only",
    "kvstrategies/models/parsers/__init__.py": "re-exports only",
    "kvstrategies/planner/__init__.py": "re-exports only",
    "kvstrategies/kernels/__init__.py": "re-exports only",
    "kvstrategies/kernels/triton_kernels.py": "Triton kernels run on CUDA only; the CPU tests cannot reach them",
    "kvstrategies/planner/plot.py": "matplotlib drawing glue, no formula",
    "kvstrategies/planner/sweep_plot.py": "matplotlib drawing glue, no formula",
    "kvstrategies/core/__init__.py": "package docstring only",
    "kvstrategies/cli/__init__.py": "re-exports main only",
    "kvstrategies/golden/__init__.py": "package docstring only",
    "kvstrategies/sglang/__init__.py": "package docstring only",
    "kvstrategies/sglang/launch/__init__.py": "package docstring only",
    "kvstrategies/sglang/tables/__init__.py": "package docstring only",
    "kvstrategies/vllm/__init__.py": "package docstring only",
    "kvstrategies/vllm/tables/__init__.py": "package docstring only",
    "kvstrategies/sglang/bridge/__init__.py": "re-exports only",
    "kvstrategies/sglang/bridge/_launch_probe.py": "runs inside a live SGLang (CPU tests have none)",
    "kvstrategies/sglang/bridge/model_on_meta.py": "builds a live SGLang's model on meta (CPU tests have none)",
    "kvstrategies/sglang/tables/served.py": "a generated table of architecture names, no formula",
    "kvstrategies/sglang/bridge/bridge.py": "drives a live SGLang's own builders (CPU tests have none)",
    "kvstrategies/sglang/bridge/compat.py": "adapters over a live SGLang's internals",
    "kvstrategies/sglang/bridge/engine.py": "runs cases through a live SGLang",
    "kvstrategies/sglang/bridge/hosts.py": "builds a live SGLang's configurator hosts",
    "kvstrategies/sglang/bridge/profiled.py": "drives a live SGLang 0.5.10 ModelRunner's sizing",
    "kvstrategies/sglang/bridge/runtime.py": "imports a live SGLang",
    "kvstrategies/vllm/bridge/__init__.py": "re-exports only",
    "kvstrategies/vllm/bridge/bridge.py": "drives a live vLLM (CPU tests have none)",
    "kvstrategies/vllm/bridge/engine.py": "runs cases through a live vLLM",
    "kvstrategies/vllm/bridge/model_weights.py": "builds a live vLLM's model on meta (CPU tests have none)",
    "kvstrategies/vllm/bridge/requirements.py": "the vLLM install pin check",
    "kvstrategies/vllm/bridge/runtime.py": "imports a live vLLM",
    "kvstrategies/vllm/bridge/runner_specs.py": "calls a live vLLM 0.11.0's model runner (CPU tests have none; "
                                                "tests/vllm/test_vllm_runner_specs.py checks what it is handed)",
}
ROUNDING = {"align_down", "ceil_div", "ceil_align"}
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".hypothesis", ".benchmarks", "*.egg-info", ".tox",
)


# ---- mutants ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    file: str  # repository-relative path
    index: int  # site number within the file (the walk order of MutationWalker)
    line: int
    kind: str
    before: str
    after: str
    source: str = ""  # the stripped source line the mutated node starts on
    scope: str = ""  # the enclosing class / function names, e.g. ``Pool.cell_bytes``
    parent: str = ""  # source of the mutated node's parent expression or statement
    identity: str = ""  # why the mutation is the identity by construction (x + 0 -> x - 0), else ""

    def label(self) -> str:
        return f"{self.file}:{self.line} {self.kind}: {self.before}  ->  {self.after}"


# ---- equivalent mutants ------------------------------------------------------------------------


@dataclass(frozen=True)
class Equivalent:
    """A mutation site whose mutant cannot change any observable result (so no test can kill it).

    Matched without line numbers: ``file`` (a glob), ``pattern`` (a regex searched in the
    stripped source line the mutated node starts on), ``kind`` and ``before`` exactly, and
    ``after`` / ``scope`` (enclosing ``Class.function``) exactly and ``within`` (a regex searched
    in the source of the mutated node's parent) when given. ``reason`` says why every input
    gives the same result.
    """

    file: str
    pattern: str
    kind: str
    before: str
    reason: str
    after: str | None = None
    scope: str | None = None
    within: str | None = None
    nth: int | None = None  # among mutants matching everything else (walk order): the nth only

    def matches(self, mutant: Mutant) -> bool:
        """Whether ``mutant`` fits every field but ``nth`` (see :func:`resolve_allow_list`)."""
        return (
            fnmatch.fnmatch(mutant.file, self.file)
            and mutant.kind == self.kind
            and mutant.before == self.before
            and (self.after is None or mutant.after == self.after)
            and (self.scope is None or mutant.scope == self.scope)
            and (self.within is None or re.search(self.within, mutant.parent) is not None)
            and re.search(self.pattern, mutant.source) is not None
        )


#: Keep this list short and every reason checkable by reading the lines it names.
EQUIVALENT: tuple[Equivalent, ...] = (
    Equivalent(
        "kvstrategies/strategies/hybrid_linear.py", r"attn_dp_size > 1", "> -> >=",
        "self.ctx.parallel.attn_dp_size > 1",
        "at attention DP 1 the cap is min(capped, user // 1): capped is at most the request count, which up to 0.5.9 "
        "is the user's count itself (requests-from-resolved-tokens), so the cap never binds",
        scope="HybridLinearPoolConfigurator.cap_max_running_requests",
    ),
    Equivalent(
        "kvstrategies/strategies/default.py", r"draft_layers is None or draft_layers <= 0", "<= -> <",
        "draft_layers <= 0",
        "an EAGLE draft of 0 layers adds int(cell * 0 / L) = 0 (DSA: draft_kv 0, indexer over 0 layers 0)",
        scope="DefaultPoolConfigurator.draft_cell_bytes",
    ),
    Equivalent(
        "kvstrategies/planner/weights.py", r"if self\.tp_units <= 0 or tp <= 1:", "c -> c+1", "0",
        "tp_units 1 (tp > 1): count / 1 * max(1, 1 // tp) == count, the early return's value",
        after="1", scope="ParamGroup.per_rank",
    ),
    # planner group (issue #27)
    Equivalent(
        "kvstrategies/sglang/budget.py", r"^return 0$", "c -> c+1", "0",
        "dead branch: the only caller, _vision_tower_bytes, returns before calling _vision_tower unless "
        "launch_facts(config).is_multimodal", scope="_vision_tower",
    ),
    Equivalent(
        "kvstrategies/planner/fixes.py", r"key=lambda g: g\.capacity_mib or 0\)", "c -> c+1", "0",
        "the sort key's `or 0` is never taken: the filter keeps only GPUS entries with capacity_mib not None and "
        "> the current one, and no GPUS entry has capacity 0 (tests/planner/test_gpus.py checks every one is > 0)",
        scope="_larger_gpu",
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/load_refusals.py", pattern, "> -> >=", before,
            "differs only at TP 1, where it changes only which outputs compressed-tensors' merged-last exemption "
            "skips (outputs vs outputs[:-1]); the last output equals the one before it (v == k, up == gate), so "
            "the same sizes are checked in the same order and the same first one refuses; NVFP4 reads only the "
            "row input", scope="_linear_shape",
        )
        for pattern, before in (
            (r"^return \[nh // attn_tp \* hd, kv_per \* hd, kv_per \* hd\], attn_tp > 1 and", "attn_tp > 1"),
            (r"^return \[inter // tp, inter // tp\], tp > 1, None$", "tp > 1"),
        )
    ),
    Equivalent(
        "kvstrategies/planner/weight_quant.py", r'\("\." \+ ignored \+ "\."\) in \("\." \+ prefix \+ "\."\)$',
        "drop left term", "'.' + prefix", "'.' + ignored + '.' is found in prefix + '.' exactly where it is found "
        "in '.' + prefix + '.' but at position 0, i.e. where prefix + '.' starts with ignored + '.' (prefix == "
        "ignored, or prefix starts with ignored + '.'), which the two tests before it already return True for",
        after="prefix", scope="module_path_match",
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/load_refusals.py", r"in range\(1, req\.tp_size \+ 1\) if req\.tp_size % ", "c -> c+1",
            "1", "range(1, tp + 2) adds only d = tp + 1, which never divides tp (tp % (tp + 1) == tp >= 1): the "
            "same list", after="2", scope=scope, within=r"^req\.tp_size \+ 1$",
        )
        for scope in ("_check_ep_divides_tp", "_check_expert_split")
    ),
    Equivalent(
        "kvstrategies/sglang/launch/defaults/backends.py",
        r'return "aiter" if max\(1, m\.num_kv_heads // attn_tp\) in \(16, 128\)', "c -> c+1", "1",
        "max(1, x) and max(2, x) differ only for x < 2, where both (1 or 2) are outside {16, 128}: triton either way",
        after="2",
    ),
    Equivalent(
        "kvstrategies/sglang/launch/defaults/core.py", r"^max_prefill_tokens: int = 16384$", "c -> c+1", "16384",
        "the field default is never used: LaunchResolution is built only by pipeline._initial, which always "
        "passes max_prefill_tokens (16384 or the user's)", scope="LaunchResolution",
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/launch/defaults/core.py", rf"^{name}: int = 1$", "c -> c+1", "1",
            "LaunchInputs is built only by pipeline.resolve_launch_defaults, which passes every field: "
            "the defaults are never read", scope="LaunchInputs",
        )
        for name in ("tp_size", "pp_size", "attn_dp_size", "dcp_size")
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/launch/defaults/graphs.py", r"ranges = \(\(4, 32, 4\), \(48, 256, 16\)", "c -> c+1",
            top,
            f"range(lo, {top} + 2, step) and range(lo, {top} + 1, step) hold the same sizes: {top} + 1 is no step "
            "from the range's start (576 and 640 both reach 1024 in steps of 64)",
            after=str(int(top) + 1), within=within,
        )
        for top, within in (("32", r"^\(4, 32, 4\)$"), ("512", r"^\(288, 512, 32\)$"),
                            ("1024", r"^\(sixty_four_from, 1024, 64\)$"), ("4096", r"^\(1280, 4096, 256\)$"))
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/launch/defaults/graphs.py", r"^fixed = \(range\(4, 33, 4\)", "c -> c+1", stop,
            f"range(lo, {stop} + 1, step) and range(lo, {stop}, step) hold the same sizes: {stop} is no step from the "
            "range's start (the coarse list of 0.5.7, coarse_prefill_graph_bs_count)",
            after=str(int(stop) + 1), scope="coarse_prefill_graph_bs_count",
        )
        for stop in ("33", "257", "513", "4097")
    ),
    Equivalent(
        "kvstrategies/sglang/launch/defaults/graphs.py", r"prefill_graph_batch_sizes\(min\(max_bs, 4096\)", "c -> c+1",
        "4096", "the fixed list ends at 4096 and the next size is 4608: capping at 4097 keeps the same sizes",
        after="4097", scope="prefill_graph_bs_count",
    ),
    Equivalent(
        "kvstrategies/sglang/launch/defaults/graphs.py",
        r"ranges = \(\(4, 32, 4\), \(48, 256, 16\)", "c -> c+1", "256",
        "range(48, 258, 16) and range(48, 257, 16) hold the same sizes (48..256): 257 is no step of 16 from 48",
        after="257", within=r"^\(48, 256, 16\)$",
    ),
    Equivalent(
        "kvstrategies/sglang/launch/defaults/deepseek.py",
        r"if inp\.gpu\.is_cuda and \(inp\.gpu\.sm_major or 0\) >= 10",
        "c -> c+1", "0", "an SM major of 0 or 1 (unknown: memory given by hand) is below 10 either way",
        after="1", scope="_dsa_kv_dtype",
    ),
    Equivalent(
        "kvstrategies/strategies/hybrid_linear.py", r"if sched\.disable_radix_cache or per == 0 or not split:$",
        "c -> c+1", "0",
        "a Mamba slot is never 0 or 1 byte (every Mamba layer holds conv and SSM state): per == 1 is as false as "
        "per == 0", after="1", scope="HybridLinearPoolConfigurator._slot_carried_budget",
    ),
    Equivalent(
        "kvstrategies/strategies/hybrid_linear.py", r"if rest - state <= 0:$", "<= -> <", "rest - state <= 0",
        "at rest == state exactly the KV budget left is 0 B: no token fits, and the plan is refused downstream "
        "either way (only the message differs)",
        scope="HybridLinearPoolConfigurator._slot_carried_budget",
    ),
    Equivalent(
        "kvstrategies/context.py", r"return dcp if ctx\.is_draft_worker and dcp > 1 and", "> -> >=",
        "dcp > 1", "at dcp 1 both branches give 1",
    ),
    Equivalent(
        "kvstrategies/models/parse.py", r"and not isinstance\(value, bool\) and value > 0 else 0$", "> -> >=",
        "value > 0", "at a count of 0 both branches give 0", scope="_num_experts",
    ),
    Equivalent(
        "kvstrategies/strategies/base.py", r"return None if value is None else value \* scale", "* -> //",
        "value * scale", "only hybrid-SWA sizes carry full/swa counts and no hybrid-SWA draft runs with "
        "dcp > 1 (HybridSWA rejects draft workers, DSV4 rejects DCP drafts): scale is 1 there",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"pad = ring - window \+ 2 if ring > window else 0", "> -> >=",
        "ring > window", "only speculative rings reach it: 16 > 8 and 256 > 128, never equal",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"pad = ring - window \+ 2 if ring > window else 0", "c -> c+1",
        "0", "dead branch: speculative rings (16, 256) always exceed their windows (8, 128)",
    ),
    *(
        Equivalent(
            "kvstrategies/strategies/dsv4.py", r"layers = tuple\(start \+ i for i, r in enumerate", kind,
            "start + i", "owner ids are only counted (n(r), len(layers)), never used as ids",
            scope="DSV4PoolConfigurator.owners",
        )
        for kind in ("+ -> -", "drop right term", "drop left term")
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"drafts = self\.ctx\.speculative\.max_num_draft_tokens or 0", "c -> c+1",
        "0", "reached only when speculative, which requires speculative_num_draft_tokens: never None",
    ),
    *(
        Equivalent("kvstrategies/strategies/dsv4.py", pattern, "* -> //", "4 * 1", "4 * 1 == 4 // 1 (c4_shrink 1)")
        for pattern in (r"return \(1 / \(4 \* 1\)\)", r"c4_max_total_num_tokens=full // \(4 \* 1\)")
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"start, ratios = 0, \(0,\) \* num_effective_layers\(self\.ctx\)",
        "c -> c+1", "0", "a draft stage: dsv4_layout adds buffers only for ratios 4 and 128, so ratio 1 lays out "
        "the same SWA-only pool as ratio 0 (start 0 -> 1 is NOT equivalent: the golden draft case kills it)",
        within=r"^\(0,\)$",
    ),
    *(
        Equivalent(
            "kvstrategies/strategies/dsv4.py", r"if fixed <= 0 or self\.window \+ page < swa:", kind, "fixed <= 0",
            "early-out only: with fixed == 0 the stateless SWA size equals swa and the next check returns; "
            "fixed is 0 or >= 128 rows of c128 state, never in (0, 1]",
        )
        for kind in ("<= -> <",)
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"if fixed <= 0 or self\.window \+ page < swa:", "c -> c+1", "0",
        "fixed is 0 or >= 128 rows of c128 state, never in (0, 1]", within=r"^fixed <= 0$",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"ring = self\.ring_sizes\.get\(128, 0\)", "c -> c+1", "0",
        "fixed > 0 here means ratio-128 owners, so ring 128 is present (the default is never used)",
        scope="DSV4PoolConfigurator._explain_state_reservation",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"return self\.ring_sizes\.get\(4, 0\) / self\.page_size", "c -> c+1", "0",
        "ring 4 is missing only when n(4) == 0, and the term is multiplied by n(4)",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"return self\.ring_sizes\.get\(4, 0\) / self\.window", "c -> c+1", "0",
        "ring 4 is missing only when n(4) == 0, and the term is multiplied by n(4)",
    ),
    Equivalent(
        "kvstrategies/strategies/dsv4.py", r"return self\.paged\(0\) \* self\.num_layers_total", "c -> c+1", "0",
        "paged(1) == paged(0): both use the whole page (P // 1 == P)", within=r"^self\.paged\(0\)$",
    ),
    *(
        Equivalent(
            "kvstrategies/strategies/dsv4.py",
            r"rows = ceil_div\(self\.request_slots\(requests\) \* ring \+ ring \+ 1, 128\)",
            kind, before, "rings are 128 or 256: slots*ring + ring + 1 leaves remainder 1 mod 128, and 2 rounds "
            "up to the same multiple of 128", after=after,
        )
        for kind, before, after in (
            ("rounding argument +1", "ceil_div(self.request_slots(requests) * ring + ring + 1, 128)", None),
            ("c -> c+1", "1", "2"),
        )
    ),
    Equivalent(
        "kvstrategies/strategies/request_math.py", r"or cell is None or cell <= 0:", "<= -> <", "cell <= 0",
        "a draft cell of 0 adds 0 * dcp = 0, the same as no draft cell",
    ),
    Equivalent(
        "kvstrategies/strategies/hybrid_swa.py", r"or depth is None or depth <= 0:", "<= -> <", "depth <= 0",
        "D = 0 gives dS = min(max(x, 0), 0) = 0, dSF = 0, dF = 0: the same zero DraftLayers()",
    ),
    Equivalent(
        "kvstrategies/strategies/hybrid_linear.py",
        r"if self\.mamba\.full_attention_layer_ids and self\.ctx\.parallel\.pp_size > 1:", "> -> >=",
        "self.ctx.parallel.pp_size > 1", "with pp 1 and full-attention layers the stage holds them all: "
        "its cell is not 0, so the zero-KV rule never runs",
    ),
    *(
        Equivalent(
            "kvstrategies/strategies/hybrid_linear.py", r"if self\.budget_reserves_spec else \(0, 0\)$",
            "c -> c+1", "0",
            "the pair is read only under budget_reserves_spec, where _spec_inputs() supplies it", nth=nth,
        )
        for nth in (0, 1)
    ),
    Equivalent(
        "kvstrategies/strategies/hybrid_linear.py", r"^largest = 0$", "c -> c+1", "0",
        "a hybrid linear model has Mamba layers, so the largest stage holds >= 1 and max() never keeps the seed",
    ),
    Equivalent(
        "kvstrategies/pools/dsa.py", r"if self\.kpool_dcp and self\.dcp_size > 1 and not self\.dcp_replicated:",
        "> -> >=",
        "self.dcp_size > 1", "at dcp 1 the widened size (T + P) * 1 - P is T, the plain size",
    ),
    *(
        Equivalent("kvstrategies/pools/ascend.py", pattern, "> -> >=", "dcp > 1", "at dcp 1 both branches give 1")
        for pattern in (r"kv_pad = dcp if is_draft_worker and dcp > 1 else 1", r"idx_pad = dcp if dcp > 1 else 1")
    ),
    *(
        Equivalent(
            "kvstrategies/pools/dsv4.py", rf"c{r}_layers = \[stage_start \+ i for", kind, "stage_start + i",
            f"c{r}_layers is only counted (len), never indexed: the ids' values are unobservable",
        )
        for r in (4, 128)
        for kind in ("+ -> -", "drop right term", "drop left term")
    ),
    Equivalent(
        "kvstrategies/pools/dsv4.py", r"compress_state_last_dim\(128, head_dim\)", "c -> c+1", "128",
        "compress_state_last_dim only tests ratio == 4: 128 and 129 both take the no-overlap branch",
    ),
    Equivalent(
        "kvstrategies/pools/dsv4.py", r'^V4 = \("v4", 576, 8, 576\)', "c -> c+1", "8",
        "V4's scale bytes reach only page_bytes(p) = ceil_align(p * 584, 576), built at page 256 alone (the CUDA "
        "pool asserts it; the NPU pool is not this layout) for p = 256, 64, 2: no multiple of 576 lies in "
        "[p * 584, p * 585) (256 x 585 = 260 x 576, 64 x 585 = 65 x 576; 1,168 and 1,170 both round to 1,728)",
    ),
    Equivalent(
        "kvstrategies/pools/layout.py", r"^@lru_cache\(maxsize=512\)", "c -> c+1", "512",
        "a cache's capacity: layer_names returns the same tuples whether 512 or 513 entries are kept",
    ),
    *(
        Equivalent(
            "kvstrategies/core/validate.py", r"return math.inf if value > 0 else -math.inf", kind, before,
            "reached only when float(value) overflows, i.e. |value| > 1.8e308: never 0 or 1, so > 0, >= 0 and "
            "> 1 pick the same sign",
            scope="finite_float",
        )
        for kind, before in (("> -> >=", "value > 0"), ("c -> c+1", "0"))
    ),
    *(
        Equivalent(
            "kvstrategies/core/validate.py", pattern, kind, before,
            "_huge_int_path runs only after _has_huge_int found a huge integer within the bound, and walks the "
            "same order: it reaches that integer at the same count, so scanning on past the bound (<=, or a count "
            "that never grows) returns the same place",
            scope="_huge_int_path",
        )
        for pattern, kind, before in ((r"^while stack and seen < _MAX_SCANNED:", "< -> <=", "seen < _MAX_SCANNED"),
                                      (r"^seen \+= 1$", "+= -> -=", "seen += 1"))
    ),
    Equivalent(
        "kvstrategies/core/validate.py", r'^return "", 0$', "c -> c+1", "0",
        "never reached: _huge_int_path runs only after _has_huge_int found a huge integer, which the same walk "
        "within the same bound finds again and returns from inside the loop",
        scope="_huge_int_path",
    ),
    Equivalent(
        "kvstrategies/pools/runtime/factory.py", r'parts = \{k.split\(".", 1\)\[0\]', "c -> c+1", "1",
        "only the first part of the split is kept, and it is the same for any maxsplit >= 1",
    ),
    Equivalent(
        "kvstrategies/vllm/strategies/backends.py", r'return key.split\("\|", 1\)\[0\], valid', "c -> c+1", "1",
        "only the first part of the split (the GPU family) is kept, and it is the same for any maxsplit >= 1",
        scope="_recorded_choices",
    ),
    Equivalent(
        "kvstrategies/core/jsonio.py", r'getattr\(os, "O_NONBLOCK", 0\)', "c -> c+1", "0",
        "the default applies only where os has no O_NONBLOCK (Windows); POSIX, where the tests run, always has it",
    ),
    Equivalent(
        "kvstrategies/core/jsonio.py", r"data = handle.read\(limit \+ 1\)", "c -> c+1", "1",
        "reading limit + 2 instead of limit + 1 bytes changes no outcome: the check is len(data) > limit, true "
        "for every file over the limit either way, and a file within it is read whole both ways",
    ),
    # -- allocators ---------------------------------------------------------------------------------
    *(
        Equivalent(
            f"kvstrategies/allocators/{file}", pattern, "c -> c+1", "0",
            "a placeholder: clear(), called at the end of __init__, sets it before anything reads it",
            scope=f"{cls}.__init__",
        )
        for file, cls, pattern in (
            ("paged.py", "PagedTokenToKVPoolAllocator", r"^self\.num_pages = 0$"),
            ("paged.py", "PagedTokenToKVPoolAllocator", r"^self\.free_pages = torch\.empty\(0, dtype=I64\)$"),
            ("paged.py", "PagedTokenToKVPoolAllocator", r"^self\.num_staged_pages = 0$"),
            ("token.py", "TokenToKVPoolAllocator", r"^self\.free_pages = torch\.empty\(0, dtype=I64\)$"),
            ("token.py", "TokenToKVPoolAllocator", r"^self\.release_pages = torch\.empty\(0, dtype=I64\)$"),
            ("requests.py", "RequestSlotAllocator", r"^self\._fresh = 0  # rows"),
            ("mamba.py", "MambaSlotAllocator", r"^self\.free_slots = torch\.empty\(0, dtype=I64\)$"),
        )
    ),
    *(
        Equivalent(
            "kvstrategies/allocators/paged.py", r"^new_loc = pages\[rank\.clamp\(min=0, max=max\(n - 1, 0\)\)\]",
            kind, before,
            "rank = cumsum(needs) - 1 <= n - 1 for every request (n = sum(needs), seq_lens_cpu holding the values "
            "of seq_lens): an upper clamp at any bound >= n - 1 (max(n - 1, 1) with n >= 1, n + 1) clips nothing",
            within=r"^max\(n - 1, 0\)$",
        )
        for kind, before in (("c -> c+1", "0"), ("- -> +", "n - 1"))
    ),
    Equivalent(
        "kvstrategies/allocators/requests.py", r"^take = n - from_range$", "- -> +", "n - from_range",
        "from_range > 0 means from_range = n - len(tail): take is len(tail) and n + from_range >= len(tail), and "
        "tail[-k:] (and its del) for any k >= len(tail) is the whole tail; from_range 0 gives n either way",
    ),
    Equivalent(
        "kvstrategies/allocators/swa.py", r"torch\.full\(\(1,\), -1, dtype=I64, device=dev\)", "c -> c+1", "1",
        "the tail's SWA extension has prefix 0, so its open page ends at ceil(0 / P) * P = 0 and no token reads "
        "last_loc (extend_locations): -1 and -2 place the same locations",
        within=r"^-1$",
    ),
    Equivalent(
        "kvstrategies/allocators/swa.py",
        r"^swa = tail\(self\.swa_attn_allocator\) if swa_tail_len > 0 else full\[:0\]$", "c -> c+1", "0",
        "taken only at swa_tail_len 0, where split = extend_num_tokens and full[split:] selects no entry: "
        "writing full[:0] or full[:1] (broadcast) into no mapping entry changes nothing",
        within=r"^:0$",
    ),
    Equivalent(
        "kvstrategies/allocators/swa.py", r"^self\.swa_attn_allocator\.free\(swa\[swa > 0\]\)$", "c -> c+1", "0",
        "paged branch (P >= 2): a mapping entry is 0 or an SWA location the paged SWA side handed out, "
        "page * P + offset with page >= 1, so >= P >= 2: > 0 and > 1 keep the same entries",
    ),
    *(
        Equivalent(
            "kvstrategies/sglang/bridge/launch_grid.py", rf'"{flag}": \(int, 1\)', "c -> c+1", "1",
            "a grid flag's minimum is read only by check_grid_flag, as minimum == -1 (the 'or -1' flags); the "
            "lower bound 1 is the literal 1 <= value there, so a minimum of 1 or 2 (both != -1) checks alike",
            within=r"^\(int, 1\)$", nth=nth,
        )  # three (int, 1) share the max_running_requests line: nth picks each in walk order
        for flag, nth in (("page_size", None), ("max_running_requests", 0), ("max_running_requests", 1),
                          ("max_running_requests", 2), ("speculative_num_draft_tokens", None))
    ),
    Equivalent(
        "kvstrategies/vllm/planner/deployment.py", r"activation_bytes=dtype\.itemsize if dtype\.itemsize <= 2 else 2",
        "<= -> <", "dtype.itemsize <= 2",
        "x if x <= 2 else 2 and x if x < 2 else 2 differ only at x == 2, where both give 2",
    ),
    Equivalent(
        "kvstrategies/vllm/planner/deployment.py", r"activation_bytes=dtype\.itemsize if dtype\.itemsize <= 2 else 2",
        "c -> c+1", "2", "x <= 2 and x <= 3 differ only at x == 3, and no DType is 3 bytes (dtypes.py: 1, 2, 4, 8)",
        within=r"^dtype\.itemsize <= 2$",
    ),
)


_ALLOWED: dict[tuple[str, int], str] = {}  # (file, site index) -> reason, filled by resolve_allow_list


def resolve_allow_list(population: list[Mutant], files: list[str]) -> list[str]:
    """Bind every allow-list entry (for these files) to its one mutant; the entries that match
    none or several are returned as problems (a line holds several mutants: be exact)."""
    problems: list[str] = []
    for entry in EQUIVALENT:
        if not any(fnmatch.fnmatch(f, entry.file) for f in files):
            continue
        hits = [m for m in population if entry.matches(m)]
        if entry.nth is not None:
            hits = hits[entry.nth : entry.nth + 1]
        if len(hits) != 1:
            where = "; ".join(m.label() for m in hits[:4]) or "nothing (stale?)"
            problems.append(f"{entry.file} /{entry.pattern}/ {entry.kind}: {entry.before} matches {len(hits)}: {where}")
            continue
        _ALLOWED[(hits[0].file, hits[0].index)] = entry.reason
    return problems


def equivalent_reason(mutant: Mutant) -> str | None:
    """The allow-list's reason (its one bound mutant), or the structural one (adding or subtracting 0)."""
    return mutant.identity or _ALLOWED.get((mutant.file, mutant.index))


def _shielded(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: messages, f-strings, asserts, annotations, docstrings."""
    skip: set[int] = set()

    def cover(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert, ast.JoinedStr)):
            cover(node)
        elif isinstance(node, ast.arg):
            cover(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cover(node.returns)
        elif isinstance(node, ast.AnnAssign):
            cover(node.annotation)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                cover(first)
    return skip


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


Make = Callable[[], ast.AST]
_SWAP_BIN: dict[type[ast.operator], tuple[type[ast.operator], str]] = {
    ast.Add: (ast.Sub, "+ -> -"),
    ast.Sub: (ast.Add, "- -> +"),
    ast.Mult: (ast.FloorDiv, "* -> //"),
    ast.FloorDiv: (ast.Mult, "// -> *"),
}
_SWAP_CMP: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, "< -> <="),
    ast.LtE: (ast.Lt, "<= -> <"),
    ast.Gt: (ast.GtE, "> -> >="),
    ast.GtE: (ast.Gt, ">= -> >"),
}


def _candidates(node: ast.AST) -> Iterator[tuple[str, Make]]:
    """Every mutation of one node, in a fixed order."""
    if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
        new_op, kind = _SWAP_BIN[type(node.op)]
        yield kind, lambda: ast.BinOp(node.left, new_op(), node.right)
        if isinstance(node.op, ast.Add):
            yield "drop right term", lambda: node.left
            yield "drop left term", lambda: node.right
    elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BIN:
        new_op, kind = _SWAP_BIN[type(node.op)]
        yield kind.replace(" -> ", "= -> ") + "=", lambda: ast.AugAssign(node.target, new_op(), node.value)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        value: int = node.value
        yield "c -> c+1", lambda: ast.Constant(value + 1)
    elif isinstance(node, ast.Call) and _call_name(node) in ROUNDING and node.args:
        yield "rounding result +1", lambda: ast.BinOp(node, ast.Add(), ast.Constant(1))
        yield "rounding argument +1", lambda: ast.Call(
            node.func, [ast.BinOp(node.args[0], ast.Add(), ast.Constant(1)), *node.args[1:]], node.keywords
        )
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP_CMP:
        new_cmp, kind = _SWAP_CMP[type(node.ops[0])]
        yield kind, lambda: ast.Compare(node.left, [new_cmp()], node.comparators)


class MutationWalker(ast.NodeTransformer):
    """Enumerates mutation sites (``target=None``) or applies the ``target``-th one."""

    def __init__(self, skip: set[int], target: int | None = None) -> None:
        self.skip = skip
        self.target = target
        self.sites: list[tuple[int, str, str, str]] = []  # (line, kind, before, after)
        self.context: list[tuple[str, str, str]] = []  # per site: (scope, parent source, identity reason or "")
        self.applied = False
        self.scope: list[str] = []
        self.parents: list[ast.AST] = []

    def visit(self, node: ast.AST) -> ast.AST:
        if self.applied or id(node) in self.skip:
            return node
        for kind, make in _candidates(node):
            index = len(self.sites)
            replacement = make()
            ast.copy_location(replacement, node)
            ast.fix_missing_locations(replacement)
            parent = ast.unparse(self.parents[-1]) if self.parents and self.target is None else ""
            self.sites.append((getattr(node, "lineno", 0), kind, _src(node), _src(replacement)))
            self.context.append((".".join(self.scope), parent, _identity(node, kind)))
            if index == self.target:
                self.applied = True
                return replacement
        named = isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        if named:
            self.scope.append(node.name)  # type: ignore[attr-defined]
        self.parents.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.parents.pop()
            if named:
                self.scope.pop()


def _identity(node: ast.AST, kind: str) -> str:
    """Why a mutation is the identity by construction (``x + 0`` -> ``x - 0`` or ``x``), else ""."""
    zero = isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and node.right.value == 0
    if zero and kind in ("+ -> -", "- -> +", "drop right term"):
        return "x + 0 == x - 0 == x"
    return ""


def _src(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 70 else text[:67] + "..."


def enumerate_mutants(rel: str) -> list[Mutant]:
    text = (ROOT / rel).read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    walker = MutationWalker(_shielded(tree))
    walker.visit(tree)
    return [
        Mutant(rel, i, line, kind, before, after, lines[line - 1].strip() if 0 < line <= len(lines) else "",
               scope, parent, identity)
        for i, ((line, kind, before, after), (scope, parent, identity)) in enumerate(
            zip(walker.sites, walker.context, strict=True)
        )
    ]


def mutated_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    walker = MutationWalker(_shielded(tree), target=index)
    mutated = walker.visit(tree)
    if not walker.applied:
        raise ValueError(f"no mutation site {index}")
    return ast.unparse(ast.fix_missing_locations(mutated)) + "\n"


# ---- running the tests -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # killed, survived
    why: str  # failed test, import error, timeout, or "" when survived
    seconds: float


def _copy_repository(scratch: Path, name: str) -> Path:
    target = scratch / name
    shutil.copytree(ROOT, target, ignore=IGNORE, symlinks=True)
    return target


def _pytest(
    copy: Path, tests: list[str], deselect: list[str], timeout: float, *, stop_first: bool = True
) -> tuple[int | None, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("KVSTRATEGIES_GOLDEN_DIR", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *tests]
    if stop_first:
        command.insert(4, "-x")
    for node in deselect:
        command += ["--deselect", node]
    try:
        run = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return run.returncode, run.stdout + run.stderr


_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")


def _failed_nodes(output: str) -> list[str]:
    return [m.group(2) for m in map(_FAILED.match, output.splitlines()) if m]


def _first_failure(output: str) -> str:
    nodes = _failed_nodes(output)
    if nodes:
        return nodes[0]
    for line in output.splitlines():
        if "Error" in line:
            return line.strip()[:100]
    return "tests failed"


def run_mutant(copy: Path, mutant: Mutant, tests: list[str], deselect: list[str], timeout: float) -> Outcome:
    path = copy / mutant.file
    original = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    try:
        path.write_text(mutated_source(original, mutant.index), encoding="utf-8")
        code, output = _pytest(copy, tests, deselect, timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - start
    if code is None:
        return Outcome(mutant, "killed", "timeout", seconds)
    if code == 0:
        return Outcome(mutant, "survived", "", seconds)
    if code == 5:
        raise SystemExit(f"mutation_check: no tests collected by {tests}")
    return Outcome(mutant, "killed", _first_failure(output), seconds)


def _node_regex(pattern: str) -> re.Pattern[str]:
    """A node-id pattern whose only wildcard is ``*`` (brackets are literal: parametrize ids)."""
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)))


_COLLECTED: dict[str, list[str]] = {}


def _collect(path: str) -> list[str]:
    """The node ids pytest collects from one test file (once per run)."""
    if path not in _COLLECTED:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-o", "addopts=", "-q", "-p", "no:cacheprovider", path],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        _COLLECTED[path] = [line for line in run.stdout.splitlines() if line.startswith(path + "::")]
    return _COLLECTED[path]


def _expand(patterns: list[str]) -> list[str]:
    """Test paths, globs and node ids; a node part with ``*`` keeps the collected ids it matches."""
    out: list[str] = []
    for pattern in patterns:
        path_part, sep, node = pattern.partition("::")
        matches = sorted(ROOT.glob(path_part)) if any(c in path_part for c in "*?[") else [ROOT / path_part]
        for match in matches:
            if not match.exists():
                continue
            rel = str(match.relative_to(ROOT))
            if sep and "*" in node:
                wanted = _node_regex(f"{rel}::{node}")
                out.extend(n for n in _collect(rel) if wanted.fullmatch(n))
            else:
                out.append(rel + (sep + node if sep else ""))
    return list(dict.fromkeys(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="AST mutation check of the strategy and pool formulas.")
    parser.add_argument("--groups", nargs="+", default=None, choices=sorted(GROUPS),
                        help="module groups to mutate, each with its own tests (default: all)")
    parser.add_argument("--files", nargs="+", default=None, help="files or globs to mutate (instead of --groups)")
    parser.add_argument("--tests", nargs="+", default=None, help="pytest paths / node ids / globs (with --files)")
    parser.add_argument("--sample", type=int, default=None, help="run N randomly chosen mutants per group")
    parser.add_argument("--seed", type=int, default=0, help="random seed for --sample (default 0)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant run (default 120)")
    parser.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="parallel workers (default: CPU count, at most 4)")
    parser.add_argument("--list", action="store_true", help="only list the mutants")
    parser.add_argument("--match", default=None, metavar="REGEX",
                        help="only mutants whose label (file:line kind: before -> after) matches, before sampling")
    parser.add_argument("--min-kill-rate", type=float, default=0.0, help="exit 1 below this kill rate (0..1)")
    args = parser.parse_args(argv)

    if args.files is not None:
        groups = {"files": Group(tuple(args.files), tuple(args.tests or DEFAULT_TESTS))}
    else:
        groups = {name: GROUPS[name] for name in (args.groups or sorted(GROUPS))}
    plans: list[tuple[str, list[Mutant], list[str]]] = []
    for name, group in groups.items():
        group_files = group.sources()
        population = [m for f in group_files for m in enumerate_mutants(f)]
        problems = resolve_allow_list(population, group_files)
        if problems:
            print("mutation_check: the equivalent-mutant allow-list must match exactly one mutant per entry:",
                  *problems, sep="\n  ", file=sys.stderr)
            return 2
        chosen = population
        if args.match is not None:
            chosen = [m for m in chosen if re.search(args.match, m.label())]
        if args.sample is not None and args.sample < len(chosen):
            chosen = sorted(random.Random(args.seed).sample(chosen, args.sample), key=lambda m: (m.file, m.index))
        plans.append((name, chosen, _expand(list(group.tests))))
    if len(plans) == 1:
        name, mutants, tests = plans[0]
        return _run_group(args, name, mutants, tests, len(groups[name].sources()))
    summary: list[str] = []
    worst = 0
    for name, mutants, tests in plans:
        print(f"\n==== group {name} ====", flush=True)
        files = len(groups[name].sources())
        code = _run_group(args, name, mutants, tests, files, summary)
        worst = max(worst, code)
    print("\nkill rate per group:")
    for line in summary:
        print(f"  {line}")
    print(f"allow-list: {len(EQUIVALENT)} entries, each matching exactly one mutant")
    return worst


def _run_group(
    args: argparse.Namespace,
    group: str,
    mutants: list[Mutant],
    tests: list[str],
    nfiles: int,
    summary: list[str] | None = None,
) -> int:
    """Run one group's mutants against its tests; print and (``summary``) record its kill rate."""
    # equivalent mutants are sampled like the rest (samples stay stable as the list grows), never run,
    # reported apart and left out of the kill rate's denominator
    skipped = [(m, reason) for m in mutants if (reason := equivalent_reason(m)) is not None]
    mutants = [m for m in mutants if equivalent_reason(m) is None]
    if args.list:
        for mutant in mutants:
            print(mutant.label())
        for mutant, reason in skipped:
            print(f"EQUIVALENT {mutant.label()}  [{reason}]")
        print(f"{group}: {len(mutants)} mutants in {nfiles} files (+ {len(skipped)} equivalent, not run)")
        return 0
    if not tests or not mutants:
        print(f"mutation_check: {group}: nothing to do (no tests or no mutants)", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="kvs-mutation-"))
    try:
        jobs = max(1, min(args.jobs, len(mutants)))
        copies = [_copy_repository(scratch, f"w{i}") for i in range(jobs)]
        start = time.perf_counter()
        code, output = _pytest(copies[0], tests, [], args.timeout * 3, stop_first=False)
        deselect = _failed_nodes(output) if code else []
        if code not in (0, 1) or (code == 1 and not deselect):
            print(f"mutation_check: the unmutated test run fails (exit {code}):\n{output[-3000:]}", file=sys.stderr)
            return 2
        files = list(dict.fromkeys(t.partition("::")[0] for t in tests))
        print(f"tests: {len(tests)} paths / node ids in {len(files)} files: {' '.join(files)}")
        print(f"baseline: passed in {time.perf_counter() - start:.1f}s"
              + (f"; {len(deselect)} failing before mutation, deselected: {' '.join(deselect)}" if deselect else ""))
        print(f"{len(mutants)} mutants in {nfiles} files ({len(skipped)} more skipped as equivalent), "
              f"{jobs} workers, timeout {args.timeout:.0f}s")
        free = list(copies)
        outcomes: list[Outcome] = []

        def work(mutant: Mutant) -> Outcome:
            copy = free.pop()
            try:
                return run_mutant(copy, mutant, tests, deselect, args.timeout)
            finally:
                free.append(copy)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(work, mutants):
                outcomes.append(outcome)
                mark = "KILLED  " if outcome.status == "killed" else "SURVIVED"
                why = f"  [{outcome.why}]" if outcome.why else ""
                print(f"{mark} {outcome.mutant.label()}{why}", flush=True)
        killed = sum(1 for o in outcomes if o.status == "killed")
        rate = killed / len(outcomes)
        if skipped:
            print(f"\n{len(skipped)} equivalent mutants skipped (not run, not counted):")
            for mutant, reason in skipped:
                print(f"EQUIVALENT {mutant.label()}  [{reason}]")
        print(f"\n{killed} killed, {len(outcomes) - killed} survived of {len(outcomes)} mutants"
              f"{f' (+ {len(skipped)} equivalent skipped)' if skipped else ''}: "
              f"kill rate {rate:.1%} ({time.perf_counter() - start:.0f}s)")
        by_file: dict[str, list[int]] = {}
        for outcome in outcomes:
            counts = by_file.setdefault(outcome.mutant.file, [0, 0])
            counts[0 if outcome.status == "killed" else 1] += 1
        for file, (k, s) in sorted(by_file.items()):
            print(f"  {file:<44} {k:>4} killed {s:>4} survived  {k / (k + s):.0%}")
        if summary is not None:
            summary.append(f"{group:<16} {killed:>4} killed of {len(outcomes):>4}  {rate:.1%}  "
                           f"({len(skipped)} equivalent skipped)")
        return 0 if rate >= args.min_kill_rate else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
