"""The OT extension's consistency check (KOS 2015; Roy 2022 for SoftSpoken k > 1), through the
sans-I/O native objects: honest calls pass for k = 1, 2, 4; the check's bytes equal an
independent Python model over GF(2^128) (Python ints, hashlib, cryptography's AES); receivers
that deviate (a flipped column, a different r per group, a tampered message, a wrong setup
message) are caught, except for the one Delta bit a receiver bets on, which is the leak KOS's
analysis allows (it passes with probability 1/2 and learns that bit; a wrong bet ends the pair).

The malicious receiver is modelled from the outside: an unchecked receiver on the same keys
extends every row of the checked call (the extra rows' choices its own), the test tampers its
columns and forges the trailer with the Python model under the tampered message's chi."""

import hashlib
import importlib.util
import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

if importlib.util.find_spec("shaper._native") is None:  # pragma: no cover - the extension is part of every install
    pytest.skip("the native extension is not built", allow_module_level=True)

from shaper import _native

LABEL = b"shaper/ot/check/v1"
CHOICES_LABEL = b"shaper/ot/check/choices/v1"
CHUNK = 64 * 128        # rows per chunk of the native loop (one Fiat-Shamir step each)
EXTRA = 256             # the check's extra rows per call
MODULUS = (1 << 128) | 0x87  # X^128 + X^7 + X^2 + X + 1
CONTEXT = bytes(range(16))
FAILED = "failed the consistency check"


# --- the independent model ----------------------------------------------------------------------

def gf_mul(a: int, b: int) -> int:
    """a * b in GF(2^128), bit i of an int the coefficient of X^i."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a >> 128:
            a ^= MODULUS
    return r


def _u64(v: int) -> bytes:
    return v.to_bytes(8, "little")


def model_trailer(cols: bytes, rows: np.ndarray, bits: bytes, k: int, index: int, count: int,
                  context: bytes = CONTEXT) -> bytes:
    """x || t~ for a checked call of ``count`` OTs whose m rows (all of them) are ``rows`` with
    packed choice bits ``bits``, message columns ``cols`` (128/k columns of m/8 bytes)."""
    m = len(rows)
    col = m // 8
    prefix = _u64(len(LABEL)) + LABEL + context + _u64(k) + _u64(index) + _u64(count)
    prev, x, t = bytes(32), 0, 0
    for c in range(-(-m // CHUNK)):
        first, n = c * CHUNK, min(CHUNK, m - c * CHUNK)
        part = b"".join(cols[g * col + first // 8:g * col + (first + n) // 8] for g in range(128 // k))
        prev = hashlib.sha256(prefix + _u64(c) + prev + part).digest()
        s = int.from_bytes(prev[:16], "little")
        xc = tc = 0
        for j in range(first, first + n):  # Horner: row j weighs s^(n - 1 - (j - first))
            tc = gf_mul(tc, s) ^ int.from_bytes(rows[j].tobytes(), "little")
            xc = gf_mul(xc, s) ^ (bits[j // 8] >> (j % 8)) & 1
        x, t = x ^ xc, t ^ tc
    return x.to_bytes(16, "little") + t.to_bytes(16, "little")


def model_extra_choices(seed: bytes, block: int, blocks: int) -> bytes:
    """The honest receiver's random choices of 128-row blocks block.. (AES-CTR, counter LE)."""
    key = hashlib.sha256(CHOICES_LABEL + seed).digest()[:16]
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(b"".join((block + i).to_bytes(16, "little") for i in range(blocks))) + enc.finalize()


def test_the_model_field_is_the_one_of_the_native_code():
    assert gf_mul(1 << 127, 2) == 0x87
    # X^127 (X^7 + X^2 + X + 1) = X^134 + X^129 + X^128 + X^127, and X^128 = X^7 + X^2 + X + 1
    assert gf_mul(1 << 127, 0x87) == 1 << 127 | 0x87 << 6 ^ 0x87 << 1 ^ 0x87 == 1 << 127 | 0x2049
    a, b = int.from_bytes(os.urandom(16), "little"), int.from_bytes(os.urandom(16), "little")
    assert gf_mul(a, b) == gf_mul(b, a) and gf_mul(a, 1) == a


# --- helpers -------------------------------------------------------------------------------------

def _keys():
    delta = os.urandom(16)
    sender = _native.BaseOtSender(128, os.urandom(64), b"s" * 16)
    receiver = _native.BaseOtReceiver(delta, 128, os.urandom(64 * 128), b"s" * 16)
    k0, k1 = sender.keys(receiver.reply(sender.message()))
    return k0, k1, receiver.keys(), delta


