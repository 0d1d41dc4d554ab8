"""Private set intersection against Python's own set intersection: random and adversarial sets,
every output mode, id normalisation, duplicates, multi-column keys (through alignment:
tests/ml/test_data.py), bad frames, a dead peer, and two processes over TLS."""

import importlib.util
import os
import random

import numpy as np
import pytest

from shaper.errors import PartyError
from shaper.net import launch, run_in_memory
from shaper.protocols import psi
from shaper.protocols.psi import ecdh

# ECDH runs in the native extension only; FNP, id packing and matching also run without it
NEEDS_NATIVE = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                  reason="ECDH PSI runs in the native extension only (no Python curve arithmetic)")


def _run(a, b, **options):
    """This file tests ECDH (and FNP): named, since the default is OT-based okvs
    (tests/protocols/test_psi_okvs.py)."""
    options = {"protocol": "ecdh", **options}

    def job(session):
        return psi.intersect(session, a if session.index == 0 else b, **options)

    return run_in_memory(2, job)


def _check_both(a, b, ra, rb):
    expected = set(a) & set(b)
    got_a, got_b = [a[i] for i in ra.indices], [b[i] for i in rb.indices]
    assert got_a == got_b  # the same ids, in the same order, at both parties
    assert set(got_a) == expected and len(got_a) == len(expected)
    assert ra.size == rb.size == len(expected) and ra.peer_size == len(b) and rb.peer_size == len(a)


CASES = {
    "random": ([f"c{i}" for i in random.Random(1).sample(range(3000), 1000)],
               [f"c{i}" for i in random.Random(2).sample(range(3000), 700)]),
    "empty and non-empty": ([], ["x", "y"]),
    "both empty": ([], []),
    "disjoint": (["a", "b", "c"], ["d", "e"]),
    "equal": (["p", "q", "r"], ["r", "q", "p"]),
    "one element each, shared": (["only"], ["only"]),
    "unicode and near misses": (["José", "jose", "Zoë", "北京", "🙂", "a b", ""], ["Zoë", "北京", "🙂", "jose ", "ab", ""]),
}


@NEEDS_NATIVE
@pytest.mark.parametrize("case", list(CASES))
def test_both_parties_learn_the_intersection_in_one_order(case):
    a, b = CASES[case]
    _check_both(a, b, *_run(a, b))


@NEEDS_NATIVE
def test_one_party_learns_and_the_other_learns_nothing():
    a, b = CASES["random"]
    for learner in (0, "party1"):
        ra, rb = _run(a, b, to=learner)
        told, other = (ra, rb) if learner == 0 else (rb, ra)
        mine = a if told is ra else b
        assert set(mine[i] for i in told.indices) == set(a) & set(b) and told.size == len(set(a) & set(b))
        assert other.indices is None and other.size is None and other.peer_size == len(mine)


@NEEDS_NATIVE
def test_cardinality_only():
    a, b = CASES["random"]
    ra, rb = _run(a, b, cardinality_only=True)
    assert ra.indices is None and rb.indices is None and ra.size == rb.size == len(set(a) & set(b))
    ra, rb = _run(a, b, cardinality_only=True, to=1)
    assert ra.size is None and rb.size == len(set(a) & set(b)) and rb.indices is None


@NEEDS_NATIVE
def test_numeric_ids_match_their_text():
    a = [7, np.int64(8), 9.0, "10", 11]
    b = ["7", "8", "9", 10, 12]
    ra, rb = _run(a, b)
    assert sorted(ra.indices.tolist()) == [0, 1, 2, 3] and sorted(rb.indices.tolist()) == [0, 1, 2, 3]
    with pytest.raises(PartyError, match=r"id 0 is 7.5, not an integer"):
        _run([7.5], ["7"])
    with pytest.raises(PartyError, match="boolean"):
        _run([True], ["1"])


@NEEDS_NATIVE
def test_normalisation_options_and_agreement():
    a, b = ["  Alice", "BOB ", "carol"], ["alice", "bob", "dave"]
    ra, _ = _run(a, b)
    assert len(ra.indices) == 0  # exact by default
    ra, _ = _run(a, b, strip=True, casefold=True)
    assert sorted(a[i] for i in ra.indices) == ["  Alice", "BOB "]
    with pytest.raises(PartyError, match="disagree on settings"):
        run_in_memory(2, lambda s: psi.intersect(s, a, strip=s.index == 0))
    with pytest.raises(PartyError, match="disagree on to"):
        run_in_memory(2, lambda s: psi.intersect(s, a, to=s.index))


