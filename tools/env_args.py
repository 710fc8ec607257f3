"""The argument checks ``tools/sglang_env.py`` and ``tools/vllm_env.py`` share: DIR is checked
(and created) before anything is installed, each refusal an exit-2 message naming DIR."""

from __future__ import annotations

from pathlib import Path


class ArgumentError(Exception):
    """A bad VERSION or DIR: the message names the argument and what to give instead."""


def venv_dir(text: str) -> Path:
    """DIR, resolved and created (empty) or an existing venv (``pyvenv.cfg`` in it) to reuse.

    Refused: an empty DIR (it would be the current folder), a file, a folder holding other files,
    or a path that cannot be created (a file on the way, no permission)."""
    if not text.strip():
        raise ArgumentError("DIR is empty; give the folder the venv goes in, e.g. /tmp/venv")
    target = Path(text).expanduser().resolve()
    if target.is_file():
        raise ArgumentError(f"DIR {text} is a file; give a new folder or an existing venv")
    if target.is_dir() and any(target.iterdir()) and not (target / "pyvenv.cfg").is_file():
        raise ArgumentError(f"DIR {text} is a folder that is not a virtual environment (no pyvenv.cfg); "
                            "give a new folder or an existing venv")  # fmt: skip
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArgumentError(f"DIR {text} cannot be created ({exc.strerror or exc}); give a writable folder") from exc
    return target
