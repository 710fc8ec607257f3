"""Where the model's ``config.json`` comes from: a path, a shipped preset, the local Hugging Face
cache, or (with the ``hub`` extra and a network) a download of the config and its weight index.

Resolution order for the ``MODEL`` argument of ``kvstrategies plan``:

1. an existing path: a ``config.json`` file, or a folder holding one (a checkpoint folder);
2. a HF id (``org/name``) found in the local HF cache, in the hub's layout
   ``<cache>/models--ORG--NAME/snapshots/<commit>/config.json`` with the commit read from
   ``refs/main``; the cache folder is ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE``, else
   ``HF_HOME/hub``, else ``XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``
   (huggingface_hub's own order);
3. a preset short name or the HF id of a preset (``kvstrategies presets``);
3b. a shipped checkpoint's HF id (:mod:`kvstrategies.checkpoints`, :mod:`.known_models`);
4. a HF id downloaded with ``huggingface_hub`` (``config.json``, and
   ``model.safetensors.index.json`` when the repository has one) unless ``HF_HUB_OFFLINE`` is set;
5. an ``-Instruct`` / ``-Chat`` / ``-it`` id whose base is a preset or a shipped checkpoint
   (:func:`.known_models.tuned_base`), when its own config cannot be read (offline, no
   ``huggingface_hub``, the hub unreachable): planned from the base, and the description says so.

Anything else is an error: "no such file or folder" for what looks like a path, "did you mean"
(difflib) for a near-miss of a preset name or id. :attr:`ModelSource.folder` is the local
checkpoint folder (snapshot or model folder) so the weight estimate can read its metadata.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ..core.jsonio import read_json_object, read_regular_bytes
from ..errors import KVCacheConfigError, MissingDependencyError
from .hf_quant import HF_QUANT_CONFIG

if TYPE_CHECKING:
    from .known_models import TunedBase

SourceKind = Literal["path", "preset", "shipped", "hf-cache", "hf-download"]
CONFIG = "config.json"
WEIGHT_INDEX = "model.safetensors.index.json"
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: the raw config (``None`` for a preset, loaded from the package), the
    preset short name, the local checkpoint folder, and a one-line description of where it came from."""

    given: str
    kind: SourceKind
    description: str
    config: Mapping[str, Any] | None = field(default=None, repr=False)
    preset: str | None = None
    folder: Path | None = None

    def request_source(self) -> dict[str, Any]:
        """``{"preset": name}`` or ``{"hf_config": dict}`` (the planner's request / case fields)."""
        if self.preset is not None:
            return {"preset": self.preset}
        assert self.config is not None  # every non-preset source carries its config
        return {"hf_config": self.config}


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The HF hub cache folder, in huggingface_hub's order of environment variables."""
    env = os.environ if environ is None else environ
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()
    return base / "huggingface" / "hub"


def hub_offline(environ: Mapping[str, str] | None = None) -> bool:
    """``HF_HUB_OFFLINE`` set to a true value (1, on, yes, true)."""
    env = os.environ if environ is None else environ
    return env.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


#: a cache ref names a snapshot folder: one plain path component (huggingface_hub writes a 40-hex
#: commit hash; ``..``, ``/abs`` or ``a/b`` would lead outside ``snapshots/``)
_COMMIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: the longest ref file read (bytes; a ref is 40 characters and a newline)
MAX_REF_BYTES = 256
#: the most snapshot folders of one repository looked at
MAX_SNAPSHOTS = 4096


def _read_ref(ref: Path) -> str:
    """The commit a ``refs/main`` file names: a small regular UTF-8 file holding one plain name."""
    try:
        data = read_regular_bytes(ref, MAX_REF_BYTES, "a ref file of the HF cache", "far more than a commit hash")
    except KVCacheConfigError as exc:
        raise KVCacheConfigError(f"{exc} (in the HF cache: repair or delete the cache entry)") from exc
    try:
        commit = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        commit = ""
    if not _COMMIT.match(commit):
        raise KVCacheConfigError(
            f"{ref} in the HF cache does not name a snapshot (a commit hash, as huggingface_hub writes it); repair "
            "the cache entry (huggingface-cli download REPO) or delete it"
        )
    return commit


