"""Authenticated bits for the active engine: TinyOT-style pairwise MACs from the OT extension's
own rows, AND triples from Wang–Ranellucci–Katz's leaky AND (checked, then bucketed), and
openings checked by hashed MACs.

**Representation** (:class:`AuthBits`). A shared bit x = x_0 XOR ... XOR x_{n-1}; party i holds
its bit x_i and, for every other party j, a 64-bit MAC M_i^j[x_i] and a 64-bit key K_i^j[x_j]
with M_i^j[x_i] = K_j^i[x_i] XOR x_i Delta_j, where Delta_j is party j's one global key (the low
64 bits of the 128-bit Delta with which j sends on every OT link). Shares, MACs and keys are all
XOR-linear, so XOR and NOT and AND with a public bit are local (a public c: party 0 flips its
bit, every other party j XORs c Delta_j into its key for party 0's bit).

**Authenticated bits (aBits).** One OT per bit and ordered pair, on a second set of OT links
whose sender Delta is the party's global key (:meth:`~shaper.protocols.ot.OtLinks.rows`, the
extension with its KOS/SoftSpoken check): the receiver's choice bit is its share, its row t is
the MAC, the sender's row q the key (t = q XOR x Delta). A receiver that does not use one choice
bit across the 128 columns fails the extension's check. With three parties or more a party
could use different bits towards different peers; every batch of aBits then carries 128 more
random ones, and the party opens, to everyone, v = sum_l s^l x_l over GF(2^128) (s from a joint
coin toss; the 128 extra bits make v uniform) and to each peer the same combination of its MACs,
which the peer checks against its keys and v Delta_j; the parties then compare the v they got.
A party that used different bits with two peers passes with probability about m / 2^128.

**AND triples** (:meth:`AuthBitDomain.bit_triples`): WRK17's leaky AND for n parties
(Wang–Ranellucci–Katz, "Global-scale secure multiparty computation", CCS 2017), in this
form:

1. aBits x, y random; the cross terms x_j y_i (j != i) as XOR shares from x_j's own aBit OT:
   the key holder i sends U = H1(K) XOR H1(K XOR Delta_i) XOR y_i and keeps H1(K); j takes
   H1(M) XOR x_j U. z_i = x_i y_i XOR every cross share; z is authenticated (aBits with z_i as
   the choice bits).
2. The check. C_i[v] = v_i Delta_i XOR sum_j (M_i^j[v_i] XOR K_i^j[v_j]) are XOR shares of
   v Delta (Delta = XOR of every Delta_i, over the rows' low 64 bits, the MACs' width). For
   x y Delta every key holder i of x_j sends W = H2(K) XOR H2(K XOR Delta_i) XOR C_i[y] (the
   hash's low 8 bytes: 8 bytes per triple), j takes
   H2(M) XOR x_j W; then G_i = x_i C_i[y] XOR those shares XOR C_i[z] and XOR_i G_i =
   (x y XOR z) Delta. Each party reduces its G_i to one GF(2^128) value by a random linear
   combination (coefficients from a joint coin toss after every W was sent); at two parties
   the two values must be equal and are compared by committed hashes, at more each is masked
   by a fresh XOR-sharing of zero and opened with commit-then-open: they must XOR to zero. A z that is not x y needs the XOR of the G to be (x y XOR z) Delta XOR e = 0 with
   Delta unknown: passes with probability 2^-64 (a guess of the honest Delta) + L / 2^128.
3. What a deviating party can still do: send a wrong U or W, which shifts the honest party's
   share by x_j times its error, so that the check passes or fails depending on x_j (a
   selective failure: it learns x_j with probability 1/2, and the job aborts otherwise).
   Only x leaks. (A party that keys its OT links with different Deltas towards different
   peers adds (x y_i XOR z_i) D to the XOR of the G, a term in an honest party's y and z
   shares that it cannot cancel: the check then passes only if every such bit of the batch is
   zero, about 2^-L/2, and a batch is never smaller than :data:`MIN_BATCH` triples, so this
   is an abort, not a leak. With three parties or more a failed check opens the honest party's
   combination, which with every pad known can give its Delta away: the engine stops for good
   at any failure and the Delta is never used again; at two parties only hashes are opened.)
4. Bucketing (WRK17, section 5): the L = B N leaky triples are permuted by a joint coin toss
   into N buckets of B; per bucket the output is x = XOR of every x^k, y = y^1 and
   z = z^1 XOR sum_k (z^k XOR d_k x^k) with d_k = y^1 XOR y^k opened (checked MACs). The
   output's x is known to the adversary only if every x^k in its bucket leaked: B = 3 for
   batches of 280,000 or more, 4 from 3,100 (WRK17's sizes; a union bound over the attacked
   triples gives 2^-40.0 and 2^-40.1 there). A batch is never smaller than 3,100
   (:data:`MIN_BATCH`; a smaller need leaves the rest in the pool): with B = 5 a batch of 140
   would be sound to 2^-35 only, and one of a single triple to 2^-5.

**Inputs** (:meth:`AuthBitDomain.share_bits`) go through a mask, as the prime field's do:
random authenticated bits r, opened to the owner, and the owner's broadcast of x XOR r, which
joins every party's view. Every party's share of an input is therefore uniform, and an output
that only XORs inputs shows the XOR alone (a share equal to the input, zero elsewhere, would
let the recipient read each input from the shares it receives).

**Openings** are partial, like the prime field's: every party sends its bits; the MACs of
what it sent go into a per-peer SHA-256 ledger, and what a peer should have sent (key XOR
share Delta) into another. The check before any output exchanges the digests; a party that
flipped a bit it sent must know Delta_j XOR MAC: it passes with probability 2^-64 per check.
A party that sends different bits to different peers fails at one of them (each MAC binds the
bit to that peer's key). A failure raises :class:`~shaper.errors.DeviationError` naming the
peer whose digest did not match.

What each party learns: the opened differences (uniform: masked by single-use triples), the
combination v of the consistency check (uniform: masked by 128 fresh bits), the zero-shared
combinations of the AND check (uniform subject to XOR zero) and the outputs revealed to it.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import numpy as np

from ...errors import DeviationError, FrameError
from ...kernels import tinyot
from ...kernels.modq import pack_bits, unpack_bits
from ..api import XorShares, public_mask
from ..commit import open_committed
from ..ot import InsecureLinks, OtLinks
from .check import read_shape

__all__ = ["AuthBitDomain", "AuthBits", "bucket_size"]

CROSS = 1 << 8     # hash purposes on an aBit row: the cross term of z ...
CHECK = 2 << 8     # ... and the leaky AND's check
MASKS = 128        # extra aBits per batch for the consistency check (three parties or more)
CHUNK = 1 << 19    # final triples per preprocessing batch at most (memory: about 1 KiB per triple per peer)
MIN_BATCH = 3_100  # final triples per batch at least: B = 4 is sound to 2^-40 from here (2^-35 at 140 with B = 5)
AND_CHECK_FAILED = ("the AND triples' check failed: a party sent a wrong cross term, check share or "
                    "authenticated product")
MAX_BITS = 1 << 22  # bits per input or random draw in one call (the rows of one call: 16 bytes per bit and peer)


def bucket_size(count: int) -> int:
    """Leaky ANDs per final AND triple for a batch of ``count`` (WRK17's sizes for 2^-40: 3 from
    280,000, 4 from 3,100; :data:`MIN_BATCH` keeps every batch at 3,100 or more)."""
    return 3 if count >= 280_000 else 4 if count >= 3_100 else 5


def batches(count: int) -> list[int]:
    """Batch sizes for ``count`` final triples: at least :data:`MIN_BATCH` in all (the surplus
    stays in the pool), split evenly so that no batch is a small remainder."""
    count = max(int(count), MIN_BATCH)
    parts = -(-count // CHUNK)
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class AuthBits(XorShares):
    """This party's share of authenticated bits: packed share bits (..., W) as
    :class:`~shaper.protocols.api.XorShares`, and per other party (in party order, this party
    left out) a 64-bit MAC of each of its bits and a 64-bit key for that party's bit:
    ``macs``, ``keys`` (P - 1, ..., bits) uint64."""

    __slots__ = ("keys", "macs")

    def __init__(self, engine: Any, words: np.ndarray, bits: int, macs: np.ndarray, keys: np.ndarray) -> None:
        super().__init__(engine, words, bits)
        self.macs = np.asarray(macs, dtype=np.uint64)
        self.keys = np.asarray(keys, dtype=np.uint64)

    @classmethod
    def of(cls, engine: Any, bits: np.ndarray, macs: np.ndarray, keys: np.ndarray) -> "AuthBits":
        """From unpacked share bits (..., N) bool."""
        b = np.asarray(bits, dtype=bool)
        return cls(engine, pack_bits(b), b.shape[-1], macs, keys)

    def plain(self) -> np.ndarray:
        """This party's share bits, unpacked: bool (..., bits)."""
        return unpack_bits(self.words, self.bits)

    def __getitem__(self, index: Any) -> "AuthBits":
        """Index the leading (non-bit) axes only."""
        idx = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis or i is None for i in idx) or len(idx) >= self.words.ndim:
            raise IndexError(f"authenticated bits index their leading axes only ({self.words.ndim - 1} here), "
                             f"got {index!r}")
        full = (slice(None),) + idx
        return AuthBits(self.engine, self.words[idx], self.bits, self.macs[full], self.keys[full])

    def _same(self, other: "AuthBits") -> None:
        if other.bits != self.bits:
            raise ValueError(f"bit arrays of {self.bits} and {other.bits} bits")

    def expanded(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bits, macs, keys) broadcast to ``shape`` (leading axes and the bit axis), as numpy
        broadcasts the share bits."""
        peers = self.macs.shape[0]
        lead = (1,) * (len(shape) - len(self.shape)) + self.shape
        return (np.broadcast_to(self.plain().reshape(lead), shape),
                np.broadcast_to(self.macs.reshape((peers,) + lead), (peers,) + shape),
                np.broadcast_to(self.keys.reshape((peers,) + lead), (peers,) + shape))

    def __xor__(self, other: Any) -> "AuthBits":
        if isinstance(other, AuthBits):
            self._same(other)
            if other.shape == self.shape:
                return AuthBits(self.engine, self.words ^ other.words, self.bits, self.macs ^ other.macs,
                                self.keys ^ other.keys)
            shape = np.broadcast_shapes(self.shape, other.shape)
            (a, am, ak), (b, bm, bk) = self.expanded(shape), other.expanded(shape)
            return AuthBits.of(self.engine, a ^ b, am ^ bm, ak ^ bk)
        if isinstance(other, XorShares):
            raise TypeError("authenticated bits XOR unauthenticated shares: input them through the active engine")
        return self.engine.xor_public_bits(self, other)

    __rxor__ = __xor__

    def __and__(self, other: Any) -> "AuthBits":
        if isinstance(other, XorShares):
            return self.engine.and_bits(self, other)
        return self.engine.and_public_bits(self, other)

    __rand__ = __and__

    @staticmethod
    def stack(parts: Sequence["AuthBits"]) -> "AuthBits":
        """Stack along a new leading axis."""
        first = parts[0]
        for p in parts[1:]:
            first._same(p)
        return AuthBits(first.engine, np.stack([p.words for p in parts]), first.bits,
                        np.stack([p.macs for p in parts], axis=1), np.stack([p.keys for p in parts], axis=1))

    def lanes(self, start: int, stop: int) -> "AuthBits":
        """Bits ``start`` .. ``stop`` - 1 of the bit axis, each with its MACs and keys."""
        if not 0 <= start < stop <= self.bits:
            raise ValueError(f"lanes {start}..{stop} of {self.bits} bits")
        return AuthBits.of(self.engine, self.plain()[..., start:stop], self.macs[..., start:stop],
                           self.keys[..., start:stop])

    @staticmethod
    def join(parts: Sequence["AuthBits"]) -> "AuthBits":
        """Concatenate along the bit axis (the same leading shape)."""
        first = parts[0]
        return AuthBits.of(first.engine, np.concatenate([p.plain() for p in parts], axis=-1),
                           np.concatenate([p.macs for p in parts], axis=-1),
                           np.concatenate([p.keys for p in parts], axis=-1))

    def __repr__(self) -> str:
        return f"AuthBits(shape={self.shape}, party={self.engine.me})"


def _low64(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows).view(np.uint64)[:, 0].copy()


def _xor_bytes(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(len(a), "little")


class _Ledger:
    """What this party sent to one peer and what that peer should have sent, hashed."""

    __slots__ = ("expect", "sent")

    def __init__(self) -> None:
        self.sent = hashlib.sha256(b"shaper/active/bits/sent")
        self.expect = hashlib.sha256(b"shaper/active/bits/sent")


class AuthBitDomain:
    """The bits domain of :class:`~.engine.ActiveEngine` (see the module notes). Expects the
    engine's ``session``, ``me``, ``parties``, ``prg``, ``links``, ``openings``, ``_tag``,
    ``joint_coins`` and ``check_all`` (both domains' checks, run before any output)."""

    _blinks_obj: Any = None
    _bit_delta: bytes | None = None
    _ledgers: dict[int, _Ledger] | None = None
    _bit_pool: tuple[np.ndarray, ...] | None = None
    _bit_opens: int = 0   # openings since the last bit check (every party counts every call alike)
    bit_triples_made: int = 0

    # -- keys and links ------------------------------------------------------------------------
    @property
    def others(self) -> list[int]:
        return [p for p in range(self.parties) if p != self.me]

    def _bit_links(self) -> Any:
        if self._blinks_obj is None:
            self._bit_delta = self.prg.random_bytes(16)
            if isinstance(self.links, InsecureLinks):
                self._blinks_obj = InsecureLinks(self.session, delta=self._bit_delta)
            else:
                self._blinks_obj = OtLinks(self.session, label="abit", delta=self._bit_delta)
        return self._blinks_obj

    @property
    def _delta64(self) -> np.uint64:
        self._bit_links()
        return np.frombuffer(self._bit_delta, dtype=np.uint64)[0]

    def _ledger(self, peer: int) -> _Ledger:
        if self._ledgers is None:
            self._ledgers = {p: _Ledger() for p in self.others}
        return self._ledgers[peer]

    # -- aBits ---------------------------------------------------------------------------------
    def _abits(self, mine: np.ndarray | None, count: int, owners: Sequence[int], what: str
               ) -> tuple[dict[int, Any], dict[int, Any], np.ndarray | None]:
        """Authenticate ``count`` bits of every owner (this party's are ``mine``, bool): returns
        the rows ({peer: (t, tweak)} for this party's bits, {owner: (q, tweak)} for theirs) and
        this party's bits, after the consistency check where there are three parties or more.
        The masks of the check are dropped from what is returned."""
        links = self._bit_links()
        extra = MASKS if self.parties > 2 else 0
        me_owner = self.me in owners
        full = None
        if me_owner:
            full = np.concatenate([np.asarray(mine, dtype=bool), self.prg.uint64(extra) & np.uint64(1) == 1]) \
                if extra else np.asarray(mine, dtype=bool)
        receive = self.others if me_owner else []
        send = [o for o in owners if o != self.me]
        choices = np.packbits(full, bitorder="little") if me_owner else None
        t, q = links.rows(choices, count + extra, receive, send)
        if extra:
            self._consistent(owners, full, t, q, what)
        t = {p: (rows[:count], tw) for p, (rows, tw) in t.items()}
        q = {p: (rows[:count], tw) for p, (rows, tw) in q.items()}
        return t, q, (full[:count] if me_owner else None)

    def _consistent(self, owners: Sequence[int], mine: np.ndarray | None, t: dict, q: dict, what: str) -> None:
        """Every owner used the same bits with every peer (module notes)."""
        links, ses = self._bit_links(), self.session
        tag = self._tag("abit-check")
        seed = self.joint_coins("abit-check").random_bytes(16)
        own_v = b""
        if self.me in owners:
            own_v = links.combine_bits(mine, seed)
            for p in self.others:
                ses.send(p, own_v + links.combine(t[p][0], seed), tag)
        got, bad = {}, []
        for o in owners:
            if o == self.me:
                continue
            msg = ses.recv_bytes(o, tag, size=32)
            if len(msg) != 32:
                raise FrameError(f"party {ses.parties[o]!r} sent a {len(msg)}-byte aBit check; expected 32")
            v, mu = msg[:16], msg[16:]
            if _xor_bytes(links.combine(q[o][0], seed), links.scale(v, links.delta(o))) != mu:
                bad.append(o)
            got[o] = v
        view = b"".join(own_v if o == self.me else got[o] for o in owners)
        ses.broadcast(view, tag + "/view")
        differ = [p for p in self.others if ses.recv_bytes(p, tag + "/view", size=len(view)) != view]
        if bad:
            raise DeviationError(f"the aBit consistency check ({what}) failed for party "
                                 f"{', '.join(repr(ses.parties[o]) for o in bad)}: its bits differ between peers")
        if differ:
            raise DeviationError(f"the aBit consistency check ({what}): the parties received different "
                                 f"combinations ({', '.join(repr(ses.parties[p]) for p in differ)} saw others); "
                                 "a party sent different values to different peers")

    def _macs_keys(self, t: dict, q: dict, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(macs, keys) (P - 1, count) uint64 from the rows, zeros where there are none."""
        macs = np.zeros((self.parties - 1, count), np.uint64)
        keys = np.zeros((self.parties - 1, count), np.uint64)
        for k, p in enumerate(self.others):
            if p in t:
                macs[k] = _low64(t[p][0])
            if p in q:
                keys[k] = _low64(q[p][0])
        return macs, keys

    # -- inputs ----------------------------------------------------------------------------------
    def share_bits(self, bits: Any, *, owner: int) -> AuthBits:
        """The owner's bool array (..., N) as authenticated bits: random authenticated bits r
        (every party's share uniform), opened to the owner alone, and the owner's broadcast of
        x XOR r, which every party XORs in as a public value and adds to its view (compared at
        the next check: an owner that sends different values to different peers is caught).
        Every party's share of x is then as uniform as its share of r: an output that XORs
        inputs shows the XOR, not the inputs."""
        if not 0 <= owner < self.parties:
            raise ValueError(f"input owner {owner} is not a party (0..{self.parties - 1})")
        tag = self._tag("share-bits")
        if self.me == owner:
            arr = np.asarray(bits, dtype=bool)
            if arr.ndim == 0:
                raise ValueError("share_bits takes an array of bits (..., N), got a scalar")
            if arr.size > MAX_BITS:
                raise ValueError(f"an input of {arr.size} bits; at most {MAX_BITS} at once")
            shape = arr.shape
            self.session.broadcast(list(shape), tag + "/shape")
        else:
            shape = read_shape(self.session, owner, tag + "/shape", limit=MAX_BITS)
            if not shape:
                raise FrameError(f"party {self.session.parties[owner]!r} announced a scalar bit input")
        self.openings.witness(np.asarray(shape, dtype=np.uint64), "bit input")
        r = self.random_bits(shape[:-1], shape[-1])
        mask = self.open_bits_partial(r, to=owner)   # checked with everything else before any output
        if self.me == owner:
            d = pack_bits(arr ^ mask)
            self.session.broadcast(d, tag)
        else:
            d = self.session.recv_array(owner, tag, dtype=np.uint64, shape=r.words.shape)
        self.openings.witness(d & pack_bits(np.ones(shape, bool)), "bit input")  # padding bits left out
        return self.xor_public_bits(r, d)

    def random_bits(self, shape: tuple[int, ...], bits: int) -> AuthBits:
        """Authenticated uniform bits no party knows, (shape..., bits)."""
        full = tuple(shape) + (int(bits),)
        count = math.prod(full)
        if count > MAX_BITS:
            raise ValueError(f"{count} random bits at once; at most {MAX_BITS} per call")
        mine = (self.prg.uint64(count) & np.uint64(1)) == 1
        t, q, mine = self._abits(mine, count, list(range(self.parties)), "random bits")
        macs, keys = self._macs_keys(t, q, count)
        peers = self.parties - 1
        return AuthBits.of(self, mine.reshape(full), macs.reshape((peers,) + full), keys.reshape((peers,) + full))

    def constant_bits(self, bit: int, shape: tuple[int, ...], bits: int) -> AuthBits:
        """A public bit in every lane, (shape..., bits): party 0 holds it, its peers' keys say so."""
        zero = self.zero_bits(shape, bits)
        return self.xor_public_bits(zero, True) if bit else zero

    def zero_bits(self, shape: tuple[int, ...], bits: int) -> AuthBits:
        full = tuple(shape) + (int(bits),)
        z = np.zeros((self.parties - 1,) + full, np.uint64)
        return AuthBits.of(self, np.zeros(full, bool), z, z.copy())

    # -- public operands ----------------------------------------------------------------------------
    def _public_bits(self, x: AuthBits, value: Any) -> np.ndarray:
        words = np.broadcast_to(public_mask(value), x.words.shape)
        return unpack_bits(words, x.bits)

    def xor_public_bits(self, x: XorShares, value: Any) -> AuthBits:
        """x XOR a public bit (all lanes) or packed words: party 0 flips its bits, every other
        party moves its key for party 0's bits by Delta where the public bit is set."""
        assert isinstance(x, AuthBits)
        c = self._public_bits(x, value)
        if self.me == 0:
            return AuthBits(self, x.words ^ pack_bits(c), x.bits, x.macs.copy(), x.keys.copy())
        keys = x.keys.copy()
        keys[0] ^= np.where(c, self._delta64, np.uint64(0))  # peer 0 comes first in every other party's list
        return AuthBits(self, x.words.copy(), x.bits, x.macs.copy(), keys)

    def and_public_bits(self, x: AuthBits, value: Any) -> AuthBits:
        c = self._public_bits(x, value)
        zero = np.uint64(0)
        return AuthBits(self, x.words & pack_bits(c), x.bits, np.where(c, x.macs, zero), np.where(c, x.keys, zero))

    # -- openings and their check ---------------------------------------------------------------
    def open_bits_partial(self, x: AuthBits, to: int | None = None) -> np.ndarray | None:
        """Open to every party (or to ``to`` alone): this party's bits (bool (..., bits)) at the
        recipients, *not yet checked* (recorded for :meth:`check_bits`)."""
        ses, tag = self.session, self._tag("bopen")
        self._bit_opens += 1
        words = np.ascontiguousarray(x.words)
        mine = x.plain()
        senders = self.others if to is None or to == self.me else []
        for k, p in enumerate(self.others):
            if to is None or p == to:
                ses.send(p, words, tag)
                led = self._ledger(p)
                led.sent.update(np.ascontiguousarray(x.macs[k]).tobytes())
        if to is not None and to != self.me:
            return None
        total = mine.copy()
        delta = self._delta64
        for p in senders:
            got = ses.recv_array(p, tag, dtype=np.uint64, shape=words.shape)
            theirs = unpack_bits(got, x.bits)
            total ^= theirs
            k = self.others.index(p)
            led = self._ledger(p)
            led.expect.update(np.ascontiguousarray(x.keys[k] ^ np.where(theirs, delta, np.uint64(0))).tobytes())
        return total

    def check_bits(self, phase: str = "output") -> None:
        """Compare the hashed MACs of every bit opened since the last check with every peer."""
        if not self._bit_opens:  # the same count at every party: all run the exchange or none does
            return
        ses, tag = self.session, self._tag("bcheck")
        for p in self.others:
            self._ledger(p)
        ledgers, self._ledgers, self._bit_opens = self._ledgers, None, 0
        for p in self.others:
            ses.send(p, ledgers[p].sent.digest(), tag)
        bad = [p for p in self.others if ses.recv_bytes(p, tag, size=32) != ledgers[p].expect.digest()]
        if bad:
            raise DeviationError(f"the bit MAC check ({phase}) failed: the bits opened by party "
                                 f"{', '.join(repr(ses.parties[p]) for p in bad)} do not match their MACs")

    def reveal_bits(self, x: XorShares, to: int | None = None) -> np.ndarray | None:
        """Open to every party (``to`` None) or to ``to`` alone, after the MAC check."""
        assert isinstance(x, AuthBits)
        if to is not None and not 0 <= to < self.parties:
            raise ValueError(f"output recipient {to} is not a party (0..{self.parties - 1})")
        self.check_all("before output")  # the computation checked before anyone sees its output
        opened = self.open_bits_partial(x, to)
        self.check_all("output" if to is None else "private output")
        return opened

    # -- AND ---------------------------------------------------------------------------------------
    def and_bits(self, x: XorShares, y: XorShares) -> AuthBits:
        """x AND y element-wise (matching or broadcastable shapes): Beaver with checked triples."""
        if not (isinstance(x, AuthBits) and isinstance(y, AuthBits)):
            raise TypeError("the active engine ANDs authenticated bits only")
        x._same(y)
        shape = np.broadcast_shapes(x.shape, y.shape)
        peers = self.parties - 1

        def flat(v: AuthBits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            b, m, k = v.expanded(shape)
            return b.ravel(), m.reshape(peers, -1), k.reshape(peers, -1)

        (xb, xm, xk), (yb, ym, yk) = flat(x), flat(y)
        count = len(xb)
        if count == 0:
            return AuthBits.of(self, xb.reshape(shape), xm.reshape((peers,) + shape), xk.reshape((peers,) + shape))
        (ab, am, ak), (bb, bm, bk), (cb, cm, ck) = self._take_bit_triples(count)
        both = AuthBits.of(self, np.stack([xb ^ ab, yb ^ bb]), np.stack([xm ^ am, ym ^ bm], axis=1),
                           np.stack([xk ^ ak, yk ^ bk], axis=1))
        opened = self.open_bits_partial(both)
        d, e = opened[0], opened[1]
        zero = np.uint64(0)
        zb = cb ^ (d & bb) ^ (e & ab)
        zm = cm ^ np.where(d, bm, zero) ^ np.where(e, am, zero)
        zk = ck ^ np.where(d, bk, zero) ^ np.where(e, ak, zero)
        z = self.xor_public_bits(AuthBits.of(self, zb, zm, zk), pack_bits(d & e))
        return AuthBits.of(self, z.plain().reshape(shape), z.macs.reshape((peers,) + shape),
                           z.keys.reshape((peers,) + shape))

    def reserve_bit_triples(self, words: int) -> None:
        """Make ``words`` x 64 AND triples now, in one batch, for the AND gates that follow."""
        self._fill_bit_pool(64 * int(words))

    def _fill_bit_pool(self, count: int) -> None:
        have = 0 if self._bit_pool is None else len(self._bit_pool[0])
        if have >= count:
            return
        fresh = self._make_bit_triples(count - have)  # at least MIN_BATCH: the surplus stays
        if self._bit_pool is not None:
            fresh = tuple(np.concatenate([old, new]) for old, new in zip(self._bit_pool, fresh))
        self._bit_pool = tuple(fresh)

    def _take_bit_triples(self, count: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``count`` triples from the pool (each used once): [(bits, macs, keys)] for a, b, c."""
        self._fill_bit_pool(count)
        pool = self._bit_pool
        taken = [m[:count] for m in pool]
        self._bit_pool = tuple(m[count:] for m in pool) if len(pool[0]) > count else None
        return [self._split(m) for m in taken]

    def rows_as_bits(self, m: np.ndarray) -> AuthBits:
        """Triple rows (count, 2P - 1) (:meth:`bit_triples`) as authenticated bits (count,)."""
        return AuthBits.of(self, *self._split(m))

    def _split(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A row matrix (count, 2P - 1) [bit, MAC per peer, key per peer] as (bits, macs, keys)."""
        peers = self.parties - 1
        return m[:, 0] == 1, np.ascontiguousarray(m[:, 1:1 + peers].T), np.ascontiguousarray(m[:, 1 + peers:].T)

    # -- preprocessing -------------------------------------------------------------------------------
    def bit_triples(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` checked AND triples: row matrices (count, 2P - 1) uint64 for a, b and c, each
        row [this party's bit, its MAC for every peer, its key for every peer's bit]. Made in
        batches of at least :data:`MIN_BATCH` (a smaller request discards the rest; the engine's
        own AND gates keep it in their pool)."""
        made = self._make_bit_triples(count)
        return tuple(m[:count] for m in made)  # type: ignore[return-value]

    def _make_bit_triples(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = [self._bucketed(n) for n in batches(count)]
        self.check_bits("AND triples")
        self.bit_triples_made += sum(len(p[0]) for p in parts)
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def _bucketed(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """WRK17's bucketing of count x B leaky triples into ``count`` (module notes)."""
        if count < MIN_BATCH:
            raise ValueError(f"a bucketing batch of {count} triples; at least {MIN_BATCH} for 2^-40")
        B = bucket_size(count)
        leaky = self._leaky(count * B)   # (L, 3, 2P - 1): x, y, z of each leaky triple
        # a uniform permutation from a 128-bit joint coin toss (expanded by Philox; public coins)
        key = int.from_bytes(self.joint_coins("buckets").random_bytes(16), "little")
        idx = np.random.Generator(np.random.Philox(key=key)).permutation(count * B).reshape(count, B)
        d_rows, a, b = tinyot.open_(leaky, idx)              # d_k = y^1 XOR y^k, opened
        bits, macs, keys = self._split(d_rows)
        d = self.open_bits_partial(AuthBits.of(self, bits, macs, keys)).reshape(count, B - 1)
        return a, b, tinyot.close(leaky, idx, d)

    def _leaky(self, count: int) -> np.ndarray:
        """``count`` leaky AND triples, z = x y checked, as rows (count, 3, 2P - 1): x, y, z each
        [bit, MAC per peer, key per peer]; x may have leaked to a deviating party (notes)."""
        ses, links, others = self.session, self._bit_links(), self.others
        everyone = list(range(self.parties))
        delta = self._bit_delta
        rand = (self.prg.uint64(2 * count) & np.uint64(1)) == 1
        t, q, mine = self._abits(rand, 2 * count, everyone, "AND triples")
        x, y = mine[:count], mine[count:]
        xw, yw = pack_bits(x), pack_bits(y)
        # 1. z = x y: the cross terms from x's own aBit OTs
        tag = self._tag("land")
        share = xw & yw
        for p in others:
            rows, (dom, start) = q[p]
            m0, m1 = links.hash_bits(rows[:count], (dom ^ CROSS, start), delta)
            ses.send(p, m0 ^ m1 ^ yw, tag + "/u")
            share ^= m0
        for p in others:
            rows, (dom, start) = t[p]
            m = links.hash_bits(rows[:count], (dom ^ CROSS, start))
            u = ses.recv_array(p, tag + "/u", dtype=np.uint64, shape=xw.shape)
            share ^= m ^ (xw & u)
        z = unpack_bits(share, count)
        tz, qz, _ = self._abits(z, count, everyone, "AND triples")
        # 2. the check: XOR over parties of G_i = (x y XOR z) Delta must be zero, over the rows'
        # low 64 bits (the MACs' width: a wrong z passes with probability 2^-64)
        d64 = np.frombuffer(delta, dtype=np.uint64)[0]
        xmask = -(x.astype(np.uint64))
        # the rows out (count, 3, 2P - 1) and, for y and z, each row's share of bit Delta
        out = np.empty((count, 3, self.parties * 2 - 1), np.uint64)
        macs, keys = [t[p][0] for p in others], [q[p][0] for p in others]
        tinyot.rows_into(out, 0, x, macs, keys, 0, d64)
        cy = tinyot.rows_into(out, 1, y, macs, keys, count, d64)
        cz = tinyot.rows_into(out, 2, z, [tz[p][0] for p in others], [qz[p][0] for p in others], 0, d64)
        acc = (cy & xmask) ^ cz
        for p in others:
            rows, (dom, start) = q[p]
            h0, h1 = links.hash_rows(rows[:count], (dom ^ CHECK, start), delta)
            h0 = h0.view(np.uint64)[:, 0]
            ses.send(p, h0 ^ h1.view(np.uint64)[:, 0] ^ cy, tag + "/w")
            acc ^= h0
        for p in others:
            rows, (dom, start) = t[p]
            h = links.hash_rows(rows[:count], (dom ^ CHECK, start)).view(np.uint64)[:, 0]
            w = ses.recv_array(p, tag + "/w", dtype=np.uint64, shape=(count,))
            acc ^= h ^ (w & xmask)
        wide = np.zeros((count, 2), np.uint64)
        wide[:, 0] = acc
        self._and_check(wide, tag)
        return out

    def _and_check(self, rows: np.ndarray, tag: str) -> None:
        """XOR over the parties of their G rows must be zero, reduced by a random GF(2^128)
        combination drawn after every message of the AND. Two parties: equal combinations,
        compared by committed hashes (a failed check then shows nothing of the honest value).
        More: each combination masked by a fresh XOR-sharing of zero and opened committed (a
        failed check can then show an honest party's Delta to a coalition that knows every pad:
        the engine stops for good at any failure and never uses that Delta again)."""
        ses, links, others = self.session, self._bit_links(), self.others
        pad = 0
        if self.parties > 2:
            for p in others:
                if self.me < p:
                    r = self.prg.random_bytes(16)
                    ses.send(p, r, tag + "/pad")
                    pad ^= int.from_bytes(r, "little")
            for p in others:
                if p < self.me:
                    pad ^= int.from_bytes(ses.recv_bytes(p, tag + "/pad", size=16), "little")
        seed = self.joint_coins("and-check").random_bytes(16)
        mine = _xor_bytes(links.combine(rows.view(np.uint8), seed), pad.to_bytes(16, "little"))
        if self.parties == 2:
            digest = hashlib.sha256(b"shaper/active/bits/and-check" + mine).digest()
            opened = open_committed(ses, digest, tag + "/x", error=DeviationError)
            if opened[0] != opened[1]:
                raise DeviationError(AND_CHECK_FAILED)
            return
        opened = open_committed(ses, mine, tag + "/x", error=DeviationError)
        total = 0
        for v in opened:
            if len(v) != 16:
                raise FrameError(f"a {len(v)}-byte AND check value; expected 16")
            total ^= int.from_bytes(v, "little")
        if total:
            raise DeviationError(AND_CHECK_FAILED)
