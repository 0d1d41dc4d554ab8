"""Sealed links (AES-128-GCM frames keyed inside TLS): round trips, and every kind of tampering
on the wire is caught."""

import os
import socket
import struct
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shaper.errors import FrameError, PeerError
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


@pytest.mark.parametrize("length", [0, 15, TAG, FRAME + TAG + 1, (1 << 20) + 17, (1 << 32) - 1])
def test_a_length_field_outside_the_frame_sizes_is_refused_by_name(length):
    """15 bytes cannot hold the 16-byte tag; 16 would be an empty frame (which would read as the
    end of the stream); 2^20 + 17 is one byte over the largest frame. Each is refused from the
    length alone: nothing is read or allocated for its body."""
    _, right, a, _, key = _pair()
    a.sendall(struct.pack(">I", length) + bytes(64))
    with pytest.raises(FrameError, match=f"sealed frame of {length} bytes from party 'a'"):
        right.recv(100)


def test_an_empty_frame_never_reads_as_the_end_of_the_stream():
    _, right, a, _, key = _pair()
    a.sendall(_raw_frame(key, 0, b""))  # authentic, but no sender makes one
    with pytest.raises(FrameError, match="sealed frame of 16 bytes"):
        right.recv_into(bytearray(8))


def test_a_frame_replayed_later_in_the_stream_is_caught():
    _, right, a, _, key = _pair()
    first, second = _raw_frame(key, 0, b"one"), _raw_frame(key, 1, b"two")
    a.sendall(first + second + first)  # frame 0 again after frame 1
    assert right.recv(100) == b"one" and right.recv(100) == b"two"
    with pytest.raises(FrameError, match="from party 'a' failed authentication"):
        right.recv(100)


def test_a_frame_reflected_back_to_its_sender_is_caught():
    """A frame this end sent, played back to it: the other direction has its own key."""
    left, right, a, b, _ = _pair()
    left.sendall(b"to the right")
    frame = b.recv(4 + 12 + TAG)  # the frame as it crossed the wire, taken off it
    b.sendall(frame)  # ... and played back to the left end
    with pytest.raises(FrameError, match="from party 'b' failed authentication"):
        left.recv(100)


@pytest.mark.parametrize("cut, where", [(2, "its length: 2 of 4"), (-3, "its body")])
def test_a_frame_cut_short_is_a_named_error_not_a_silent_end(cut, where):
    _, right, a, _, key = _pair()
    a.sendall(_raw_frame(key, 0, b"complete frame")[:cut])
    a.close()
    with pytest.raises(PeerError, match=f"party 'a' dropped the connection in the middle of a sealed frame \\({where}"):
        right.recv(100)
