"""Write ``kvstrategies/vllm/strategies/backend_tables/v<release>.py``: vLLM's attention backend choice per GPU family.

Run with a vLLM CPU environment (``python tools/vllm_env.py 0.33.0 .venv-vllm``, then
``.venv-vllm/bin/python tools/list_vllm_backends.py``); ``--check`` compares the shipped table with
the installed vLLM instead of writing it. For every compute capability of ``kvstrategies gpus``
(the bridge's stated platform answering it) and every attention profile of :data:`PROFILES`, the
table holds what vLLM's own classes answer:

* the backends ``vllm/platforms/cuda.py CudaPlatformBase.get_valid_backends`` accepts with no
  ``--block-size``, in ``_get_backend_priorities`` order (the first is the one vLLM uses); 0.11.0 has no such
  list: its ``get_attn_backend_cls`` picks one backend by an if/else chain, at the block its
  ``check_and_update_config`` fixes, and that one is the row (:func:`_record_chain`);
* per backend and family: ``get_supported_kernel_block_sizes()`` (an int is a fixed size, ``-n`` is
  ``MultipleOf(n)``), ``get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE)`` (16 in 0.33.0, 64 in 0.34.0) and
  ``supported_kv_cache_layouts()`` (``None``: any).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from generated_file import write_or_check  # tools/generated_file.py (tools/ is on sys.path when run)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TABLES = ROOT / "kvstrategies" / "vllm" / "strategies" / "backend_tables"

#: head sizes recorded for softmax attention (others answer as :data:`OTHER_HEAD_SIZE` does)
HEAD_SIZES = (64, 80, 128, 256, 512)
KV_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2", "nvfp4")
MODEL_DTYPES = ("bfloat16", "float16")
#: (has_sink, has_sliding_window, use_mm_prefix) combinations the catalog's models have
FLAGS = ((False, False, False), (False, True, False), (True, True, False), (False, False, True), (False, True, True))
MLA_HEAD_SIZE = 576
#: the head sizes 0.11.0's table records besides (``kvstrategies.vllm.strategies.backends.CHAIN_HEAD_SIZES``: its
#: FlashAttention takes 96, not 80)
CHAIN_HEAD_SIZES = (96,)
#: DeepSeek sparse attention (``use_sparse``): the cache dtypes as given (``fp8`` and ``fp8_e4m3`` take different
#: backends on Hopper), and the query heads a rank holds, which order SM 10.x's sparse backends (at most 16, more)
SPARSE_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla")
SPARSE_HEADS = (16, 128)
#: the block a release without ``get_preferred_block_size`` (0.17.1) starts every layer at
#: (``vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config``: ``block_size`` None -> 16)
UNPREFERRED_BLOCK_SIZE = 16
#: the selector's decode-context-parallel flag (``AttentionSelectorConfig.use_dcp``): rows with it end in ``d``
DCP_FIELD = "use_dcp"


def profiles(head_sizes: tuple[int, ...] = HEAD_SIZES) -> list[tuple[bool, str, int, str, bool, bool, bool]]:
    """``(use_mla, model dtype, head size, kv cache dtype, sink, sliding window, mm prefix)``."""
    out = []
    for dtype in MODEL_DTYPES:
        for kv in KV_DTYPES:
            out.append((True, dtype, MLA_HEAD_SIZE, kv, False, False, False))
            for head in head_sizes:
                for sink, sliding, mm in FLAGS:
                    out.append((False, dtype, head, kv, sink, sliding, mm))
    return out


def sparse_profiles() -> list[tuple[str, int]]:
    """``(kv cache dtype, query heads per rank)`` of a bf16 DeepSeek sparse-attention model's latent."""
    return [(kv, heads) for kv in SPARSE_KV_DTYPES for heads in SPARSE_HEADS]


def _families() -> list[tuple[tuple[int, int], str]]:
    from kvstrategies.vllm.strategies.devices import DEVICES

    seen: dict[tuple[int, int], str] = {}
    for device in DEVICES:
        seen.setdefault(device.capability, device.name)
    return sorted(seen.items())


