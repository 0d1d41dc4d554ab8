"""Three-party replicated secret sharing (Araki, Furukawa, Lindell, Nof, Ohara, CCS 2016).

Three computing parties P0, P1, P2 (``parties``, by default the session's three; further session
members may act as outside data holders), semi-honest, at most one corrupted. Indices are mod 3:
P_i sends only to P_{i+1} and receives only from P_{i-1} during evaluation.

**Sharing** (both variants): random x_0, x_1, x_2 with x_0 + x_1 + x_2 = 0; P_i holds
(x_i, a_i) with a_i = x_{i-1} - v (boolean: XOR for +/-). One party's pair is uniform and
independent of v; any two pairs determine it.

**Correlated randomness**: at start-up each P_i draws an AES-128 key k_i
(:func:`shaper.crypto.prg.fresh_key`) and sends it to P_{i+1} over the session's TLS channel, so
P_i holds k_i and k_{i-1}. The zero sharing for a layer is alpha_i = F(k_i) - F(k_{i-1})
(boolean: XOR) with F the AES-CTR keystream of :func:`shaper.crypto.prg.pairwise_stream` that
each key's two holders consume in lockstep — no identifier repeats, no communication. Fresh
shares of inputs come from the session's CSPRNG.

**Boolean** values are bit-sliced (``shaper.protocols.bristol``): XOR/NOT are local; an AND costs
one bit per party: r_i = (x_i & y_i) ^ (a_i & b_i) ^ alpha_i goes to P_{i+1} and the output
share is (r_{i-1} ^ r_i, r_i); all ANDs of a circuit layer travel in one message.

**Arithmetic** over Z_2^64: add/subtract/public constants are local; a product costs one ring
element per party: r_i = 3^-1 (a_i b_i - x_i y_i + alpha_i), output (r_{i-1} - r_i,
-2 r_{i-1} - r_i). Fixed-point truncation is ABY3's two-party local truncation followed by a
reshare (one round, one element per party): v = x_2 - a_0 is a two-party sharing between P2
and P0; P2 takes x_2 >> d, P0 takes -(a_0 >> d) (the SecureML rule), and the three parties
reshare. The result is floor(v / 2^d) or one more, except with probability about
2^(l + 1 - 64) for |v| < 2^l, when the two-party shares wrap (then it is off by ~2^(64-d)):
keep |v| well below 2^63 (e.g. l <= 40 gives 2^-23 per value).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...circuits import bristol
from ...crypto import encoding, prg
from ...errors import ConfigError, FrameError
from ...kernels import bits
from ..api import Engine, Shared
from .shares import BitShares, RingShares

U64 = np.uint64
INV3 = np.uint64(0xAAAAAAAAAAAAAAAB)  # 3^-1 mod 2^64
_TAG = "rss"


class Replicated3PC(Engine):
    """The three-party engine on one party's :class:`~shaper.net.Session` (three parties).
    Construct it on all three parties at the same point: it agrees the pairwise PRF keys.

    Arithmetic over Z_2^64 follows the engine interface (:mod:`shaper.protocols.api`): shares
    are :class:`RingShares` at a fixed-point scale (``frac_bits``, default 16; 0 for plain ring
    integers). Boolean circuits run on :class:`BitShares` (:meth:`share_wires`, :meth:`evaluate`):
    circuit wires, bit-sliced over instances, not the engine interface's ``bits`` domain (which
    this engine does not hold: its ``domains`` are the ring only).
    ``native_prf=False`` forces the pure-Python keystream (tests, comparisons)."""

    parties = 3

    def __init__(self, session: Any, parties: Sequence[str] | None = None, *, frac_bits: int = 16,
                 native_prf: bool | None = None) -> None:
        if not 0 <= frac_bits <= 40:
            raise ConfigError(f"frac_bits must be in [0, 40], got {frac_bits}")
        names = list(parties) if parties is not None else list(session.parties)
        if len(names) != 3 or len(set(names)) != 3:
            raise ConfigError(f"replicated sharing needs exactly 3 computing parties, got {names}"
                              + ("" if parties is not None else " (pass parties=[...] to pick three of the session)"))
        if session.name not in names:
            raise ConfigError(f"party {session.name!r} is not one of the computing parties {names}")
        self.session = session
        self.names = names                    # P0, P1, P2; other session members may hold data
        self.i = self.me = names.index(session.name)
        self.next = (self.i + 1) % 3
        self.prev = (self.i - 1) % 3
        self.frac_bits = frac_bits
        own = prg.fresh_key(16)
        self._send(self.next, own, tag="rss-key")
        theirs = session.recv_bytes(names[self.prev], tag="rss-key")
        if len(theirs) != 16:
            raise FrameError(f"party {names[self.prev]!r} sent a {len(theirs)}-byte PRF key")
        # the VAES keystream where the CPU has it (the same stream as the fallback's)
        self._own = prg.pairwise_stream(own, native=native_prf)
        self._prev = prg.pairwise_stream(theirs, native=native_prf)
        self._fused = not isinstance(self._own, prg.Prg)  # native streams feed the AND kernel directly
        self.rounds = 0
        self.and_gates = 0
        self._state: tuple[np.ndarray, np.ndarray] | None = None

    def _send(self, j: int, value: Any, tag: str) -> None:
        self.session.send(self.names[j], value, tag=tag)

    def _recv_array(self, j: int, tag: str, **kw: Any) -> np.ndarray:
        return self.session.recv_array(self.names[j], tag=tag, **kw)

    # -- correlated randomness -------------------------------------------------------------
    def zero_bits(self, shape: tuple[int, ...], out: np.ndarray | None = None) -> np.ndarray:
        """This party's part of a fresh XOR-sharing of zero (into ``out`` when given)."""
        n = int(np.prod(shape, dtype=np.int64))
        own = self._own.words(n)
        if out is None:
            out = np.empty(shape, dtype=U64)
        np.bitwise_xor(own, self._prev.words(n), out=out.reshape(-1))
        return out

    def zero_ring(self, shape: tuple[int, ...]) -> np.ndarray:
        """This party's part of a fresh additive sharing of zero over Z_2^64."""
        n = int(np.prod(shape, dtype=np.int64))
        return (self._own.words(n) - self._prev.words(n)).reshape(shape)

    def _ring_exchange(self, r: np.ndarray) -> np.ndarray:
        self._send(self.next, r, tag=_TAG)
        self.rounds += 1
        return self._recv_array(self.prev, tag=_TAG, dtype=U64, shape=r.shape)

    # -- boolean sharing ---------------------------------------------------------------------
    def share_wires(self, rows: np.ndarray | None, width: int, instances: int, owner: int) -> BitShares:
        """Shares bit-sliced rows (width, words) held by ``owner`` (others pass None).

        PRF-assisted (Araki et al. §2.3): with j the owner, x_{j+1} comes from the key P_j shares
        with P_{j+1} and x_{j-1} from the key it shares with P_{j-1}, so each other party is sent
        only its a component — one element instead of two, and no fresh randomness to draw."""
        words = bristol.words_for(instances)
        shape = (width, words)
        n = width * words
        if not 0 <= owner < 3:
            raise ValueError(f"owner must be a party index 0..2, got {owner}")
        if self.i == owner:
            v = np.ascontiguousarray(rows, dtype=U64)
            if v.shape != shape:
                raise ValueError(f"input rows must have shape {shape}, got {v.shape}")
            x_next = self._own.words(n).reshape(shape)    # x_{j+1}
            x_prev = self._prev.words(n).reshape(shape)   # x_{j-1}
            x_me = x_next ^ x_prev                        # x_j: the three XOR to zero
            self._send(self.next, x_me ^ v, tag="rss-in")     # a_{j+1} = x_j ^ v
            self._send(self.prev, x_next ^ v, tag="rss-in")   # a_{j-1} = x_{j-2} ^ v = x_{j+1} ^ v
            return BitShares(x_me, x_prev ^ v, instances)            # a_j = x_{j-1} ^ v
        if self.i == (owner + 1) % 3:
            x = self._prev.words(n).reshape(shape).copy()  # the owner's key: x_{j+1}
        else:
            x = self._own.words(n).reshape(shape).copy()   # our key, shared with the owner: x_{j-1}
        a = self._recv_array(owner, tag="rss-in", dtype=U64, shape=shape)
        return BitShares(x, a, instances)

    def share_wire_values(self, values: Sequence[int] | None, width: int, instances: int, owner: int) -> BitShares:
        """Shares integer values (one per instance, LSB-first on ``width`` wires)."""
        rows = bristol.to_bitsliced(values, width) if self.i == owner else None
        return self.share_wires(rows, width, instances, owner)

    def receive_wires(self, holder: str, width: int, instances: int) -> BitShares:
        """Receives this party's pair from an outside data holder — a member of the session that
        is not one of the three computing parties (see :func:`deal_bits`)."""
        shape = (2, width, bristol.words_for(instances))
        both = self.session.recv_array(holder, tag="rss-in", dtype=U64, shape=shape)
        return BitShares(both[0].copy(), both[1].copy(), instances)

    def reveal_wires(self, sh: BitShares, to: int | None = None) -> np.ndarray | None:
        """Opens bit-sliced rows to party ``to`` (all parties when None)."""
        if to is None or to == self.next:
            self._send(self.next, sh.x, tag="rss-open")
        if to is None or to == self.i:
            got = self._recv_array(self.prev, tag="rss-open", dtype=U64, shape=sh.x.shape)
            self.rounds += 1
            return got ^ sh.a
        return None

    def evaluate(self, circuit: bristol.Circuit, inputs: Sequence[BitShares]) -> list[BitShares]:
        """Evaluates a circuit on shared inputs (one :class:`BitShares` per input value, same
        instance count); returns the shared output values. One message per AND layer."""
        if len(inputs) != len(circuit.inputs):
            raise ValueError(f"{circuit.name} takes {len(circuit.inputs)} input values, got {len(inputs)}")
        inst = {s.instances for s in inputs}
        if len(inst) != 1:
            raise ValueError("every input value needs the same number of instances")
        instances = inst.pop()
        for k, (s, w) in enumerate(zip(inputs, circuit.inputs)):
            if s.width != w:
                raise ValueError(f"input value {k} of {circuit.name} has {w} bits, the shares have {s.width}")
        sch = circuit.schedule()
        words = bristol.words_for(instances)
        # registers are reused between calls of the same size (every slot is written before it
        # is read, so stale contents never matter; outputs are copied out)
        if self._state is None or self._state[0].shape != (sch.slots, words):
            self._state = (np.empty((sch.slots, words), dtype=U64), np.empty((sch.slots, words), dtype=U64))
        X, A = self._state
        X[sch.input_slots] = np.concatenate([s.x for s in inputs])
        A[sch.input_slots] = np.concatenate([s.a for s in inputs])
        widest = max(sch.layer_and_counts, default=0)
        r_all = np.empty((widest, words), dtype=U64)  # reused by every layer (sends are synchronous)
        for k in range(sch.depth + 1):
            if sch.local[k].size:
                bits.local(X, A, sch.local[k])
            ands = sch.ands[k]
            if ands.size:
                n = ands.shape[0]
                r = r_all[:n]
                if self._fused:  # keystreams drawn row by row inside the kernel
                    bits.and_prf(X, A, ands, r, self._own, self._prev)
                else:
                    m1 = self._own.words(n * words).reshape(n, words)
                    m2 = self._prev.words(n * words).reshape(n, words)
                    bits.and_masked(X, A, ands, r, m1, m2)  # r = alpha ^ local AND terms
                r_prev = self._ring_exchange(r)
                bits.and_finish(X, A, ands, r, r_prev)
                self.and_gates += ands.shape[0]
        outs, start = [], 0
        for w in circuit.outputs:
            idx = sch.output_slots[start:start + w]
            outs.append(BitShares(X[idx], A[idx], instances))
            start += w
        return outs

    # -- arithmetic sharing over Z_2^64: the engine interface -------------------------------
    def share(self, values: Any, *, owner: int, frac_bits: int | None = None,
              shape: tuple[int, ...] | None = None) -> RingShares:
        """Shares numbers held by ``owner`` at scale 2^frac_bits (others pass None; ``shape``,
        if given, is checked against the owner's)."""
        f = self.frac_bits if frac_bits is None else frac_bits
        if not 0 <= owner < 3:
            raise ValueError(f"owner must be a party index 0..2, got {owner}")
        if self.i == owner:
            v = np.ascontiguousarray(encoding.ring_encode(values, f))
            self._send(self.next, np.asarray(v.shape, dtype=np.int64), tag="rss-shape")
            self._send(self.prev, np.asarray(v.shape, dtype=np.int64), tag="rss-shape")
            parts = _split(v, boolean=False, source=self.session.prg)
            for j in (self.next, self.prev):
                self._send(j, np.stack(parts[j]), tag="rss-in")
            x, a = parts[self.i]
            return RingShares(self, np.ascontiguousarray(x), np.ascontiguousarray(a), f)
        got_shape = tuple(int(d) for d in self._recv_array(owner, tag="rss-shape", dtype=np.int64))
        if shape is not None and tuple(shape) != got_shape:
            raise ValueError(f"party {owner} shares shape {got_shape}, expected {tuple(shape)}")
        both = self._recv_array(owner, tag="rss-in", dtype=U64, shape=(2,) + got_shape)
        return RingShares(self, both[0].copy(), both[1].copy(), f)

    def reveal_ring(self, x: Shared, to: int | None = None) -> np.ndarray | None:
        """Opens to party ``to`` (all when None) as ring elements (view as int64 for signed)."""
        assert isinstance(x, RingShares)
        if to is None or to == self.next:
            self._send(self.next, x.x, tag="rss-open")
        if to is None or to == self.i:
            got = self._recv_array(self.prev, tag="rss-open", dtype=U64, shape=x.x.shape)
            self.rounds += 1
            return got - x.a
        return None

    def add_public(self, x: Shared, ring_values: np.ndarray) -> RingShares:
        """v + c: every a_i = x_{i-1} - v moves by -c; the x components stay."""
        assert isinstance(x, RingShares)
        return RingShares(self, x.x.copy(), x.a - ring_values, x.frac_bits)

    def mul(self, x: Shared, y: Shared, *, truncate: bool = True) -> RingShares:
        """Element-wise product: one ring element per party per product, one round (a second
        for the truncation back to x's scale when y is fixed point and ``truncate``)."""
        assert isinstance(x, RingShares) and isinstance(y, RingShares)
        if x.shape != y.shape:
            try:
                shape = np.broadcast_shapes(x.shape, y.shape)
            except ValueError:
                raise ValueError(f"operands differ in shape: {x.shape} and {y.shape}") from None
            x, y = (s.map(lambda c: np.ascontiguousarray(np.broadcast_to(c, shape))) for s in (x, y))
        r = x.a * y.a
        r -= x.x * y.x
        r += self.zero_ring(x.shape)
        r *= INV3
        z = self._reshare(r, x.frac_bits + y.frac_bits)
        return self.truncate(z, y.frac_bits) if truncate and y.frac_bits else z

    def matmul(self, x: Shared, y: Shared, *, truncate: bool = True) -> RingShares:
        """Matrix product of shared (m, k) and (k, n) arrays: the same local terms as
        :meth:`mul`, summed over k before the reshare (one element per output, one round)."""
        assert isinstance(x, RingShares) and isinstance(y, RingShares)
        self.check_matmul(x, y)
        r = np.matmul(x.a, y.a)
        r -= np.matmul(x.x, y.x)
        r += self.zero_ring(r.shape)
        r *= INV3
        z = self._reshare(r, x.frac_bits + y.frac_bits)
        return self.truncate(z, y.frac_bits) if truncate and y.frac_bits else z

    def _reshare(self, r: np.ndarray, frac_bits: int) -> RingShares:
        """(x, a) sharing from a 3-out-of-3 additive sharing r (already masked)."""
        r_prev = self._ring_exchange(np.ascontiguousarray(r))
        x = r_prev - r
        a = np.uint64(0) - (r_prev + r_prev) - r
        return RingShares(self, x, a, frac_bits)

    def truncate(self, x: Shared, bits: int) -> RingShares:
        """Divides by 2^bits (floor, or one more; see the module notes for the failure rate)."""
        assert isinstance(x, RingShares)
        if not 0 < bits < 64:
            raise ValueError(f"truncation bits must be in 1..63, got {bits}")
        d = np.uint64(bits)
        r = self.zero_ring(x.shape)
        if self.i == 2:
            r += x.x >> d
        elif self.i == 0:
            r -= x.a >> d
        return self._reshare(r, x.frac_bits - bits)

    def mul_fixed(self, x: RingShares, y: RingShares, frac_bits: int) -> RingShares:
        """Product, then truncation by ``frac_bits`` whatever the operands' scales (two rounds)."""
        return self.truncate(self.mul(x, y, truncate=False), frac_bits)


