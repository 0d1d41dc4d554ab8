"""Oblivious transfer in the native core, end to end through Python: Chou–Orlandi base OT, IKNP
and SoftSpoken (k = 2, 4) extension, the TCCR hash (random OT), and correlated OT / Gilboa products mod q. numpy, Python
integers and the ``cryptography`` library's AES are the oracles; the two parties run in one
process, exchanging the bytes the real protocol would send."""

import importlib.util
import os

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

if importlib.util.find_spec("shaper._native") is None:  # pragma: no cover - the extension is part of every install
    pytest.skip("shaper._native is not built", allow_module_level=True)

from shaper import _native

P61 = (1 << 61) - 1
Q62 = (1 << 62) - 57  # odd, just below the 2^62 bound
DOMAIN = 0x5EED_0000_0000_0100  # low byte zero: the column byte of the tweak


def _bits(packed: np.ndarray | bytes, count: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(bytes(packed), np.uint8), bitorder="little")[:count]


def _base_ot(choices: bytes, count: int = 128, session: bytes = b"s" * 16):
    """(k0, k1) of the base-OT sender and the receiver's keys."""
    sender = _native.BaseOtSender(count, os.urandom(64), session)
    receiver = _native.BaseOtReceiver(choices, count, os.urandom(64 * count), session)
    reply = receiver.reply(sender.message())
    k0, k1 = sender.keys(reply)
    return k0, k1, receiver.keys()


def _iknp_pair():
    """A connected (IknpReceiver, IknpSender), set up by a real base OT in the other direction."""
    delta = os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    return _native.IknpReceiver(k0, k1), _native.IknpSender(chosen, delta)


def _extend(recv, send, choice_bits: np.ndarray, count: int):
    u, t = recv.extend(choice_bits, count)
    return t, send.extend(u, count)