def _rounded(count: int) -> int:
    return -(-count // 128) * 128


def _bits(packed: bytes, m: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(packed, np.uint8), bitorder="little")[:m]


def _pack(bits: np.ndarray) -> np.ndarray:
    return np.packbits(bits.astype(np.uint8), bitorder="little")


def _checked_pair(k: int):
    k0, k1, chosen, delta = _keys()
    seed = os.urandom(16)
    recv = _native.SoftReceiver(k0, k1, k, seed, check=CONTEXT)
    send = _native.SoftSender(chosen, delta, k, recv.setup_message, check=CONTEXT)
    return recv, send, delta, (k0, k1, seed)


def _delta_bit(delta: bytes, i: int) -> int:
    return (delta[i // 8] >> (i % 8)) & 1


# --- honest runs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 4])
def test_honest_checked_calls_pass_and_correlate(k):
    recv, send, delta, _ = _checked_pair(k)
    assert recv.checked and send.checked and not send.failed
    d = np.frombuffer(delta, np.uint8)
    for count in (1, 127, 128, 1000, 1024, CHUNK + 129, 2 * CHUNK, 0):
        choices = np.frombuffer(os.urandom(count // 8 + 1), np.uint8)
        before = recv.index
        u, t = recv.extend(choices, count)
        assert len(u) == (_rounded(count) + EXTRA) * 16 // k + 32
        q = send.extend(u, count)
        assert recv.index == send.index == before + _rounded(count) + EXTRA
        b = _bits(choices.tobytes(), count)
        np.testing.assert_array_equal(q, t ^ (b[:, None] * d[None, :]))
    # the fused calls carry the check too
    domain = 0x77 << 8
    u, h = recv.extend_hash(np.frombuffer(os.urandom(125), np.uint8), 1000, domain)
    h0, h1 = send.extend_hash(u, 1000, domain)
    assert all((a == h0[j]).all() or (a == h1[j]).all() for j, a in enumerate(h))
    u, _ = recv.extend_bits(np.frombuffer(os.urandom(128), np.uint8), 1024, domain)
    send.extend_bits(u, 1024, domain)


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("count", [200, 256])
def test_the_check_bytes_equal_the_python_model(k, count):
    """Known answer: the checked message is the unchecked extension of all its rows (the real
    choices, zeros to the 128-row boundary, then the extra rows' random choices), followed by
    x || t~ as the model computes them; on two calls, so the index enters the hash."""
    k0, k1, chosen, delta = _keys()
    seed = os.urandom(16)
    checked = _native.SoftReceiver(k0, k1, k, seed, check=CONTEXT)
    plain = _native.SoftReceiver(k0, k1, k, seed)
    send = _native.SoftSender(chosen, delta, k, checked.setup_message, check=CONTEXT)
    for _ in range(2):
        index = checked.index
        choices = np.frombuffer(os.urandom(-(-count // 8)), np.uint8)
        u, t = checked.extend(choices, count)
        m = _rounded(count) + EXTRA
        bits = np.zeros(m, np.uint8)
        bits[:count] = _bits(choices.tobytes(), count)
        extra = model_extra_choices(seed, (index + _rounded(count)) // 128, EXTRA // 128)
        bits[_rounded(count):] = _bits(extra, EXTRA)
        full = _pack(bits)
        cols, rows = plain.extend(full, m)
        assert u[:-32] == cols
        np.testing.assert_array_equal(t, rows[:count])
        assert u[-32:] == model_trailer(cols, rows, full.tobytes(), k, index, count)
        send.extend(u, count)


# --- deviating receivers ---------------------------------------------------------------------------

def _forge(k: int, count: int, tamper, guess: int = 0):
    """A malicious receiver's message for a checked call of ``count`` OTs: an unchecked
    extension of all m rows, columns changed by ``tamper(cols, col_len)``, the trailer forged
    from its rows under the tampered message's chi, ``guess`` XORed into t~. Returns (message,
    checked sender, delta, rows, bits)."""
    k0, k1, chosen, delta = _keys()
    plain = _native.SoftReceiver(k0, k1, k, os.urandom(16))
    send = _native.SoftSender(chosen, delta, k, plain.setup_message, check=CONTEXT)
    m = _rounded(count) + EXTRA
    bits = os.urandom(m // 8)
    cols, rows = plain.extend(np.frombuffer(bits, np.uint8), m)
    cols = bytearray(cols)
    tamper(cols, m // 8)
    trailer = bytearray(model_trailer(bytes(cols), rows, bits, k, 0, count))
    t = int.from_bytes(trailer[16:], "little") ^ guess
    return bytes(cols) + trailer[:16] + t.to_bytes(16, "little"), send, delta, cols


def test_an_honest_forgery_passes():
    """The model of the malicious receiver, without tampering, is an honest receiver."""
    for k in (1, 2, 4):
        u, send, _, _ = _forge(k, 300, lambda cols, n: None)
        send.extend(u, 300)


def test_a_flipped_column_passes_only_by_betting_on_its_delta_bit():
    """k = 1, column i's choice vector flipped at every row: q_j = t_j + r_j Delta + Delta_i X^i.
    Betting Delta_i = 0 (no correction) passes iff Delta_i = 0; betting Delta_i = 1 (t~ plus
    (sum_j chi_j) X^i) passes iff Delta_i = 1: one bit per bet, half the time caught."""
    count = 500
    m = _rounded(count) + EXTRA

    def flip(i):
        def tamper(cols, n):
            cols[i * n:(i + 1) * n] = bytes(b ^ 0xFF for b in cols[i * n:(i + 1) * n])
        return tamper

    for i in (0, 1, 63, 64, 127):
        # bet 0
        u, send, delta, _ = _forge(1, count, flip(i))
        if _delta_bit(delta, i):
            with pytest.raises(ValueError, match=FAILED):
                send.extend(u, count)
            assert send.failed
        else:
            send.extend(u, count)
        # bet 1: the weight of an all-ones column, times X^i
        u, send, delta, cols = _forge(1, count, flip(i))
        s = int.from_bytes(hashlib.sha256(_u64(len(LABEL)) + LABEL + CONTEXT + _u64(1) + _u64(0) + _u64(count)
                                          + _u64(0) + bytes(32) + bytes(cols)).digest()[:16], "little")
        ones = 0
        for _ in range(m):
            ones = gf_mul(ones, s) ^ 1
        t = int.from_bytes(u[-16:], "little") ^ gf_mul(ones, 1 << i)
        u = u[:-16] + t.to_bytes(16, "little")
        if _delta_bit(delta, i):
            send.extend(u, count)
        else:
            with pytest.raises(ValueError, match=FAILED):
                send.extend(u, count)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_different_choice_vector_per_group_is_caught(k):
    """Every group (k = 1: column) gets its own r, one row apart: passing would need every
    touched Delta bit guessed (2^-(128/k) at best), so the check fails."""
    def per_group(cols, n):
        for g in range(128 // k):
            cols[g * n + g % n] ^= 1 << (g % 8)

    u, send, _, _ = _forge(k, 1000, per_group)
    with pytest.raises(ValueError, match=FAILED):
        send.extend(u, 1000)
    assert send.failed
    # and the sender refuses every later call, whatever it is sent
    with pytest.raises(ValueError, match="failed its consistency check earlier"):
        send.extend(bytes(len(u)), 1000)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_message_tampered_after_the_fact_is_caught(k):
    """An honest checked message with one bit of a column, of x, or of t~ changed."""
    for where in ("column", "x", "t"):
        recv, send, _, _ = _checked_pair(k)
        u, _ = recv.extend(np.frombuffer(os.urandom(125), np.uint8), 1000)
        bad = bytearray(u)
        bad[{"column": 5, "x": len(u) - 32, "t": len(u) - 1}[where]] ^= 0x10
        with pytest.raises(ValueError, match=FAILED):
            send.extend_hash(bytes(bad), 1000, 0x100)
        assert send.failed


@pytest.mark.parametrize("k", [2, 4])
def test_a_wrong_setup_message_fails_the_first_check(k):
    """Without the check a corrupted setup message only de-correlates the OTs; with it the first
    call fails (the sender's leaves are not the receiver's)."""
    k0, k1, chosen, delta = _keys()
    recv = _native.SoftReceiver(k0, k1, k, os.urandom(16), check=CONTEXT)
    bad = bytearray(recv.setup_message)
    bad[16 * 6] ^= 1  # base OT 3's level sum of side 0
    bad[16 * 7] ^= 1  # and of side 1: whichever the sender opens is wrong (one side only would
    #                   fail iff the sender opens it, a bet on one Delta bit, as with a column)
    send = _native.SoftSender(chosen, delta, k, bytes(bad), check=CONTEXT)
    u, _ = recv.extend(np.frombuffer(os.urandom(125), np.uint8), 1000)
    with pytest.raises(ValueError, match=FAILED):
        send.extend(u, 1000)


def test_check_on_one_side_only_is_a_length_error_and_contexts_must_match():
    k0, k1, chosen, delta = _keys()
    recv = _native.SoftReceiver(k0, k1, 4, os.urandom(16))
    send = _native.SoftSender(chosen, delta, 4, recv.setup_message, check=CONTEXT)
    u, _ = recv.extend(np.frombuffer(os.urandom(16), np.uint8), 128)
    with pytest.raises(ValueError, match="must be"):
        send.extend(u, 128)
    recv = _native.SoftReceiver(k0, k1, 4, os.urandom(16), check=bytes(16))
    send = _native.SoftSender(chosen, delta, 4, recv.setup_message, check=CONTEXT)
    u, _ = recv.extend(np.frombuffer(os.urandom(16), np.uint8), 128)
    with pytest.raises(ValueError, match=FAILED):
        send.extend(u, 128)
    with pytest.raises(ValueError, match="context must be 16 bytes"):
        _native.SoftSender(chosen, delta, 4, recv.setup_message, check=b"short")
