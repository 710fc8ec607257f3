"""The golden-snapshot harness: one stable document per catalog case (``document``) and a
readable diff of two of them (``diff``); ``tools/record_golden.py`` writes ``golden/``."""
