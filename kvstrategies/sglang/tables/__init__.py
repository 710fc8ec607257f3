"""Tables generated from SGLang's source (``tools/list_sglang_flags.py``,
``tools/list_sglang_knobs.py``): data, never edited by hand."""