@NEEDS_NATIVE
def test_duplicates_are_refused_by_name_or_kept_first():
    with pytest.raises(PartyError, match=r"id 'bob' appears more than once \(rows 1 and 3\)"):
        _run(["al", "bob", "cy", "bob"], ["bob"])
    a, b = ["al", "bob", "cy", "bob"], ["bob", "cy"]
    ra, rb = _run(a, b, duplicates="first")
    assert sorted(ra.indices.tolist()) == [1, 2] and len(rb.indices) == 2


def test_duplicates_at_scale_match_a_python_dict():
    """The vectorised check (8-byte digests, byte comparison within equal digests) keeps the first
    row of each id exactly as a dict does, and names the first repeat in row order."""
    from shaper.errors import ConfigError
    from shaper.protocols.psi.items import PackedItems, unique_rows

    rng = random.Random(11)
    ids = [f"u{rng.randrange(30_000)}" for _ in range(50_000)]
    packed = PackedItems.encode(ids, chunk=4096)
    first = {}
    for i, v in enumerate(ids):
        first.setdefault(v, i)
    np.testing.assert_array_equal(unique_rows(packed, "first"), sorted(first.values()))
    assert unique_rows(PackedItems.encode(sorted(first)), "error") is None
    with pytest.raises(ConfigError, match="appears more than once"):
        unique_rows(packed, "error")


def test_packed_items_gather_and_sort_like_python():
    from shaper.protocols.psi.items import PackedItems

    rng = random.Random(12)
    values = ["".join(rng.choice("ab\0é") for _ in range(rng.randrange(6))) for _ in range(3000)]
    packed = PackedItems.encode(values, chunk=700)
    rows = np.array(rng.sample(range(3000), 1200))
    taken = packed.take(rows, chunk=500)
    assert [taken[i] for i in range(len(taken))] == [values[r].encode() for r in rows]
    ordered = rows[packed.sort_order(rows)]
    assert [values[r].encode() for r in ordered] == sorted(values[r].encode() for r in rows)


def test_arrow_columns_pack_like_python_values():
    """An Arrow string column packs to the same bytes as its Python values: in place for ASCII
    (chunked, sliced, empty), through the Python path for other text or with strip/casefold."""
    pa = pytest.importorskip("pyarrow")
    from shaper.protocols.psi.items import Normalise, PackedItems

    ascii_ids = [f"id-{i}" for i in range(5000)] + ["", " x "]
    cases = [pa.chunked_array([ascii_ids[:1000], ascii_ids[1000:]]), pa.array(ascii_ids).slice(7, 3000),
             pa.array(["Zoë", "e\u0301", "ß"]), pa.array([], pa.string())]
    for column in cases:
        for norm in (Normalise(), Normalise(strip=True, casefold=True)):
            fast, slow = PackedItems.encode(column, norm), PackedItems.encode(column.to_pylist(), norm)
            assert [fast[i] for i in range(len(fast))] == [slow[i] for i in range(len(slow))]
            np.testing.assert_array_equal(fast.offsets, slow.offsets)
    in_place = PackedItems.encode(pa.array(ascii_ids).cast(pa.large_string()))
    assert not in_place.data.flags.owndata  # a view of the Arrow buffer, not a copy


def test_item_digests_are_sha256_with_or_without_the_native_core(monkeypatch):
    """kernels.ecc, the face of the curve family: the digests are SHA-256(prefix || item) from the
    native core and from hashlib alike; without the extension a blinding key is a clear error."""
    import hashlib

    from shaper.errors import KernelError
    from shaper.kernels import ecc
    from shaper.protocols.psi.items import PackedItems

    values = ["a", "", "Zoë", "x" * 100, "\0"]
    packed = PackedItems.encode(values)
    expected = b"".join(hashlib.sha256(b"p\0" + v.encode()).digest()[:24] for v in values)
    assert ecc.item_digests(b"p\0", packed.data, packed.offsets, 24) == expected
    empty = PackedItems.encode([])
    assert ecc.item_digests(b"p", empty.data, empty.offsets, 8) == b""
    monkeypatch.setattr(ecc, "_native", None)
    assert ecc.item_digests(b"p\0", packed.data, packed.offsets, 24) == expected
    assert not ecc.available()
    with pytest.raises(KernelError, match="needs shaper's native extension"):
        ecc.blinding_key()


