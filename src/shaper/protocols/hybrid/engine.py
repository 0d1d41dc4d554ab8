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

**Keys.** The parties agree on a key size (``key_bits``, at least 2048); each refuses a peer key
of any other size, so a peer cannot downgrade it. Smaller keys (tests, demos on one machine) need
the explicit switch ``insecure_key_bits=True`` or the environment variable
``SHAPER_INSECURE_KEY_BITS=1``. A peer's Paillier key is its modulus: h_s is derived from n, not
taken from the peer (:mod:`shaper.crypto.paillier`); a peer's OU key is checked as far as a
party without the factorisation can (:mod:`shaper.crypto.ou`), and ciphertexts the peer sends
are refused when their Jacobi symbol shows they came from no encryption under its key.
"""

from __future__ import annotations

import os
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

#: The smallest key size accepted without the explicit insecure switch.
SECURE_KEY_BITS = 2048
#: Environment variable that allows smaller keys (tests, local demos): "1" to allow.
INSECURE_KEY_BITS_ENV = "SHAPER_INSECURE_KEY_BITS"


def check_key_bits(bits: int, insecure: bool = False) -> None:
    """Refuse an agreed key size below :data:`SECURE_KEY_BITS` unless ``insecure`` is set or the
    environment says ``SHAPER_INSECURE_KEY_BITS=1``."""
    if bits >= SECURE_KEY_BITS or insecure or os.environ.get(INSECURE_KEY_BITS_ENV) == "1":
        return
    raise ConfigError(f"{bits}-bit keys are below the {SECURE_KEY_BITS} bits needed for real data; for tests "
                      f"and local demos pass insecure_key_bits=True or set {INSECURE_KEY_BITS_ENV}=1")


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
              keys: tuple[AHEPublicKey, AHEPrivateKey] | None = None, insecure_key_bits: bool = False,
              **options: Any) -> "Hybrid2PC":
        """Generate (or use) this party's key pair and swap public keys with the peer.

        ``key_bits`` is the agreed size (with ``keys``, the size of the given key); the peer's
        key must have exactly that size. Below :data:`SECURE_KEY_BITS` (2048) only with
        ``insecure_key_bits=True`` or ``SHAPER_INSECURE_KEY_BITS=1`` in the environment (tests)."""
        agreed = keys[1].public_key.bits if keys is not None else key_bits
        check_key_bits(agreed, insecure_key_bits)
        if keys is None:
            module = {"paillier": paillier, "ou": ou}.get(scheme)
            if module is None:
                raise ConfigError(f"scheme must be 'paillier' or 'ou', got {scheme!r}")
            _, private_key = module.keygen(key_bits)
        else:
            private_key = keys[1]
        peer = session.peers[0]
        peer_bytes = session.exchange(peer, key_to_bytes(private_key.public_key), "hybrid-key")
        if not isinstance(peer_bytes, bytes):
            raise KeyValidationError(f"{peer!r} did not send a public key")
        peer_key = key_from_bytes(peer_bytes)
        if not isinstance(peer_key, AHEPublicKey):
            raise KeyValidationError(f"{peer!r} sent something other than a public key")
        if peer_key.scheme != private_key.public_key.scheme:
            raise KeyValidationError(f"schemes differ: this party uses {private_key.public_key.scheme}, "
                                     f"{peer!r} {peer_key.scheme}")
        if peer_key.bits != agreed:
            raise KeyValidationError(f"{peer!r} sent a {peer_key.bits}-bit {peer_key.scheme} key; the agreed size "
                                     f"is {agreed} bits")
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

    def _aligned_triples(self) -> TripleStore:
        """The store, lined up with the peer's before its first triple: a store reloaded after a
        crash may have skipped (never reused) more triples at one party than at the other, and
        both must take the same ones. One small exchange per store, at its first use, which both
        parties reach at the same step of the protocol."""
        if getattr(self, "_aligned_store", None) is not self.triples:
            self.triples.align(self.session, self.peer)
            self._aligned_store = self.triples
        return self.triples

    def _elementwise_triples(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._aligned_triples()
        missing = count - self.triples.available
        if missing > 0:
            self.triples.add(*self.triple_source.elementwise(self, missing))
        return self.triples.take(count)

    def _matrix_triple(self, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._aligned_triples()
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

