"""Sealed links (AES-128-GCM frames keyed inside TLS): round trips, and every kind of tampering
on the wire is caught."""

import os
import socket
import struct
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shaper.errors import FrameError
from shaper.net.sealed import FRAME, TAG, SealedSocket


def _pair():
    a, b = socket.socketpair()
    k1, k2 = os.urandom(16), os.urandom(16)
    return SealedSocket(a, k1, k2, "b"), SealedSocket(b, k2, k1, "a"), a, b, k1


def _read_all(sock, total, step):
    out = bytearray(total)
    view, got = memoryview(out), 0
    while got < total:
        n = sock.recv_into(view[got:], min(step, total - got))
        assert n > 0
        got += n
    return bytes(out)


@pytest.mark.parametrize("size, step", [(1, 1), (1000, 7), (FRAME - 1, 1 << 16), (FRAME, FRAME),
                                        (3 * FRAME + 5, 1 << 20), (2 * FRAME, 100_000)])
def test_round_trip_in_both_directions(size, step):
    left, right, *_ = _pair()
    data = np.random.default_rng(size).bytes(size)
    t = threading.Thread(target=left.sendall, args=(data,))
    t.start()
    assert _read_all(right, size, step) == data
    t.join()
    right.sendall(b"back")
    assert _read_all(left, 4, 4) == b"back"
    left.close()
    assert right.recv_into(bytearray(8)) == 0  # the end of the stream, between frames


def _raw_frame(key, counter, plaintext):
    head = struct.pack(">I", len(plaintext) + TAG)
    return head + AESGCM(key).encrypt(counter.to_bytes(12, "big"), plaintext, head)


def test_a_flipped_bit_is_caught():
    _, right, a, _, key = _pair()
    frame = bytearray(_raw_frame(key, 0, b"hello world"))
    frame[7] ^= 1
    a.sendall(frame)
    with pytest.raises(FrameError, match="failed authentication"):
        right.recv(100)


def test_a_replayed_or_reordered_frame_is_caught():
    _, right, a, _, key = _pair()
    first = _raw_frame(key, 0, b"one")
    a.sendall(first + first)  # the same frame twice: the second carries a stale counter
    assert right.recv(100) == b"one"
    with pytest.raises(FrameError, match="failed authentication"):
        right.recv(100)
    _, right2, a2, _, key2 = _pair()
    a2.sendall(_raw_frame(key2, 1, b"two"))  # frame 0 dropped
    with pytest.raises(FrameError):
        right2.recv(100)


def test_a_frame_under_another_key_or_with_a_bad_length_is_caught():
    _, right, a, _, _ = _pair()
    a.sendall(_raw_frame(os.urandom(16), 0, b"injected"))
    with pytest.raises(FrameError):
        right.recv(100)
    _, right2, a2, _, _ = _pair()
    a2.sendall(struct.pack(">I", FRAME + TAG + 1))
    with pytest.raises(FrameError, match="sealed frame of"):
        right2.recv(100)


def test_a_frame_cut_short_is_an_error_not_a_silent_end():
    _, right, a, _, key = _pair()
    a.sendall(_raw_frame(key, 0, b"complete frame")[:-3])
    a.close()
    with pytest.raises(ConnectionResetError, match="middle of a frame"):
        right.recv(100)
