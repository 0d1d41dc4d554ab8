"""Three-party replicated sharing (Araki et al.) and Bristol Fashion circuits.

Oracles: FIPS-197 vectors and the ``cryptography`` library's AES for ``aes_128.txt``; numpy
uint64 arithmetic for the integer circuits and the ring sharing; the independent gate-by-gate
plaintext evaluator for the layered schedule.
"""

import os
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from shaper.net import launch, run_in_memory
from shaper.circuits import bristol
from shaper.circuits.bristol import CircuitFormatError
from shaper.protocols import replicated

# Copies of ../shared/circuits (unchanged; checked against the published SHA-256 below), so the
# tests do not depend on where the checkout sits; AES-128 is the copy bundled with the package.
CIRCUITS = Path(__file__).resolve().parents[1] / "data" / "circuits"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "circuits"
SHA256 = {
    "aes_128.txt": "40423a0cdaf5d4d34aba872c12660f115dc25c12eea6e24a9304578e79df6d04",
    "adder64.txt": "2af215910deb16674a9c0c9fc08b70dc27a210c3eb678dd9419d98e9154dd5e3",
    "mult64.txt": "f8de307ac23757225d300a5a65db12e72d4eaef2ce0bd307b8c44f24ae007eda",
    "neg64.txt": "78065cfc35998e1e5f4cbd6be4093cae2b68f0c825958f2313ba7eed7e124c8a",
    "zero_equal.txt": "e942f8054c30b3bc8396383a838404c1597d80f5d1ba2d2e28cb212eda4d239f",
}
MASK = (1 << 64) - 1
rng = np.random.default_rng()


def _path(name: str) -> Path:
    if name == "aes_128":
        return bristol.resolve("aes_128.txt")  # bundled in the package
    return CIRCUITS / f"{name}.txt"


def _circuit(name: str) -> bristol.Circuit:
    return bristol.load(_path(name))


@pytest.mark.parametrize("name", sorted(SHA256))
def test_circuit_copies_are_the_published_files(name):
    import hashlib

    path = _path(name.removesuffix(".txt"))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[name]
    if SHARED.is_dir():  # and equal to the shared set beside the checkout, where it is
        assert path.read_bytes() == (SHARED / name).read_bytes()


