"""The library core: small values and rules every layer above shares, torch-free.

Dtypes, pool sizes, the cost value, request arithmetic, release rules, input checks and JSON
reading. It imports nothing of the package but the context protocol and the errors
(``tests/package/test_import_graph.py``).
"""