def test_matching_is_exact_when_leading_bytes_collide():
    """Doubly blinded values are matched on all 16 bytes: rows whose first 8 bytes collide (with
    each other or across the parties) do not match unless the whole value does."""
    rng = np.random.default_rng(13)
    peer = rng.integers(0, 256, (5000, 16), dtype=np.uint8)
    peer[100:110, :8] = peer[99, :8]  # eleven peer rows share their first 8 bytes
    own = np.concatenate([peer[[105, 3, 99, 4000]], rng.integers(0, 256, (3000, 16), dtype=np.uint8)])
    own[-1, :8] = peer[99, :8]  # leading bytes of a peer row, different tail
    own = own[rng.permutation(len(own))]
    mine, theirs = ecdh.match(own, peer, block=700)
    expected = {bytes(r) for r in own} & {bytes(r) for r in peer}
    assert len(mine) == len(expected) == 4
    assert all(bytes(own[i]) == bytes(peer[j]) for i, j in zip(mine, theirs))
    assert [bytes(own[i])[:8] for i in mine] == sorted(v[:8] for v in expected)  # by the first 8 bytes


@NEEDS_NATIVE
def test_many_items_across_chunks(monkeypatch):
    monkeypatch.setattr(ecdh, "CHUNK", 1000)  # several messages per direction and a ragged last chunk
    rng = random.Random(3)
    a = [f"id-{i}" for i in rng.sample(range(10**5), 4500)]
    b = [f"id-{i}" for i in rng.sample(range(10**5), 3300)]
    _check_both(a, b, *_run(a, b))
    ra, _ = _run(a, b, cardinality_only=True)
    assert ra.size == len(set(a) & set(b))


@NEEDS_NATIVE
def test_chunks_are_interleaved_so_receive_queues_stay_short(monkeypatch):
    """Each party sends its next chunk and then blinds the peer's next one, so however many chunks
    there are, no receive queue holds more than a few (bounded memory at any set size)."""
    monkeypatch.setattr(ecdh, "CHUNK", 100)
    a, b = [f"q{i}" for i in range(6000)], [f"q{i}" for i in range(3000, 8000)]
    deepest = [0]

    def job(session):
        channel = session._channel(1 - session.index)

        def progress(event):
            queued = sum(len(q) for tag, q in list(channel._queues.items()) if tag.startswith("psi-"))
            deepest[0] = max(deepest[0], queued)

        return psi.intersect(session, a if session.index == 0 else b, progress=progress, protocol="ecdh")

    _check_both(a, b, *run_in_memory(2, job))
    assert deepest[0] <= 6  # of 60 + 50 chunks in flight over the run


@NEEDS_NATIVE
def test_a_hundred_thousand_items():
    a = [str(i) for i in range(100_000)]
    b = [str(i) for i in range(50_000, 150_000)]
    ra, rb = _run(a, b)
    assert ra.size == 50_000 and sorted(int(a[i]) for i in ra.indices) == list(range(50_000, 100_000))
    assert [a[i] for i in ra.indices] == [b[i] for i in rb.indices]
    assert ra.stats["bytes_sent"] < 70 * 100_000 and rb.stats["bytes_sent"] < 70 * 100_000


@NEEDS_NATIVE
def test_invalid_points_from_the_peer_are_refused():
    def job(session):
        if session.index == 0:
            # party 0 is R: party 1 re-blinds its points
            return psi.intersect(session, ["a", "b"], to=0, protocol="ecdh")
        session.exchange(0, {"version": ecdh.VERSION, "to": "party0", "cardinality_only": False, "n": 2,
                             "chunk": ecdh.CHUNK, "settings": "strip=False, casefold=False, columns=1"}, "psi-hello")
        session.exchange(0, "token", "psi-run")
        session.recv_meta(0, "psi-progress")
        bad = bytearray(os.urandom(64))
        bad[0] |= 1  # an odd s never encodes a Ristretto point (random bytes sometimes do)
        bad[32] |= 1
        session.send(0, bytes(bad), "psi-a")
        session.recv_bytes(0, "psi-a")
        return None

    with pytest.raises(PartyError, match="invalid point|point 0 is not a valid"):
        run_in_memory(2, job)


