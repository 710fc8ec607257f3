"""``tools/sglang_env.py`` and ``tools/vllm_env.py`` check their arguments before anything is
created (issue #38): an unsupported release, an empty DIR, a DIR that is a file, a folder that is
not a venv, or one that cannot be created are exit 2 with a message naming the argument. Only the
argument checks run here: the venv builder and pip are replaced by a failure."""

from __future__ import annotations

import importlib.util
import venv
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may be installed or created in these tests")

    monkeypatch.setattr(module, "_pip", refuse)
    monkeypatch.setattr(venv.EnvBuilder, "create", refuse)
    return module


def _release(module: ModuleType, name: str) -> str:
    if name == "vllm_env":
        return next(iter(module.ENVIRONMENTS))
    return "0.5.18"


@pytest.mark.parametrize("name", ["sglang_env", "vllm_env"])
def test_an_empty_dir_is_refused(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    module = _tool(name, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert module.main([_release(module, name), ""]) == 2
    err = capsys.readouterr().err
    assert "DIR" in err and "empty" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["sglang_env", "vllm_env"])
def test_a_dir_that_is_a_file_is_refused(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    module = _tool(name, monkeypatch)
    target = tmp_path / "a-file"
    target.write_text("x")
    assert module.main([_release(module, name), str(target)]) == 2
    err = capsys.readouterr().err
    assert "DIR" in err and "is a file" in err
    below = tmp_path / "a-file" / "venv"
    assert module.main([_release(module, name), str(below)]) == 2
    assert "DIR" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["sglang_env", "vllm_env"])
def test_a_folder_that_is_not_a_venv_is_refused(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    module = _tool(name, monkeypatch)
    (tmp_path / "notes.txt").write_text("mine")
    assert module.main([_release(module, name), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "DIR" in err and "not a virtual environment" in err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where nobody may mkdir")
@pytest.mark.parametrize("name", ["sglang_env", "vllm_env"])
def test_a_dir_that_cannot_be_created_is_refused(name: str, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    module = _tool(name, monkeypatch)
    assert module.main([_release(module, name), "/proc/kvstrategies-no-such/venv"]) == 2
    err = capsys.readouterr().err
    assert "DIR" in err and "cannot be created" in err


@pytest.mark.parametrize("name", ["sglang_env", "vllm_env"])
def test_an_unsupported_release_is_refused_before_anything_is_created(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _tool(name, monkeypatch)
    target = tmp_path / "venv"
    assert module.main(["0.5.99", str(target)]) == 2
    err = capsys.readouterr().err
    assert "VERSION" in err and "0.5.99" in err and "supported" in err
    assert "is installed" not in err
    assert not target.exists()
