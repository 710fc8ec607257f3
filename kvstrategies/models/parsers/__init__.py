"""Family parsers: ``(root, text, geometry) -> geometry`` refinements, registered in order by
:mod:`kvstrategies.models`. Each returns the geometry unchanged when the config is not of its family.
"""
