"""Print docs/errors.md: every KVCacheConfigError class with one real message, produced live.

Usage: ``python tools/error_table.py > docs/errors.md``. Each row runs a real bad input through
the library and records the exception's class and message, so the table cannot drift from
the code (tests/package/test_robustness.py checks every subclass is listed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from kvstrategies.api import plan
from kvstrategies.case import parse_case
from kvstrategies.core.torch_import import import_torch
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.models import parse_hf_config
from kvstrategies.presets import load_preset_config

GIB = 2**30


def _plan(case: dict[str, Any]) -> Any:
    parsed = parse_case(case)
    return plan(parsed.settings, parsed.available_bytes)


def _without_torch() -> Any:
    saved = sys.modules.get("torch")
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` fail
    try:
        return import_torch()
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def _does_not_fit() -> Any:
    from kvstrategies.planner import DeploymentRequest
    from kvstrategies.planner.gpus import lookup_gpu
    from kvstrategies.planner.replan import plan_or_replan

    return plan_or_replan(DeploymentRequest("llama-3.1-70b", {"preset": "llama-3.1-70b"}, gpu=lookup_gpu("H100")))


def _usage_error() -> Any:
    from kvstrategies.cli.app import build_parser

    return build_parser().parse_args(["plan", "llama-3.1-8b", "--no-such-flag"])


#: (class name, what it means, the input that triggers it, the call)
EXAMPLES: list[tuple[str, str, str, Callable[[], Any]]] = [
    (
        "KVCacheConfigError",
        "An input cannot be planned: wrong type, out of range, missing field, bad file.",
        '`parse_hf_config` of Llama-3.1-8B with `"num_hidden_layers": "32"`',
        lambda: parse_hf_config({**load_preset_config("llama-3.1-8b"), "num_hidden_layers": "32"}),
    ),
    (
        "UnsupportedConfigurationError",
        "A valid combination that SGLang 0.5.23 (or this library) does not support.",
        "GPT-OSS-120B with `kv_cache_dtype: nvfp4`",
        lambda: _plan({"preset": "gpt-oss-120b", "kv_cache_dtype": "nvfp4", "page_size": 64,
                       "available_bytes": 40 * GIB}),  # fmt: skip
    ),
    (
        "InsufficientMemoryError",
        "The budget cannot hold the plan (SGLang raises RuntimeError here).",
        "Llama-3.1-8B with `available_bytes: 1000`",
        lambda: _plan({"preset": "llama-3.1-8b", "available_bytes": 1000}),
    ),
    (
        "SWAPoolTooSmallError",
        "The sliding-window pool cannot admit one request (window + page).",
        "GPT-OSS-120B, page 64, `available_bytes: 2 MiB`",
        lambda: _plan({"preset": "gpt-oss-120b", "page_size": 64, "available_bytes": 2 * 2**20}),
    ),
    (
        "DSV4StateReservationError",
        "DeepSeek-V4: the ratio-128 state for the estimated requests leaves the SWA pool below its floor.",
        "DeepSeek-V4-Flash, page 256, 20 GiB, no `max_running_requests`",
        lambda: _plan({"preset": "deepseek-v4-flash", "page_size": 256, "available_bytes": 20 * GIB}),
    ),
    (
        "LayoutError",
        "Sizing succeeded but the pool cannot be laid out (carries the sizes planned so far).",
        "DeepSeek-V3.2 (DSA) on CUDA with `page_size: 1`",
        lambda: _plan({"preset": "deepseek-v3.2", "page_size": 1, "available_bytes": 40 * GIB}),
    ),
    (
        "DoesNotFitError",
        "A deployment on a GPU that cannot start; carries the re-planned options that do (`planner.replan`).",
        "`plan_or_replan` of Llama-3.1-70B on one H100-80GB",
        lambda: _does_not_fit(),
    ),
    (
        "UsageError",
        "A command line argparse cannot read (the CLI; with `--json` also one JSON object).",
        "`kvstrategies plan llama-3.1-8b --no-such-flag`",
        lambda: _usage_error(),
    ),
    (
        "MissingDependencyError",
        "An optional dependency (torch, triton, matplotlib) is needed for this call.",
        "`build` without torch installed",
        _without_torch,
    ),
]


def _allocator_examples() -> list[tuple[str, str, str, Callable[[], Any]]]:
    from kvstrategies.allocators import SWATokenToKVPoolAllocator, TokenToKVPoolAllocator

    def double_free() -> None:
        allocator = TokenToKVPoolAllocator(8)
        locs = allocator.alloc(2)
        allocator.free(locs)  # type: ignore[arg-type]
        allocator.free(locs)  # type: ignore[arg-type]

    def missing_peer() -> None:
        allocator = SWATokenToKVPoolAllocator(8, 8, page_size=2, check_misuse=False)
        allocator.full_to_swa_index_mapping[2] = 3  # a peer left behind by an unchecked caller
        allocator.free_full([2])

    return [
        ("AllocatorMisuseError", "An allocator was given back an id it did not hand out (or twice).",
         "`TokenToKVPoolAllocator(8)`: `free` the same two locations twice", double_free),
        ("AllocatorStateError", "An allocator invariant broke (SGLang asserts here).",
         "`free_full` of an SWA location whose peer is still allocated", missing_peer),
    ]  # fmt: skip


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> None:
    print("# Errors")
    print()
    print("Every public entry point (`plan`, `build`, `parse_hf_config`, `parse_case` / `load_case`, the")
    print("context dataclasses, the CLI) either returns a plan that satisfies the invariants or raises")
    print("`KVCacheConfigError` (a `ValueError`) or one of its subclasses; nothing else escapes (fuzzed by")
    print("`tests/package/test_fuzz.py` and, for the CLI, the `--gpu` planner and the files read,")
    print("`tests/package/test_fuzz_cli.py`). Messages name the field, what was given, what is allowed, and the fix.")
    print("The CLI prints the message as one line, `kvstrategies: error: ...`, and exits with code 2")
    print("(argparse usage errors too); with `--json` it also prints one JSON object on stdout,")
    print('`{"error", "flag", "fix"}` (plus `"options"` for a deployment that does not fit, whose options')
    print("are otherwise printed on stdout). The `--gpu` planner validates every config field the weight")
    print("estimate and the launch rules read before using any (`kvstrategies/planner/config_fields.py`)")
    print("and never reports weights <= 0 bytes or a KV budget outside (0, GPU capacity]. Files are read")
    print("only when regular and at most 64 MiB (never a device or a FIFO); a key repeated in one JSON")
    print("object is an error.")
    print()
    print("Hierarchy: `KVCacheConfigError` > `UnsupportedConfigurationError`, `InsufficientMemoryError`")
    print("(> `SWAPoolTooSmallError` > `DSV4StateReservationError`; > `DoesNotFitError`), `LayoutError`,")
    print("`MissingDependencyError`, `UsageError`.")
    print()
    print("Allocators (run time, not input errors): `AllocatorStateError` (a `RuntimeError`: an invariant")
    print("broke, e.g. an SWA peer missing) > `AllocatorMisuseError` (the caller freed an id twice, one never")
    print("handed out or out of range, slot/page 0, or opened a Mamba group inside a group). Misuse is")
    print("refused at the faulty call and leaves the allocator unchanged; it is checked by default and")
    print("`check_misuse=False` on any allocator turns the checks off (SGLang's behaviour; the cost is")
    print("measured by `tools/bench_allocators.py`).")
    print()
    print("Generated by `python tools/error_table.py > docs/errors.md` from live calls.")
    print()
    print("| class | meaning | input | real message |")
    print("| --- | --- | --- | --- |")
    for name, meaning, given, call in [*EXAMPLES, *_allocator_examples()]:
        try:
            call()
        except (KVCacheConfigError, RuntimeError) as exc:
            if type(exc).__name__ != name:
                raise SystemExit(f"{name}: the example raised {type(exc).__name__} instead: {exc}") from exc
            print(f"| `{name}` | {_cell(meaning)} | {_cell(given)} | {_cell(str(exc))} |")
        else:
            raise SystemExit(f"{name}: the example did not raise")


if __name__ == "__main__":
    main()
