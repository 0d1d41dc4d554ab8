"""Conversions between the share domains of the n-party engine: Z_2 -> Z_q, Z_3 -> Z_q (into
every limb of an RNS basis at once) and Z_q -> Z_2 (bit decomposition).

**Z_2 -> Z_q** (:func:`bits_to_mod`; daBit-style, cheaper than GMPFHE's interpolation
polynomials): x = x_0 XOR ... XOR x_{n-1}, each x_k private to party k. Start from [x_0] (party
0's bit as its own share), then for k = 1 .. n-1

    [y XOR x_k] = [y] + x_k (1 - 2 [y])

where x_k times the shared value 1 - 2[y] is, for each party m < k holding a share of y, one
correlated OT with receiver k (choice bit x_k) and sender m (offset -2 y_m in every limb); party
k's own term is local. n(n-1)/2 correlated OTs per bit in all, n - 1 rounds, 4 + 8 L bytes
per OT for L limbs. The result is exact (no statistical error).

**Z_3 -> Z_q** (:func:`trits_to_mod`): the same chain on the one-hot vector of the trit:
e(t_0) is party 0's, and adding party k's private trit t_k rotates the shared one-hot vector
by t_k, done as two rotations by one position, each conditioned on a private bit
([t_k >= 1], [t_k = 2]): v + beta (rot(v) - v), a correlated OT per party m < k with 3 L
offsets. The value is e_1 - e_2 (balanced: {0, 1, -1}) or e_1 + 2 e_2. n(n-1) correlated OTs
per trit, 2(n - 1) rounds, exact.

**Z_q -> Z_2** (:func:`mod_to_bits`, GMPFHE's Fig. 5 shape): each party's residue is a private
binary input; n - 1 binary modular adders (u + v, then minus q when that is >= q) on bit-sliced
shares, each about 3 w AND gates (w = bitlen(q)) in 2 w + 2 rounds (ripple carry).

Security: semi-honest, any n - 1 colluding; the conversions open nothing, so a party's view is
the OT messages (simulatable) and the Beaver openings (uniform).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...kernels.modq import Ring, basis, pack_bits, unpack_bits
from ..api import ModShares, XorShares, stack_bits

__all__ = ["bits_to_mod", "bits_to_ring", "compare_ge", "const_bits", "mod_add_bits", "mod_to_bits", "planes_to_mod",
           "ripple_add", "trits_to_mod"]


def _chain_step(engine: Any, ring: Ring, acc: np.ndarray, k: int, choice: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """acc + beta_k * D for a private bit beta_k of party k and a shared D (this party's share
    ``delta``, (e, L')): party k's term is local, each m < k sends one correlated OT."""

    me, links = engine.me, engine.ot_links()
    flat = delta.reshape(len(choice), -1)
    mods = list(ring.moduli) * (flat.shape[1] // len(ring.moduli))
    if me == k:
        recv, _ = links.cot({m: choice for m in range(k)}, {}, mods, 1)
        out = ring.add(acc, (flat * choice[:, None]).reshape(acc.shape))  # choice is 0/1
        for part in recv.values():
            out = ring.add(out, part.reshape(acc.shape))
        return out
    if me < k:
        _, sent = links.cot({}, {k: flat}, mods, 1)
        return ring.add(acc, sent[k].reshape(acc.shape))
    return acc


def _own_bits(x: XorShares) -> np.ndarray:
    """This party's share bits, flattened: uint64 0/1 (N,)."""
    return unpack_bits(x.words, x.bits).ravel().astype(np.uint64)


def _passive_only(engine: Any, what: str) -> None:
    """The chains below trust every party's OT inputs: refused on an engine that promises more."""
    if getattr(engine, "security", "passive") != "passive":
        from ..api import UnsupportedConversion

        raise UnsupportedConversion(f"{what} runs on the passive engine only (its OT chain does not check the "
                                    f"parties' inputs); the {engine.security} engine has no such conversion yet")


def bits_to_ring(engine: Any, x: XorShares, moduli: int | Sequence[int]) -> np.ndarray:
    """Shares (..., N, L) of the bits of ``x`` as integers 0/1 in every modulus (0 = 2^64)."""
    _passive_only(engine, "Z_2 -> Z_q")
    mods = [0] if moduli == 0 else list(basis(moduli))
    ring = Ring(mods)
    mine = _own_bits(x)
    acc = ring.lift_bits(mine) if engine.me == 0 else np.zeros((len(mine), len(mods)), np.uint64)
    for k in range(1, engine.parties):
        # D = 1 - 2y: party k's share 1 - 2 y_k = 1 (it holds no share of y before its step),
        # every party m < k's -2 y_m; parties after k take no part
        if engine.me < k:
            d = ring.scale(acc, -2)
        else:
            d = np.broadcast_to(np.uint64(engine.me == k), acc.shape)
        acc = _chain_step(engine, ring, acc, k, mine, d)
    return acc.reshape(x.words.shape[:-1] + (x.bits, len(mods)))


def bits_to_mod(engine: Any, x: XorShares, moduli: int | Sequence[int]) -> ModShares:
    """Z_2 -> Z_q: the bits of ``x`` (shape (..., N)) as shares over the basis: (..., N). An
    engine that is not passive converts with its own checked method (the active engine: daBits)."""
    if getattr(engine, "security", "passive") != "passive":
        return engine.bits_to_mod(x, moduli)
    mods = basis(moduli)
    return ModShares(engine, bits_to_ring(engine, x, mods), mods)


def planes_to_mod(engine: Any, planes: XorShares, weights: Sequence[int], moduli: int | Sequence[int]) -> ModShares:
    """sum_j weights_j x_j over the basis for bit planes x (w, N) and public integer weights (any
    sign): the integers the planes encode, (N,). An engine that is not passive converts with its
    own checked method (the active engine: daBits into two limbs, then a lift)."""
    if getattr(engine, "security", "passive") != "passive":
        return engine.planes_to_mod(planes, weights, moduli)
    values = bits_to_mod(engine, planes, moduli)
    out = values[0] * int(weights[0])
    for j in range(1, len(weights)):
        out = out + values[j] * int(weights[j])
    return out


def trits_to_mod(engine: Any, t: ModShares, moduli: int | Sequence[int], *, balanced: bool = True) -> ModShares:
    """Z_3 -> Z_q: shares of a value in Z_3 (a ModShares over the basis (3,)) as shares over
    ``moduli``: {0, 1, 2} read as {0, 1, -1} (``balanced``) or as {0, 1, 2}."""
    _passive_only(engine, "Z_3 -> Z_q")
    if t.moduli != (3,):
        raise ValueError(f"trits_to_mod takes shares over (3,), got the basis {t.moduli}")
    mods = basis(moduli)
    ring, L = Ring(mods), len(mods)
    trit = t.share[..., 0].ravel()
    e = len(trit)
    onehot = np.zeros((e, 3, L), np.uint64)
    if engine.me == 0:
        onehot[np.arange(e), trit.astype(np.int64)] = 1
    for k in range(1, engine.parties):
        for beta in (trit >= 1, trit == 2):
            rotated = np.roll(onehot, 1, axis=1)  # position i moves to i + 1 (mod 3)
            onehot = _chain_step(engine, ring, onehot, k, beta.astype(np.uint64),
                                 ring.sub(rotated, onehot))
    one, two = onehot[:, 1], onehot[:, 2]
    value = ring.sub(one, two) if balanced else ring.add(one, ring.double(two))
    return ModShares(engine, value.reshape(t.shape + (L,)), mods)


# -- binary circuits on bit planes ----------------------------------------------------------------
def _planes(engine: Any, values: np.ndarray | None, owner: int, width: int, count: int) -> XorShares:
    """A private integer vector of ``owner`` as shared bit planes (width, W), no interaction."""
    words = (count + 63) // 64
    if engine.me != owner:
        return XorShares(engine, np.zeros((width, words), np.uint64), count)
    v = np.asarray(values, dtype=np.uint64)
    bits = ((v[None, :] >> np.arange(width, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)
    return XorShares(engine, pack_bits(bits), count)


def const_bits(engine: Any, bit: int, words: int, count: int) -> XorShares:
    """A public bit in every lane as shares (party 0 holds it; an engine with authenticated
    bits makes its own: ``constant_bits``)."""
    make = getattr(engine, "constant_bits", None)
    if make is not None:
        return make(bit, (), count)
    fill = np.uint64(0xFFFFFFFFFFFFFFFF if bit and engine.me == 0 else 0)
    return XorShares(engine, np.full(words, fill, np.uint64), count)


def ripple_add(engine: Any, u: XorShares, v: XorShares, carry_in: XorShares | None = None) -> XorShares:
    """u + v on bit planes (w, W) each: w + 1 planes, w AND layers (ripple carry). The
    circuits here build planes with XOR, AND, slicing and :func:`~shaper.protocols.api.stack_bits`
    only, so they run on authenticated bits too."""
    w = u.words.shape[0]
    words = u.words.shape[1]
    c = carry_in if carry_in is not None else const_bits(engine, 0, words, u.bits)
    out = []
    for j in range(w):
        out.append(u[j] ^ v[j] ^ c)
        if j == 0 and carry_in is None:
            c = u[0] & v[0]
        else:
            c = c ^ ((u[j] ^ c) & (v[j] ^ c))
    out.append(c)
    return stack_bits(out)


def compare_ge(engine: Any, x: XorShares, t: XorShares) -> XorShares:
    """[x >= t] for bit planes (w, W) each (least significant plane first): the carry out of
    x + NOT t + 1, w AND layers. On the active engine's authenticated bits it is an actively
    secure comparison (every AND from a checked triple, every opening MAC-checked)."""
    words = x.words.shape[1]
    c = const_bits(engine, 1, words, x.bits)
    for j in range(x.words.shape[0]):
        nt = ~t[j]
        c = c ^ ((x[j] ^ c) & (nt ^ c))
    return c


def add_public(engine: Any, s: XorShares, constant: int) -> tuple[XorShares, XorShares]:
    """s + constant on bit planes (w, W) modulo 2^w: (sum planes, carry out); one AND per bit."""
    w, words = s.words.shape
    c = const_bits(engine, 0, words, s.bits)
    out = []
    for j in range(w):
        t = (constant >> j) & 1
        out.append(s[j] ^ c if not t else ~(s[j] ^ c))
        if t:  # majority(s, 1, c) = s OR c
            c = ~((~s[j]) & (~c))
        else:  # majority(s, 0, c) = s AND c
            c = s[j] & c if j else const_bits(engine, 0, words, s.bits)
    return stack_bits(out), c


def mod_add_bits(engine: Any, u: XorShares, v: XorShares, q: int) -> XorShares:
    """(u + v) mod q for residues u, v < q on bit planes (w, W), w = bitlen(q)."""
    w = q.bit_length()
    s = ripple_add(engine, u, v)  # w + 1 planes
    d, ge = add_public(engine, s, (1 << (w + 1)) - q)  # s - q mod 2^(w+1); carry out = [s >= q]
    sel = ge & (s ^ d)[:w]  # one layer: where s >= q take d
    return s[:w] ^ sel


def mod_to_bits(engine: Any, x: ModShares) -> XorShares:
    """Z_q -> Z_2: shares over one modulus q as bit-plane shares (w, W) of the value's w bits. An
    engine that is not passive converts with its own checked method (the active engine: daBits)."""
    if getattr(engine, "security", "passive") != "passive":
        return engine.mod_to_bits(x)
    if len(x.moduli) != 1:
        raise ValueError(f"mod_to_bits converts one modulus at a time, got the basis {x.moduli}")
    (q,) = x.moduli
    w = q.bit_length()
    mine = x.share[..., 0].ravel()
    count = len(mine)
    engine.reserve_bit_triples((engine.parties - 1) * (3 * w + 2) * ((count + 63) // 64))
    acc = _planes(engine, mine, 0, w, count)
    for k in range(1, engine.parties):
        acc = mod_add_bits(engine, acc, _planes(engine, mine, k, w, count), q)
    return acc
