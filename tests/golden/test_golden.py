"""Golden snapshots of the whole case catalog, and the invariants of every case built on meta.

Every ``cases/*.json`` is planned and compared with ``golden/<case>.json`` through a syrupy
extension (``pytest --snapshot-update`` re-records; ``tools/record_golden.py`` writes the same
bytes). A snapshot without a case, or a case without a snapshot, fails the run. Each case is
also built on ``meta``: allocated bytes == planned bytes, tensors as described, token counts
page-aligned (except SWAChunkCap's ``min(cap, M)`` quirk, SWARequestCapPoolConfigurator.calculate_pool_sizes) and tokens
x cell within the budget. See docs/golden.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.api import Plan, build
from kvstrategies.case import Case, parse_case
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.golden.diff import diff_documents
from kvstrategies.golden.snapshot import (
    case_files,
    catalog_mismatch,
    dumps,
    float_of,
    golden_document,
    golden_text,
    load_catalog_case,
    plan_case,
)
from kvstrategies.strategies.hybrid_swa import SWAChunkCapPoolConfigurator

from ..golden_syrupy import GOLDEN_DIR_ENV, GoldenSnapshotExtension, golden_dir
from ..helpers import tool_module

# syrupy cannot relate a snapshot named after a case to the test's own name; that is the design.
pytestmark = pytest.mark.filterwarnings("ignore:(?s).*Can not relate snapshot:UserWarning")

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "cases"
TOOLS = ROOT / "tools"
CASE_PATHS = case_files(CASES_DIR)
CASE_IDS = [p.stem for p in CASE_PATHS]
TOKEN_FIELDS = ("max_total_num_tokens", "full_max_total_num_tokens", "swa_max_total_num_tokens")


@cache
def _case(path: Path) -> Case:
    return load_catalog_case(path)


@cache
def _plan(path: Path) -> Plan:
    return plan_case(_case(path))


@pytest.fixture
def golden(snapshot: Any) -> Any:
    return snapshot.use_extension(GoldenSnapshotExtension)


# ---- the catalog and its snapshots -----------------------------------------------------------


def test_catalog_has_at_least_60_cases() -> None:
    assert len(CASE_PATHS) >= 60, f"the golden catalog holds {len(CASE_PATHS)} cases in {CASES_DIR}"


def test_case_names_match_file_names() -> None:
    wrong = []
    for path in CASE_PATHS:
        name = json.loads(path.read_text(encoding="utf-8")).get("name")
        if name != path.stem:
            wrong.append(f"{path}: name {name!r}")
    assert not wrong, "case name must equal the file name (the snapshot is named after it):\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", CASE_PATHS, ids=CASE_IDS)
def test_golden_snapshot(path: Path, golden: Any) -> None:
    case = _case(path)
    document = golden_document(case.name, _plan(path))
    if golden(name=case.name) == document:
        return
    # syrupy recorded the failure; say what moved, untruncated, naming the case and the buffers
    stored = golden_dir() / f"{case.name}.json"
    if not stored.exists():
        pytest.fail(f"{case.name}: no snapshot {stored}; record it with "
                    f"`python tools/record_golden.py -k {case.name}`", pytrace=False)
    lines = diff_documents(json.loads(stored.read_text(encoding="utf-8")), json.loads(dumps(document)))
    pytest.fail(
        f"{case.name}: plan differs from {stored} (snapshot -> now):\n  "
        + "\n  ".join(lines or ["same content, different bytes: re-record"])
        + "\nIf the change is intended: python tools/record_golden.py -k " + case.name,
        pytrace=False,
    )


def test_every_case_has_a_snapshot_and_every_snapshot_a_case(request: pytest.FixtureRequest) -> None:
    mismatch = catalog_mismatch(CASES_DIR, golden_dir())
    message = (
        "golden catalog and snapshots disagree (record with `python tools/record_golden.py`, "
        "delete stale ones with `--prune`):\n" + "\n".join(mismatch.lines(CASES_DIR, golden_dir()))
    )
    if request.config.getoption("--snapshot-update", default=False) and not mismatch.missing and mismatch.stale:
        # an unfiltered `pytest --snapshot-update` deletes them when the session ends
        pytest.skip(message)
    assert mismatch.ok, message


# ---- every case built on meta ----------------------------------------------------------------


def _unaligned_allowed(planned: Plan, case: Case, field: str, value: int) -> bool:
    """SWAChunkCap sizes the SWA pool ``min(ceil_align(cap, P), M)`` with un-aligned M
    (SWARequestCapPoolConfigurator.calculate_pool_sizes)."""
    if type(planned.configurator).__name__ != "SWAChunkCapPoolConfigurator" or field != "swa_max_total_num_tokens":
        return False
    caps = {case.max_tokens, case.pool_max_tokens, planned.resolution.pp_min_tokens}
    return value in caps


def _assert_page_aligned(planned: Plan, case: Case, label: str, sizes: PoolSizes | None) -> None:
    if sizes is None:
        return
    page = case.settings.page_size
    for field in TOKEN_FIELDS:
        value = getattr(sizes, field)
        if value is None or value % page == 0 or _unaligned_allowed(planned, case, field, value):
            continue
        raise AssertionError(f"{case.name}: {label}.{field} = {value} is not a multiple of page {page}")


def _kv_bytes_used(planned: Plan) -> int | float:
    """``tokens x cell``; SWAChunkCap reports the inherited ratio cell (HybridSWAPoolConfigurator._recompute_cell_size)
    but spends ``swa * swa_cell + full * full_token_cell`` (SWARequestCapPoolConfigurator.calculate_pool_sizes)."""
    cfg, sizes = planned.configurator, planned.sizes
    if isinstance(cfg, SWAChunkCapPoolConfigurator):
        swa_bytes = cfg.swa_cell * (sizes.swa_max_total_num_tokens or 0)
        return swa_bytes + cfg.full_token_cell * (sizes.full_max_total_num_tokens or 0)
    return sizes.max_total_num_tokens * planned.cell_size_bytes


@pytest.mark.parametrize("path", CASE_PATHS, ids=CASE_IDS)
def test_meta_build(path: Path) -> None:
    case, planned = _case(path), _plan(path)
    built = build(planned, "meta")
    assert built.allocated_bytes == planned.layout.planned_bytes
    for pool, layout in zip(built.pools, planned.layout.pools, strict=True):
        assert pool.allocated_bytes == layout.planned_bytes, layout.pool_class
        for spec in layout.buffers:
            tensor = pool[spec.name]
            assert tuple(tensor.shape) == spec.shape, spec.name
            assert str(tensor.dtype) == str(spec.dtype), spec.name
    for label, sizes in (
        ("sizes", planned.sizes),
        ("sizes_from_max_tokens", planned.sizes_from_max_tokens),
        ("pool_sizes", planned.pool_sizes),
        ("resolved", planned.resolution.sizes),
    ):
        _assert_page_aligned(planned, case, label, sizes)
    used = _kv_bytes_used(planned)
    assert used <= case.available_bytes, f"{case.name}: {used} B of KV exceed the {case.available_bytes} B budget"


# ---- the bytes: one serialisation, two writers ------------------------------------------------


def test_floats_are_repr_strings_that_round_trip() -> None:
    values = {"hybrid_cell": 66355.2, "sum": 0.1 + 0.2, "integral": 8192.0, "tiny": 5e-324, "int": 7}
    text = dumps(values)
    stored = json.loads(text)
    assert stored["hybrid_cell"] == "66355.2"
    assert stored["integral"] == "8192.0"
    assert stored["int"] == 7
    for key in ("hybrid_cell", "sum", "integral", "tiny"):
        assert float_of(stored[key]) == values[key]
    assert text.endswith("}\n") and dumps(values) == text


def test_serialisation_is_independent_of_key_order() -> None:
    assert dumps({"b": [1, 2], "a": {"y": 1, "x": [{"q": 1, "p": 2}]}}) == dumps(
        {"a": {"x": [{"p": 2, "q": 1}], "y": 1}, "b": [1, 2]}
    )


def _record_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOLS / "record_golden.py"), *args], capture_output=True, text=True, check=False
    )


def test_extension_and_record_tool_write_identical_bytes(tmp_path: Path) -> None:
    tool_dir, syrupy_dir = tmp_path / "tool", tmp_path / "syrupy"
    result = _record_tool("--golden", str(tool_dir), "-q")
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    extension = GoldenSnapshotExtension()
    from syrupy.data import Snapshot, SnapshotCollection

    syrupy_dir.mkdir()
    compared = 0
    for path in CASE_PATHS:
        if any(line.startswith(f"FAILED {path.stem}:") for line in failed):
            continue
        case = _case(path)
        collection = SnapshotCollection(location=str(syrupy_dir / f"{case.name}.json"))
        collection.add(Snapshot(name=case.name, data=extension.serialize(golden_document(case.name, _plan(path)))))
        extension.write_snapshot_collection(snapshot_collection=collection)
        assert (syrupy_dir / f"{case.name}.json").read_bytes() == (tool_dir / f"{case.name}.json").read_bytes()
        compared += 1
    assert compared >= 60


def test_pytest_snapshot_update_and_record_tool_write_identical_bytes(tmp_path: Path) -> None:
    """A real ``pytest --snapshot-update`` run into a scratch folder, against the tool's files."""
    chosen = [n for n in CASE_IDS if n.startswith("default-llama-3.1-8b-tp1-")][:3] or CASE_IDS[:3]
    tool_dir, pytest_dir = tmp_path / "tool", tmp_path / "pytest"
    # one tool run records the chosen cases (each -k selects the cases whose name contains it)
    selected = [arg for name in chosen for arg in ("-k", name)]
    assert _record_tool("--golden", str(tool_dir), "-q", *selected).returncode == 0
    selection = " or ".join(f"test_golden_snapshot[{name}]" for name in chosen)
    env = {**os.environ, GOLDEN_DIR_ENV: str(pytest_dir)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "tests" / "golden" / "test_golden.py"), "-q",
         "-p", "no:cacheprovider", "--snapshot-update", "-k", selection],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in pytest_dir.iterdir()) == sorted(f"{n}.json" for n in chosen)
    for name in chosen:
        assert (pytest_dir / f"{name}.json").read_bytes() == (tool_dir / f"{name}.json").read_bytes()


