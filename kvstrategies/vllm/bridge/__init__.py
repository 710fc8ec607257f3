"""vLLM as a second engine behind the same case files (make its CPU environment with ``tools/vllm_env.py``).

* :mod:`.runtime`: importing vLLM on a CPU host (version check, the GPU platform stand-ins);
* :mod:`.bridge`: one case through vLLM's own config, layer specs, grouping and sizing -> a document;
* :mod:`.engine`: many cases, one import;
* :mod:`.compare`: field differences and the known, deliberate ones;
* :mod:`.verify`: ``kvstrategies verify --against vllm``;
* :mod:`.snapshots`: vLLM's answers in the golden format (``golden/vllm-<version>/``).

Nothing here imports vLLM (or torch) until a function that needs it is called.
"""