def _blocks(sizes: list[Any]) -> tuple[int, ...]:
    import importlib.util

    # 0.13.0 keeps the backend base classes in vllm/attention/backends/abstract.py
    module = "vllm.v1.attention.backend" if importlib.util.find_spec("vllm.v1.attention.backend") else \
        "vllm.attention.backends.abstract"
    multiple = __import__(module, fromlist=["MultipleOf"]).MultipleOf
    return tuple(-s.base if isinstance(s, multiple) else int(s) for s in sizes)


def _backend_and_priority(candidate: Any) -> tuple[Any, int]:
    """A valid backend and its priority: a candidate object from 0.24.0, a ``(backend, priority)`` pair before."""
    if hasattr(candidate, "backend"):
        return candidate.backend, int(candidate.priority)
    backend, priority = candidate
    return backend, int(priority)


def _selector_config() -> Any:
    """``AttentionSelectorConfig``: ``vllm/v1/attention/selector.py``, 0.13.0's ``vllm/attention/selector.py``;
    0.12.0 has none (its ``get_valid_backends`` takes the fields one by one): a stand-in without fields."""
    import importlib.util

    module = "vllm.v1.attention.selector" if importlib.util.find_spec("vllm.v1.attention.selector") else \
        "vllm.attention.selector"
    config = getattr(importlib.import_module(module), "AttentionSelectorConfig", None)
    return config if config is not None else _NoSelectorConfig


class _NoSelectorConfig(tuple):  # noqa: SLOT001
    """0.12.0: no selector config, so no field of it (no DCP flag)."""

    _fields: tuple[str, ...] = ()


def record() -> tuple[str, dict[str, tuple[str, ...]], dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]]]:
    from kvstrategies.vllm.bridge.runtime import cuda_to_meta, gpu_facts, import_vllm, quiet, use_gpu

    version = import_vllm()
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.platforms import current_platform
    if not callable(getattr(current_platform, "get_valid_backends", None)):  # 0.11.0: one backend, if/else chain
        with quiet(), set_current_vllm_config(VllmConfig()), torch.device("meta"), cuda_to_meta():
            return (version, *_record_chain())
    AttentionSelectorConfig = _selector_config()

    selections: dict[str, tuple[str, ...]] = {}
    backends: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]] = {}
    # a backend module may allocate a CUDA workspace at import (cutlass_mla.py): on meta, as the bridge builds models
    with quiet(), set_current_vllm_config(VllmConfig()), torch.device("meta"), cuda_to_meta():
        for capability, name in _families():
            with use_gpu(gpu_facts(name)):
                cap = current_platform.get_device_capability()
                for mla, dtype, head, kv, sink, sliding, mm in profiles():
                    fields = dict(head_size=head, dtype=getattr(torch, dtype), kv_cache_dtype=kv, block_size=None,
                                  use_mla=mla, has_sink=sink, use_mm_prefix=mm, has_sliding_window=sliding)
                    key = profile_key(capability, mla, dtype, head, kv, sink, sliding, mm)
                    selections[key] = _select(cap, fields, None, backends, capability)
                for kv, heads in sparse_profiles():
                    fields = dict(head_size=MLA_HEAD_SIZE, dtype=torch.bfloat16, kv_cache_dtype=kv, block_size=None,
                                  use_mla=True, has_sink=False, use_sparse=True, use_mm_prefix=False)
                    key = sparse_profile_key(capability, kv, heads)
                    selections[key] = _select(cap, fields, heads, backends, capability)
                    if DCP_FIELD in AttentionSelectorConfig._fields:
                        selections[key + "d"] = _select(cap, {**fields, DCP_FIELD: True}, heads, backends, capability)
                if DCP_FIELD not in AttentionSelectorConfig._fields:
                    continue
                # decode context parallelism: the MLA latents' backends that take it (a release whose selector has
                # the flag; vLLM refuses it for GQA / MQA below TP > KV heads, which the plan checks by itself)
                for dtype in MODEL_DTYPES:
                    for kv in KV_DTYPES:
                        fields = dict(head_size=MLA_HEAD_SIZE, dtype=getattr(torch, dtype), kv_cache_dtype=kv,
                                      block_size=None, use_mla=True, has_sink=False, use_mm_prefix=False,
                                      has_sliding_window=False, **{DCP_FIELD: True})  # fmt: skip
                        key = profile_key(capability, True, dtype, MLA_HEAD_SIZE, kv, False, False, False)
                        selections[key.removesuffix("-") + "d"] = _select(cap, fields, None, backends, capability)
    return version, selections, backends