def _inside(path: Path, folder: Path) -> bool:
    """``path`` (symlinks resolved) lies inside ``folder``: the cache's own files, never elsewhere."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def cached_snapshot(repo_id: str, cache: Path) -> Path | None:
    """The cached snapshot folder of ``repo_id`` holding a ``config.json``, or None.

    ``refs/main`` names the commit (checked: one plain name in a small regular file); without it, the
    newest snapshot that has a config. A snapshot or config that resolves outside the repository's
    cache folder (``models--ORG--NAME``, whose ``blobs/`` the snapshot files link into) is not used.
    """
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.exists() or ref.is_symlink():
        commit = _read_ref(ref)
        if (snapshots / commit / CONFIG).is_file() and _inside(snapshots / commit / CONFIG, repo):
            return snapshots / commit
    if not snapshots.is_dir():
        return None
    candidates = []
    for index, path in enumerate(snapshots.iterdir()):
        if index >= MAX_SNAPSHOTS:
            break
        if (path / CONFIG).is_file() and _inside(path / CONFIG, repo):
            candidates.append(path)
    return max(candidates, key=lambda path: (path / CONFIG).stat().st_mtime) if candidates else None


def hub_host(environ: Mapping[str, str] | None = None) -> str:
    """The hub's host name (``HF_ENDPOINT``, else huggingface.co)."""
    env = os.environ if environ is None else environ
    endpoint = env.get("HF_ENDPOINT") or "https://huggingface.co"
    return urlsplit(endpoint).hostname or "huggingface.co"


