"""Share domains of the n-party engine beyond Z_2^64: prime fields and RNS bases, and Z_2 bit-sliced.

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

from ...errors import ConfigError, FrameError

__all__ = ["FieldOps", "ModShares", "Ring", "XorShares", "basis", "lift_public"]


def basis(moduli: int | Sequence[int]) -> tuple[int, ...]:
    """A checked basis: odd moduli 3 <= q < 2^62, distinct."""
    mods = (int(moduli),) if isinstance(moduli, (int, np.integer)) else tuple(int(q) for q in moduli)
    if not mods:
        raise ConfigError("a basis needs at least one modulus")
    for q in mods:
        if q < 3 or q % 2 == 0 or q >= 1 << 62:
            raise ConfigError(f"modulus {q} must be odd, at least 3 and below 2^62 (Z_2: use bit shares; "
                              "Z_2^64: the engine's ring shares)")
    if len(set(mods)) != len(mods):
        raise ConfigError(f"the basis repeats a modulus: {mods}")
    return mods


def _qs(mods: Sequence[int]) -> np.ndarray:
    return np.asarray(mods, dtype=np.uint64)


def lift_public(values: Any, mods: Sequence[int]) -> np.ndarray:
    """Public integers (Python ints or an integer array, any sign) reduced into every modulus:
    uint64 (..., L)."""
    if isinstance(values, (int, np.integer)):
        return np.array([int(values) % q for q in mods], dtype=np.uint64)
    arr = np.asarray(values)
    if arr.dtype == object:
        flat = [[int(v) % q for q in mods] for v in arr.ravel()]
        return np.array(flat, dtype=np.uint64).reshape(arr.shape + (len(mods),))
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)[..., None] % _qs(mods)
    if arr.dtype.kind in "ib":
        signed = arr.astype(np.int64)[..., None]
        return (signed % np.asarray(mods, dtype=np.int64)).astype(np.uint64)
    raise TypeError(f"public values for a prime-field basis must be integers, got dtype {arr.dtype}")


def add_mod(x: np.ndarray, y: np.ndarray, qs: np.ndarray) -> np.ndarray:
    s = np.asarray(x + y)  # both < q < 2^62: no wrap
    # s - q wraps to above 2^63 exactly when s < q, so the minimum is the reduced sum
    return np.minimum(s, s - qs, out=s)


def sub_mod(x: np.ndarray, y: np.ndarray, qs: np.ndarray) -> np.ndarray:
    d = np.asarray(x - y)  # wraps to above 2^63 exactly when x < y; then d + q wraps back below q
    return np.minimum(d, d + qs, out=d)


def neg_mod(x: np.ndarray, qs: np.ndarray) -> np.ndarray:
    return np.where(x == 0, x, qs - x)


class Ring:
    """Add / subtract / negate residues uint64 (..., L) over a basis in which modulus 0 means
    2^64 (wrapping uint64 arithmetic); odd moduli use :func:`add_mod` and :func:`neg_mod`."""

    def __init__(self, moduli: Sequence[int]) -> None:
        self.moduli = list(moduli)
        self.wrap = all(q == 0 for q in self.moduli)
        if not self.wrap and any(q == 0 for q in self.moduli):
            raise ValueError("a basis cannot mix 2^64 with odd moduli")
        self.qs = np.asarray(self.moduli, dtype=np.uint64)

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x + y if self.wrap else add_mod(x, y, self.qs)

    def neg(self, x: np.ndarray) -> np.ndarray:
        return np.uint64(0) - x if self.wrap else neg_mod(x, self.qs)

    def sub(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.add(x, self.neg(y))

    def double(self, x: np.ndarray) -> np.ndarray:
        return self.add(x, x)

    def scale(self, x: np.ndarray, c: int) -> np.ndarray:
        """x times the public integer c (any sign), in one pass (native Montgomery for odd moduli)."""
        if self.wrap:
            return x * np.uint64(c % (1 << 64))
        return mul_mod(x, np.asarray([c % q for q in self.moduli], dtype=np.uint64), self.moduli)

    def lift_bits(self, bits: np.ndarray) -> np.ndarray:
        """0/1 values (...,) as residues (..., L)."""
        return np.broadcast_to(bits.astype(np.uint64)[..., None], bits.shape + (len(self.moduli),)).copy()


def mul_mod(x: np.ndarray, y: np.ndarray, mods: Sequence[int]) -> np.ndarray:
    """x * y element-wise mod the basis (native Montgomery kernel; Python integers, exact and
    slow, where the extension is not built)."""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    L = len(mods)
    a = np.ascontiguousarray(np.broadcast_to(x, shape), dtype=np.uint64).reshape(-1, L)
    b = np.ascontiguousarray(np.broadcast_to(y, shape), dtype=np.uint64).reshape(-1, L)
    try:
        from ... import _native
    except ImportError:
        prod = a.astype(object) * b.astype(object) % np.asarray(mods, dtype=object)
        return prod.astype(np.uint64).reshape(shape)
    return _native.mod_mul(a, b, _qs(mods)).reshape(shape)


class ModShares:
    """This party's additive shares over a basis of moduli: uint64 (..., L)."""

    __slots__ = ("engine", "moduli", "share")
    __array_ufunc__ = None

    def __init__(self, engine: Any, share: np.ndarray, moduli: Sequence[int]) -> None:
        self.engine = engine
        self.share = np.asarray(share, dtype=np.uint64)
        self.moduli = tuple(moduli)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.share.shape[:-1]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> "ModShares":
        idx = index if isinstance(index, tuple) else (index,)
        return ModShares(self.engine, self.share[idx + (Ellipsis,)] if Ellipsis not in idx else self.share[idx],
                         self.moduli)

    def reshape(self, *shape: Any) -> "ModShares":
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return ModShares(self.engine, self.share.reshape(tuple(dims) + (len(self.moduli),)), self.moduli)

    def limb(self, c: int) -> "ModShares":
        """The shares of limb c alone (a one-modulus basis)."""
        return ModShares(self.engine, self.share[..., c:c + 1], (self.moduli[c],))

    def _same(self, other: "ModShares") -> None:
        if other.moduli != self.moduli:
            raise ConfigError(f"shares over different bases: {self.moduli} and {other.moduli}")

    def __add__(self, other: Any) -> "ModShares":
        qs = _qs(self.moduli)
        if isinstance(other, ModShares):
            self._same(other)
            return ModShares(self.engine, add_mod(self.share, other.share, qs), self.moduli)
        return self.engine.add_public_mod(self, other)

    __radd__ = __add__

    def __neg__(self) -> "ModShares":
        return ModShares(self.engine, neg_mod(self.share, _qs(self.moduli)), self.moduli)

    def __sub__(self, other: Any) -> "ModShares":
        return self + (-other if isinstance(other, ModShares) else _negate_public(other))

    def __rsub__(self, other: Any) -> "ModShares":
        return (-self) + other

    def __mul__(self, other: Any) -> "ModShares":
        if isinstance(other, ModShares):
            return self.engine.mul_mod(self, other)
        lifted = lift_public(other, self.moduli)
        return ModShares(self.engine, mul_mod(self.share, lifted, self.moduli), self.moduli)

    __rmul__ = __mul__

    def __matmul__(self, other: "ModShares") -> "ModShares":
        return self.engine.matmul_mod(self, other)

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        return self.engine.reveal_mod(self, to)

    def __repr__(self) -> str:
        return f"ModShares(shape={self.shape}, moduli={self.moduli})"