#: what 0.11.0's backends declare of their blocks: nothing (no ``get_supported_kernel_block_sizes``); the table
#: records a multiple of 16 (the block ``check_and_update_config`` starts at, and the multiple every CUDA kernel
#: block of the newer lines is) and 16 as the preferred block
CHAIN_BLOCKS: tuple[tuple[int, ...], int, None] = ((-UNPREFERRED_BLOCK_SIZE,), UNPREFERRED_BLOCK_SIZE, None)


def _chain_config(use_mla: bool, sparse: bool) -> Any:
    """A stand-in of the parts of ``VllmConfig`` that 0.11.0's ``CudaPlatformBase.check_and_update_config`` reads
    and writes (the worker class, the block, an MLA model and its ``index_topk``, the CUDA graph mode)."""
    from types import SimpleNamespace

    from vllm.config import CUDAGraphMode

    hf_config = SimpleNamespace(index_topk=2048) if sparse else SimpleNamespace()
    return SimpleNamespace(
        parallel_config=SimpleNamespace(worker_cls="auto", data_parallel_size=1), speculative_config=None,
        model_config=SimpleNamespace(use_mla=use_mla, hf_config=hf_config), cache_config=SimpleNamespace(
            block_size=None), compilation_config=SimpleNamespace(cudagraph_mode=CUDAGraphMode.NONE))


def _chain_backend(fields: dict[str, Any]) -> tuple[str, int]:
    """0.11.0's backend of one profile and the block it runs on: ``check_and_update_config`` fixes the block (and,
    for an MLA model on SM 10.0, sets ``VLLM_ATTENTION_BACKEND`` to CUTLASS_MLA), then ``vllm/attention/selector.py
    get_attn_backend`` asks ``CudaPlatformBase.get_attn_backend_cls`` with that block."""
    import vllm.envs as envs
    from vllm.attention import selector
    from vllm.platforms import current_platform

    config = _chain_config(fields["use_mla"], fields.get("use_sparse", False))
    try:
        current_platform.check_and_update_config(config)
        block = int(config.cache_config.block_size)
        selector._cached_get_attn_backend.cache_clear()
        backend = selector.get_attn_backend(fields["head_size"], fields["dtype"], fields["kv_cache_dtype"], block,
                                            use_mla=fields["use_mla"], has_sink=fields["has_sink"],
                                            use_sparse=fields.get("use_sparse", False))  # fmt: skip
    finally:  # the assignment would outlive the profile (as the bridge's _clear_caches says)
        if "VLLM_ATTENTION_BACKEND" in vars(envs):
            delattr(envs, "VLLM_ATTENTION_BACKEND")
    return str(backend.get_name()), block


_Rows = dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]]


def _record_chain() -> tuple[dict[str, tuple[str, ...]], _Rows]:
    """0.11.0's table: each profile's one backend (the selector has no list of valid ones: the chain's pick is the
    row), each backend's row :data:`CHAIN_BLOCKS`. The selector takes no sliding-window or multimodal-prefix flag,
    so those rows answer as the plain ones; the sparse rows do not depend on the heads a rank holds."""
    import torch

    from kvstrategies.vllm.bridge.runtime import gpu_facts, use_gpu

    selections: dict[str, tuple[str, ...]] = {}
    backends: _Rows = {}
    for capability, name in _families():
        with use_gpu(gpu_facts(name)):
            rows = [(profile_key(capability, mla, dtype, head, kv, sink, sliding, mm),
                     dict(head_size=head, dtype=getattr(torch, dtype), kv_cache_dtype=kv, use_mla=mla, has_sink=sink))
                    for mla, dtype, head, kv, sink, sliding, mm in profiles(HEAD_SIZES + CHAIN_HEAD_SIZES)]
            rows += [(sparse_profile_key(capability, kv, heads),
                      dict(head_size=MLA_HEAD_SIZE, dtype=torch.bfloat16, kv_cache_dtype=kv, use_mla=True,
                           has_sink=False, use_sparse=True)) for kv, heads in sparse_profiles()]
            for key, fields in rows:
                backend, _block = _chain_backend(fields)
                selections[key] = (backend,)
                backends[f"{capability[0]}.{capability[1]}|{backend}"] = CHAIN_BLOCKS
    return selections, backends


