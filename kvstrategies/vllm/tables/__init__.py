"""Tables generated from vLLM's source (``tools/list_vllm_flags.py``): data, never edited by hand."""
