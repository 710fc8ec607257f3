"""The vLLM strategies against vLLM 0.33.0's own recorded answers (``golden/vllm-0.33.0/``), no vLLM needed.

``tools/record_golden.py --engine vllm`` wrote one snapshot per catalog case from a live vLLM (and
``_known.json``, the known differences it found). Here every case is planned by the project's vLLM
strategies and compared with its snapshot exactly as ``kvstrategies verify --against vllm`` compares
with a live vLLM: a case matches, or differs only by known differences, and those must be exactly the
recorded ones (a known difference that disappears, or a new one, fails too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvstrategies.core.releases import VLLM, VLLM_RELEASE_LINES, parse_release
from kvstrategies.sglang.bridge.verify import CaseVerdict, VerifyReport
from kvstrategies.vllm.bridge.compare import KNOWN_DIFFERENCES
from kvstrategies.vllm.bridge.snapshots import KNOWN_FILE, read_snapshot, result_from_snapshot, snapshot_files
from kvstrategies.vllm.bridge.verify import format_report, verdict_for
from kvstrategies.vllm.strategies.backends import BFLOAT16_CACHE_DTYPE, SELECTOR_CHAIN

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "cases"
#: the vLLM-only deployments (GPU families, vLLM's refusals), recorded beside the catalog
VLLM_CASES = CASES / "vllm"
CASE_PATHS = {p.stem: p for folder in (CASES, VLLM_CASES) for p in folder.glob("*.json")}
#: every vLLM release the project models has its recordings (``golden/vllm-<release>/``)
RELEASES = VLLM_RELEASE_LINES
FOLDERS = {release: ROOT / "golden" / f"vllm-{release}" for release in RELEASES}
KNOWN = {release: json.loads((FOLDERS[release] / KNOWN_FILE).read_text(encoding="utf-8")) for release in RELEASES}
SNAPSHOTS = [(release, path) for release in RELEASES for path in snapshot_files(FOLDERS[release])]


@pytest.mark.parametrize("release", RELEASES)
def test_every_catalog_case_has_a_vllm_snapshot(release: str) -> None:
    assert {p.stem for p in snapshot_files(FOLDERS[release])} == set(CASE_PATHS)


@pytest.mark.parametrize("release", RELEASES)
def test_known_kinds_are_all_defined(release: str) -> None:
    kinds = {k.kind for k in KNOWN_DIFFERENCES}
    for name, entry in KNOWN[release].items():
        assert entry["status"] == "known", f"{name}: recorded with an unexplained difference"
        assert set(entry["kinds"]) <= kinds, name


@pytest.mark.parametrize("release", RELEASES)
def test_most_cases_are_planned_by_vllm(release: str) -> None:
    """The catalog exercises vLLM's sizing, not only its refusals: of the cases handed to vLLM (not declined
    before it as a layout the vLLM bridge does not drive: speculative decoding, NPU, ...), most are planned,
    and at least 200 in all. A release whose backends take no ``bfloat16`` cache (before
    ``vllm-bfloat16-cache-dtype``: 0.12.0 to 0.14.1) refuses the catalog's bf16 cases: it plans only cases the
    next newer release plans but those (0.12.0 refuses two more, by its own rules), at least 90 of them. 0.11.0's
    selector takes bf16 (``vllm-selector-if-else-chain``) but its backends refuse more when built: it plans only cases
    0.15.1 (the first line whose backends list bf16) plans, at least 180 (188 of 311 handed)."""
    documents = [read_snapshot(p) for p in snapshot_files(FOLDERS[release])]
    handed = [d for d in documents if "do not model" not in str(d.get("error", ""))]
    planned = [d for d in handed if "error" not in d]
    if BFLOAT16_CACHE_DTYPE.holds(parse_release(release, VLLM)):
        assert len(planned) >= max(len(handed) // 2, 200), (len(planned), len(handed))
        return
    if SELECTOR_CHAIN.holds(parse_release(release, VLLM)):
        first = BFLOAT16_CACHE_DTYPE.span.first
        assert first is not None
        planned_bf16 = {p.stem for p in snapshot_files(FOLDERS[first.text]) if "error" not in read_snapshot(p)}
        assert {d["case"] for d in planned} <= planned_bf16, (len(planned), len(planned_bf16))
        assert len(planned) >= max(len(handed) // 2, 180), (len(planned), len(handed))
        return
    newer = RELEASES[RELEASES.index(release) + 1]
    planned_newer = {p.stem for p in snapshot_files(FOLDERS[newer]) if "error" not in read_snapshot(p)}
    bf16 = {d["case"] for d in documents if "kv_cache_dtype=bfloat16" in str(d.get("error", ""))
            or "kv_cache_dtype: bfloat16" in str(d.get("error", ""))
            or "CUTLASS_MLA is not valid for this configuration. Reason: ['kv_cache_dtype" in str(d.get("error", ""))}
    assert {d["case"] for d in planned} <= planned_newer - bf16, (len(planned), len(planned_newer), len(bf16))
    assert len(planned) >= 90, len(planned)


@pytest.mark.parametrize(("release", "snapshot"), SNAPSHOTS, ids=lambda v: v if isinstance(v, str) else v.stem)
def test_project_matches_vllm(release: str, snapshot: Path) -> None:
    verdict = verdict_for(CASE_PATHS[snapshot.stem], result_from_snapshot(read_snapshot(snapshot)), release)
    assert verdict.unexplained == (), "\n".join(verdict.unexplained)
    expected = KNOWN[release].get(snapshot.stem, {"status": "match", "kinds": []})
    assert (verdict.status, list(verdict.kinds)) == (expected["status"], expected["kinds"]), "\n".join(verdict.lines)


def test_the_default_block_moves_from_16_to_64_in_0_34_0() -> None:
    """``CacheConfig.DEFAULT_BLOCK_SIZE`` 16 -> 64: DeepSeek-V3 TP 8 bf16 on H200 without --block-size,
    FLASH_ATTN_MLA (MultipleOf 16) keeps the default: 0.33.0 16-token pages of 16 x 576 x 2 = 18,432 B,
    40 GiB // (61 x 18,432) = 38,199 blocks; 0.34.0 64-token pages, 40 GiB // (61 x 73,728) = 9,549."""
    old = read_snapshot(FOLDERS["0.33.0"] / "default-deepseek-v3-tp8-bf16-p1.json")
    new = read_snapshot(FOLDERS["0.34.0"] / "default-deepseek-v3-tp8-bf16-p1.json")
    assert (old["block_size"], old["num_gpu_blocks"]) == (16, 38_199)
    assert (new["block_size"], new["num_gpu_blocks"]) == (64, 9_549)
    assert 40 * 2**30 // (61 * 64 * 576 * 2) == 9_549