# ---- drift reports ---------------------------------------------------------------------------


def _first(prefix: str) -> Path:
    return next((p for p in CASE_PATHS if p.stem.startswith(prefix)), CASE_PATHS[0])


def test_diff_names_the_size_and_the_buffer() -> None:
    path = _first("default-llama-3.1-8b-tp1-bf16-p1")
    old = json.loads(golden_text(_case(path)))
    new = json.loads(golden_text(_case(path)))
    new["sizes"]["max_total_num_tokens"] += 64
    for buf in new["pools"]["token_to_kv"]["buffers"]:
        if buf["name"].startswith("v_buffer["):
            buf["shape"][-1] = 64
    new["pools"]["token_to_kv"]["buffers"].append(
        {"dtype": "torch.uint8", "name": "scale_buffer[0]", "nbytes": 8, "role": "kv", "shape": [8]}
    )
    lines = diff_documents(old, new)
    assert any(line.startswith("sizes.max_total_num_tokens: ") and "(+64," in line for line in lines), lines
    layers = old["pools"]["token_to_kv"]["attributes"]["layer_num"]
    assert any(
        f"v_buffer[0..{layers - 1}] ({layers} buffers): shape [" in line and ", 64]" in line for line in lines
    ), lines
    assert any("scale_buffer[0]: added" in line for line in lines), lines
    assert diff_documents(old, old) == []


