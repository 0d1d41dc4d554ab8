"""Authenticated preprocessing from oblivious transfer (MASCOT: Keller, Orsini, Scholl, CCS
2016), over odd prime moduli, on the OT extension of :mod:`shaper.protocols.ot` (SoftSpoken with
the KOS/Roy consistency check).

**Authentication** (:func:`authenticate`, MASCOT's Pi_[[.]]): the pairwise correlated OTs of
:mod:`.cope` give every party MAC shares of the batch; a sender that uses different values in
different OTs shifts the MAC by terms in the bits of a key, so the batch also authenticates one
random value per modulus, and a random combination of the batch plus that value is opened and
goes to the MAC check, which then fails unless the sender guessed the bits its deviation
touches (each guess halves its chance of passing, MASCOT Lemma 4).

**Triples** (:func:`triples`, MASCOT's Pi_Triple with tau = 3 at 61 bits;
:func:`combining_for`). Each party draws b_j and three a_j^(1..3); every ordered pair (j
receiver with the bits of a_j^(m) as choices, i sender with offset b_i) runs Gilboa's product,
so c^(m) = a^(m) b. A sender that sends a wrong correction for one bit makes c^(m) wrong exactly
when that bit of a_j^(m) is 1: a selective failure that would leak that bit once the triple is
checked. So the three are *combined* with coefficients no party chose before the products were
fixed: a = sum_m r_m a^(m), c = sum_m r_m c^(m), and a second triple (a^, b, c^) with other
coefficients r^. By the leftover hash lemma the s <= 40 bits a deviating party can learn (at a
2^-s chance of not being caught) leave a uniform to within 2^-40 when 3 w >= w + 3 s, i.e.
2 w >= 3 s (w = bitlen(q) >= 61 for s = 40); narrower moduli combine more
(tau = ceil(1 + 3 s / w): 4 at 50 bits, 5 at 31). The coefficients (r, r^: 2 tau per modulus)
serve the whole batch: a strong extractor's seed may be reused over independent sources, and the
triples' raw a^(m) are independent of each other and of the coins (drawn after every product),
so N triples are within N 2^-40 of uniform together, as with fresh coefficients per triple.
Then a, b, c, a^, c^ are authenticated and the
second triple is *sacrificed* to check the first: with t from a joint coin, rho = t a - a^ is
opened and t c - c^ - rho b must open to zero; an additive error e in c passes only if t e
equals the error in c^, probability 1/q. Both openings go to the MAC check, run before a
triple is handed out.

**Silent authentication** (:mod:`.vole`; batches of 2^16 values or more, or what the pool
already holds: :func:`silent_for`; a batch over several moduli takes the limbs the pool holds
from it and the others by COPE). The engine's pool holds authenticated values made by silent
VOLE: each sender's own (known to it alone) and the sum of every party's (known to none). A
batch of shares is then authenticated by each sender's broadcast correction, x_j minus its pool
values (:func:`_authenticate_silent`: one word per value and peer, no OTs); a triple takes b from
the shared pool and corrections for a, c, a^, c^.

**Input masks** (:func:`input_masks`): a random r known to its owner o (o's share is r, the
others' are zero), authenticated with o as the only sender. An input x is then o's broadcast of
x - r (uniform) added to [r]; an output to o is the opening of [x] - [r] to every party.

Cost per triple and ordered pair (w = bitlen(q), K keys of s = min(w, 40) bits, SoftSpoken
k = 4): 3 w OTs for the products (4 + 8 bytes each) and the MACs of five values: by COPE 5 K s x
8 bytes (plus s OTs per 256 values and key), 7.4x the passive triple's 12 w bytes at w = 61,
K = 2; from the silent pool 4 x 8 bytes of corrections and about 23 bytes per pool value on the
first run (MASCOT's authentication of its base), a few after (the base comes from the last run):
3.2x the passive bytes.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import DeviationError, FrameError
from ...kernels.modq import add_mod, moduli_array, mul_mod, sub_mod
from .cope import cope_sum
from .shares import AuthShares
from .vole import ALL, SILENT_MIN

__all__ = ["COMBINE", "COMBINE_SECURITY", "authenticate", "combining_for", "combining_security", "input_masks",
           "random_shared", "silent_for", "triples"]

COMBINE = 3          # raw triples combined into one (MASCOT's tau), at least
COMBINE_SECURITY = 40  # bits: a combined triple's a stays 2^-40 close to uniform after a selective failure


def combining_security(q: int, tau: int = COMBINE) -> float:
    """Bits s such that a combined triple's a is 2^-s close to uniform against a party that
    probed s bits (the leftover hash lemma: tau w - s >= w + 2 s)."""
    w = int(q).bit_length()
    return (tau - 1) * w / 3


def combining_for(moduli: Sequence[int], security: int = COMBINE_SECURITY) -> int:
    """The raw triples combined into one over this basis: the least tau (at least 3) with
    (tau - 1) w / 3 >= ``security`` for the narrowest modulus (3 at 61 bits, 4 at 50, 5 at 31)."""
    w = min(int(q).bit_length() for q in moduli)
    return max(COMBINE, math.ceil(1 + 3 * security / w))


def authenticate(engine: Any, share: np.ndarray, moduli: tuple[int, ...], keys: int, *,
                 senders: Sequence[int] | None = None, phase: str = "authenticate") -> AuthShares:
    """MAC shares for shared residues (N, L) (module notes): every ordered pair's correlated OTs
    per modulus, the local products, and the batch's random combination recorded for the MAC
    check. ``senders``: the parties whose shares may be nonzero (default every party; an
    owner's input mask has only the owner)."""
    share = np.asarray(share, dtype=np.uint64)
    n, L = share.shape
    senders = list(range(engine.parties)) if senders is None else list(senders)
    if silent_for(engine, n, moduli, keys, senders):
        return _authenticate_silent(engine, share, moduli, keys, senders, phase)
    pooled = [c for c, q in enumerate(moduli) if silent_for(engine, n, (q,), keys, senders)]
    if pooled:  # the limbs the pool holds from it, the others by COPE (every party splits alike)
        rest = [c for c in range(L) if c not in pooled]
        a = _authenticate_silent(engine, np.ascontiguousarray(share[:, pooled]), tuple(moduli[c] for c in pooled), keys,
                                 senders, phase)
        b = authenticate(engine, np.ascontiguousarray(share[:, rest]), tuple(moduli[c] for c in rest), keys,
                         senders=senders, phase=phase)
        order = np.argsort(pooled + rest)
        return AuthShares(engine, np.concatenate([a.share, b.share], axis=-1)[..., order],
                          np.concatenate([a.mac, b.mac], axis=-1)[..., order], moduli)
    # one random extra value per modulus, from the senders only, so that the opened combination
    # is uniform (it hides the batch)
    extra = engine.uniform_mod((1,), moduli) if engine.me in senders else np.zeros((1, L), np.uint64)
    batch = np.concatenate([share, extra])
    mac = np.empty((keys, n + 1, L), np.uint64)
    for c, q in enumerate(moduli):
        alpha = engine.alpha(q)[:keys]
        local = mul_mod(batch[:, c][None, :, None], alpha[:, None, None], (q,))[..., 0]
        mac[:, :, c] = add_mod(local, cope_sum(engine, batch[:, c], q, keys, senders), np.uint64(q))
    full = AuthShares(engine, batch, mac, moduli)
    coins = engine.joint_coins("auth-coins")
    chi = np.stack([coins.below(q, n) for q in moduli], axis=-1)  # (n, L)
    combined = engine.mul_public_shares(full[:n], chi).sum(axis=0) + full[n]
    engine.open_partial(combined, phase)
    return full[:n]


def silent_for(engine: Any, count: int, moduli: Sequence[int], keys: int, owners: Sequence[int]) -> bool:
    """Whether ``count`` values per modulus of ``owners`` come from the engine's silent pool
    (:mod:`.vole`): batches of at least ``SILENT_MIN``, or any batch the pool already holds (a
    run costs about as much as authenticating 100,000 values by COPE, so small one-off batches
    do not start one). Every party decides alike: the pools' counts are the same everywhere."""
    pool = getattr(engine, "silent", None)
    if pool is None or count == 0:
        return False
    if count >= getattr(engine, "silent_min", SILENT_MIN):
        return True
    keys_of = [ALL] if sorted(owners) == list(range(engine.parties)) else list(owners)
    return all(pool.available(q, keys, o) >= count for q in moduli for o in keys_of)


def _pool_values(engine: Any, count: int, moduli: tuple[int, ...], keys: int, owners: Sequence[int]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``count`` pool values per modulus, summed over ``owners`` (every party: the shared pool):
    (this party's share (count, L): its own values if it is an owner, else zero; its MAC shares
    (keys, count, L))."""
    L = len(moduli)
    everyone = sorted(owners) == list(range(engine.parties))
    mine = np.zeros((count, L), np.uint64)
    mac = np.empty((keys, count, L), np.uint64)
    for c, q in enumerate(moduli):
        got = engine.silent.take_many(engine, q, keys, {ALL: count} if everyone else {j: count for j in owners})
        for i, (j, (values, macs)) in enumerate(got.items()):
            mac[:, :, c] = macs if i == 0 else add_mod(mac[:, :, c], macs, np.uint64(q))
            if j in (ALL, engine.me):
                mine[:, c] = values
    return mine, mac


def random_shared(engine: Any, count: int, moduli: tuple[int, ...], keys: int) -> AuthShares:
    """``count`` authenticated uniform values no party knows: every party's pool values summed
    (each is pseudorandom to every other party, :mod:`.vole`)."""
    mine, mac = _pool_values(engine, count, moduli, keys, range(engine.parties))
    return AuthShares(engine, mine, mac, moduli)


def _authenticate_silent(engine: Any, share: np.ndarray, moduli: tuple[int, ...], keys: int,
                         senders: list[int], phase: str) -> AuthShares:
    """:func:`authenticate` on the silent pool: each sender's pool values y_j (authenticated,
    known to it alone, checked at their run) and its broadcast correction d_j = x_j - y_j; the
    value x = sum_j (y_j + d_j) keeps y's MACs plus alpha_i sum_j d_j. No random combination is
    opened: nothing here can leave a MAC share off by anything but alpha_i (D_i - D) for
    corrections D_i that party i saw and D that the others saw, and the corrections join every
    party's view, which the next check compares (so a sender that broadcasts different
    corrections to different parties is caught there, and the MAC check fails as well unless it
    guesses a key)."""
    n, L = share.shape
    me = engine.me
    qs = moduli_array(moduli)
    mine, mac = _pool_values(engine, n, moduli, keys, senders)
    tag = engine._tag("auth-correct")
    total = np.zeros((n, L), np.uint64)
    if me in senders:
        total = sub_mod(share, mine, qs)
        engine.session.broadcast(np.ascontiguousarray(total), tag)
    for j in senders:
        if j == me:
            continue
        d = engine.session.recv_array(j, tag, dtype=np.uint64, shape=(n, L))
        if np.any(d >= qs):
            raise FrameError(f"party {engine.session.parties[j]!r} sent a correction out of range ({phase})")
        total = add_mod(total, d, qs)
    engine.openings.witness(total, phase)
    for c, q in enumerate(moduli):
        alpha = engine.alpha(q)[:keys]
        mac[:, :, c] = add_mod(mac[:, :, c], mul_mod(alpha[:, None], np.broadcast_to(total[:, c], (keys, n)).copy(),
                                                     (q,)), np.uint64(q))
    return AuthShares(engine, share if me in senders else np.zeros((n, L), np.uint64), mac, moduli)


def input_masks(engine: Any, owner: int, count: int, moduli: tuple[int, ...], keys: int) -> tuple[AuthShares, np.ndarray | None]:
    """``count`` authenticated random values known to ``owner``: (the shares, the values at
    the owner / None elsewhere)."""
    L = len(moduli)
    if engine.me == owner:
        r = engine.uniform_mod((count,), moduli)
        shares = r
    else:
        r, shares = None, np.zeros((count, L), np.uint64)
    return authenticate(engine, shares, moduli, keys, senders=[owner], phase="input masks"), r


def triples(engine: Any, count: int, moduli: tuple[int, ...], keys: int) -> tuple[AuthShares, AuthShares, AuthShares]:
    """``count`` authenticated triples (a, b, c = a b) over the basis, checked by sacrifice and
    by the MAC check before they are returned (module notes)."""
    L = len(moduli)
    tau = combining_for(moduli)
    silent = silent_for(engine, 5 * count, moduli, keys, range(engine.parties))
    a_raw = engine.uniform_mod((tau, count), moduli)                                # (tau, N, L)
    if silent:  # b authenticated already: a pool value (:mod:`.vole`)
        B = random_shared(engine, count, moduli, keys)
        b = B.share
    else:
        b = engine.uniform_mod((count,), moduli)                                    # (N, L)
    c_raw = np.empty_like(a_raw)
    links = engine.ot_links()
    peers = [p for p in range(engine.parties) if p != engine.me]
    for col, q in enumerate(moduli):
        qs = np.uint64(q)
        choices = np.ascontiguousarray(a_raw[:, :, col]).ravel()                    # row (m, i)
        offsets = np.tile(b[:, col], tau)[:, None]
        recv, sent = links.cot({p: choices for p in peers}, {p: offsets for p in peers}, [q], q.bit_length())
        acc = mul_mod(choices[:, None], offsets, (q,))
        for part in list(recv.values()) + list(sent.values()):
            acc = add_mod(acc, part, qs)
        c_raw[:, :, col] = acc[:, 0].reshape(tau, count)
    # combine with coefficients fixed after the products (joint coins)
    coins = engine.joint_coins("triple-coins")   # one seed for the batch (module notes)
    r = np.stack([coins.below(q, 2 * tau) for q in moduli], axis=-1).reshape(2, tau, 1, L)
    qs = moduli_array(moduli)

    def combine(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        acc = mul_mod(x[0], w[0], moduli)
        for m in range(1, tau):
            acc = add_mod(acc, mul_mod(x[m], w[m], moduli), qs)
        return acc

    a, c = combine(a_raw, r[0]), combine(c_raw, r[0])
    a_hat, c_hat = combine(a_raw, r[1]), combine(c_raw, r[1])
    if silent:
        auth = authenticate(engine, np.concatenate([a, c, a_hat, c_hat]), moduli, keys, phase="triples")
        A, C, A_hat, C_hat = (auth[i * count:(i + 1) * count] for i in range(4))
    else:
        auth = authenticate(engine, np.concatenate([a, b, c, a_hat, c_hat]), moduli, keys, phase="triples")
        A, B, C, A_hat, C_hat = (auth[i * count:(i + 1) * count] for i in range(5))
    # sacrifice (a^, b, c^) to check (a, b, c)
    coins = engine.joint_coins("sacrifice-coins")
    t = np.stack([coins.below(q, count) for q in moduli], axis=-1)
    rho = engine.open_partial(engine.mul_public_shares(A, t) - A_hat, "triples: sacrifice")
    zero = engine.mul_public_shares(C, t) - C_hat - engine.mul_public_shares(B, rho)
    if np.any(engine.open_partial(zero, "triples: sacrifice")):
        raise DeviationError("the triples' sacrifice failed (a party sent wrong products); no triple was used")
    engine.check("triples")
    return A, B, C
