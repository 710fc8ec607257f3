"""Accelerator table, name lookup and byte-size parsing (get_device_memory_capacity)."""

from __future__ import annotations

import json

import pytest

from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner import DeploymentRequest
from kvstrategies.planner.gpus import GPUS, Accelerator, lookup_gpu, parse_bytes
from tests.helpers import SMALL_LLAMA


@pytest.mark.parametrize(
    ("name", "mib", "nbytes"),
    [
        # nvidia-smi memory.total, each from the published listing in the entry's source.
        ("H100-80GB", 81559, 85_520_809_984),
        ("H200", 143771, 150_754_820_096),
        ("B200", 183359, 192_265_846_784),
        ("A100-80GB", 81920, 85_899_345_920),
        ("L40S", 46068, 48_305_799_168),
        ("B300", 275040, 288_400_343_040),
        ("GB200", 189471, 198_674_743_296),
        ("GB300", 284208, 298_013_687_808),
        ("MI300X", 196592, 206_141_652_992),
        ("MI355X", 294896, 309_220_868_096),
        ("H100-NVL", 95830, 100_485_038_080),
        ("L40", 46068, 48_305_799_168),
        ("RTX-PRO-6000", 97887, 102_641_958_912),
    ],
)
def test_confirmed_capacities(name: str, mib: int, nbytes: int) -> None:
    gpu = lookup_gpu(name)
    assert gpu.capacity_mib == mib
    assert gpu.capacity_bytes == nbytes
    assert gpu.note is None and gpu.source is not None and f"{mib}MiB" in gpu.source


def test_every_gpu_has_a_source_or_says_it_is_unconfirmed() -> None:
    for gpu in GPUS:
        assert (gpu.source is None) != (gpu.note is None), gpu.name
        if gpu.source is not None:
            # a URL, or a public file the search index names only by id (docs/validation.md)
            assert gpu.source.startswith(("https://github.com/", "published device listing (")), gpu.name
            assert f"{gpu.capacity_mib:g}MiB" in gpu.source, gpu.name
        else:
            assert "not confirmed" in (gpu.note or ""), gpu.name
    confirmed = {g.name for g in GPUS if g.source}
    assert {"H100-80GB", "H200", "B200", "A100-40GB", "A100-80GB", "H20", "L4", "T4", "RTX-4090"} <= confirmed
    # listings found for this release of the table: nvidia-smi of B300 / GB200 / GB300, rocminfo of
    # MI300X (Pool 1 201310208 KB), torch's total of MI355X (309220868096 B)
    assert {"B300", "GB200", "GB300", "MI300X", "MI355X"} <= confirmed


def test_with_capacity_replaces_the_source() -> None:
    gpu = lookup_gpu("RTX-PRO-6000").with_capacity(97887)
    assert gpu.note is None and gpu.source == "given (--gpu-memory)"


def test_gpus_command_lists_sources(capsys: pytest.CaptureFixture[str]) -> None:

    from kvstrategies.cli.app import main

    assert main(["gpus"]) == 0
    text = capsys.readouterr().out
    assert "143771 MiB" in text and "sgl-project/sglang/issues/3196" in text and "UNCONFIRMED" in text
    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(GPUS) and rows[0]["name"] == "H100-80GB" and rows[0]["arch"] == "sm90"


@pytest.mark.parametrize("spelling", ["h100", "H100-80GB", "h100_80gb", " H100 80GB ", "h100-sxm"])
def test_lookup_is_tolerant(spelling: str) -> None:
    assert lookup_gpu(spelling).name == "H100-80GB"


def test_lookup_more_names() -> None:
    assert lookup_gpu("mi-300x").name == "MI300X"
    assert lookup_gpu("rtx4090").name == "RTX-4090"
    assert lookup_gpu("ascend_910b").platform == "npu"


def test_unknown_gpu_lists_known_names() -> None:
    with pytest.raises(KVCacheConfigError, match=r"unknown GPU 'V100'.*H100-80GB.*MI355X"):
        lookup_gpu("V100")


def test_arch_flags() -> None:
    h100, b200, b300 = lookup_gpu("H100"), lookup_gpu("B200"), lookup_gpu("B300")
    assert h100.is_sm90 and not h100.is_blackwell and not h100.is_sm100 and h100.is_cuda
    assert b200.is_sm100 and b200.is_blackwell and not b200.is_sm90
    assert b300.is_sm100  # SM103 counts as SM100 for SGLang's rules (sglang.srt.utils.common probes)
    rtx = lookup_gpu("RTX-5090")
    assert rtx.is_sm120 and rtx.is_blackwell and not rtx.is_sm100 and rtx.sm_major == 12
    mi355, mi300 = lookup_gpu("MI355X"), lookup_gpu("MI300X")
    assert mi355.is_hip and mi355.is_gfx95 and mi355.sm_major is None
    assert mi300.is_hip and not mi300.is_gfx95 and not mi300.is_sm90
    assert lookup_gpu("910B").is_npu


