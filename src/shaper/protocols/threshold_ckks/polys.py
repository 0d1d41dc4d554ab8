"""Polynomials shared on the n-party engine, as threshold CKKS moves them: an engine sharing
(one value per coefficient and limb) as this party's kernel rows, opening kernel rows to every
party or to one, and seeds no party chose alone.

Openings to every party of key material (:func:`committed_open_rows`) and every joint seed
(:func:`joint_seed`) go through :mod:`~shaper.protocols.threshold_ckks.commit`: each party
commits (SHA-256 with a fresh nonce) to the share it is about to open and opens only after it
holds every commitment. Before, a party that waited for the others' shares (rushing) could
choose the opened key or seed; now it cannot. It can still make a key wrong by deviating inside
the passive engine (the key check catches keys that do not work), not choose it.
:func:`open_rows` is the plain opening (broadcast, then gather); keep it for openings to one
recipient, where only the recipient learns the total.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import DeviationError
from ...kernels.modq import add_mod, mul_mod
from ..api import ModShares
from .commit import committed_open_rows, committed_seed

__all__ = ["SharedRows", "active", "committed_open_rows", "contributed", "helper_primes",
           "joint_seed", "linear", "ntt_copy", "open_rows", "open_with_errors", "share_rows"]


def active(engine: Any) -> bool:
    """Whether ``engine`` authenticates its shares (the active engine: MACs, checked openings)."""
    return getattr(engine, "security", "passive") == "active"


@dataclass(frozen=True)
class SharedRows:
    """A shared array of polynomials as this party's kernel rows (..., R, N) over ``primes`` (one
    per row), with its MAC shares (K, ..., R, N) under the engine's keys on the active engine
    (``mac`` None on the passive one). Every step of threshold key generation and joint
    encryption is linear in the shares with public coefficients, so it runs on the share and on
    every MAC share alike (:func:`linear`); public constants go in by :meth:`add_public`, and
    :meth:`open` opens to every party: MAC-checked on the active engine, committed first on the
    passive one."""

    engine: Any
    share: np.ndarray
    mac: np.ndarray | None
    primes: tuple[int, ...]

    @classmethod
    def of(cls, engine: Any, x: Any) -> SharedRows:
        """An engine sharing (..., N, R) (:class:`~shaper.protocols.api.ModShares`, or the active
        engine's :class:`~shaper.protocols.active.AuthShares`) as kernel rows."""
        share = np.ascontiguousarray(np.swapaxes(x.share, -1, -2))
        mac = getattr(x, "mac", None)
        return cls(engine, share, None if mac is None else np.ascontiguousarray(np.swapaxes(mac, -1, -2)),
                   tuple(int(q) for q in x.moduli))

    def map(self, f: Callable[[np.ndarray], np.ndarray]) -> SharedRows:
        """f (linear, no constant term) on the share and on every MAC share."""
        return linear(f, self)

    def ntt(self, ctx: Any, rows: list[int]) -> SharedRows:
        """The NTT (``ctx``'s, over kernel rows ``rows``) of every polynomial, shares and MAC
        shares alike (a copy: the kernel works in place)."""
        return self.map(ntt_copy(ctx, rows))

    def add_public(self, c: np.ndarray) -> SharedRows:
        """x + c for public rows c (..., R, N): the first party adds c to its share, every party
        alpha_k c to its k-th MAC share."""
        qs = np.asarray(self.primes, dtype=np.uint64)[:, None]
        c = np.ascontiguousarray(np.broadcast_to(c, self.share.shape), dtype=np.uint64)
        share = add_mod(self.share, c, qs) if self.engine.session.index == 0 else self.share
        if self.mac is None:
            return SharedRows(self.engine, share, None, self.primes)
        alpha = self.engine.mac_keys(self.primes)[:, :len(self.mac)]  # (R, K)
        macs = [add_mod(m, _mul_rows(c, alpha[:, k], self.primes), qs) for k, m in enumerate(self.mac)]
        return SharedRows(self.engine, share, np.stack(macs), self.primes)

    def open(self, what: str, to: int | None = None, *, error: type[Exception] | None = None) -> np.ndarray | None:
        """The total opened to every party (``to`` None) or to party ``to`` alone (None
        elsewhere), as rows (..., R, N). On the active engine: a partial opening (to one party:
        masked by an input mask of its own) and the MAC check over everything opened since the
        last, so a wrong share or MAC share anywhere raises
        :class:`~shaper.errors.DeviationError` at every honest party before this returns, and
        the recipient knows its value was checked. On the passive engine: committed before it
        is opened to every party (:func:`~.commit.committed_open_rows`, raising ``error`` for a
        broken commitment), a plain opening to one."""
        if self.mac is None:
            if to is not None:
                return open_rows(self.engine, self.share, self.primes, to)
            kw = {} if error is None else {"error": error}
            return committed_open_rows(self.engine, self.share, self.primes, what=what, **kw)
        from ..active.shares import AuthShares

        x = AuthShares(self.engine, np.ascontiguousarray(np.swapaxes(self.share, -1, -2)),
                       np.ascontiguousarray(np.swapaxes(self.mac, -1, -2)), self.primes)
        out = self.engine.reveal_mod(x, to)
        return None if out is None else np.ascontiguousarray(np.swapaxes(out, -1, -2))

    def rows(self, index: list[int]) -> SharedRows:
        """The kernel rows ``index`` (the primes of a level), shares and MAC shares alike."""
        return SharedRows(self.engine, np.ascontiguousarray(self.share[..., index, :]),
                          None if self.mac is None else np.ascontiguousarray(self.mac[..., index, :]),
                          tuple(self.primes[r] for r in index))


def ntt_copy(ctx: Any, rows: list[int], inverse: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """x -> the NTT (or with ``inverse`` the inverse NTT) of ``ctx`` over kernel rows ``rows``,
    on a copy (the kernel works in place)."""
    step = ctx.intt if inverse else ctx.ntt

    def f(x: np.ndarray) -> np.ndarray:
        out = np.array(x, dtype=np.uint64, copy=True)
        step(out, rows)
        return out

    return f


def linear(f: Callable[..., np.ndarray], *args: Any) -> SharedRows:
    """f(*args) for f linear, with no constant term, in its :class:`SharedRows` arguments (the
    others public): on the shares, and on the k-th MAC shares of every shared argument for each
    key k. Every shared argument must be on one engine and basis, all with MACs or none."""
    shared = [a for a in args if isinstance(a, SharedRows)]
    if not shared:
        raise ValueError("linear() needs at least one shared argument")
    first = shared[0]
    if any(a.primes != first.primes or a.engine is not first.engine or (a.mac is None) != (first.mac is None)
           for a in shared):
        raise ValueError("linear() combines shares of one engine and basis, all authenticated or none")
    share = f(*(a.share if isinstance(a, SharedRows) else a for a in args))
    if first.mac is None:
        return SharedRows(first.engine, share, None, first.primes)
    keys = min(len(a.mac) for a in shared)  # type: ignore[arg-type]
    macs = [f(*(a.mac[k] if isinstance(a, SharedRows) else a for a in args)) for k in range(keys)]  # type: ignore[index]
    return SharedRows(first.engine, share, np.stack(macs), first.primes)


def _mul_rows(c: np.ndarray, scalars: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    """c (..., R, N) times one scalar per row, mod that row's prime."""
    moved = np.ascontiguousarray(np.swapaxes(c, -1, -2))  # (..., N, R): limbs last
    out = mul_mod(moved, np.asarray(scalars, dtype=np.uint64), primes)
    return np.ascontiguousarray(np.swapaxes(out, -1, -2))


def share_rows(x: Any) -> np.ndarray:
    """An engine sharing (N, R) -> this party's share as kernel rows (R, N)."""
    return np.ascontiguousarray(x.share.T)


def open_rows(engine: Any, rows: np.ndarray, primes: tuple[int, ...], to: int | None = None) -> np.ndarray | None:
    """Opens shares held as kernel rows (..., R, N) to ``to`` (None elsewhere), or, with ``to``
    None, to every party *without* a commitment: a party that sends last can then choose the
    total. Open key material and anything else whose value must not be chosen to every party
    with :func:`committed_open_rows`."""
    moved = np.moveaxis(rows, -2, -1)  # limbs last, as the engine holds them
    out = ModShares(engine, np.ascontiguousarray(moved), primes).reveal(to)
    return None if out is None else np.ascontiguousarray(np.moveaxis(out, -1, -2))


def joint_seed(engine: Any, what: str) -> bytes:
    """A 32-byte seed no party chose alone: uniform shares opened with commit-before-open
    (:func:`~shaper.protocols.threshold_ckks.commit.committed_seed`), hashed with ``what``."""
    return committed_seed(engine, what)


def contributed(engine: Any, mine: Any, lo: int, hi: int, **basis: Any) -> SharedRows:
    """The sum of every party's own values, each a range-checked input of the active engine
    (:meth:`~shaper.protocols.active.ActiveEngine.share_mod_in_range`: every entry proven within
    [lo, hi] before anything depends on it, a failed proof naming its owner), as rows: ``mine``
    is this party's (the same shape at every party), ``basis`` ``modulus=q`` or ``moduli=...``.
    A deviating party's summand is then any values in the range, nothing else."""
    total = None
    for owner in range(engine.session.n):
        x = engine.share_mod_in_range(mine if owner == engine.session.index else None, owner=owner, lo=lo, hi=hi,
                                      **basis)
        total = x if total is None else total + x
    return SharedRows.of(engine, total)


def helper_primes(primes: tuple[int, ...], span: int, parties: int) -> tuple[int, ...]:
    """The anchor of :func:`open_with_errors`: the first primes above 2^61 not in ``primes``, as
    many as the check of values up to ``span`` needs (one for errors; two or three for a CKKS
    message). Every party computes it from public numbers."""
    from ..active.lift import add_helpers
    from ..active.ranges import one_integer_fits

    return add_helpers((), primes, lambda anchor: one_integer_fits(math.prod(anchor), span, parties))


def open_with_errors(base: SharedRows, mine: np.ndarray, lo: int, hi: int, *, factor: int,
                     to_form: Callable[[np.ndarray], np.ndarray], from_form: Callable[[np.ndarray], np.ndarray],
                     what: str, owned: tuple[int, Any, int, int] | None = None,
                     encoding: np.ndarray | None = None) -> np.ndarray:
    """``base + to_form(factor · e + m)`` opened to every party, e = Σ_i e_i the sum of every
    party's own integer polynomials (``mine``: this party's, (count, N) coefficients within [lo,
    hi]) and m an optional plaintext of one party (``owned`` = (owner, its (count, N) integers at
    the owner, None elsewhere, lo, hi)), on the active engine, with the same guarantee as
    authenticating every term over the basis (:func:`contributed`) but proving each in one limb.

    ``base``: authenticated rows (count, R, N) (or (R, N) for count 1) over ``base.primes``;
    ``to_form``: the linear map, limb by limb, from coefficient rows to base's form (an NTT),
    ``from_form`` its inverse. Steps:

    1. every e_i (and m) is a range-checked input in an *anchor* of primes above 2^61, outside
       the basis (one prime for errors, :func:`~shaper.protocols.active.ranges.input_in_range`;
       two or three for a wide message, each term then also shown to be one integer across the
       anchor, :func:`~shaper.protocols.active.ranges.input_in_range_anchor`): committed, and
       proven within its range, before any share of the result is sent;
    2. each party sends its share of base plus to_form(factor · e_i (+ m at the owner) mod every
       prime), its own terms unauthenticated; the total b is public;
    3. [D] = from_form(b - [base]) is authenticated in every limb (b public), and honest it is
       factor · e + m, whose anchor value factor · Σ [e_i] + [m] is authenticated and in
       range.
       :func:`~shaper.protocols.active.ranges.check_one_integer` (every party's masks, so the
       honest one hides the errors' sums) proves that every limb of D holds that one integer;
       the openings are MAC-checked before the comparison.

    A party that adds anything else to its share in any limb (or sends a wrong share of base)
    moves D off the committed integer in that limb and is caught except with probability
    2^-soundness; every honest party raises :class:`~shaper.errors.DeviationError`, and nothing
    is returned. What the opening shows beyond b: with one honest party, nothing (its sent
    residues are b minus the others'); with several, each honest party's sent residues are its
    share of base plus its own terms, for a key or a joint input an RLWE sample under its share
    of s, so its terms are hidden computationally (as with the passive engine's local errors),
    not statistically. The check's openings are each masked to 2^-40 (the project's per-opening
    convention, as in the lifts and daBits' checks). Cost per entry and other party: the range
    proof in one limb (1 + 2 ceil(k/4) committed values) instead of that plus one input per
    further limb. Runs under the engine's guard: a failure stops the engine for good.

    ``encoding`` (int64 (k, N), public): the owner's plaintext is m = v @ encoding for its
    (count, k) integers v within [lo, hi] of ``owned``: v is what is committed and range-checked
    (k values per polynomial instead of N), m is computed from it in the anchor by the public
    map, exactly, and carried like a committed m. Every |m| coefficient must stay below 2^61
    (the caller's encoding and range; checked)."""
    if base.mac is None:
        raise ValueError("open_with_errors() runs on the active engine's authenticated rows")
    return base.engine.guard(_open_with_errors, base, mine, lo, hi, factor, to_form, from_form, what, owned,
                             encoding)


def _open_with_errors(base: SharedRows, mine: np.ndarray, lo: int, hi: int, factor: int,
                      to_form: Callable[[np.ndarray], np.ndarray], from_form: Callable[[np.ndarray], np.ndarray],
                      what: str, owned: tuple[int, Any, int, int] | None,
                      encoding: np.ndarray | None = None) -> np.ndarray:
    from ..active.ranges import check_one_integer, input_in_range, input_in_range_anchor
    from ..active.shares import AuthShares

    engine = base.engine
    single = base.share.ndim == 2
    share = base.share[None] if single else base.share
    mac = base.mac[:, None] if single else base.mac
    count, rows, n = share.shape
    primes = base.primes
    parties = engine.session.n
    m_lo = m_hi = 0
    if owned is not None:
        m_lo, m_hi = int(owned[2]), int(owned[3])
        if encoding is not None:  # the range of m = v @ encoding for v within [m_lo, m_hi]
            reach = int(np.max(np.sum(np.abs(encoding).astype(object), axis=0))) * max(abs(m_lo), abs(m_hi))
            if reach >= 1 << 61:
                raise ValueError(f"an encoded plaintext may reach 2^{math.log2(reach):.1f}; int64 needs it below 2^61")
            m_lo, m_hi = -reach, reach
    span = factor * parties * (int(hi) - int(lo)) + (m_hi - m_lo)
    shift = factor * parties * int(lo) + m_lo
    helpers = helper_primes(primes, span, parties)
    mods = helpers + primes
    keys = engine.keys(mods)
    mine = np.asarray(mine, dtype=np.int64).reshape(count, n)

    def commit(values: Any, owner: int, t_lo: int, t_hi: int, kind: str, per: int = n) -> AuthShares:
        """One party's term, committed and proven in range over the anchor: (count per, A)."""
        mine_or_none = values if owner == engine.session.index else None
        if len(helpers) == 1:
            x = input_in_range(engine, mine_or_none, owner=owner, q=helpers[0], lo=t_lo, hi=t_hi, keys=keys)
        else:
            x = input_in_range_anchor(engine, mine_or_none, owner=owner, anchor=helpers, lo=t_lo, hi=t_hi,
                                      keys=keys)[0]
        if x.size != count * per:
            raise DeviationError(f"party {engine.session.parties[owner]!r} committed {x.size} {kind} coefficients to "
                                 f"{what}, {count * per} expected")
        return x.reshape(count * per)

    # 1. every party's errors (and the owner's plaintext) committed and proven in the anchor
    anchor = None
    for owner in range(parties):
        e = commit(mine, owner, lo, hi, "error")
        anchor = e if anchor is None else anchor + e
    anchor = anchor * factor
    own = np.int64(factor) * mine
    if owned is not None and encoding is None:
        owner, values, v_lo, v_hi = owned
        anchor = anchor + commit(values, owner, v_lo, v_hi, "plaintext")
        if owner == engine.session.index:
            own = own + np.asarray(values, dtype=np.int64).reshape(count, n)
    elif owned is not None:
        owner, values, v_lo, v_hi = owned
        k = encoding.shape[0]
        v = commit(values, owner, v_lo, v_hi, "encoded plaintext", per=k)
        anchor = anchor + _encode_shares(v.reshape(count, k), encoding, helpers)
        if owner == engine.session.index:
            own = own + _encode_plain(np.asarray(values, dtype=np.int64).reshape(count, k), encoding)
    # 2. this party's share of base plus its own terms, opened to every party
    qs = np.asarray(primes, dtype=np.uint64)[:, None]
    terms = np.mod(own[:, None, :], np.asarray(primes, dtype=np.int64)[:, None]).astype(np.uint64)
    sent = add_mod(share, to_form(np.ascontiguousarray(terms)), qs)
    b = np.ascontiguousarray(np.swapaxes(
        engine.open_sum(np.ascontiguousarray(np.swapaxes(sent, -1, -2)), primes, what), -1, -2))
    # 3. D = from_form(b - base): factor · e in every limb, checked against the anchor
    d = SharedRows(engine, share, mac, primes)
    d = linear(lambda x: np.ascontiguousarray((qs - x) % qs), d).add_public(b).map(from_form)
    limbs = np.swapaxes(d.share, -1, -2).reshape(count * n, rows)
    limb_macs = np.swapaxes(d.mac[:keys], -1, -2).reshape(keys, count * n, rows)
    x = AuthShares(engine, np.concatenate([anchor.share, limbs], axis=-1),
                   np.concatenate([anchor.mac[:keys], limb_macs], axis=-1), mods)
    check_one_integer(engine, x - shift, anchor=tuple(range(len(helpers))), span=span, owner=None,
                      what=f"{what}: the errors in every limb",
                      blame=f"{what}: a party's share is not, in every limb, its share of the agreed value plus the "
                            "error it committed (a term was added or an error changed); nothing was accepted")
    return b[0] if single else b


def _encode_plain(v: np.ndarray, encoding: np.ndarray) -> np.ndarray:
    """v @ encoding exactly, (count, N) int64, by float64 matrix products on 24-bit pieces of
    the encoding: a piece's products and their sums stay exact while k max|v| 2^24 < 2^53 (k
    inputs; checked), and the pieces are put together in int64."""
    x = v.astype(np.float64)
    k = v.shape[-1]
    if k * max(1, int(np.max(np.abs(v), initial=0))) >= 1 << 29:
        raise ValueError("too many or too wide encoded inputs for exact float64 products")
    out = np.zeros((v.shape[0], encoding.shape[1]), dtype=np.int64)
    rest = encoding.astype(np.int64)
    shift = 0
    while np.any(rest):
        piece = (rest & ((1 << 24) - 1)) - np.where(rest & (1 << 23), 1 << 24, 0)  # centred 24-bit digit
        out += np.rint(x @ piece.astype(np.float64)).astype(np.int64) << np.int64(shift)
        rest = (rest - piece) >> 24
        shift += 24
    return out


def _encode_shares(v: Any, encoding: np.ndarray, anchor: tuple[int, ...]) -> Any:
    """Shares (count, k) over the anchor times the public encoding (k, N): (count N, A) shares,
    shares and MAC shares alike, limb by limb (native modular matrix products)."""
    from ...kernels.modq import matmul_mod
    from ..active.shares import AuthShares

    count, k = v.shape
    n = encoding.shape[1]
    mats = [np.ascontiguousarray(np.mod(encoding, q).astype(np.uint64)) for q in anchor]

    def apply(a: np.ndarray) -> np.ndarray:  # (count, k, A) -> (count N, A)
        return np.stack([matmul_mod(np.ascontiguousarray(a[..., j]), mats[j], q) for j, q in enumerate(anchor)],
                        axis=-1).reshape(count * n, len(anchor))

    return AuthShares(v.engine, apply(v.share), np.stack([apply(m) for m in v.mac]), anchor)

