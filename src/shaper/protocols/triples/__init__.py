"""Beaver triples: the offline phase. :class:`TripleStore` holds them (use-once, save/load);
a :class:`TripleSource` makes more when the store runs dry: :class:`OtTriples` (OT extension,
any number of parties), :class:`InsecureDealer` (tests only), :class:`StoreOnly`, and, with
the hybrid engine, :class:`~shaper.protocols.hybrid.TriGen` (Paillier, two parties)."""

from .dealer import InsecureDealer
from .ot import OtTriples
from .source import StoreOnly, Triple, TripleSource
from .store import TripleStore, TriplesExhausted

__all__ = ["InsecureDealer", "OtTriples", "StoreOnly", "Triple", "TripleSource", "TripleStore", "TriplesExhausted"]