@NEEDS_NATIVE
def test_a_wrong_length_and_a_dead_peer_end_in_clear_errors():
    def short(session):
        if session.index == 0:
            return psi.intersect(session, ["a", "b", "c"], to=0, protocol="ecdh")
        session.exchange(0, {"version": ecdh.VERSION, "to": "party0", "cardinality_only": False, "n": 3,
                             "chunk": ecdh.CHUNK, "settings": "strip=False, casefold=False, columns=1"}, "psi-hello")
        session.exchange(0, "token", "psi-run")
        session.recv_meta(0, "psi-progress")
        session.send(0, b"\x00" * 32, "psi-a")  # one point where three were announced
        session.recv_bytes(0, "psi-a")
        return None

    with pytest.raises(PartyError, match="sent 32 bytes of blinded points, expected 96"):
        run_in_memory(2, short)

    def dies(session):
        if session.index == 1:
            raise RuntimeError("killed")
        return psi.intersect(session, ["a"])

    with pytest.raises(PartyError, match="killed"):
        run_in_memory(2, dies)


def _process_job(session, ids):
    result = psi.intersect(session, ids[session.index], protocol="ecdh")
    return [ids[session.index][i] for i in result.indices]


@NEEDS_NATIVE
def test_two_processes_over_tls():
    ids = ([f"m{i}" for i in range(0, 3000, 3)], [f"m{i}" for i in range(0, 3000, 2)])
    a, b = launch(2, _process_job, ids, timeout=120)
    assert a == b and set(a) == {f"m{i}" for i in range(0, 3000, 6)}


class _Forging:
    """A blinding key whose blinded points (what a party sends) are replaced by ``forge(points)``."""

    def __init__(self, key, forge):
        self.key, self.forge = key, forge

    def hash_blind(self, *args):
        return self.forge(self.key.hash_blind(*args))

    def __getattr__(self, name):
        return getattr(self.key, name)


@NEEDS_NATIVE
@pytest.mark.parametrize("forge, message", [
    (lambda pts: bytes(32) + pts[32:], "invalid point: point 0 is not a valid Ristretto255 encoding \\(or is the identity\\)"),
    (lambda pts: b"\xff" * 31 + b"\x7f" + pts[32:], "invalid point: point 0 is not a valid Ristretto255"),  # >= p
    (lambda pts: pts[:31] + bytes([pts[31] | 0x80]) + pts[32:], "invalid point: point 0 is not a valid"),  # top bit
    (lambda pts: pts[:-1], "sent 95 bytes of blinded points, expected 96"),  # a 31-byte last point
], ids=["identity", "non-canonical", "high-bit", "31-bytes"])
def test_ecdh_refuses_identity_non_canonical_and_short_points_by_name(monkeypatch, forge, message):
    """A peer's blinded points arrive through the PSI receive path: the identity, an encoding of
    a value >= p or with its top bit set, and a 31-byte point are refused, naming the problem."""
    from shaper.protocols.psi import ecdh

    real = ecdh.blinding_key
    monkeypatch.setattr(ecdh, "blinding_key", lambda *a: _Forging(real(*a), forge))
    with pytest.raises(PartyError, match=message):
        _run(["a", "b", "c"], ["b", "c", "d"])


# -- Freedman-Nissim-Pinkas with Paillier ----------------------------------------------------------
FNP = {"protocol": "fnp", "to": 0, "key_bits": 768}


def test_fnp_intersection_cardinality_and_labels_against_python_sets():
    a, b = [f"c{i}" for i in range(0, 90, 2)], [f"c{i}" for i in range(0, 90, 3)]
    expected = set(a) & set(b)
    ra, rb = _run(a, b, **FNP)
    assert {a[i] for i in ra.indices} == expected and ra.size == len(expected) and ra.peer_size == len(b)
    assert rb.indices is None and rb.size is None and rb.peer_size == len(a)
    ra, _ = _run(a, b, **FNP, cardinality_only=True)
    assert ra.indices is None and ra.size == len(expected)

    def labelled(session, order):
        if session.index == 0:
            return psi.intersect(session, a, payload_bytes=12, order=order, **FNP)
        return psi.intersect(session, b, payload_bytes=12, payloads=[f"score:{i}".encode() for i in range(len(b))],
                             order=order, **FNP)

    for order in ("protocol", "id"):  # the payloads follow their rows when the rows are sorted by id
        ra, _ = run_in_memory(2, labelled, order=order)
        got = {a[i]: p.rstrip(b"\0").decode() for i, p in zip(ra.indices, ra.stats["payloads"])}
        assert got == {x: f"score:{b.index(x)}" for x in expected}


