"""Channel conformance: the same tests over the in-memory transport and over loopback TLS
between real processes (``runner`` fixture)."""

import json
import re

import numpy as np
import pytest

from shaper.errors import PartyError
from shaper.net import NetConfig

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
    assert seen["error"] == "PeerError" and "party1" in seen["message"]
    assert seen["elapsed"] < 5  # detected on the dropped connection, not after the 30 s timeout


@pytest.mark.parametrize("mode, pattern", [
    ("garbage", "malformed frame from 'party1'"),
    ("oversized", "limit"),
    ("wrong-type", "expected array from party 'party1'.*received bytes"),
])
def test_bad_frames_raise(runner, mode, pattern):
    kind, message = runner(2, P.corrupt, mode, config=NetConfig(timeout=10))[0]
    assert kind == "FrameError"
    assert re.search(pattern, message)


def test_stalled_peer_hits_the_timeout(runner):
    kind, elapsed, message = runner(2, P.stall, 1.0)[0]
    assert kind == "PeerTimeout" and 1.0 <= elapsed < 2.0
    assert "party1" in message and "'late'" in message


def test_failing_party_is_the_reported_root_cause(runner):
    with pytest.raises(PartyError) as info:
        runner(3, P.fails, config=NetConfig(timeout=20))
    err = info.value
    assert err.party == "party2" and "boom in party 2" in str(err)
    assert "ValueError" in err.remote_traceback and "parties.py" in err.remote_traceback


def test_graceful_close_is_not_a_crash(runner):
    message, elapsed = runner(2, P.graceful_close)[0]
    assert "has ended the session" in message and elapsed < 5


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

    message, elapsed = run_in_memory(2, P.reader_crash)[0]
    assert "injected" in message and elapsed < 2


def test_send_cut_mid_message_poisons_the_link():
    from shaper.net import run_in_memory

    errors = run_in_memory(2, P.broken_send)[0]
    assert errors[0].startswith("PeerError") or "link cut" in errors[0]
    assert "broke during an earlier send" in errors[1]


def test_timeout_is_kept_even_behind_a_shaped_send():
    import time

    from shaper.net import run_in_memory

    t0 = time.monotonic()
    with pytest.raises(PartyError, match="did not finish"):
        run_in_memory(2, P.slow_sender, config=NetConfig(bandwidth=8e6), timeout=1)
    assert time.monotonic() - t0 < 5
