"""Small builders shared by the tests: a context from a preset and a few overrides."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvstrategies.case import parse_case
from kvstrategies.context import KVCacheSettings

if TYPE_CHECKING:
    from kvstrategies.planner import DeploymentRequest
    from kvstrategies.pools.layout import PoolLayout

GIB = 2**30


def case_settings(preset_or_config: str | dict[str, Any], **fields: Any) -> KVCacheSettings:
    """``KVCacheSettings`` for a preset name (or an inline HF config) plus case-file fields."""
    case: dict[str, Any] = {"available_bytes": 1, **fields}
    if isinstance(preset_or_config, str):
        case["preset"] = preset_or_config
    else:
        case["hf_config"] = preset_or_config
    return parse_case(case).settings


TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool_module(name: str) -> Any:
    """``tools/NAME.py`` imported as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_kvs_tool_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: the hostile stand-ins for a file that :func:`plant_hostile_file` writes
HOSTILE_FILES = ("folder", "fifo", "link-loop", "device-link", "non-utf8", "deep", "list", "empty", "nan", "bytes")


def plant_hostile_file(path: Path, kind: str, payload: bytes = b"") -> None:
    """Replace ``path`` with a hostile stand-in of ``kind`` (:data:`HOSTILE_FILES`; ``bytes``
    writes ``payload``): what a reader of ``path`` must refuse without hanging."""
    if path.exists() or path.is_symlink():
        path.unlink()
    writers = {
        "folder": path.mkdir,
        "fifo": lambda: os.mkfifo(path),
        "link-loop": lambda: path.symlink_to(path.name),
        "device-link": lambda: path.symlink_to("/dev/zero"),
        "non-utf8": lambda: path.write_bytes(b'{"name": "\xff\xfe"}'),
        "deep": lambda: path.write_text("[" * 100_000 + "]" * 100_000),
        "list": lambda: path.write_text("[1, 2]"),
        "empty": lambda: path.write_text(""),
        "nan": lambda: path.write_text('{"name": NaN, "sizes": {"max_total_num_tokens": Infinity}}'),
        "bytes": lambda: path.write_bytes(payload),
    }
    writers[kind]()


def buffer_shapes(layout: PoolLayout) -> dict[str, tuple[int, ...]]:
    """Each buffer's shape by its name."""
    return {b.name: b.shape for b in layout.buffers}


#: a two-layer Llama: h 64, 8 heads of 8 (2 KV heads), MLP 128, vocab 1000
SMALL_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
}  # fmt: skip


def planner_request(config: dict[str, Any], **kw: Any) -> DeploymentRequest:
    """A planner request for an inline HF config on a GPU (``gpu=``, default H100) and the other fields given."""
    from kvstrategies.planner import DeploymentRequest
    from kvstrategies.planner.gpus import lookup_gpu

    return DeploymentRequest("m", {"hf_config": config}, gpu=lookup_gpu(kw.pop("gpu", "H100")), **kw)


def block_fp8_llama(
    heads: int, kv_heads: int, qcfg: dict[str, Any], hidden: int = 2048, inter: int = 8192
) -> dict[str, Any]:
    """A 16-layer Llama with head_dim 64 whose linears are 128 x 128 block FP8 (``qcfg``)."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": 16, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16", "quantization_config": qcfg,
    }  # fmt: skip