def test_fnp_with_ou_every_mode():
    a, b = [f"c{i}" for i in range(0, 60, 2)], [f"c{i}" for i in range(0, 60, 3)]
    expected = set(a) & set(b)
    ou = {**FNP, "key_bits": 1024, "scheme": "ou"}
    ra, rb = _run(a, b, **ou)
    assert {a[i] for i in ra.indices} == expected and rb.indices is None
    ra, _ = _run(a, b, **ou, cardinality_only=True)
    assert ra.size == len(expected)

    def labelled(session):
        pay = {"payloads": [f"#{i}".encode() for i in range(len(b))]} if session.index else {}
        return psi.intersect(session, a if session.index == 0 else b, payload_bytes=8, **ou, **pay)

    ra, _ = run_in_memory(2, labelled)
    assert {a[i]: p.rstrip(b"\0").decode() for i, p in zip(ra.indices, ra.stats["payloads"])} == \
        {x: f"#{b.index(x)}" for x in expected}
    with pytest.raises(PartyError, match="ou plaintext: at most 34 payload bytes"):
        _run(["a"], ["a"], **ou, payload_bytes=40)


@pytest.mark.parametrize("case", ["empty and non-empty", "disjoint", "equal", "one element each, shared"])
def test_fnp_adversarial_sets(case):
    a, b = CASES[case]
    for learner in (0, 1):
        ra, rb = _run(a, b, **{**FNP, "to": learner})
        told, mine = (ra, a) if learner == 0 else (rb, b)
        assert {mine[i] for i in told.indices} == set(a) & set(b)


@pytest.mark.parametrize("case", ["random", "disjoint", "equal", "unicode and near misses"])
def test_fnp_to_both_parties_in_one_order(case):
    """to="both": the client (party 0) tells the server its rows, so both hold the intersection
    in one order; with cardinality_only both learn the size and nothing else."""
    a, b = CASES[case]
    a = a[:300]
    _check_both(a, b, *_run(a, b, **{**FNP, "to": "both"}))
    ra, rb = _run(a, b, **{**FNP, "to": "both"}, cardinality_only=True)
    assert ra.size == rb.size == len(set(a) & set(b)) and ra.indices is None and rb.indices is None


def test_fnp_a_bin_beyond_the_poisson_bound_stops_the_client_by_name(monkeypatch):
    """A bin fuller than the degree n_C fixes (probability 2^-40 for a random set; forced here)
    stops the client: raising the degree would be refused by the server, dropping ids is wrong."""
    from shaper.protocols.psi import fnp

    monkeypatch.setattr(fnp, "bin_capacity", lambda n, bins: 1)
    a, b = [f"k{i}" for i in range(40)], [f"k{i}" for i in range(20, 60)]
    with pytest.raises(PartyError, match="hash to one bin, more than the 1 a bin holds"):
        _run(a, b, **FNP)


_HELLO_SETTINGS = ("strip=False, casefold=False, columns=1, client=party0, mode=intersection, payload_bytes=0, "
                   "key_bits=768, scheme=paillier")


