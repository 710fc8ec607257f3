"""The draft worker's own KV pool in a target's breakdown (kvstrategies/planner/draft_pool.py):
in the KV budget when the target priced its draft layers into its cell, else in the slack."""

from __future__ import annotations

import json
from pathlib import Path

from kvstrategies.planner.deployment import plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.request import DeploymentRequest

CHECKPOINTS = Path(__file__).resolve().parents[2] / "kvstrategies" / "checkpoints"


def _draft_rows(req: DeploymentRequest) -> tuple[int, list[tuple[str, int, str]]]:
    planned = plan_deployment(req)
    rows = [(r.label, r.nbytes, r.area) for r in planned.breakdown.rows if r.label.startswith("draft worker")]
    return planned.sizes.max_total_num_tokens, rows


def test_deepseek_mtp_draft_pool_is_the_budgets_draft_share() -> None:
    """DeepSeek-V3 at TP 8 on H200 with EAGLE: SGLang's launch sets the draft path to the model path,
    so the target's cell holds its one NextN layer; the draft's MLA pool is one layer of
    (kv_lora_rank 512 + rope 64) x 2 B = 1,152 B a row, T + 1 rows at page 1 (the padding slot)."""
    req = DeploymentRequest("deepseek-v3", {"preset": "deepseek-v3"}, tp_size=8, gpu=lookup_gpu("H200"),
                            speculative_algorithm="EAGLE")  # fmt: skip
    tokens, rows = _draft_rows(req)
    assert len(rows) == 1
    label, nbytes, area = rows[0]
    assert area == "kv-budget" and "1 layer, priced into the target's cell" in label
    assert nbytes == (tokens + 1) * 1_152


def test_a_pathless_qwen35_mtp_draft_pool_comes_out_of_the_slack() -> None:
    """Qwen3.5-27B with EAGLE and no draft path: the target cell has no draft layer
    (spec_aux_hidden_state: no draft config read), and the draft's one attention layer (4 KV heads x
    256 x 2 B x K and V = 4,096 B a token) is allocated after the pool is sized, from the slack."""
    config = json.loads((CHECKPOINTS / "Qwen--Qwen3.5-27B" / "config.json").read_text())
    req = DeploymentRequest("Qwen/Qwen3.5-27B", {"hf_config": config}, gpu=lookup_gpu("H200"),
                            speculative_algorithm="EAGLE")  # fmt: skip
    tokens, rows = _draft_rows(req)
    assert len(rows) == 1
    label, nbytes, area = rows[0]
    assert area == "slack" and "allocated after the pool is sized" in label
    assert nbytes == (tokens + 1) * 4_096


def test_no_draft_rows_without_speculative_decoding() -> None:
    req = DeploymentRequest("deepseek-v3", {"preset": "deepseek-v3"}, tp_size=8, gpu=lookup_gpu("H200"))
    assert _draft_rows(req)[1] == []
