"""Fuzzing every input surface that is read from outside: ``verify`` case files and launch grids,
the pasted launch command, HF cache trees, safetensors headers and indexes, the Python API, and
the golden tools; in process and (a few per surface) through the console script.

The invariant for every input: an answer (exit 0) that the inputs support, or one clean error
(:class:`KVCacheConfigError`; on the CLI one ``kvstrategies: error:`` line and exit 2). Never a
traceback, a hang, unbounded memory, a read outside what was named, or a number the inputs do
not support. Each surface has an oracle for "supported":

* cases: a case that passes validation sets only SGLang's sizing knobs, and the child process
  environment holds only the allow-list plus them; a refused case starts no process;
* grids: a grid checked against the recording matches each launch by its whole content;
* the pasted command: a command that is planned is one SGLang's own argparse accepts (an
  independent argparse built from SGLang's flag table), with no refused flag or knob planned;
* HF cache trees: a config read "from the cache" is the one inside the repository's folder,
  never the marked one planted outside it;
* checkpoints: weights read from headers are exactly the bytes of the tensors written, and a
  shard named outside the folder is never counted;
* the Python API and the allocators: a refused call leaves the allocator unchanged;
* golden tools: exit 0, 1 or 2 with a report, never a traceback.

Counts per surface are printed at the end (``tests/fuzz_stats.py``). Example counts follow the
hypothesis profile (``tests/conftest.py``): ``ci`` 40 per test, ``thorough`` 2,500 (``tox -e fuzz``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstrategies.case import CASE_DEFAULTS
from kvstrategies.case_validation import CHILD_ENV_NAMES, CHILD_ENV_PREFIXES, child_environment, validate_case_files
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.sglang.flag_classes import (
    CONFIG_FLAG,
    GRAPH_RESERVE_FLAGS,
    MODELLED,
    NO_EFFECT,
    NOT_MODELLED,
    REFUSED_UNLESS,
)
from kvstrategies.sglang.flag_values import human_readable_int
from kvstrategies.sglang.knobs import SIZING_KNOBS, knob_class
from kvstrategies.sglang.pasted_command import translate
from kvstrategies.sglang.tables.flags import SGLANG_FLAG_VALUES, SGLANG_SERVER_FLAGS
from kvstrategies.sglang.tables.knobs import SGLANG_KNOBS

from ..fuzz_stats import record
from ..helpers import HOSTILE_FILES, plant_hostile_file, tool_module
from .test_fuzz_cli import check_cli_outcome, hostile_numbers, hostile_text, hostile_values, run_cli

ROOT = Path(__file__).resolve().parents[2]
PRESETS = tuple(preset_names())
_ids = itertools.count()


def scaled(fraction: float) -> int:
    """``fraction`` of the profile's example count (expensive surfaces run fewer)."""
    return max(10, int(settings().max_examples * fraction))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-surfaces")


def fresh(scratch: Path) -> Path:
    folder = scratch / f"x{next(_ids)}"
    folder.mkdir()
    return folder


# ==== case files for verify ==========================================================================

ENV_NAMES = st.one_of(
    st.sampled_from(sorted(SGLANG_KNOBS)),
    st.sampled_from(sorted(SIZING_KNOBS)),
    st.sampled_from(("PYTHONPATH", "LD_PRELOAD", "PYTHONSTARTUP", "PATH", "HOME", "SGLANG_TYPO", "", "A" * 300)),
    st.text(max_size=8),
)
ENV_VALUES = st.one_of(
    hostile_values, st.text(max_size=12), st.sampled_from(("1", "0", "float16", "64", "3,45", "x\0y", "9" * 5000))
)


@st.composite
def hostile_cases(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(hostile_values, st.lists(st.integers(), max_size=3), st.text(max_size=5)))
    case: dict[str, Any] = {"preset": draw(st.sampled_from(PRESETS)), "available_bytes": 2**34}
    if draw(st.booleans()):
        case["env"] = draw(st.one_of(st.dictionaries(ENV_NAMES, ENV_VALUES, max_size=3), hostile_values))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from((*sorted(CASE_DEFAULTS), "bogus")))
        case[key] = draw(st.one_of(hostile_values, st.text(max_size=6), st.sampled_from(("/dev/zero", "../x"))))
    return case


class ProcessStarted(BaseException):
    """A child process or the SGLang import was reached (the case passed validation)."""


