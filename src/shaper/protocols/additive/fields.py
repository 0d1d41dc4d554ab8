"""The additive engine's share domains beyond Z_2^64: prime fields and RNS bases, and Z_2 bit-sliced
(the share classes are in :mod:`shaper.protocols.api`; the arithmetic mod q in
:mod:`shaper.kernels.modq`).

* :class:`ModShares` — additive shares over a basis of odd moduli q_c < 2^62 (one prime field
  when the basis has one modulus; Z_3 is the basis (3,); an RNS basis of a CKKS key is many):
  a uint64 array (..., L), column c reduced mod q_c, x = sum of the parties' shares mod q_c.
* :class:`XorShares` — XOR shares of bits, bit-sliced: a uint64 array (..., W), 64 bits per word
  (bit j of an array of N bits is bit j % 64 of word j // 64; padding bits are garbage and
  ignored), x = XOR of the parties' shares.

Operations (methods of :class:`FieldOps`, mixed into the engine; the share classes forward their
operators to them):

==================  ===========================================================================
input               the owner draws n - 1 uniform shares (rejection sampling, no modulus bias)
                    and sends one to each party: one message per party
reveal              to one party or to all (broadcast and sum): one round
add, sub, neg,      local
public constants
mul                 Beaver triples of the same basis (one round: open x - a, y - b)
matmul              one modulus: Beaver matrix triples
and (bits)          Beaver bit triples (one round); XOR and NOT are local
==================  ===========================================================================

Bit triples are consumed from a pool that :meth:`FieldOps.reserve_bit_triples` fills in one
batch, so a circuit of many AND layers costs one preprocessing exchange instead of one per
layer. Security: semi-honest, any n - 1 parties colluding; a party learns only the openings
(uniform, masked by single-use triples) and what is revealed to it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ...errors import FrameError
from ...kernels import modq
from ...kernels.modq import add_mod, basis, lift_public, moduli_array, mul_mod, pack_bits, sub_mod, unpack_bits
from ..api import ModShares, XorShares, public_mask

__all__ = ["FieldOps", "sum_residues", "uniform_residues"]


def uniform_residues(prg: Any, shape: int | tuple[int, ...], mods: Sequence[int]) -> np.ndarray:
    """Uniform residues (..., L) from ``prg``, each limb by rejection sampling (no modulus bias)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    count = int(np.prod(shape))
    cols = [prg.below(q, count) for q in mods]
    return np.stack(cols, axis=-1).reshape(shape + (len(mods),))


def sum_residues(session: Any, share: np.ndarray, mods: Sequence[int], tag: str, where: str) -> np.ndarray:
    """This party's residues plus every peer's under ``tag``, each peer's checked to be reduced
    (a :class:`~shaper.errors.FrameError` naming the peer and ``where`` otherwise)."""
    qs = moduli_array(mods)
    total = share.copy()
    for peer in session.peers:
        got = session.recv_array(peer, tag, dtype=np.uint64, shape=share.shape)
        if np.any(got >= qs):
            raise FrameError(f"party {peer!r} sent residues out of range {where}")
        total = add_mod(total, got, qs)
    return total