def _client_by_hand(session, declared, degree=None, guesses=()):
    """A deviating FNP client (party 0) that declares ``declared`` ids, announces ``degree``
    (default: what its declared size gives) and fills every bin's padding with the hashes of
    ``guesses`` (ids it wants to test) that land in that bin. Returns the guesses it learned."""
    from shaper.arrays import ints_from_bytes, ints_to_bytes
    from shaper.crypto import paillier
    from shaper.protocols.psi import fnp
    from shaper.protocols.psi.items import PackedItems

    hello = {"version": fnp.VERSION, "to": "party0", "cardinality_only": False, "n": len(declared),
             "chunk": fnp.BINS_PER_MESSAGE, "settings": _HELLO_SETTINGS, "run": None}
    theirs = session.exchange(1, hello, "psi-hello")
    session.exchange(1, "00" * 16, "psi-run")
    n, n_server = len(declared), int(theirs["n"])
    bits, bins = fnp.hash_bits(n, n_server), fnp.bin_count(n)
    L = fnp.bin_capacity(n, bins)
    pk, sk = paillier.keygen(768)
    session.send(1, {"public_key": pk.to_bytes().hex(), "degree": L if degree is None else degree}, "fnp-key")
    mine, where = fnp.digests(PackedItems.encode(declared), bits, bins)
    tested, tested_where = fnp.digests(PackedItems.encode(list(guesses)), bits, bins)
    roots = [[h for h, w in zip(mine, where) if w == b] for b in range(bins)]
    for h, w in zip(tested, tested_where.tolist()):
        if len(roots[w]) < L:
            roots[w].append(h)  # a guess where an honest client puts a dummy
    for b in range(bins):
        roots[b] += [(1 << bits) | (7 + j) for j in range(L - len(roots[b]))]
    coef = fnp.coefficients(np.array(roots, dtype=object), int(pk.n))
    assert session.recv_meta(1, "psi-progress") == {"done": 0}
    session.send(1, ints_to_bytes([int(c) for c in sk.raw_encrypt(coef.ravel().tolist())]), "fnp-coef")
    values = []
    while len(values) < n_server:
        values += sk.raw_decrypt(ints_from_bytes(session.recv_bytes(1, "fnp-result")))
    hits = {v & ((1 << bits) - 1) for v in values}
    return {g for g, h in zip(guesses, tested) if h in hits}, bins * L


def _server(session, items):
    return psi.intersect(session, items, **FNP)


@pytest.mark.parametrize("degree, message", [(0, "bin degree 0, outside 1..256"), (257, "bin degree 257, outside"),
                                             (256, "bin degree 256; its declared 4 ids give degree 19"),
                                             (20, "bin degree 20; its declared 4 ids give degree 19")])
def test_fnp_server_refuses_a_degree_it_did_not_derive(degree, message):
    server_ids = [f"s{i}" for i in range(50)]

    def job(session):
        if session.index == 0:
            return _client_by_hand(session, ["a", "b", "c", "d"], degree=degree)
        return _server(session, server_ids)

    with pytest.raises(PartyError, match=message):
        run_in_memory(2, job)


def test_fnp_an_over_querying_client_learns_no_more_than_its_declared_size_allows():
    """The client declares 4 ids (2 bins of degree 19) and puts guesses for all 300 of the
    server's ids into the padding: it learns some of them (the padding cannot be told from
    roots), but never more than the 38 roots its declared size gives, where announcing degree
    256 would have let it test 512."""
    server_ids = [f"user{i}@example.com" for i in range(300)]
    declared = ["x1", "x2", "x3", "x4"]

    def job(session):
        if session.index == 0:
            return _client_by_hand(session, declared, guesses=server_ids)
        return _server(session, server_ids)

    (learned, roots), _ = run_in_memory(2, job)
    assert roots == 2 * 19
    assert len(declared) < len(learned) <= roots - len(declared)
    assert learned <= set(server_ids)


@NEEDS_NATIVE
def test_fnp_bounds_and_refusals():
    from shaper.protocols.psi import fnp

    assert [fnp.bin_capacity(1 << k, fnp.bin_count(1 << k)) for k in (12, 16, 20)] == [22, 23, 24]
    assert fnp.hash_bits(1 << 16, 1 << 16) == 72 and fnp.hash_bits(10, 10) == 64
    with pytest.raises(PartyError, match="labelled FNP gives the payloads to one party"):
        _run(["a"], ["a"], protocol="fnp", to="both", payload_bytes=4)
    with pytest.raises(PartyError, match="peer runs PSI protocol"):
        run_in_memory(2, lambda s: psi.intersect(s, ["a"], **(FNP if s.index else {"to": 0})))
    with pytest.raises(PartyError, match="at most 87 payload bytes"):
        _run(["a"], ["a"], **FNP, payload_bytes=200)

    def bad_degree(session):
        if session.index == 0:
            session.exchange(1, {"version": fnp.VERSION, "to": "party0", "cardinality_only": False, "n": 1,
                                 "chunk": fnp.BINS_PER_MESSAGE, "settings": "strip=False, casefold=False, columns=1, "
                                 "client=party0, mode=intersection, payload_bytes=0, key_bits=768, scheme=paillier"}, "psi-hello")
            session.exchange(1, "00" * 16, "psi-run")
            session.send(1, {"public_key": "00", "degree": 5}, "fnp-key")
            return None
        return psi.intersect(session, ["a"], **FNP)

    with pytest.raises(PartyError, match="malformed key message"):
        run_in_memory(2, bad_degree)


