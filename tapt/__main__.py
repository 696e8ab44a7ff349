"""Entry point for ``python -m tapt``, ``python tapt`` and ``accelerate launch tapt``.

``accelerate launch tapt train r.yaml`` runs ``python tapt train r.yaml``: Python then puts
``tapt/`` itself first on ``sys.path``. Swap it for the repository root so that ``tapt``
imports as a package and no module inside it can shadow a library.
"""

import os
import sys

if not __package__:
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.getcwd()) == _here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(_here))

from tapt.cli import entry

if __name__ == "__main__":
    sys.exit(entry())
