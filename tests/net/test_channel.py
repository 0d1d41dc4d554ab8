"""Channel conformance: the same tests over the in-memory transport and over loopback TLS
between real processes (``runner`` fixture).

Failure detection is checked by *what* ends a wait (the error's type and message name the cause:
a dropped connection, a closed session, a failed reader), never by how long it took, so a slow
or loaded machine cannot fail these tests; when a timeout is the point, virtual time checks that
it fires exactly at its deadline and the real clock only that it never fires early.
"""

import json
import re
import time

import numpy as np
import pytest

from shaper.errors import PartyError, PeerTimeout
from shaper.net import NetConfig

from .conftest import VirtualCondition

from . import parties as P


def test_roundtrip_every_kind(runner):
    _, (arrays, metas, blobs) = runner(2, P.roundtrip)
    for sent, got in zip(P.ARRAYS, arrays):
        assert got.dtype == sent.dtype.newbyteorder("<") and got.shape == sent.shape
        np.testing.assert_array_equal(got, sent)
    assert metas == [json.loads(json.dumps(m)) for m in P.METAS]
    assert blobs == P.BLOBS


def test_tags_do_not_mix(runner):
    _, (a, b, c) = runner(2, P.interleave)
    assert a == "first-a" and b == [1, 2] and c == b"later"


def test_large_array_streams_in_chunks(runner):
    nbytes = (200 << 20) if runner.transport == "tls" else (48 << 20)
    (sent_sum, stats), (got_sum, seconds) = runner(2, P.large, nbytes, config=NetConfig(max_frame=1 << 20))
    assert sent_sum == got_sum
    frames = nbytes // (1 << 20)
    assert stats["peers"]["party1"]["bytes_sent"] > nbytes + frames * 16  # every 1 MiB chunk has a header


def test_killed_peer_is_named_quickly(runner, tmp_path):
    report = tmp_path / "report.json"
    if runner.transport == "tls":
        with pytest.raises(PartyError, match="party1.*killed by signal 9"):
            runner(2, P.killed_peer, str(report))
    else:
        runner(2, P.killed_peer, str(report))
    seen = json.loads(report.read_text())
    # A PeerError naming the lost link, not the PeerTimeout the 30 s receive would end in: the
    # dropped connection was noticed (how fast is not measured: it is the reader's next read).
    assert seen["error"] == "PeerError" and "party1" in seen["message"]
    assert "dropped the connection" in seen["message"] or "connection to party 'party1' failed" in seen["message"]


@pytest.mark.parametrize("mode, pattern", [
    ("garbage", "malformed frame from 'party1'"),
    ("oversized", "limit"),
    ("wrong-type", "expected array from party 'party1'.*received bytes"),
])
def test_bad_frames_raise(runner, mode, pattern):
    kind, message = runner(2, P.corrupt, mode, config=NetConfig(timeout=10))[0]
    assert kind == "FrameError"
    assert re.search(pattern, message)


def stall_until_released(session, timeout):
    """Party 0 waits ``timeout`` s for a message party 1 never sends; party 1 stays connected
    until party 0 has given up (so the timeout is the only way the wait can end)."""
    if session.index == 1:
        session.recv(0, "released", timeout=300)
        return None
    t0 = time.monotonic()
    try:
        session.recv(1, "late", timeout=timeout)
        outcome = ("no error", time.monotonic() - t0, "")
    except PeerTimeout as exc:
        outcome = ("PeerTimeout", time.monotonic() - t0, str(exc))
    session.send(1, None, tag="released")
    return outcome


def test_stalled_peer_hits_the_timeout(runner):
    kind, elapsed, message = runner(2, stall_until_released, 1.0)[0]
    assert kind == "PeerTimeout" and elapsed >= 1.0  # never early; exactly on time: below
    assert "party1" in message and "'late'" in message


