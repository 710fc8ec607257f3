"""The architecture table: one place for every architecture name and model type, and its queries."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvstrategies.models import architectures as table
from kvstrategies.models import parse_hf_config
from kvstrategies.models.architectures import (
    ARCHITECTURES,
    MODEL_TYPES,
    Attention,
    LinearAttention,
    SGLangModel,
    any_row,
    is_served,
    model_type_row,
    names_where,
    row_for,
    rows_for,
)
from kvstrategies.presets import load_preset_config, preset_names

PACKAGE = Path(table.__file__).resolve().parents[1]
TABLE_MODULE = Path(table.__file__).resolve()
CASES = Path(__file__).parent / "cases"


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module, docstrings included (a docstring is never a bare name)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_architecture_name_or_model_type_literal_outside_the_table() -> None:
    names = {row.name for row in ARCHITECTURES} | {row.name for row in MODEL_TYPES}
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.resolve() != TABLE_MODULE
        for line, value in _string_constants(path)
        if value in names
    ]
    assert found == [], "ask kvstrategies.models.architectures instead of naming the model:\n" + "\n".join(found)


def test_the_scan_sees_a_literal_in_a_module(tmp_path: Path) -> None:
    """The scan above is not vacuous: it finds a name written in ordinary code."""
    module = tmp_path / "m.py"
    module.write_text('"""doc."""\nSET = frozenset({"GptOssForCausalLM"})\nX = t.get("model_type") == "falcon"\n')
    names = {row.name for row in ARCHITECTURES} | {row.name for row in MODEL_TYPES}
    assert sorted(v for _, v in _string_constants(module) if v in names) == ["GptOssForCausalLM", "falcon"]


def test_rows_are_unique_and_named() -> None:
    arch_names = [row.name for row in ARCHITECTURES]
    type_names = [row.name for row in MODEL_TYPES]
    assert len(arch_names) == len(set(arch_names))
    assert len(type_names) == len(set(type_names))
    assert all(arch_names) and all(type_names)
    assert not set(arch_names) & set(type_names)


def test_every_shipped_preset_and_catalog_architecture_is_served() -> None:
    """What the project plans out of the box, SGLang 0.5.23 serves (the planner refuses the rest)."""
    configs = [load_preset_config(name) for name in preset_names()]
    for path in sorted(CASES.glob("*.json")):
        case = json.loads(path.read_text())
        if isinstance(case.get("hf_config"), dict):
            configs.append(case["hf_config"])
    unknown = sorted({a for cfg in configs for a in cfg.get("architectures") or () if not is_served(a)})
    assert unknown == []


def test_queries() -> None:
    assert is_served("DeepseekV3ForCausalLM")
    assert not is_served("NoSuchModelForCausalLM")
    assert row_for("NoSuchModelForCausalLM") is None
    # rule-only names (in SGLang's lists, no model class) have a row but are not served
    rule_only = names_where(lambda r: r.sglang_model is SGLangModel.RULE_ONLY)
    assert rule_only and not any(is_served(name) for name in rule_only)
    assert [r.name for r in rows_for(("Unknown", "Qwen3NextForCausalLM"))] == ["Qwen3NextForCausalLM"]
    assert any_row(("Unknown", "KimiLinearForCausalLM"), lambda r: r.linear_attention is LinearAttention.KIMI_LINEAR)
    assert model_type_row("no_such_type") == model_type_row(None)
    assert model_type_row("nemotron_h").linear_attention is LinearAttention.NEMOTRON_H


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-next-80b-a3b", "gpt-oss-120b", "nemotron-h-8b"])
def test_the_table_drives_the_parse(name: str) -> None:
    """A row's facts show up in the parsed geometry (the parser asks the table)."""
    if name not in preset_names():
        pytest.skip(f"no preset {name}")
    cfg = load_preset_config(name)
    geometry = parse_hf_config(cfg)
    rows = rows_for(geometry.architectures)
    assert rows
    assert geometry.use_mla == any(r.attention is Attention.MLA for r in rows)
    assert (geometry.hybrid_swa is not None) == any(r.hybrid_swa is not None for r in rows)
    kinds = {r.linear_attention for r in rows} | {model_type_row(cfg.get("model_type")).linear_attention}
    assert (geometry.mamba is not None) == bool(kinds - {None})


def test_cli_lists_the_served_architectures(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli import main

    assert main(["architectures", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    listed = {row["name"] for row in rows}
    assert listed == {row.name for row in ARCHITECTURES if is_served(row.name)}
    assert "DeepseekV3ForCausalLM" in listed and "Grok1VForCausalLM" not in listed
    assert main(["architectures"]) == 0
    assert "Qwen3NextForCausalLM" in capsys.readouterr().out


def test_muse_glimmer_multimodal_export_is_hybrid_swa_by_its_row() -> None:
    """MuseGlimmerForConditionalGeneration (SGLang's defaults, vendor layer rule): by hand.

    Full layers where (52 - i - 1) % 4 == 0 (13), the other 39 slide; window = sliding_window - 1
    = 2047 (the model's get_attention_sliding_window_size); cell = 2 heads x (128 + 128) x 2 B x
    (13 + 0.8 x 39) = 45260.8 B per token (HybridSWAPoolConfigurator, ratio 0.8).
    """
    from kvstrategies import select_configurator
    from kvstrategies.case import parse_case

    case = json.loads((CASES / "swa-muse-glimmer-vl-tp1-bf16-p64.json").read_text())
    geometry = parse_hf_config(case["hf_config"])
    assert geometry.hybrid_swa is not None
    assert geometry.hybrid_swa.full_attention_layer_ids == tuple(i for i in range(52) if (51 - i) % 4 == 0)
    assert len(geometry.hybrid_swa.swa_attention_layer_ids) == 39
    assert geometry.hybrid_swa.sliding_window_size == 2047
    configurator = select_configurator(parse_case(case).settings)
    assert type(configurator).__name__ == "HybridSWAPoolConfigurator"
    assert configurator.cell_size_bytes == pytest.approx(2 * 256 * 2 * (13 + 0.8 * 39))


@pytest.mark.parametrize("architecture", ["MuseGlimmerForCausalLM", "BeamForCausalLM", "MellumForCausalLM"])
def test_window_follows_the_models_get_attention_sliding_window_size(architecture: str) -> None:
    """These SGLang model classes return ``sliding_window - 1`` (HF's inclusive window, exclusive)."""
    config = {
        "architectures": [architecture],
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    }
    hybrid = parse_hf_config(config).hybrid_swa
    assert hybrid is not None and hybrid.sliding_window_size == 1023