def test_with_capacity() -> None:
    measured = lookup_gpu("H20").with_capacity(97000)
    assert measured.capacity_mib == 97000 and measured.note is None and measured.is_sm90
    assert lookup_gpu("H100").with_capacity(None).capacity_bytes is None
    with pytest.raises(KVCacheConfigError):
        lookup_gpu("H100").with_capacity(0)
    custom = Accelerator("my-gpu", 12345.0, "cuda", compute_capability=(8, 0))
    assert custom.capacity_bytes == 12345 * 2**20 and not custom.is_sm90


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GiB", 80 * 2**30),
        ("40GB", 40 * 10**9),
        ("1234", 1234),
        ("512MiB", 512 * 2**20),
        ("512 mb", 512 * 10**6),
        ("64KiB", 65536),
        ("2kb", 2000),
        ("1TiB", 2**40),
        ("1.5GiB", 3 * 2**29),
        ("0.5GB", 500_000_000),
        ("7B", 7),
        ("0", 0),
        (42, 42),
    ],
)
def test_parse_bytes(text: str | int, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("junk", ["", "junk", "-1", "-5GiB", "1.5B", "10XB", "GiB", "1e9", "1,000", -3, True])
def test_parse_bytes_rejects(junk: str | int) -> None:
    with pytest.raises(KVCacheConfigError):
        parse_bytes(junk)


# ---- the listed GPUs' capacities and compute capabilities --------------------------------------------------


def test_every_listed_gpu_capacity_is_positive() -> None:
    """``_larger_gpu`` (planner/fixes.py) sorts the larger GPUs by ``capacity_mib or 0``; the ``or 0``
    is never taken because no listed capacity is 0 (the allow-list entry for it relies on this)."""
    from kvstrategies.planner.gpus import GPUS

    assert all(g.capacity_mib is None or g.capacity_mib > 0 for g in GPUS)


def test_cuda_major_11_is_blackwell() -> None:
    """``is_blackwell`` (sglang/srt/utils/common.py): ``_check_cuda_device_version`` with
    ``device_capability_majors=[10, 11, 12]`` -- SM110 (Jetson Thor) is Blackwell too; SM90 is not."""
    assert [Accelerator("x", 1024.0, "cuda", (major, 0)).is_blackwell for major in (9, 10, 11, 12)] == [
        False, True, True, True,
    ]  # fmt: skip


def test_a_gpu_capacity_is_in_0_to_2_to_the_63_bytes() -> None:
    """``validate_request``: the GPU capacity in bytes (``capacity_mib x 2**20``) must lie in (0, 2**63):
    1 B (2**-20 MiB) and 2**62 B (2**42 MiB) are read, 2**63 B (2**43 MiB) is refused naming --gpu-memory."""
    from kvstrategies.planner.request import validate_request

    for mib, ok in ((2.0**-20, True), (2.0**42, True), (2.0**43, False)):
        gpu = Accelerator("x", mib, "cuda", (9, 0))
        if ok:
            validate_request(DeploymentRequest("m", {"hf_config": SMALL_LLAMA}, gpu=gpu))
        else:
            with pytest.raises(KVCacheConfigError, match="fix --gpu-memory"):
                validate_request(DeploymentRequest("m", {"hf_config": SMALL_LLAMA}, gpu=gpu))


def test_listed_cuda_gpus_carry_nvidias_compute_capabilities() -> None:
    """NVIDIA's published compute capabilities (developer.nvidia.com/cuda-gpus): Hopper 9.0, B200 and
    GB200 10.0, B300 and GB300 10.3, A100 8.0, Ada 8.9, A10 8.6, T4 7.5, RTX 5090 / RTX PRO 6000 12.0."""
    from kvstrategies.planner.gpus import GPUS

    expected = {
        "H100-80GB": (9, 0), "H200": (9, 0), "H20": (9, 0), "H100-NVL": (9, 0), "H100-PCIe": (9, 0), "H800": (9, 0),
        "B200": (10, 0), "GB200": (10, 0), "B300": (10, 3), "GB300": (10, 3), "A100-40GB": (8, 0),
        "A100-80GB": (8, 0), "L40S": (8, 9), "L4": (8, 9), "L40": (8, 9), "RTX-4090": (8, 9), "A10": (8, 6),
        "T4": (7, 5), "RTX-5090": (12, 0), "RTX-PRO-6000": (12, 0),
    }  # fmt: skip
    assert {g.name: g.compute_capability for g in GPUS if g.is_cuda} == expected
