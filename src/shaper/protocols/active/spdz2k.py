"""SPDZ2k: the active engine's ring Z_2^64 (Cramer, Damgård, Escudero, Scholl, Xing, CRYPTO 2018),
with MASCOT-style preprocessing from the OT extension, as MP-SPDZ runs it.

**Shares.** A value x in Z_2^k (k = 64, the fixed-point ring of :class:`~shaper.protocols.api.Shared`)
is held in shares x_i mod 2^(k+s) (s = 64), with MAC shares m_i, sum m_i = alpha x mod 2^(k+s)
for the global key alpha = sum alpha_i, each alpha_i a uniform 64-bit word that never leaves its
party. Everything here is generic over a *level* l: values mod 2^(64 l) in shares mod
2^(64 (l + 1)) (L = l + 1 words, :mod:`shaper.kernels.z2k`); the online values are level 1, their
triples are checked at level 2, the random bits of truncation are made at level 2 from level-2
triples checked at level 3.

**Openings** are partial and send only the low l words of a share (what the value needs: the
upper words are garbage that could show more than the value). The MAC check of a level, over
everything opened there since the last one: coins chi_j (64-bit words) drawn after the
openings; the public y~ = sum chi_j x~_j; every party's y_i = sum chi_j x_ij and
m_i = sum chi_j m_ij; a fresh authenticated random r masks the upper word: every party broadcasts
w_i = y_i + 2^(64 l) r_i, the parties check w = y~ mod 2^(64 l) and open, committed first,
z_i = m_i + 2^(64 l) m(r)_i - alpha_i w, which must sum to zero mod 2^(64 L); the committed
payload carries a digest of the party's view of every opening and broadcast, which must agree.
A party that shifted an opening by e (nonzero mod 2^(64 l)) passes only by guessing alpha mod
2^(s - v) where 2^v divides the error's image: at most 2^(-s + log2(s + 1)) = 2^-57.9 per check
(SPDZ2k, Theorem 1), plus the combination's chance of cancelling an error, 2^-s.

**Authentication** (SPDZ2k's Pi_aShare by COPE). Every ordered pair (i key holder, j sender)
runs a correlated OT over Z_2^(64 L) on fresh IKNP rows: i's choice value is alpha_i (64 OTs
per 256 / ceil(L / 2) values), j's offsets its shares; the outputs add up to alpha_i x_j. One more
random value per sender rides in every batch; coins drawn after the OTs weigh the batch, and the
combination plus that value is opened (partially) and joins the next MAC check, which fails for
a sender that used different values in different OTs unless it guessed the bits of alpha_i its
deviation touches (each guess halves its chance: a selective failure that can show a few bits of
alpha_i at the price of aborting, as in MASCOT; the check's soundness counts them). A key holder
that varies its key between rows only spoils its own MAC shares.

**Triples** (SPDZ2k section 4, MP-SPDZ's Spdz2kTripleGenerator). For level-l triples, each party
draws TAU = 128 (l + 2) random bits a_t and a value b mod 2^(64 (l + 1)); every ordered pair runs
Gilboa's bit-times-value COT (one OT per bit) for the cross terms, so each party holds shares of
c_t = a_t b. Coins drawn after the OTs give r, r^ (TAU each): a = sum r_t a_t, c = sum r_t c_t,
a^ and c^ alike (a universal hash of TAU bits: uniform even if a deviating OT sender learned up
to 2 s of them by selective failure). The five values are authenticated at level l + 1 and
*sacrificed* there: rho = t a - a^ is opened (t a 64-bit coin), sigma = t c - c^ - rho b must open
to zero, and the level-(l + 1) MAC check runs. A wrong triple, c = a b + e with e nonzero mod
2^(64 l), passes only if t e = e^ mod 2^(64 (l + 1)), which fixes t mod 2^s: 2^-64 per
triple. The checked triple is then reduced to level l (shares and MACs mod 2^(64 L): their
relation still holds).

**Inputs, outputs, products.** An input of party o: a random r authenticated with o the only
sender (o knows it), o broadcasts x - r mod 2^64, which every party adds as a public value and
records in its view. A product is Beaver's with a level-1 triple: x - a and y - b are opened
partially. Output to all: a partial opening and the MAC check; to one party o: [x] - [r] for an
input mask r of o's, opened to all and checked, then o adds r.

**Truncation** (probabilistic, as the passive engine's): r uniform in Z_2^64 from 64 random
authenticated bits, r' = its arithmetic shift; c = x + r is opened and the result is
(c >> d) - r', which is floor(x / 2^d) or one more, and wrong by 2^(64 - d) with probability
about |x| / 2^63. The bits come from squares (Damgård et al., S&P 2019, "bits from squares"):
at level 2, v = 2 u + 1 for a random u, v^2 by a level-2 triple and opened; y an inverse square
root of v^2 mod 2^128, d = y v is +-1 mod 2^65 (and the sign is uniform given v^2), and
(d + 1) / 2 halves exactly share by share (every share and MAC share of d + 1 is even), giving a
bit mod 2^64 whose shares are reduced to level 1.

**What each party learns**: the opened values (uniform: masked by single-use triples, masks and
combinations with a fresh random), the checks' differences (uniform given that they sum to
zero), the squares v^2 (which leave each bit's sign uniform) and the outputs revealed to it.
**What a deviating coalition of up to n - 1 parties can do**: choose its inputs, abort at any
point; anything else (a wrong share, MAC share, correction, triple, opening, or different
messages to different peers) is caught at the next check of the level it touches, before any
output that depends on it, except with probability 2^-57 per check.

**Costs.** A level-1 triple takes 384 OTs with 16-byte corrections and 5 values authenticated at
level 2 (64 OTs and 24 bytes each) per ordered pair: about 14 KB per pair, the protocol's price
(MP-SPDZ's SPDZ2k is of the same order). A truncated product also takes 64 bits, each a level-2
triple and a level-2 random: this is the slow path of the ring and what a later edaBit-based
truncation will replace.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...errors import ConfigError, DeviationError, FrameError
from ...kernels import z2k
from ..api import Shared
from ..commit import open_committed
from .check import MAX_INPUT, read_shape

__all__ = ["KEY_BITS", "MAX_LEVEL", "AuthRing", "Ring", "Wide", "available", "tau"]

KEY_BITS = 64                 # s: the MAC key's bits
MAX_LEVEL = 3                 # the widest level (values mod 2^192, shares mod 2^256)
PURPOSE = 5 << 8              # hash purpose of the wide COT on fresh IKNP rows
CHUNK = 1 << 14               # values per authentication batch (bounded memory)
TRIPLE_CHUNK = 2048           # triples per batch (each holds TAU products: about 12 MB per array at level 1)
SOUNDNESS_BITS = KEY_BITS - math.log2(KEY_BITS + 1)


def available() -> bool:
    """True when the ring kernels are built (the domain needs them and the OT extension)."""
    return z2k.available()


def tau(level: int) -> int:
    """Random bits per triple of a level: 2 (k' + s) for the check level's k' = 64 (level + 1)."""
    return 128 * (level + 2)


@dataclass
class Wide:
    """This party's shares and MAC shares at one level: (N, L) uint64 each, L = level + 1."""

    level: int
    share: np.ndarray
    mac: np.ndarray

    @property
    def words(self) -> int:
        return self.level + 1

    def __len__(self) -> int:
        return len(self.share)

    def __getitem__(self, index: Any) -> "Wide":
        return Wide(self.level, self.share[index], self.mac[index])

    @staticmethod
    def concat(parts: Sequence["Wide"]) -> "Wide":
        return Wide(parts[0].level, np.concatenate([p.share for p in parts]), np.concatenate([p.mac for p in parts]))

    def __add__(self, other: "Wide") -> "Wide":
        return Wide(self.level, z2k.add(self.share, other.share), z2k.add(self.mac, other.mac))

    def __sub__(self, other: "Wide") -> "Wide":
        return Wide(self.level, z2k.sub(self.share, other.share), z2k.sub(self.mac, other.mac))

    def times_words(self, w: Any) -> "Wide":
        """Times public words (one per element, or one for all)."""
        return Wide(self.level, z2k.mul_word(self.share, w), z2k.mul_word(self.mac, w))

    def times(self, c: np.ndarray) -> "Wide":
        """Times public elements (N, L) (values lifted to the share width)."""
        return Wide(self.level, z2k.mul(self.share, c), z2k.mul(self.mac, c))

    def reduced(self, level: int) -> "Wide":
        """The same values at a lower level (shares and MACs truncated: the relation holds)."""
        return Wide(level, z2k.lift(self.share, level + 1), z2k.lift(self.mac, level + 1))


class AuthRing(Shared):
    """This party's SPDZ2k share of an array over Z_2^64 at scale 2^frac_bits: shares and MAC
    shares mod 2^128, uint64 (..., 2) each. The four components (low and high words of each)
    carry the shape operations; arithmetic goes to the engine (128-bit words carry)."""

    __slots__ = ("share", "mac")

    def __init__(self, engine: Any, share: np.ndarray, mac: np.ndarray, frac_bits: int) -> None:
        self.engine = engine
        self.share = share
        self.mac = mac
        self.frac_bits = frac_bits

    @property
    def components(self) -> tuple[np.ndarray, ...]:
        return self.share[..., 0], self.share[..., 1], self.mac[..., 0], self.mac[..., 1]

    def with_components(self, components: tuple[np.ndarray, ...], frac_bits: int | None = None) -> "AuthRing":
        s0, s1, m0, m1 = components
        return AuthRing(self.engine, np.stack([s0, s1], axis=-1), np.stack([m0, m1], axis=-1),
                        self.frac_bits if frac_bits is None else frac_bits)

    @classmethod
    def of(cls, engine: Any, w: "Wide", shape: tuple[int, ...], frac_bits: int) -> "AuthRing":
        return cls(engine, w.share.reshape(shape + (2,)), w.mac.reshape(shape + (2,)), frac_bits)

    def wide(self) -> "Wide":
        return Wide(1, np.ascontiguousarray(self.share).reshape(-1, 2), np.ascontiguousarray(self.mac).reshape(-1, 2))

    def broadcast_to(self, shape: tuple[int, ...]) -> "AuthRing":
        return AuthRing(self.engine, np.broadcast_to(self.share, shape + (2,)), np.broadcast_to(self.mac, shape + (2,)),
                        self.frac_bits)

    def sum(self, axis: int | None = None) -> "AuthRing":
        return AuthRing(self.engine, z2k.sum_axis(self.share, axis), z2k.sum_axis(self.mac, axis), self.frac_bits)

    def rescaled(self, frac_bits: int) -> "AuthRing":
        if frac_bits < self.frac_bits:
            raise ValueError(f"cannot lower the scale from 2^{self.frac_bits} to 2^{frac_bits} without truncation")
        if frac_bits == self.frac_bits:
            return self
        k = np.uint64(1 << (frac_bits - self.frac_bits))
        return AuthRing(self.engine, z2k.mul_word(self.share, k), z2k.mul_word(self.mac, k), frac_bits)


class _Ledger:
    """One level's unchecked openings: opened values, this party's shares and MAC shares."""

    def __init__(self) -> None:
        self.values: list[np.ndarray] = []
        self.shares: list[np.ndarray] = []
        self.macs: list[np.ndarray] = []
        self.phases: list[str] = []
        self.view = hashlib.sha256(b"shaper/active/spdz2k/view/v1")

    def witness(self, public: np.ndarray, phase: str) -> None:
        if phase not in self.phases:
            self.phases.append(phase)
        arr = np.ascontiguousarray(public, dtype=np.uint64)
        self.view.update(repr(arr.shape).encode())
        self.view.update(arr.astype("<u8", copy=False).tobytes())

    def __len__(self) -> int:
        return sum(len(v) for v in self.values)


class Ring:
    """One party's SPDZ2k state in an :class:`~.engine.ActiveEngine` (see the module notes)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.alpha = int(engine.prg.uint64(1)[0])   # alpha_i: 64 bits, this party's alone
        self.ledgers = {level: _Ledger() for level in range(1, MAX_LEVEL + 1)}
        self.triples: dict[int, list[tuple[Wide, Wide, Wide]]] = {}
        self.bits: list[Wide] = []
        self.triples_made = {level: 0 for level in range(1, MAX_LEVEL + 1)}
        self.checks = 0

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def session(self) -> Any:
        return self.engine.session

    def _tag(self, what: str) -> str:
        return self.engine._tag("z2k-" + re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-"))

    def coins(self, level: int, what: str) -> Any:
        """Joint coins (no party chose the seed); the first 32 bytes join this level's view."""
        prg = self.session.shared_prg(range(self.engine.parties), self._tag(what))
        self.ledgers[level].witness(np.frombuffer(prg.random_bytes(32), dtype=np.uint64), "coins")
        return prg

    def _alpha_bits(self, chunks: int) -> np.ndarray:
        bits = (np.uint64(self.alpha) >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
        return np.packbits(np.tile(bits.astype(np.uint8), chunks), bitorder="little")

    # -- authentication (COPE over Z_2^(64 L)) ------------------------------------------------------
    def authenticate(self, level: int, mine: np.ndarray | None, count: int, senders: Sequence[int],
                     phase: str) -> Wide:
        """MACs for ``count`` values, each the sum of the senders' shares (this party's: ``mine``
        (count, L), or None when it is not a sender): checked by a random combination opened
        into this level's ledger (module notes). Batches of :data:`CHUNK`."""
        if count > CHUNK:
            parts = [self.authenticate(level, None if mine is None else mine[lo:lo + CHUNK], min(CHUNK, count - lo),
                                       senders, phase) for lo in range(0, count, CHUNK)]
            return Wide.concat(parts)
        e, ses, words = self.engine, self.session, level + 1
        me, others = e.me, [p for p in range(e.parties) if p != e.me]
        sending = me in senders
        total = count + 1   # one random more per sender: the combination's mask
        x = np.zeros((total, words), np.uint64)
        if sending:
            if mine is None or mine.shape != (count, words):
                raise ValueError(f"a sender authenticates ({count}, {words}) words, got "
                                 f"{None if mine is None else mine.shape}")
            x[:count] = mine
            x[count] = e.prg.uint64(words)
        cols = min(z2k.max_columns(words), total)
        chunks = -(-total // cols)
        links = e.ot_links()
        receive = [j for j in senders if j != me]
        send = others if sending else []
        tag = self._tag("auth")
        t_rows, q_rows = links.rows(self._alpha_bits(chunks), chunks * 64, receive, send)
        mac = z2k.mul_word(x, self.alpha) if sending else np.zeros((total, words), np.uint64)
        if sending:
            table = np.zeros((chunks * cols, words), np.uint64)
            table[:total] = x
            table = table.reshape(chunks, cols, words)
            for i in send:
                q, (dom, start) = q_rows[i]
                corr, part = z2k.cot_send(q, links.delta(i), (dom ^ PURPOSE, start), table, 64)
                ses.send(i, corr, tag)
                mac = z2k.add(mac, part.reshape(-1, words)[:total])
        for j in receive:
            t, (dom, start) = t_rows[j]
            corr = ses.recv_array(j, tag, dtype=np.uint64, shape=(chunks * 64, cols, words))
            part = z2k.cot_recv(t, (dom ^ PURPOSE, start), np.full(chunks, self.alpha, np.uint64), corr, 64)
            mac = z2k.add(mac, part.reshape(-1, words)[:total])
        out = Wide(level, x, mac)
        chi = self.coins(level, "auth-coins").uint64(count)
        comb = Wide(level, z2k.add(z2k.dot(chi, x[:count])[None], x[count:]),
                    z2k.add(z2k.dot(chi, mac[:count])[None], mac[count:]))
        self.open(comb, f"{phase}: authentication check")
        return out[:count]

    def random(self, level: int, count: int, phase: str = "random values") -> Wide:
        """``count`` authenticated values no party knows (every party a sender)."""
        mine = self.engine.prg.uint64((count, level + 1))
        return self.authenticate(level, mine, count, range(self.engine.parties), phase)

    def mask(self, level: int, count: int, owner: int, phase: str) -> tuple[Wide, np.ndarray | None]:
        """``count`` authenticated randoms r known to ``owner`` (its shares are r; the others'
        zero): (the shares, r at the owner)."""
        words = level + 1
        r = self.engine.prg.uint64((count, words)) if self.engine.me == owner else None
        return self.authenticate(level, r, count, [owner], phase), r

    # -- openings and the check ---------------------------------------------------------------------
    def open(self, x: Wide, phase: str) -> np.ndarray:
        """The values mod 2^(64 level) (N, level): a partial opening, recorded for the next check
        of the level. Never output or branch on it before that check."""
        ses, level = self.session, x.level
        low = np.ascontiguousarray(x.share[:, :level])
        tag = self._tag(f"open {phase}")
        ses.broadcast(low, tag)
        total = low.copy()
        for p in range(self.engine.parties):
            if p != self.engine.me:
                got = ses.recv_array(p, tag, dtype=np.uint64, shape=low.shape)
                total = z2k.add(total, got)
        led = self.ledgers[level]
        led.values.append(total)
        led.shares.append(np.ascontiguousarray(x.share))
        led.macs.append(np.ascontiguousarray(x.mac))
        led.witness(total, phase)
        return total

    def check(self, level: int, phase: str = "output") -> None:
        """The MAC check of one level (module notes); empties its ledger only when it passes."""
        led = self.ledgers[level]
        if not led.values and not led.phases:
            return
        e, ses, words = self.engine, self.session, level + 1
        r = self.random(level, 1, f"{phase}: check mask")   # its own check combination joins this ledger
        phases = ", ".join(led.phases)
        opened = np.concatenate(led.values)
        shares = np.concatenate(led.shares)
        macs = np.concatenate(led.macs)
        chi = self.coins(level, "check-coins").uint64(len(opened))
        y_pub = z2k.dot(chi, z2k.lift(opened, words))
        y = z2k.dot(chi, shares)
        m = z2k.dot(chi, macs)
        w_mine = z2k.add(y, z2k.shift_words(r.share[0], level, words))
        tag = self._tag(f"check-{phase}")
        ses.broadcast(w_mine, tag + "/w")
        w = w_mine.copy()
        for p in range(e.parties):
            if p != e.me:
                w = z2k.add(w, ses.recv_array(p, tag + "/w", dtype=np.uint64, shape=(words,)))
        consistent = bool(np.array_equal(w[:level], y_pub[:level]))
        z = z2k.sub(z2k.add(m, z2k.shift_words(r.mac[0], level, words)), z2k.mul_word(w[None], self.alpha)[0])
        payload = led.view.digest() + z.astype("<u8").tobytes()
        blobs = open_committed(ses, payload, tag, error=DeviationError)
        total = np.zeros(words, np.uint64)
        differ = []
        for index, blob in enumerate(blobs):
            name = ses.parties[index]
            if len(blob) != len(payload):
                raise FrameError(f"party {name!r} opened {len(blob)} bytes in the ring's MAC check; expected {len(payload)}")
            if blob[:32] != payload[:32]:
                differ.append(name)
            total = z2k.add(total, np.frombuffer(blob[32:], dtype="<u8").astype(np.uint64))
        if total.any() or not consistent or differ:
            parts = []
            if total.any() or not consistent:
                parts.append(f"the ring's MAC check failed ({phases}): a party changed a share or a MAC share")
            if differ:
                parts.append(f"the parties saw different opened values ({phases}): party "
                             f"{', '.join(repr(v) for v in differ)} disagrees with this party")
            raise DeviationError("; ".join(parts) + ". Nothing opened since the last check was output")
        self.ledgers[level] = _Ledger()
        self.checks += 1

    # -- public constants -----------------------------------------------------------------------------
    def add_public(self, x: Wide, c: np.ndarray) -> Wide:
        """x + c for public values c (N, level) or (N, L) words."""
        lifted = z2k.lift(np.broadcast_to(c, x.share.shape[:1] + (np.asarray(c).shape[-1],)), x.words)
        share = z2k.add(x.share, lifted) if self.engine.me == 0 else x.share
        return Wide(x.level, share, z2k.add(x.mac, z2k.mul_word(lifted, self.alpha)))

    # -- triples -------------------------------------------------------------------------------------
    def take_triples(self, level: int, count: int) -> tuple[Wide, Wide, Wide]:
        """``count`` checked triples of a level (made in batches, the rest kept)."""
        if count == 0:
            empty = _empty(level)
            return empty, empty, empty
        pool = self.triples.setdefault(level, [])
        have = sum(len(t[0]) for t in pool)
        if have < count:
            need = count - have
            for lo in range(0, need, TRIPLE_CHUNK):
                pool.append(self._make_triples(level, min(TRIPLE_CHUNK, need - lo)))
        out: list[tuple[Wide, Wide, Wide]] = []
        got = 0
        while got < count:
            a, b, c = pool[0]
            take = min(len(a), count - got)
            out.append((a[:take], b[:take], c[:take]))
            if take == len(a):
                pool.pop(0)
            else:
                pool[0] = (a[take:], b[take:], c[take:])
            got += take
        return tuple(Wide.concat([o[i] for o in out]) for i in range(3))  # type: ignore[return-value]

    def _make_triples(self, level: int, count: int) -> tuple[Wide, Wide, Wide]:
        """``count`` level triples, made and sacrificed at level + 1 (module notes)."""
        if level + 1 > MAX_LEVEL:
            raise ConfigError(f"no triples above level {MAX_LEVEL - 1}")
        e, ses = self.engine, self.session
        up, vw = level + 1, level + 1          # the check level, and its values' words
        T = tau(level)
        others = [p for p in range(e.parties) if p != e.me]
        bits = (np.frombuffer(e.prg.random_bytes(count * T), np.uint8) & np.uint8(1)).reshape(count, T)
        b = e.prg.uint64((count, vw))
        # c_t = a_t b: this party's own product, and the cross terms by Gilboa's bit-times-value COT
        c = z2k.mul_word(np.repeat(b[:, None, :], T, axis=1), bits.astype(np.uint64))   # (count, T, vw)
        links = e.ot_links()
        tag = self._tag("gilboa")
        choice = np.packbits(bits.reshape(-1), bitorder="little")
        t_rows, q_rows = links.rows(choice, count * T, others, others)
        offsets = np.ascontiguousarray(np.repeat(b, T, axis=0).reshape(count * T, 1, vw))
        for i in others:
            q, (dom, start) = q_rows[i]
            corr, part = z2k.cot_send(q, links.delta(i), (dom ^ PURPOSE, start), offsets, 1)
            ses.send(i, corr, tag)
            c = z2k.add(c, part.reshape(count, T, vw))
        choices = bits.reshape(-1).astype(np.uint64)
        for j in others:
            t, (dom, start) = t_rows[j]
            corr = ses.recv_array(j, tag, dtype=np.uint64, shape=(count * T, 1, vw))
            part = z2k.cot_recv(t, (dom ^ PURPOSE, start), choices, corr, 1)
            c = z2k.add(c, part.reshape(count, T, vw))
        coins = self.coins(up, "amplify")
        r = coins.uint64((T, vw))
        rh = coins.uint64((T, vw))
        a, ah = z2k.subset_sums(bits, r), z2k.subset_sums(bits, rh)
        cc, ch = z2k.combine(r, c), z2k.combine(rh, c)
        words = up + 1
        values = np.concatenate([z2k.lift(v, words) for v in (a, b, cc, ah, ch)])
        auth = self.authenticate(up, values, 5 * count, range(e.parties), "triples")
        A, B, C, AH, CH = (auth[k * count:(k + 1) * count] for k in range(5))
        t_coin = self.coins(up, "sacrifice").uint64(count)
        rho = self.open(A.times_words(t_coin) - AH, "triple sacrifice")
        sigma_sh = C.times_words(t_coin) - CH - B.times(z2k.lift(rho, words))
        sigma = self.open(sigma_sh, "triple sacrifice")
        self.check(up, "triple sacrifice")
        if sigma.any():
            raise DeviationError("the ring's triple sacrifice failed: a party sent a wrong cross term or product")
        self.triples_made[level] += count
        return A.reduced(level), B.reduced(level), C.reduced(level)

    def mul(self, x: Wide, y: Wide) -> Wide:
        """Beaver's product with checked triples (one round of partial openings)."""
        n = len(x)
        a, b, c = self.take_triples(x.level, n)
        opened = self.open(Wide.concat([x - a, y - b]), "multiplication")
        eps, dlt = z2k.lift(opened[:n], x.words), z2k.lift(opened[n:], x.words)
        z = c + b.times(eps) + a.times(dlt)
        return self.add_public(z, z2k.mul(eps, dlt))

    # -- inputs and outputs ------------------------------------------------------------------------------
    def input(self, values: np.ndarray | None, owner: int, phase: str = "input") -> tuple[Wide, tuple[int, ...]]:
        """The owner's words (any shape) as level-1 shares (module notes), and their shape, which
        the owner announces first."""
        e, ses = self.engine, self.session
        tag = self._tag("input")
        if e.me == owner:
            arr = np.asarray(values, dtype=np.uint64)
            shape = tuple(int(d) for d in arr.shape)
            if arr.size > MAX_INPUT or len(shape) > 8:
                raise ValueError(f"an input of shape {shape}; at most 8 axes and {MAX_INPUT} entries at once")
            v = np.ascontiguousarray(arr).reshape(-1)
            ses.broadcast(list(shape), tag + "/shape")
        else:
            shape = read_shape(ses, owner, tag + "/shape")
        count = math.prod(shape)
        self.ledgers[1].witness(np.asarray(shape, np.uint64), phase)
        r, mine = self.mask(1, count, owner, phase)
        if e.me == owner:
            assert mine is not None
            with np.errstate(over="ignore"):
                d = v - mine[:, 0]
            ses.broadcast(d, tag)
        else:
            d = ses.recv_array(owner, tag, dtype=np.uint64, shape=(count,))
        self.ledgers[1].witness(d, phase)
        return self.add_public(r, d[:, None]), shape

    def reveal(self, x: Wide, to: int | None = None) -> np.ndarray | None:
        """Open level-1 values (uint64 (N,)) to all or to ``to``, after the MAC check."""
        if to is None:
            out = self.open(x, "output")[:, 0]
            self.check(1, "output")
            return out
        r, mine = self.mask(1, len(x), to, "private output")
        masked = self.open(x - r, "private output")[:, 0]
        self.check(1, "private output")
        if self.engine.me != to:
            return None
        assert mine is not None
        with np.errstate(over="ignore"):
            return masked + mine[:, 0]

    # -- random bits and truncation ------------------------------------------------------------------
    def random_bits(self, count: int) -> Wide:
        """``count`` authenticated random bits at level 1 (bits from squares at level 2)."""
        if count == 0:
            return _empty(1)
        have = sum(len(b) for b in self.bits)
        if have < count:
            self.bits.append(self._make_bits(max(count - have, 1024)))
        pool = Wide.concat(self.bits) if len(self.bits) > 1 else self.bits[0]
        out, rest = pool[:count], pool[count:]
        self.bits = [rest] if len(rest) else []
        return out

    def _make_bits(self, count: int) -> Wide:
        u = self.random(2, count, "random bits")
        one = np.zeros((count, 3), np.uint64)
        one[:, 0] = 1
        v = self.add_public(u.times_words(2), one[:, :2])          # 2 u + 1: odd
        sq = self.open(self.mul(v, v), "random bits")                # v^2 mod 2^128
        self.check(2, "random bits")
        if not np.all(sq[:, 0] & np.uint64(1)):
            raise DeviationError("the ring's random bits: an opened square is even (a party deviated)")
        y = _inverse_sqrt(sq)                                        # y^2 v^2 = 1 mod 2^128
        d1 = self.add_public(v.times(z2k.lift(y, 3)), one[:, :2])    # y v + 1: every share even
        share, mac = _halve(d1.share), _halve(d1.mac)
        return Wide(2, share, mac).reduced(1)

    def truncation_pairs(self, count: int, bits: int) -> tuple[Wide, Wide]:
        """([r], [r >> bits]) at level 1, r uniform in Z_2^64, the shift arithmetic."""
        b = self.random_bits(64 * count)
        planes = Wide(1, b.share.reshape(count, 64, 2), b.mac.reshape(count, 64, 2))
        weights = np.asarray([1 << j for j in range(64)], dtype=np.uint64)
        shifted = np.asarray([(1 << (j - bits)) if j >= bits else 0 for j in range(63)]
                             + [(-(1 << (63 - bits))) % (1 << 64)], dtype=np.uint64)
        r = Wide(1, _weighted(planes.share, weights), _weighted(planes.mac, weights))
        rs = Wide(1, _weighted(planes.share, shifted), _weighted(planes.mac, shifted))
        return r, rs

    def truncate(self, x: Wide, bits: int) -> Wide:
        """(x >> bits) or one more, with a large error with probability about |x| / 2^63."""
        r, rs = self.truncation_pairs(len(x), bits)
        c = self.open(x + r, "truncation")[:, 0]
        shifted = (c.view(np.int64) >> np.int64(bits)).view(np.uint64)
        return self.add_public(Wide(1, z2k.neg(rs.share), z2k.neg(rs.mac)), shifted[:, None])


def _empty(level: int) -> Wide:
    return Wide(level, np.zeros((0, level + 1), np.uint64), np.zeros((0, level + 1), np.uint64))


def _weighted(planes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_j w_j planes[:, j] for planes (N, 64, L)."""
    n, j, words = planes.shape
    return z2k.sum_axis(z2k.mul_word(planes, np.broadcast_to(weights, (n, j))), axis=1)


def _halve(x: np.ndarray) -> np.ndarray:
    """Each (even) element of (N, 3) words divided by 2 (mod 2^191: the top bit is lost)."""
    out = x >> np.uint64(1)
    out[:, :-1] |= (x[:, 1:] & np.uint64(1)) << np.uint64(63)
    return out


def _inverse_sqrt(sq: np.ndarray) -> np.ndarray:
    """y with y^2 a = 1 mod 2^127 for odd squares a (N, 2) words mod 2^128 (a = 1 mod 8), by
    Newton's y <- y (3 - a y^2) / 2 from y = 1 (each step exact: 3 - a y^2 is even)."""
    n = len(sq)
    y = np.zeros((n, 2), np.uint64)
    y[:, 0] = 1
    three = np.zeros((n, 2), np.uint64)
    three[:, 0] = 3
    for _ in range(8):   # precision 3, 4, 6, 10, 18, 34, 66, 130 bits
        t = z2k.sub(three, z2k.mul(sq, z2k.mul(y, y)))
        half = t >> np.uint64(1)
        half[:, 0] |= (t[:, 1] & np.uint64(1)) << np.uint64(63)
        y = z2k.mul(y, half)
    return y
