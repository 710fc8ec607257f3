"""Everything specific to vLLM: its KV-cache sizing as strategies of their own (``strategies``),
the planner's vLLM side (``planner``: budget, flags, command, report), its engine arguments
(``arguments``), the generated flag table (``tables``) and the bridge that runs vLLM's own code
(``bridge``, optional: ``tools/vllm_env.py``)."""