def _aes(key: bytes, block: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def _run_3pc(circuit, inputs, count):
    def job(session):
        eng = replicated.Replicated3PC(session)
        mine = [vals if session.index == v % 3 else count for v, vals in enumerate(inputs)]
        outs = replicated.evaluate(session, circuit, mine, engine=eng)
        opened = [eng.reveal_wires(o) for o in outs]
        return [bristol.from_bitsliced(rows, count) for rows in opened], eng.rounds, eng.and_gates

    results = run_in_memory(3, job, timeout=120)
    first = results[0]
    for other in results[1:]:  # every party opens the same values
        assert other[0] == first[0]
    return first


FIPS = [
    ("000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"),
    ("2b7e151628aed2a6abf7158809cf4f3c", "3243f6a8885a308d313198a2e0370734", "3925841d02dc09fbdc118597196a0b32"),
]


def test_aes_fips_vectors_and_random_blocks_in_3pc():
    aes = _circuit("aes_128")
    extra = 100  # 102 instances: not a multiple of 64
    keys = [os.urandom(16) for _ in range(extra)]
    blocks = [os.urandom(16) for _ in range(extra)]
    key_ints = [bristol.block_to_int(k) for k, _, _ in FIPS] + [bristol.block_to_int(k) for k in keys]
    pt_ints = [bristol.block_to_int(p) for _, p, _ in FIPS] + [bristol.block_to_int(b) for b in blocks]
    (outs,), rounds, ands = _run_3pc(aes, [key_ints, pt_ints], len(key_ints))
    got = [bristol.int_to_block(v).hex() for v in outs]
    assert got[:2] == [c for _, _, c in FIPS]
    assert got[2:] == [_aes(k, b).hex() for k, b in zip(keys, blocks)]
    assert ands == 6400 and rounds == 60 + 1  # one message per AND layer, then the opening
    assert aes.schedule().depth == 60


@pytest.mark.parametrize("name,fn,arity", [
    ("adder64", lambda a, b: (a + b) & MASK, 2),
    ("mult64", lambda a, b: (a * b) & MASK, 2),
    ("neg64", lambda a: (-a) & MASK, 1),
    ("zero_equal", lambda a: int(a == 0), 1),
])
def test_integer_circuits_against_numpy(name, fn, arity):
    circuit = _circuit(name)
    count = 70
    ops = [rng.integers(0, 2**64, count, dtype=np.uint64) for _ in range(arity)]
    for op in ops:  # edge operands
        op[:4] = [0, 1, 2**63, 2**64 - 1]
    if name == "zero_equal":
        ops[0][5:9] = 0
    ints = [[int(v) for v in op] for op in ops]
    expect = [fn(*vals) for vals in zip(*ints)]
    plain = bristol.evaluate_plain(circuit, ints)[0]
    assert plain == expect
    (shared,), _, ands = _run_3pc(circuit, ints, count)
    assert shared == expect
    assert ands == circuit.and_gates
    # numpy's own uint64 arithmetic agrees with the Python-int oracle
    if name == "adder64":
        assert [int(v) for v in ops[0] + ops[1]] == expect
    if name == "mult64":
        assert [int(v) for v in ops[0] * ops[1]] == expect


def test_schedule_matches_the_plain_evaluator_on_every_circuit():
    """The layered, slot-reusing schedule (run by the 3PC engine) against the file-order
    interpreter, on a circuit with EQ/EQW/MAND gates built here."""
    text = """9 15
2 3 2
1 2

2 1 0 3 5 AND
1 1 1 6 INV
1 1 2 7 EQW
1 1 1 8 EQ
4 2 5 6 3 4 9 10 MAND
2 1 9 10 11 XOR
2 1 11 8 12 XOR
2 1 12 7 13 AND
1 1 13 14 INV
"""
    c = bristol.parse(text, "mixed")
    assert c.counts()["AND"] == 4
    a_vals, b_vals = list(range(8)) * 4, [0, 1, 2, 3] * 8
    plain = bristol.evaluate_plain(c, [a_vals, b_vals])
    # the reference by hand: bits of a (3) and b (2)
    expect_lo = []
    for a, b in zip(a_vals, b_vals):
        a0, a1, a2 = a & 1, a >> 1 & 1, a >> 2 & 1
        b0, b1 = b & 1, b >> 1 & 1
        w5 = a0 & b0
        w6 = 1 - a1
        w7 = a2
        w8 = 1
        w9, w10 = w5 & b0, w6 & b1
        w11 = w9 ^ w10
        w12 = w11 ^ w8
        w13 = w12 & w7
        w14 = 1 - w13
        expect_lo.append(w13 | (w14 << 1))
    assert plain[0] == expect_lo
    (shared,), _, _ = _run_3pc(c, [a_vals, b_vals], len(a_vals))
    assert shared == expect_lo


def test_ring_sharing_against_numpy():
    n = 1000
    u = rng.integers(-(2**40), 2**40, n, dtype=np.int64)
    w = rng.integers(-(2**40), 2**40, n, dtype=np.int64)
    # products below 2^36: the documented wrap-around failure (probability ~|v| / 2^64 per
    # value) stays below 2^-18 for the whole test
    small_u = rng.integers(-(2**20), 2**20, n, dtype=np.int64)
    small_w = rng.integers(-(2**16), 2**16, n, dtype=np.int64)

    def job(session):
        eng = replicated.Replicated3PC(session, frac_bits=0)  # plain ring integers
        su = eng.share(u if session.index == 0 else None, owner=0, shape=(n,))
        sw = eng.share(w if session.index == 1 else None, owner=1, shape=(n,))
        tu = eng.share(small_u if session.index == 2 else None, owner=2, shape=(n,))
        tw = eng.share(small_w if session.index == 0 else None, owner=0, shape=(n,))
        out = {
            "add": eng.reveal_ring(su + sw),
            "sub": eng.reveal_ring(su - sw),
            "neg": eng.reveal_ring(-su),
            "addc": eng.reveal_ring(su + 7),
            "mulc": eng.reveal_ring(su.mul_public(-3)),
            "mul": eng.reveal_ring(eng.mul(su, sw)),
            "trunc": eng.reveal_ring(eng.mul_fixed(tu, tw, 16)),
            "to1": eng.reveal_ring(su, to=1),
        }
        return out

    res = run_in_memory(3, job, timeout=60)
    r0, r1 = res[0], res[1]
    view = lambda a: a.view(np.int64)  # noqa: E731
    np.testing.assert_array_equal(view(r0["add"]), u + w)
    np.testing.assert_array_equal(view(r0["sub"]), u - w)
    np.testing.assert_array_equal(view(r0["neg"]), -u)
    np.testing.assert_array_equal(view(r0["addc"]), u + 7)
    np.testing.assert_array_equal(view(r0["mulc"]), u * -3)
    np.testing.assert_array_equal(r0["mul"], u.view(np.uint64) * w.view(np.uint64))  # mod 2^64
    exact = np.floor_divide(small_u * small_w, 2**16)
    err = view(r0["trunc"]) - exact
    assert set(np.unique(err)) <= {0, 1}  # floor or one more (documented)
    assert r0["to1"] is None and res[2]["to1"] is None
    np.testing.assert_array_equal(view(r1["to1"]), u)
    for r in res[1:]:
        np.testing.assert_array_equal(r["mul"], r0["mul"])


def test_views_are_independent_of_the_secret():
    """Each party's pair, and the AND messages it receives, look uniform whatever the secret:
    bit frequencies for an all-zero and an all-one input stay within 5 sigma of 1/2."""
    and_circuit = bristol.parse("1 3\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n", "and")
    count = 64 * 512

    def job(session, bit):
        eng = replicated.Replicated3PC(session)
        vals = [bit] * count
        a = eng.share_wire_values(vals if session.index == 0 else None, 1, count, owner=0)
        b = eng.share_wire_values(vals if session.index == 0 else None, 1, count, owner=0)
        seen = []
        orig = eng._ring_exchange

        def spy(r):
            got = orig(r)
            seen.append(got.copy())
            return got

        eng._ring_exchange = spy
        out = eng.evaluate(and_circuit, [a, b])[0]
        return a.x, a.a, seen[0], eng.reveal_wires(out)

    def ones_fraction(words):
        return float(np.unpackbits(np.ascontiguousarray(words).view(np.uint8)).mean())

    sigma = 0.5 / np.sqrt(count)
    for bit in (0, 1):
        res = run_in_memory(3, job, bit, timeout=60)
        for party in (1, 2):  # parties that did not own the input
            x, a, msg, opened = res[party]
            for view in (x, a, msg):
                assert abs(ones_fraction(view) - 0.5) < 5 * sigma
        assert ones_fraction(res[0][3]) == bit  # and the result is still right


@pytest.mark.parametrize("text,needle", [
    ("", "three header lines"),
    ("1 3\n2 1 1\n1 1\n", "header says 1 gates"),
    ("1 3\n2 1\n1 1\n\n2 1 0 1 2 AND\n", "for the inputs"),
    ("1 3\n2 1 1\n1 1\n\n2 1 0 7 2 AND\n", "out of range"),
    ("1 3\n2 1 1\n1 1\n\n2 1 0 2 2 AND\n", "read before it is written"),
    ("2 3\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n2 1 0 1 2 XOR\n", "written twice"),
    ("1 3\n2 1 1\n1 1\n\n2 1 0 1 2 NAND\n", "unknown operation 'NAND'"),
    ("1 3\n2 1 1\n1 1\n\n2 1 0 x 2 AND\n", "must be integers"),
    ("1 3\n2 1 1\n1 1\n\n3 1 0 1 1 2 AND\n", "AND takes 2 inputs"),
    ("1 4\n2 1 1\n1 1\n\n2 1 0 1 3 AND\n", "declares 4 wires, but the inputs and the 1 gate lines can write at most 3"),  # wire 2 never written
])
def test_malformed_circuits_are_rejected(text, needle):
    with pytest.raises(CircuitFormatError, match=needle):
        bristol.parse(text, "bad")


def test_bitslicing_round_trip_and_input_checks():
    vals = [0, 1, 2**127, 2**128 - 1] + [int.from_bytes(os.urandom(16), "big") for _ in range(70)]
    rows = bristol.to_bitsliced(vals, 128)
    assert rows.shape == (128, 2)
    assert bristol.from_bitsliced(rows, len(vals)) == vals
    assert bristol.pick_bitsliced(rows, [73, 0, 3, 64]) == [vals[73], vals[0], vals[3], vals[64]]
    with pytest.raises(ValueError, match="index 1 does not fit in 8 bits"):
        bristol.to_bitsliced([1, 256], 8)
    with pytest.raises(ValueError, match="takes 2 input values"):
        bristol.evaluate_plain(_circuit("adder64"), [[1]])


def test_engine_needs_three_parties():
    from shaper.errors import ConfigError

    def job(session):
        with pytest.raises(ConfigError, match="exactly 3 computing parties"):
            replicated.Replicated3PC(session)
        return True

    assert run_in_memory(2, job, timeout=30) == [True, True]


def test_cli_circuit_run_and_aes_cost_over_tls(capsys):
    from shaper.cli import main
    from shaper.jobs import circuit as circuits

    aes = str(_path("aes_128"))
    key, pt, ct = FIPS[1]
    assert main(["circuit", "run", aes, "--local", "3", "--inputs", key, pt]) == 0
    assert capsys.readouterr().out.split() == [ct]
    assert main(["circuit", "run", str(CIRCUITS / "adder64.txt"), "--plain", "--inputs", "0x3", "5"]) == 0
    assert capsys.readouterr().out.split() == ["0000000000000008"]
    assert main(["circuit", "run", "no-such-circuit.txt", "--plain", "--inputs", "1"]) == 2
    assert "no-such-circuit.txt" in capsys.readouterr().err
    assert main(["circuit", "run", aes, "--plain", "--inputs", key]) == 2
    assert "takes 2 input values" in capsys.readouterr().err
    with pytest.raises(ValueError, match="takes 2 input values"):
        circuits.run_circuit(aes, [key], plain=True)
    with pytest.raises(ValueError, match="does not fit in 128 bits"):
        circuits.run_circuit(aes, [key + "00", pt], plain=True)
    with pytest.raises(ValueError, match="not hexadecimal"):
        circuits.run_circuit(aes, ["xyz", pt], plain=True)
    out = launch(3, _aes_cost_job, 256, timeout=120)  # three processes over loopback TLS
    blocks_checked = out[2]["checked"]
    rounds, and_per_block = out[0]["rounds"], out[0]["ands"]  # AND gates of one circuit instance
    bits_per_and = max(8 * r["sent_and_bytes"] / (and_per_block * 256) for r in out)
    assert blocks_checked == 256 and rounds == 60 and and_per_block == 6400
    assert 1.0 <= bits_per_and < 1.05  # one bit per AND per party, plus framing (large here: 4 words)
    ring = launch(3, _ring_product_job, 1000, timeout=120)
    assert ring[2] is True


def _aes_cost_job(session, blocks):
    """AES on random keys (party 0) and plaintexts (party 1): what each party sends during the
    AND layers, the rounds, and party 2's check of every block against the cryptography library."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    aes = bristol.load("aes_128.txt")
    eng = replicated.Replicated3PC(session)
    words = bristol.words_for(blocks)
    mine = np.frombuffer(session.prg.random_bytes(128 * words * 8), dtype=np.uint64).reshape(128, words)
    k = eng.share_wires(mine if session.index == 0 else None, 128, blocks, owner=0)
    p = eng.share_wires(mine if session.index == 1 else None, 128, blocks, owner=1)
    nxt = eng.names[eng.next]
    before = session.stats.peer(nxt).bytes_sent
    (out,) = eng.evaluate(aes, [k, p])
    sent_and = session.stats.peer(nxt).bytes_sent - before
    result = {"rounds": eng.rounds, "ands": eng.and_gates, "sent_and_bytes": sent_and, "checked": 0}
    opened = eng.reveal_wires(out, to=2)
    if session.index in (0, 1):
        session.send(2, mine, tag="aes-check")
        return result
    kk = session.recv_array(0, tag="aes-check", dtype=np.uint64, shape=(128, words))
    pp = session.recv_array(1, tag="aes-check", dtype=np.uint64, shape=(128, words))
    for k_, p_, c_ in zip(*(bristol.from_bitsliced(r, blocks) for r in (kk, pp, opened))):
        enc = Cipher(algorithms.AES(bristol.int_to_block(k_)), modes.ECB()).encryptor()
        assert bristol.int_to_block(c_) == enc.update(bristol.int_to_block(p_)) + enc.finalize()
        result["checked"] += 1
    return result


def _ring_product_job(session, n):
    eng = replicated.Replicated3PC(session, frac_bits=0)
    u = np.arange(n, dtype=np.int64) * 7 - 3
    su = eng.share(u if session.index == 0 else None, owner=0)
    sw = eng.share(u if session.index == 1 else None, owner=1)
    opened = eng.reveal_ring(eng.mul(su, sw), to=2)
    return None if opened is None else bool(np.array_equal(opened, u.view(np.uint64) * u.view(np.uint64)))


def test_inputs_from_an_outside_data_holder():
    """A fourth session member deals shares of its data to the three computing parties and
    learns the result; the parties never see the data in the clear."""
    aes = _circuit("aes_128")
    key, pt, ct = FIPS[0]
    names = ["p0", "p1", "p2", "holder"]

    def job(session):
        if session.name == "holder":
            for value in (key, pt):
                rows = bristol.to_bitsliced([bristol.block_to_int(value)], 128)
                for name, part in zip(names[:3], replicated.deal_bits(rows)):
                    session.send(name, part, tag="rss-in")
            got = [session.recv_array(n, tag="out", dtype=np.uint64) for n in names[:3]]
            rows = got[0][1] ^ got[2][0]  # a_0 = x_2 ^ v (any two parties' pairs determine v)
            return bristol.int_to_block(bristol.from_bitsliced(rows, 1)[0]).hex()
        eng = replicated.Replicated3PC(session, parties=names[:3])
        k = eng.receive_wires("holder", 128, 1)
        p = eng.receive_wires("holder", 128, 1)
        out = eng.evaluate(aes, [k, p])[0]
        session.send("holder", np.stack([out.x, out.a]), tag="out")  # the holder reconstructs
        return None

    results = run_in_memory(names, job, timeout=60)
    assert results[3] == ct


def test_computing_parties_must_be_three_session_members():
    from shaper.errors import ConfigError

    def job(session):
        if session.name == "d":
            with pytest.raises(ConfigError, match="'d' is not one of the computing parties"):
                replicated.Replicated3PC(session, parties=["a", "b", "c"])
        with pytest.raises(ConfigError, match="exactly 3 computing parties"):
            replicated.Replicated3PC(session, parties=["a", "b"])
        return True

    assert run_in_memory(["a", "b", "c", "d"], job, timeout=30) == [True] * 4


def test_keystream_fallback_interoperates_with_the_vaes_one():
    """Party 0 on the VAES keystream (where the CPU has it), parties 1 and 2 on the cryptography
    library's: the zero sharings still cancel, so AES comes out right; and the two streams are
    byte-identical."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from shaper.crypto import prg

    aes = _circuit("aes_128")
    key, pt, ct = FIPS[1]

    def job(session):
        eng = replicated.Replicated3PC(session, native_prf=session.index == 0)
        k = [bristol.block_to_int(key)] if session.index == 0 else 1
        p = [bristol.block_to_int(pt)] if session.index == 1 else 1
        (out,) = replicated.evaluate(session, aes, [k, p], engine=eng)
        rows = eng.reveal_wires(out)
        return bristol.int_to_block(bristol.from_bitsliced(rows, 1)[0]).hex()

    assert run_in_memory(3, job, timeout=60) == [ct] * 3
    key16 = os.urandom(16)
    oracle = Cipher(algorithms.AES(key16), modes.CTR(b"\0" * 16)).encryptor()
    fast, slow = prg.pairwise_stream(key16), prg.Prg(key16)
    for n in (1, 3, 2048, 5000, 7):
        want = np.frombuffer(oracle.update(bytes(8 * n)), dtype="<u8")
        np.testing.assert_array_equal(slow.words(n), want)  # the fallback is AES-128-CTR
        np.testing.assert_array_equal(fast.words(n), want)  # and so is the VAES stream, where present
