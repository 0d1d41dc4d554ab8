"""Coordinated vertical linear models: the messages of one mini-batch step (Hardy et al. 2017,
FATE's hetero logistic/linear regression with an arbiter).

Roles. The **guest** G holds the labels and some feature columns, each **host** H_i other columns
of the same rows (aligned beforehand, e.g. by PSI), the **arbiter** A holds the Paillier key pair
and no data. Every value is a fixed-point integer at scale S = 2^f; each party's own weights stay
in plaintext with that party.

One step on a batch b of B rows (T_r = 2 y_r S with y in {-1, +1} for the logistic model,
T_r = round(y_r S) for the linear one; U_p = round(S X_p[b] w_p) at party p):

1. H_i -> G: Enc(U_i) (B values), Enc(sum_r U_i[r]^2), Enc(R_i) with R_i = round(S^2 l2/2 |w_i|^2);
   with several hosts, H_i -> H_j (i < j): Enc(U_i), and H_j -> G: Enc(U_j . U_i).
2. G -> every H_i: Enc(E) with E = U_g - T + sum_i U_i (the residual, scale S), and
   G -> A: Enc(D), Enc(R), re-randomised, where D = sum_r (Z_r - T_r)^2 with Z = U_g + sum_i U_i,
   assembled from the terms of step 1 (the square needs no ciphertext product), R = R_g + sum R_i.
3. Every data party p: Enc(G_p) = round(S X_p[b])^T Enc(E) (scale S^2), blinded, packed and sent
   to A (:mod:`.blind`); A decrypts and returns G_p + s_p; p removes its masks.
4. A decrypts D and R: the batch loss is log 2 - 1/2 + D / (8 B S^2) (logistic, the second-order
   Taylor expansion of the log-loss at 0) or D / (2 B S^2) (linear), plus R / S^2; A sends it and
   whether to stop to every party.
5. p updates w_p -= lr_t (c G_p / (B S^2) + l2 w_p) with c = 1/4 (logistic) or 1 (linear).

What each role learns: the guest and the hosts only ciphertexts under A's key, their own
gradients, and the per-step training loss; A learns the loss, its regularisation part and values
masked with σ = 40 extra bits, nothing about rows or weights. Security model: semi-honest, no
collusion between A and a data party (as in Hardy et al. and FATE: A with G's ciphertexts could
decrypt the hosts' forward values).

Cost per step: B + 2 encryptions at each host (+B sent to each later host), a few at the guest;
(B x d_p) ciphertext-plaintext products at each data party; the guest's dot products with the
hosts' vectors; ceil(d_p / k) encryptions and decryptions for the blinded gradients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...crypto import encoding
from ...errors import ConfigError, PeerError, PlaintextOverflowError
from .backend import Backend
from .blind import decrypt_blinded, receive_unblinded, send_blinded

MODELS = ("logistic", "linear")
ROLES = ("guest", "host", "arbiter")


@dataclass
class Party:
    """One party's view of the job: who plays which role, the backend and the arbiter's key."""

    session: Any
    backend: Backend
    role: str
    guest: str
    hosts: list[str]
    arbiter: str
    public_key: Any = None
    private_key: Any = None  # the arbiter's only
    frac_bits: int = 20
    extra: dict = field(default_factory=dict)

    @property
    def me(self) -> str:
        return self.session.name

    @property
    def data_parties(self) -> list[str]:
        return [self.guest, *self.hosts]


def assign_roles(session: Any, role: str, hello: dict, tag: str = "fl-hello") -> tuple[str, list[str], str, dict]:
    """Every party announces its role and parameters; returns (guest, hosts, arbiter, hellos) after
    checking there is one guest, one arbiter, at least one host and that the shared parameters
    agree (``hello["shared"]``) and the data parties hold the same rows (``hello["rows"]``)."""
    if role not in ROLES:
        raise ConfigError(f"role must be one of {ROLES}, got {role!r}")
    mine = {**hello, "role": role}
    session.broadcast(mine, tag)
    hellos = {session.name: mine, **session.gather(tag)}
    by_role: dict[str, list[str]] = {r: [] for r in ROLES}
    for name in session.parties:
        got = hellos[name].get("role") if isinstance(hellos[name], dict) else None
        if got not in ROLES:
            raise ConfigError(f"party {name!r} announced no valid role ({got!r})")
        by_role[got].append(name)
    if len(by_role["guest"]) != 1 or len(by_role["arbiter"]) != 1 or not by_role["host"]:
        raise ConfigError("a vertical job needs exactly one guest, one arbiter and at least one host; got "
                          + ", ".join(f"{r}: {by_role[r] or 'none'}" for r in ROLES))
    for name in session.parties:
        if hellos[name].get("shared") != mine.get("shared"):
            diff = sorted(k for k in set(mine["shared"]) | set(hellos[name].get("shared") or {})
                          if mine["shared"].get(k) != (hellos[name].get("shared") or {}).get(k))
            raise ConfigError(f"party {name!r} was started with different settings: {', '.join(diff)} "
                              f"({[(k, hellos[name].get('shared', {}).get(k)) for k in diff]} there, "
                              f"{[(k, mine['shared'].get(k)) for k in diff]} here)")
    data = [*by_role["guest"], *by_role["host"]]
    rows = {name: hellos[name].get("rows") for name in data}
    if len({(r[0] if r else None) for r in rows.values()}) != 1:
        raise ConfigError(f"the guest and the hosts must hold the same rows; row counts: "
                          f"{ {k: (v[0] if v else None) for k, v in rows.items()} }")
    if len({(r[1] if r else None) for r in rows.values()}) != 1:
        raise ConfigError("the guest and the hosts hold different row ids (or a different order); align them first "
                          "(--align auto)")
    return by_role["guest"][0], by_role["host"], by_role["arbiter"][0], hellos


def share_public_key(p: Party) -> None:
    """The arbiter sends its public key to every data party."""
    b = p.backend
    if p.role == "arbiter":
        data = b.public_to_bytes(p.public_key)
        for name in p.data_parties:
            p.session.send(name, data, "fl-pk")
    else:
        p.public_key = b.public_from_bytes(p.session.recv_bytes(p.arbiter, "fl-pk"))


def encode(values: Any, frac_bits: int) -> np.ndarray:
    """round(values * 2^frac_bits) as exact ints (object array), raising on overflow."""
    return encoding.encode(np.asarray(values, dtype=float), frac_bits, 1 << 62).astype(object)


# -- step 1-2: forward values and the residual ------------------------------------------------------
def host_forward(p: Party, U: np.ndarray, reg: int, tag: str) -> Any:
    """Send this host's encrypted forward values; returns Enc(E) from the guest."""
    b, s, pk = p.backend, p.session, p.public_key
    u = [int(v) for v in U.tolist()]
    enc_u = b.encrypt(pk, u)
    later = p.hosts[p.hosts.index(p.me) + 1:]
    earlier = p.hosts[:p.hosts.index(p.me)]
    wire = b.dumps(enc_u)
    for h in later:
        s.send(h, wire, tag + "-u")
    s.send(p.guest, wire, tag + "-u")
    s.send(p.guest, b.dumps(b.encrypt(pk, [sum(v * v for v in u), int(reg)])), tag + "-sq")
    for h in earlier:
        other = b.loads(pk, s.recv_bytes(h, tag + "-u"))
        if b.size(other) != len(u):
            raise ConfigError(f"host {h!r} sent {b.size(other)} forward values, expected {len(u)}")
        s.send(p.guest, b.dumps(b.dot(np.array([u], dtype=object), other)), tag + "-cross")
    return b.loads(pk, s.recv_bytes(p.guest, tag + "-e"))


