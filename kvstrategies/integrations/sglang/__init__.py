"""Differential checks against SGLang 0.5.23 (optional extra ``sglang``; imported only on demand)."""
