"""Everything specific to SGLang around the strategies: its launch resolution (``launch``), the
server flags and environment knobs it reads (``flag_classes``, ``knobs``, generated ``tables``),
what it refuses at launch and at weight load, its budget rule, the launch command, and the bridge
that runs SGLang's own code (``bridge``, optional: install the ``sglang`` extra).

The SGLang pool configurators themselves are the project's strategy hierarchy,
:mod:`kvstrategies.strategies`.
"""