def _negate_public(value: Any) -> Any:
    if isinstance(value, (int, np.integer)):
        return -int(value)
    arr = np.asarray(value)
    return -arr.astype(object) if arr.dtype.kind == "u" else -arr


class XorShares:
    """This party's XOR shares of bit arrays, bit-sliced: uint64 words (..., W) holding ``bits``
    bits along the last axis."""

    __slots__ = ("bits", "engine", "words")
    __array_ufunc__ = None

    def __init__(self, engine: Any, words: np.ndarray, bits: int) -> None:
        self.engine = engine
        self.words = np.asarray(words, dtype=np.uint64)
        self.bits = int(bits)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.words.shape[:-1] + (self.bits,)

    def __getitem__(self, index: Any) -> "XorShares":
        """Index the leading (non-bit) axes: a row of a bit-plane stack."""
        return XorShares(self.engine, self.words[index], self.bits)

    def _like(self, words: np.ndarray) -> "XorShares":
        return XorShares(self.engine, words, self.bits)

    def __xor__(self, other: Any) -> "XorShares":
        if isinstance(other, XorShares):
            return self._like(self.words ^ other.words)
        return self.engine.xor_public_bits(self, other)

    __rxor__ = __xor__

    def __invert__(self) -> "XorShares":
        return self.engine.xor_public_bits(self, True)

    def __and__(self, other: Any) -> "XorShares":
        if isinstance(other, XorShares):
            return self.engine.and_bits(self, other)
        return self._like(self.words & _public_mask(other))

    __rand__ = __and__

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        return self.engine.reveal_bits(self, to)

    def __repr__(self) -> str:
        return f"XorShares(shape={self.shape})"


