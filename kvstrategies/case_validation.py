"""Case files checked before anything runs, and the environment a child process gets.

A case file is input: nothing it says may reach a process unchecked. :func:`validate_case_files`
reads every case (through :mod:`kvstrategies.core.jsonio`: bounded, regular files, JSON only) and
checks what a runner acts on before planning: a JSON object, only known keys, a model given as
a ``preset`` name or an ``hf_config`` object or path, and an ``env`` that holds only the SGLang
knobs that change sizing (:func:`kvstrategies.sglang.knobs.check_case_env`; ``PYTHONPATH``,
``LD_PRELOAD`` or any other name is refused). ``plan --case`` and ``verify --against sglang``
run it first, so one bad case stops the run before SGLang is imported or a child starts.

:func:`child_environment` is the only way a child process's environment is built: an allow-list
of the parent's own variables (what a Python process needs to start and find its packages and
caches) plus the checked case knobs. Nothing else from a case reaches it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .core.jsonio import read_json_object
from .errors import KVCacheConfigError
from .sglang.knobs import SIZING_KNOBS, check_case_env

#: the parent's variables a child keeps (names); case knobs are added on top
CHILD_ENV_NAMES = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT",
    "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8",
    "XDG_CACHE_HOME", "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE", "TRITON_CACHE_DIR",
)  # fmt: skip
#: prefixes of the parent's variables a child keeps (locale, Hugging Face caches, this project's own)
CHILD_ENV_PREFIXES = ("LC_", "HF_", "KVSTRATEGIES_")
#: the most case files one run reads
MAX_CASE_FILES = 100_000


def child_environment(knobs: Mapping[str, str], parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that plans cases with ``knobs`` set.

    ``parent`` (default: this process's environment) contributes only :data:`CHILD_ENV_NAMES`,
    :data:`CHILD_ENV_PREFIXES` and the sizing knobs it already sets; ``knobs`` (a case's checked
    env) are validated again here and win.
    """
    source = os.environ if parent is None else parent
    out = {
        name: value
        for name, value in source.items()
        if name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES) or name in SIZING_KNOBS
    }
    out.update(check_case_env(dict(knobs), "a child process's env"))
    return out


def validate_case_document(data: Any, source: str) -> dict[str, Any]:
    """``data`` (one case file's JSON) when a runner may act on it, else an error naming ``source``."""
    from .case import CASE_DEFAULTS

    if not isinstance(data, Mapping):
        raise KVCacheConfigError(f"{source}: a case must be a JSON object, got {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in CASE_DEFAULTS)
    if unknown:
        raise KVCacheConfigError(f"{source}: unknown case keys {unknown[:8]}; known keys: {sorted(CASE_DEFAULTS)}")
    preset, hf_config = data.get("preset"), data.get("hf_config")
    if preset is not None and not isinstance(preset, str):
        raise KVCacheConfigError(f"{source}: case field 'preset' must be a preset name, got {preset!r:.60}")
    if hf_config is not None and not isinstance(hf_config, (str, Mapping)):
        raise KVCacheConfigError(
            f"{source}: case field 'hf_config' must be a config.json object or a path to one, got {hf_config!r:.60}"
        )
    try:
        check_case_env(data.get("env"))
    except KVCacheConfigError as exc:
        raise type(exc)(f"{source}: {exc}") from exc
    return dict(data)


def validate_case_files(paths: Iterable[Path]) -> dict[Path, dict[str, Any]]:
    """Every case file read and checked (:func:`validate_case_document`), in order; the first bad
    one is a :class:`KVCacheConfigError` naming its file."""
    out: dict[Path, dict[str, Any]] = {}
    for path in paths:
        if len(out) >= MAX_CASE_FILES:
            raise KVCacheConfigError(f"more than {MAX_CASE_FILES:,} case files; run them in batches")
        out[path] = validate_case_document(read_json_object(path, "a case file"), str(path))
    return out
