"""The additive engine: sharing among any n >= 2 parties over Z_2^64, prime fields / RNS bases
and Z_2, with Beaver multiplication (GMPFHE's MPC engine; SHAPER's two-party engine is this one
plus the Paillier boundary, :class:`~shaper.protocols.hybrid.Hybrid2PC`).

x = x_0 + x_1 + ... + x_{n-1} mod 2^64; each party holds one uint64 array per value. The same
engine holds shares over odd moduli and bit-sliced XOR shares (:mod:`.fields`), converts
between them (:mod:`.convert`) and samples (:mod:`.sampling`); with
:class:`~shaper.protocols.triples.OtTriples` every triple is made by the parties themselves
with OT extension (:mod:`shaper.protocols.ot`). Written once for the ring and the fields, as
MP-SPDZ writes ``SemiShare`` once for both.

* **share** (owner o): o draws n-1 uniform shares from its CSPRNG, sends one to each other party
  and keeps v minus their sum. One message to each party, 8 bytes per element.
* **reveal** to one party (the others send their shares) or to all (everyone broadcasts).
* **mul / matmul**: Beaver with a fresh (matrix) triple. Every party broadcasts its shares of
  e = x - a and f = y - b, all sum them, then z = c + e b + a f, with e f added by party 0.
  One round; (n - 1) (|e| + |f|) x 8 bytes sent per party.
* **truncate** by d bits: a fresh pair (r uniform in Z_2^64, r' = r >> d arithmetic) from the
  triple source. The parties open c = x + r and take floor(c / 2^d) (signed) at party 0, minus
  r'. The result is floor(x / 2^d) or one more, unless x + r crosses the signed wrap-around:
  probability about 2^(l + 1 - 64) for |x| < 2^l (2^-23 for a 40-bit product at scale 2^32).
  SecureML's local truncation works only for two parties.

What each party learns: the opened values e, f (uniform, because a and b are), c = x + r
(uniform), and what is revealed to it. Security model: semi-honest, any n - 1 parties may
collude (dishonest majority); a triple or truncation pair must never be used twice, since a
reused one reveals differences of secrets. Preprocessing comes from a
:class:`~shaper.protocols.triples.TripleSource`: :class:`~shaper.protocols.triples.OtTriples`
(OT extension among the parties) or the insecure test dealer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...crypto import encoding
from ...errors import ConfigError, FrameError
from ...kernels.modq import basis
from ..api import ModShares, Shared, XorShares
from . import convert, sampling
from .fields import FieldOps
from .shares import AdditiveSharing, SharedArray

__all__ = ["AdditiveEngine"]


class AdditiveEngine(FieldOps, AdditiveSharing):
    """One party's side of n-party additive sharing (see the module notes). ``triple_source``
    is a :class:`~shaper.protocols.triples.TripleSource` (OT extension, the test dealer, ...)."""

    conversions: ClassVar[frozenset[str]] = frozenset()
    domains: ClassVar[frozenset[str]] = frozenset({"ring", "mod", "bits"})

    def __init__(self, session: Any, *, triple_source: Any, frac_bits: int = 16) -> None:
        if session.n < 2:
            raise ConfigError(f"{type(self).__name__} needs at least two parties, the session has {session.n}")
        self.session = session
        self.me = session.index
        self.parties = session.n
        self.frac_bits = frac_bits
        self.triple_source = triple_source
        self.prg = session.prg
        self._step = 0

    def _tag(self, what: str) -> str:
        self._step += 1
        return f"npc-{what}-{self._step}"

    def _check(self, arr: Any, shape: tuple, frm: str, tag: str) -> np.ndarray:
        if not isinstance(arr, np.ndarray) or arr.shape != shape or arr.dtype != np.uint64:
            got = getattr(arr, "shape", type(arr).__name__)
            raise FrameError(f"party {frm!r} sent {got} under {tag!r}; expected uint64 of shape {shape}")
        return arr

    # -- sharing ------------------------------------------------------------------------------
    def share(self, values: Any, *, owner: int, frac_bits: int | None = None) -> SharedArray:
        f = self.frac_bits if frac_bits is None else frac_bits
        tag = self._tag("share")
        if self.me == owner:
            v = encoding.ring_encode(values, f)
            mine = v.copy()
            for peer in range(self.parties):
                if peer != owner:
                    r = self.prg.uint64(v.shape)
                    self.session.send(peer, r, tag)
                    mine -= r
            return SharedArray(self, mine, f)
        return SharedArray(self, self.session.recv_array(owner, tag, dtype=np.uint64), f)

    def _open(self, shares: np.ndarray, tag: str) -> np.ndarray:
        """Sum of every party's ``shares`` (uint64), at every party."""
        self.session.broadcast(shares, tag)
        total = shares.copy()
        for peer in self.session.peers:
            total += self._check(self.session.recv(peer, tag), shares.shape, peer, tag)
        return total

    def reveal_ring(self, x: Shared, to: int | None = None, **options: Any) -> np.ndarray | None:
        assert isinstance(x, SharedArray)
        tag = self._tag("reveal")
        if to is None:
            return self._open(x.share, tag)
        if to != self.me:
            self.session.send(to, x.share, tag)
            return None
        total = x.share.copy()
        for peer in self.session.peers:
            total += self._check(self.session.recv(peer, tag), x.shape, peer, tag)
        return total

    # -- arithmetic -----------------------------------------------------------------------------
    def mul(self, x: SharedArray, y: SharedArray, *, truncate: bool = True) -> SharedArray:
        shape = np.broadcast_shapes(x.shape, y.shape)
        xs, ys = (np.ascontiguousarray(np.broadcast_to(v.share, shape)) for v in (x, y))
        count = int(np.prod(shape))
        a, b, c = (t.reshape(shape) for t in self._elementwise_triples(count))
        opened = self._open(np.stack([xs - a, ys - b]), self._tag("beaver"))
        e, f = opened[0], opened[1]
        z = c + e * b + a * f
        if self.me == 0:
            z += e * f
        out = SharedArray(self, z, x.frac_bits + y.frac_bits)
        return self.truncate(out, y.frac_bits) if truncate and y.frac_bits else out

    def matmul(self, x: SharedArray, y: SharedArray, *, truncate: bool = True) -> SharedArray:
        m, k, n = self.check_matmul(x, y)
        a, b, c = self._matrix_triple(m, k, n)
        flat = np.concatenate([(x.share - a).ravel(), (y.share - b).ravel()])
        opened = self._open(flat, self._tag("beaver-mm"))
        e, f = opened[:m * k].reshape(m, k), opened[m * k:].reshape(k, n)
        z = c + np.matmul(e, b) + np.matmul(a, f)
        if self.me == 0:
            z += np.matmul(e, f)
        out = SharedArray(self, z, x.frac_bits + y.frac_bits)
        return self.truncate(out, y.frac_bits) if truncate and y.frac_bits else out

    def ot_links(self) -> Any:
        """The correlated-OT links of the conversions and samplers (the triple source's)."""
        return self.triple_source.links(self)

    def _elementwise_triples(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` fresh Beaver triples over Z_2^64 (an engine with a store takes them from it)."""
        return self.triple_source.elementwise(self, count)

    def _matrix_triple(self, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A fresh (m, k) x (k, n) matrix triple over Z_2^64."""
        return self.triple_source.matrix(self, m, k, n)

    def truncate(self, x: SharedArray, bits: int) -> SharedArray:
        if bits == 0:
            return x
        if not 0 < bits < 64:
            raise ValueError(f"truncation bits must be in 1..63, got {bits}")
        r, r_shift = (t.reshape(x.shape) for t in self.triple_source.truncation_pairs(self, x.size, bits))
        c = self._open(x.share + r, self._tag("trunc"))
        share = np.uint64(0) - r_shift
        if self.me == 0:
            share += (c.view(np.int64) >> np.int64(bits)).view(np.uint64)
        return SharedArray(self, share, x.frac_bits - bits)

    # -- conversions and sampling (see :mod:`.convert`, :mod:`.sampling`) ---------------------------
    def bits_to_mod(self, x: XorShares, moduli: Any) -> ModShares:
        """Z_2 -> Z_q for every modulus of the basis at once."""
        return convert.bits_to_mod(self, x, moduli)

    def trits_to_mod(self, t: ModShares, moduli: Any, *, balanced: bool = True) -> ModShares:
        """Z_3 -> Z_q ({0, 1, 2} read as {0, 1, -1} when ``balanced``)."""
        return convert.trits_to_mod(self, t, moduli, balanced=balanced)

    def mod_to_bits(self, x: ModShares) -> XorShares:
        """Z_q -> Z_2: bit planes (bitlen(q), ...) of the residue."""
        return convert.mod_to_bits(self, x)

    def dabits(self, count: int, moduli: Any) -> tuple[XorShares, ModShares]:
        """Random bits shared in Z_2 and in every modulus (daBits)."""
        r = self.random_bits((), count)
        return r, convert.bits_to_mod(self, r, moduli)

    def edabits(self, count: int, bits: int, moduli: Any) -> tuple[XorShares, ModShares]:
        """Random r < 2^bits as bit planes (bits, ...) and as shares over the basis (edaBits)."""
        r = self.random_bits((bits,), count)
        planes = convert.bits_to_mod(self, r, moduli)
        total = planes[0]
        for j in range(1, bits):
            total = total + planes[j] * (1 << j)
        return r, total

    def powers(self, count: int, moduli: Any, degree: int = 4) -> list[ModShares]:
        """Random power tuples: shares of a, a^2, ..., a^degree over the basis, a uniform (per
        limb) and unknown to every party (see :meth:`OtTriples.powers`)."""
        mods = basis(moduli)
        shares = self.triple_source.powers(self, count, mods, degree)
        return [ModShares(self, shares[e], mods) for e in range(degree)]

    def square_pairs(self, count: int, moduli: Any) -> tuple[ModShares, ModShares]:
        """Random (a, a^2) over the basis: half the OTs of a triple."""
        a, a2 = self.powers(count, moduli, 2)
        return a, a2

    def uniform(self, shape: Any, moduli: Any) -> ModShares:
        return sampling.uniform(self, shape, moduli)

    def ternary(self, shape: Any, moduli: Any) -> ModShares:
        return sampling.ternary(self, shape, moduli)

    def gaussian(self, count: int, moduli: Any, **kw: Any) -> ModShares:
        return sampling.gaussian(self, count, moduli, **kw)
