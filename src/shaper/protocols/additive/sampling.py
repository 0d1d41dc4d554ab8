"""Secure sampling in the n-party engine: no party learns the sample, every party holds a share.

=====================  ====================================================================  =======================
sampler                how                                                                   distance from the law
=====================  ====================================================================  =======================
:func:`uniform`        each party draws its share uniformly in Z_q (rejection sampling)      0
:func:`ternary`        each party draws a uniform Z_3 share; converted to the basis          0
                       (:func:`~.convert.trits_to_mod`)
:func:`gaussian`       40-bit uniform x from XOR shares; the folded law's cumulative         <= 2^-34.3 (see below;
                       table, searched by 5 secret comparisons; a random sign;               <= 2^-32.9 at other
                       6-bit two's complement converted to the basis (at sigma 3.2)          sigma)
=====================  ====================================================================  =======================

**Discrete Gaussian** (default sigma = 3.2, support +-23, GMPFHE's Fig. 2 law): |X| = i with
probability P_0 = rho(0) / S and P_i = 2 rho(i) / S (rho(i) = exp(-i^2 / 2 sigma^2), S over
-tail..tail), then a uniform sign. The table holds the ``tail`` cumulative thresholds
T_i = round(2^40 sum_{j < i} P_j); |X| = #{i : x >= T_i} for a uniform 40-bit x. Instead of
GMPFHE's linear scan (23 comparisons, about 880 AND gates) the L = bit_length(tail) bits of |X|
(5 at the default) come from a binary search: the top bit = [x >= T_(2^(L-1))]; each next bit
compares x with the threshold selected by the bits found so far, whose planes are XORs of a
one-hot decoder of those bits (1 + 2 + 4 + 8 AND gates at L = 5), so every comparison is a
41-bit ripple of 41 AND gates: 5 x 41 + 15 + 5 (sign) = 225 AND gates and 6 conversions to
the basis per sample at the default (L x 41 + 2^(L-1) - 1 + L and L + 1 conversions in general).

Other widths (``sigma`` != 3.2, e.g. a key generation whose parameters ask for another
``params.sigma``): the support is [-tail, tail] with tail = ceil(7.2 sigma) (:func:`gaussian_tail`;
at sigma = 3.2 exactly the historical 23 is kept, so nothing changes at the default), up to
tail 255 (sigma <= 35.4).

Statistical distance: rounding each threshold costs at most 2^-41 per outcome, tail + 1
outcomes: <= (tail + 1) x 2^-41 (24 x 2^-41 = 2^-36.4 at the default, 2^-33 at tail 255); the
tail beyond ``tail`` (dropped) has mass 2^-42.4 under sigma = 3.2 and tail 23, and below
P(|N(0, 1)| > 7.2) = 2^-40.6 for every sigma with tail = ceil(7.2 sigma) (the discrete sum,
computed for sigma in 0.01..35.4, never exceeds 2^-40.7). So a sample is within
(tail + 1) 2^-41 + 2^-40.6 of the law: 2^-34.3 at the default, at most 2^-32.9 for any
supported sigma. The support is exactly [-tail, tail], so revealed samples never leave it. Per
sample, not per key: a key of M samples is within M times that of the ideal (Renyi-divergence
arguments are tighter).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import ConfigError
from .convert import compare_ge, const_bits, planes_to_mod, ripple_add, trits_to_mod
from ...kernels.modq import basis, sub_mod
from ..api import ModShares, XorShares, stack_bits

__all__ = ["GAUSSIAN_BITS", "MAX_TAIL", "SIGMA", "TAIL", "TAIL_SIGMAS", "gaussian", "gaussian_law", "gaussian_tail",
           "gaussian_thresholds", "hamming_weight", "ternary", "uniform"]

SIGMA = 3.2
TAIL = 23          # support [-TAIL, TAIL] at SIGMA
TAIL_SIGMAS = 7.2  # at any other sigma the support is [-ceil(7.2 sigma), ceil(7.2 sigma)]
MAX_TAIL = 255     # the widest support the sampler builds a circuit for (sigma <= 35.4)
GAUSSIAN_BITS = 40  # precision of the uniform draw and of the table


def gaussian_tail(sigma: float = SIGMA) -> int:
    """The support bound of the sampler at ``sigma``: 23 at sigma = 3.2 (the historical table),
    ceil(7.2 sigma) otherwise, so that the dropped tail has mass below 2^-40.6 at every width
    (module notes). Raises :class:`~shaper.errors.ConfigError` for a width the sampler does not
    build (sigma not positive and finite, or a tail beyond 255)."""
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ConfigError(f"the Gaussian width sigma must be positive and finite, got {sigma!r}")
    if sigma == SIGMA:
        return TAIL
    tail = max(1, math.ceil(TAIL_SIGMAS * sigma))
    if tail > MAX_TAIL:
        raise ConfigError(f"the MPC Gaussian sampler supports sigma up to {MAX_TAIL / TAIL_SIGMAS:.1f} (a support of "
                          f"+-{MAX_TAIL}), got sigma {sigma} (support +-{tail})")
    return tail


def gaussian_law(sigma: float = SIGMA, tail: int = TAIL) -> np.ndarray:
    """The exact law of |X| (folded, truncated discrete Gaussian): P[0..tail], as float64."""
    rho = np.array([math.exp(-i * i / (2 * sigma * sigma)) for i in range(tail + 1)])
    total = rho[0] + 2 * rho[1:].sum()
    return np.concatenate([[rho[0]], 2 * rho[1:]]) / total


def gaussian_thresholds(sigma: float = SIGMA, tail: int = TAIL, bits: int = GAUSSIAN_BITS) -> list[int]:
    """T_1 .. T_tail: the cumulative table, integers below 2^bits (with exact rational sums)."""
    from fractions import Fraction

    rho = [Fraction(math.exp(-i * i / (2 * sigma * sigma))) for i in range(tail + 1)]
    total = rho[0] + 2 * sum(rho[1:])
    law = [rho[0] / total] + [2 * r / total for r in rho[1:]]
    out, acc = [], Fraction(0)
    for i in range(1, tail + 1):
        acc += law[i - 1]
        out.append(round(acc * (1 << bits)))
    return out


def uniform(engine: Any, shape: int | tuple[int, ...], moduli: int | Sequence[int]) -> ModShares:
    """Shares of uniform elements of every modulus (free: each party's share is uniform)."""
    return engine.random_mod(shape, moduli)


def ternary(engine: Any, shape: int | tuple[int, ...], moduli: int | Sequence[int]) -> ModShares:
    """Shares of uniform values in {-1, 0, 1} over the basis (a uniform Z_3 sharing, converted)."""
    t = engine.random_mod(shape, (3,))
    return trits_to_mod(engine, t, moduli, balanced=True)




def gaussian(engine: Any, count: int, moduli: int | Sequence[int], *, sigma: float = SIGMA,
             tail: int | None = None) -> ModShares:
    """Shares over the basis of ``count`` discrete-Gaussian samples of width ``sigma`` on the
    support [-tail, tail] (default :func:`gaussian_tail`: 23 at sigma 3.2, ceil(7.2 sigma)
    otherwise; see the module notes)."""
    mods = basis(moduli)
    if tail is None:
        tail = gaussian_tail(sigma)
    if not 1 <= tail <= MAX_TAIL:
        raise ValueError(f"the Gaussian sampler's circuit is built for a tail of 1..{MAX_TAIL}, got {tail}")
    thresholds = gaussian_thresholds(sigma, tail)
    levels = int(tail).bit_length()  # bits of |X| (5 at the default tail 23)
    width = GAUSSIAN_BITS + 1  # x < 2^40, thresholds up to 2^40 ("never")
    words = (count + 63) // 64
    engine.reserve_bit_triples(words * (levels * width + (1 << levels) + levels + 1))
    never = 1 << GAUSSIAN_BITS
    drawn = engine.random_bits((GAUSSIAN_BITS,), count)
    zero = const_bits(engine, 0, words, count)
    x = stack_bits([drawn[j] for j in range(GAUSSIAN_BITS)] + [zero])

    def table(index: int) -> int:
        return thresholds[index - 1] if 1 <= index <= tail else never

    magnitude: list[XorShares] = []  # bits of |X|, high to low
    decoder = [const_bits(engine, 1, words, count)]  # one-hot over the prefix found so far
    for level in range(levels - 1, -1, -1):
        # the threshold for each prefix p: T[p 2^(level + 1) + 2^level] (XORs of the decoder's
        # shared lanes: local, on any engine)
        planes = []
        for j in range(width):
            plane = zero
            for p, d in enumerate(decoder):
                if (table(p * (2 << level) + (1 << level)) >> j) & 1:
                    plane = plane ^ d
            planes.append(plane)
        bit = compare_ge(engine, x, stack_bits(planes))
        magnitude.append(bit)
        if level:
            if len(decoder) == 1:
                decoder = [~bit, bit]
            else:
                ones = stack_bits(decoder) & bit
                decoder = [v for i, d in enumerate(decoder) for v in (d ^ ones[i], ones[i])]
    # sign: y = (|X| XOR s...s) + s in (levels + 1)-bit two's complement
    sign = engine.random_bits((), count)
    flipped = stack_bits([b ^ sign for b in magnitude[::-1]])
    zeros = stack_bits([zero] * levels)
    y = ripple_add(engine, flipped, zeros, carry_in=sign)  # levels sum planes and the carry c_levels
    # the top bit: (0 XOR s) XOR c_levels
    y_planes = stack_bits([y[j] for j in range(levels)] + [sign ^ y[levels]])
    weights = [1 << j for j in range(levels)] + [-(1 << levels)]
    return planes_to_mod(engine, y_planes, weights, mods)



def _rotate_by_private(engine: Any, v: np.ndarray, q: int, amounts: np.ndarray) -> np.ndarray:
    """Rotate every row of a shared (B, M) matrix mod q cyclically by sum_k r_k mod M, where
    r_k (``amounts`` at party k) is private to party k: per party k >= 1 and bit b of r_k one
    rotation by 2^b conditioned on that bit (correlated OTs with the row's M offsets, in chunks
    of 256 per OT); party 0 rotates its start vector itself."""

    B, M = v.shape
    chunk = 256
    chunks = -(-M // chunk)
    links = engine.ot_links()
    ring_q = np.uint64(q)
    for k in range(1, engine.parties):
        for b in range(max(1, (M - 1).bit_length())):
            shift = (1 << b) % M
            delta = sub_mod(np.roll(v, shift, axis=1), v, ring_q)
            padded = np.zeros((B, chunks * chunk), np.uint64)
            padded[:, :M] = delta
            flat = padded.reshape(B * chunks, chunk)
            if engine.me == k:
                beta = np.repeat((amounts >> np.uint64(b)) & np.uint64(1), chunks)
                recv, _ = links.cot({m: beta for m in range(k)}, {}, [q] * chunk, 1)
                add = np.where(beta[:, None].astype(bool), flat, np.uint64(0))
                for part in recv.values():
                    add = (add + part) % ring_q
                v = (v + add.reshape(B, -1)[:, :M]) % ring_q
            elif engine.me < k:
                _, sent = links.cot({}, {k: flat}, [q] * chunk, 1)
                v = (v + sent[k].reshape(B, -1)[:, :M]) % ring_q
    return v


def hamming_weight(engine: Any, count: int, length: int, weight: int, moduli: int | Sequence[int]) -> ModShares:
    """Shares over the basis of ``count`` vectors of ``length`` entries in {-1, 0, 1} with exactly
    ``weight`` nonzero entries, uniformly placed, each sign uniform (GMPFHE's Fig. 3 procedure,
    batched over the vectors).

    In Z_3: v starts as (s_1 .. s_h, 0 ... 0) with random signs; for i < h a uniform j in
    [i, length) swaps v_i and v_j obliviously: the one-hot vector of j comes from party 0's
    private start position rotated by every other party's private amount (:func:`_rotate_by_private`),
    then v_j = <f, v> and v <- v + f (v_i - v_j), v_i <- v_j with Beaver products mod 3. The
    result is converted to the basis once (Z_3 -> Z_q). Exact: statistical distance 0."""
    if getattr(engine, "security", "passive") != "passive":  # the active engine: its own checked sampler
        return engine.hamming_weight(count, length, weight, moduli)
    mods = basis(moduli)
    if not 0 < weight <= length:
        raise ValueError(f"weight must be in 1..length ({length}), got {weight}")
    three = (3,)
    signs = engine.bits_to_mod(engine.random_bits((), count), three)  # 0/1 in Z_3
    v = np.zeros((count, length), np.uint64)
    sign_vals = (signs + 1).share[..., 0]  # 1 or 2 (= -1) as Z_3 shares; party 0 added the 1
    v[:, 0] = sign_vals
    if weight > 1:
        more = engine.bits_to_mod(engine.random_bits((weight - 1,), count), three) + 1
        v[:, 1:weight] = more.share[..., 0].T
    for i in range(weight):
        m = length - i
        start = engine.prg.below(m, count) if engine.me == 0 else None
        onehot = np.zeros((count, m), np.uint64)
        if engine.me == 0:
            onehot[np.arange(count), start.astype(np.int64)] = 1
        amounts = engine.prg.below(m, count) if m > 1 else np.zeros(count, np.uint64)
        f = _rotate_by_private(engine, onehot, 3, amounts) if m > 1 else onehot
        fs = ModShares(engine, f[..., None], three)
        tail = ModShares(engine, v[:, i:, None].copy(), three)
        vj = fs * tail  # (count, m)
        vj_sum = vj.share[..., 0].sum(axis=1) % np.uint64(3)
        d = ModShares(engine, ((v[:, i] + np.uint64(3) - vj_sum) % np.uint64(3))[:, None, None], three)
        upd = fs * ModShares(engine, np.broadcast_to(d.share, (count, m, 1)).copy(), three)
        v[:, i:] = (v[:, i:] + upd.share[..., 0]) % np.uint64(3)
        v[:, i] = vj_sum
    trits = ModShares(engine, v[..., None], three)
    return engine.trits_to_mod(trits, mods, balanced=True)