def hub_reachable(host: str, timeout_s: float = 3.0) -> bool:
    """A TCP connection to ``host:443`` opens within ``timeout_s`` (no retries, no noise); behind
    an HTTP(S) proxy it is left to huggingface_hub (a direct connection may be blocked there)."""
    if any(os.environ.get(key) for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def download_file(repo_id: str, filename: str) -> Path:
    """``huggingface_hub.hf_hub_download`` of one file (the ``hub`` extra); tests replace it."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise MissingDependencyError(
            f"{repo_id!r} is not in the local HF cache ({hub_cache_dir()}); downloading its config.json needs "
            "huggingface_hub: pip install 'kvstrategies[hub]', or pass a config.json path or model folder"
        ) from exc
    host = hub_host()
    if not hub_reachable(host):
        raise KVCacheConfigError(
            f"{repo_id!r} is not in the local HF cache ({hub_cache_dir()}) and {host} cannot be reached (offline?); "
            "download it where there is a network (huggingface-cli download REPO config.json), point HF_HUB_CACHE "
            "at that cache, or pass a config.json path or model folder"
        )
    return Path(hf_hub_download(repo_id, filename))


def _download(repo_id: str) -> ModelSource:
    try:
        config_path = download_file(repo_id, CONFIG)
    except KVCacheConfigError:
        raise
    except Exception as exc:  # network, unknown or gated repository: one clear line
        raise KVCacheConfigError(
            f"could not download {CONFIG} of {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); check the id, the network and, for a "
            "gated model, HF_TOKEN; or pass a config.json path or model folder"
        ) from exc
    for optional in (WEIGHT_INDEX, HF_QUANT_CONFIG):  # the checkpoint size; a ModelOpt quantization file
        with contextlib.suppress(Exception):  # single-file checkpoints have no index, most none of the second
            download_file(repo_id, optional)
    folder = config_path.parent
    return ModelSource(
        repo_id,
        "hf-download",
        f"{repo_id} downloaded from the Hugging Face Hub into {folder}",
        config=read_json_object(config_path, "a model config (config.json)"),
        folder=folder,
    )


def _from_path(given: str, path: Path) -> ModelSource:
    if path.is_dir():
        if not (path / CONFIG).is_file():
            raise KVCacheConfigError(
                f"model folder {path} has no {CONFIG}; pass a checkpoint folder, a config.json path or a preset"
            )
        config = read_json_object(path / CONFIG, "a model config (config.json)")
        return ModelSource(given, "path", f"model folder {path}", config=config, folder=path)
    config = read_json_object(path, "a model config (config.json)")
    folder = path.parent if path.name == CONFIG else None
    return ModelSource(given, "path", f"config file {path}", config=config, folder=folder)


def _looks_like_path(model: str) -> bool:
    return (
        model.endswith(".json")
        or model.startswith((".", "~", os.sep))
        or (os.sep in model and not _HF_ID.match(model))
        or model.count("/") > 1
    )


def resolve_model(model: str, environ: Mapping[str, str] | None = None) -> ModelSource:
    """Resolve the ``MODEL`` argument (see the module doc for the order)."""
    from ..presets import resolve_preset_name

    path = Path(model).expanduser()
    if path.exists():
        return _from_path(model, path)
    is_hf_id = bool(_HF_ID.match(model))
    cache = hub_cache_dir(environ)
    if is_hf_id:
        snapshot = cached_snapshot(model, cache)
        if snapshot is not None:
            config = read_json_object(snapshot / CONFIG, "a model config (config.json)")
            return ModelSource(model, "hf-cache", f"{model} from the local HF cache ({snapshot})", config, None,
                               snapshot)  # fmt: skip
    short = resolve_preset_name(model)
    if short is not None:
        return ModelSource(model, "preset", f"preset {short}", preset=short)
    from .known_models import near_miss_hint, shipped_model  # issue 24: shipped checkpoints

    shipped = shipped_model(model)
    if shipped is not None:
        return ModelSource(model, "shipped", shipped.description, config=shipped.config, folder=shipped.folder)
    if _looks_like_path(model):
        raise KVCacheConfigError(f"no such file or folder: {model!r} (give a config.json path, a model folder, "
                                 "a preset name or a HF id)")  # fmt: skip
    from .known_models import tuned_base

    base = tuned_base(model)
    hint = near_miss_hint(model)  # issue 24: another quantization of the asked model is named, never substituted
    near = bool(hint)
    if not is_hf_id and base is not None:
        return _from_base(model, base, "no organisation was given, so nothing can be downloaded")
    if not is_hf_id:
        raise KVCacheConfigError(
            f"{model!r} is not a preset, a HF id (org/name) or a path; {hint}`kvstrategies presets` lists the presets"
        )
    if hub_offline(environ):
        if base is not None:
            return _from_base(model, base, "HF_HUB_OFFLINE is set")
        raise KVCacheConfigError(
            f"{model!r} is not in the local HF cache ({cache}) and HF_HUB_OFFLINE is set, so it cannot be "
            f"downloaded; {hint}unset HF_HUB_OFFLINE, point HF_HUB_CACHE at a cache that has it, or pass a "
            "config.json path or model folder"
        )
    try:
        return _download(model)
    except KVCacheConfigError as exc:
        if base is not None:
            return _from_base(model, base, "its config.json could not be downloaded")
        if not near:
            raise
        raise type(exc)(f"{exc}; {hint.strip()}") from exc


def _from_base(model: str, base: TunedBase, why: str) -> ModelSource:
    """``model`` planned from its shipped base (:class:`.known_models.TunedBase`), saying so."""
    from .known_models import shipped_model

    note = (
        f"{model} planned from its base {base.hf_id} ({why}): a -{base.tag} tuning keeps the base's architecture, "
        "though its context length may differ (--context-length sets it); pass "
        f"{model.rsplit('/', 1)[-1]}'s own config.json or checkpoint folder for its exact file"
    )
    if base.preset is not None:
        return ModelSource(model, "preset", f"{note}; preset {base.preset}", preset=base.preset)
    shipped = shipped_model(base.hf_id)
    assert shipped is not None  # tuned_base names only shipped checkpoints and presets
    return ModelSource(model, "shipped", f"{note}; {shipped.description}", config=shipped.config,
                       folder=shipped.folder)  # fmt: skip