def test_record_check_reports_drift_missing_and_stale(tmp_path: Path) -> None:
    first, second = CASE_PATHS[0], CASE_PATHS[1]
    cases, gold = tmp_path / "cases", tmp_path / "golden"
    cases.mkdir()
    for path in (first, second):
        (cases / path.name).write_bytes(path.read_bytes())
    assert _record_tool("--cases", str(cases), "--golden", str(gold), "-q").returncode == 0
    assert _record_tool("--cases", str(cases), "--golden", str(gold), "--check").returncode == 0
    stored = json.loads((gold / first.name).read_text())
    stored["cell_size"] = stored["cell_size"] + 2 if isinstance(stored["cell_size"], int) else "1.5"
    (gold / first.name).write_text(dumps(stored))
    (gold / second.name).unlink()
    (gold / "no-such-case.json").write_text("{}\n")
    result = _record_tool("--cases", str(cases), "--golden", str(gold), "--check")
    assert result.returncode == 1
    assert f"DRIFT {first.stem}" in result.stdout and "cell_size: " in result.stdout
    assert f"missing snapshot {gold / second.name}" in result.stdout
    assert f"stale snapshot {gold / 'no-such-case.json'}" in result.stdout


def test_default_cases_are_generated_by_the_script(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(TOOLS / "make_default_cases.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stderr
    generated = {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    committed = {p.name: p.read_bytes() for p in CASES_DIR.glob("default-*.json")}
    assert generated == committed


# ---- the tools around the catalog ------------------------------------------------------------


def _tool_module(name: str) -> Any:
    return tool_module(name)


def test_mutation_sites_spare_messages_docstrings_and_annotations() -> None:
    tool = _tool_module("mutation_check")
    source = (
        '"""Doc 1 + 2."""\n'
        "def cell(heads: int, dims: int) -> int:\n"
        '    """Docstring 3 * 4."""\n'
        "    if heads < 1:\n"
        '        raise ValueError(f"heads {heads + 1} must be >= 1")\n'
        "    return align_down(heads * dims + 2, 64)\n"
    )
    import ast

    tree = ast.parse(source)
    walker = tool.MutationWalker(tool._shielded(tree))
    walker.visit(tree)
    kinds = sorted(kind for _, kind, _, _ in walker.sites)
    assert kinds == sorted([
        "< -> <=", "c -> c+1",  # heads < 1
        "rounding result +1", "rounding argument +1",  # align_down(...)
        "+ -> -", "drop right term", "drop left term",  # ... + 2
        "* -> //", "c -> c+1", "c -> c+1",  # heads * dims, 2, 64
    ])
    mutated = [tool.mutated_source(source, i) for i in range(len(walker.sites))]
    assert "align_down(heads * dims + 2, 64) + 1" in "".join(mutated)
    assert all("must be >= 1" in text and "Docstring 3 * 4." in text for text in mutated)
    for text in mutated:
        compile(text, "<mutant>", "exec")


def test_equivalent_mutants_are_matched_without_line_numbers_one_mutant_per_entry() -> None:
    tool = _tool_module("mutation_check")
    files = [str(path.relative_to(ROOT)) for pattern in tool.DEFAULT_FILES for path in sorted(ROOT.glob(pattern))]
    population = [m for f in files for m in tool.enumerate_mutants(f)]
    # every entry binds exactly one mutant (none stale, none covering a whole line)
    assert tool.resolve_allow_list(population, files) == []
    # the same `draft_layers <= 0` guard is equivalent in EAGLE scaling but not in DFLASH scaling (scope)
    guards = {m.scope: tool.equivalent_reason(m) for m in population if m.before == "draft_layers <= 0"}
    assert guards["DefaultPoolConfigurator.draft_cell_bytes"] is not None
    assert guards["DefaultPoolConfigurator.dflash_draft_cell_bytes"] is None
    # one line, two `0 -> 1` mutants: the ratio is equivalent, the stage start is not (golden kills it)
    line = [m for m in population if m.file.endswith("dsv4.py") and m.kind == "c -> c+1"
            and m.source.startswith("start, ratios = 0, (0,)")]
    assert sorted(tool.equivalent_reason(m) is not None for m in line) == [False, True]
    # structural rule: `x + 0` -> `x - 0` / `x` is the identity
    zeros = [m for m in population if m.identity]
    assert zeros and all(m.kind in ("+ -> -", "drop right term") for m in zeros)


def test_diff_golden_reports_no_change_between_identical_trees() -> None:
    run = subprocess.run(
        [sys.executable, str(TOOLS / "diff_golden.py"), "WORKTREE", "WORKTREE", "-k", "default-llama-3.1-8b-tp1-"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    count = sum(1 for n in CASE_IDS if "default-llama-3.1-8b-tp1-" in n)
    assert f"{count} cases: {count} unchanged" in run.stdout


def test_diff_golden_tables_changed_added_and_failing_cases(capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool_module("diff_golden")
    path = _first("default-llama-3.1-8b-tp1-bf16-p1")
    text = golden_text(_case(path))
    changed = json.loads(text)
    changed["cell_size"] = 1
    a = {"_package": "a", "same": {"text": text}, "moved": {"text": text}, "gone": {"text": text},
         "broken": {"text": text}}
    b = {"_package": "b", "same": {"text": text}, "moved": {"text": dumps(changed)}, "new": {"text": text},
         "broken": {"error": "KVCacheConfigError: no"}}
    assert tool.compare(a, b, verbose=True) == 1
    out = capsys.readouterr().out
    assert "moved" in out and "cell_size: 131072 -> 1" in out
    assert "only in A" in out and "only in B" in out and "B: KVCacheConfigError: no" in out
    assert "5 cases: 1 unchanged" in out
    assert tool.compare({"same": {"text": text}}, {"same": {"text": text}}, verbose=False) == 0


# ---- the build check's allocated bytes (kvstrategies/document.py) --------------------------------------------


def test_the_build_check_counts_the_state_pools_too() -> None:
    """``plan --build-check`` allocates on ``meta`` and reports what the token-to-KV pool and the
    extra pools allocated: for a Mamba hybrid the state pool is most of it."""
    from kvstrategies.api import plan
    from kvstrategies.case import read_json_file as read_case
    from kvstrategies.document import plan_document

    case = parse_case(read_case(CASES_DIR / "bridge-odd-budget-nemotron-h-8b-tp1-bf16-p1-mamba64.json"))
    planned = plan(case.settings, case.available_bytes, max_tokens=case.max_tokens,
                   pool_max_tokens=case.pool_max_tokens, pool_max_running_requests=case.pool_max_running_requests,
                   pool_max_mamba_cache_size=case.pool_max_mamba_cache_size)  # fmt: skip
    extra = sum(layout.planned_bytes for layout in planned.layout.extra)
    assert extra > 0
    document = plan_document(planned, measure=True)
    assert document["allocated_bytes"] == planned.layout.token_to_kv.planned_bytes + extra
    assert document["allocated_bytes"] == plan_document(planned)["allocated_bytes"]
