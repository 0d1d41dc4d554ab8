"""Range-checked inputs: a party inputs a vector and proves, to every other party, that every
entry lies in an agreed interval [lo, hi] before anything depends on it. Nothing about the
entries is revealed beyond that.

**How** (an owner's proof over the authenticated values, QuickSilver's polynomial check run
pairwise; Yang, Sarkar, Weng, Wang, CCS 2021). The owner o commits, with the correlated OTs of
MASCOT's authentication (:func:`~.cope.cope`, o the only sender), its entries x, the
base-2^d digits (d = :data:`DIGIT_BITS`) of u = x - lo and of v = hi - x (v is skipped when
hi - lo = 2^k - 1), and a few random values for masks. For every other party i and each of its
MAC keys Delta = alpha_i^(k) the pair then holds a VOLE: i has K_y = M_y + Delta y for every
committed y, o has y and M_y. With coefficients chi from a joint coin toss (drawn after the
commitments), o proves to i:

* **linear**: x - lo - sum_t 2^(d t) u_t = 0 and hi - x - sum_t 2^(d t) v_t = 0 for every entry:
  o sends U = sum_j chi_j M_(z_j) for the combined relation z; i checks sum_j chi_j K_(z_j) = U
  (i could compute U itself when z = 0, so it learns nothing);
* **digits**: every digit y of width w satisfies P(y) = prod_(t < 2^w) (y - t) = 0: i computes
  prod_t (K_y - t Delta), a polynomial of degree 2^w in Delta whose top coefficient is P(y);
  o sends the lower 2^w coefficients of sum_j chi_j prod_t (M_(y_j) + Delta (y_j - t)), masked
  by a random polynomial made of 2^w - 1 committed random values (so they are uniform), and i
  checks the two sides agree at its Delta.

A digit outside [0, 2^w), or a relation that does not hold, leaves a nonzero polynomial of
degree <= 2^w in Delta, which vanishes at i's secret Delta (uniform over B_q values,
:mod:`.shares`) with probability <= 2^w / B_q; the coin leaves a nonzero combination except
with probability 1/q; each of i's K keys checks independently: the proof passes a false
statement with probability <= ((2^w + 1) / B_q)^K (2^-71.8 at d = 4 with two 40-bit keys). Then,
as integers, u, v in [0, 2^k) with u + v = hi - lo and 2^(k+1) < q, so lo <= x <= hi exactly: an
entry one above the bound is refused, the bound itself accepted. A failed proof makes i raise
:class:`~shaper.errors.DeviationError` naming the owner; the others stop when i does.

**Commitments.** Batches of :data:`~.vole.SILENT_MIN` values or more (or what the pool holds)
take the engine's pairwise silent pool (:mod:`.vole` with ``pairwise``): the owner's pool values
y, each pair (o, i) holding K_i = M_y + alpha_i y, and the owner's broadcast corrections x - y
(one word per value and verifier, against COPE's 40 per key). Smaller batches use COPE
(:func:`~.cope.cope_checked`). The owner's polynomial sums take e_k(y, y - 1, ...) from a table
of the 2^w digit values, so they cost 2^w products per digit instead of 2^(2w - 1).

Before any proof, three checks: the batch also authenticates one random value, and a random
combination of the batch plus it is opened into the engine's MAC check, which runs at once
(MASCOT's check that the owner's correlated OTs used one value each, and that every party's
*global* key was one value); then every verifier answers for its own pairwise VOLE on that
opened combination and the owner compares (:func:`~.cope.cope_checked`: a verifier
chooses its key row by row, and two verifiers shifting theirs by +d and -d on one chunk keep
the global key right while their pairwise VOLEs, and so the proofs, would give entries away;
every chunk carries a fresh uniform value of the owner's, so a varied key cannot answer; on the
pool, a key varied in its base leaves K_i off by a combination of the owner's uniform base
values, which the answer cannot predict either). Only then does the owner send its proofs; each
verifier has masks of its own. Cost per entry and other party: 1 + 2 ceil(k / d) committed
values (k = bitlen(hi - lo)), each 8 bytes (a correction) plus about 1 byte of pool on the pool,
8 bytes per bit of a MAC key (40) and key by COPE; the owner's polynomial work is 2^d products
per digit and key. One modulus at a time.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...errors import ConfigError, DeviationError, FrameError
from ...kernels.modq import add_mod, mul_mod, neg_mod, sub_mod
from .check import dot_mod, read_shape
from .cope import cope_checked
from .shares import AuthShares
from .vole import SILENT_MIN

__all__ = ["DIGIT_BITS", "check_one_integer", "digit_widths", "input_in_range", "input_in_range_anchor",
           "input_in_range_basis", "one_integer_fits", "refuse_outside"]

DIGIT_BITS = 4
MAX_ENTRIES = 1 << 24


def digit_widths(span: int, digit_bits: int = DIGIT_BITS) -> list[int]:
    """The digit widths (low to high) that cover [0, 2^k), k = bitlen(span)."""
    k = max(1, int(span).bit_length())
    return [digit_bits] * (k // digit_bits) + ([k % digit_bits] if k % digit_bits else [])


def _digits(values: np.ndarray, widths: list[int]) -> np.ndarray:
    """(N, D) digits of nonnegative integers (uint64), low digit first, in one pass per digit."""
    out = np.empty((len(values), len(widths)), np.uint64)
    shift = 0
    for t, w in enumerate(widths):
        out[:, t] = (values >> np.uint64(shift)) & np.uint64((1 << w) - 1)
        shift += w
    return out


def _poly_mul_linear(coeffs: list[np.ndarray], m: np.ndarray, c: np.ndarray, q: int) -> list[np.ndarray]:
    """coeffs(X) * (m + c X) mod q, coefficients as vectors (low to high)."""
    mods = (q,)
    qs = np.uint64(q)
    out = [mul_mod(coeffs[0][:, None], m[:, None], mods)[:, 0]]
    for e in range(1, len(coeffs)):
        out.append(add_mod(mul_mod(coeffs[e][:, None], m[:, None], mods)[:, 0],
                           mul_mod(coeffs[e - 1][:, None], c[:, None], mods)[:, 0], qs))
    out.append(mul_mod(coeffs[-1][:, None], c[:, None], mods)[:, 0])
    return out


@functools.lru_cache(maxsize=64)
def _elementary(w: int, q: int) -> list[list[int]]:
    """E[k][v] = e_k(v, v - 1, ..., v - 2^w + 1) mod q for v in [0, 2^w): the coefficient of X^k
    in prod_t (1 + (v - t) X)."""
    table = []
    for v in range(1 << w):
        poly = [1]
        for t in range(1 << w):
            c = v - t
            poly = [(a + (poly[i - 1] * c if i else 0)) % q for i, a in enumerate(poly + [0])]
        table.append(poly)
    return [[table[v][k] for v in range(1 << w)] for k in range((1 << w) + 1)]


def _digit_sums(y: np.ndarray, m_y: np.ndarray, chi: np.ndarray, w: int, q: int) -> list[int]:
    """The owner's sums over digits j of chi_j prod_t (m_j + (y_j - t) X), coefficients 0..2^w - 1.

    The coefficient of X^k is m^(2^w - k) e_k(y - 0, ..., y - 2^w + 1), and e_k of a digit in
    [0, 2^w) comes from a table: so the sum is sum_v E[k][v] (sum over digits of value v of
    chi m^(2^w - k)): 2^w vector products and grouped sums instead of 2^(2w - 1) products.
    Digits outside [0, 2^w) (only a deviating owner has them) take the product itself."""
    W = 1 << w
    qs = np.uint64(q)
    out = [0] * W
    bad = y >= np.uint64(W)
    if np.any(bad):  # a deviating owner's own proof: the product, term by term
        coeffs = [np.ones(int(bad.sum()), np.uint64)]
        for t in range(W):
            coeffs = _poly_mul_linear(coeffs, m_y[bad], sub_mod(y[bad], np.uint64(t), qs), q)
        out = [dot_mod(chi[bad], c, q) for c in coeffs[:W]]
        y, m_y, chi = y[~bad], m_y[~bad], chi[~bad]
    if not len(y):
        return out
    order = np.argsort(y, kind="stable")
    present, starts = np.unique(y[order], return_index=True)
    table = _elementary(w, q)
    power = chi.copy()  # chi m^p, p = 1 .. W
    for p in range(1, W + 1):
        power = mul_mod(power[:, None], m_y[:, None], (q,))[:, 0]
        k = W - p
        v = power[order]
        lo = np.add.reduceat(v & np.uint64(0xFFFFFFFF), starts)
        hi = np.add.reduceat(v >> np.uint64(32), starts)
        row = table[k]
        acc = out[k]
        for val, a, b in zip(present.tolist(), lo.tolist(), hi.tolist()):
            acc += row[val] * ((b << 32) + a)
        out[k] = acc % q
    return out


def _horner(coeffs: list[int], delta: int, q: int) -> int:
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * delta + c) % q
    return acc


def input_in_range(engine: Any, values: Any, *, owner: int, q: int, lo: int, hi: int, keys: int | None = None,
                   digits: bool = False) -> Any:
    """The owner's integers, authenticated mod q, each proven to lie in [lo, hi] (module notes).
    Every party passes the same owner, q, lo and hi; ``values`` matters at the owner only, which
    refuses (ValueError, nothing sent) an entry outside the interval. ``keys``: MAC keys per
    value (default: what q needs; more where the result joins a basis that needs more).
    ``digits``: also return the committed digits of x - lo, authenticated, (N, D)."""
    lo, hi, q = int(lo), int(hi), int(q)
    if hi < lo:
        raise ConfigError(f"an empty range [{lo}, {hi}]")
    widths = digit_widths(hi - lo)
    k = sum(widths)
    if 1 << (k + 1) >= q:
        raise ConfigError(f"the range [{lo}, {hi}] spans {k} bits; a range check mod q needs 2^(k+1) < q "
                          f"({q.bit_length()}-bit q)")
    ses, me = engine.session, engine.me
    keys = max(engine.keys((q,)), int(keys or 0))
    tag = engine._tag("range")
    # -- the owner checks its own entries and announces their count ----------------------------------
    if me == owner:
        x = np.asarray(values)
        if x.dtype.kind not in "iuO":
            raise TypeError(f"range-checked inputs are integers, got dtype {x.dtype}")
        flat = _owner_entries(x, lo, hi, q)
        refuse_outside(flat, lo, hi)
        shape = list(x.shape)
        if len(flat) > MAX_ENTRIES:
            raise ValueError(f"a range-checked input of {len(flat)} entries; at most {MAX_ENTRIES} at once")
        ses.broadcast(shape, tag + "/shape")
    else:
        shape = list(read_shape(ses, owner, tag + "/shape", MAX_ENTRIES))
    engine.openings.witness(np.asarray(shape, dtype=np.uint64), "range-checked input")
    n = math.prod(shape)
    with_v = (hi - lo) != (1 << k) - 1
    D = len(widths)
    classes = sorted(set(widths))
    # layout of the committed batch: x (n) | u digits (n D) | v digits (n D, optional) |
    # masks: per verifier, width class and key, 2^w - 1 values (each verifier its own: two
    # verifiers that pooled shared masks would cancel them) | one random value for the
    # consistency check
    verifiers = [i for i in range(engine.parties) if i != owner]
    mask_count = len(verifiers) * sum(((1 << w) - 1) * keys for w in classes)
    total = n + n * D * (2 if with_v else 1) + mask_count + 1
    if me == owner:
        # in [0, 2^k) for entries in range (2^(k+1) < q < 2^62); mod 2^64 keeps the digits of any
        # other (two's complement, as a deviating owner that skipped its refusal would send)
        if isinstance(flat, np.ndarray):  # int64 entries, lo, hi and q within 2^62: no overflow below
            u = (flat - np.int64(lo)).astype(np.uint64)
            residues = np.mod(flat, np.int64(q)).astype(np.uint64)
            top = (np.int64(hi) - flat).astype(np.uint64) if with_v else None
        else:
            u = np.array([(v - lo) % (1 << 64) for v in flat], dtype=np.uint64)
            residues = np.array([v % q for v in flat], dtype=np.uint64)
            top = np.array([(hi - v) % (1 << 64) for v in flat], dtype=np.uint64) if with_v else None
        batch = [residues, _digits(u, widths).ravel()]
        if top is not None:
            batch.append(_digits(top, widths).ravel())
        batch.append(engine.prg.below(q, mask_count + 1))
        committed = np.concatenate(batch)
    else:
        committed = np.zeros(total, np.uint64)
    parts, zparts, z = _commit(engine, committed, q, keys, owner)  # owner: {i: S_i}; i: {owner: K_i}
    qs = np.uint64(q)
    alpha = engine.alpha(q)[:keys]
    # every committed value and every chunk's check value z, authenticated: the owner's share is
    # the value, its MAC share alpha_o y + sum_i S_i; a verifier's share 0, its MAC share K_i
    def pairwise(peer: int) -> np.ndarray:
        return np.concatenate([parts[peer], zparts[peer]], axis=1)  # (keys, total + chunks)

    if me == owner:
        values_all = np.concatenate([committed, z])
        mac = mul_mod(values_all[None, :, None], alpha[:, None, None], (q,))[..., 0]
        for peer in parts:
            mac = add_mod(mac, pairwise(peer), qs)
    else:
        mac = pairwise(owner)
        values_all = np.zeros(mac.shape[1], np.uint64)
    width = mac.shape[1]
    batch_shares = AuthShares(engine, values_all[:, None], mac[:, :, None], (q,))
    coins = engine.joint_coins("range-coins")
    weights = coins.below(q, width)
    weights[total - 1] = 1  # the batch's own random value, which makes the opening uniform
    combined = engine.mul_public_shares(batch_shares, weights[:, None]).sum(axis=0)
    opened = int(engine.open_partial(combined, "range-checked input")[0])
    # the MAC check before any proof is sent: every party's global key was one value throughout
    # the commitments, and every party drew the same coins (the views are compared)
    engine.check("range-checked input")
    # ... and each verifier's *own* key was one value too (two verifiers that shift theirs by +d
    # and -d on one chunk keep the global key right): each answers for its pairwise VOLE on the
    # combination just opened, and the owner compares before it sends anything that depends on
    # the entries. A verifier that varied its key must predict (Delta_c - alpha) z_c to answer.
    if me == owner:
        answers = {peer: ses.recv_array(peer, tag + "/keys", dtype=np.uint64, shape=(keys,)) for peer in parts}
        bad = []
        for peer, answer in sorted(answers.items()):
            expect = [(-dot_mod(weights, pairwise(peer)[k], q)) % q for k in range(keys)]
            if [int(v) for v in answer] != expect:
                bad.append(ses.parties[peer])
        if bad:
            raise DeviationError(f"party {', '.join(map(repr, bad))} did not use one MAC key throughout its correlated "
                                 "OTs in a range-checked input; no proof was sent")
    else:
        k_all = pairwise(owner)
        answer = [(dot_mod(weights, k_all[k], q) - int(alpha[k]) * opened) % q for k in range(keys)]
        ses.send(owner, np.array(answer, dtype=np.uint64), tag + "/keys")
    chi_lin = coins.below(q, n * (2 if with_v else 1))
    chi_dig = coins.below(q, n * D * (2 if with_v else 1))
    # -- views: for each key, the pairwise M (owner, per verifier) or K (verifier) of every value -----
    place = np.array([(1 << sum(widths[:t])) % q for t in range(D)], dtype=np.uint64)  # digit t's place value
    off_u = n
    off_v = n + n * D
    off_mask = n + n * D * (2 if with_v else 1)
    digit_width = np.tile(np.array(widths), n * (2 if with_v else 1))  # width of every digit in order

    def linear(vals: np.ndarray, key: int, verifier: bool) -> int:
        """sum chi (z) over the linear relations, for pairwise values ``vals`` (M or K) of one key;
        public constants count on the verifier's side only (K_c = Delta c)."""
        xs_ = vals[:n]
        du = vals[off_u:off_u + n * D].reshape(n, D)
        zu = sub_mod(xs_, _weighted(du, place, q), qs)
        if verifier:
            zu = sub_mod(zu, np.full(n, mul_int(int(alpha[key]), lo, q), np.uint64), qs)
        z = [zu]
        if with_v:
            dv = vals[off_v:off_v + n * D].reshape(n, D)
            zv = neg_mod(add_mod(xs_, _weighted(dv, place, q), qs), qs)
            if verifier:
                zv = add_mod(zv, np.full(n, mul_int(int(alpha[key]), hi, q), np.uint64), qs)
            z.append(zv)
        return dot_mod(chi_lin, np.concatenate(z), q)

    mask_at = {}
    pos = off_mask
    for verifier in verifiers:
        for w in classes:
            for key in range(keys):
                mask_at[(verifier, w, key)] = pos
                pos += (1 << w) - 1
    digits_all = committed[off_u:off_mask] if me == owner else None
    if me == owner:
        for peer, s_part in sorted(parts.items()):
            msg = []
            for key in range(keys):
                m_vals = neg_mod(s_part[key], qs)  # M = -S: K_i = M + Delta y
                msg.append(linear(m_vals, key, False))
                m_dig = m_vals[off_u:off_mask]
                for w in classes:
                    sel = digit_width == w
                    # the top coefficient is prod (y - t) = 0 for a digit in range: not sent
                    sums = _digit_sums(digits_all[sel], m_dig[sel], chi_dig[sel], w, q)
                    start = mask_at[(peer, w, key)]
                    r = committed[start:start + (1 << w) - 1]
                    m_r = m_vals[start:start + (1 << w) - 1]
                    mask = [int(m_r[0])] + [(int(r[e - 1]) + int(m_r[e])) % q for e in range(1, (1 << w) - 1)] + \
                        [int(r[-1])]
                    msg.extend((s + mk) % q for s, mk in zip(sums, mask))
            ses.send(peer, np.array(msg, dtype=np.uint64), tag + "/proof")
        return _result(batch_shares, n, D, shape, digits)
    # -- a verifier checks the owner's proof with each of its keys --------------------------------------
    expect = keys * (1 + sum(1 << w for w in classes))
    proof = ses.recv_array(owner, tag + "/proof", dtype=np.uint64, shape=(expect,))
    if np.any(proof >= qs):
        raise FrameError(f"party {ses.parties[owner]!r} sent a range proof out of range")
    k_all = parts[owner]
    ok = True
    at = 0
    for key in range(keys):
        delta = int(alpha[key])
        k_vals = k_all[key]
        ok &= linear(k_vals, key, True) == int(proof[at])
        at += 1
        k_dig = k_vals[off_u:off_mask]
        for w in classes:
            sel = digit_width == w
            kd = k_dig[sel]
            prod = np.ones(int(sel.sum()), np.uint64)
            for t in range(1 << w):
                prod = mul_mod(prod[:, None], sub_mod(kd, np.uint64(mul_int(delta, t, q)), qs)[:, None], (q,))[:, 0]
            lhs = dot_mod(chi_dig[sel], prod, q)
            start = mask_at[(me, w, key)]
            k_r = k_vals[start:start + (1 << w) - 1]
            lhs = (lhs + _horner([int(v) for v in k_r], delta, q)) % q
            coeffs = [int(v) for v in proof[at:at + (1 << w)]]
            at += 1 << w
            ok &= lhs == _horner(coeffs, delta, q)
    if not ok:
        raise DeviationError(f"party {ses.parties[owner]!r}'s range proof failed: an entry outside [{lo}, {hi}] or "
                             "a proof that does not match its commitments; nothing depends on the input")
    return _result(batch_shares, n, D, shape, digits)


