"""Memory held before weights load: each profile constant computed by hand from the logs it cites.

SGLang measures the free memory after the process group is up and before any weight loads
(``sglang/srt/distributed/bootstrap.py``, ``measure_pre_model_load_memory``); what is gone from
the capacity by then is ``context + per_peer x peers`` (+ ROCm's fixed all-reduce figure once a
rank has a peer, ``dispatch_custom_allreduce`` in
``sglang/srt/distributed/device_communicators/custom_all_reduce.py``). Figures in GiB.
"""

from __future__ import annotations

import math

import pytest

from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang import preload as P
from kvstrategies.sglang.preload import preload_memory, profile_for

GIB = 2**30


def test_nvidia_constants() -> None:
    # H200 TP8 (sgl-project/sglang#11716): 143771 MiB = 140.40 GiB, "Load weight begin. avail
    # mem=137.29", "Init torch distributed ends. mem usage=2.01" -> context 140.40 - 137.29 - 2.01 = 1.10;
    # RTX PRO 6000 TP4 (sgl-project/sglang#40558): 97887 MiB = 95.59, avail 94.01, dist 0.39 -> 1.19
    assert math.isclose(P.CUDA_CONTEXT_GIB, 1.145, rel_tol=1e-6)
    assert math.isclose(P.NVLINK_PER_PEER_GIB, 0.287142857, rel_tol=1e-6)  # 2.01 / 7
    assert math.isclose(P.PCIE_PER_PEER_GIB, 0.13, rel_tol=1e-6)  # 0.39 / 3
    # H20 TP8: 97871 MiB = 95.58 GiB, avail 93.56 -> 2.02 held; (2.02 - 1.145) / 7
    assert math.isclose(P.H20_PER_PEER_GIB, 0.125, rel_tol=1e-6)
    # B200: 183359 / 1024 - 177.57 = 1.4915234; GB300: 284208 / 1024 - 275.75 = 1.7969; mean
    assert math.isclose(P.BLACKWELL_CONTEXT_GIB, (1.4915234 + 1.796875) / 2, abs_tol=1e-6)


def test_rocm_constants() -> None:
    # MI355X 294896 MiB = 287.984375 GiB. TP1: 287.984375 - (230.20 + 56.98) = 0.804375 (sglang#18263),
    # - 287.26 = 0.724375 (pip route), - (258.78 + 28.49) = 0.714375 (container); mean 0.7477083
    assert math.isclose(P.HIP_CONTEXT_GIB, 0.7477083, abs_tol=1e-6)
    # TP2 container: 287.984375 - (264.75 + 14.49) = 8.744375; TP4: MI300X 191.984375 - 182.61 = 9.374375,
    # MI355X 287.984375 - 278.42 = 9.564375, mean 9.469375; per peer (9.469375 - 8.744375) / 2 = 0.3625
    assert math.isclose(P.HIP_PER_PEER_GIB, 0.3625, rel_tol=1e-6)
    # fixed: 8.744375 - 0.7477083 - 0.3625 = 7.6341667
    assert math.isclose(P.HIP_ALL_REDUCE_GIB, 7.6341667, abs_tol=1e-6)


@pytest.mark.parametrize(
    ("gpu", "family"),
    [
        ("H100", "NVIDIA Hopper/Ampere"),
        ("A100-80GB", "NVIDIA Hopper/Ampere"),
        ("H800", "NVIDIA Hopper/Ampere"),
        ("H20", "NVIDIA H20"),
        ("B200", "NVIDIA Blackwell"),
        ("GB300", "NVIDIA Blackwell"),
        ("H100-PCIe", "PCIe cards"),
        ("L40S", "PCIe cards"),
        ("RTX-4090", "PCIe cards"),
        ("RTX-PRO-6000", "PCIe cards"),
        ("MI300X", "AMD Instinct"),
        ("MI325X", "AMD Instinct"),
        ("MI355X", "AMD Instinct"),
    ],
)
def test_family_of_each_part(gpu: str, family: str) -> None:
    assert P.profile_for(lookup_gpu(gpu)).family == family