@contextlib.contextmanager
def no_processes() -> Iterator[None]:
    def started(*args: Any, **kwargs: Any) -> Any:
        raise ProcessStarted(repr(args)[:80])

    from kvstrategies.sglang.bridge import engine

    with mock.patch.object(subprocess, "run", started), mock.patch.object(subprocess, "Popen", started), \
            mock.patch.object(engine, "import_sglang", started):  # fmt: skip
        yield


def _allowed(name: str) -> bool:
    return name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES) or name in SIZING_KNOBS


@settings(max_examples=scaled(1.0))
@given(case=hostile_cases(), via_cli=st.booleans())
def test_fuzz_verify_cases_are_checked_before_any_process(scratch: Path, case: Any, via_cli: bool) -> None:
    path = fresh(scratch) / "case.json"
    path.write_text(json.dumps(case, default=str), encoding="utf-8")
    from kvstrategies.sglang.bridge.engine import run_cases

    with no_processes():
        try:
            if via_cli:
                code, out, err = run_cli(["verify", "--against", "sglang", str(path)])
                check_cli_outcome(code, out, err, json_out=False)
                assert code == 2  # the fake SGLang is never reached without a valid case
                record("verify cases", "refused")
                return
            run_cases([path])
        except KVCacheConfigError:
            record("verify cases", "refused")
            return
        except ProcessStarted:
            pass
    env = validate_case_files([path])[path].get("env") or {}
    assert set(env) <= SIZING_KNOBS, env  # silent-wrong: a validated env carries another name
    assert all(_allowed(name) for name in child_environment(env)), sorted(child_environment(env))
    record("verify cases", "validated (SGLang reached)")


# ==== launch grids for verify --launch --recorded ======================================================


@pytest.fixture(scope="module")
def recorded() -> tuple[Any, ...]:
    from kvstrategies.sglang.bridge.launch_check import load_golden

    return load_golden()[0][:400]


GRID_KEYS = ("name", "preset", "gpu", "tp_size", "pp_size", "attn_dp_size", "dcp_size", "flags", "bogus")
GRID_FLAGS = ("kv_cache_dtype", "page_size", "chunked_prefill_size", "attention_backend", "max_running_requests",
              "disable_radix_cache", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
              "speculative_num_draft_tokens", "speculative_draft_model_path", "bogus_flag")  # fmt: skip


@settings(max_examples=scaled(0.4))
@given(data=st.data())
def test_fuzz_launch_grids_match_recordings_by_content(scratch: Path, recorded: tuple[Any, ...],
                                                       data: st.DataObject) -> None:  # fmt: skip
    from kvstrategies.sglang.bridge.launch_check import load_golden, load_grid, run_verify_launch

    items: list[Any] = []
    for _ in range(data.draw(st.integers(0, 3))):
        if data.draw(st.integers(0, 7)) == 0:
            items.append(data.draw(hostile_values))
            continue
        item = data.draw(st.sampled_from(recorded)).to_dict()
        for _ in range(data.draw(st.integers(0, 2))):
            key = data.draw(st.sampled_from(GRID_KEYS))
            if key == "flags" and data.draw(st.booleans()):
                flags = dict(item["flags"]) if isinstance(item.get("flags"), dict) else {}
                flags[data.draw(st.sampled_from(GRID_FLAGS))] = data.draw(st.one_of(hostile_values, st.text(max_size=6),
                                                                                    st.sampled_from(("fp8_e4m3", 64))))
                item["flags"] = flags
            else:
                item[key] = data.draw(st.one_of(hostile_values, st.text(max_size=6)))
        items.append(item)
    path = fresh(scratch) / "grid.json"
    path.write_text(json.dumps(items, default=str), encoding="utf-8")
    try:
        code = run_verify_launch(path, recorded=True, out=lambda line: None)
    except KVCacheConfigError:
        record("launch grids", "refused")
        return
    assert code in (0, 1)
    specs, _ = load_golden()
    by_name = {spec.name: spec.to_dict() for spec in specs}
    for spec in load_grid(path):  # silent-wrong: compared with another launch's recorded answer
        assert by_name[spec.name] == spec.to_dict()
    record("launch grids", "answer")


# ==== the pasted launch command ====================================================================


class _OracleRefusal(Exception):
    pass