# ---- the verify report's lines, by hand --------------------------------------------------------------------


def _report(version: str = "0.33.0") -> VerifyReport:
    diff = ("num_gpu_blocks: 5120 -> 5119", "block_size: 16 -> 32", "max_concurrency: 10.0 -> 9.99")
    kind = KNOWN_DIFFERENCES[0]
    return VerifyReport(
        verdicts=[
            CaseVerdict("a", "match"),
            CaseVerdict("b", "match", lines=("both refuse",)),
            CaseVerdict("cc", "known", kinds=(kind.kind,), lines=("x",)),
            CaseVerdict("d", "DIFF", lines=diff, unexplained=diff),
        ],
        timings={"import": 1.0, "total": 9.0},
        version=version,
    )


def test_vllm_format_report_lines_by_hand() -> None:
    kind = KNOWN_DIFFERENCES[0]
    # names padded to 2, statuses to 5; per case (9.0 - 1.0) / 4 = 2.00 s
    assert format_report(_report()) == [
        "kvstrategies vs vLLM 0.33.0: 4 cases",
        "a   match",
        "b   match  both refuse",
        f"cc  known  {kind.kind}",
        "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more",
        "      num_gpu_blocks: 5120 -> 5119",
        "      block_size: 16 -> 32",
        "      max_concurrency: 10.0 -> 9.99",
        "known differences:",
        f"  {kind.kind} (1 cases): {kind.reason}",
        "total: 4 cases: 2 match, 1 known, 1 unexplained (vLLM import 1.0 s, 2.00 s per case, 9.0 s in all)",
    ]
    recorded = format_report(_report("0.33.0 (recorded in golden/vllm-0.33.0)"))[-1]
    assert recorded == "total: 4 cases: 2 match, 1 known, 1 unexplained (recorded answers, 9.0 s in all)"


def test_vllm_format_report_cuts_a_long_detail_to_the_width() -> None:
    # "num_gpu_blocks: 5120 -> 5119; +2 more" is 28 + 9 = 37 characters: width 20 keeps 17 and adds "..."
    assert format_report(_report(), width=20)[4] == "d   DIFF   num_gpu_blocks: 5..."
    assert format_report(_report(), width=36)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 ..."
    assert format_report(_report(), width=37)[4] == "d   DIFF   num_gpu_blocks: 5120 -> 5119; +2 more"


@pytest.mark.parametrize("release", ["0.11.0", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1",
                                     "0.19.1", "0.34.0"])
