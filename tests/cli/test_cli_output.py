"""What ``kvstrategies`` prints: the answer first, the version, DP labels, the plot path, the
sweep's default length, and user-facing text that cites only SGLang's source or docs/ pages."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import kvstrategies
from kvstrategies.cli.app import main
from kvstrategies.core.releases import NEWEST_SGLANG
from kvstrategies.planner.gpus import GPUS
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.sglang.launch.defaults import model_facts_from_hf_config, resolve_launch_defaults
from tests.source_trees import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kvstrategies"
#: spec section signs, OPEN ids, the spec folder, and the spec's file names (docs/ pages are allowed)
SPEC_REFERENCE = re.compile(r"§|\bOPEN-[A-Z]+\d|\.\./shared|/work/shared|\bspec/")
SHIPPED_DOCS = {path.name for path in (ROOT / "docs").glob("*.md")} | {"README.md"}
MD_FILE = re.compile(r"\b[\w-]+\.md\b")
#: the specification's own file names (a user's clone has none of them)
SPEC_FILES = {
    "sizing.md", "resolve.md", "examples.md", "layouts.md", "builders.md", "allocators.md", "write_path.md",
    "launch_defaults.md", "sglang_bridge.md", "DESIGN.md", "CHANGES.md",
}  # fmt: skip


def spec_citations(text: str) -> list[str]:
    """Spec references in ``text``: section signs, OPEN ids, or ``*.md`` files that do not ship."""
    found = [m.group(0) for m in SPEC_REFERENCE.finditer(text)]
    found += [m.group(0) for m in MD_FILE.finditer(text) if m.group(0) in SPEC_FILES - SHIPPED_DOCS]
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_scanner_catches_spec_references() -> None:
    assert spec_citations("derived (resolve.md §5)") == ["§", "resolve.md"]
    assert spec_citations("an assumption (OPEN-L2)") == ["OPEN-L2"]
    assert spec_citations("see docs/write_path.md and README.md") == []
    assert spec_citations("a log pasted as GLM-5-FP8-MI355X-SGLANG-ERROR.md") == []
    assert spec_citations("per sizing.md") == ["sizing.md"]


# ---- the answer first ----------------------------------------------------------------------------


def test_answer_comes_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--request-length", "8192")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"answer on H100-80GB, TP 1 ({NEWEST_SGLANG.label} launch defaults)"
    assert lines[1] == "  model          preset llama-3.1-8b"
    tokens = int(lines[2].split()[2].replace(",", ""))
    document = json.loads(run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--json")[1])
    assert tokens == document["planner"]["tokens"]
    assert "8,192-token requests:" in lines[3]
    assert out.index("answer") < out.index("defaults applied") < out.index("breakdown")


def test_attention_dp_is_labelled_per_worker_and_in_total(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("plan", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--attn-dp", "8", "--request-length", "4096")
    out = run(capsys, *argv)[1]
    document = json.loads(run(capsys, *argv, "--json")[1])
    answer = document["planner"]["answer"]
    per, total = answer["concurrency"][0]["per_worker"], answer["concurrency"][0]["total"]
    assert answer["attention_dp_workers"] == 8 and total == 8 * per
    assert f"{per:,} at once per attention-DP worker ({total:,} in total)" in out
    assert f"in total       {answer['tokens_total']:,} tokens over 8 attention-DP workers" in out
    assert "per worker" in out and "total" in out


def test_version_flag_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"kvstrategies {kvstrategies.__version__}")
    document = json.loads(run(capsys, "plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--json")[1])
    assert document["version"] == kvstrategies.__version__


def test_plot_says_what_it_wrote(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "plan.png"
    code, out, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", "--plot", str(target), "--json")
    assert code == 0 and target.stat().st_size > 0
    assert f"wrote the memory breakdown plot to {target}" in err
    assert json.loads(out)["version"]  # stdout stays pure JSON


def test_what_if_pool_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "plan", "--case", str(ROOT / "cases/default-deepseek-v3-tp1-bf16-p64.json"))[1]
    assert "what-if pool   the pools below are built for 1,024 tokens" in out
    plain = run(capsys, "plan", "llama-3.1-8b", "--available-bytes", "40GiB")[1]
    assert "what-if pool" not in plain


def test_sweep_defaults_to_8k_requests(capsys: pytest.CaptureFixture[str]) -> None:
    rows = json.loads(run(capsys, "sweep", "llama-3.1-8b", "--gpu", "H100", "--tp", "1,2", "--json")[1])
    assert [row["request_length"] for row in rows] == [8192, 8192]
    assert all(row["concurrency"] == row["tokens"] // 8192 for row in rows)
    short = json.loads(run(capsys, "sweep", "phi-3-mini", "--gpu", "H100", "--json")[1])
    assert short[0]["request_length"] == 4096  # the model's whole context when shorter
    asked = json.loads(run(capsys, "sweep", "llama-3.1-8b", "--gpu", "H100", "--request-length", "1000", "--json")[1])
    assert asked[0]["request_length"] == 1000


# ---- no spec references in user-facing text ------------------------------------------------------


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = parsed(path)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_spec_reference_in_the_packages_messages() -> None:
    """Every string literal that is not a docstring (messages, reasons, help). The launch_defaults
    package's reasons are written against spec sections and cited as SGLang's modules when declared: the
    launch test below checks what users see."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "launch_defaults":
            continue
        for line, text in _string_literals(path):
            if spec_citations(text):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {text[:100]!r}")
    assert bad == []


