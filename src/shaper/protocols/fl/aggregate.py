"""Secure aggregation for horizontal federated averaging: a coordinator sums Paillier-encrypted,
packed updates without the key; the clients hold the key and decrypt the sum.

Set-up (once per job). The first client (the *lead*) generates the key pair and sends the private
key to every other client over their direct TLS channels and the public key to the coordinator.
The clients tell each other (not the coordinator) how many rows each trains on, so each knows its
weight a_i = n_i / N.

A round. Client i holds an update v_i (a float vector of P values, |v| < 2^int_bits):

1. It encodes a_i v_i at scale 2^frac_bits, adds the offset
   2^(int_bits+frac_bits) to every value (so slots hold non-negative numbers), **packs** k values
   per plaintext (slot width W = int_bits + frac_bits + ceil(log2(clients + 1)) + 1: room for the
   sum of every client's slot without a carry into the next), encrypts (with the private key's CRT
   path where the engine has one) and sends the ciphertexts to the coordinator.
2. The coordinator multiplies the ciphertexts of the clients that delivered before the round's
   deadline (plaintexts add slot by slot). A client that died or missed the deadline is dropped:
   if at least ``quorum`` clients delivered, the round goes on without it; otherwise the job stops
   with :class:`~shaper.errors.QuorumError` naming the missing clients. Every live client is told
   who was included; the included ones receive the summed ciphertexts.
3. The included clients split the decryption: client j of m decrypts the j-th m-th of the
   ciphertexts and sends the plaintexts to the others (directly, never through the coordinator).
   A client lost in this phase ends the round with an error naming it.
4. Each client unpacks, removes the m offsets and divides the weighted sum by the weights of the
   included clients (1 unless clients dropped out, which re-normalises the average): the weighted
   mean of the updates of the included clients.

What each party learns: the coordinator only ciphertexts, their count and who delivered; each
client the weighted mean of the round (which FedAvg gives every client anyway) and the row counts
of the others, nothing about a single client's update. Security model: semi-honest, the
coordinator does not collude with a client (a client holds the key, so it could decrypt any
single update the coordinator showed it). An update outside ±2^int_bits raises at its client
before anything is sent, so a packed slot never carries into its neighbour.

Cost per round and client: ceil(P / k) encryptions and 1/m of that many decryptions; the
coordinator (m - 1) ciphertext products per ciphertext.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...arrays import chunk_slices, ints_from_bytes, ints_to_bytes
from ...crypto.packing import PackingLayout, pack_plain, split_slots
from ...errors import ConfigError, NetError, PackingError, PlaintextOverflowError, QuorumError
from .backend import Backend

CHUNK = 2048  # ciphertexts per message


@dataclass(frozen=True)
class AggregationParams:
    frac_bits: int = 16
    int_bits: int = 4
    quorum: int | None = None       # clients that must deliver for a round to count (None: all)
    round_timeout: float = 600.0    # seconds the coordinator waits for the updates of a round

    def __post_init__(self) -> None:
        if not 4 <= self.frac_bits <= 40 or not 0 <= self.int_bits <= 16 or self.int_bits + self.frac_bits > 56:
            raise ConfigError(f"frac_bits must be in [4, 40] and int_bits in [0, 16] with a sum up to 56, got "
                              f"{self.frac_bits} and {self.int_bits}")
        if self.quorum is not None and self.quorum < 1:
            raise ConfigError(f"quorum must be at least 1, got {self.quorum}")
        if not self.round_timeout > 0:
            raise ConfigError(f"round_timeout must be positive, got {self.round_timeout}")


class Federation:
    """One party's side of the aggregation rounds of a job: ``role`` is "coordinator" or "client"."""

    def __init__(self, session: Any, backend: Backend, role: str, coordinator: str, clients: list[str],
                 params: AggregationParams, key_bits: int = 2048) -> None:
        if role not in ("coordinator", "client"):
            raise ConfigError(f"role must be 'coordinator' or 'client', got {role!r}")
        if len(clients) < 2:
            raise ConfigError(f"secure aggregation needs at least 2 clients, got {len(clients)}")
        quorum = params.quorum if params.quorum is not None else len(clients)
        if quorum > len(clients):
            raise ConfigError(f"quorum {quorum} exceeds the {len(clients)} clients")
        self.session, self.backend, self.role, self.params = session, backend, role, params
        self.coordinator, self.clients, self.quorum, self.key_bits = coordinator, list(clients), quorum, key_bits
        self.active = list(clients)   # clients not dropped so far
        self.public_key = self.private_key = None
        self.weight = 0.0
        self.weights: dict[str, float] = {}
        self.last: dict = {}

    # -- set-up ------------------------------------------------------------------------------------
    def setup(self, rows: int | None = None) -> None:
        """Distribute the key (lead client) and the row counts (clients only)."""
        s, b = self.session, self.backend
        lead = self.clients[0]
        if self.role == "coordinator":
            self.public_key = b.public_from_bytes(s.recv_bytes(lead, "agg-pk"))
            return
        if rows is None or rows < 1:
            raise ConfigError(f"a client needs training rows, got {rows}")
        others = [c for c in self.clients if c != s.name]
        if s.name == lead:
            self.public_key, self.private_key = b.keygen(self.key_bits)
            secret = b.private_to_bytes(self.private_key)
            for c in others:
                s.send(c, secret, "agg-key")
            s.send(self.coordinator, b.public_to_bytes(self.public_key), "agg-pk")
        else:
            self.private_key = b.private_from_bytes(s.recv_bytes(lead, "agg-key"))
            self.public_key = b.public_of(self.private_key)
        for c in others:
            s.send(c, {"rows": int(rows)}, "agg-rows")
        counts = {s.name: int(rows), **{c: int(s.recv_meta(c, "agg-rows")["rows"]) for c in others}}
        if any(v < 1 for v in counts.values()):
            raise ConfigError(f"every client needs training rows; got {counts}")
        total = sum(counts.values())
        self.weights = {c: v / total for c, v in counts.items()}
        self.weight = self.weights[s.name]

    def layout(self, count: int) -> PackingLayout:
        p = self.params
        value_bits = p.int_bits + p.frac_bits
        width = value_bits + math.ceil(math.log2(len(self.clients) + 1)) + 1
        slots = self.backend.capacity_bits(self.public_key) // width
        if slots < 1:
            raise PackingError(f"a {width}-bit slot does not fit this key")
        return PackingLayout(value_bits, 0, width, min(slots, count), True)

    # -- a round: client ---------------------------------------------------------------------------
    def client_round(self, update: np.ndarray, rnd: int) -> np.ndarray:
        """Send this client's update, take part in the decryption, return the weighted mean of the
        updates of the included clients (floats, the shape of ``update``)."""
        s, b, p = self.session, self.backend, self.params
        vec = np.asarray(update, dtype=float).ravel()
        if not np.all(np.isfinite(vec)):
            raise PlaintextOverflowError(f"{s.name}: the update of round {rnd} holds NaN or infinite values")
        limit = float(1 << p.int_bits)
        over = np.flatnonzero(np.abs(vec) >= limit)
        if over.size:
            i = int(over[0])
            raise PlaintextOverflowError(
                f"{s.name}: update value {i} of round {rnd} is {vec[i]:.4g}, outside ±2^{p.int_bits}; the packed "
                f"slots would overflow (raise int_bits, or lower the learning rate)")
        lay = self.layout(vec.size)
        scale = float(1 << p.frac_bits)
        offset = 1 << lay.value_bits
        encoded = np.rint(vec * self.weight * scale).astype(np.int64) + offset
        plain = pack_plain(encoded, lay.slot_bits, lay.slots)
        tag = f"agg-{rnd}"
        s.send(self.coordinator, {"count": int(encoded.size), "ciphertexts": len(plain)}, tag)
        for sl in chunk_slices(len(plain), CHUNK):
            s.send(self.coordinator, b.dumps(b.encrypt_owner(self.private_key, plain[sl])), tag)
        status = s.recv_meta(self.coordinator, tag + "-status", timeout=p.round_timeout + s.config.timeout)
        if not isinstance(status, dict) or "included" not in status:
            raise NetError(f"the coordinator {self.coordinator!r} sent a malformed round status")
        if status.get("error"):
            raise QuorumError(status["error"])
        included = [c for c in status["included"] if c in self.clients]
        if s.name not in included:
            raise QuorumError(f"{s.name} was left out of round {rnd} (its update came too late); it stops here")
        self.active = included
        total = b.concat([b.loads(self.public_key, s.recv_bytes(self.coordinator, tag + "-sum"))
                          for _ in range(int(status["chunks"]))])
        if b.size(total) != len(plain):
            raise NetError(f"the coordinator sent {b.size(total)} summed ciphertexts, expected {len(plain)}")
        residues = self._decrypt_split(total, included, tag)
        slots = split_slots(residues, lay)[:encoded.size]
        sums = (slots - len(included) * offset).astype(np.int64).astype(np.float64) / scale
        weight = sum(self.weights[c] for c in included)
        self.last = {"included": included, "ciphertexts": len(plain), "slots": lay.slots, "slot_bits": lay.slot_bits}
        return (sums / weight).reshape(np.shape(update))

    def _decrypt_split(self, total: Any, included: list[str], tag: str) -> list[int]:
        """Decrypt this client's share of the ciphertexts and swap plaintexts with the others."""
        s, b = self.session, self.backend
        count = b.size(total)
        bounds = np.linspace(0, count, len(included) + 1).round().astype(int)
        mine = included.index(s.name)
        part = slice(int(bounds[mine]), int(bounds[mine + 1]))
        own = b.decrypt(self.private_key, total[np.arange(part.start, part.stop)]) if part.stop > part.start else []
        payload = ints_to_bytes([int(v) for v in own])
        for c in included:
            if c != s.name:
                s.send(c, payload, tag + "-plain")
        pieces: list[list[int]] = []
        n = self.backend.modulus(self.public_key)
        for j, c in enumerate(included):
            if c == s.name:
                pieces.append(own)
                continue
            try:
                got = ints_from_bytes(s.recv_bytes(c, tag + "-plain"))
            except NetError as exc:
                raise QuorumError(f"client {c!r} left during the joint decryption of this round: {exc}") from exc
            if len(got) != bounds[j + 1] - bounds[j] or any(not 0 <= v < n for v in got):
                raise NetError(f"client {c!r} sent a malformed share of the decrypted sum")
            pieces.append(got)
        return [v for piece in pieces for v in piece]

    # -- a round: coordinator ------------------------------------------------------------------------
    def coordinator_round(self, rnd: int) -> dict:
        """Sum the updates of the clients that deliver by the deadline; returns the round's record."""
        s, b, p = self.session, self.backend, self.params
        tag = f"agg-{rnd}"
        deadline = time.monotonic() + p.round_timeout
        total = None
        expected = None
        delivered, dropped = [], {}
        for c in self.active:
            try:
                head = s.recv_meta(c, tag, timeout=max(0.01, deadline - time.monotonic()))
                count, cts = int(head["count"]), int(head["ciphertexts"])
                if expected is None:
                    expected = (count, cts)
                elif (count, cts) != expected:
                    raise ConfigError(f"client {c!r} sent {count} values in {cts} ciphertexts; others sent "
                                      f"{expected[0]} in {expected[1]}")
                parts = [b.loads(self.public_key, s.recv_bytes(c, tag, timeout=max(0.01, deadline - time.monotonic())))
                         for _ in chunk_slices(cts, CHUNK)]
                update = b.concat(parts)
                if b.size(update) != cts:
                    raise ConfigError(f"client {c!r} announced {cts} ciphertexts and sent {b.size(update)}")
            except NetError as exc:
                dropped[c] = f"{type(exc).__name__}: {exc}"
                continue
            total = update if total is None else b.add(total, update)
            delivered.append(c)
        record = {"round": rnd, "included": delivered, "dropped": dropped}
        if len(delivered) < self.quorum:
            error = (f"round {rnd}: only {len(delivered)} of {len(self.active)} clients delivered, below the quorum of "
                     f"{self.quorum}; missing: " + "; ".join(f"{c} ({why})" for c, why in dropped.items()))
            for c in delivered:
                s.send(c, {"included": [], "error": error}, tag + "-status")
            raise QuorumError(error)
        chunks = chunk_slices(b.size(total), CHUNK)
        live = [c for c in self.active if c in delivered or "PeerTimeout" in dropped.get(c, "")]
        for c in live:  # a late client hears that it was left out; a dead one is not written to
            try:
                s.send(c, {"included": delivered, "chunks": len(chunks)}, tag + "-status")
            except NetError:
                continue
        for c in delivered:
            for sl in chunks:
                s.send(c, b.dumps(total[np.arange(sl.start, sl.stop)]), tag + "-sum")
        self.active = delivered
        return record
