"""Beaver triples: the offline phase. :class:`TripleStore` holds them (use-once, save/load);
a :class:`TripleSource` makes more when the store runs dry: :class:`TriGen` (Paillier, two
parties), :class:`OtTriples` (OT extension, any number of parties), :class:`InsecureDealer` (tests only),
:class:`StoreOnly`."""

from .dealer import InsecureDealer
from .ot import OtTriples
from .source import StoreOnly, Triple, TripleSource
from .store import TripleStore, TriplesExhausted
from .trigen import TriGen, trigen, trigen_matrix

__all__ = ["InsecureDealer", "OtTriples", "StoreOnly", "TriGen", "Triple", "TripleSource", "TripleStore", "TriplesExhausted",
           "trigen", "trigen_matrix"]