def test_launch_default_reasons_cite_sglang() -> None:
    reasons = set()
    for name in preset_names():
        facts = model_facts_from_hf_config(load_preset_config(name))
        for gpu in GPUS:
            for tp in (1, 8):
                try:
                    resolution = resolve_launch_defaults(facts, gpu, tp_size=tp)
                except kvstrategies.KVCacheConfigError:
                    continue
                reasons.update(item.reason for item in resolution.applied)
    assert len(reasons) > 20
    assert [reason for reason in reasons if spec_citations(reason)] == []
    assert any("sglang.srt.arg_groups." in reason for reason in reasons)


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "{model}", "--gpu", "H200", "--tp", "8"],
        ["plan", "{model}", "--gpu", "H100", "--json"],
        ["plan", "{model}", "--available-bytes", "40GiB", "--json"],
    ],
)
def test_no_spec_reference_in_any_presets_output(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    for model in preset_names():
        run(capsys, *(model if arg == "{model}" else arg for arg in argv))
        out, err = capsys.readouterr()
        assert spec_citations(out + err) == [], model


def test_no_spec_reference_in_help_errors_sweep_and_presets(capsys: pytest.CaptureFixture[str]) -> None:
    texts = []
    for argv in (["--help"], ["plan", "--help"], ["sweep", "--help"], ["presets", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        texts.append(capsys.readouterr().out)
    for argv in (
        ["sweep", "llama-3.1-70b", "--gpu", "H100,H200", "--tp", "1,3,8", "--kv-cache-dtype", "bf16,fp8_e4m3"],
        ["presets"],
        ["plan", "llama-3.1-8b", "--tp", "3", "--gpu", "H100"],
        ["plan", "llama-3.1-8b", "--page-size", "0", "--gpu", "H100"],
        ["plan", "llama-3.1-8b", "--context-length", "999999999", "--gpu", "H100"],
        ["plan", "lama-3.1-8b", "--gpu", "H100"],
        ["plan", "deepseek-v3", "--gpu", "H100"],
        ["plan", "gpt-oss-120b", "--gpu", "H100", "--kv-cache-dtype", "nvfp4"],
        ["plan", "--gpu", "H100", "--", "sglang", "serve", "--model-path", "x", "--cpu-offload-gb", "4"],
    ):
        run(capsys, *argv)
        texts.append("".join(capsys.readouterr()))
    assert [spec_citations(text) for text in texts] == [[] for _ in texts]


def test_no_spec_reference_in_readme_and_docs() -> None:
    for path in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        assert spec_citations(path.read_text(encoding="utf-8")) == [], path.name


@pytest.mark.parametrize(
    ("flags", "named", "field"),
    [
        (["--max-running-requests", "0"], "--max-running-requests must be in [1,", "max_running_requests"),
        (["--max-total-tokens", "-1"], "--max-total-tokens must be in [1,", "max_tokens"),
        (["--context-length", "0"], "--context-length must be in [1,", "context_length"),
        (["--dcp", "3"], "--dcp 3", "dcp_size"),
        (["--attn-dp", "3"], "--attn-dp 3", "attn_dp_size"),
        (["--pp-rank", "5"], "--pp-rank 5 is out of range for --pp-size 1", "pp_rank"),
        (["--swa-full-tokens-ratio", "2"], "--swa-full-tokens-ratio must be", "swa_full_tokens_ratio"),
        (["--kv-cache-dtype", "foo"], "--kv-cache-dtype 'foo' is not one of SGLang's choices", "kv_cache_dtype"),
        (["--weight-quantization", "foo"], "--weight-quantization one of", "quantization="),
    ],
)
def test_cli_errors_name_flags_not_fields(
    capsys: pytest.CaptureFixture[str], flags: list[str], named: str, field: str
) -> None:
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "H100", *flags)
    assert code == 2 and named in err and field not in err and "case field" not in err, err


def test_case_file_errors_keep_field_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    case = tmp_path / "bad.json"
    case.write_text(json.dumps({"preset": "llama-3.1-8b", "available_bytes": 2**30, "max_running_requests": 0}))
    code, _, err = run(capsys, "plan", "--case", str(case))
    assert code == 2 and "case field 'max_running_requests'" in err


def test_sweep_labels_attention_dp_workers(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "sweep", "deepseek-v3", "--gpu", "H200", "--tp", "8", "--attn-dp", "8")[1]
    assert out.splitlines()[-1].startswith("tokens, max req and concurrency are per worker: x 8 workers")
    assert "per worker" not in run(capsys, "sweep", "llama-3.1-8b", "--gpu", "H100")[1]