class FieldOps:
    """The prime-field / RNS and bit-sliced operations of an n-party additive engine (mixed into
    :class:`~shaper.protocols.additive.AdditiveEngine`; needs ``session``, ``me``, ``parties``,
    ``prg``, ``triple_source`` and ``_tag``)."""

    session: Any
    me: int
    parties: int
    prg: Any
    triple_source: Any
    _tag: Callable[[str], str]  # the engine's message tags

    # -- prime fields and RNS -----------------------------------------------------------------------
    def share_mod(self, values: Any, *, owner: int, moduli: int | Sequence[int]) -> ModShares:
        """Secret-share the owner's integers (any sign; reduced into every modulus)."""
        mods = basis(moduli)
        tag = self._tag("share-mod")
        if self.me == owner:
            v = lift_public(values, mods)
            mine, qs = v.copy(), moduli_array(mods)
            for peer in range(self.parties):
                if peer != owner:
                    r = self.uniform_mod(v.shape[:-1], mods)
                    self.session.send(peer, r, tag)
                    mine = sub_mod(mine, r, qs)
            return ModShares(self, mine, mods)
        got = self.session.recv_array(owner, tag, dtype=np.uint64)
        if got.ndim == 0 or got.shape[-1] != len(mods) or np.any(got >= moduli_array(mods)):
            raise FrameError(f"party {self.session.parties[owner]!r} sent shares that do not fit the basis {mods}")
        return ModShares(self, got, mods)

    def uniform_mod(self, shape: int | tuple[int, ...], mods: Sequence[int]) -> np.ndarray:
        """This party's uniform residues (..., L), each limb by rejection sampling."""
        return uniform_residues(self.prg, shape, mods)

    def random_mod(self, shape: int | tuple[int, ...], moduli: int | Sequence[int]) -> ModShares:
        """Shares of uniform elements: each party draws its share uniformly (no interaction)."""
        mods = basis(moduli)
        return ModShares(self, self.uniform_mod(shape, mods), mods)

    def _sum_mod(self, share: np.ndarray, mods: Sequence[int], tag: str) -> np.ndarray:
        """This party's share plus every peer's (checked to be reduced) under ``tag``."""
        return sum_residues(self.session, share, mods, tag, f"under {tag!r}")

    def _open_mod(self, share: np.ndarray, mods: Sequence[int], tag: str) -> np.ndarray:
        self.session.broadcast(share, tag)
        return self._sum_mod(share, mods, tag)

    def reveal_mod(self, x: ModShares, to: int | None = None) -> np.ndarray | None:
        """The residues (..., L) at ``to`` (None: every party)."""
        tag = self._tag("reveal-mod")
        if to is None:
            return self._open_mod(x.share, x.moduli, tag)
        if to != self.me:
            self.session.send(to, x.share, tag)
            return None
        return self._sum_mod(x.share, x.moduli, tag)

    def add_public_mod(self, x: ModShares, values: Any) -> ModShares:
        if self.me != 0:
            return ModShares(self, np.broadcast_to(x.share, np.broadcast_shapes(
                x.share.shape, lift_public(values, x.moduli).shape)).copy(), x.moduli)
        return ModShares(self, add_mod(x.share, lift_public(values, x.moduli), moduli_array(x.moduli)), x.moduli)

    def mul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        """Element-wise product with Beaver triples of the basis (one round)."""
        x._same(y)
        mods, qs = x.moduli, moduli_array(x.moduli)
        shape = np.broadcast_shapes(x.share.shape, y.share.shape)
        xs, ys = (np.broadcast_to(v.share, shape) for v in (x, y))
        count = int(np.prod(shape[:-1]))
        a, b, c = (t.reshape(shape) for t in self.triple_source.mod_triples(self, count, mods))
        opened = self._open_mod(np.stack([sub_mod(xs, a, qs), sub_mod(ys, b, qs)]), mods, self._tag("beaver-mod"))
        e, f = opened[0], opened[1]
        z = add_mod(c, add_mod(mul_mod(e, b, mods), mul_mod(a, f, mods), qs), qs)
        if self.me == 0:
            z = add_mod(z, mul_mod(e, f, mods), qs)
        return ModShares(self, z, mods)

    def matmul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        """(m, k) @ (k, n) over one modulus, with a Beaver matrix triple (one round)."""
        x._same(y)
        if len(x.moduli) != 1 or len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0]:
            raise ValueError(f"matmul_mod needs (m, k) @ (k, n) over one modulus, got {x.shape} @ {y.shape} "
                             f"over {len(x.moduli)} moduli")
        (q,), qs = x.moduli, moduli_array(x.moduli)
        (m, k), n = x.shape, y.shape[1]
        a, b, c = self.triple_source.mod_matrix(self, m, k, n, q)
        flat = np.concatenate([sub_mod(x.share[..., 0], a, qs[0]).ravel(), sub_mod(y.share[..., 0], b, qs[0]).ravel()])
        opened = self._open_mod(flat[:, None], x.moduli, self._tag("beaver-mm-mod"))[:, 0]
        e, f = opened[:m * k].reshape(m, k), opened[m * k:].reshape(k, n)
        z = add_mod(c, add_mod(modq.matmul_mod(e, b, q), modq.matmul_mod(a, f, q), qs[0]), qs[0])
        if self.me == 0:
            z = add_mod(z, modq.matmul_mod(e, f, q), qs[0])
        return ModShares(self, z[..., None], x.moduli)

    # -- bits -------------------------------------------------------------------------------------
    def share_bits(self, bits: Any, *, owner: int) -> XorShares:
        """Secret-share the owner's bool array (..., N): one message per other party."""
        tag = self._tag("share-bits")
        if self.me == owner:
            arr = np.asarray(bits)
            words = pack_bits(arr)
            mine = words.copy()
            for peer in range(self.parties):
                if peer != owner:
                    r = self.prg.uint64(words.shape)
                    self.session.send(peer, int(arr.shape[-1]), tag + "n")
                    self.session.send(peer, r, tag)
                    mine ^= r
            return XorShares(self, mine, arr.shape[-1])
        n = self.session.recv_meta(owner, tag + "n")
        got = self.session.recv_array(owner, tag, dtype=np.uint64)
        if not isinstance(n, int) or n < 1 or got.ndim < 1 or got.shape[-1] != (n + 63) // 64:
            raise FrameError(f"party {self.session.parties[owner]!r} sent malformed bit shares under {tag!r}")
        return XorShares(self, got, n)

    def private_bits(self, words: np.ndarray | None, *, owner: int, shape: tuple[int, ...], bits: int) -> XorShares:
        """Bits the owner knows as shares without interaction: the owner's share is its words,
        every other party's is zero (an input no one else needs to mask)."""
        if self.me == owner:
            w = np.asarray(words, dtype=np.uint64)
            if w.shape != shape:
                raise ValueError(f"private bits of shape {w.shape}, expected {shape}")
            return XorShares(self, w.copy(), bits)
        return XorShares(self, np.zeros(shape, np.uint64), bits)

    def random_bits(self, shape: tuple[int, ...], bits: int) -> XorShares:
        """Shares of uniform bits: each party's share uniform (no interaction)."""
        return XorShares(self, self.prg.uint64(tuple(shape) + ((bits + 63) // 64,)), bits)

    def xor_public_bits(self, x: XorShares, value: Any) -> XorShares:
        if self.me != 0:
            return XorShares(self, x.words.copy(), x.bits)
        return XorShares(self, x.words ^ public_mask(value), x.bits)

    def _xor_bits(self, words: np.ndarray, tag: str) -> np.ndarray:
        """This party's words XOR every peer's under ``tag``."""
        total = words.copy()
        for peer in self.session.peers:
            total ^= self.session.recv_array(peer, tag, dtype=np.uint64, shape=words.shape)
        return total

    def _open_bits(self, words: np.ndarray, tag: str) -> np.ndarray:
        self.session.broadcast(words, tag)
        return self._xor_bits(words, tag)

    def reveal_bits(self, x: XorShares, to: int | None = None) -> np.ndarray | None:
        """The bits (bool (..., N)) at ``to`` (None: every party)."""
        tag = self._tag("reveal-bits")
        if to is None:
            return unpack_bits(self._open_bits(x.words, tag), x.bits)
        if to != self.me:
            self.session.send(to, x.words, tag)
            return None
        return unpack_bits(self._xor_bits(x.words, tag), x.bits)

    def reserve_bit_triples(self, words: int) -> None:
        """Make ``words`` x 64 bit triples now, in one batch (an AND layer then takes from the
        pool without a preprocessing exchange of its own)."""
        pool = getattr(self, "_bit_pool", None)
        have = 0 if pool is None else len(pool[0]) - self._bit_pos
        if have >= words:
            return
        fresh = self.triple_source.bit_triples(self, int(words - have))
        if have:
            fresh = tuple(np.concatenate([p[self._bit_pos:], f]) for p, f in zip(pool, fresh))
        self._bit_pool, self._bit_pos = fresh, 0

    def _take_bit_triples(self, words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.reserve_bit_triples(words)
        lo, self._bit_pos = self._bit_pos, self._bit_pos + words
        return tuple(t[lo:self._bit_pos] for t in self._bit_pool)  # type: ignore[return-value]

    def and_bits(self, x: XorShares, y: XorShares) -> XorShares:
        """x AND y (bit-wise, any matching shapes) with Beaver bit triples: one round."""
        shape = np.broadcast_shapes(x.words.shape, y.words.shape)
        xs = np.broadcast_to(x.words, shape).ravel()
        ys = np.broadcast_to(y.words, shape).ravel()
        a, b, c = self._take_bit_triples(len(xs))
        opened = self._open_bits(np.concatenate([xs ^ a, ys ^ b]), self._tag("and"))
        e, f = opened[:len(xs)], opened[len(xs):]
        z = c ^ (e & b) ^ (a & f)
        if self.me == 0:
            z ^= e & f
        return XorShares(self, z.reshape(shape), max(x.bits, y.bits))