def guest_forward(p: Party, U: np.ndarray, T: np.ndarray, reg: int, tag: str) -> Any:
    """Combine the hosts' forward values into Enc(E) (sent to the hosts) and the loss terms
    Enc(D), Enc(R) (sent to the arbiter); returns Enc(E)."""
    b, s, pk = p.backend, p.session, p.public_key
    base = [int(v) for v in (U - T).tolist()]
    rows = len(base)
    enc_e = None
    d_terms = []
    plain_d = sum(v * v for v in base)
    plain_r = int(reg)
    for h in p.hosts:
        enc_u = b.loads(pk, s.recv_bytes(h, tag + "-u"))
        if b.size(enc_u) != rows:
            raise ConfigError(f"host {h!r} sent {b.size(enc_u)} forward values, expected {rows}")
        sq = b.loads(pk, s.recv_bytes(h, tag + "-sq"))
        if b.size(sq) != 2:
            raise ConfigError(f"host {h!r} sent {b.size(sq)} loss terms, expected 2")
        enc_e = enc_u if enc_e is None else b.add(enc_e, enc_u)
        d_terms.append(b.dot(np.array([[2 * v for v in base], [0] * rows], dtype=object), enc_u))  # 2 base.U_i, 0
        d_terms.append(sq)  # sum U_i^2, R_i
    for j, h in enumerate(p.hosts):
        for _ in p.hosts[:j]:
            cross = b.loads(pk, s.recv_bytes(h, tag + "-cross"))
            if b.size(cross) != 1:
                raise ConfigError(f"host {h!r} sent {b.size(cross)} cross terms, expected 1")
            d_terms.append(b.mul_plain(b.concat([cross, cross]), [2, 0]))
    enc_e = b.add_plain(enc_e, base)
    wire = b.dumps(enc_e)
    for h in p.hosts:
        s.send(h, wire, tag + "-e")
    acc = d_terms[0]
    for t in d_terms[1:]:
        acc = b.add(acc, t)
    # plaintext parts and fresh randomness in one encryption (re-randomises what goes to the key owner)
    acc = b.add(acc, b.encrypt(pk, [plain_d, plain_r]))
    s.send(p.arbiter, b.dumps(acc), tag + "-loss")
    return enc_e