def _commit(engine: Any, committed: np.ndarray, q: int, keys: int, owner: int
            ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], np.ndarray]:
    """The owner's commitments as pairwise VOLEs with every verifier, in the form of
    :func:`~.cope.cope_checked`: on the engine's pairwise silent pool (:mod:`.vole`) for batches of
    :data:`~.vole.SILENT_MIN` or more (or what the pool holds), else by COPE.

    On the pool, the owner takes pool values y (known to it, with parts S_i per verifier i, who
    holds K_i = alpha_i y - S_i) and broadcasts the corrections x - y; a verifier adds alpha_i
    (x - y) to its K_i. A verifier's key enters only its local products and the first run's
    base (COPE, no check column): had it varied its key there, its K_i would be off by a
    combination of the owner's uniform base values, which the pairwise answers below (weights
    over every committed value) expose except with probability 1/q. So no chunk check values
    are needed: the second and third results are empty. The corrections join the views, which
    the MAC check compares before any proof."""
    pool = getattr(engine, "pairwise", None)
    total = len(committed)
    if pool is None or not (total >= getattr(engine, "silent_min", SILENT_MIN) or pool.available(q, keys, owner) >= total):
        return cope_checked(engine, committed, q, keys, owner)
    ses, me = engine.session, engine.me
    qs = np.uint64(q)
    values, macs = pool.take(engine, q, keys, owner, total)
    tag = engine._tag("range-correct")
    if me == owner:
        corrections = sub_mod(committed, values, qs)
        ses.broadcast(corrections, tag)
        peers = [p for p in range(engine.parties) if p != me]
        parts = {p: macs[i * keys:(i + 1) * keys] for i, p in enumerate(peers)}
    else:
        corrections = ses.recv_array(owner, tag, dtype=np.uint64, shape=(total,))
        if np.any(corrections >= qs):
            raise FrameError(f"party {ses.parties[owner]!r} sent a commitment correction out of range")
        alpha = engine.alpha(q)[:keys]
        parts = {owner: add_mod(macs, mul_mod(alpha[:, None, None], corrections[None, :, None], (q,))[..., 0], qs)}
    engine.openings.witness(corrections, "range-checked input: commitments")
    return parts, {p: np.zeros((keys, 0), np.uint64) for p in parts}, np.zeros(0, np.uint64)