def _split(v: np.ndarray, boolean: bool, source: prg.Prg) -> list[tuple[np.ndarray, np.ndarray]]:
    """Fresh (x_i, a_i) pairs for i = 0, 1, 2, random from the CSPRNG ``source``."""
    x0 = source.uint64(v.shape)
    x1 = source.uint64(v.shape)
    if boolean:
        x2 = x0 ^ x1
        xs = [x0, x1, x2]
        return [(xs[i], xs[i - 1] ^ v) for i in range(3)]
    x2 = np.uint64(0) - x0 - x1
    xs = [x0, x1, x2]
    return [(xs[i], xs[i - 1] - v) for i in range(3)]


def deal_bits(rows: np.ndarray) -> list[np.ndarray]:
    """For an outside data holder: the three parties' (2, width, words) share arrays of
    bit-sliced rows (fresh from the process CSPRNG); send element i to computing party i, which
    calls :meth:`Replicated3PC.receive_wires` with the holder's name."""
    parts = _split(np.ascontiguousarray(rows, dtype=U64), boolean=True, source=prg.default_prg())
    return [np.stack(p) for p in parts]


def evaluate(session: Any, circuit: bristol.Circuit, inputs: Sequence[Sequence[int] | None], *,
             owners: Sequence[int] | None = None, engine: Replicated3PC | None = None) -> list[BitShares]:
    """Evaluates ``circuit`` in 3PC: ``inputs[v]`` is input value v's list of instance values at
    its owner (``owners[v]``, default party v mod 3) and None elsewhere; every party must know
    the instance count, so non-owners may pass ``[None] * n`` or an int count. Returns this
    party's shares of the outputs (reveal them with ``engine.reveal_wires``)."""
    eng = engine or Replicated3PC(session)
    owners = list(owners) if owners is not None else [v % 3 for v in range(len(circuit.inputs))]
    counts = set()
    for v, vals in enumerate(inputs):
        if isinstance(vals, int):
            counts.add(vals)
        elif vals is not None:
            counts.add(len(vals))
    if len(counts) != 1:
        raise ValueError("every party must give the instance count (or the values) of every input")
    n = counts.pop()
    shares = []
    for v, width in enumerate(circuit.inputs):
        vals = inputs[v] if eng.i == owners[v] else None
        if eng.i == owners[v] and (vals is None or isinstance(vals, int)):
            raise ValueError(f"party {eng.i} owns input value {v} but gave no values")
        shares.append(eng.share_wire_values(vals, width, n, owners[v]))
    return eng.evaluate(circuit, shares)


__all__ = ["BitShares", "RingShares", "Replicated3PC", "deal_bits", "evaluate"]