def _select(cap: Any, fields: dict[str, Any], num_heads: int | None,
            backends: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]],
            capability: tuple[int, int]) -> tuple[str, ...]:  # fmt: skip
    """The valid backends for one selector profile, best first; each new backend's row added to ``backends``."""
    from vllm.config import CacheConfig
    from vllm.platforms import current_platform
    AttentionSelectorConfig = _selector_config()

    # 0.25.1's selector takes no sliding-window flag: its answer holds with a window or without
    parameters = inspect.signature(current_platform.get_valid_backends).parameters
    if AttentionSelectorConfig is _NoSelectorConfig:  # 0.12.0: the fields as arguments, no multimodal prefix flag
        from vllm.attention.backends.abstract import AttentionType

        valid, _ = current_platform.get_valid_backends(
            head_size=fields["head_size"], dtype=fields["dtype"], kv_cache_dtype=fields["kv_cache_dtype"],
            block_size=None, use_mla=fields["use_mla"], has_sink=fields["has_sink"],
            use_sparse=fields.get("use_sparse", False), device_capability=cap, attn_type=AttentionType.DECODER)
    else:
        config = AttentionSelectorConfig(**{k: v for k, v in fields.items() if k in AttentionSelectorConfig._fields})
        # 0.16.0's takes no head count (it orders no sparse backends by it)
        takes_heads = "num_heads" in parameters
        valid, _ = current_platform.get_valid_backends(cap, config, **({"num_heads": num_heads} if takes_heads
                                                                       else {}))  # fmt: skip
    ordered = sorted((_backend_and_priority(c) for c in valid), key=lambda bp: bp[1])
    for backend, _ in ordered:
        bkey = f"{capability[0]}.{capability[1]}|{backend.name}"
        if bkey in backends:
            continue
        cls = backend.get_class()
        # before 0.29.0 a backend declares no layouts (vLLM lays every cache out one way)
        layouts = getattr(cls, "supported_kv_cache_layouts", lambda: None)()
        # 0.17.1 has no preferred block (nor CacheConfig.DEFAULT_BLOCK_SIZE): the CUDA platform starts every
        # block at 16 (CudaPlatformBase.check_and_update_config), which the table records as the preferred one
        preferred = getattr(cls, "get_preferred_block_size", None)
        backends[bkey] = (
            _blocks(cls.get_supported_kernel_block_sizes()),
            int(preferred(CacheConfig.DEFAULT_BLOCK_SIZE)) if preferred is not None else UNPREFERRED_BLOCK_SIZE,
            None if layouts is None else tuple(layout.name for layout in layouts),
        )
    return tuple(backend.name for backend, _ in ordered)


def sparse_profile_key(capability: tuple[int, int], kv: str, heads: int) -> str:
    """A sparse profile's row: flag ``s``, and ``h`` when the rank holds at most 16 query heads."""
    return f"{capability[0]}.{capability[1]}|mla|bfloat16|{MLA_HEAD_SIZE}|{kv}|s{'h' if heads <= 16 else ''}"


def profile_key(capability: tuple[int, int], mla: bool, dtype: str, head: int, kv: str, sink: bool, sliding: bool,
                mm: bool) -> str:  # fmt: skip
    flags = "".join(c for c, on in (("k", sink), ("w", sliding), ("m", mm)) if on) or "-"
    return f"{capability[0]}.{capability[1]}|{'mla' if mla else 'mha'}|{dtype}|{head}|{kv}|{flags}"