def _public_mask(value: Any) -> np.ndarray | np.uint64:
    """A public bit (all lanes) or packed words, as words to AND/XOR with."""
    if isinstance(value, (bool, np.bool_, int, np.integer)) and not isinstance(value, np.ndarray):
        if int(value) not in (0, 1):
            raise ValueError(f"a public bit must be 0 or 1, got {value}")
        return np.uint64(0xFFFFFFFFFFFFFFFF if value else 0)
    return np.asarray(value, dtype=np.uint64)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """A bool/0-1 array (..., N) as words (..., ceil(N / 64)) (bit j -> word j // 64, bit j % 64)."""
    arr = np.asarray(bits).astype(bool)
    n = arr.shape[-1]
    pad = (-n) % 64
    if pad:
        arr = np.concatenate([arr, np.zeros(arr.shape[:-1] + (pad,), bool)], axis=-1)
    packed = np.packbits(arr, axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view(np.uint64).reshape(arr.shape[:-1] + ((n + pad) // 64,))


def unpack_bits(words: np.ndarray, n: int) -> np.ndarray:
    """The first n bits of words (..., W) as a bool array (..., n)."""
    w = np.ascontiguousarray(words, dtype=np.uint64)
    raw = np.unpackbits(w.view(np.uint8).reshape(w.shape[:-1] + (8 * w.shape[-1],)), axis=-1, bitorder="little")
    return raw[..., :n].astype(bool)


class FieldOps:
    """The prime-field / RNS and bit-sliced operations of an n-party additive engine (mixed into
    :class:`~shaper.protocols.nparty.AdditiveNPC`; needs ``session``, ``me``, ``parties``,
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
            mine, qs = v.copy(), _qs(mods)
            for peer in range(self.parties):
                if peer != owner:
                    r = self.uniform_mod(v.shape[:-1], mods)
                    self.session.send(peer, r, tag)
                    mine = sub_mod(mine, r, qs)
            return ModShares(self, mine, mods)
        got = self.session.recv_array(owner, tag, dtype=np.uint64)
        if got.ndim == 0 or got.shape[-1] != len(mods) or np.any(got >= _qs(mods)):
            raise FrameError(f"party {self.session.parties[owner]!r} sent shares that do not fit the basis {mods}")
        return ModShares(self, got, mods)

    def uniform_mod(self, shape: int | tuple[int, ...], mods: Sequence[int]) -> np.ndarray:
        """This party's uniform residues (..., L), each limb by rejection sampling."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        count = int(np.prod(shape))
        cols = [self.prg.below(q, count) for q in mods]
        return np.stack(cols, axis=-1).reshape(shape + (len(mods),))

    def random_mod(self, shape: int | tuple[int, ...], moduli: int | Sequence[int]) -> ModShares:
        """Shares of uniform elements: each party draws its share uniformly (no interaction)."""
        mods = basis(moduli)
        return ModShares(self, self.uniform_mod(shape, mods), mods)

    def _sum_mod(self, share: np.ndarray, mods: Sequence[int], tag: str) -> np.ndarray:
        """This party's share plus every peer's (checked to be reduced) under ``tag``."""
        qs = _qs(mods)
        total = share.copy()
        for peer in self.session.peers:
            got = self.session.recv_array(peer, tag, dtype=np.uint64, shape=share.shape)
            if np.any(got >= qs):
                raise FrameError(f"party {peer!r} sent residues out of range under {tag!r}")
            total = add_mod(total, got, qs)
        return total

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
        return ModShares(self, add_mod(x.share, lift_public(values, x.moduli), _qs(x.moduli)), x.moduli)

    def mul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        """Element-wise product with Beaver triples of the basis (one round)."""
        x._same(y)
        mods, qs = x.moduli, _qs(x.moduli)
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
        from ... import _native

        x._same(y)
        if len(x.moduli) != 1 or len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0]:
            raise ValueError(f"matmul_mod needs (m, k) @ (k, n) over one modulus, got {x.shape} @ {y.shape} "
                             f"over {len(x.moduli)} moduli")
        (q,), qs = x.moduli, _qs(x.moduli)
        (m, k), n = x.shape, y.shape[1]
        a, b, c = self.triple_source.mod_matrix(self, m, k, n, q)
        flat = np.concatenate([sub_mod(x.share[..., 0], a, qs[0]).ravel(), sub_mod(y.share[..., 0], b, qs[0]).ravel()])
        opened = self._open_mod(flat[:, None], x.moduli, self._tag("beaver-mm-mod"))[:, 0]
        e, f = opened[:m * k].reshape(m, k), opened[m * k:].reshape(k, n)
        z = add_mod(c, add_mod(_native.mod_matmul(e, b, q), _native.mod_matmul(a, f, q), qs[0]), qs[0])
        if self.me == 0:
            z = add_mod(z, _native.mod_matmul(e, f, q), qs[0])
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
        return XorShares(self, x.words ^ _public_mask(value), x.bits)

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
