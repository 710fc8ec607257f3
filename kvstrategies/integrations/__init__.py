"""Bridges to serving engines. Optional: the core library never imports this package.

``kvstrategies.integrations.sglang`` runs SGLang's own sizing and pool builders beside ours
(install the ``sglang`` extra).
"""
