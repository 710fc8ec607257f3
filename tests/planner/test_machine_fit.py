"""``kvstrategies fit`` / :mod:`kvstrategies.planner.machine_fit`: the catalog ranked on a machine."""

from __future__ import annotations

import json
import re

import pytest

from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.deployment import plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.machine_fit import (
    Layout,
    LayoutFit,
    ModelFit,
    catalog_requests,
    divisors,
    fit_machine,
    layouts_of,
    rank,
)
from kvstrategies.planner.request import DeploymentRequest
from kvstrategies.presets import load_preset_config

H100 = lookup_gpu("H100")


def _preset(name: str) -> tuple[DeploymentRequest, str]:
    return DeploymentRequest(model=name, source={"preset": name}, gpu=H100), "preset"


def test_divisors_are_the_tp_sizes_largest_first() -> None:
    assert divisors(8) == (8, 4, 2, 1)
    assert divisors(6) == (6, 3, 2, 1)
    assert divisors(1) == (1,)


def test_layouts_ep_only_for_moe_whose_experts_tp_divides() -> None:
    dense = layouts_of(load_preset_config("llama-3.1-8b"), 2, (None, "fp8_e4m3"))
    assert dense == (
        (Layout(2, 1, None, 1), Layout(2, 1, "fp8_e4m3", 1)),
        (Layout(1, 1, None, 2), Layout(1, 1, "fp8_e4m3", 2)),
    )
    moe = layouts_of(load_preset_config("qwen3-30b-a3b"), 8, (None,))  # 128 routed experts
    assert [layout.ep for layout in moe[0]] == [1, 8]
    assert [layout.ep for layout in moe[-1]] == [1]  # TP 1: no EP
    mixtral = layouts_of(load_preset_config("mixtral-8x7b"), 16, (None,))  # 8 experts: 16 does not divide them
    assert [layout.ep for layout in mixtral[0]] == [1]


def _fit(name: str, requests: int, tokens: int) -> ModelFit:
    layout = Layout(1, 1, None, 1)
    return ModelFit(name, "preset", LayoutFit(layout, "bfloat16", 1, tokens, requests, tokens, requests, "token pool",
                                              8192))  # fmt: skip


def test_ranking_rule() -> None:
    """Fitting models by most requests, then most tokens, then name; the rest after, by name."""
    models = [ModelFit("zeta", "preset", None, (("TP 1", "x"),)), _fit("b", 10, 100), _fit("a", 10, 100),
              _fit("c", 10, 500), _fit("d", 20, 1), ModelFit("alpha", "preset", None, (("TP 1", "y"),))]  # fmt: skip
    assert [m.model for m in rank(models)] == ["d", "c", "a", "b", "alpha", "zeta"]


def test_a_model_that_cannot_fit_one_gpu_shows_the_planners_refusal() -> None:
    """Llama-3.1-70B in bf16 on one H100: 70.55e9 params x 2 bytes = 131.4 GiB > 80 GiB."""
    result = fit_machine(H100, 1, requests=[_preset("llama-3.1-70b")])
    (model,) = result.models
    assert not model.fits and model.best is None
    assert model.reason is not None
    weights = float(re.search(r"the weights \(([\d.]+) GiB per rank\) do not fit", model.reason).group(1))  # type: ignore[union-attr]
    assert weights == pytest.approx(70.55e9 * 2 / 2**30, abs=0.1)
    with pytest.raises(KVCacheConfigError) as refused:  # the planner's own refusal, first clause
        plan_deployment(DeploymentRequest(model="llama-3.1-70b", source={"preset": "llama-3.1-70b"}, gpu=H100),
                        suggest=False)  # fmt: skip
    assert str(refused.value).startswith(model.reason)
    # both KV dtypes were planned and refused; nothing smaller than TP 1 exists
    assert [label for label, _ in model.refusals] == ["TP 1 kv default x 1", "TP 1 kv fp8_e4m3 x 1"]


