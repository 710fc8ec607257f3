"""vLLM's KV-cache sizing as strategies of the project (``ctx.release.engine == "vllm"``).

* :mod:`.deployment`: a context read as vLLM's engine arguments (the one mapping the bridge shares);
* :mod:`.specs`: per-layer KV cache specs that own their page bytes (vLLM's ``kv_cache_interface``);
* :mod:`.launch`: vLLM's resolved settings: max model length, batch defaults, in-flight tokens;
* :mod:`.backends`: the attention backend vLLM picks per GPU and the block size it sets;
* :mod:`.layers`: the model's layers as specs;
* :mod:`.grouping`: KV cache groups (uniform, same type, hybrid with padding layers);
* :mod:`.sizing`: blocks, kv_cache_tensors, the group-aware capacity and concurrency;
* :mod:`.strategies`: the registered strategies; :mod:`.document`: the plan document.
"""