HEADER = '''# ruff: noqa: E501
"""vLLM {version}'s attention backend choice per GPU family, read from its own classes (data only).

Generated by ``tools/list_vllm_backends.py`` from ``vllm/platforms/cuda.py
CudaPlatformBase.get_valid_backends`` (with ``_get_backend_priorities``) and each backend class of
``vllm/v1/attention/backends/``, the bridge's stated platform answering each compute capability of
``kvstrategies gpus``; do not edit by hand.

``SELECTIONS``: ``"<major>.<minor>|mla or mha|model dtype|head size|kv cache dtype|flags"`` (flags:
``k`` attention sinks, ``w`` a sliding window, ``m`` a multimodal prefix, ``s`` sparse, ``h`` at most 16
query heads a rank, ``d`` decode context parallelism, ``-`` none) -> the valid
backends with no ``--block-size``, highest priority first (empty: vLLM finds none).
``BACKENDS``: ``"<major>.<minor>|backend"`` -> (``get_supported_kernel_block_sizes()``, a negative
number ``-n`` meaning ``MultipleOf(n)``; ``get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE)``;
``supported_kv_cache_layouts()``, ``None`` for any).
"""

VERSION = "{version}"

SELECTIONS: dict[str, tuple[str, ...]] = {{
'''


def render(version: str, selections: dict[str, tuple[str, ...]],
           backends: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]]) -> str:  # fmt: skip
    body = "".join(f"    {k!r}: {v!r},\n" for k, v in sorted(selections.items()))
    rows = "".join(f"    {k!r}: {v!r},\n" for k, v in sorted(backends.items()))
    tail = ("}\n\nBACKENDS: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]] = {\n" + rows + "}\n")
    return HEADER.format(version=version) + body + tail


DELTA = '''# ruff: noqa: E501
"""vLLM {version}'s attention backend tables as changes to vLLM {base}'s (``v{base_mod}.py``; data only).

Generated by ``tools/list_vllm_backends.py`` from vLLM {version}'s own classes, as ``v{base_mod}.py`` is;
do not edit by hand. ``SELECTIONS`` / ``BACKENDS``: the entries whose value differs (or that only this
release has); ``*_REMOVED``: keys only the newer release has.
"""

VERSION = "{version}"
BASE = "{base}"

SELECTIONS: dict[str, tuple[str, ...]] = {{
{sel}}}
SELECTIONS_REMOVED: tuple[str, ...] = ({srem})

BACKENDS: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]] = {{
{back}}}
BACKENDS_REMOVED: tuple[str, ...] = ({brem})
'''


def render_delta(version: str, base: str, selections: dict[str, tuple[str, ...]],
                 backends: dict[str, tuple[tuple[int, ...], int, tuple[str, ...] | None]]) -> str:  # fmt: skip
    """An older release line's table as its changes to the next newer line's (``base``) resolved table."""
    from kvstrategies.vllm.strategies.backend_tables import TABLES as SHIPPED

    newer = SHIPPED[base]
    changed_sel = {k: v for k, v in selections.items() if newer.selections.get(k) != v}
    changed_back = {k: v for k, v in backends.items() if newer.backends.get(k) != v}

    def rows(d: dict[str, Any]) -> str:
        return "".join(f"    {k!r}: {v!r},\n" for k, v in sorted(d.items()))

    def keys(gone: set[str]) -> str:
        return "".join(f"{k!r}, " for k in sorted(gone)).rstrip()

    return DELTA.format(version=version, base=base, base_mod=base.replace(".", "_"), sel=rows(changed_sel),
                        srem=keys(set(newer.selections) - set(selections)), back=rows(changed_back),
                        brem=keys(set(newer.backends) - set(backends)))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    version, selections, backends = record()
    from kvstrategies.core.releases import VLLM_RELEASE_LINES

    target = TABLES / f"v{version.replace('.', '_')}.py"
    if version not in VLLM_RELEASE_LINES:
        print(f"list_vllm_backends: vLLM {version} is not a modelled release line (kvstrategies.core.releases)",
              file=sys.stderr)  # fmt: skip
        return 2
    newer = VLLM_RELEASE_LINES[VLLM_RELEASE_LINES.index(version) + 1:]  # the newest in full, the others as changes
    text = (render(version, selections, backends) if not newer
            else render_delta(version, newer[0], selections, backends))  # fmt: skip
    return write_or_check(target, text, "tools/list_vllm_backends.py", check=args.check)


if __name__ == "__main__":
    sys.exit(main())
