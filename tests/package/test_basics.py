"""PoolSizes value semantics, the registry, dtype names, input errors, CLI and torch-free planning."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import KVCacheConfigError, select_configurator
from kvstrategies.case import parse_case
from kvstrategies.cli.app import main
from kvstrategies.core.dtypes import DType, resolve_kv_cache_dtype
from kvstrategies.core.sizing import PoolSizes, require_positive_tokens
from kvstrategies.errors import InsufficientMemoryError, UnsupportedConfigurationError
from kvstrategies.models import parse_hf_config
from kvstrategies.pools.layout import BufferSpec, PoolLayout
from kvstrategies.presets import load_preset_config, preset_names
from kvstrategies.strategies import DefaultPoolConfigurator, PoolConfigurator, register, unregister
from kvstrategies.strategies.registry import registered

from ..helpers import GIB, case_settings


def test_pool_sizes_is_hashable_picklable_and_round_trips() -> None:
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, c4_state_dtype="float32")
    assert hash(sizes) == hash(PoolSizes.from_dict(sizes.to_dict()))
    assert pickle.loads(pickle.dumps(sizes)) == sizes
    assert PoolSizes.from_dict(json.loads(json.dumps(sizes.to_dict()))) == sizes
    with pytest.raises(KVCacheConfigError, match="unknown PoolSizes fields"):
        PoolSizes.from_dict({"max_total_num_tokens": 1, "bogus": 2})


def test_kv_cache_dtype_names() -> None:
    assert resolve_kv_cache_dtype("auto", DType.BFLOAT16).dtype is DType.BFLOAT16
    assert resolve_kv_cache_dtype("bf16", DType.FLOAT16).dtype is DType.BFLOAT16
    assert resolve_kv_cache_dtype("fp8_e5m2", DType.BFLOAT16).store_dtype is DType.UINT8
    assert resolve_kv_cache_dtype("fp8_e4m3", DType.BFLOAT16, is_hip=True).dtype is DType.FLOAT8_E4M3FNUZ
    with pytest.raises(KVCacheConfigError, match="unsupported kv_cache_dtype 'int4'"):
        resolve_kv_cache_dtype("int4", DType.BFLOAT16)
    with pytest.raises(KVCacheConfigError, match="nvfp4"):
        resolve_kv_cache_dtype("fp4_e2m1", DType.BFLOAT16)
    with pytest.raises(UnsupportedConfigurationError, match="CPU"):
        resolve_kv_cache_dtype("fp8_e5m2", DType.BFLOAT16, is_cpu=True)


def test_torch_itemsizes_match_the_planning_enum() -> None:
    torch = pytest.importorskip("torch")
    for dtype in DType:
        if hasattr(torch, dtype.torch_name):
            assert torch.empty((), dtype=dtype.to_torch()).element_size() == dtype.itemsize, dtype


def test_every_preset_parses() -> None:
    assert len(preset_names()) >= 30
    for name in preset_names():
        geometry = parse_hf_config(load_preset_config(name))
        assert geometry.num_hidden_layers > 0, name


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"tp_size": 0}, "tp_size"),
        ({"pp_size": 2, "pp_rank": 2}, "pp_rank 2 is out of range"),
        ({"page_size": 0}, "page_size"),
        ({"available_bytes": -5}, "available_bytes"),
        ({"kv_cache_dtype": "fp9"}, "unsupported kv_cache_dtype"),
        ({"bogus_key": 1}, "unknown case keys"),
        ({"env": {"SGLANG_NOT_A_KNOB": "1"}}, "unknown env knob"),
        ({"tp_size": 6, "attn_dp_size": 4}, "not divisible"),
        ({"speculative_algorithm": "MAGIC"}, "unknown speculative_algorithm"),
    ],
)
def test_bad_case_input_names_the_field(changes: dict[str, Any], fragment: str) -> None:
    case = {"preset": "llama-3.1-8b", "available_bytes": 40 * GIB, **changes}
    with pytest.raises(KVCacheConfigError, match=fragment):
        parse_case(case)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 8, "hidden_size": 64}, "num_hidden_layers"),
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64}, "num_attention_heads"),
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 64},
         "not divisible"),
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": "two", "num_attention_heads": 2, "head_dim": 8},
         "must be an integer"),
        ({"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 2},
         "kv_lora_rank"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_config_names_the_field(config: Any, fragment: str) -> None:
    with pytest.raises(KVCacheConfigError, match=fragment):
        parse_hf_config(config)


def test_budget_too_small_is_insufficient_memory() -> None:
    cfg = select_configurator(case_settings("llama-3.1-8b"))
    with pytest.raises(InsufficientMemoryError, match="not enough memory"):
        cfg.calculate_pool_sizes(100_000, 1)


def test_register_a_third_party_strategy_first() -> None:
    class EverythingTiny(DefaultPoolConfigurator):
        @classmethod
        def is_applicable(cls, ctx: Any) -> bool:
            return ctx.geometry.model_type == "llama"

    register(EverythingTiny)
    try:
        assert type(select_configurator(case_settings("llama-3.1-8b"))) is EverythingTiny
        assert type(select_configurator(case_settings("qwen3-8b"))) is not EverythingTiny
    finally:
        unregister(EverythingTiny)
    assert issubclass(EverythingTiny, PoolConfigurator)


def test_cli_json_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["configurator"] == "DefaultPoolConfigurator"
    assert document["cell_size"] == 131_072
    assert document["sizes"]["max_total_num_tokens"] == 327_680
    assert document["pools"][0] == {
        "name": "k_buffer[0]",
        "shape": [327_681, 8, 128],
        "dtype": "torch.bfloat16",
        "view_of": "kv_storage[0]",
    }
    assert document["planned_bytes"] == document["allocated_bytes"]


def test_cli_case_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = {
        "name": "llama-cap",
        "preset": "llama-3.1-8b",
        "page_size": 64,
        "available_bytes": 58_003_533_332,
        "max_tokens": 150_000,
    }
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    assert main(["plan", "--case", str(path), "--json", "--build-check"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["sizes"]["max_total_num_tokens"] == 442_496
    assert document["sizes_from_max_tokens"]["max_total_num_tokens"] == 149_952
    assert document["pools"][0]["shape"] == [149_952 + 64, 8, 128]
    assert document["allocated_bytes"] == document["planned_bytes"]


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "no-such-model", "--available-bytes", "40GiB"],
        ["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--tp", "0"],
        ["plan", "llama-3.1-8b", "--available-bytes", "lots"],
        ["plan", "llama-3.1-8b", "--available-bytes", "1KiB"],
        ["plan", "llama-3.1-8b", "--available-bytes", "40GiB", "--pp-size", "2", "--pp-rank", "5"],
    ],
)
def test_cli_user_errors_exit_2_without_traceback(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvstrategies: error: ")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_bad_case_file_names_path_and_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"preset": "llama-3.1-8b",\n  "available_bytes": }')
    assert main(["plan", "--case", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "line 2" in err


def test_planning_never_imports_torch() -> None:
    code = (
        "import sys, json\n"
        "from kvstrategies.cli.app import main\n"
        "for model in ('llama-3.1-8b', 'deepseek-v3', 'deepseek-v3.2', 'qwen3-next-80b-a3b', 'gpt-oss-120b',"
        " 'deepseek-v4-flash'):\n"
        "    main(['plan', model, '--available-bytes', '40GiB', '--page-size', '256', '--json'])\n"
        "assert 'torch' not in sys.modules, 'planning imported torch'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_case_json_keeps_the_sizes_when_the_pool_cannot_be_laid_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # DSA on CUDA needs 64-token index pages: page 256 sizes fine (78,324 B/token bf16) but has no pool.
    path = tmp_path / "dsa.json"
    path.write_text(json.dumps({"preset": "deepseek-v3.2", "page_size": 256, "available_bytes": 40 * GIB}))
    assert main(["plan", "--case", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["cell_size"] == 78_324
    assert document["sizes"]["max_total_num_tokens"] == 548_352  # align(42,949,672,960 // 78,324, 256)
    assert document["pools"] is None and "index page" in document["layout_error"]
    assert captured.err.startswith("kvstrategies: error: DSA on CUDA")


# ---- a one-token budget (kvstrategies/core/sizing.py) -----------------------------------------------------------


def test_one_token_is_a_positive_budget() -> None:
    # MemoryPoolConfig's check: tokens <= 0 means the budget is too small; 1 token is not refused
    require_positive_tokens(1)
    with pytest.raises(InsufficientMemoryError, match="gives 0 tokens"):
        require_positive_tokens(0)


# ---- pool layout names and the registry's order ------------------------------------------------------------


# ---- pools/layout.py -----------------------------------------------------------------------------


def test_duplicate_buffer_names_are_named_in_the_error() -> None:
    buffers = tuple(BufferSpec(name, (4, 8), DType.BFLOAT16) for name in ("k_buffer[0]", "v_buffer[0]", "k_buffer[0]"))
    with pytest.raises(KVCacheConfigError, match=r"names buffers twice: \['k_buffer\[0\]'\]"):
        PoolLayout("MHATokenToKVPool", buffers)


# ---- the registry (create_memory_pool_configurator) -------------------------------------------------------------


def test_register_puts_a_strategy_first_by_default() -> None:
    class Probe(DefaultPoolConfigurator):
        @classmethod
        def is_applicable(cls, ctx: Any) -> bool:
            return False

    register(Probe)
    try:
        assert registered()[0] is Probe
    finally:
        unregister(Probe)
    assert Probe not in registered()