# -- step 3: gradients ---------------------------------------------------------------------------------
def gradient_bits(p: Party, rows: int, x_bits: int) -> int:
    """A bound on |G_p| (bits): B rows of features below 2^x_bits (at scale S) times residuals
    below 2^(f + 24)."""
    return x_bits + p.frac_bits + 24 + max(1, math.ceil(math.log2(max(rows, 2))))


def gradient(p: Party, X_int: np.ndarray, enc_e: Any, tag: str) -> np.ndarray:
    """This data party's G_p = X_int^T E, through blind decryption at the arbiter."""
    x_bits = max(1, int(np.abs(X_int).max()).bit_length()) if X_int.size else 1
    bits = gradient_bits(p, X_int.shape[0], x_bits)
    enc_g = p.backend.dot(X_int.T, enc_e)
    masks = send_blinded(p.session, p.backend, p.public_key, enc_g, bits, p.arbiter, tag + "-g")
    try:
        return receive_unblinded(p.session, masks, bits, p.arbiter, tag + "-g")
    except PlaintextOverflowError as exc:
        raise PlaintextOverflowError(f"{p.me}: {exc}") from None


# -- step 4: the arbiter -----------------------------------------------------------------------------
def arbiter_step(p: Party, tag: str) -> tuple[int, int]:
    """Decrypt the loss terms (D, R) and every party's blinded gradient; returns (D, R)."""
    b, s, sk = p.backend, p.session, p.private_key
    loss = b.loads(p.public_key, s.recv_bytes(p.guest, tag + "-loss"))
    if b.size(loss) != 2:
        raise ConfigError(f"the guest sent {b.size(loss)} loss terms, expected 2")
    d, r = b.decrypt_signed(sk, loss)
    for name in p.data_parties:
        decrypt_blinded(s, b, sk, name, tag + "-g")
    return d, r


def announce(p: Party, record: dict, tag: str) -> None:
    for name in p.data_parties:
        p.session.send(name, record, tag + "-status")


def receive_status(p: Party, tag: str) -> dict:
    record = p.session.recv_meta(p.arbiter, tag + "-status")
    if not isinstance(record, dict) or "loss" not in record:
        raise PeerError(f"the arbiter {p.arbiter!r} sent a malformed status")
    return record


# -- prediction: the guest learns the scores of new rows, no one else learns anything -----------------
def predict_host(p: Party, U: np.ndarray, tag: str) -> None:
    p.session.send(p.guest, p.backend.dumps(p.backend.encrypt(p.public_key, [int(v) for v in U.tolist()])), tag + "-u")


def predict_guest(p: Party, U: np.ndarray, tag: str) -> np.ndarray:
    """Z = U_g + sum U_i, decrypted blindly by the arbiter; returns Z (ints at scale S)."""
    b, s, pk = p.backend, p.session, p.public_key
    acc = None
    for h in p.hosts:
        enc = b.loads(pk, s.recv_bytes(h, tag + "-u"))
        if b.size(enc) != len(U):
            raise ConfigError(f"host {h!r} sent {b.size(enc)} scores, expected {len(U)}")
        acc = enc if acc is None else b.add(acc, enc)
    acc = b.add_plain(acc, [int(v) for v in U.tolist()])
    bits = p.frac_bits + 40
    masks = send_blinded(s, b, pk, acc, bits, p.arbiter, tag + "-z")
    return receive_unblinded(s, masks, bits, p.arbiter, tag + "-z")


def predict_arbiter(p: Party, tag: str) -> None:
    decrypt_blinded(p.session, p.backend, p.private_key, p.guest, tag + "-z")