def test_receive_timeout_fires_at_its_deadline(virtual_time, link):
    """In virtual time: a receive with nothing coming waits exactly its timeout, in one wait
    scheduled for the deadline, then raises."""
    ln = link(NetConfig())
    ln.b._cond = cond = VirtualCondition(virtual_time)
    t0 = virtual_time.now
    with pytest.raises(PeerTimeout, match="no message tagged 'late' from party 'a' within 1.5s"):
        ln.b.recv("late", timeout=1.5)
    assert cond.waits == [1.5] and virtual_time.now == t0 + 1.5


def test_receive_waits_for_a_message_still_in_flight_then_times_out_on_time(virtual_time, link):
    """A message that has arrived but whose latency runs past the deadline is not handed out:
    the receive wakes at the deadline, not at the message's release, and raises."""
    ln = link(NetConfig(latency=5.0))
    t0 = virtual_time.now
    ln.a.send("slow", tag="x")
    ln.wait_arrived(ln.b, "x")
    ln.b._cond = cond = VirtualCondition(virtual_time)
    with pytest.raises(PeerTimeout):
        ln.b.recv("x", timeout=2.0)
    assert cond.waits == [2.0] and virtual_time.now == t0 + 2.0
    assert ln.b.recv("x", timeout=4.0)[0] == "slow"  # released at t0 + 5, within this wait
    assert cond.waits[1:] == [3.0] and virtual_time.now == t0 + 5.0


def test_failing_party_is_the_reported_root_cause(runner):
    with pytest.raises(PartyError) as info:
        runner(3, P.fails, config=NetConfig(timeout=20))
    err = info.value
    assert err.party == "party2" and "boom in party 2" in str(err)
    assert "ValueError" in err.remote_traceback and "parties.py" in err.remote_traceback


def test_graceful_close_is_not_a_crash(runner):
    message, _ = runner(2, P.graceful_close)[0]
    # the peer's CLOSE ended the 20 s wait (a timeout would be a PeerTimeout, not this message)
    assert "has ended the session" in message


def test_collectives_and_shared_randomness(runner):
    results = runner(3, P.collectives)
    (g0, s0, sh0, own0), (g1, s1, sh1, own1), (g2, _, sh2, own2) = results
    assert g0 == {"party1": "party1", "party2": "party2"} and g2 == {"party0": "party0", "party1": "party1"}
    assert s0 == 1 and s1 == 0
    assert sh0 == sh1 and sh2 is None
    assert len({own0, own1, own2}) == 3


def test_statistics(runner):
    (stats0, table0), (stats1, _) = runner(2, P.counting)
    p = stats0["peers"]["party1"]
    assert p["messages_sent"] == 3 and p["messages_received"] == 1
    assert stats1["peers"]["party0"]["messages_received"] == 3
    # 3 x (array head + one chunk of 1000 bytes) with tag "z"
    head = 16 + 1 + (1 + 3 + 1 + 8)
    assert p["bytes_sent"] == 3 * (head + 16 + 1 + 1000)
    assert stats1["peers"]["party0"]["bytes_received"] == p["bytes_sent"]
    assert stats0["rounds"] == 1 and "party1" in table0 and "rounds: 1" in table0


def test_reader_failure_is_reported_not_a_timeout():
    from shaper.net import run_in_memory

    message, _ = run_in_memory(2, P.reader_crash)[0]
    # the reader's own failure ended the 10 s wait (a timeout would be a PeerTimeout, uncaught)
    assert "injected" in message


def test_send_cut_mid_message_poisons_the_link():
    from shaper.net import run_in_memory

    errors = run_in_memory(2, P.broken_send)[0]
    assert errors[0].startswith("PeerError") or "link cut" in errors[0]
    assert "broke during an earlier send" in errors[1]


def test_timeout_is_kept_even_behind_a_shaped_send():
    from shaper.net import run_in_memory

    # 10 MiB at 1.2 Mbit/s is 70 s on the wire (in 1 MiB frames of 7 s each): the job can only
    # end within its 1 s timeout, as a timeout; had the shaped send held the timeout up, the job
    # would complete and nothing would be raised.
    with pytest.raises(PartyError, match="did not finish within 1s"):
        run_in_memory(2, P.slow_sender, config=NetConfig(bandwidth=1.2e6, max_frame=1 << 20), timeout=1)