def test_known_rebuilt_from_the_snapshots_equals_the_live_recording(release: str, tmp_path: Path) -> None:
    """``tools/record_golden.py --engine vllm --known-only FOLDER`` writes, from the committed snapshots alone,
    the ``_known.json`` the live recorder wrote (0.11.0 to 0.19.1 and 0.34.0 were recorded live at this code)."""
    from ..helpers import tool_module

    folder = tmp_path / f"vllm-{release}"
    folder.mkdir()
    for snapshot in snapshot_files(FOLDERS[release]):
        (folder / snapshot.name).write_bytes(snapshot.read_bytes())
    assert tool_module("record_golden").main(["--engine", "vllm", "--known-only", str(folder)]) == 0
    assert (folder / KNOWN_FILE).read_text(encoding="utf-8") == (FOLDERS[release] / KNOWN_FILE).read_text("utf-8")


def test_kernel_languages_import_inert_and_only_they() -> None:
    """DeepSeek-V4's model imports TileLang at import (``vllm/tilelang_utils``) and its CuTe DSL ops to register
    warm-ups: the bridge answers them with inert modules, so vLLM builds the model on meta and its KV cache specs
    are recorded. A kernel module's import-time uses work on them: annotations (``T.Tensor[(M, N), dtype] | None``),
    a class derived from a kernel base (a plain class), decorators (``tilelang.jit(...)(fn)`` is inert). Packages
    vLLM only probes stay absent: FlashInfer imports its own CuTe DSL kernels when ``cutlass`` is found, and those
    compare versions at import."""
    from kvstrategies.vllm.bridge import runtime

    finder = runtime._WarmupFinder()
    spec = finder.find_spec("tilelang.language")
    assert spec is not None and finder.find_spec("tilelang") is not None
    language = finder.create_module(spec)
    assert language.__path__ == []  # a package: its submodules import too
    inert = runtime._Inert
    assert isinstance(language.Tensor[(4, 8), "float32"] | None, inert)
    assert isinstance(2 * language.Int32 + 1, inert)

    class Kernel(language.KernelBase):  # type: ignore[name-defined,misc]
        pass

    assert Kernel.__mro__ == (Kernel, object)
    assert isinstance(language.jit(pass_configs={})(len), inert)
    dsv4_op = "vllm.models.deepseek_v4.nvidia.ops.sparse_attn_compress_cutedsl"
    assert dsv4_op in runtime.WARMUP_MODULES and finder.find_spec(dsv4_op) is not None
    for absent in ("cutlass", "cutlass.cute", "tilelangx", "numpy", "vllm.models.deepseek_v4.attention"):
        assert finder.find_spec(absent) is None, absent


@pytest.mark.parametrize("release", RELEASES)
def test_mapping_refusals_are_the_mappings_words_of_today(release: str) -> None:
    """Every ``refused_by: kvstrategies`` snapshot is what the case mapping says today (``tools/record_golden.py
    --engine vllm --mapping-only FOLDER --check``), and no case changed kind (refused by the mapping now but run by
    vLLM when recorded, or the reverse: those need the live release)."""
    from ..helpers import tool_module

    assert tool_module("record_golden").main(["--engine", "vllm", "--check", "-q", "--mapping-only",
                                              str(FOLDERS[release])]) == 0  # fmt: skip


def test_mapping_only_rewrites_a_reworded_refusal_and_leaves_vllms_answers(tmp_path: Path) -> None:
    """``--mapping-only`` rewrites a mapping refusal whose words changed, and refuses (exit 1, nothing written) where
    a snapshot's kind would change: a vLLM answer the mapping would now refuse is evidence only the live release may
    replace."""
    from ..helpers import tool_module

    record_golden = tool_module("record_golden")
    folder = tmp_path / "vllm-0.34.0"
    folder.mkdir()
    source = FOLDERS["0.34.0"]
    refused = next(p for p in snapshot_files(source) if read_snapshot(p).get("refused_by") == "kvstrategies")
    answered = next(p for p in snapshot_files(source) if "error" not in read_snapshot(p))
    reworded = json.loads(refused.read_text(encoding="utf-8"))
    reworded["error"] = "an older wording"
    (folder / refused.name).write_text(json.dumps(reworded), encoding="utf-8")
    assert record_golden.main(["--engine", "vllm", "--check", "-q", "--mapping-only", str(folder),
                               "-k", refused.stem]) == 1  # fmt: skip
    assert record_golden.main(["--engine", "vllm", "-q", "--mapping-only", str(folder), "-k", refused.stem]) == 0
    assert (folder / refused.name).read_bytes() == refused.read_bytes()
    # the mapping accepts this case: a mapping refusal stored for it needs vLLM itself, and is left as it is
    stand_in = {**reworded, "case": answered.stem}
    (folder / answered.name).write_text(json.dumps(stand_in), encoding="utf-8")
    assert record_golden.main(["--engine", "vllm", "-q", "--mapping-only", str(folder), "-k", answered.stem]) == 1
    assert json.loads((folder / answered.name).read_text(encoding="utf-8")) == stand_in
