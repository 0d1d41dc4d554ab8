"""Boolean circuits in Bristol Fashion: the parser, the plaintext evaluator, the layered schedule
the three-party engine runs (:mod:`shaper.circuits.bristol`), and the circuits shipped with
shaper beside it (``aes_128.txt``; :func:`bundled` lists them, :func:`load` takes a file path or
a bundled name). Pure computation: no keys, no parties, no I/O besides reading a circuit file."""

from . import bristol
from .bristol import Circuit, CircuitFormatError, bundled, load, parse

__all__ = ["Circuit", "CircuitFormatError", "bristol", "bundled", "load", "parse"]
