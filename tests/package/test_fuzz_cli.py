"""Fuzzing the operator surfaces: the ``--gpu`` planner path, the CLI flags, and the files read.

Only two outcomes are allowed for any input:

* an answer that is not absurd: a KV budget in ``(0, GPU capacity]``, weights > 0 bytes, token
  and request counts >= 1 (exit 0 on the CLI);
* a :class:`KVCacheConfigError` (CLI: exactly one stderr line ``kvstrategies: error: ...``,
  exit 2).

Anything else (another exception, a traceback, exit 1, a hang or a memory blow-up) fails. Hostile
values: integers up to ``2**1000`` in magnitude, NaN, infinities, ``1e308``, wrong types, and
5,000-digit byte strings; files: devices, FIFOs, folders, oversized, binary, duplicate keys.

Example counts come from the hypothesis profile (``tests/conftest.py``): ``ci`` 40 per test,
``thorough`` 2,500 per test (``tox -e fuzz``). A few subprocess examples go through the console
script's entry point (``python -m kvstrategies.cli.app``) with a memory limit.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvstrategies.cli.app as cli
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.config_fields import INT_FIELDS
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.presets import load_preset_config, preset_names

from ..fuzz_stats import event

PRESETS = tuple(preset_names())
GPUS = ("H100", "H200", "B200", "A100-40GB", "L40S", "MI300X")
ROOT = Path(__file__).resolve().parents[2]

# ---- hostile values -------------------------------------------------------------------------------

HUGE = (2**31, 2**40, 2**63 - 1, 2**63, 2**64, 10**20, 2**1000, -(2**1000), 10**400, -(10**400), 10**4000)
hostile_numbers = st.one_of(
    st.integers(-(2**1000), 2**1000),
    st.integers(-3, 70_000),
    st.sampled_from(HUGE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from((1e308, -1e308, math.nan, math.inf, -math.inf, 0.5, -0.0)),
)
hostile_values = st.one_of(
    hostile_numbers,
    hostile_numbers,
    st.text(max_size=4),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-3, 3), max_size=3),
    st.just({}),
)
hostile_text = st.one_of(
    hostile_numbers.map(str),
    st.sampled_from(("9" * 5000, "nan", "inf", "-inf", "1e308", "", ",", ",,1", "0x10", " 1 ", "\udc80", "-0",
                     "1.5GiB", "80GiB", "0GiB", "1e3", "2**63", "9" * 30 + "TiB")),  # fmt: skip
    st.text(max_size=6),
)


def _numeric_paths(config: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            out += _numeric_paths(value, (*prefix, key))
        elif isinstance(value, (int, float, list)) and not isinstance(value, bool):
            out.append((*prefix, key))
    return out


def _set(config: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key), dict) or key not in node else node[key]
        if not isinstance(node, dict):
            return
    node[path[-1]] = value


@st.composite
def hostile_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A preset's config with 1-3 fields (existing numeric ones or any rule's name) set hostile."""
    name = draw(st.sampled_from(PRESETS))
    config = json.loads(json.dumps(load_preset_config(name)))
    paths = sorted(set(_numeric_paths(config)) | {(key,) for key in INT_FIELDS})
    for _ in range(draw(st.integers(1, 3))):
        _set(config, draw(st.sampled_from(paths)), draw(hostile_values))
    return name, config


# ---- the sanity of an answer --------------------------------------------------------------------------


def check_not_absurd(budget: Mapping[str, Any], tokens: int, requests: int) -> None:
    available = budget["available_bytes"]
    if budget["source"] == "gpu":
        assert 0 < available <= budget["capacity_bytes"], budget
        assert budget["weight_bytes"] > 0, budget
    else:
        assert available > 0, budget
    assert tokens >= 1 and requests >= 1, (tokens, requests)


