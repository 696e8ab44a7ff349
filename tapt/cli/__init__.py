"""The ``tapt`` command line: thin wrappers that parse, call the library and print.

``tapt.cli:main`` is the console script; :mod:`tapt.cli.main` builds the parser from one
module per command group (data, retrieval, training, hub, analysis), each registering its
own commands; :mod:`tapt.cli.options` holds the shared option groups and number types,
:mod:`tapt.cli.inputs` the helpers that open a command's data and model.

A handler imports the library modules it calls inside the handler, not at the top of its
module: ``tapt --help`` and a bad flag answer without loading them (the rule of
``tapt/__init__.py``'s docstring).
"""

from tapt.cli.main import COMMANDS, build_parser, entry, main

__all__ = ["COMMANDS", "build_parser", "entry", "main"]