def _random_choices(count: int) -> np.ndarray:
    return np.frombuffer(os.urandom(max(1, -(-count // 8))), np.uint8)


def _aes_ecb(key: bytes, data: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(data) + enc.finalize()


# --- base OT ---------------------------------------------------------------------------------

def test_base_ot_receiver_gets_exactly_the_chosen_key():
    choices = os.urandom(16)
    k0, k1, k = _base_ot(choices)
    def rows(keys: bytes) -> np.ndarray:
        return np.frombuffer(keys, np.uint8).reshape(128, 16)

    c = _bits(choices, 128).astype(bool)
    chosen = np.where(c[:, None], rows(k1), rows(k0))
    other = np.where(c[:, None], rows(k0), rows(k1))
    assert (rows(k) == chosen).all()
    assert (rows(k) != other).any(axis=1).all()


def test_base_ot_rejects_bad_input():
    session = b"s" * 16
    with pytest.raises(ValueError, match="64 bytes"):
        _native.BaseOtSender(128, os.urandom(32), session)
    with pytest.raises(ValueError, match="session"):
        _native.BaseOtSender(128, os.urandom(64), b"short")
    with pytest.raises(ValueError, match="bytes"):
        _native.BaseOtReceiver(os.urandom(15), 128, os.urandom(64 * 128), session)
    receiver = _native.BaseOtReceiver(os.urandom(16), 128, os.urandom(64 * 128), session)
    with pytest.raises(ValueError, match="before reply"):
        receiver.keys()
    with pytest.raises(ValueError, match="identity"):
        receiver.reply(bytes(32))
    with pytest.raises(ValueError, match="not a valid"):
        receiver.reply(b"\xff" * 32)
    with pytest.raises(ValueError, match="32 bytes"):
        receiver.reply(b"\x01" * 33)
    sender = _native.BaseOtSender(128, os.urandom(64), session)
    reply = receiver.reply(sender.message())
    with pytest.raises(ValueError, match="already replied"):
        receiver.reply(sender.message())
    with pytest.raises(ValueError, match="4096 bytes"):
        sender.keys(reply[:-32])
    bad = bytearray(reply)
    bad[32 * 7:32 * 8] = b"\xff" * 32
    with pytest.raises(ValueError, match="point 7"):
        sender.keys(bytes(bad))
    sender.keys(reply)
    with pytest.raises(ValueError, match="single use"):
        sender.keys(reply)


# --- IKNP ------------------------------------------------------------------------------------

def test_iknp_rows_satisfy_q_equals_t_xor_choice_times_delta():
    recv, send = _iknp_pair()
    delta = np.frombuffer(send.delta, np.uint8)
    for count in (1, 127, 128, 1000, 4097):
        choices = _random_choices(count)
        before = recv.index
        t, q = _extend(recv, send, choices, count)
        assert t.shape == q.shape == (count, 16) and t.dtype == q.dtype == np.uint8
        b = _bits(choices, count)
        assert (q == t ^ (b[:, None] * delta)).all()
        assert recv.index == send.index == before + -(-count // 128) * 128


def test_iknp_columns_are_aes_ctr_streams_continued_across_calls():
    """Outside oracle: column i of t is AES-128 under k0_i of the counters 0, 1, ... (128-bit,
    little-endian), the stream going on from one extend() to the next."""
    k0, k1 = os.urandom(2048), os.urandom(2048)
    recv = _native.IknpReceiver(k0, k1)
    first, second = 200, 300  # 256 + 384 rounded rows
    _, t1 = recv.extend(np.zeros(25, np.uint8), first)
    _, t2 = recv.extend(np.zeros(38, np.uint8), second)
    rows = np.concatenate([t1, np.zeros((56, 16), np.uint8), t2])  # 56 padding rows never returned
    bits = np.unpackbits(rows, axis=1, bitorder="little")  # (rows, 128): bit i of row j
    counters = b"".join(n.to_bytes(16, "little") for n in range(5))
    for i in (0, 5, 127):
        stream = _aes_ecb(k0[16 * i:16 * i + 16], counters)
        column = _bits(stream, 640)
        assert (bits[:first, i] == column[:first]).all()
        assert (bits[256:256 + second, i] == column[256:256 + second]).all()


def test_iknp_outputs_look_uniform():
    recv, send = _iknp_pair()
    count = 1 << 16
    u, _ = recv.extend(_random_choices(count), count)
    q = send.extend(u, count)
    n_bits = count * 128
    for name, data in (("q", q.tobytes()), ("u", u)):
        ones = int(np.unpackbits(np.frombuffer(data, np.uint8)).sum())
        assert abs(ones - n_bits / 2) < 5 * np.sqrt(n_bits / 4), name
    # every bit position of q is balanced on its own as well
    per_column = np.unpackbits(q, axis=1, bitorder="little").sum(axis=0)
    assert (np.abs(per_column - count / 2) < 5 * np.sqrt(count / 4)).all()


def test_iknp_rejects_a_wrong_message():
    recv, send = _iknp_pair()
    u, _ = recv.extend(_random_choices(1000), 1000)
    assert len(u) == 1024 * 16
    for bad in (u[:-1], u + b"\0", u[:len(u) // 2]):
        with pytest.raises(ValueError, match="IKNP message"):
            send.extend(bad, 1000)
    with pytest.raises(ValueError, match="choice bits"):
        recv.extend(np.zeros(10, np.uint8), 1000)
    with pytest.raises(ValueError, match="2048 bytes"):
        _native.IknpReceiver(os.urandom(2047), os.urandom(2048))
    with pytest.raises(ValueError, match="delta"):
        _native.IknpSender(os.urandom(2048), os.urandom(15))
    assert send.index == 0  # the failed calls consumed nothing
    send.extend(u, 1000)
    assert send.index == recv.index == 1024


# --- random OT by the TCCR hash ------------------------------------------------------------

def _tccr_oracle(rows: np.ndarray, domain: int, start: int, column: int = 0) -> np.ndarray:
    """H(x, τ) = π(π(x) ⊕ τ) ⊕ π(x) with π = AES-128 under SHA-256("shaper/ot/tccr/v1")[:16]."""
    digest = hashes.Hash(hashes.SHA256())
    digest.update(b"shaper/ot/tccr/v1")
    key = digest.finalize()[:16]
    px = np.frombuffer(_aes_ecb(key, rows.tobytes()), np.uint8).reshape(-1, 16)
    tau = np.zeros_like(px)
    j = np.arange(start, start + len(rows), dtype=np.uint64)
    tau[:, :8] = j.view(np.uint8).reshape(-1, 8)
    tau[:, 8:] = np.frombuffer((domain ^ column).to_bytes(8, "little"), np.uint8)
    return np.frombuffer(_aes_ecb(key, (px ^ tau).tobytes()), np.uint8).reshape(-1, 16) ^ px


def test_ot_hash_gives_random_ot_and_matches_the_formula():
    recv, send = _iknp_pair()
    count, start = 3000, recv.index
    choices = _random_choices(count)
    t, q = _extend(recv, send, choices, count)
    mine = _native.ot_hash(t, DOMAIN, start)
    m0, m1 = _native.ot_hash(q, DOMAIN, start, send.delta)
    b = _bits(choices, count).astype(bool)
    assert (mine == np.where(b[:, None], m1, m0)).all()
    assert (mine != np.where(b[:, None], m0, m1)).any(axis=1).all()
    assert (m0 == _tccr_oracle(q, DOMAIN, start)).all()
    delta = np.frombuffer(send.delta, np.uint8)
    assert (m1 == _tccr_oracle(q ^ delta, DOMAIN, start)).all()
    # another domain or start gives unrelated pads
    assert (_native.ot_hash(t, DOMAIN ^ 0x100, start) != mine).any(axis=1).all()
    assert (_native.ot_hash(t, DOMAIN, start + 1) != mine).any(axis=1).all()


def test_ot_bits_are_the_lowest_hash_bits():
    recv, send = _iknp_pair()
    for count in (1, 64, 65, 1000):
        t, q = _extend(recv, send, _random_choices(count), count)
        words = _native.ot_bits(t, DOMAIN, 7)
        assert words.dtype == np.uint64 and words.shape == (-(-count // 64),)
        as_bits = _bits(words.view(np.uint8), 64 * len(words))
        assert (as_bits[:count] == _native.ot_hash(t, DOMAIN, 7)[:, 0] & 1).all()
        assert not as_bits[count:].any()  # padding is zero
        w0, w1 = _native.ot_bits(q, DOMAIN, 7, send.delta)
        h0, h1 = _native.ot_hash(q, DOMAIN, 7, send.delta)
        assert (_bits(w0.view(np.uint8), count) == h0[:, 0] & 1).all()
        assert (_bits(w1.view(np.uint8), count) == h1[:, 0] & 1).all()


def test_hash_rejects_bad_arguments():
    rows = np.zeros((4, 16), np.uint8)
    with pytest.raises(ValueError, match="low 8 bits"):
        _native.ot_hash(rows, DOMAIN | 1, 0)
    with pytest.raises(ValueError, match="delta"):
        _native.ot_bits(rows, DOMAIN, 0, b"short")
    with pytest.raises(ValueError, match="overflow"):
        _native.ot_hash(rows, DOMAIN, (1 << 64) - 2)
    with pytest.raises(ValueError, match=r"shape \(m, 16\)"):
        _native.ot_hash(np.zeros((4, 8), np.uint8), DOMAIN, 0)
    with pytest.raises(ValueError, match="contiguous"):
        _native.ot_hash(np.zeros((4, 32), np.uint8)[:, ::2], DOMAIN, 0)


# --- correlated OT and Gilboa products -----------------------------------------------------

def _residues(n: int, q: int) -> np.ndarray:
    modulus = q or 1 << 64
    return np.array([int.from_bytes(os.urandom(16), "little") % modulus for _ in range(n)], np.uint64)


def _cot(recv, send, values: np.ndarray, offsets: np.ndarray, moduli: np.ndarray, bits: int, domain: int = DOMAIN):
    """One batch of COTs: (sender share, receiver share, corrections)."""
    rows = len(values) * bits
    start = recv.index
    choice_bits = _native.pack_choice_bits(values, bits)
    t, q = _extend(recv, send, choice_bits, rows)
    corrections, s_send = _native.cot_send(q, send.delta, domain, start, offsets, moduli, bits)
    s_recv = _native.cot_recv(t, domain, start, values, corrections, moduli, bits)
    return s_send, s_recv, corrections


@pytest.mark.parametrize("moduli", [[0], [P61], [Q62], [0, P61, Q62]])
@pytest.mark.parametrize("bits", [1, 61])
def test_cot_shares_add_up_to_offset_times_value(moduli, bits):
    recv, send = _iknp_pair()
    moduli = np.array(moduli, np.uint64)
    entries, k = 100, len(moduli)
    values = _residues(entries, 1 << bits)
    offsets = np.stack([_residues(entries, int(q)) for q in moduli], axis=1)
    s_send, s_recv, corrections = _cot(recv, send, values, offsets, moduli, bits)
    assert s_send.shape == s_recv.shape == (entries, k) and corrections.shape == (entries, bits, k)
    for c, q in enumerate(int(m) for m in moduli):
        modulus = q or 1 << 64
        for e in range(entries):
            want = int(offsets[e, c]) * int(values[e]) % modulus
            assert (int(s_send[e, c]) + int(s_recv[e, c])) % modulus == want
            assert all(int(x) < modulus for x in corrections[e, :, c])


def test_gilboa_beaver_triples_mod_a_61_bit_prime():
    """Two parties with additive shares of a and b get shares of c = a·b mod q: the cross terms
    a0·b1 and a1·b0 by one Gilboa OLE in each direction (each party a sender once)."""
    q, bits, n = P61, 61, 64
    moduli = np.array([q], np.uint64)
    a0, a1, b0, b1 = (_residues(n, q) for _ in range(4))
    r01, s01 = _iknp_pair()  # party 0 receives extended OTs from party 1
    r10, s10 = _iknp_pair()  # and the other way round
    # a0·b1: party 1 holds b1 as choice values, party 0 sends offsets a0
    x_send, x_recv, _ = _cot(r10, s10, b1, a0.reshape(n, 1), moduli, bits, domain=0x1000)
    # a1·b0: party 0 holds b0 as choice values, party 1 sends offsets a1
    y_send, y_recv, _ = _cot(r01, s01, b0, a1.reshape(n, 1), moduli, bits, domain=0x2000)
    for i in range(n):
        c0 = (int(a0[i]) * int(b0[i]) + int(x_send[i, 0]) + int(y_recv[i, 0])) % q
        c1 = (int(a1[i]) * int(b1[i]) + int(x_recv[i, 0]) + int(y_send[i, 0])) % q
        a, b = (int(a0[i]) + int(a1[i])) % q, (int(b0[i]) + int(b1[i])) % q
        assert (c0 + c1) % q == a * b % q


def test_private_bit_times_value_over_2_64():
    recv, send = _iknp_pair()
    bits_values = np.frombuffer(os.urandom(500), np.uint8).astype(np.uint64) & np.uint64(1)
    values = np.frombuffer(os.urandom(8 * 500), np.uint64).reshape(500, 1)
    s_send, s_recv, _ = _cot(recv, send, bits_values, values, np.array([0], np.uint64), 1)
    assert ((s_send + s_recv)[:, 0] == bits_values * values[:, 0]).all()  # uint64 wraps mod 2^64


def test_pack_choice_bits_layout():
    for bits in (1, 7, 61, 64):
        values = _residues(37, 1 << bits)
        packed = _native.pack_choice_bits(values, bits)
        assert packed.dtype == np.uint8 and len(packed) == -(-37 * bits // 8)
        want = [(int(v) >> i) & 1 for v in values for i in range(bits)]
        assert (_bits(packed, 37 * bits) == want).all()


def test_cot_rejects_bad_arguments():
    recv, send = _iknp_pair()
    values = np.array([5, 6], np.uint64)
    t, q = _extend(recv, send, _native.pack_choice_bits(values, 3), 6)
    offsets, moduli = np.array([[1], [2]], np.uint64), np.array([P61], np.uint64)
    with pytest.raises(ValueError, match="odd"):
        _native.cot_send(q, send.delta, DOMAIN, 0, offsets, np.array([1 << 40], np.uint64), 3)
    with pytest.raises(ValueError, match="odd"):
        _native.cot_send(q, send.delta, DOMAIN, 0, offsets, np.array([1 << 62 | 1], np.uint64), 3)
    with pytest.raises(ValueError, match="not below its modulus"):
        _native.cot_send(q, send.delta, DOMAIN, 0, np.array([[1], [P61]], np.uint64), moduli, 3)
    with pytest.raises(ValueError, match="OT rows"):
        _native.cot_send(q, send.delta, DOMAIN, 0, offsets, moduli, 2)
    with pytest.raises(ValueError, match="bits"):
        _native.cot_send(q, send.delta, DOMAIN, 0, offsets, moduli, 65)
    with pytest.raises(ValueError, match="shape"):
        _native.cot_send(q, send.delta, DOMAIN, 0, np.ones((2, 2), np.uint64), moduli, 3)
    with pytest.raises(ValueError, match="low 8 bits"):
        _native.cot_send(q, send.delta, DOMAIN | 3, 0, offsets, moduli, 3)
    corrections, _ = _native.cot_send(q, send.delta, DOMAIN, 0, offsets, moduli, 3)
    with pytest.raises(ValueError, match="does not fit in 3 bits"):
        _native.cot_recv(t, DOMAIN, 0, np.array([5, 8], np.uint64), corrections, moduli, 3)
    with pytest.raises(ValueError, match="not below its modulus"):
        _native.cot_recv(t, DOMAIN, 0, values, np.full((2, 3, 1), P61, np.uint64), moduli, 3)
    with pytest.raises(ValueError, match="corrections must have shape"):
        _native.cot_recv(t, DOMAIN, 0, values, corrections[:, :2], moduli, 3)
    with pytest.raises(ValueError, match="does not fit"):
        _native.pack_choice_bits(np.array([4], np.uint64), 2)


# --- fused extension + kernel ------------------------------------------------------------------

def _twin_pairs():
    """Two IKNP pairs in the same state (same base keys and Δ), to run both paths side by side."""
    delta = os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    return ((_native.IknpReceiver(k0, k1), _native.IknpSender(chosen, delta)),
            (_native.IknpReceiver(k0, k1), _native.IknpSender(chosen, delta)), delta)


@pytest.mark.parametrize("count", [1, 200, 8192 * 2 + 77])
def test_fused_calls_equal_extend_then_kernel(count):
    (r1, s1), (r2, s2), delta = _twin_pairs()
    warm = _random_choices(300)
    _extend(r1, s1, warm, 300), _extend(r2, s2, warm, 300)  # a non-zero start
    choices = _random_choices(count)
    # random OT: hashes, given out= buffers on the second call
    start = r1.index
    t, q = _extend(r1, s1, choices, count)
    u, h = r2.extend_hash(choices, count, DOMAIN)
    h0, h1 = s2.extend_hash(u, count, DOMAIN)
    assert (h == _native.ot_hash(t, DOMAIN, start)).all()
    want0, want1 = _native.ot_hash(q, DOMAIN, start, delta)
    assert (h0 == want0).all() and (h1 == want1).all()
    start = r1.index
    t, q = _extend(r1, s1, choices, count)
    bufs = np.empty((count, 16), np.uint8), np.empty((count, 16), np.uint8), np.empty((count, 16), np.uint8)
    u, h = r2.extend_hash(choices, count, DOMAIN, out=bufs[0])
    pair = s2.extend_hash(u, count, DOMAIN, out=(bufs[1], bufs[2]))
    assert h is bufs[0] and pair[0] is bufs[1] and pair[1] is bufs[2]
    assert (h == _native.ot_hash(t, DOMAIN, start)).all()
    want0, want1 = _native.ot_hash(q, DOMAIN, start, delta)
    assert (bufs[1] == want0).all() and (bufs[2] == want1).all()
    # random OT: bits
    start = r1.index
    t, q = _extend(r1, s1, choices, count)
    u, b = r2.extend_bits(choices, count, DOMAIN)
    b0, b1 = s2.extend_bits(u, count, DOMAIN)
    assert (b == _native.ot_bits(t, DOMAIN, start)).all()
    want0, want1 = _native.ot_bits(q, DOMAIN, start, delta)
    assert (b0 == want0).all() and (b1 == want1).all()
    # correlated OT (Gilboa, two moduli), then the receiver's half on the fused sender's output
    bits, moduli = 61, np.array([P61, 0], np.uint64)
    e = max(1, count // bits)
    values = np.frombuffer(os.urandom(8 * e), np.uint64) >> np.uint64(3)
    offsets = np.stack([np.frombuffer(os.urandom(8 * e), np.uint64) % np.uint64(P61),
                        np.frombuffer(os.urandom(8 * e), np.uint64)], axis=1)
    cb = _native.pack_choice_bits(values, bits)
    start = r1.index
    t, q = _extend(r1, s1, cb, e * bits)
    corr, share = _native.cot_send(q, delta, DOMAIN, start, offsets, moduli, bits)
    u, t2 = r2.extend(cb, e * bits)
    corr2, share2 = s2.extend_cot(u, e * bits, DOMAIN, offsets, moduli, bits)
    assert (corr == corr2).all() and (share == share2).all()
    mine = _native.cot_recv(t2, DOMAIN, start, values, corr2, moduli, bits)
    prod = [(int(a) * int(x)) % P61 for a, x in zip(offsets[:, 0], values)]
    assert [(int(s) + int(m)) % P61 for s, m in zip(share2[:, 0], mine[:, 0])] == prod
    assert ((share2[:, 1] + mine[:, 1]) == offsets[:, 1] * values).all()
    assert (r1.index, s1.index) == (r2.index, s2.index)


def test_fused_calls_reject_bad_input():
    (r, s), _, _ = _twin_pairs()
    with pytest.raises(ValueError, match="low 8 bits"):
        r.extend_hash(_random_choices(128), 128, DOMAIN | 1)
    with pytest.raises(ValueError, match="packed choice bits"):
        r.extend_bits(_random_choices(8), 128, DOMAIN)
    with pytest.raises(ValueError, match="uint8 array"):
        r.extend_hash(_random_choices(128), 128, DOMAIN, out=np.empty((127, 16), np.uint8))
    assert r.index == 0  # nothing moved
    u, _ = r.extend(_random_choices(128), 128)
    with pytest.raises(ValueError, match="must be"):
        s.extend_hash(u[:-1], 128, DOMAIN)
    buf = np.empty((128, 16), np.uint8)
    with pytest.raises(ValueError, match="different"):
        s.extend_hash(u, 128, DOMAIN, out=(buf, buf))
    with pytest.raises(ValueError, match="entries"):
        s.extend_cot(u, 128, DOMAIN, np.zeros((3, 1), np.uint64), np.array([P61], np.uint64), 61)
    assert s.index == 0
    h0, h1 = s.extend_hash(u, 128, DOMAIN)
    assert s.index == 128


# --- SoftSpoken (k = 2, 4; k = 1 is IKNP) ------------------------------------------------------

def _soft_pair(k: int, seed: bytes | None = None):
    """A connected (SoftReceiver, SoftSender) over a real base OT; the setup message goes
    receiver -> sender once."""
    delta = os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    recv = _native.SoftReceiver(k0, k1, k, seed or os.urandom(16))
    return recv, _native.SoftSender(chosen, delta, k, recv.setup_message), delta


@pytest.mark.parametrize("k", [1, 2, 4])
def test_soft_rows_satisfy_q_equals_t_xor_choice_times_delta(k):
    recv, send, delta = _soft_pair(k)
    assert isinstance(recv, _native.IknpReceiver) and isinstance(send, _native.IknpSender)
    assert recv.k == send.k == k and send.delta == delta  # Δ: the base-OT choice bits, as for IKNP
    assert len(recv.setup_message) == (0 if k == 1 else 4096)
    d = np.frombuffer(delta, np.uint8)
    for count in (1, 127, 128, 1000, 8192 + 129, 0, 3):
        choices = _random_choices(count)
        before = recv.index
        u, t = recv.extend(choices, count)
        assert len(u) * 8 == -(-count // 128) * 128 * 128 // k  # 128/k bits per (rounded) OT
        q = send.extend(u, count)
        assert (q == t ^ (_bits(choices, count)[:, None] * d)).all()
        assert recv.index == send.index == before + -(-count // 128) * 128


def test_soft_k1_is_iknp_and_soft_rows_are_not():
    delta = os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    choices = _random_choices(1000)
    iknp = _native.IknpReceiver(k0, k1).extend(choices, 1000)
    same = _native.SoftReceiver(k0, k1, 1, os.urandom(16)).extend(choices, 1000)
    assert iknp[0] == same[0] and (iknp[1] == same[1]).all()
    other = _native.SoftReceiver(k0, k1, 2, os.urandom(16)).extend(choices, 1000)
    assert len(other[0]) == len(iknp[0]) // 2 and (other[1] != iknp[1]).any(axis=1).all()


@pytest.mark.parametrize("k", [2, 4])
def test_soft_fused_outputs_are_random_ot_and_gilboa(k):
    """extend_hash / extend_bits / extend_cot on SoftSpoken rows mean what they mean for IKNP:
    H(t_j) is the sender's hash selected by r_j, COT shares add up mod q."""
    recv, send, _ = _soft_pair(k)
    send.extend(recv.extend(_random_choices(300), 300)[0], 300)  # a non-zero start
    count = 8192 * 2 + 77
    choices = _random_choices(count)
    b = _bits(choices, count).astype(bool)
    out, out0, out1 = (np.empty((count, 16), np.uint8) for _ in range(3))
    u, h = recv.extend_hash(choices, count, DOMAIN, out=out)
    assert len(u) == (count + 127) // 128 * 128 * 16 // k
    h0, h1 = send.extend_hash(u, count, DOMAIN, out=(out0, out1))
    assert h is out and h0 is out0 and h1 is out1
    assert (h == np.where(b[:, None], h1, h0)).all()
    assert (h != np.where(b[:, None], h0, h1)).any(axis=1).all()
    # the hashes are those of the rows (what the two-step path gives)
    start = recv.index
    u, t = recv.extend(choices, count)
    q = send.extend(u, count)
    assert (_native.ot_hash(t, DOMAIN, start) == np.where(b[:, None], *_native.ot_hash(q, DOMAIN, start, send.delta)[::-1])).all()
    assert (_native.ot_hash(q, DOMAIN, start, send.delta)[0] == _tccr_oracle(q, DOMAIN, start)).all()
    # bits
    u, w = recv.extend_bits(choices, count, DOMAIN)
    w0, w1 = send.extend_bits(u, count, DOMAIN)
    mine, m0, m1 = (_bits(x.view(np.uint8), count) for x in (w, w0, w1))
    assert (mine == np.where(b, m1, m0)).all()
    # Gilboa products mod a 61-bit prime and mod 2^64
    bits, moduli = 61, np.array([P61, 0], np.uint64)
    e = 300
    values = _residues(e, 1 << bits)
    offsets = np.stack([_residues(e, P61), _residues(e, 0)], axis=1)
    start = recv.index
    u, t = recv.extend(_native.pack_choice_bits(values, bits), e * bits)
    corr, share = send.extend_cot(u, e * bits, DOMAIN, offsets, moduli, bits)
    theirs = _native.cot_recv(t, DOMAIN, start, values, corr, moduli, bits)
    for i in range(e):
        assert (int(share[i, 0]) + int(theirs[i, 0])) % P61 == int(offsets[i, 0]) * int(values[i]) % P61
    assert ((share[:, 1] + theirs[:, 1]) == offsets[:, 1] * values).all()


def test_soft_rejects_bad_setup_and_k():
    delta = os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    for k in (0, 3, 5, 6):
        with pytest.raises(ValueError, match=rf"k must be 1 \(IKNP\), 2 or 4.*which {k} does not"):
            _native.SoftReceiver(k0, k1, k, os.urandom(16))
        with pytest.raises(ValueError, match="k must be"):
            _native.SoftSender(chosen, delta, k, bytes(4096))
    with pytest.raises(ValueError, match="divides 128 but is not implemented"):
        _native.SoftReceiver(k0, k1, 8, os.urandom(16))
    with pytest.raises(ValueError, match="seed"):
        _native.SoftReceiver(k0, k1, 4, os.urandom(15))
    recv = _native.SoftReceiver(k0, k1, 4, os.urandom(16))
    setup = recv.setup_message
    for bad in (setup[:-1], setup + b"\0", b""):
        with pytest.raises(ValueError, match="setup message must be 4096 bytes"):
            _native.SoftSender(chosen, delta, 4, bad)
    with pytest.raises(ValueError, match="must be empty"):
        _native.SoftSender(chosen, delta, 1, setup)
    # a corrupted setup message of the right length is accepted but the rows do not correlate
    corrupt = bytes(x ^ 1 for x in setup)
    send = _native.SoftSender(chosen, delta, 4, corrupt)
    u, t = recv.extend(np.zeros(125, np.uint8), 1000)
    assert (send.extend(u, 1000) != t).any(axis=1).all()
    # and a message of the wrong length is refused before anything moves
    with pytest.raises(ValueError, match=r"SoftSpoken \(k = 4\) message for 1000 OTs must be 4096 bytes"):
        send.extend(u[:-1], 1000)
    with pytest.raises(ValueError, match="must be 4096 bytes"):
        send.extend_hash(u + b"\0", 1000, DOMAIN)
    assert send.index == 1024


@pytest.mark.parametrize("k", [1, 4])
def test_each_view_is_independent_of_the_other_partys_inputs(k):
    """Statistical: the sender's view (the extension message) has one distribution whether the
    receiver chooses all 0 or all 1, and the receiver's view of a correlated OT (the corrections)
    is uniform mod q whether the sender's offsets are all 0 or all q - 1. A leak of either input
    (an unmasked column, a pad reused across offsets) fails these at p < 1e-6."""
    from scipy.stats import chi2_contingency, ks_2samp, kstest

    count = 1 << 16
    messages = []
    for fill in (0x00, 0xFF):
        recv, send, _ = _soft_pair(k)
        u, _ = recv.extend(np.full(count // 8, fill, np.uint8), count)
        messages.append(np.frombuffer(u, np.uint8))
    table = np.stack([np.bincount(m, minlength=256) for m in messages])
    assert chi2_contingency(table)[1] > 1e-6
    for m in messages:  # every bit position balanced
        ones = np.unpackbits(m.reshape(-1, 16), axis=1).sum(axis=0)
        assert (np.abs(ones - len(m) / 32) < 6 * np.sqrt(len(m) / 64)).all()

    e, bits = 2048, 61
    corrections = []
    for offset in (0, P61 - 1):
        recv, send, _ = _soft_pair(k)
        values = _residues(e, 1 << bits)
        u, _ = recv.extend(_native.pack_choice_bits(values, bits), e * bits)
        corr, _ = send.extend_cot(u, e * bits, DOMAIN, np.full((e, 1), offset, np.uint64),
                                  np.array([P61], np.uint64), bits)
        corrections.append(corr.ravel().astype(np.float64) / P61)
    assert ks_2samp(*corrections).pvalue > 1e-6
    for c in corrections:
        assert kstest(c, "uniform").pvalue > 1e-6


@pytest.mark.parametrize("k", [1, 4])
def test_receiver_extend_cot_then_finish_equals_cot_recv(k):
    """The receiver's fused half (pad sums while t is in cache) and cot_finish give exactly
    cot_recv's shares (two receivers on the same keys and seed make the same rows), over entries
    that straddle chunk boundaries, for a prime, 2^64 and 3 at once."""
    delta, seed = os.urandom(16), os.urandom(16)
    k0, k1, chosen = _base_ot(delta)
    fused, plain = (_native.SoftReceiver(k0, k1, k, seed) for _ in range(2))
    send = _native.SoftSender(chosen, delta, k, fused.setup_message)
    bits, moduli = 61, np.array([P61, 0, 3], np.uint64)
    e = 8192 * 2 // bits + 5  # crosses two 8192-row chunks mid-entry
    values = _residues(e, 1 << bits)
    offsets = np.stack([_residues(e, P61), _residues(e, 0), _residues(e, 3)], axis=1)
    choices = _native.pack_choice_bits(values, bits)
    buf = np.empty((e + 2, 3), np.uint64)
    u, pads = fused.extend_cot(choices, e * bits, DOMAIN, moduli, bits, out=buf[1:-1])
    u2, t = plain.extend(choices, e * bits)
    assert u == u2 and pads.shape == (e, 3) and fused.index == plain.index == -(-e * bits // 128) * 128
    assert np.shares_memory(pads, buf)
    corr, share = send.extend_cot(u, e * bits, DOMAIN, offsets, moduli, bits)
    mine = _native.cot_finish(pads, values, corr, moduli, bits)
    assert mine is pads and (buf[1:-1] == pads).all()  # completed in place
    assert (mine == _native.cot_recv(t, DOMAIN, 0, values, corr, moduli, bits)).all()
    for i in range(e):
        assert (int(mine[i, 0]) + int(share[i, 0])) % P61 == int(offsets[i, 0]) * int(values[i]) % P61
        assert (int(mine[i, 2]) + int(share[i, 2])) % 3 == int(offsets[i, 2]) * int(values[i]) % 3
    assert ((mine[:, 1] + share[:, 1]) == offsets[:, 1] * values).all()
    with pytest.raises(ValueError, match="pads must be a C-contiguous"):
        _native.cot_finish(pads[:-1], values, corr, moduli, bits)
    with pytest.raises(ValueError, match="out must be a C-contiguous"):
        fused.extend_cot(choices, e * bits, DOMAIN, moduli, bits, out=np.empty((e, 2), np.uint64))
    with pytest.raises(ValueError, match="pads"):
        _native.cot_finish(np.full_like(pads, P61), values, corr, moduli, bits)
    with pytest.raises(ValueError, match="whole values"):
        fused.extend_cot(choices, e * bits - 1, DOMAIN, moduli, bits)