def _plan_or_error(req: DeploymentRequest) -> None:
    try:
        plan = plan_deployment(req, suggest=False)
    except KVCacheConfigError as exc:
        event(f"error: {type(exc).__name__}")
        return
    event("planned")
    budget = plan.budget
    check_not_absurd(
        {"available_bytes": budget.available_bytes, "source": budget.source, "weight_bytes": budget.weight_bytes,
         "capacity_bytes": budget.capacity_bytes},  # fmt: skip
        plan.sizes.max_total_num_tokens,
        plan.sizes.max_running_requests,
    )


# ---- the --gpu planner path ---------------------------------------------------------------------------


@given(model=hostile_configs(), gpu=st.sampled_from(GPUS), tp=st.sampled_from((1, 2, 8)), quant=st.booleans())
def test_fuzz_gpu_planner_config_fields(model: tuple[str, dict[str, Any]], gpu: str, tp: int, quant: bool) -> None:
    name, config = model
    try:  # the request itself refuses an integer too long to print (10**400 as a field)
        req = DeploymentRequest(model=name, source={"hf_config": config}, gpu=lookup_gpu(gpu), tp_size=tp,
                                weight_quantization="fp8" if quant else None)  # fmt: skip
    except KVCacheConfigError:
        event("refused by DeploymentRequest")
        return
    _plan_or_error(req)


REQUEST_FIELDS = ("tp_size", "pp_size", "pp_rank", "dcp_size", "attn_dp_size", "page_size", "weight_bytes",
                  "overhead_bytes", "max_total_tokens", "max_running_requests", "context_length",
                  "chunked_prefill_size", "mem_fraction_static", "swa_full_tokens_ratio", "speculative_draft_layers",
                  "speculative_num_draft_tokens", "available_bytes")  # fmt: skip


@given(
    name=st.sampled_from(PRESETS),
    gpu=st.sampled_from(GPUS),
    changes=st.dictionaries(st.sampled_from(REQUEST_FIELDS), hostile_values, min_size=1, max_size=3),
)
def test_fuzz_gpu_planner_request_values(name: str, gpu: str, changes: dict[str, Any]) -> None:
    try:
        req = DeploymentRequest(model=name, source={"preset": name}, gpu=lookup_gpu(gpu), **changes)
    except KVCacheConfigError:
        event("refused by DeploymentRequest")
        return
    except TypeError:  # a dataclass field compared with a wrong type in __post_init__ (e.g. "x" < 1)
        pytest.fail(f"DeploymentRequest({changes!r}) raised TypeError, not KVCacheConfigError")
    _plan_or_error(req)


# ---- the CLI, in process --------------------------------------------------------------------------------

FLAGS = ("--tp", "--pp-size", "--pp-rank", "--dcp", "--attn-dp", "--page-size", "--gpu-memory", "--available-bytes",
         "--weight-bytes", "--gpu-overhead", "--mem-fraction-static", "--max-total-tokens", "--max-running-requests",
         "--context-length", "--chunked-prefill-size", "--swa-full-tokens-ratio", "--speculative-draft-layers",
         "--speculative-num-draft-tokens", "--request-length", "--kv-cache-dtype", "--device", "--gpu",
         "--model-dtype", "--weight-dtype", "--weight-quantization", "--speculative-algorithm",
         "--attention-backend", "--plot")  # fmt: skip


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args)
        except SystemExit as exc:  # argparse (--help, usage errors)
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def check_cli_outcome(code: int, out: str, err: str, *, json_out: bool) -> None:
    assert code in (0, 2), (code, err[-2000:])
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kvstrategies: error: "), err[-2000:]
        event("exit 2")
        return
    event("exit 0")
    assert out.strip()
    if json_out:
        document = json.loads(out)
        planner = document.get("planner")
        if planner is not None:
            final = planner["final_sizes"]
            check_not_absurd(planner["budget"], final["max_total_num_tokens"], final["max_running_requests"])


