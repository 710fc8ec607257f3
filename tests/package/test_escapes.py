"""Escapes closed at their class: a sweep plot with nothing to plot, build() on a device torch cannot
reach, a pool layer id that is not an integer, a non-UTF-8 folder name in a plot title. Each input is
a clear KVCacheConfigError or a clean CLI message naming the field and the fix, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

import kvstrategies
from kvstrategies.case import parse_case
from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.presets import load_preset_config


def test_a_sweep_plot_where_no_cell_fits_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    image = tmp_path / "f.png"
    code = main(["sweep", "llama-3.1-70b", "--gpu", "T4", "--tp", "1,2", "--plot", str(image)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.count("error: the weights") == 2 and "concurrency" in out  # the table, both cells refused
    assert "nothing to plot" in err and "--plot" in err
    assert not image.exists()


@pytest.mark.parametrize("device", ["xpu", "mps", "xpu:0"])
def test_build_on_a_device_torch_was_not_compiled_for(device: str) -> None:
    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**26})
    planned = kvstrategies.plan(case.settings, case.available_bytes)
    available = {"xpu": hasattr(torch, "xpu") and torch.xpu.is_available(),
                 "mps": torch.backends.mps.is_available()}  # fmt: skip
    if available[device.split(":")[0]]:
        pytest.skip(f"this torch can reach {device}")
    with pytest.raises(KVCacheConfigError, match=f"device '{device}'.*meta"):
        kvstrategies.build(planned, device)


@pytest.fixture(scope="module")
def pools() -> Any:
    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**26})
    return kvstrategies.build(kvstrategies.plan(case.settings, case.available_bytes), "cpu").token_to_kv_pool


@pytest.mark.parametrize("layer_id", [None, "0", 1.0, True, [0]])
def test_a_pool_write_with_a_layer_id_that_is_not_an_int(pools: Any, layer_id: Any) -> None:
    loc = torch.tensor([1, 2], dtype=torch.int64)
    k = torch.zeros(2, *pools.get_key_buffer(0).shape[1:], dtype=pools.get_key_buffer(0).dtype)
    with pytest.raises(KVCacheConfigError, match="layer_id"):
        pools.set_kv_buffer(layer_id, loc, k, k)
    with pytest.raises(KVCacheConfigError, match="layer_id"):
        pools.get_key_buffer(layer_id)


def test_a_pool_layer_id_may_be_any_integer(pools: Any) -> None:
    import numpy as np

    assert pools.get_key_buffer(np.int64(0)).shape == pools.get_key_buffer(0).shape


@pytest.mark.skipif(os.name != "posix", reason="a non-UTF-8 file name needs a POSIX file system")
def test_a_model_folder_whose_name_is_not_utf8_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    folder = os.path.join(os.fsencode(tmp_path), b"m\xffodel")
    try:
        os.mkdir(folder)
    except OSError:
        pytest.skip("this file system refuses non-UTF-8 names")
    with open(os.path.join(folder, b"config.json"), "w") as fh:
        json.dump(load_preset_config("llama-3.1-8b"), fh)
    image = tmp_path / "p.png"
    code = main(["plan", os.fsdecode(folder), "--gpu", "H100", "--plot", str(image), "--brief"])
    capsys.readouterr()
    assert code == 0 and image.stat().st_size > 0
    sweep_image = tmp_path / "s.png"
    assert main(["sweep", os.fsdecode(folder), "--gpu", "H100", "--tp", "1,2", "--plot", str(sweep_image)]) == 0
    capsys.readouterr()
    assert sweep_image.stat().st_size > 0