def test_smaller_tps_are_not_planned_once_a_tp_is_short_of_memory() -> None:
    result = fit_machine(H100, 4, requests=[_preset("llama-3.1-405b")], kv_dtypes=(None,))
    (model,) = result.models
    assert not model.fits
    assert [label for label, _ in model.refusals] == ["TP 4 kv default x 1", "TP 2 and below"]


def test_the_best_layout_is_the_one_with_most_requests_on_the_machine() -> None:
    """Every layout of Llama-3.1-8B on 2 x H100 planned by hand; the chosen one holds the most
    requests of 8,192 tokens (requests per worker x replicas), its tokens x replicas the total."""
    result = fit_machine(H100, 2, requests=[_preset("llama-3.1-8b")])
    best = result.models[0].best
    assert best is not None
    by_hand = {}
    base = _preset("llama-3.1-8b")[0]
    for tp, kv in ((2, None), (2, "fp8_e4m3"), (1, None), (1, "fp8_e4m3")):
        plan = plan_deployment(base.replace(tp_size=tp, kv_cache_dtype=kv, request_lengths=(8192,)), suggest=False)
        replicas = 2 // tp
        by_hand[(tp, kv)] = (plan.fit.lengths[0].requests * replicas, plan.sizes.max_total_num_tokens * replicas)
    chosen = by_hand[(best.layout.tp, best.layout.kv)]
    assert (best.total_requests, best.total_tokens) == chosen
    assert chosen == max(by_hand.values())
    assert best.total_tokens == best.tokens * best.layout.replicas
    # FP8 KV halves a token's bytes against bf16: the same layout holds more
    assert by_hand[(best.layout.tp, "fp8_e4m3")][1] > by_hand[(best.layout.tp, None)][1]


def test_default_length_is_capped_at_the_context_an_explicit_longer_one_is_refused() -> None:
    """phi-3-mini's context is 4,096 tokens: the default 8,192 answers at 4,096; an explicit
    8,192 is refused as SGLang refuses a request longer than the context."""
    assert load_preset_config("phi-3-mini")["max_position_embeddings"] == 4096
    default = fit_machine(H100, 1, requests=[_preset("phi-3-mini")]).models[0]
    assert default.best is not None and default.best.request_length == 4096
    explicit = fit_machine(H100, 1, request_length=8192, requests=[_preset("phi-3-mini")]).models[0]
    assert not explicit.fits
    assert explicit.reason is not None and "longer than the model's context length (4,096 tokens)" in explicit.reason


def test_the_catalog_is_every_preset_and_checkpoint() -> None:
    from kvstrategies.checkpoints import shipped_checkpoints
    from kvstrategies.presets import preset_index

    bases = catalog_requests(H100)
    assert len(bases) == len(preset_index()) + len(shipped_checkpoints())
    assert {kind for _, kind in bases} == {"preset", "checkpoint"}


def test_bad_count_is_refused_naming_the_flag() -> None:
    with pytest.raises(KVCacheConfigError, match="--count"):
        fit_machine(H100, 0, requests=[])


def test_cli_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--gpu", "RTX-4090", "--count", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["gpu"], out["count"], out["request_length"]) == ("RTX-4090", 2, None)
    fits = [m for m in out["models"] if m["fits"]]
    assert fits and all(m["tp"] * m["replicas"] == 2 for m in fits)
    assert [m["total_requests"] for m in fits] == sorted((m["total_requests"] for m in fits), reverse=True)
    assert all(m["reason"] for m in out["models"] if not m["fits"])
    assert main(["fit", "--gpu-memory", "24GiB", "--kv-cache-dtype", "auto"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("1 x GPU 24GiB, requests of 8,192")
    assert "does not fit" in text and "fp8_e4m3" not in text


def test_cli_without_gpu_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit"]) == 2
    assert "--gpu" in capsys.readouterr().err
