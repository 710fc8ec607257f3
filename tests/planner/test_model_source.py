"""MODEL resolution: paths, presets, the local HF cache (a fake cache tree in tmp_path) and the
optional download (monkeypatched: the tests never touch the network)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError, MissingDependencyError
from kvstrategies.planner import model_source
from kvstrategies.planner.model_source import cached_snapshot, hub_cache_dir, resolve_model
from kvstrategies.presets import load_preset_config

REPO = "acme/Llama-Clone-8B"


def fake_cache(root: Path, repo: str = REPO, commit: str = "0123abcd", *, ref: bool = True, **changes: Any) -> Path:
    """A hub cache with one snapshot of ``repo`` (llama-3.1-8b's config with ``changes``)."""
    repo_dir = root / f"models--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**load_preset_config("llama-3.1-8b"), **changes}))
    if ref:
        (repo_dir / "refs").mkdir()
        (repo_dir / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture
def no_hub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(repo_id: str, filename: str) -> Path:
        raise AssertionError(f"tried to download {repo_id}/{filename}")

    monkeypatch.setattr(model_source, "download_file", refuse)


def test_cache_dir_follows_huggingface_hub_order(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert hub_cache_dir(env) == tmp_path / "xdg" / "huggingface" / "hub"
    env["HF_HOME"] = str(tmp_path / "home")
    assert hub_cache_dir(env) == tmp_path / "home" / "hub"
    env["HUGGINGFACE_HUB_CACHE"] = str(tmp_path / "legacy")
    assert hub_cache_dir(env) == tmp_path / "legacy"
    env["HF_HUB_CACHE"] = str(tmp_path / "cache")
    assert hub_cache_dir(env) == tmp_path / "cache"
    assert hub_cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()


def test_hf_id_resolves_through_the_cache(tmp_path: Path, no_download: None) -> None:
    snapshot = fake_cache(tmp_path, num_hidden_layers=16)
    source = resolve_model(REPO, {"HF_HUB_CACHE": str(tmp_path)})
    assert source.kind == "hf-cache" and source.folder == snapshot
    assert source.config is not None and source.config["num_hidden_layers"] == 16


@pytest.mark.parametrize("variable", ["HF_HOME", "HUGGINGFACE_HUB_CACHE"])
def test_other_cache_variables(tmp_path: Path, variable: str, no_download: None) -> None:
    root = tmp_path / "hub" if variable == "HF_HOME" else tmp_path
    snapshot = fake_cache(root)
    assert resolve_model(REPO, {variable: str(tmp_path)}).folder == snapshot


def test_refs_main_picks_the_snapshot(tmp_path: Path) -> None:
    fake_cache(tmp_path, commit="old")
    newer = tmp_path / f"models--{REPO.replace('/', '--')}" / "snapshots" / "new"
    newer.mkdir()
    (newer / "config.json").write_text("{}")
    assert cached_snapshot(REPO, tmp_path) == tmp_path / f"models--{REPO.replace('/', '--')}" / "snapshots" / "old"


def test_without_refs_the_newest_snapshot_with_a_config(tmp_path: Path) -> None:
    older = fake_cache(tmp_path, commit="aaa", ref=False)
    newer = older.parent / "bbb"
    newer.mkdir()
    (newer / "config.json").write_text("{}")
    os.utime(older / "config.json", (1, 1))
    assert cached_snapshot(REPO, tmp_path) == newer
    assert cached_snapshot("acme/absent", tmp_path) is None


def test_offline_gives_a_clear_message(tmp_path: Path, no_download: None) -> None:
    with pytest.raises(KVCacheConfigError, match="HF_HUB_OFFLINE is set") as info:
        resolve_model("acme/not-cached", {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert str(tmp_path) in str(info.value)


def test_download_fetches_config_and_weight_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[str] = []

    def fake_download(repo_id: str, filename: str) -> Path:
        fetched.append(filename)
        path = tmp_path / "dl" / filename
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(load_preset_config("qwen3-8b") if filename == "config.json" else {"weight_map": {}}))
        return path

    monkeypatch.setattr(model_source, "download_file", fake_download)
    source = resolve_model("acme/Qwen-Clone", {"HF_HUB_CACHE": str(tmp_path / "empty")})
    assert fetched == ["config.json", "model.safetensors.index.json", "hf_quant_config.json"]
    assert source.kind == "hf-download" and source.folder == tmp_path / "dl"
    assert source.config is not None and source.config["architectures"] == ["Qwen3ForCausalLM"]


def test_download_failure_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(repo_id: str, filename: str) -> Path:
        raise ConnectionError("Name or service not known\nmore detail")

    monkeypatch.setattr(model_source, "download_file", fail)
    with pytest.raises(KVCacheConfigError, match=r"could not download config.json of 'acme/x'.*ConnectionError"):
        resolve_model("acme/x", {"HF_HUB_CACHE": str(tmp_path)})


def test_missing_hub_extra_names_the_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match=r"kvstrategies\[hub\]"):
        resolve_model("acme/x", {"HF_HUB_CACHE": str(tmp_path)})


def test_unreachable_hub_is_reported_without_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(model_source, "hub_reachable", lambda host, timeout_s=3.0: False)
    with pytest.raises(KVCacheConfigError, match="huggingface.co cannot be reached"):
        resolve_model("acme/x", {"HF_HUB_CACHE": str(tmp_path)})


def test_preset_typo_gets_did_you_mean() -> None:
    with pytest.raises(KVCacheConfigError, match="did you mean 'llama-3.1-8b'"):
        resolve_model("llama-3.1-8")
    with pytest.raises(KVCacheConfigError, match="did you mean 'qwen3-8b'"):
        resolve_model("qwen3-8")


def test_hf_id_near_a_preset_id_gets_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(KVCacheConfigError, match="did you mean 'meta-llama/Llama-3.1-8B'"):
        resolve_model("meta-llama/Llama-3.1-8C", {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})


@pytest.mark.parametrize("path", ["./nope/config.json", "configs/missing.json", "/no/such/folder/x"])
def test_missing_path_says_no_such_file(path: str) -> None:
    with pytest.raises(KVCacheConfigError, match="no such file or folder"):
        resolve_model(path)


def test_preset_by_name_and_by_id(tmp_path: Path, no_download: None) -> None:
    assert resolve_model("llama-3.1-8b").preset == "llama-3.1-8b"
    source = resolve_model("meta-llama/Llama-3.1-8B", {"HF_HUB_CACHE": str(tmp_path)})
    assert source.kind == "preset" and source.folder is None


def test_model_folder_and_config_path(tmp_path: Path) -> None:
    folder = fake_cache(tmp_path)
    assert resolve_model(str(folder)).folder == folder
    assert resolve_model(str(folder / "config.json")).folder == folder
    with pytest.raises(KVCacheConfigError, match="has no config.json"):
        resolve_model(str(tmp_path))


def test_cli_plans_a_cached_hf_id_and_exposes_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_download: None
) -> None:
    snapshot = fake_cache(tmp_path, num_hidden_layers=16)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert main(["plan", REPO, "--available-bytes", "40GiB", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["planner"]["model_folder"] == str(snapshot)
    assert document["cell_size"] == 16 * 8 * 128 * 2 * 2  # the cached config's 16 layers, not the preset's 32


def test_cli_typo_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "lama-3.1-8b", "--available-bytes", "40GiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'llama-3.1-8b'" in err


def test_reachability_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    assert not model_source.hub_reachable("hub.invalid", timeout_s=0.5)  # .invalid never resolves
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert model_source.hub_reachable("hub.invalid", timeout_s=0.5)  # behind a proxy: left to huggingface_hub
    assert model_source.hub_host({"HF_ENDPOINT": "https://mirror.example.org/"}) == "mirror.example.org"


# ---- the cache is input too: refs and snapshots are read only inside the repository's cache folder ----


@pytest.mark.parametrize(
    "ref",
    [b"../../..", b"/etc", b"..", b"a/b", b"\xff\xfe not utf-8", b"0" * 20_000_000, b"", b"x y"],
    ids=["parent", "absolute", "dotdot", "nested", "non-utf8", "huge", "empty", "space"],
)
def test_a_ref_that_is_not_a_snapshot_name_is_one_short_error(tmp_path: Path, ref: bytes) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps({**load_preset_config("llama-3.1-8b"), "num_hidden_layers": 3}))
    cache = tmp_path / "cache"
    fake_cache(cache)
    (cache / f"models--{REPO.replace('/', '--')}" / "refs" / "main").write_bytes(ref)
    with pytest.raises(KVCacheConfigError, match="does not name a snapshot|larger than 256 bytes") as info:
        resolve_model(REPO, {"HF_HUB_CACHE": str(cache)})
    assert len(str(info.value)) < 400


def test_a_snapshot_linking_out_of_the_cache_is_not_used(tmp_path: Path, no_download: None) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps({**load_preset_config("llama-3.1-8b"), "num_hidden_layers": 3}))
    cache = tmp_path / "cache"
    snapshot = fake_cache(cache, commit="abc", ref=False)
    (snapshot / "config.json").unlink()
    (snapshot / "config.json").symlink_to(outside / "config.json")
    link = snapshot.parent / "linked"
    link.symlink_to(outside, target_is_directory=True)
    assert cached_snapshot(REPO, cache) is None
    with pytest.raises(KVCacheConfigError):
        resolve_model(REPO, {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_a_ref_that_is_a_fifo_or_a_device_never_blocks(tmp_path: Path) -> None:
    fake_cache(tmp_path)
    ref = tmp_path / f"models--{REPO.replace('/', '--')}" / "refs" / "main"
    ref.unlink()
    os.mkfifo(ref)
    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        cached_snapshot(REPO, tmp_path)
    ref.unlink()
    ref.symlink_to("/dev/zero")
    with pytest.raises(KVCacheConfigError, match="not a regular file"):
        cached_snapshot(REPO, tmp_path)


def test_the_blob_layout_of_the_real_cache_still_resolves(tmp_path: Path, no_download: None) -> None:
    """snapshots/<commit>/config.json -> ../../blobs/<sha>: inside the repository's folder."""
    snapshot = fake_cache(tmp_path, commit="c" * 40)
    blobs = snapshot.parents[1] / "blobs"
    blobs.mkdir()
    (snapshot / "config.json").rename(blobs / "sha")
    (snapshot / "config.json").symlink_to(Path("../../blobs/sha"))
    assert resolve_model(REPO, {"HF_HUB_CACHE": str(tmp_path)}).folder == snapshot
