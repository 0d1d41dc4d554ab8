"""The two-party hybrid context: additive secret sharing over Z_2^64 mixed with Paillier (or OU).

    def job(session):
        ctx = Hybrid2PC.setup(session, key_bits=2048)       # each party: a key pair; publics swapped
        x = ctx.share(my_values, owner=0)                   # party 1 passes anything (ignored)
        y = ctx.share(other_values, owner=1)
        z = x * y + 1.5                                     # Beaver multiplication, fixed point
        return z.reveal()

Security model: semi-honest, exactly two parties, no third party. Each party has its own key
pair; a party only ever decrypts values masked by the other (H2S), and only ever sees the other's
data encrypted (S2H, TriGen, secure mat-vec). What each step reveals is stated in its module.

Triples for multiplication come from the store ``ctx.triples`` (fill it ahead of time with
:meth:`generate_triples`, or load a saved one); ``triple_source`` (a
:class:`~shaper.protocols.triples.TripleSource`) makes more when it runs dry:
:class:`~shaper.protocols.hybrid.TriGen` (the default) generates them with Paillier on the
spot, :class:`~shaper.protocols.triples.InsecureDealer` draws insecure test triples from a
shared seed, :class:`~shaper.protocols.triples.StoreOnly` raises :class:`TriplesExhausted`.

Hybrid2PC *is* the additive engine (:class:`~shaper.protocols.additive.AdditiveEngine`: share,
reveal, Beaver products, and the Z_q / Z_2 domains where the triple source makes those triples)
for two parties, with three differences: each party holds a key pair and the HE boundary
(``h2s``, ``s2h``, secure sparse mat-vec), Beaver triples are taken from a
:class:`~shaper.protocols.triples.TripleStore` refilled by the source, and truncation is
SecureML's local one (no preprocessing, no message; it exists for two parties only).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...arrays import ints_from_bytes, ints_to_bytes
from ...crypto import ou, paillier
from ...crypto.ahe import AHEPrivateKey, AHEPublicKey, EncryptedArray
from ...crypto.encoding import SIGMA
from ...crypto.serialization import key_from_bytes, key_to_bytes
from ...errors import ConfigError, KeyValidationError
from ...net import Session
from ..additive.engine import AdditiveEngine
from ..additive.shares import IntegerShares, SharedArray, truncate_share
from ..triples import TripleSource, TripleStore
from .conversions import h2s, s2h
from .sparse import sparse_matvec, sparse_matvec_encrypted
from .trigen import TriGen


class Hybrid2PC(AdditiveEngine):
    """One party's side of a two-party hybrid (SS + AHE) computation."""

    conversions: ClassVar[frozenset[str]] = frozenset({"h2s", "s2h"})

    def __init__(self, session: Session, private_key: AHEPrivateKey, peer_key: AHEPublicKey, *,
                 frac_bits: int = 16, sigma: int = SIGMA, triple_source: TripleSource | None = None,
                 triples: TripleStore | None = None) -> None:
        if session.n != 2:
            raise ConfigError(f"Hybrid2PC needs exactly two parties, the session has {session.n}")
        if triple_source is None:
            triple_source = TriGen()
        if not isinstance(triple_source, TripleSource):
            raise ConfigError("triple_source must be a TripleSource (shaper.protocols.triples: TriGen(), "
                              f"StoreOnly(), InsecureDealer() for tests), got {triple_source!r}")
        if not 0 <= frac_bits <= 40:
            raise ConfigError(f"frac_bits must be in [0, 40], got {frac_bits}")
        if sigma < SIGMA:
            raise ConfigError(f"statistical security sigma must be at least {SIGMA} bits, got {sigma}")
        super().__init__(session, triple_source=triple_source, frac_bits=frac_bits)
        self.peer = session.peers[0]
        self.private_key = private_key
        self.public_key = private_key.public_key
        self.peer_key = peer_key
        self.sigma = sigma
        self.triples = triples or TripleStore(self.me)
        self.last_pipeline = None
        # self.prg (the session's CSPRNG, from the engine) draws shares and masks; a job may swap in
        # a seeded stream per epoch so that a resumed run replays the same masks

    @classmethod
    def setup(cls, session: Session, *, key_bits: int = 2048, scheme: str = "paillier",
              keys: tuple[AHEPublicKey, AHEPrivateKey] | None = None, **options: Any) -> "Hybrid2PC":
        """Generate (or use) this party's key pair and swap public keys with the peer."""
        if keys is None:
            module = {"paillier": paillier, "ou": ou}.get(scheme)
            if module is None:
                raise ConfigError(f"scheme must be 'paillier' or 'ou', got {scheme!r}")
            _, private_key = module.keygen(key_bits)
        else:
            private_key = keys[1]
        peer_bytes = session.exchange(session.peers[0], key_to_bytes(private_key.public_key), "hybrid-key")
        if not isinstance(peer_bytes, bytes):
            raise KeyValidationError("the peer did not send a public key")
        peer_key = key_from_bytes(peer_bytes)
        if not isinstance(peer_key, AHEPublicKey):
            raise KeyValidationError("the peer sent something other than a public key")
        if peer_key.scheme != private_key.public_key.scheme:
            raise KeyValidationError(f"schemes differ: this party uses {private_key.public_key.scheme}, "
                                     f"the peer {peer_key.scheme}")
        return cls(session, private_key, peer_key, **options)

    # -- sharing (share and reveal are the additive engine's) ---------------------------------------
    def reveal_integer(self, x: IntegerShares, to: int | None = None, tag: str = "reveal-int") -> np.ndarray | None:
        """Open exact integer shares (decoded: int or float at the shares' scale)."""
        mine = ints_to_bytes(x.values.ravel().tolist())
        if to is None or to != self.me:
            self.session.send(self.peer, mine, tag)
        if to is not None and to != self.me:
            return None
        theirs = ints_from_bytes(self.session.recv_bytes(self.peer, tag))
        if len(theirs) != x.size:
            raise ValueError(f"{self.peer!r} revealed {len(theirs)} integers, expected {x.size}")
        total = np.array([a + b for a, b in zip(x.values.ravel().tolist(), theirs)], dtype=object).reshape(x.shape)
        if x.frac_bits:
            return np.array([v / (1 << x.frac_bits) for v in total.ravel().tolist()]).reshape(x.shape)
        return total

    # -- arithmetic -----------------------------------------------------------------------------
    def truncate(self, x: SharedArray, bits: int) -> SharedArray:
        """Local probabilistic truncation (SecureML; :mod:`shaper.protocols.additive.shares` has the
        error rate)."""
        return SharedArray(self, truncate_share(x.share, bits, self.me), x.frac_bits - bits)

    def _elementwise_triples(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        missing = count - self.triples.available
        if missing > 0:
            self.triples.add(*self.triple_source.elementwise(self, missing))
        return self.triples.take(count)

    def _matrix_triple(self, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.triples.available_matrix(m, k, n) == 0:
            self.triples.add_matrix(*self.triple_source.matrix(self, m, k, n))
        return self.triples.take_matrix(m, k, n)

    def generate_triples(self, count: int, **options: Any) -> None:
        """Offline phase: add ``count`` element-wise triples to the store with TriGen (whatever
        the on-demand source is)."""
        self.triples.add(*TriGen(**options).elementwise(self, count))

    # -- the HE boundary ------------------------------------------------------------------------
    def h2s(self, enc: EncryptedArray | None = None, *, holder: int, **options: Any) -> SharedArray | IntegerShares:
        return h2s(self, enc, holder=holder, **options)

    def s2h(self, x: SharedArray | IntegerShares, *, key_owner: int, **options: Any) -> EncryptedArray | None:
        return s2h(self, x, key_owner=key_owner, **options)

    def sparse_matvec(self, matrix: Any, y: SharedArray, *, owner: int, **options: Any) -> SharedArray:
        return sparse_matvec(self, matrix, y, owner=owner, **options)

    def sparse_matvec_encrypted(self, matrix: Any, enc: EncryptedArray | None, *, owner: int,
                                **options: Any) -> SharedArray:
        return sparse_matvec_encrypted(self, matrix, enc, owner=owner, **options)