def _result(batch: AuthShares, n: int, digits_per_entry: int, shape: list[int], digits: bool) -> Any:
    x = batch[:n].reshape(tuple(shape))
    return (x, batch[n:n + n * digits_per_entry].reshape(n, digits_per_entry)) if digits else x


def _owner_entries(x: np.ndarray, lo: int, hi: int, q: int) -> np.ndarray | list[int]:
    """The owner's entries, flat: an int64 array where every entry, lo, hi and q lie within
    2^62 in magnitude (so v - lo, hi - v and v mod q cannot overflow), else Python integers."""
    limit = 1 << 62
    if x.dtype.kind == "i" and x.dtype.itemsize <= 8 and max(abs(lo), abs(hi), q) < limit:
        flat = x.astype(np.int64).ravel()
        if not flat.size or (int(flat.min()) > -limit and int(flat.max()) < limit):
            return flat
    return [int(v) for v in x.ravel()]


def refuse_outside(flat: np.ndarray | list[int], lo: int, hi: int) -> None:
    """The owner's own refusal of an entry outside [lo, hi] (ValueError, before anything is sent)."""
    if isinstance(flat, np.ndarray) and flat.dtype == np.int64 and max(abs(lo), abs(hi)) < 1 << 62:
        bad_at = np.flatnonzero((flat < lo) | (flat > hi))
        bad = [(int(i), int(flat[i])) for i in bad_at[:1]]
        outside = len(bad_at)
    else:
        every = [(i, v) for i, v in enumerate(flat) if not lo <= v <= hi]
        bad, outside = every[:1], len(every)
    if bad:
        i, v = bad[0]
        raise ValueError(f"entry {i} of the input is {v}, outside the agreed range [{lo}, {hi}] "
                         f"({outside} entries outside); nothing was sent")


