"""Deprecated path of :mod:`tapt.cli.options` (the argparse number types, output checks)."""

from tapt.cli.options import *
