"""Checks over the CRT integer of an RNS basis, and lifts of small integers between its limbs,
for the active engine (:mod:`.dabits`, :mod:`.ranges`).

A value authenticated in every limb of a basis is, by the CRT, one residue mod Q, the product
of the limbs. Whether it is also one *small integer* (the same one in every limb) is what a
party that inputs limb by limb could get wrong on purpose. The check here: S masked subset
sums T_j = sum_l chi_jl [v_l] + [m_j] with chi from a joint coin toss drawn after every input,
opened in every limb, rebuilt by CRT and bounded. Fix every coin but chi_jl: both values pass
only if v_l itself lies within the bound of 0 mod Q, so a value that is not such an integer
fails each sum with probability at least 1/2, and the S sums (independent coins) pass it with
at most 2^-S. The honest party's mask makes every opening within 2^-40 of independent of the
values (:data:`MASK_SLACK` more bits than the sum).

:func:`lift` uses it to move integers known to be small in an *anchor* of wide limbs into the
other limbs of a basis: every party inputs r_i over every limb, the sums bound r = sum_i r_i,
then c = y + r is opened over the anchor (where it is the integer itself) and y = c - r in
the other limbs. Only inputs, no products.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import ConfigError, DeviationError
from ...kernels.modq import add_mod, basis, mul_mod, sub_mod
from .shares import AuthShares

__all__ = ["CHUNK", "HELPER_START", "LIFT_BATCH", "MASK_SLACK", "WIDE", "add_helpers", "crt", "crt_into", "flat_auth", "from_flat", "lift",
           "lift_bound", "lift_fits", "select_limbs", "subset_sums", "uniform_bits", "wide_anchor"]

MASK_SLACK = 40        # bits by which a mask outweighs the sum it hides
LIFT_BATCH = 1 << 18   # values lifted together at most
CHUNK = 1 << 15        # lanes per block of the subset sums
HELPER_START = 1 << 61  # helper primes (for a basis too narrow for a check) are the primes above this
WIDE = 1 << 57         # anchor limbs are at least this wide


def crt(residues: np.ndarray, moduli: Sequence[int]) -> list[int]:
    """Rows of residues (S, L) as integers in [0, prod q)."""
    big = math.prod(moduli)
    coef = [(big // q) * pow(big // q, -1, q) for q in moduli]
    return [sum(int(r) * c for r, c in zip(row, coef)) % big for row in residues]


def crt_into(residues: np.ndarray, moduli: Sequence[int], targets: Sequence[int]) -> np.ndarray:
    """Rows of residues (R, L) over ``moduli`` as the integers x in (-Q/2, Q/2] they stand for
    (Q = prod moduli), reduced into every target modulus: uint64 (R, len(targets)). Vectorised:
    Garner's mixed-radix digits v (x = v_0 + q_0 (v_1 + q_1 (v_2 + ...))), the sign from comparing
    them with Q/2's digits from the top, then Horner in each target. The same integers as
    :func:`crt` with the centring and :func:`~shaper.kernels.modq.lift_public`."""

    r = np.asarray(residues, dtype=np.uint64)
    mods = [int(q) for q in moduli]
    m = len(mods)
    digits = [r[:, 0].copy()]
    for lv in range(1, m):
        ql = mods[lv]
        qs = np.uint64(ql)
        t = r[:, lv] % qs
        for j in range(lv):
            t = sub_mod(t, digits[j] % qs, qs)
            t = mul_mod(t[:, None], np.full((len(t), 1), pow(mods[j], -1, ql), np.uint64), (ql,))[:, 0]
        digits.append(t)
    half, hd = math.prod(mods) // 2, []
    for q in mods:
        hd.append(half % q)
        half //= q
    above = np.zeros(len(r), bool)
    decided = np.zeros(len(r), bool)
    for lv in reversed(range(m)):
        h = np.uint64(hd[lv])
        above |= ~decided & (digits[lv] > h)
        decided |= digits[lv] != h
    big = math.prod(mods)
    out = np.empty((len(r), len(targets)), np.uint64)
    for c, q in enumerate(targets):
        q = int(q)
        qs = np.uint64(q)
        acc = digits[m - 1] % qs
        for lv in reversed(range(m - 1)):
            acc = mul_mod(acc[:, None], np.full((len(acc), 1), mods[lv] % q, np.uint64), (q,))[:, 0]
            acc = (acc + digits[lv] % qs) % qs
        out[:, c] = np.where(above, sub_mod(acc, np.uint64(big % q), qs), acc)
    return out


def subset_sums(chi: np.ndarray, x: np.ndarray, col_moduli: Sequence[int]) -> np.ndarray:
    """sum_l chi_jl x_l mod q_c: chi (..., S, N) of 0/1, x (..., N, C) residues < 2^62, column c
    mod ``col_moduli[c]``; (..., S, C) uint64 (leading axes: independent batches). Exact: 21-bit
    chunks summed in float64 (N 2^21 < 2^53), then combined mod q."""

    *lead, s, n = chi.shape
    cols = x.shape[-1]
    acc = [np.zeros((*lead, s, cols), np.float64) for _ in range(3)]
    mask = np.uint64((1 << 21) - 1)
    for start in range(0, n, CHUNK):
        c = chi[..., start:start + CHUNK].astype(np.float64)
        part = x[..., start:start + CHUNK, :]
        for k in range(3):
            acc[k] += c @ ((part >> np.uint64(21 * k)) & mask).astype(np.float64)
    mods = [int(q) for q in col_moduli]
    qs = np.asarray(mods, dtype=np.uint64)
    lo, mid, hi = (a.astype(np.uint64) % qs for a in acc)
    shift = [np.asarray([pow(2, b, q) for q in mods], dtype=np.uint64) for b in (21, 42)]
    out = add_mod(lo, mul_mod(mid, np.broadcast_to(shift[0], mid.shape), mods), qs)
    return add_mod(out, mul_mod(hi, np.broadcast_to(shift[1], hi.shape), mods), qs)


def flat_auth(x: AuthShares) -> tuple[np.ndarray, list[int]]:
    """(N, (1 + K) L) columns: the shares, then every key's MAC shares; and each column's modulus."""
    n, L = x.share.shape
    cols = np.concatenate([x.share] + [x.mac[k] for k in range(x.keys)], axis=1)
    return cols, list(x.moduli) * (1 + x.keys)


def from_flat(engine: Any, cols: np.ndarray, moduli: tuple[int, ...], keys: int) -> AuthShares:
    L = len(moduli)
    share = cols[:, :L]
    mac = np.stack([cols[:, L * (1 + k):L * (2 + k)] for k in range(keys)])
    return AuthShares(engine, np.ascontiguousarray(share), mac, moduli)


def select_limbs(x: AuthShares, limbs: Sequence[int], keys: int) -> AuthShares:
    idx = list(limbs)
    return AuthShares(x.engine, np.ascontiguousarray(x.share[..., idx]),
                      np.ascontiguousarray(x.mac[:keys][..., idx]), tuple(x.moduli[i] for i in idx))


def uniform_bits(prg: Any, bits: int, count: int) -> np.ndarray:
    """``count`` uniform integers below 2^bits from the CSPRNG: uint64 up to 63 bits, else
    Python integers (object)."""
    if bits <= 63:
        return prg.below(1 << bits, count)
    words = (bits + 63) // 64
    raw = prg.uint64((count, words))
    top = bits - 64 * (words - 1)
    out = np.empty(count, dtype=object)
    for i in range(count):
        v = 0
        for w in range(words):
            v |= int(raw[i, w]) << (64 * w)
        out[i] = v & ((1 << bits) - 1) if top else v
    return out


def lift_bound(batch: int, parties: int, width: int) -> tuple[int, int]:
    """(beta, mask bits) of a lift batch: the largest T_j an honest run opens."""
    honest = batch * parties * (1 << width)
    m_bits = MASK_SLACK + honest.bit_length()
    return honest + parties * (1 << m_bits), m_bits


def lift_fits(anchor: Sequence[int], span: int, parties: int, batch: int = 1 << 12) -> bool:
    width = int(span).bit_length() + MASK_SLACK
    return 2 * (span + 1 + lift_bound(batch, parties, width)[0]) < math.prod(anchor)


def wide_anchor(mods: Sequence[int], span: int, parties: int, minimum: int = 1) -> tuple[int, ...]:
    """An anchor a lift of values up to ``span`` fits in (batches of 4,096): the limbs of
    ``mods`` of 58 bits or more, widest first, then helper primes near 2^61, at least
    ``minimum`` of them. Every party computes it from public numbers alone."""
    anchor: tuple[int, ...] = ()
    for q in sorted(mods, reverse=True):
        if q < WIDE or (len(anchor) >= minimum and lift_fits(anchor, span, parties)):
            break
        anchor += (q,)
    return add_helpers(anchor, mods, lambda a: len(a) >= minimum and lift_fits(a, span, parties))


def add_helpers(anchor: tuple[int, ...], exclude: Sequence[int], enough: Any) -> tuple[int, ...]:
    """``anchor`` extended by the primes above :data:`HELPER_START` that are not in
    ``exclude``, in order, until ``enough(anchor)`` (at least one added when ``anchor`` is
    empty). Every party computes it from public numbers alone."""
    import gmpy2

    p = HELPER_START
    while not anchor or not enough(anchor):
        p = int(gmpy2.next_prime(p))
        if p not in exclude:
            anchor += (p,)
    return anchor


def lift(engine: Any, y: AuthShares, bound: int, target: Any) -> AuthShares:
    """Integers y in [0, bound), authenticated over an anchor basis A, into every limb of
    ``target`` (A's own limbs kept, the others lifted).

    Each party inputs, over A and the other limbs, r_i uniform in [0, 2^(k + 40)) (k =
    bitlen(bound - 1)) and S masks; S subset sums of r = sum_i r_i, masked, are opened over every
    limb and rebuilt as integers (CRT), each at most beta (as the daBits' check: a residue r_l
    that is not an integer within beta of 0 fails each sum with probability 1/2, so all pass
    with at most 2^-S); then c = y + r is opened over A, where |y + r| < Q_A / 2 makes it the
    integer itself, and y = c - r in the other limbs. The honest party's r hides y to 2^-40;
    only inputs, no products."""
    mods = basis(target)
    anchor = y.moduli
    rest = tuple(q for q in mods if q not in anchor)
    keys = engine.keys(mods)
    flat = y.reshape(y.size)
    if rest:
        width = int(bound - 1).bit_length() + MASK_SLACK
        batch = min(flat.size, LIFT_BATCH)
        while batch > 1 and 2 * (bound + lift_bound(batch, engine.parties, width)[0]) >= math.prod(anchor):
            batch //= 2
        if 2 * (bound + lift_bound(batch, engine.parties, width)[0]) >= math.prod(anchor):
            raise ConfigError(f"the anchor {anchor} is too narrow to lift values below {bound}")
        pieces = [_lift_batch(engine, flat[i:i + batch], width, anchor, rest) for i in range(0, flat.size, batch)]
        moved = AuthShares.concat(pieces)
    cols_share, cols_mac = [], []
    for q in mods:
        src, at = (flat, anchor.index(q)) if q in anchor else (moved, rest.index(q))
        cols_share.append(src.share[:, at])
        cols_mac.append(src.mac[:keys, :, at])
    out = AuthShares(engine, np.stack(cols_share, axis=-1), np.stack(cols_mac, axis=-1), mods)
    return out.reshape(y.shape)


def _lift_batch(engine: Any, y: AuthShares, width: int, anchor: tuple[int, ...], rest: tuple[int, ...]) -> AuthShares:
    s, n, size = engine.soundness, engine.parties, y.size
    union = anchor + rest
    beta, m_bits = lift_bound(size, n, width)
    r = masks = None
    for owner in range(n):
        mine = uniform_bits(engine.prg, width, size) if engine.me == owner else None
        big = uniform_bits(engine.prg, m_bits, s) if engine.me == owner else None
        part = engine.share_mod(mine, owner=owner, moduli=union)
        mask = engine.share_mod(big, owner=owner, moduli=union)
        if part.shape != (size,) or mask.shape != (s,):
            raise DeviationError(f"party {engine.session.parties[owner]!r} input a lift's values or masks of shapes "
                                 f"{part.shape} and {mask.shape}, ({size},) and ({s},) expected")
        r = part if r is None else r + part
        masks = mask if masks is None else masks + mask
    coins = engine.joint_coins("lift-coins")
    chi = (coins.uint64((s, size)) & np.uint64(1)).astype(bool)
    cols, col_mods = flat_auth(r)
    sums = from_flat(engine, subset_sums(chi, cols, col_mods), union, r.keys)
    t = engine.open_partial(sums + masks, "lift: range")
    keys = min(y.keys, r.keys)
    c = engine.open_partial(select_limbs(y, range(len(anchor)), keys) + select_limbs(r, range(len(anchor)), keys), "lift")
    engine.check_all("lift")
    if any(v > beta for v in crt(t, union)):
        raise DeviationError("the lift's range check failed: a party's inputs are not one small integer across the "
                             "limbs")
    r_rest = select_limbs(r, [union.index(q) for q in rest], engine.keys(anchor + rest))
    return engine.add_public_residues(-r_rest, crt_into(c, anchor, rest))