def mul_int(a: int, b: int, q: int) -> int:
    return (a * b) % q


def _weighted(digits: np.ndarray, weights: np.ndarray, q: int) -> np.ndarray:
    """sum_t weights_t digits[:, t] mod q (digits (N, D) residues)."""
    qs = np.uint64(q)
    acc = np.zeros(len(digits), np.uint64)
    for t in range(digits.shape[1]):
        acc = add_mod(acc, mul_mod(digits[:, t:t + 1], np.full((len(digits), 1), weights[t], np.uint64), (q,))[:, 0], qs)
    return acc


# -- over an RNS basis ----------------------------------------------------------------------------------
DIGIT_CHECK_BATCH = 1 << 10   # digits per masked subset-sum check
DIGIT_CHECK_GROUP = 32        # batches of them summed in one product


def input_in_range_basis(engine: Any, values: Any, *, owner: int, moduli: tuple[int, ...], lo: int,
                         hi: int) -> AuthShares:
    """The owner's integers over an RNS basis, each proven to be one integer in [lo, hi] in every
    limb before anything depends on it.

    Digits proven limb by limb could differ between limbs, so three steps:
    1. the owner's proof above runs in each limb of an *anchor*: the basis' limbs of 58 bits or
       more and helper primes near 2^61, as many as step 3 needs;
    2. the digits must be one integer across the anchor. The owner's digits (4 bits) and S = 64
       masks of its own are combined in masked subset sums over every anchor limb, rebuilt as
       integers (CRT) and bounded by beta < min(anchor) - 16 (as the daBits' check). A digit that
       differs between two limbs has a CRT value at least min(anchor) - 16 away from 0, so each
       sum passes it with probability at most 1/2, and all pass with at most 2^-64. Then x =
       lo + sum 16^t u_t is one integer in [lo, hi] in every anchor limb (it is in each limb's
       proof);
    3. x - lo is lifted (:func:`~.dabits.lift`) into the basis' other limbs.
    The masks make the sums' openings 2^-40-close to independent of the digits."""
    from .lift import lift, wide_anchor

    mods = tuple(moduli)
    lo, hi = int(lo), int(hi)
    if hi < lo:
        raise ConfigError(f"an empty range [{lo}, {hi}]")
    if engine.me == owner:
        refuse_outside([int(v) for v in np.asarray(values).ravel()], lo, hi)
    if _small_fits(mods, hi - lo):
        return _small_over_basis(engine, values, owner, mods, lo, hi)
    # from public numbers only: the owner's count is not public yet
    anchor = wide_anchor(mods, hi - lo, engine.parties)
    keys = engine.keys(mods + tuple(q for q in anchor if q not in mods))
    x_a, shape = input_in_range_anchor(engine, values, owner=owner, anchor=anchor, lo=lo, hi=hi, keys=keys)
    # 3. into the rest of the basis
    return lift(engine, x_a - lo, hi - lo + 1, mods).reshape(shape) + lo