@given(
    command=st.sampled_from(("plan", "sweep")),
    name=st.sampled_from(PRESETS),
    budget=st.sampled_from((["--gpu", "H100"], ["--gpu", "B200"], ["--available-bytes", "40GiB"], [])),
    flags=st.lists(st.tuples(st.sampled_from(FLAGS), hostile_text), min_size=1, max_size=3),
)
def test_fuzz_cli_flags(command: str, name: str, budget: list[str], flags: list[tuple[str, str]]) -> None:
    args = [command, name, *budget, "--json"]
    for flag, value in flags:
        if flag == "--plot":
            value = f"/dev/null/{value}" if value else "/dev/null"  # never write into the tree
        args += [flag, value]
    code, out, err = run_cli(args)
    check_cli_outcome(code, out, err, json_out=command == "plan")


# ---- files -----------------------------------------------------------------------------------------------

FILE_KINDS = ("device", "urandom", "fifo", "folder", "missing", "binary", "oversized", "duplicate", "deep",
              "surrogate", "bom", "hostile-json", "hf-config-device", "hf-config-fifo", "symlink-device")  # fmt: skip


def make_file(kind: str, folder: Path, payload: Any) -> str:
    path = folder / f"{kind}.json"
    if kind == "device":
        return "/dev/zero"
    if kind == "urandom":
        return "/dev/urandom"
    if kind == "fifo":
        if not path.exists():
            os.mkfifo(path)
    elif kind == "folder":
        path.mkdir(exist_ok=True)
    elif kind == "missing":
        return str(folder / "no-such.json")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "oversized":
        with path.open("wb") as handle:  # sparse: 65 MiB of zeros without writing them
            handle.truncate(65 * 2**20)
    elif kind == "duplicate":
        path.write_text('{"preset": "llama-3.1-8b", "available_bytes": 1, "available_bytes": 2}', encoding="utf-8")
    elif kind == "deep":
        path.write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    elif kind == "surrogate":
        path.write_text('{"preset": "llama-3.1-8b\\udc80", "available_bytes": 1}', encoding="utf-8")
    elif kind == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"preset": "llama-3.1-8b", "available_bytes": 2**34}).encode())
    elif kind == "hostile-json":
        path.write_text(json.dumps({"preset": "qwen3-8b", "available_bytes": payload, "page_size": payload}),
                        encoding="utf-8")  # fmt: skip
    elif kind in ("hf-config-device", "hf-config-fifo", "symlink-device"):
        target = "/dev/zero"
        if kind == "hf-config-fifo":
            target = str(folder / "config-fifo")
            if not Path(target).exists():
                os.mkfifo(target)
        elif kind == "symlink-device":
            target = str(folder / "link")
            if not Path(target).is_symlink():
                os.symlink("/dev/zero", target)
        path.write_text(json.dumps({"hf_config": target, "available_bytes": 2**34}), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def fuzz_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-files")


@given(kind=st.sampled_from(FILE_KINDS), payload=hostile_numbers, as_model=st.booleans())
def test_fuzz_files(fuzz_folder: Path, kind: str, payload: Any, as_model: bool) -> None:
    path = make_file(kind, fuzz_folder, payload)
    args = ["plan", path, "--available-bytes", "40GiB", "--json"] if as_model else ["plan", "--case", path, "--json"]
    code, out, err = run_cli(args)
    check_cli_outcome(code, out, err, json_out=True)


# ---- through the console script's entry point (a few: each starts an interpreter) ----------------------

SUBPROCESS_CASES = [
    ["plan", "--case", "/dev/zero"],
    ["plan", "llama-3.1-8b", "--gpu", "H100", "--pp-size", str(2**63)],
    ["plan", "llama-3.1-8b", "--gpu", "H100", "--chunked-prefill-size", str(2**40)],
    ["plan", "llama-3.1-8b", "--gpu-memory", "9" * 5000],
    ["sweep", "llama-3.1-8b", "--gpu", ","],
]


@pytest.mark.parametrize("args", SUBPROCESS_CASES, ids=lambda a: " ".join(a)[:40])
def test_console_script_hostile_examples(args: list[str]) -> None:
    """A fresh process, 2 GiB address-space limit, 60 s: one stderr line, exit 2."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    code = limit + "import sys; from kvstrategies.cli.app import main; sys.exit(main())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env,
                          cwd=ROOT, check=False)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("kvstrategies: error: "), done.stderr[-2000:]