@pytest.mark.parametrize(
    ("gpu", "tp", "gib"),
    [
        ("H200", 8, 1.145 + 7 * 2.01 / 7),  # 3.155
        ("H20", 8, 1.145 + 7 * 0.125),  # 2.02
        ("B200", 8, 1.6441992 + 2.01),  # Blackwell context, NVLink peers stand in
        ("L40S", 4, 1.145 + 3 * 0.13),  # 1.535
        ("MI355X", 1, 0.7477083),  # no peer: no all-reduce workspace
        ("MI355X", 2, 0.7477083 + 7.6341667 + 0.3625),  # 8.744375, the TP2 log
        ("MI300X", 8, 0.7477083 + 7.6341667 + 7 * 0.3625),  # 10.919375, extrapolated
    ],
)
def test_held_per_rank(gpu: str, tp: int, gib: float) -> None:
    assert P.preload_memory(lookup_gpu(gpu), tp=tp).total_bytes / GIB == pytest.approx(gib, abs=1e-6)


def test_pp_neighbour_counts_as_a_peer() -> None:
    held = P.preload_memory(lookup_gpu("H200"), tp=1, pp=2)
    assert held.total_bytes / GIB == pytest.approx(1.145 + 2.01 / 7, abs=1e-6)


def test_notes_say_what_stands_in() -> None:
    assert "Hopper NVLink per-peer figure" in P.preload_memory(lookup_gpu("GB300"), tp=4).describe()
    assert "MI355X figures stand in" in P.preload_memory(lookup_gpu("MI300X"), tp=1).describe()
    assert "extrapolated" in P.preload_memory(lookup_gpu("MI300X"), tp=8).describe()
    assert "extrapolated" not in P.preload_memory(lookup_gpu("MI300X"), tp=4).describe()


def test_breakdown_prints_the_profile_it_came_from() -> None:
    req = DeploymentRequest(
        "qwen3-8b", {"hf_config": load_preset_config("qwen3-8b")}, tp_size=2, gpu=lookup_gpu("MI300X")
    )
    plan = plan_deployment(req, suggest=False)
    assert plan.budget.overhead_origin == "AMD Instinct profile, from published logs"
    labels = [row.label for row in plan.breakdown.rows]
    assert "held before weights load (AMD Instinct profile, from published logs)" in labels
    assumption = next(a for a in plan.budget.assumptions if a.startswith("free memory before weights"))
    assert "sgl-project/sglang#25118" in assumption
    assert f"{(0.7477083 + 7.6341667 + 0.3625):.2f} GiB" in assumption  # 8.74


# ---- peers before the weights under PP, and ROCm's per-peer figure -----------------------------------------


def test_pipeline_parallelism_adds_one_peer_before_the_weights() -> None:
    """``preload_memory``: a rank's communication buffers grow per peer it talks to, its TP peers
    (tp - 1) and, under PP, one more (the neighbouring stage): TP 1 x PP 2 has one peer, TP 2 x PP 2 two;
    called without a layout it is one GPU alone."""
    gpu = lookup_gpu("H100")
    profile = profile_for(gpu)
    alone = preload_memory(gpu)  # the defaults: TP 1 x PP 1, no peer, no communication buffers
    assert (alone.interconnect.endswith(", 0 peer(s)"), alone.communication_bytes) == (True, 0)
    for tp, peers in ((1, 1), (2, 2)):
        mem = preload_memory(gpu, tp=tp, pp=2)
        assert mem.interconnect.endswith(f", {peers} peer(s)")
        assert mem.communication_bytes == int((profile.per_peer_gib * peers + profile.multi_rank_gib) * GIB)


def test_rocm_per_peer_figure_is_extrapolated_above_tp4() -> None:
    """``preload_memory``: the ROCm per-peer figure is fit to TP 2 and TP 4 logs, so from TP 5 on the
    note says it is extrapolated; at TP 4 it does not."""
    gpu = lookup_gpu("MI355X")
    assert "extrapolated" in preload_memory(gpu, tp=5).note
    assert "extrapolated" not in preload_memory(gpu, tp=4).note
