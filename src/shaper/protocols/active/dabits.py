"""daBits for the active engine, and the conversions and samplers built on them: a random bit
authenticated both as an :class:`~.bits.AuthBits` and, as the integer 0 or 1, in every modulus
of a basis (Rotaru–Wood's daBits, "MArBled circuits", ePrint 2019/207; the check is theirs and
MP-SPDZ's, extended here to RNS bases).

**Making them.** Each party i's share b_i of random authenticated bits
(:meth:`~.bits.AuthBitDomain.random_bits`: b = XOR of the b_i, every b_i MAC'd towards every
peer) is also *input* by i into the fields (:meth:`~.engine.ActiveEngine.share_mod`), and the
field value of b is the XOR chain [b_0] + [b_i] - 2 [b_0][b_i] ... (n - 1 Beaver products from
checked triples). Nothing in that forces party i to input the same bit in the fields as in
Z_2, a bit at all, or one integer across the limbs of an RNS basis; three checks do, on every
batch, before any daBit is used:

1. **bits in every limb**: ceil(S / (bitlen(q_min) - 1)) independent combinations
   sum_l rho_l (b_l^2 - b_l) are opened per limb and must be zero (rho from a joint coin toss
   after the squares; one more Beaver product per daBit). Each passes a non-bit with
   probability 1/q, all of them with at most 2^-S (check 2 below does not cover this one: a
   small non-bit such as 2 has the right parity).
2. **one integer, the same as in Z_2**: S = ``soundness`` checks (64 by default). Check j draws
   chi_j in {0, 1}^N from a joint coin toss (after every input and product is fixed) and opens

       T_j = sum_l chi_jl [b_l] + [b'_j] + 2 sum_i [m_ji]     in every limb of the basis,
       P_j = XOR_l chi_jl <b_l> XOR <b'_j>                    in Z_2,

   where b'_j is a daBit of the batch sacrificed for check j and m_ji a fresh input of party i,
   uniform in [0, 2^M), M = 40 + bitlen(N + 1). Every honest party rebuilds T_j from its limbs
   (CRT, an integer in [0, Q)) and requires T_j <= beta = N + 1 + 2 n (2^M - 1) and
   T_j = P_j mod 2.
3. the MAC checks of both domains over everything opened.

*Why it is sound.* Let b_l be bad: not a bit in some limb (caught by 1), else an idempotent of
Z_Q (a bit in every limb) that is not 0 or 1, or 0/1 but not its Z_2 value. Fix every coin but
chi_jl. Both values of chi_jl pass only if T_j(1) - T_j(0) = b_l lies in [-beta, beta] mod Q;
an idempotent other than 0, 1 is at least sqrt(Q) - 1 away from 0 (it is 0 mod the product of
some limbs and 1 mod the rest), so the engine takes beta < sqrt(Q) - 1 (one limb: beta < Q / 2,
no idempotents); and a 0/1 field value that differs from its Z_2 value flips exactly one of
the two parities. So each check passes a bad batch with probability at most 1/2, the S checks
(independent coins) with at most 2^-S: 2^-64 at the default, which the issue's bar for
anything that protects a key asks. The masks m keep T_j within 2^-40 (statistically) of
independent of the daBits (the honest party's m is uniform and 2^(M - 40) times wider than the
sum), and the sacrificed b'_j makes P_j a uniform bit; nothing else is opened.

*Basis too small.* A basis whose product is too small for beta (a single 50-bit prime, say)
is extended for the check with helper primes near 2^61 that the daBits then drop: the checks
prove the bit over the extended basis, so in its every limb. Batches are at most
:data:`MAX_BATCH` daBits and at least :data:`MIN_BATCH` when they need splitting.

**Cost** per daBit at n parties over L limbs: n inputs and n Beaver products (n - 1 for the XOR,
one for the square) per limb, plus a share of the S sacrificed daBits and S n mask inputs per
batch. That is several times a passive conversion (an OT chain); the faster route (every
limb's MAC derived from the aBit's own OT row, consistent by construction) is sketched in
``docs/mpc.md``.

**Conversions** (each a few openings on top of daBits):

* Z_2 -> Z_q (:func:`bits_to_mod`): c = x XOR b opened (MAC-checked later with everything),
  [x] = c + (1 - 2 c) [b] in every limb, linear.
* Z_q -> Z_2 (:func:`mod_to_bits`, one prime q of w bits): a random r < q with its bits, c =
  x + r mod q opened, then the bits of (c - r) mod q by a subtraction and a conditional
  addition of q on the authenticated bits. For q of 54 bits or more r = sum_i r_i mod q, each
  r_i uniform below q drawn by party i and input as *private bits* (:func:`private_bits`: its
  bits authenticated in Z_2 and, by the owner's range proof with one-bit digits, as 0/1 mod q,
  no products; the same masked subset-parity check links the two, with the owner's own masks),
  reduced mod q in Z_2 (a deviating party's may be q or more) and added with binary modular
  adders; in the field the sum is linear. For narrower primes r = sum_k 2^k b_k from w daBits,
  kept where [r < q] (the outcome opened and checked: which draws were kept is independent of
  their values).
* integers in bit planes into a basis (:func:`planes_to_mod`): over three limbs or more the
  daBits go into an anchor of wide limbs and the integer is then *lifted* into the rest
  (:func:`lift`: inputs and a masked subset-sum range check over the CRT integer, no products).
* uniform ternary (:func:`ternary`): two random bits (u, v) per draw, (1, 1) rejected by
  opening u AND v (checked before the draws are used), u - v converted by
  :func:`planes_to_mod`: 0, 1, -1 with probability 1/3 each.

* fixed Hamming weight (:func:`hamming_weight`): i.i.d. indicators of probability weight /
  length, vectors of another weight rejected by an opened (checked) comparison of their count.

Privacy is statistical per opening: every masked opening (T_j, a lift's sums and its c) is
within 2^-40 of independent of what it masks, and a job's openings add up.

What a deviating party can do: abort (at any step; the checks name the phase, not a culprit,
where several parties' messages meet), nothing else except with probability 2^-S per batch
plus the MAC checks' 2^-soundness.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import gmpy2
import numpy as np

from ...errors import ConfigError, DeviationError
from ...kernels.modq import basis, lift_public, moduli_array, pack_bits
from .bits import AuthBits
from .lift import HELPER_START, MASK_SLACK, crt, flat_auth, from_flat, lift, select_limbs, subset_sums, wide_anchor
from .ranges import input_in_range
from .shares import AuthShares

__all__ = ["MAX_BATCH", "MIN_BATCH", "bits_to_mod", "check_plan", "dabits", "hamming_weight", "mod_to_bits",
           "planes_to_mod", "private_bits", "ternary"]

MAX_BATCH = 1 << 18    # daBits checked together (the coins' matrix is S x batch)
MIN_BATCH = 1 << 12    # a split never goes below this; a basis that needs less gets helper primes


def _mask_bits(batch: int) -> int:
    return MASK_SLACK + (batch + 1).bit_length()


def _beta(batch: int, parties: int) -> int:
    """The largest T_j an honest run opens for a batch of ``batch`` kept daBits."""
    return batch + 1 + 2 * parties * ((1 << _mask_bits(batch)) - 1)


def _fits(moduli: Sequence[int], parties: int, batch: int) -> bool:
    q = math.prod(moduli)
    beta = _beta(batch, parties)
    if len(moduli) == 1:
        return 2 * beta < q
    return beta + 1 < math.isqrt(q)


def check_plan(moduli: Sequence[int], parties: int, count: int) -> tuple[int, tuple[int, ...]]:
    """(batch, checked basis) for ``count`` daBits over ``moduli``: the largest batch up to
    :data:`MAX_BATCH` the basis can check (see the module notes), and the basis extended by
    helper primes when even :data:`MIN_BATCH` does not fit."""
    mods = basis(moduli)
    batch = max(1, min(int(count), MAX_BATCH))
    while batch > MIN_BATCH and not _fits(mods, parties, batch):
        batch = max(batch // 2, MIN_BATCH)
    ext = list(mods)
    p = HELPER_START
    while not _fits(ext, parties, batch):
        p = int(gmpy2.next_prime(p))
        if p not in ext:
            ext.append(p)
    return batch, tuple(ext)


def _xor_subsets(chi: np.ndarray, bits: AuthBits, count: int) -> AuthBits:
    """For each row j of chi (S, N): XOR_l chi_jl bits_l XOR bits_(count + j), authenticated."""
    plain = bits.plain()
    s = chi.shape[0]
    ones = chi.astype(np.float64) @ plain[:count].astype(np.float64)
    out = (ones.astype(np.int64) & 1).astype(bool) ^ plain[count:count + s]
    peers = bits.macs.shape[0]
    macs = np.empty((peers, s), np.uint64)
    keys = np.empty((peers, s), np.uint64)
    zero = np.uint64(0)
    for j in range(s):
        sel = chi[j]
        macs[:, j] = np.bitwise_xor.reduce(np.where(sel, bits.macs[:, :count], zero), axis=1) ^ bits.macs[:, count + j]
        keys[:, j] = np.bitwise_xor.reduce(np.where(sel, bits.keys[:, :count], zero), axis=1) ^ bits.keys[:, count + j]
    return AuthBits.of(bits.engine, out, macs, keys)


def _stack_auth(parts: list[AuthShares]) -> AuthShares:
    """Scalars (one value over a basis each) as one (len,) array."""
    return AuthShares(parts[0].engine, np.stack([p.share for p in parts]), np.stack([p.mac for p in parts], axis=1),
                      parts[0].moduli)


def _batch(engine: Any, count: int, target: tuple[int, ...], ext: tuple[int, ...]) -> tuple[AuthBits, AuthShares]:
    """One checked batch of ``count`` daBits over ``ext``, returned over ``target`` (module notes)."""
    s = engine.soundness
    n = engine.parties
    total = count + s
    m_bits = _mask_bits(count)
    engine.reserve_triples(n * total, ext)
    r2 = engine.random_bits((), total)
    mine = r2.plain()
    parts = []
    for owner in range(n):
        values = None
        if engine.me == owner:  # M < 60 bits: the masks fit the words
            values = np.concatenate([mine.astype(np.uint64), engine.prg.below(1 << m_bits, s)])
        parts.append(engine.share_mod(values, owner=owner, moduli=ext))
    acc = parts[0][:total]
    for owner in range(1, n):
        bit = parts[owner][:total]
        acc = acc + bit - (acc * bit) * 2
    square = acc * acc
    coins = engine.joint_coins("dabit-coins")
    qs = list(ext)
    # combinations: each passes a non-bit with probability 1/q, so enough of them for 2^-S
    reps = math.ceil(s / (min(qs).bit_length() - 1))
    rho = np.stack([np.stack([coins.below(q, total) for q in qs], axis=-1) for _ in range(reps)])
    chi = (coins.uint64((s, count)) & np.uint64(1)).astype(bool)
    # 1. a bit in every limb
    diff = square - acc
    zero = engine.open_partial(_stack_auth([engine.mul_public_shares(diff, rho[k]).sum(axis=0)
                                            for k in range(reps)]), "daBits: bits")
    # 2. one integer, the same as in Z_2
    cols, col_mods = flat_auth(acc[:count])
    sums = from_flat(engine, subset_sums(chi, cols, col_mods), ext, acc.keys)
    masks = parts[0][total:]
    for owner in range(1, n):
        masks = masks + parts[owner][total:]
    t = engine.open_partial(sums + acc[count:] + masks * 2, "daBits: consistency")
    parity = engine.open_bits_partial(_xor_subsets(chi, r2, count))
    engine.check_all("daBits")
    if np.any(zero):
        raise DeviationError("the daBit check failed: a party's input is not a bit in some limb")
    beta = _beta(count, n)
    for j, value in enumerate(crt(t, ext)):
        if value > beta or (value & 1) != int(parity[j]):
            raise DeviationError("the daBit check failed: a party's bits differ between Z_2 and the fields, are not "
                                 "one integer across the limbs, or its masks are out of range")
    keep = [ext.index(q) for q in target]
    return _head(r2, count), select_limbs(acc[:count], keep, engine.keys(target))


def _head(bits: AuthBits, count: int) -> AuthBits:
    """The first ``count`` lanes of a 1-D authenticated bit array."""
    return AuthBits.of(bits.engine, bits.plain()[:count], bits.macs[:, :count], bits.keys[:, :count])


def dabits(engine: Any, count: int, moduli: Any) -> tuple[AuthBits, AuthShares]:
    """``count`` checked daBits over the basis: (the bits (count,), the same bits over the
    basis (count,))."""
    target = basis(moduli)
    count = int(count)
    if count < 0:
        raise ValueError(f"a negative daBit count: {count}")
    if count == 0:
        keys = engine.keys(target)
        return engine.zero_bits((), 0), AuthShares(engine, np.zeros((0, len(target)), np.uint64),
                                                   np.zeros((keys, 0, len(target)), np.uint64), target)
    batch, ext = check_plan(target, engine.parties, count)
    bits_out, field_out = [], []
    done = 0
    while done < count:
        size = min(batch, count - done)
        b, f = _batch(engine, size, target, ext if size == batch else check_plan(target, engine.parties, size)[1])
        bits_out.append(b)
        field_out.append(f)
        done += size
    return _concat_bits(bits_out, 0), AuthShares.concat(field_out)


def _flatten_bits(x: AuthBits) -> AuthBits:
    """Any shape (..., N) as one lane axis (M,)."""
    plain = x.plain().reshape(-1)
    peers = x.macs.shape[0]
    return AuthBits.of(x.engine, plain, x.macs.reshape(peers, -1), x.keys.reshape(peers, -1))


def _direct(engine: Any, flat: AuthBits, mods: tuple[int, ...]) -> AuthShares:
    """Bits (M,) into the basis with daBits over that basis: (M,)."""
    count = flat.bits
    b2, bf = dabits(engine, count, mods)
    c = engine.open_bits_partial(flat ^ b2)          # uniform; MAC-checked with the rest
    qs = moduli_array(mods)
    ones = np.ones((count, len(mods)), np.uint64)
    cc = np.where(c[:, None], ones, np.uint64(0))
    scale = np.where(c[:, None], qs - np.uint64(1), ones)   # 1 - 2c: 1 or -1
    return engine.add_public_residues(engine.mul_public_shares(bf, scale), cc)


def bits_to_mod(engine: Any, x: AuthBits, moduli: Any) -> AuthShares:
    """Z_2 -> Z_q: authenticated bits (..., N) as the integers 0/1 over the basis, (..., N)."""
    if not isinstance(x, AuthBits):
        raise TypeError(f"the active engine converts authenticated bits, got {type(x).__name__}")
    flat = _flatten_bits(x)
    planes = AuthBits.of(engine, flat.plain()[None], flat.macs[:, None], flat.keys[:, None])
    return planes_to_mod(engine, planes, [1], moduli).reshape(x.shape)


def planes_to_mod(engine: Any, planes: AuthBits, weights: Sequence[int], moduli: Any) -> AuthShares:
    """sum_j weights_j x_j over the basis, for bit planes x (w, N) and public integer weights
    (any sign): the integers the planes encode, (N,). Over three limbs or more the bits go into
    an anchor of two wide limbs with daBits and the sum is lifted into the rest (:func:`lift`):
    a daBit costs products in every limb, a lift only inputs."""
    mods = basis(moduli)
    w, count = planes.shape
    if len(weights) != w:
        raise ValueError(f"{w} bit planes and {len(weights)} weights")
    anchor = _anchor(engine, mods, sum(abs(int(c)) for c in weights))
    into = anchor or mods
    fields = _direct(engine, _flatten_bits(planes), into).reshape(w, count)
    lo = sum(min(0, int(c)) for c in weights)
    span = sum(abs(int(c)) for c in weights)
    lifted = lift_public(np.array([int(c) for c in weights], dtype=object), into)      # (w, L)
    value = engine.mul_public_shares(fields, np.repeat(lifted[:, None, :], count, axis=1)).sum(axis=0)
    if anchor is None:
        return value
    return lift(engine, value - lo, span + 1, mods) + lo


def _anchor(engine: Any, mods: tuple[int, ...], span: int = 1) -> tuple[int, ...] | None:
    """The limbs the daBits of a conversion into ``mods`` use, or None for all of them: the
    widest limbs (58 bits or more) and then helper primes near 2^61, two at least and as many as
    a lift of values up to ``span`` needs in batches of 4,096, and the limbs that need more MAC
    keys than they have."""
    if len(mods) <= 2:
        return None
    anchor = wide_anchor(mods, span, engine.parties, minimum=2)
    need = engine.keys(mods)
    for q in sorted(mods):
        if engine.keys(anchor) >= need:
            break
        if q not in anchor:
            anchor += (q,)
    return anchor


def ternary(engine: Any, shape: Any, moduli: Any) -> AuthShares:
    """Uniform values in {-1, 0, 1} over the basis (module notes)."""
    mods = basis(moduli)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    need = math.prod(shape)
    kept: list[AuthShares] = []
    have = 0
    while have < need:
        draw = ((need - have) * 3) // 2 + 16
        u = engine.random_bits((2,), draw)
        reject = engine.open_bits_partial(u[0] & u[1])
        engine.check_all("ternary: rejections")
        keep = np.flatnonzero(~reject)[:need - have]
        kept.append(planes_to_mod(engine, _lanes(u, keep), [1, -1], mods))       # u - v
        have += len(keep)
    return AuthShares.concat(kept).reshape(shape)


def _concat_bits(parts: list[AuthBits], axis: int) -> AuthBits:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return AuthBits.of(first.engine, np.concatenate([p.plain() for p in parts], axis=axis),
                       np.concatenate([p.macs for p in parts], axis=axis + 1),
                       np.concatenate([p.keys for p in parts], axis=axis + 1))


def _weighted_bits(engine: Any, field: AuthShares, w: int, count: int, q: int) -> AuthShares:
    """sum_k 2^k b_k mod q for field bits (w * count,) laid out plane by plane: (count,)."""
    weights = np.array([(1 << j) % q for j in range(w)], np.uint64)
    planes = field.reshape(w, count)
    return engine.mul_public_shares(planes, np.repeat(weights, count).reshape(w, count, 1)).sum(axis=0)


def _random_residues_dabits(engine: Any, count: int, q: int) -> tuple[AuthBits, AuthShares]:
    """r uniform below q with its bits: w daBits per draw, draws of r >= q rejected (the outcome
    opened and checked: which draws were kept says nothing of their values)."""
    from ..additive.convert import compare_ge

    w = q.bit_length()
    planes: list[AuthBits] = []
    values: list[AuthShares] = []
    have = 0
    while have < count:
        draw = int((count - have) * (1 << w) / q * 1.1) + 16
        engine.reserve_bit_triples(((draw + 63) // 64) * (w + 1))
        b2, bf = dabits(engine, w * draw, (q,))
        bits = AuthBits.of(engine, b2.plain().reshape(w, draw), b2.macs.reshape(-1, w, draw),
                           b2.keys.reshape(-1, w, draw))
        ge = engine.open_bits_partial(compare_ge(engine, bits, _public_planes(engine, np.full(draw, q, np.uint64), w)))
        engine.check_all("Z_q -> Z_2: draws")
        keep = np.flatnonzero(~ge)[:count - have]
        values.append(_weighted_bits(engine, bf, w, draw, q)[keep])
        planes.append(_lanes(bits, keep))
        have += len(keep)
    return _concat_bits(planes, 1), AuthShares.concat(values)


def private_bits(engine: Any, bits: Any, owner: int, count: int, q: int) -> tuple[AuthBits, AuthShares]:
    """The owner's bits (count,) as authenticated bits and as 0/1 mod one prime q, checked to be
    the same bits: the field values by the owner's range proof with digits of one bit
    (:func:`~.ranges.input_in_range`, no products), the link to Z_2 by the daBits' masked
    subset-parity check with the owner's own masks and sacrificed bits (2^-S). Batches keep
    beta < q / 2."""
    s = engine.soundness
    batch = min(max(count, 1), 1 << 16)
    while batch > 1 and 2 * _beta(batch, 1) >= q:
        batch //= 2
    if 2 * _beta(batch, 1) >= q:
        raise ConfigError(f"a {q.bit_length()}-bit prime is too narrow for the private bits' check")
    mine = np.asarray(bits, dtype=bool).reshape(-1) if engine.me == owner else None
    out_bits: list[AuthBits] = []
    out_field: list[AuthShares] = []
    for start in range(0, count, batch):
        size = min(batch, count - start)
        m_bits = _mask_bits(size)
        chunk = None
        masks = None
        if engine.me == owner:
            chunk = np.concatenate([mine[start:start + size], engine.prg.uint64(s) & np.uint64(1) == 1])
            masks = engine.prg.below(1 << m_bits, s)
        b2 = engine.share_bits(chunk, owner=owner)
        field = input_in_range(engine, None if chunk is None else chunk.astype(np.int64), owner=owner, q=q, lo=0, hi=1)
        m = engine.share_mod(masks, owner=owner, moduli=(q,))
        coins = engine.joint_coins("private-bits-coins")
        chi = (coins.uint64((s, size)) & np.uint64(1)).astype(bool)
        cols, col_mods = flat_auth(field[:size])
        sums = from_flat(engine, subset_sums(chi, cols, col_mods), (q,), field.keys)
        t = engine.open_partial(sums + field[size:] + m * 2, "private bits: consistency")
        parity = engine.open_bits_partial(_xor_subsets(chi, b2, size))
        engine.check_all("private bits")
        beta = _beta(size, 1)
        if any(int(v) > beta or (int(v) & 1) != int(parity[j]) for j, v in enumerate(t[:, 0])):
            raise DeviationError(f"party {engine.session.parties[owner]!r}'s bits differ between Z_2 and the field "
                                 "(the private bits' check failed)")
        out_bits.append(_head(b2, size))
        out_field.append(select_limbs(field[:size], [0], engine.keys((q,))))
    return _concat_bits(out_bits, 0), AuthShares.concat(out_field)


def _reduce_once(engine: Any, planes: AuthBits, q: int) -> AuthBits:
    """x mod q for x < 2q on bit planes (w, N): x - q where x >= q (w + 1 AND gates for the
    comparison and the subtraction, w for the selection)."""
    from ..additive.convert import add_public
    from ..api import stack_bits

    w = q.bit_length()
    count = planes.shape[1]
    ext = stack_bits([planes[j] for j in range(w)] + [engine.zero_bits((), count)])
    d, ge = add_public(engine, ext, (1 << (w + 1)) - q)        # x - q mod 2^(w+1); carry out = [x >= q]
    return planes ^ (ge & (ext ^ d)[:w])


def _random_residues_private(engine: Any, count: int, q: int) -> tuple[AuthBits, AuthShares]:
    """r = sum_i r_i mod q with its bits, r_i uniform below q drawn by party i: i's bits as
    :func:`private_bits` (no products), each r_i reduced mod q in Z_2 (a deviating party's may
    be q or more), the parties' added by binary modular adders; in the field the sum is linear."""
    from ..additive.convert import mod_add_bits

    w = q.bit_length()
    words = (count + 63) // 64
    n = engine.parties
    # every AND of the reductions, the sums and the final subtraction from one checked batch
    engine.reserve_bit_triples(words * (n * (2 * w + 2) + (n - 1) * (3 * w + 3) + 2 * w + 2))
    planes: AuthBits | None = None
    field: AuthShares | None = None
    for owner in range(n):
        bits = None
        if engine.me == owner:
            r = engine.prg.below(q, count)
            bits = ((r[None, :] >> np.arange(w, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)
        b2, bf = private_bits(engine, bits, owner, w * count, q)
        mine = AuthBits.of(engine, b2.plain().reshape(w, count), b2.macs.reshape(-1, w, count),
                           b2.keys.reshape(-1, w, count))
        mine = _reduce_once(engine, mine, q)      # below q, as the field has it
        value = _weighted_bits(engine, bf, w, count, q)
        planes = mine if planes is None else mod_add_bits(engine, planes, mine, q)
        field = value if field is None else field + value
    return planes, field


def mod_to_bits(engine: Any, x: AuthShares) -> AuthBits:
    """Z_q -> Z_2 for one prime q of w bits: bit planes (w, ...) of the residues (module notes)."""
    from ..additive.convert import ripple_add
    from ..api import stack_bits

    if not isinstance(x, AuthShares):
        raise TypeError(f"the active engine converts authenticated shares, got {type(x).__name__}")
    if len(x.moduli) != 1:
        raise ValueError(f"mod_to_bits converts one modulus at a time, got the basis {x.moduli}")
    (q,) = x.moduli
    w = q.bit_length()
    flat = x.reshape(x.size)
    count = flat.size
    if 2 * _beta(1 << 10, 1) < q:
        rb, r = _random_residues_private(engine, count, q)
    else:  # too narrow a prime for the private bits' check in useful batches
        rb, r = _random_residues_dabits(engine, count, q)
    engine.reserve_bit_triples(((count + 63) // 64) * (2 * w + 2))
    keys = min(flat.keys, r.keys)  # x may come from a basis whose narrowest limb needs more keys
    flat, r = select_limbs(flat, [0], keys), select_limbs(r, [0], keys)
    c = engine.open_partial(flat + r, "Z_q -> Z_2")[:, 0]          # uniform mod q
    cp = _public_planes(engine, c, w)
    one = engine.constant_bits(1, (), count)
    s = ripple_add(engine, cp, ~rb, carry_in=one)       # c - r + 2^w: w planes and the carry [c >= r]
    borrow = ~s[w]
    add_q = stack_bits([borrow if (q >> j) & 1 else engine.zero_bits((), count) for j in range(w)])
    y = ripple_add(engine, s[:w], add_q)
    return _reshape_planes(stack_bits([y[j] for j in range(w)]), x.shape)


def _public_planes(engine: Any, values: np.ndarray, w: int) -> AuthBits:
    """Public integers (N,) as authenticated bit planes (w, N) of their w low bits."""
    v = np.asarray(values, np.uint64)
    bits = ((v[None, :] >> np.arange(w, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)
    return engine.xor_public_bits(engine.zero_bits((w,), len(v)), pack_bits(bits))


def _reshape_planes(p: AuthBits, shape: tuple[int, ...]) -> AuthBits:
    plain = p.plain()
    w = plain.shape[0]
    peers = p.macs.shape[0]
    return AuthBits.of(p.engine, plain.reshape((w,) + shape), p.macs.reshape((peers, w) + shape),
                       p.keys.reshape((peers, w) + shape))


# -- fixed Hamming weight ------------------------------------------------------------------------------
def _lanes(x: AuthBits, keep: Any) -> AuthBits:
    """The lanes ``keep`` (an index array or slice) of planes (w, N)."""
    return AuthBits.of(x.engine, x.plain()[:, keep], x.macs[:, :, keep], x.keys[:, :, keep])


def _uniform_below(engine: Any, bound: int, count: int) -> AuthBits:
    """``count`` uniform integers below ``bound`` as bit planes (k, count), k = bitlen(bound - 1):
    k random bits per draw, draws >= bound rejected (the outcome opened and checked)."""
    from ..additive.convert import compare_ge

    k = max(1, (bound - 1).bit_length())
    if bound == 1 << k:
        return engine.random_bits((k,), count)
    parts: list[AuthBits] = []
    have = 0
    while have < count:
        draw = int((count - have) * (1 << k) / bound * 1.1) + 64
        r = engine.random_bits((k,), draw)
        ge = engine.open_bits_partial(compare_ge(engine, r, _public_planes(engine, np.full(draw, bound, np.uint64), k)))
        engine.check_all("fixed weight: draws")
        keep = np.flatnonzero(~ge)[:count - have]
        parts.append(_lanes(r, keep))
        have += len(keep)
    return _concat_bits(parts, 1)


def _popcount(engine: Any, planes: AuthBits) -> AuthBits:
    """The number of ones among the planes (M, N) of every lane: bit planes (bitlen(M), N), by
    an adder tree whose every level is one ripple addition over all its pairs at once."""
    from ..additive.convert import ripple_add

    m, n = planes.shape
    nums = AuthBits.of(engine, planes.plain().reshape(1, m * n), planes.macs.reshape(-1, 1, m * n),
                       planes.keys.reshape(-1, 1, m * n))          # number j in lanes [j n, (j + 1) n)
    count, width = m, 1
    while count > 1:
        if count % 2:
            nums = _concat_bits([nums, engine.zero_bits((width,), n)], 1)
            count += 1
        half = count // 2 * n
        nums = ripple_add(engine, _lanes(nums, slice(0, half)), _lanes(nums, slice(half, 2 * half)))
        count //= 2
        width += 1
    return nums


def _equals_public(engine: Any, planes: AuthBits, value: int) -> AuthBits:
    """[x == value] for bit planes (w, N): the AND of every plane's agreement with the value."""
    from ..api import stack_bits

    w = planes.shape[0]
    if value >> w:
        return engine.zero_bits((), planes.shape[1])
    agree = [planes[j] if (value >> j) & 1 else ~planes[j] for j in range(w)]
    while len(agree) > 1:
        half = len(agree) // 2
        both = stack_bits(agree[:half]) & stack_bits(agree[half:2 * half])
        agree = [both[j] for j in range(half)] + agree[2 * half:]
    return agree[0]


def hamming_weight(engine: Any, count: int, length: int, weight: int, moduli: Any) -> AuthShares:
    """``count`` vectors of ``length`` entries in {-1, 0, 1} with exactly ``weight`` nonzero
    entries, uniformly placed, signs uniform, over the basis: (count, length).

    Each entry is nonzero independently with probability weight / length exactly (a uniform u
    below ``length``, from rejection-sampled bits, compared with ``weight``); the ones of a
    vector are counted by an adder tree and [count == weight] is opened (checked): a vector of
    i.i.d. indicators conditioned on its weight is uniform over the placements of that weight,
    so the kept vectors have exactly the law asked for, and which draws were kept says nothing
    of them. About sqrt(2 pi weight) draws per vector; then the sign bits, and ind - 2 (ind AND
    sign) into the basis by :func:`planes_to_mod`. Statistical distance 0."""
    from ..additive.convert import compare_ge

    mods = basis(moduli)
    count, length, weight = int(count), int(length), int(weight)
    if not 0 < weight <= length:
        raise ValueError(f"weight must be in 1..length ({length}), got {weight}")
    if count < 1:
        raise ValueError(f"a positive vector count, got {count}")
    k = max(1, (length - 1).bit_length())
    kept: list[AuthBits] = []
    pending = count
    while pending:
        u = _uniform_below(engine, length, pending * length)                       # (k, pending length)
        ind = ~compare_ge(engine, u, _public_planes(engine, np.full(pending * length, weight, np.uint64), k))
        planes = AuthBits.of(engine, ind.plain().reshape(pending, length).T,
                             ind.macs.reshape(-1, pending, length).transpose(0, 2, 1),
                             ind.keys.reshape(-1, pending, length).transpose(0, 2, 1))   # (length, pending)
        ok = engine.open_bits_partial(_equals_public(engine, _popcount(engine, planes), weight))
        engine.check_all("fixed weight: weights")
        keep = np.flatnonzero(ok)[:pending]
        if len(keep):
            kept.append(_lanes(planes, keep))
        pending -= len(keep)
    ind = _concat_bits(kept, 1)                                                   # (length, count)
    sign = engine.random_bits((length,), count)
    both = ind & sign
    flat = AuthBits.of(engine, np.stack([ind.plain().reshape(-1), both.plain().reshape(-1)]),
                       np.stack([ind.macs.reshape(ind.macs.shape[0], -1), both.macs.reshape(both.macs.shape[0], -1)], 1),
                       np.stack([ind.keys.reshape(ind.keys.shape[0], -1), both.keys.reshape(both.keys.shape[0], -1)], 1))
    values = planes_to_mod(engine, flat, [1, -2], mods)                            # (length count,)
    share = values.share.reshape(length, count, -1).transpose(1, 0, 2)
    mac = values.mac.reshape(values.keys, length, count, -1).transpose(0, 2, 1, 3)
    return AuthShares(engine, np.ascontiguousarray(share), np.ascontiguousarray(mac), mods)