def input_in_range_anchor(engine: Any, values: Any, *, owner: int, anchor: tuple[int, ...], lo: int, hi: int,
                          keys: int) -> tuple[AuthShares, tuple[int, ...]]:
    """Steps 1 and 2 of :func:`input_in_range_basis`: the owner's integers proven within [lo, hi]
    in every limb of ``anchor`` and shown to be one integer across it. Returns (the entries,
    flat (count, len(anchor)), with ``keys`` MAC keys; the owner's announced shape)."""
    from .lift import crt

    lo, hi = int(lo), int(hi)
    xs, us = [], []
    shape: tuple[int, ...] = ()
    for q in anchor:
        x, u = engine._limb_in_range(values, owner, q, lo, hi, keys)
        shape = x.shape  # announced by the owner in the proof, the same at every party
        xs.append(x.reshape(x.size))
        us.append(u.reshape(u.size))
    x_a = _stack_limbs(engine, xs, anchor, keys)
    u_a = _stack_limbs(engine, us, anchor, keys)
    # 2. one integer across the anchor, digit by digit
    m_bits = 40 + (15 * DIGIT_CHECK_BATCH + 1).bit_length()
    beta = 15 * DIGIT_CHECK_BATCH + (1 << m_bits)
    if beta >= min(anchor) - 16:
        raise ConfigError(f"the anchor {anchor} is too narrow for the digit check")
    t = _masked_subset_sums(engine, u_a, owner, m_bits, "range-digits")
    engine.check("range-checked input: one integer in every limb")
    if any(v > beta for v in crt(t, anchor)):
        raise DeviationError(f"party {engine.session.parties[owner]!r}'s range-checked input is not one integer in "
                             "every limb (its digits differ between limbs); nothing depends on the input")
    return x_a, shape