@pytest.mark.parametrize("victim", [0, 1])
def test_a_killed_fnp_run_resumes_where_the_server_stopped(tmp_path, monkeypatch, victim):
    """The server keeps its evaluations block by block, the client its key pair (both 0600). The
    server (1) dies after saving its first block, or the client (0) dies at its first progress
    event after that; started again, the run resumes from the saved blocks, gives what an
    uninterrupted run gives, and removes its state."""
    from shaper.protocols.psi import fnp

    monkeypatch.setattr(fnp, "BINS_PER_MESSAGE", 8)
    a, b = [f"f{i}" for i in range(0, 150, 2)], [f"f{i}" for i in range(0, 150, 3)]
    results = tmp_path / "party1" / "psi-fnp" / "results.bin"
    events = []

    def job(session, kill):
        def progress(event):
            events.append(event)
            if kill and session.index == victim and results.exists() and results.stat().st_size:
                raise RuntimeError("killed")

        return psi.intersect(session, a if session.index == 0 else b, **{**FNP, "to": "both"},
                             checkpoint_dir=str(tmp_path), resume=True, progress=progress)

    with pytest.raises(PartyError):
        run_in_memory(2, job, True)
    for party in ("party0", "party1"):  # the client's holds its private key
        assert oct((tmp_path / party / "psi-fnp" / "state.json").stat().st_mode & 0o777) == "0o600"
    events.clear()
    ra, rb = run_in_memory(2, job, False)
    resumed = [e["blocks"] for e in events if e.get("event") == "resume"]
    assert len(resumed) == 2 and resumed[0] == resumed[1] >= 1
    assert not [e for e in events if e.get("stage") == "evaluate" and e["done"] <= 8]  # block 0 was not redone
    _check_both(a, b, ra, rb)
    assert not (tmp_path / "party0" / "psi-fnp").exists() and not (tmp_path / "party1" / "psi-fnp").exists()


def test_fnp_coefficients_have_the_roots():
    from shaper.protocols.psi import fnp

    roots = np.array([[3, 5, 7], [2, 2, 11]], dtype=object)
    coef = fnp.coefficients(roots, 1_000_003)
    for b in range(2):
        for r in roots[b]:
            value = (pow(int(r), 3, 1_000_003) + sum(int(c) * pow(int(r), k, 1_000_003) for k, c in enumerate(coef[b])))
            assert value % 1_000_003 == 0
        assert (pow(4, 3) + sum(int(c) * 4 ** k for k, c in enumerate(coef[b]))) % 1_000_003 != 0


@NEEDS_NATIVE
def test_a_killed_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(ecdh, "CHUNK", 500)
    a = [f"r{i}" for i in range(3000)]
    b = [f"r{i}" for i in range(1000, 4500)]
    seen = []

    def job(session, kill_after):
        def progress(event):
            seen.append((session.index, event))
            if session.index == 0 and event.get("stage") == "blind" and event["done"] >= kill_after:
                raise RuntimeError("killed")

        return psi.intersect(session, a if session.index == 0 else b, checkpoint_dir=str(tmp_path), resume=True,
                             order="id", progress=progress)

    with pytest.raises(PartyError, match="killed"):
        run_in_memory(2, job, 1500)  # party 0 (the learner) dies after 3 of the peer's 7 chunks
    state = tmp_path / "party0" / "psi-ecdh"
    assert (state / "peer.bin").stat().st_size == 1500 * ecdh.MATCH
    own_back = (state / "own.bin").stat().st_size // (500 * ecdh.MATCH)  # chunks S had returned (interleaved)
    assert own_back >= 1
    assert oct((state / "state.json").stat().st_mode & 0o777) == "0o600"  # it holds the secret key
    seen.clear()
    ra, rb = run_in_memory(2, job, 10**9)
    assert [e for i, e in seen if i == 0][0] == {"event": "resume", "own_chunks": own_back, "peer_chunks": 3}
    blinded = [e["done"] for i, e in seen if i == 0 and e.get("stage") == "blind"]
    assert blinded[0] == 2000  # chunks 1-3 were not redone
    fresh_a, fresh_b = _run(a, b, order="id")
    assert ra.indices.tolist() == fresh_a.indices.tolist() and rb.indices.tolist() == fresh_b.indices.tolist()
    assert not state.exists()  # a finished run removes its state (and key)
