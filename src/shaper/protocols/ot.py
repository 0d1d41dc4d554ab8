"""One party's oblivious-transfer links to every peer, over the session's TLS channels.

The cryptography is in the Rust core, sans I/O (``shaper._native``: base OT, IKNP / SoftSpoken
extension, the tweaked correlation-robust hash and the correlated-OT kernels; see
``native/src/ot``); this module only moves its bytes and keeps the per-pair state.

**Links.** For every ordered pair (s, r) there is one extension in which s sends and r receives,
so each party is sender on n - 1 links and receiver on n - 1. A link is set up once, lazily, on
first use, with both directions in the same four messages:

1. both parties send 16 random bytes, their SoftSpoken k and whether they run the consistency
   check (both must agree); the link id of direction s -> r is SHA-256(label, s, r, nonce_s,
   nonce_r): its first 16 bytes key the base OTs' hashes and are the context of the check's
   Fiat–Shamir hash, and its next 8 bytes (low two bytes cleared) are the *domain* in every extended
   OT's hash tweak, so no two pairs or directions ever hash under the same tweak;
2. as base-OT sender (for the direction in which it will *receive* extended OTs) a party sends
   A = a G;
3. as base-OT receiver (for the direction in which it will *send*) it answers with 128 points
   chosen by the bits of its fresh secret Delta;
4. (k > 1) as extension receiver it sends SoftSpoken's setup: the level sums of its 128/k GGM
   trees of depth k, masked under the base-OT keys (4 KiB), from which the extension sender
   learns every leaf but the one its Delta punctures.

Then the extension runs forever on the same base keys (PRG streams continue), each extended OT
with its own index in the hash tweak: an OT is used for one purpose, once. **SoftSpoken**
(Roy, CRYPTO 2022; repetition code) with k = ``K`` = 4: the receiver sends 128/k
bits per OT (4 bytes, against IKNP's 16) for 2^k PRG streams per k columns; the rows satisfy
IKNP's relation q_j = t_j XOR r_j Delta, so everything below is the same for any k (k = 1 is
IKNP itself). On this machine the OTs are bounded by CPU, and a quarter of the traffic is a
quarter of the AES-GCM sealing and the kernel's copies (see docs/mpc.md for the measured k).

**Correlated OT** (:meth:`OtLinks.cot`): the receiver r has values b (``bits`` bits each), the
sender s has ``k`` offsets a per value, each in its own modulus. One extended OT per bit of b;
the sender derives pads from both OT messages and sends ``pad0 - pad1 + a 2^i`` per bit and
offset; the outputs are additive shares of a * b in every modulus (Gilboa's OLE; with one bit it
is "private bit times value"). Two messages per pair: r -> s the extension matrix (16/K bytes per
OT), s -> r the corrections (8 k bytes per OT).

**Bit products** (:meth:`OtLinks.bit_cross`): random OTs with one-bit messages give XOR shares of
a_s AND b_r, with one correction bit per OT so that a_s is the sender's own bit.

**Consistency check** (on by default, ``check=True``): every extension message carries the
KOS / SoftSpoken correlation check (Keller–Orsini–Scholl 2015; Roy 2022 for k > 1; see
``native/src/ot/check.rs``): 256 extra random rows per message, discarded, and 32 bytes x, t~
with which the sender verifies sum chi_j q_j = t~ + x Delta over GF(2^128), the chi_j a
Fiat–Shamir hash of the message under the direction's link id. The sender checks before any
output of the message is used or sent; on failure it raises :class:`~shaper.errors.FrameError`
("party X's OT extension failed the consistency check") and never uses that direction again.

Security: the sender learns nothing about the receiver's choices (the extension matrix is
masked by PRG streams the sender cannot compute), the receiver learns one of two pads per OT
and nothing of the offsets. Against a *malicious receiver* the extension's correlation is
protected by the check: a message not made from one choice vector (a column or a group with
its own r, a wrong setup message) fails, except where the receiver guesses the Delta bits its
deviation touches (each guess halves its chance of passing, and a failure ends the pair), so it
cannot learn Delta and with it every later OT of the pair. What stays semi-honest: the
consumers. A receiver may still choose its choice bits (its inputs) freely, a sender may send
wrong Gilboa corrections or bit-product corrections (additive errors in the shares, and
selective failure on the receiver's bits when an output is later opened), and triples are not
sacrificed or MAC-checked, so a deviating party can still make results wrong.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, FrameError
from ..kernels import ot as ot_kernel
from ..kernels.modq import Ring, lift_public, mul_mod, pack_bits

__all__ = ["CHUNK_OTS", "K", "InsecureLinks", "OtLinks", "links_for"]

LABEL = b"shaper/nparty/ot-link/v1"
BASE = 128            # base OTs per direction (the extension's security parameter)
K = 4                 # SoftSpoken: base OTs per group; the extension message is 128/K bits per OT (1: IKNP)
SETUP_BYTES = 32 * BASE  # SoftSpoken's setup message (two masked 16-byte level sums per base OT)
CHUNK_OTS = 1 << 20   # extended OTs per message


@dataclass
class _Link:
    """The extension state towards one peer: ``tx`` where this party sends, ``rx`` where it
    receives, and the hash domains of both directions."""

    tx: Any
    rx: Any
    delta: bytes
    domain_tx: int
    domain_rx: int


def _direction_id(sender: str, receiver: str, nonce_s: bytes, nonce_r: bytes, label: str = "ot") -> tuple[bytes, int]:
    """The direction's 16-byte id and its hash domain: the low 8 bits number a hash's output
    columns and bits 8..15 are left to the callers that hash rows for their own purposes
    (:meth:`OtLinks.rows`), both zero here; the link set's label is hashed in, so two link sets
    on one session never share a domain."""
    parts = [LABEL, sender.encode(), receiver.encode(), nonce_s, nonce_r] + ([label.encode()] if label != "ot" else [])
    digest = hashlib.sha256(b"\0".join(parts)).digest()
    return digest[:16], int.from_bytes(digest[16:24], "little") & ~0xFFFF


class OtLinks:
    """This party's OT extension towards every peer (set up lazily, per peer, on first use)."""

    def __init__(self, session: Any, k: int = K, check: bool = True, label: str = "ot",
                 delta: bytes | None = None) -> None:
        """``k``: SoftSpoken's group size (1 = IKNP); ``check``: the consistency check (every
        party must agree; off only to measure what it costs); ``label``: the prefix of this
        object's message tags (two link sets on one session need two labels); ``delta``: one
        16-byte Delta for every direction in which this party sends (the global MAC key of the
        active engine's authenticated bits; by default a fresh Delta per peer)."""
        if delta is not None and len(delta) != 16:
            raise ConfigError(f"an OT extension Delta is 16 bytes, got {len(delta)}")
        self.global_delta = delta
        if k not in (1, 2, 4):
            raise ConfigError(f"SoftSpoken k must be 1 (IKNP), 2 or 4, got {k!r}")
        self.k = k
        self.check = bool(check)
        self.label = label
        self.session = session
        self.me = session.index
        self.native = ot_kernel.engine()
        self._links: dict[int, _Link] = {}
        self._steps: dict[int, int] = {}
        self._failed: dict[int, str] = {}  # peers whose extension failed the check: never used again
        self.ots = 0  # extended OTs this party took part in (both roles)

    def _tag(self, peer: int, what: str) -> str:
        """Tags count per peer: parties that sit out an operation stay in step with the rest."""
        self._steps[peer] = self._steps.get(peer, 0) + 1
        return f"{self.label}-{what}-{self._steps[peer]}"

    # -- set-up ---------------------------------------------------------------------------------
    def ensure(self, peers: Sequence[int]) -> None:
        """Set up the links to ``peers`` that do not exist yet (both directions, all at once)."""
        for p in set(peers):
            if p in self._failed:
                raise FrameError(self._failed[p])
        new = sorted(p for p in set(peers) if p not in self._links and p != self.me)
        if not new:
            return
        ses, nat, names = self.session, self.native, self.session.parties
        tags = {p: self._tag(p, "setup") for p in new}
        nonce = os.urandom(16)
        for p in new:
            ses.send(p, nonce + bytes([self.k, self.check]), tags[p] + "n")
        theirs = {}
        for p in new:
            got = self._recv_bytes(p, tags[p] + "n", 18)
            if got[16] != self.k:
                raise ConfigError(f"party {names[p]!r} extends OTs with SoftSpoken k = {got[16]}, this party with "
                                  f"k = {self.k}; every party must use the same k")
            if got[17] != self.check:
                raise ConfigError(f"party {names[p]!r} runs OT extension {'with' if got[17] else 'without'} the "
                                  f"consistency check, this party {'with' if self.check else 'without'} it; every "
                                  "party must run it (it is on by default)")
            theirs[p] = got[:16]
        senders, receivers, deltas, ids = {}, {}, {}, {}
        for p in new:
            # p -> me: I receive extended OTs, so I am the base-OT sender
            sid_rx, dom_rx = _direction_id(names[p], names[self.me], theirs[p], nonce, self.label)
            sid_tx, dom_tx = _direction_id(names[self.me], names[p], nonce, theirs[p], self.label)
            ids[p] = (dom_tx, dom_rx, sid_tx, sid_rx)
            senders[p] = nat.BaseOtSender(BASE, os.urandom(64), sid_rx)
            ses.send(p, senders[p].message(), tags[p] + "A")
            deltas[p] = self.global_delta if self.global_delta is not None else os.urandom(16)
            receivers[p] = (nat.BaseOtReceiver(deltas[p], BASE, os.urandom(64 * BASE), sid_tx))
        for p in new:
            ses.send(p, self._call(p, receivers[p].reply, self._recv_bytes(p, tags[p] + "A", 32)), tags[p] + "B")
        rxs = {}
        for p in new:
            k0, k1 = self._call(p, senders[p].keys, self._recv_bytes(p, tags[p] + "B", 32 * BASE))
            rxs[p] = nat.SoftReceiver(k0, k1, self.k, os.urandom(16), check=ids[p][3] if self.check else None)
            if self.k > 1:  # the GGM trees' level sums, masked under the base keys
                ses.send(p, rxs[p].setup_message, tags[p] + "S")
        for p in new:
            setup = self._recv_bytes(p, tags[p] + "S", SETUP_BYTES) if self.k > 1 else b""
            tx = self._call(p, nat.SoftSender, receivers[p].keys(), deltas[p], self.k, setup,
                            ids[p][2] if self.check else None)
            self._links[p] = _Link(tx, rxs[p], deltas[p], *ids[p][:2])

    def _recv_bytes(self, peer: int, tag: str, size: int) -> bytes:
        data = self.session.recv_bytes(peer, tag)
        if len(data) != size:
            raise FrameError(f"party {self.session.parties[peer]!r} sent {len(data)} bytes under {tag!r}; "
                             f"expected {size}")
        return data

    def _call(self, peer: int, fn: Any, *args: Any) -> Any:
        """A native step on a peer's message: its ValueError names the peer. A failed
        consistency check ends the pair: the link is dropped and every later use raises."""
        name = self.session.parties[peer]
        if peer in self._failed:
            raise FrameError(self._failed[peer])
        try:
            return fn(*args)
        except ValueError as exc:
            if "consistency check" in str(exc):
                self._failed[peer] = (f"party {name!r}'s OT extension failed the consistency check (a receiver "
                                      f"deviating to learn this party's Delta); the OT link with {name!r} is not "
                                      "used again")
                self._links.pop(peer, None)
                raise FrameError(self._failed[peer]) from None
            raise FrameError(f"bad OT message from party {name!r}: {exc}") from None

    # -- streaming ---------------------------------------------------------------------------------
    @staticmethod
    def _stream(chunks: int, start: Callable[[int], Any], serve: Callable[[int], None],
                finish: Callable[[int, Any], None]) -> None:
        """Run an OT exchange chunk by chunk, one chunk ahead: ``start(c)`` extends and sends this
        party's receiver messages of chunk c, ``serve(c)`` answers the peers' chunk c as sender,
        ``finish(c, state)`` completes this party's chunk c with the peers' answers. Every party
        sends chunk c + 1's matrix before waiting for chunk c's answers, so the link stays busy;
        at most two chunks are held (bounded memory, whatever the batch)."""
        held = None
        for c in range(chunks + 1):
            ahead = start(c) if c < chunks else None
            if c:
                serve(c - 1)
                finish(c - 1, held)
            held = ahead

    # -- correlated OT / OLE ----------------------------------------------------------------------
    def cot(self, receive: Mapping[int, np.ndarray], send: Mapping[int, np.ndarray], moduli: Sequence[int],
            bits: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Shares of ``a_s * b_r`` in every modulus, for every pair in one call.

        ``receive[p]``: this party's values b (uint64 (e,), each below 2^bits) for the OLE in
        which p sends; ``send[p]``: this party's offsets a (uint64 (e, k), a[:, c] below
        moduli[c]) for the OLE in which p receives. ``moduli``: k moduli (0 = 2^64; otherwise odd,
        below 2^62). Returns (shares as receiver, shares as sender) by peer, uint64 (e, k) each;
        for every pair, the receiver's and the sender's shares add up to a * b mod moduli[c]."""
        mods = np.asarray(moduli, dtype=np.uint64)
        k, ses, nat = len(mods), self.session, self.native
        self.ensure(list(receive) + list(send))
        tags = {p: self._tag(p, "cot") for p in sorted(set(receive) | set(send))}
        values = {p: np.ascontiguousarray(b, dtype=np.uint64) for p, b in receive.items()}
        offsets = {p: np.ascontiguousarray(a, dtype=np.uint64).reshape(len(a), k) for p, a in send.items()}
        as_receiver = {p: np.empty((len(b), k), np.uint64) for p, b in values.items()}
        as_sender = {p: np.empty((len(a), k), np.uint64) for p, a in offsets.items()}
        step = max(1, CHUNK_OTS // (bits * k))  # entries per message: at most 2^20 OTs x offsets (8 MiB)
        lengths = [len(v) for v in values.values()] + [len(a) for a in offsets.values()]
        chunks = -(-max(lengths, default=0) // step)

        def start(c: int) -> dict:
            held = {}
            for p, b in values.items():
                part = b[c * step:(c + 1) * step]
                if len(part):
                    link = self._links[p]
                    # the extension and the receiver's pad sums fused (t never leaves the cache),
                    # written straight into this chunk's rows of the result, completed in finish()
                    held[p] = as_receiver[p][c * step:c * step + len(part)]
                    u, _ = link.rx.extend_cot(nat.pack_choice_bits(part, bits), len(part) * bits, link.domain_rx,
                                              mods, bits, out=held[p])
                    ses.send(p, u, tags[p] + "u")
            return held

        def serve(c: int) -> None:
            for p, a in offsets.items():
                part = a[c * step:(c + 1) * step]
                if len(part):
                    link = self._links[p]
                    u = ses.recv_bytes(p, tags[p] + "u")
                    # extension and Gilboa corrections fused, block by block (q never leaves the core)
                    corr, share = self._call(p, link.tx.extend_cot, u, len(part) * bits, link.domain_tx, part,
                                             mods, bits)
                    ses.send(p, corr, tags[p] + "c")
                    as_sender[p][c * step:c * step + len(part)] = share

        def finish(c: int, held: dict) -> None:
            for p, pads in held.items():
                part = values[p][c * step:(c + 1) * step]
                corr = ses.recv_array(p, tags[p] + "c", dtype=np.uint64, shape=(len(part), bits, k))
                self._call(p, nat.cot_finish, pads, part, corr, mods, bits)  # in place, in as_receiver

        self._stream(chunks, start, serve, finish)
        self.ots += bits * (sum(len(v) for v in values.values()) + sum(len(a) for a in offsets.values()))
        return as_receiver, as_sender

    # -- raw rows (authenticated bits) -------------------------------------------------------------
    def rows(self, choices: np.ndarray | None, count: int, receive: Sequence[int], send: Sequence[int]
             ) -> tuple[dict[int, Any], dict[int, Any]]:
        """The extension's own rows, unhashed: for each peer p in ``receive`` this party takes
        ``count`` OTs from p with its packed choice bits (uint8, LSB first) and gets rows t
        (count, 16); for each p in ``send`` it gets rows q with t = q XOR choice * Delta (its
        Delta towards p). Returns ({p: (t, tweak)}, {p: (q, tweak)}), tweak = (domain, start):
        the hash tweak of row 0 of the direction, the same at both ends, for hashing the rows
        (:meth:`hash_rows`) without meeting any other hash of the session (each caller adds its
        own purpose to the domain's bits 8..15). An IKNP relation over GF(2)^128: a pairwise
        information-theoretic MAC t of the choice bit under the key q (TinyOT's aBits)."""
        self.ensure(list(receive) + list(send))
        ses = self.session
        tags = {p: self._tag(p, "rows") for p in sorted(set(receive) | set(send))}
        got_t, got_q = {}, {}
        for p in receive:
            link = self._links[p]
            start = link.rx.index
            mine = choices[p] if isinstance(choices, dict) else choices  # (per peer: for tests of deviations)
            u, t = link.rx.extend(np.ascontiguousarray(mine, dtype=np.uint8), count)
            ses.send(p, u, tags[p] + "u")
            got_t[p] = (t, (link.domain_rx, start))
        for p in send:
            link = self._links[p]
            start = link.tx.index
            q = self._call(p, link.tx.extend, ses.recv_bytes(p, tags[p] + "u"), count)
            got_q[p] = (q, (link.domain_tx, start))
        self.ots += count * (len(receive) + len(send))
        return got_t, got_q

    def delta(self, peer: int) -> bytes:
        """This party's Delta in the direction in which it sends to ``peer``."""
        self.ensure([peer])
        return self._links[peer].delta

    def hash_rows(self, rows: np.ndarray, tweak: tuple[int, int], delta: bytes | None = None) -> Any:
        """The TCCR hash of rows (:func:`shaper._native.ot_hash`): H(row_j, tweak + j), or with
        ``delta`` the pair (H(row_j), H(row_j XOR delta))."""
        return self.native.ot_hash(rows, tweak[0], tweak[1], delta)

    def hash_bits(self, rows: np.ndarray, tweak: tuple[int, int], delta: bytes | None = None) -> Any:
        """:meth:`hash_rows`' lowest bits, packed 64 per uint64 word (or the pair of them)."""
        return self.native.ot_bits(rows, tweak[0], tweak[1], delta)

    def combine(self, rows: np.ndarray, seed: bytes) -> bytes:
        """sum_j seed^(m - 1 - j) row_j over GF(2^128), 16 bytes (:func:`shaper._native.gf128_combine`)."""
        return self.native.gf128_combine(np.ascontiguousarray(rows, dtype=np.uint8), seed)

    def gf_mul(self, a: bytes, b: bytes) -> bytes:
        return self.native.gf128_mul(a, b)

    def combine_bits(self, bits: np.ndarray, seed: bytes) -> bytes:
        """:meth:`combine` of bits read as the GF(2^128) elements 0 and 1."""
        rows = np.zeros((len(bits), 16), np.uint8)
        rows[:, 0] = np.asarray(bits, dtype=np.uint8)
        return self.combine(rows, seed)

    def scale(self, v: bytes, delta: bytes) -> bytes:
        """v Delta over GF(2^128): what a combination of bits becomes on the MACs' side."""
        return self.gf_mul(v, delta)

    # -- bit products ----------------------------------------------------------------------------
    def bit_cross(self, a: np.ndarray, b: np.ndarray, peers: Sequence[int] | None = None) -> np.ndarray:
        """XOR shares of sum over pairs of a_s AND b_r (packed uint64 words, 64 bits each).

        Every party passes its own a and b (same length); for each ordered pair (s, r) among
        ``peers`` and this party, s's a and r's b enter one random OT per bit. Returns this
        party's share of the XOR over all pairs of (a_s AND b_r), s != r."""
        a = np.ascontiguousarray(a, dtype=np.uint64)
        b = np.ascontiguousarray(b, dtype=np.uint64)
        if a.shape != b.shape or a.ndim != 1:
            raise ValueError(f"bit_cross needs two packed word vectors of one length, got {a.shape} and {b.shape}")
        others = [p for p in (range(self.session.n) if peers is None else peers) if p != self.me]
        self.ensure(others)
        ses = self.session
        tags = {p: self._tag(p, "bits") for p in others}
        step = CHUNK_OTS // 64  # words per message
        out = np.zeros_like(a)

        def start(c: int) -> dict:
            part, held = b[c * step:(c + 1) * step], {}
            for p in others:
                link = self._links[p]
                u, held[p] = link.rx.extend_bits(part.view(np.uint8), 64 * len(part), link.domain_rx)
                ses.send(p, u, tags[p] + "u")
            return held

        def serve(c: int) -> None:
            part = a[c * step:(c + 1) * step]
            for p in others:
                link = self._links[p]
                m0, m1 = self._call(p, link.tx.extend_bits, ses.recv_bytes(p, tags[p] + "u"), 64 * len(part),
                                    link.domain_tx)
                ses.send(p, m0 ^ m1 ^ part, tags[p] + "d")
                out[c * step:c * step + len(part)] ^= m0

        def finish(c: int, held: dict) -> None:
            part = b[c * step:(c + 1) * step]
            for p, mine in held.items():
                d = ses.recv_array(p, tags[p] + "d", dtype=np.uint64, shape=part.shape)
                out[c * step:c * step + len(part)] ^= mine ^ (part & d)

        self._stream(-(-len(a) // step), start, serve, finish)
        self.ots += 2 * 64 * len(a) * len(others)
        return out


class InsecureLinks:
    """The :class:`OtLinks` interface computed in the clear (INSECURE: each receiver sends its
    choice values to the sender). For tests only, beside dealer triples, so that the
    conversions and samplers run where the native extension is not built; the outputs have the
    same relations (shares of a_s * b_r) and every share is masked by the session's CSPRNG, but
    every sender learns every receiver's choices. Tags count per peer, as :class:`OtLinks`'s do,
    so parties that sit out an operation stay in step."""

    def __init__(self, session: Any, delta: bytes | None = None) -> None:
        self.session = session
        self.me = session.index
        self.ots = 0
        self._steps: dict[int, int] = {}
        self.global_delta = delta if delta is not None else session.prg.random_bytes(16)
        self._indices: dict[tuple[int, int], int] = {}

    def _tag(self, peer: int, what: str) -> str:
        self._steps[peer] = self._steps.get(peer, 0) + 1
        return f"clear-ot-{what}-{self._steps[peer]}"

    def cot(self, receive: Mapping[int, np.ndarray], send: Mapping[int, np.ndarray], moduli: Sequence[int],
            bits: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """See :meth:`OtLinks.cot`: the same outputs, computed in the clear."""
        ring, k, ses = Ring(moduli), len(moduli), self.session
        tags = {p: self._tag(p, "cot") for p in sorted(set(receive) | set(send))}
        for p, b in receive.items():
            ses.send(p, np.ascontiguousarray(b, dtype=np.uint64), tags[p] + "b")
        as_sender = {}
        for p, a in send.items():
            a = np.ascontiguousarray(a, dtype=np.uint64).reshape(len(a), k)
            b = ses.recv_array(p, tags[p] + "b", dtype=np.uint64, shape=(len(a),))
            product = a * b[:, None] if ring.wrap else mul_mod(a, lift_public(b, moduli), moduli)
            mine = np.stack([ses.prg.below(q, len(a)) if q else ses.prg.uint64(len(a)) for q in ring.moduli], axis=-1)
            ses.send(p, ring.sub(product, mine), tags[p] + "c")
            as_sender[p] = mine
        as_receiver = {p: ses.recv_array(p, tags[p] + "c", dtype=np.uint64, shape=(len(b), k))
                       for p, b in receive.items()}
        self.ots += bits * (sum(len(v) for v in receive.values()) + sum(len(a) for a in send.values()))
        return as_receiver, as_sender

    def rows(self, choices: np.ndarray | None, count: int, receive: Sequence[int], send: Sequence[int]
             ) -> tuple[dict[int, Any], dict[int, Any]]:
        """See :meth:`OtLinks.rows`: the same relation t = q XOR choice * Delta, in the clear (the
        receiver sends its choices; the sender draws q and sends t)."""
        ses = self.session
        tags = {p: self._tag(p, "rows") for p in sorted(set(receive) | set(send))}
        for p in receive:
            mine = choices[p] if isinstance(choices, dict) else choices
            ses.send(p, np.ascontiguousarray(mine, dtype=np.uint8)[:(count + 7) // 8], tags[p] + "c")
        got_q = {}
        for p in send:
            delta = np.frombuffer(self.delta(p), dtype=np.uint8)
            packed = ses.recv_array(p, tags[p] + "c", dtype=np.uint8, shape=((count + 7) // 8,))
            bit = np.unpackbits(packed, bitorder="little")[:count].astype(bool)
            q = np.frombuffer(ses.prg.random_bytes(16 * count), dtype=np.uint8).reshape(count, 16).copy()
            ses.send(p, q ^ (bit[:, None] * delta[None, :]).astype(np.uint8), tags[p] + "t")
            got_q[p] = (q, self._tweak(self.me, p, count))
        got_t = {p: (ses.recv_array(p, tags[p] + "t", dtype=np.uint8, shape=(count, 16)), self._tweak(p, self.me, count))
                 for p in receive}
        self.ots += count * (len(receive) + len(send))
        return got_t, got_q

    def _tweak(self, sender: int, receiver: int, count: int) -> tuple[int, int]:
        start = self._indices.get((sender, receiver), 0)
        self._indices[(sender, receiver)] = start + count
        return ((sender + 1) << 40 | (receiver + 1) << 24), start  # bits 8..15 free for the callers' purposes

    def delta(self, peer: int) -> bytes:
        return self.global_delta

    def hash_rows(self, rows: np.ndarray, tweak: tuple[int, int], delta: bytes | None = None) -> Any:
        """Fixed-key AES of row XOR tweak, XOR the same (Matyas–Meyer–Oseas with the tweak in the
        input) in place of the TCCR hash: the same interface and relations, vectorised."""
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        rows = np.ascontiguousarray(rows, dtype=np.uint8).reshape(-1, 16)
        tw = np.empty((len(rows), 2), np.uint64)
        tw[:, 0] = np.arange(tweak[1], tweak[1] + len(rows), dtype=np.uint64)
        tw[:, 1] = np.uint64(tweak[0] & 0xFFFFFFFFFFFFFFFF)

        def one(block: np.ndarray) -> np.ndarray:
            x = block ^ tw.view(np.uint8)
            enc = Cipher(algorithms.AES(b"shaper-clear-ot!"), modes.ECB()).encryptor()
            out = np.frombuffer(enc.update(x.tobytes()) + enc.finalize(), dtype=np.uint8).reshape(-1, 16)
            return out ^ x

        if delta is None:
            return one(rows)
        return one(rows), one(rows ^ np.frombuffer(delta, dtype=np.uint8)[None, :])

    def hash_bits(self, rows: np.ndarray, tweak: tuple[int, int], delta: bytes | None = None) -> Any:
        def low(h: np.ndarray) -> np.ndarray:
            return pack_bits((h[:, 0] & 1).astype(bool))
        h = self.hash_rows(rows, tweak, delta)
        return low(h) if delta is None else (low(h[0]), low(h[1]))

    # In place of the GF(2^128) combination (vectorised; the clear links are for tests): row l
    # times a random vector c_l of nonzero GF(2^8) elements, byte by byte (AES's field), XORed
    # over the rows. A nonzero error row never maps to zero, several cancel with probability
    # about 1/255 per byte; "v Delta" becomes v times Delta byte by byte, the same relation for
    # t = q XOR b Delta.
    @staticmethod
    def _coefficients(seed: bytes, m: int) -> np.ndarray:
        return np.random.Generator(np.random.PCG64(int.from_bytes(seed, "little"))).integers(
            1, 256, (m, 16), dtype=np.uint8)

    def combine(self, rows: np.ndarray, seed: bytes) -> bytes:
        rows = np.ascontiguousarray(rows, dtype=np.uint8).reshape(-1, 16)
        return np.bitwise_xor.reduce(_gf256_mul(rows, self._coefficients(seed, len(rows))), axis=0).tobytes()

    def combine_bits(self, bits: np.ndarray, seed: bytes) -> bytes:
        b = np.asarray(bits, dtype=bool)
        c = self._coefficients(seed, len(b))
        return np.bitwise_xor.reduce(np.where(b[:, None], c, np.uint8(0)), axis=0).tobytes()

    def scale(self, v: bytes, delta: bytes) -> bytes:
        return _gf256_mul(np.frombuffer(v, np.uint8), np.frombuffer(delta, np.uint8)).tobytes()

    def gf_mul(self, a: bytes, b: bytes) -> bytes:
        return _gf128_mul(int.from_bytes(a, "little"), int.from_bytes(b, "little")).to_bytes(16, "little")

    def bit_cross(self, a: np.ndarray, b: np.ndarray, peers: Sequence[int] | None = None) -> np.ndarray:
        """See :meth:`OtLinks.bit_cross`: the same XOR shares, computed in the clear."""
        a = np.ascontiguousarray(a, dtype=np.uint64)
        b = np.ascontiguousarray(b, dtype=np.uint64)
        if a.shape != b.shape or a.ndim != 1:
            raise ValueError(f"bit_cross needs two packed word vectors of one length, got {a.shape} and {b.shape}")
        others = [p for p in (range(self.session.n) if peers is None else peers) if p != self.me]
        ses = self.session
        tags = {p: self._tag(p, "bits") for p in others}
        out = np.zeros_like(a)
        for p in others:
            ses.send(p, b, tags[p] + "b")
        for p in others:
            mask = ses.prg.uint64(a.shape)
            ses.send(p, (a & ses.recv_array(p, tags[p] + "b", dtype=np.uint64, shape=a.shape)) ^ mask, tags[p] + "d")
            out ^= mask
        for p in others:
            out ^= ses.recv_array(p, tags[p] + "d", dtype=np.uint64, shape=a.shape)
        self.ots += 2 * 64 * len(a) * len(others)
        return out


def _gf256_tables() -> tuple[np.ndarray, np.ndarray]:
    exp = np.zeros(512, np.int32)
    log = np.zeros(256, np.int32)
    x = 1
    for i in range(255):
        exp[i] = x
        log[x] = i
        x ^= (x << 1) ^ (0x11B if x & 0x80 else 0)  # times 3, the generator, mod x^8 + x^4 + x^3 + x + 1
        x &= 0xFF
    exp[255:510] = exp[:255]
    return exp, log


_EXP, _LOG = _gf256_tables()


def _gf256_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a b byte by byte in GF(2^8) (AES's polynomial)."""
    a = np.asarray(a, dtype=np.uint8)
    b = np.asarray(b, dtype=np.uint8)
    prod = _EXP[_LOG[a] + _LOG[b]].astype(np.uint8)
    return np.where((a == 0) | (b == 0), np.uint8(0), prod)


def _gf128_mul(a: int, b: int) -> int:
    """a b in GF(2^128) mod x^128 + x^7 + x^2 + x + 1 (the clear links' combination; plain integers)."""
    prod = 0
    while b:
        if b & 1:
            prod ^= a
        a <<= 1
        if a >> 128:
            a ^= (1 << 128) | 0x87
        b >>= 1
    return prod


_BY_SESSION: "weakref.WeakKeyDictionary[Any, OtLinks]" = weakref.WeakKeyDictionary()


def links_for(session: Any) -> OtLinks:
    """The one :class:`OtLinks` of a session (every user of OT on it shares the links, so their
    per-peer message tags and extension indices stay in step)."""
    links = _BY_SESSION.get(session)
    if links is None:
        links = _BY_SESSION[session] = OtLinks(session)
    return links