class _Oracle(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _OracleRefusal(message)


def _oracle_type(kind: str) -> Any:
    def backend(text: str) -> str:
        if text == "tc_piecewise":
            raise ValueError(text)
        return text

    return {"int": int, "float": float, "human_readable_int": human_readable_int, "loads": json.loads,
            "json_list_type": json.loads, "parse_cuda_graph_config_arg": json.loads,
            "parse_cuda_graph_backend_arg": backend}.get(kind, str)  # fmt: skip


def oracle_parser() -> argparse.ArgumentParser:
    """SGLang's server argparse rebuilt from its own flag table: names, arities, types, choices."""
    parser = _Oracle(add_help=False, allow_abbrev=True)
    for index, (option, (canon, arity)) in enumerate(sorted(SGLANG_SERVER_FLAGS.items())):
        kind, choices = SGLANG_FLAG_VALUES[canon]
        if arity == "0":
            parser.add_argument(option, action="store_true", dest=f"f{index}")
        else:
            nargs = None if arity == "1" else arity
            parser.add_argument(option, dest=f"f{index}", nargs=nargs, type=_oracle_type(kind), choices=choices)
    return parser


ORACLE = oracle_parser()
FLAG_OPTIONS = sorted(SGLANG_SERVER_FLAGS)
#: spellings of flags that are planned or have no effect (commands that should plan)
PLANNABLE = sorted(o for o, (canon, _) in SGLANG_SERVER_FLAGS.items() if canon in MODELLED | NO_EFFECT)
_TYPED = {"int": ("1", "2", "8", "64", "-1"), "float": ("0.8", "0.5", "1e-3"),
          "human_readable_int": ("128k", "4096", "1Ki")}


@st.composite
def flag_words(draw: st.DrawFn) -> list[str]:
    odd = st.sampled_from(("--bogus", "--tp", "--model", "-x", "--", "--config"))
    option = draw(st.one_of(st.sampled_from(PLANNABLE), st.sampled_from(PLANNABLE), st.sampled_from(FLAG_OPTIONS),
                            st.sampled_from(FLAG_OPTIONS).map(lambda o: o[:-2]), odd, st.text(max_size=6)))  # fmt: skip
    canon, arity = SGLANG_SERVER_FLAGS.get(option, (option, "1"))
    kind, choices = SGLANG_FLAG_VALUES.get(canon, ("str", None))
    good = tuple(map(str, choices)) if choices else _TYPED.get(kind, ("auto", "x", "/tmp/a"))
    values = st.one_of(
        st.sampled_from(good), st.sampled_from(good), hostile_text,
        st.sampled_from(("-1", "-x", "", "'", "1Ki", "2Ti", "1.5k", "nan", "-1e+308", "-.5")),
    )  # fmt: skip
    counts = {"0": draw(st.sampled_from((0, 0, 0, 1))), "1": 1, "?": draw(st.integers(0, 1))}
    count = counts.get(arity, draw(st.integers(0, 3)))
    words = [option, *(draw(values) for _ in range(count))]
    if count == 1 and draw(st.integers(0, 3)) == 0:
        words = [f"{option}={words[1]}"]
    return words


@st.composite
def pasted_commands(draw: st.DrawFn) -> list[str]:
    env = [f"{draw(ENV_NAMES)}={draw(st.sampled_from(('1', '0', 'float16', '64', '')))}"
           for _ in range(draw(st.integers(0, 2)))]  # fmt: skip
    env = [e for e in env if e.split("=", 1)[0].isidentifier()]
    launcher = draw(st.sampled_from((["python", "-m", "sglang.launch_server"], ["sglang", "serve"], [])))
    model = ["--model-path", draw(st.sampled_from(("llama-3.1-8b", "qwen3-8b", "deepseek-v2-lite")))]
    words = [*env, *launcher, *model]
    for _ in range(draw(st.integers(0, 4))):
        words += draw(flag_words())
    if draw(st.integers(0, 4)) == 0:
        return [" ".join(words) + draw(st.sampled_from(("", " '", " \\", ' "x')))]
    return words


def _planned_is_supported(words: list[str], plan_args: tuple[str, ...]) -> None:
    """Silent-wrong checks of a translation that succeeded (see the module doc)."""
    tokens = translate.__globals__["split_command"](words)
    env, rest = translate.__globals__["_strip_launcher"](tokens)
    ORACLE.parse_args(rest)  # raises _OracleRefusal: SGLang refuses a command that was planned
    for assignment in env:
        name = assignment.partition("=")[0]
        if name.startswith("SGLANG_") and name != "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN":
            assert knob_class(name) in ("no effect", "unknown"), name
    for word in rest:
        if word.startswith("--"):
            canon = translate.__globals__["canonical_flag"](word.split("=", 1)[0])[0]
            assert canon != CONFIG_FLAG and canon not in NOT_MODELLED, canon
            assert canon in MODELLED | NO_EFFECT | set(REFUSED_UNLESS) | GRAPH_RESERVE_FLAGS, canon


@settings(max_examples=scaled(1.0))
@given(words=pasted_commands(), through_cli=st.integers(0, 5))
def test_fuzz_pasted_commands_plan_only_what_sglang_accepts(words: list[str], through_cli: int) -> None:
    try:
        command = translate(words)
    except KVCacheConfigError:
        record("pasted command", "refused")
        return
    try:
        _planned_is_supported(words, command.plan_args)
    except _OracleRefusal as exc:
        pytest.fail(f"planned a command SGLang's argparse refuses ({exc}): {words!r:.300}")
    if through_cli == 0:
        code, out, err = run_cli(["plan", "--gpu", "H100", "--json", "--", *words])
        check_cli_outcome(code, out, err, json_out=True)
        record("pasted command", "answer (CLI)" if code == 0 else "refused (CLI)")
        return
    record("pasted command", "translated")


# ==== HF cache trees ================================================================================

REPO = "fuzzorg/fuzz-model"
MARK_INSIDE, MARK_OUTSIDE = 7, 3  # num_hidden_layers of the config inside the cache / planted outside


def _config(layers: int) -> str:
    return json.dumps({**load_preset_config("llama-3.1-8b"), "num_hidden_layers": layers})


@st.composite
def cache_trees(draw: st.DrawFn) -> dict[str, Any]:
    refs = st.sampled_from((b"abc", b"../../..", b"/etc", b"..", b"abc/../..", b"\xff\xfe", b"a" * 300, b"",
                            b"abc\n", b"../outside"))  # fmt: skip
    snapshots = st.sampled_from(("abc", "def", "link-out", "config-link-out", "no-config", "fifo-config",
                                 "device-config", "loop"))  # fmt: skip
    return {
        "ref": draw(st.one_of(st.none(), refs, st.binary(max_size=40))),
        "snapshots": draw(st.lists(snapshots, max_size=4)),
        "ref_kind": draw(st.sampled_from(("file", "file", "fifo", "device", "folder", "loop"))),
    }


def build_cache(root: Path, tree: dict[str, Any]) -> Path:
    outside = root / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(_config(MARK_OUTSIDE))
    cache = root / "cache"
    repo = cache / f"models--{REPO.replace('/', '--')}"
    snapshots = repo / "snapshots"
    snapshots.mkdir(parents=True)
    for name in tree["snapshots"]:
        folder = snapshots / name
        if name == "link-out":
            if not folder.exists():
                folder.symlink_to(outside, target_is_directory=True)
            continue
        folder.mkdir(exist_ok=True)
        config = folder / "config.json"
        if config.exists() or config.is_symlink():
            continue
        if name == "config-link-out":
            config.symlink_to(outside / "config.json")
        elif name == "fifo-config":
            os.mkfifo(config)
        elif name == "device-config":
            config.symlink_to("/dev/zero")
        elif name == "loop":
            config.symlink_to("config.json")
        elif name != "no-config":
            config.write_text(_config(MARK_INSIDE))
    if tree["ref"] is not None:
        ref = repo / "refs" / "main"
        ref.parent.mkdir()
        kind = tree["ref_kind"]
        if kind == "fifo":
            os.mkfifo(ref)
        elif kind == "device":
            ref.symlink_to("/dev/zero")
        elif kind == "folder":
            ref.mkdir()
        elif kind == "loop":
            ref.symlink_to("main")
        else:
            ref.write_bytes(tree["ref"])
    return cache


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@settings(max_examples=scaled(1.0))
@given(tree=cache_trees(), via_cli=st.integers(0, 4))
def test_fuzz_hf_cache_trees_are_read_only_inside_the_cache(scratch: Path, tree: dict[str, Any], via_cli: int) -> None:
    from kvstrategies.planner.model_source import resolve_model

    cache = build_cache(fresh(scratch), tree)
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    if via_cli == 0:
        with mock.patch.dict(os.environ, env):
            code, out, err = run_cli(["plan", REPO, "--gpu", "H100", "--json"])
        check_cli_outcome(code, out, err, json_out=True)
        if code == 0:  # the layers planned are the inside config's, never the planted one's
            buffers = json.loads(out)["pools"]
            assert sum(1 for b in buffers if b["name"].startswith("k_buffer[")) == MARK_INSIDE
        record("HF cache trees", "answer (CLI)" if code == 0 else "refused (CLI)")
        return
    try:
        source = resolve_model(REPO, env)
    except KVCacheConfigError as exc:
        assert len(str(exc)) < 1000
        record("HF cache trees", "refused")
        return
    assert source.kind == "hf-cache" and source.config is not None
    assert source.config["num_hidden_layers"] == MARK_INSIDE  # silent-wrong: the planted outside config
    assert source.folder is not None and source.folder.resolve().is_relative_to(cache.resolve())
    record("HF cache trees", "answer")


# ==== safetensors headers and indexes ============================================================

H, VOCAB, INTER, LAYERS = 64, 512, 128, 2
BITS = {"BF16": 16, "F16": 16, "F32": 32, "F8_E4M3": 8, "U8": 8, "I32": 32}


def tiny_config() -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": INTER,
            "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
            "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}  # fmt: skip


def tiny_tensors() -> dict[str, tuple[str, list[int]]]:
    t: dict[str, tuple[str, list[int]]] = {"model.embed_tokens.weight": ("BF16", [VOCAB, H])}
    for i in range(LAYERS):
        for name, shape in (("self_attn.q_proj", [H, H]), ("self_attn.k_proj", [32, H]), ("self_attn.v_proj", [32, H]),
                            ("self_attn.o_proj", [H, H]), ("mlp.gate_proj", [INTER, H]), ("mlp.up_proj", [INTER, H]),
                            ("mlp.down_proj", [H, INTER]), ("input_layernorm", [H])):  # fmt: skip
            t[f"model.layers.{i}.{name}.weight"] = ("BF16", shape)
    t |= {"model.norm.weight": ("BF16", [H]), "lm_head.weight": ("BF16", [VOCAB, H])}
    return t


def write_shard(path: Path, tensors: dict[str, tuple[str, list[int]]], mutation: dict[str, Any]) -> int | None:
    """A safetensors file (sparse data), with ``mutation`` applied; returns its true data bytes
    when the file is valid, ``None`` when the mutation makes it invalid."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        size = n * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    valid: int | None = offset
    kind = mutation.get("kind")
    target = mutation.get("tensor") or next(iter(tensors))
    if kind == "field":
        entry = header[target]
        entry[mutation["field"]] = mutation["value"]
        if not _entry_still_valid(entry, BITS[tensors[target][0]]):
            valid = None
    elif kind == "drop-field":
        header[target].pop(mutation["field"])
        valid = None
    elif kind == "empty":
        header = {"__metadata__": {}}
        valid = None
    raw = json.dumps(header, default=str).encode()
    if kind == "garbage":
        raw = mutation["bytes"]
        valid = None
    if kind == "deep":
        raw = b"[" * 50_000 + b"]" * 50_000
        valid = None
    length = len(raw) if kind != "length" else mutation["length"]
    if kind == "length" and mutation["length"] != len(raw):
        valid = None
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", length % 2**64) + raw)
        data = offset if kind != "truncate" else max(0, offset - mutation["cut"])
        if kind == "truncate" and mutation["cut"] > 0:
            valid = None
        handle.truncate(8 + len(raw) + data)
    return valid


#: the safetensors dtypes of each width (the format's own table), for the oracle below
_WIDTHS = {16: ("F16", "BF16", "I16", "U16"), 32: ("F32", "I32", "U32"), 8: ("U8", "I8", "BOOL", "F8_E4M3", "F8_E5M2")}


def _entry_still_valid(entry: dict[str, Any], bits: int) -> bool:
    """Whether a mutated header entry still describes its bytes (the same width, an integer shape of
    the same element count, the same offsets): such a file is valid and its bytes are unchanged."""
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    ints = isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    if not (isinstance(dtype, str) and dtype in _WIDTHS.get(bits, ()) and ints):
        return False
    n = 1
    for d in shape:
        n *= d
    good_offsets = isinstance(offsets, list) and len(offsets) == 2 and all(type(x) is int for x in offsets)
    return good_offsets and offsets[1] - offsets[0] == n * bits // 8 and offsets[0] >= 0


FIELD_VALUES = st.one_of(hostile_values, st.sampled_from(("Q4_K", "BF16", [1e400], [True, 8], ["64", 8], [0, 10**15],
                                                          [-1, 5], [5, 1], [0], None)))  # fmt: skip


@st.composite
def checkpoint_mutations(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("none", "none", "field", "drop-field", "empty", "garbage", "deep", "length",
                                 "truncate", "index", "index-outside", "index-total", "partial-series")))  # fmt: skip
    out: dict[str, Any] = {"kind": kind, "tensor": draw(st.sampled_from(sorted(tiny_tensors())))}
    if kind in ("field", "drop-field"):
        out["field"] = draw(st.sampled_from(("dtype", "shape", "data_offsets")))
        out["value"] = draw(FIELD_VALUES)
    elif kind == "garbage":
        out["bytes"] = draw(st.binary(max_size=64))
    elif kind == "length":
        out["length"] = draw(st.one_of(st.integers(0, 2**64 - 1), st.sampled_from((0, 7, 10**12, 2**63))))
    elif kind == "truncate":
        out["cut"] = draw(st.integers(0, 4096))
    elif kind == "index-total":
        out["total"] = draw(st.one_of(hostile_numbers, st.text(max_size=4), st.none()))
    elif kind == "index-outside":
        out["shard"] = draw(st.sampled_from(("../outside.safetensors", "/etc/hostname", "..", "a/b.safetensors", "")))
    return out


@settings(max_examples=scaled(1.0))
@given(mutation=checkpoint_mutations(), tp=st.sampled_from((1, 2)), via_cli=st.integers(0, 4))
def test_fuzz_checkpoints_are_believed_only_when_valid(scratch: Path, mutation: dict[str, Any], tp: int,
                                                      via_cli: int) -> None:  # fmt: skip
    from kvstrategies.planner import DeploymentRequest, plan_deployment
    from kvstrategies.planner.checkpoint import INDEX_NAME, read_checkpoint
    from kvstrategies.planner.gpus import lookup_gpu

    root = fresh(scratch)
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(tiny_config()))
    tensors = tiny_tensors()
    kind = mutation["kind"]
    expected: int | None
    if kind == "partial-series":  # shard 1 of 2 and no index
        names = sorted(tensors)
        expected = None
        write_shard(folder / "model-00001-of-00002.safetensors", {n: tensors[n] for n in names[:5]}, {})
    elif kind.startswith("index"):
        expected = write_shard(folder / "model-00001-of-00001.safetensors", tensors, {})
        write_shard(root / "outside.safetensors", {"x.weight": ("BF16", [4096, 4096])}, {})
        shard = mutation.get("shard", "model-00001-of-00001.safetensors")
        total = mutation.get("total", expected)
        index = {"metadata": {"total_size": total}, "weight_map": dict.fromkeys(tensors, shard)}
        (folder / INDEX_NAME).write_text(json.dumps(index, default=str))
        whole = isinstance(total, (int, float)) and not isinstance(total, bool) and total == total
        valid_total = whole and 0 < total <= 2**63 - 1 and total not in (float("inf"),) and int(total) == total
        if kind != "index":  # the shard's own headers are read when the index is valid
            expected = None if kind == "index-outside" or not valid_total else expected
    else:
        expected = write_shard(folder / "model.safetensors", tensors, mutation)
    if via_cli == 0:
        code, out, err = run_cli(["plan", str(folder), "--gpu", "H100", "--tp", str(tp), "--json"])
        check_cli_outcome(code, out, err, json_out=True)
        record("checkpoints", "answer (CLI)" if code == 0 else "refused (CLI)")
        return
    try:
        ckpt = read_checkpoint(folder)
        req = DeploymentRequest("m", {"hf_config": tiny_config(), "checkpoint": str(folder)}, tp_size=tp,
                                gpu=lookup_gpu("H100"))  # fmt: skip
        planned = plan_deployment(req, suggest=False)
    except KVCacheConfigError:
        record("checkpoints", "refused")
        return
    assert ckpt is not None
    if ckpt.source == "headers":  # silent-wrong: bytes the written tensors do not hold (or a shard outside)
        assert expected is not None and ckpt.total_bytes == expected, (mutation, ckpt.total_bytes, expected)
    else:
        assert kind == "index-total" and ckpt.total_bytes == mutation["total"]
    budget = planned.budget
    assert budget.weight_bytes is not None and 0 < budget.weight_bytes < 2**31
    record("checkpoints", "answer")


# ==== the Python API ==================================================================================

API_FIELDS = (
    "model", "source", "tp_size", "kv_cache_dtype", "page_size", "model_dtype", "weight_dtype", "weight_quantization",
    "attention_backend", "speculative_algorithm", "speculative_draft_model_path", "disable_radix_cache",
    "request_lengths", "assume_architecture", "allow_context_length_override", "model_folder", "model_description",
    "launch_extras", "device", "dp_replicas", "max_running_requests",
)  # fmt: skip
ODD_VALUES = st.sampled_from((Path("/x"), b"x", object(), ("a",), {"preset": 3}, {"max_prefill_tokens": "8k"},
                              {"max_prefill_tokens": 4096}, "fp8_e4m3", "auto", "bfloat16", "triton", True, 8))
ANY_VALUE = st.one_of(hostile_values, st.text(max_size=8), st.lists(hostile_values, max_size=2), ODD_VALUES,
                      st.dictionaries(st.text(max_size=6), hostile_values, max_size=2))  # fmt: skip


#: values of the right type for some fields, so that some requests plan
VALID = {"kv_cache_dtype": ("auto", "fp8_e4m3", "bf16"), "page_size": (1, 16, 64), "tp_size": (1, 2, 4),
         "attention_backend": ("triton", "flashinfer", "fa3"), "disable_radix_cache": (True, False),
         "model_dtype": ("bfloat16", "float16"), "request_lengths": ((1024,), (4096, 32768)),
         "launch_extras": ({"max_prefill_tokens": 4096}, {"disable_cuda_graph": True}),
         "max_running_requests": (8, 64)}  # fmt: skip


@st.composite
def request_changes(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(API_FIELDS), min_size=1, max_size=3, unique=True)):
        good = VALID.get(name)
        out[name] = draw(st.sampled_from(good)) if good and draw(st.booleans()) else draw(ANY_VALUE)
    return out


@settings(max_examples=scaled(1.0))
@given(changes=request_changes())
def test_fuzz_deployment_requests_of_any_type(changes: dict[str, Any]) -> None:
    from kvstrategies.planner import DeploymentRequest, plan_deployment
    from kvstrategies.planner.gpus import lookup_gpu

    kwargs: dict[str, Any] = {"model": "llama-3.1-8b", "source": {"preset": "llama-3.1-8b"}, "gpu": lookup_gpu("H100")}
    kwargs.update(changes)
    try:
        planned = plan_deployment(DeploymentRequest(**kwargs), suggest=False)
    except KVCacheConfigError:
        record("Python API: requests", "refused")
        return
    assert planned.budget.available_bytes > 0 and planned.sizes.max_total_num_tokens >= 1
    for name in ("kv_cache_dtype", "attention_backend", "model_dtype"):  # silent-wrong: a non-string was planned
        assert name not in changes or changes[name] is None or isinstance(changes[name], str)
    record("Python API: requests", "answer")


IDS = st.one_of(hostile_values, st.lists(st.integers(-3, 40), max_size=4), st.sampled_from((
    torch.tensor([1, 2]), torch.tensor([1.5]), torch.empty(2, dtype=torch.int64, device="meta"), torch.tensor([True]),
    torch.tensor([[1, 2]]), (), "12", None)))  # fmt: skip


@pytest.fixture(scope="module")
def paged_pools() -> Any:
    import kvstrategies
    from kvstrategies.case import parse_case

    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**26, "page_size": 16})
    return kvstrategies.build(kvstrategies.plan(case.settings, case.available_bytes), "cpu")


OPS = ("req.alloc", "req.free", "free", "alloc", "restore", "decode", "extend", "write")


@settings(max_examples=scaled(1.0))
@given(ops=st.lists(st.tuples(st.sampled_from(OPS), IDS, IDS), min_size=1, max_size=6))
def test_fuzz_allocator_and_pool_calls_with_hostile_arguments(paged_pools: Any, ops: list[tuple[str, Any, Any]]
                                                              ) -> None:  # fmt: skip
    from kvstrategies.allocators.common import AllocatorMisuseError
    from kvstrategies.allocators.requests import RequestSlotAllocator

    requests = RequestSlotAllocator(16)
    allocator = paged_pools.allocator
    allocator.clear()
    kv = paged_pools.token_to_kv_pool
    for op, a, b in ops:
        before = (requests.available_size(), allocator.available_size())
        try:
            if op == "req.alloc":
                requests.alloc(a)
            elif op == "req.free":
                requests.free(a)
            elif op == "free":
                allocator.free(a)
            elif op == "alloc":
                allocator.alloc(a)
            elif op == "restore":
                allocator.restore_state(a)
            elif op == "decode":
                allocator.alloc_decode(a, a, b)
            elif op == "extend":
                allocator.alloc_extend(a, a, b, b, a, b)
            else:
                n = int(a.numel()) if isinstance(a, torch.Tensor) and a.device.type != "meta" else 0
                kv.set_kv_buffer(0, a, torch.zeros(n, 8, 128, dtype=torch.bfloat16),
                                 torch.zeros(n, 8, 128, dtype=torch.bfloat16))  # fmt: skip
        except (KVCacheConfigError, AllocatorMisuseError):
            assert (requests.available_size(), allocator.available_size()) == before  # a refusal changes nothing
            record("Python API: allocators and pools", "refused")
            continue
        record("Python API: allocators and pools", "done")
    assert 0 <= requests.available_size() <= 16 and 0 <= allocator.available_size() <= allocator.size


# ==== the golden tools ==================================================================================

SNAPSHOT = ROOT / "golden" / "default-llama-3.1-8b-tp1-bf16-p1.json"


@st.composite
def snapshot_files(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(("copy", "json", *HOSTILE_FILES)))
    payload = b""
    if kind == "bytes":
        payload = draw(st.binary(max_size=200))
    elif kind == "json":
        payload = json.dumps(draw(st.recursive(hostile_values, lambda c: st.dictionaries(st.text(max_size=4), c,
                                                                                        max_size=3), max_leaves=8)),
                             default=str).encode()  # fmt: skip
    return kind, payload


def plant_snapshot(path: Path, kind: str, payload: bytes) -> None:
    if kind == "copy":
        shutil.copy(SNAPSHOT, path)
    else:
        plant_hostile_file(path, "bytes" if kind == "json" else kind, payload)


def _tool(name: str) -> Any:
    return tool_module(name)


@pytest.fixture(scope="module")
def golden_tools() -> dict[str, Any]:
    return {"diff_golden": _tool("diff_golden"), "record_golden": _tool("record_golden")}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@settings(max_examples=scaled(0.5))
@given(snapshot=snapshot_files(), which=st.sampled_from(("diff_golden", "record_golden")))
def test_fuzz_golden_tools_report_any_snapshot(scratch: Path, golden_tools: dict[str, Any],
                                              snapshot: tuple[str, bytes], which: str) -> None:  # fmt: skip
    root = fresh(scratch)
    a, b = root / "a", root / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(SNAPSHOT, a / SNAPSHOT.name)
    plant_snapshot(b / SNAPSHOT.name, *snapshot)
    argv = (["--dirs", str(a), str(b)] if which == "diff_golden"
            else ["--check", "--golden", str(b), "-k", "default-llama-3.1-8b-tp1-bf16-p1"])  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = golden_tools[which].main(argv)
    assert code in (0, 1, 2) and "Traceback" not in out.getvalue()
    if snapshot[0] != "copy":  # silent-wrong: a damaged snapshot reported as matching
        same = snapshot[0] == "json" and json.loads(snapshot[1] or b"0") == json.loads(SNAPSHOT.read_text())
        assert code != 0 or same
    record("golden tools", f"exit {code}")


# ==== through the console script: a fresh process, 2 GiB address space, 60 s ============================

CONSOLE_CASES = [
    (["plan", "--gpu", "H100", "--", "python -m sglang.launch_server --model-path 'x"], "cannot be split"),
    (["plan", "--gpu", "H100", "--", "sglang", "serve", "--model-path", "llama-3.1-8b", "--config", "s.yaml"],
     "--config"),
    (["plan", "--gpu", "H100", "--", "sglang", "serve", "--model-path", "llama-3.1-8b", "--kv-cache-dtype",
      "float32"], "choices"),
    (["plan", "llama-3.1-8b", "--gpu", "H100", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
      "/dev/zero"], "not a regular file"),
    (["verify", "--against", "sglang", "--launch", "/dev/zero", "--recorded"], "not a regular file"),
    (["verify", "--against", "sglang", "--launch", "--jobs", "1000000"], "--jobs"),
    (["verify", "--against", "sglang", "@case-pythonpath"], "PYTHONPATH"),
    (["plan", "fuzzorg/bad-ref", "--gpu", "H100"], "does not name a snapshot"),
    (["plan", "--gpu", "H100", "--", " ".join(["--port 1"] * 9_000)], "more than"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "needle"), CONSOLE_CASES, ids=lambda a: " ".join(map(str, a))[:50])
def test_console_script_on_hostile_surfaces(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "case-pythonpath").write_text(json.dumps({"preset": "llama-3.1-8b", "available_bytes": 2**34,
                                                          "env": {"PYTHONPATH": str(tmp_path)}}))  # fmt: skip
    repo = tmp_path / "cache" / "models--fuzzorg--bad-ref"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("../../../..")
    args = [str(tmp_path / a[1:]) if a.startswith("@") else a for a in args]
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    code = limit + "import sys; from kvstrategies.cli.app import main; sys.exit(main())"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env,
                          cwd=ROOT, check=False)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("kvstrategies: error: ") and needle in lines[0], done.stderr[-2000:]
    record("console script", "refused")
