"""The driver of the releases whose model runner makes the layer specs (vLLM 0.11.0), without vLLM: a stand-in
``vllm.v1.worker.gpu_model_runner`` whose ``get_kv_cache_spec`` reports what it was handed."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from kvstrategies.vllm.bridge import runner_specs

#: what 0.11.0's GPUModelRunner.get_kv_cache_spec reads from its runner
READ = ("vllm_config", "speculative_config", "attention_chunk_size", "kv_cache_dtype", "shared_kv_cache_layers")


class _Runner:
    """Holds only the attributes 0.11.0's method reads (anything else raises AttributeError)."""

    __slots__ = READ

    def get_kv_cache_spec(self) -> dict[str, Any]:
        return {"model.layers.0.self_attn.attn": {name: getattr(self, name) for name in READ}}


@pytest.fixture
def runner_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType(runner_specs.RUNNER_MODULE)
    module.GPUModelRunner = _Runner  # type: ignore[attr-defined]
    module.STR_DTYPE_TO_TORCH_DTYPE = {"fp8": "float8_e4m3fn"}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, runner_specs.RUNNER_MODULE, module)
    return module


def _config(cache_dtype: str) -> Any:
    ns = types.SimpleNamespace
    return ns(speculative_config=None, cache_config=ns(cache_dtype=cache_dtype),
              model_config=ns(dtype="bfloat16", attention_chunk_size=8192))  # fmt: skip


@pytest.mark.parametrize(("cache_dtype", "expected"), [("auto", "bfloat16"), ("fp8", "float8_e4m3fn")])
def test_the_runner_gets_what_its_constructor_sets(runner_module: types.ModuleType, cache_dtype: str,
                                                   expected: str) -> None:  # fmt: skip
    # GPUModelRunner.__init__ (0.11.0): kv_cache_dtype is the model dtype for "auto", else the module's table entry;
    # attention_chunk_size the model config's; shared_kv_cache_layers starts empty
    config = _config(cache_dtype)
    specs = runner_specs.runner_kv_cache_spec(config)
    held = specs["model.layers.0.self_attn.attn"]
    assert held == {"vllm_config": config, "speculative_config": None, "attention_chunk_size": 8192,
                    "kv_cache_dtype": expected, "shared_kv_cache_layers": {}}  # fmt: skip


def test_0_11_has_an_environment_and_is_the_oldest_modelled_line() -> None:
    # tools/vllm_env.py 0.11.0 DIR makes it; its recordings (golden/vllm-0.11.0/) make it a modelled line
    from kvstrategies.core.releases import VLLM_RELEASE_LINES
    from kvstrategies.vllm.bridge.requirements import ENVIRONMENTS, VLLM_LINES

    environment = ENVIRONMENTS["0.11.0"]
    assert VLLM_LINES[0] == "0.11.0" == VLLM_RELEASE_LINES[0]
    assert {"numba==0.61.2", "numpy==2.2.6", "xgrammar==0.1.25"} <= set(environment.light_packages)
    assert environment.no_deps == ("flashinfer-python==0.6.18", "vllm==0.11.0")
