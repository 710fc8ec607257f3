"""Each layer's KV cache spec from a release whose model runner makes them (vLLM 0.11.0).

From 0.12.0 a module function makes the specs from the config alone (``vllm/v1/worker/gpu/attn_utils.py
get_kv_cache_spec``, which :func:`kvstrategies.vllm.bridge.bridge._build_stage` calls). 0.11.0 has no such
function: its worker asks the model runner (``vllm/v1/worker/gpu_worker.py Worker.get_kv_cache_spec`` ->
``vllm/v1/worker/gpu_model_runner.py GPUModelRunner.get_kv_cache_spec``), and the block size was fixed with the
config (``vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config``; the hybrid attention + Mamba block
and page padding: ``vllm/model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config``,
both run by ``VllmConfig.__post_init__``), so there is no ``Platform.update_block_size_for_backend`` step either.

The runner's constructor allocates its GPU buffers (pinned host memory, CUDA streams, the drafter), which a CPU
host cannot; :func:`runner_kv_cache_spec` calls the release's own ``GPUModelRunner.get_kv_cache_spec`` on a runner
object holding exactly the attributes that method reads, each set as ``GPUModelRunner.__init__`` sets it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the model runner module of the releases without ``attn_utils.get_kv_cache_spec``
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"


def runner_kv_cache_spec(vllm_config: Any) -> dict[str, Any]:
    """The layers' specs as the release's ``GPUModelRunner.get_kv_cache_spec`` makes them (called under the
    current config, after the model is built: it reads the layers registered in the static forward context)."""
    module = importlib.import_module(RUNNER_MODULE)
    runner = object.__new__(module.GPUModelRunner)
    # what GPUModelRunner.__init__ (0.11.0) sets and get_kv_cache_spec reads, and nothing else
    runner.vllm_config = vllm_config
    runner.speculative_config = vllm_config.speculative_config
    runner.attention_chunk_size = vllm_config.model_config.attention_chunk_size
    cache_dtype = vllm_config.cache_config.cache_dtype
    runner.kv_cache_dtype = (vllm_config.model_config.dtype if cache_dtype == "auto"
                             else module.STR_DTYPE_TO_TORCH_DTYPE[cache_dtype])  # fmt: skip
    # layers that share another layer's cache are recorded here and get no spec of their own
    runner.shared_kv_cache_layers = {}
    return dict(module.GPUModelRunner.get_kv_cache_spec(runner))