def _masked_subset_sums(engine: Any, x: AuthShares, owner: int | None, m_bits: int, what: str) -> np.ndarray:
    """Per batch of DIGIT_CHECK_BATCH entries of ``x`` (flat, over its basis) and each of S =
    soundness coin vectors chi (drawn now, after every input): sum chi x plus a mask below
    2^m_bits that ``owner`` inputs in every limb (``owner`` None: one of every party's, summed),
    opened (not yet checked): (batches S, L)."""
    from .lift import flat_auth, from_flat, subset_sums, uniform_bits

    s = engine.soundness
    count = x.size
    batches = -(-count // DIGIT_CHECK_BATCH)
    masks = None
    for o in range(engine.parties) if owner is None else (owner,):
        m = engine.share_mod(uniform_bits(engine.prg, m_bits, batches * s) if engine.me == o else None,
                             owner=o, moduli=x.moduli)
        if m.shape != (batches * s,):
            raise DeviationError(f"party {engine.session.parties[o]!r} input masks of shape {m.shape} for a check that "
                                 f"takes {batches * s}")
        masks = m if masks is None else masks + m
    coins = engine.joint_coins(what)
    cols, col_mods = flat_auth(x)
    # every batch at once (zero rows pad the last; a zero adds nothing), a group of batches per
    # product to bound the memory
    padded = np.zeros((batches * DIGIT_CHECK_BATCH, cols.shape[1]), np.uint64)
    padded[:count] = cols
    padded = padded.reshape(batches, DIGIT_CHECK_BATCH, cols.shape[1])
    sums = []
    for b in range(0, batches, DIGIT_CHECK_GROUP):
        block = padded[b:b + DIGIT_CHECK_GROUP]
        chi = (coins.uint64((len(block), s, DIGIT_CHECK_BATCH)) & np.uint64(1)).astype(bool)
        sums.append(subset_sums(chi, block, col_mods).reshape(-1, cols.shape[1]))
    summed = from_flat(engine, np.concatenate(sums), x.moduli, x.keys)
    return engine.open_partial(summed + masks, "range-checked input: one integer in every limb")


def _small_bound(span: int, masks: int = 1) -> tuple[int, int]:
    """(beta, mask bits) of the small-range consistency check: a batch's subset sum of x - lo is
    at most DIGIT_CHECK_BATCH span, each of the ``masks`` masks (one per masking party) 40 bits
    wider."""
    top = DIGIT_CHECK_BATCH * span
    m_bits = 40 + top.bit_length()
    return top + masks * (1 << m_bits), m_bits


def one_integer_fits(q: int, span: int, masks: int) -> bool:
    """Whether :func:`check_one_integer` with an anchor of product ``q`` holds values up to
    ``span`` under ``masks`` masking parties: 2 (beta + span) < q (and, for a one-limb anchor,
    each mask below 2^63)."""
    beta, m_bits = _small_bound(span, masks)
    return 2 * (beta + span) < q and (m_bits <= 63 or q >= 1 << 64)


def check_one_integer(engine: Any, x: AuthShares, *, anchor: int | tuple[int, ...], span: int, owner: int | None,
                      what: str, blame: str) -> None:
    """Checks that every entry of ``x`` (flat (count, L), authenticated over ``x.moduli``) is,
    in every limb, the residue of its value over the ``anchor`` limbs (an index, or several:
    their CRT integer), taken as an integer in [0, span]. The caller knows the anchor value is
    such an integer (range proofs there, one integer across the anchor); the others may come
    from anywhere.

    Per batch of DIGIT_CHECK_BATCH entries and each of S = soundness coin vectors chi (drawn
    after every input), t = sum chi x + M opened in every limb: M the masks of ``owner`` (who
    knows x), or with ``owner`` None the sum of every party's (so the honest party's hides the
    sum), each an integer below 2^m, m 40 bits above the sum. Honest, t is one integer at most
    beta < q_a / 2 in every limb: t_a <= beta and t_a = t_j mod q_j. An entry whose residue in
    limb j is not its anchor integer changes (t_a, t_j) by a pair whose CRT value is at least
    q_a - span from that integer's, so of chi_i = 0 and 1 at most one passes (the masks, input
    before the coins, are fixed): each sum passes it with probability at most 1/2, all S with at
    most 2^-S. The openings are MAC-checked here, before the comparison; a failure raises
    :class:`~shaper.errors.DeviationError` with ``blame``."""
    from .lift import crt

    masks = 1 if owner is not None else engine.parties
    beta, m_bits = _small_bound(span, masks)
    limbs = (int(anchor),) if isinstance(anchor, (int, np.integer)) else tuple(int(i) for i in anchor)
    q_a = math.prod(int(x.moduli[i]) for i in limbs)
    if not one_integer_fits(q_a, span, masks):
        raise ConfigError(f"a {q_a.bit_length()}-bit anchor is too narrow to check values up to {span}")
    t = _masked_subset_sums(engine, x, owner, m_bits, what)
    engine.check(what)
    if len(limbs) == 1:
        t_a = t[:, limbs[0]]
        ok = bool(np.all(t_a <= np.uint64(beta)))
        for j, q in enumerate(x.moduli):
            ok &= j in limbs or bool(np.all(t_a % np.uint64(q) == t[:, j]))
    else:
        ints = crt(t[:, list(limbs)], [x.moduli[i] for i in limbs])
        ok = all(v <= beta for v in ints)
        for j, q in enumerate(x.moduli):
            if ok and j not in limbs:
                ok = [v % int(q) for v in ints] == [int(r) for r in t[:, j]]
    if not ok:
        raise DeviationError(blame)


def _small_fits(mods: tuple[int, ...], span: int) -> bool:
    """Whether a range of ``span`` is proven in one limb (the widest) and checked into the others
    (:func:`_small_over_basis`): the proof needs 2^(k+1) < q, the check 2 (beta + span) < q."""
    q = max(mods)
    k = sum(digit_widths(span))
    return len(mods) > 1 and (1 << (k + 1)) < q and 2 * (_small_bound(span)[0] + span) < q and \
        (1 << _small_bound(span)[1]) <= 1 << 63


def _small_over_basis(engine: Any, values: Any, owner: int, mods: tuple[int, ...], lo: int, hi: int) -> AuthShares:
    """A small range over a basis: the proof in the widest limb q_a, the owner's plain input in
    the others, and a check that they are one integer.

    The check (:func:`check_one_integer`, the owner's masks): all S masked subset sums pass an
    entry whose residue in some limb is not its limb-a integer with probability at most 2^-S.
    One proof limb instead of an anchor's, and no lift (whose masks every party inputs in every
    limb)."""
    q_a = max(mods)
    a = mods.index(q_a)
    rest = tuple(q for q in mods if q != q_a)
    keys = engine.keys(mods)
    x_a = engine._limb_in_range(values, owner, q_a, lo, hi, keys)[0]
    shape = x_a.shape
    count = x_a.size
    flat = None if engine.me != owner else np.asarray([int(v) for v in np.asarray(values).ravel()], dtype=object)
    x_r = engine.share_mod(flat, owner=owner, moduli=rest)
    if x_r.size != count:
        raise DeviationError(f"party {engine.session.parties[owner]!r} input a different count in different limbs")
    parts = [x_r.limb(c) for c in range(len(rest))]
    parts.insert(a, x_a.reshape(count))
    x = AuthShares(engine, np.concatenate([p.share for p in parts], axis=-1),
                   np.concatenate([p.mac[:keys] for p in parts], axis=-1), mods)
    check_one_integer(engine, x - lo, anchor=a, span=hi - lo, owner=owner,
                      what="range-checked input: one integer in every limb",
                      blame=f"party {engine.session.parties[owner]!r}'s range-checked input is not one integer in "
                            "every limb; nothing depends on the input")
    return x.reshape(shape)


def _stack_limbs(engine: Any, parts: list[AuthShares], anchor: tuple[int, ...], keys: int) -> AuthShares:
    if len({p.share.shape for p in parts}) != 1:
        raise DeviationError("a range-checked input's owner announced different shapes in different limbs")
    share = np.concatenate([p.share for p in parts], axis=-1)
    mac = np.concatenate([p.mac[:keys] for p in parts], axis=-1)
    return AuthShares(engine, share, mac, anchor)
