"""``sweep --plot``: the picture is opened and checked -- its size, one coloured line per GPU in
both charts, and nothing drawn for a line that is not in the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvstrategies.cli.app import main
from kvstrategies.planner.sweep import SweepRow
from kvstrategies.planner.sweep_plot import SERIES_COLOURS, series_label, sweep_series

matplotlib = pytest.importorskip("matplotlib")


def _rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))  # type: ignore[return-value]


def _pixels_of(image: object, colour: str) -> int:
    import numpy as np

    pixels = np.asarray(image)[..., :3]
    return int((np.abs(pixels - np.array(_rgb(colour))).max(axis=-1) < 0.03).sum())


def test_sweep_plot_draws_one_line_per_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matplotlib import image

    target = tmp_path / "sweep.png"
    argv = ["sweep", "llama-3.1-70b", "--tp", "2,4,8", "--gpu", "H100,H200,B200", "--plot", str(target)]
    assert main(argv) == 0
    assert f"wrote the sweep plot to {target}" in capsys.readouterr().err
    picture = image.imread(str(target))
    assert picture.shape[:2] == (500, 1200)  # figsize 12 x 5 inches at 100 dpi
    width = picture.shape[1]
    for colour in SERIES_COLOURS[:3]:  # H100, H200, B200: a line in the tokens and in the concurrency chart
        assert _pixels_of(picture[:, : width // 2], colour) > 200, colour
        assert _pixels_of(picture[:, width // 2 :], colour) > 200, colour
    assert _pixels_of(picture, SERIES_COLOURS[3]) == 0  # no fourth line


def test_series_group_cells_by_what_varies() -> None:
    rows = [SweepRow("H100", 2, None, None, tokens=10), SweepRow("H100", 1, None, None, tokens=5),
            SweepRow("H200", 1, None, None, error="weights do not fit")]  # fmt: skip
    lines = sweep_series(rows)
    assert list(lines) == ["H100", "H200"] and [r.tp for r in lines["H100"]] == [1, 2]
    assert series_label(SweepRow("B200", 8, "fp8_e4m3", 64), kv=True, page=True) == "B200, KV fp8_e4m3, page 64"


def test_a_bad_sweep_plot_path_is_refused_before_the_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "llama-3.1-8b", "--gpu", "H100", "--plot", str(tmp_path / "x.txt")]) == 2
    assert "unknown image suffix" in capsys.readouterr().err
