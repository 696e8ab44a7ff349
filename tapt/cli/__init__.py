"""The ``tapt`` command line: thin wrappers that parse, call the library and print.

``tapt.cli:main`` is the console script; :mod:`tapt.cli.main` builds the parser from one
module per command group (data, retrieval, training, hub, analysis), each registering its
own commands; :mod:`tapt.cli.options` holds the shared option groups and number types.
"""

from tapt.cli.main import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
