"""vLLM's ``VLLM_PP_LAYER_PARTITION`` (a case's ``SGLANG_PP_LAYER_PARTITION``), each rule against a hand-computed
expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/distributed/utils.py get_pp_indices`` (the variable's layer counts, one a
stage) and ``vllm/platforms/interface.py Platform.update_block_size_for_backend`` (a worker without attention layers
returns before ``_align_hybrid_block_size``). Each expectation is also vLLM's own answer through the bridge
(``golden/vllm-0.34.0/vllm-pp-partition-*.json``, ``tools/record_golden.py --engine vllm``).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.vllm.strategies.engine_args import vllm_deployment
from kvstrategies.vllm.strategies.layers import pp_indices

GIB = 2**30


def _case(release: str = "0.34.0", **fields: Any) -> Any:
    base: dict[str, Any] = {"preset": "llama-3.1-70b", "engine": "vllm", "vllm_version": release, "tp_size": 4,
                            "pp_size": 2, "pp_rank": 1, "page_size": 16, "kv_cache_dtype": "bf16",
                            "available_bytes": 40 * GIB, "env": {"SGLANG_PP_LAYER_PARTITION": "30,50"}}  # fmt: skip
    return parse_case({**base, **fields})


def test_the_partition_sets_each_stages_layers() -> None:
    assert pp_indices(80, 0, 2, (30, 50)) == (0, 30) and pp_indices(80, 1, 2, (30, 50)) == (30, 80)
    assert pp_indices(80, 1, 2) == (40, 80)  # vLLM's own split without it


def test_the_fuller_stage_sets_the_blocks() -> None:
    # Llama-3.1-70B at TP 4: 8 / 4 = 2 KV heads x 128 x (K + V) x 2 B x 16 tokens = 16,384 B a layer's block;
    # stage 1 holds 50 layers, 819,200 B a block: 40 GiB // 819,200 = 52,428 blocks for both stages (stage 0's
    # 30 layers would take 87,381); vLLM 0.34.0 and 0.33.0 record 52,428 with VLLM_PP_LAYER_PARTITION=30,50
    case = _case()
    deployment = vllm_deployment(case.settings, case.available_bytes)
    assert deployment.pp_layer_partition == (30, 50)
    assert deployment.environment() == {"VLLM_PP_LAYER_PARTITION": "30,50"}
    answer = plan(case.settings, case.available_bytes).vllm
    assert answer is not None
    assert answer.bytes_per_block == 50 * 16_384 == 819_200
    assert answer.num_gpu_blocks == 40 * GIB // 819_200 == 52_428
    assert answer.launch.settings_document()["vllm_pp_layer_partition"] == "30,50"
    first = _case(pp_rank=0)
    assert plan(first.settings, first.available_bytes).vllm.num_gpu_blocks == 52_428  # type: ignore[union-attr]


def test_the_partition_is_mapped_from_0_33_0() -> None:
    case = _case("0.32.0")
    with pytest.raises(UnsupportedConfigurationError, match=r"pp_layer_partition: .*mapped for vLLM 0\.33\.0"):
        plan(case.settings, case.available_bytes)


def test_a_stage_of_state_layers_only_is_refused() -> None:
    # Qwen3-Next's first three layers are GDN layers (every fourth is full attention): a stage of layers 0-2 has no
    # attention backend, and vLLM leaves its block unaligned there (not modelled)
    case = _case(preset="qwen3-next-80b-a3b", page_size=64, pp_rank=1, env={"SGLANG_PP_LAYER_PARTITION": "3,45"})
    with pytest.raises(UnsupportedConfigurationError, match="pipeline stage 0 holds state layers and no attention"):
        plan(case.settings, case.available_bytes)
    fine = _case(preset="qwen3-next-80b-a3b", page_size=64, env={"SGLANG_PP_LAYER_PARTITION": "20,28"})
    assert plan(fine.settings, fine.available_bytes).vllm is not None


def test_the_bridge_sets_the_variable_only_while_vllm_builds() -> None:
    from kvstrategies.vllm.bridge.bridge import launch_environment

    os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    with launch_environment({"VLLM_PP_LAYER_PARTITION": "30,50"}):
        assert os.environ["VLLM_PP_LAYER_PARTITION"] == "30,50"
    assert "VLLM_PP_LAYER_PARTITION" not in os.environ
    os.environ["VLLM_PP_LAYER_PARTITION"] = "1,2"
    try:
        with launch_environment({"VLLM_PP_LAYER_PARTITION": "30,50"}):
            pass
        assert os.environ["VLLM_PP_LAYER_PARTITION"] == "1,2"
    finally:
        del os.environ["VLLM_PP_LAYER_PARTITION"]


@pytest.mark.parametrize(("partition", "words"), [
    ("1,2,77", r"len\(partitions\)=3 does not match pp_size=2\."),
    ("30,30", r"sum\(partitions\)=60 does not match num_hidden_layers=80\."),
    ("0,80", "ZeroDivisionError: integer division or modulo by zero"),
])  # fmt: skip
def test_vllm_refuses_a_partition_its_get_pp_indices_refuses(partition: str, words: str) -> None:
    # vLLM 0.34.0's own words through the bridge (one-off cases of DeepSeek-V3, 61 layers: "len(partitions)=3 does not
    # match pp_size=2.", "sum(partitions)=60 does not match num_hidden_layers=61.", and a ZeroDivisionError for 0,61)
    case = _case(env={"SGLANG_PP_LAYER_PARTITION": partition})
    with pytest.raises(UnsupportedConfigurationError, match=words):
        plan(case.settings, case.available_bytes)
