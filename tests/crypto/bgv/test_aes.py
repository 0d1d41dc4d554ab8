"""Homomorphic AES-128 in GHS's packed layout (ghs.md §3, §4) on the plaintext slot simulator.

Oracles from outside first: FIPS-197 Appendix A.1/B/C.1 vectors (including Appendix B's round-1
intermediate states) and the ``cryptography`` package's AES-ECB; the S-box from its bit-level
definition; γ re-derived by solving the Moore system. Then the circuit on the simulator: every
round's state against the clear round, each step (inversion, affine map, the linear layers) on its
own, the layout on HElib's and on the greedy hypercubes, refusals by name, and the operation
counts of :meth:`AesCircuit.plan` against what a run actually calls."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from shaper.crypto.bgv import aes
from shaper.crypto.bgv.algebra import HELIB_AES_GENS, algebra
from shaper.crypto.bgv.slots import SlotEvaluator, rotate

FIPS_B_KEY = "2b7e151628aed2a6abf7158809cf4f3c"
FIPS_B_PLAIN = "3243f6a8885a308d313198a2e0370734"
FIPS_B_CIPHER = "3925841d02dc09fbdc118597196a0b32"
FIPS_C1_KEY = "000102030405060708090a0b0c0d0e0f"
FIPS_C1_PLAIN = "00112233445566778899aabbccddeeff"
FIPS_C1_CIPHER = "69c4e0d86a7b0430d8cdb78070b4c55a"

# (m, HElib generators or None for the greedy hypercube): what the layout has to cope with
RINGS = {
    "257": (257, None),              # 16 slots, one bad dimension of order 16: 1 block
    "4369": (4369, None),            # greedy: orders 128 (bad), 2 (bad): stride 8, 16 blocks
    "4369-helib": (4369, HELIB_AES_GENS[4369]),    # 16 (good), 16 (bad): HElib's layout
    "53261": (53261, None),          # greedy: 240 (good), 8 (bad): stride 15, 120 blocks
    "53261-helib": (53261, HELIB_AES_GENS[53261]),  # 16 (good), 12 (good), 10 (bad): 120 blocks
}


def _hex(s: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(s), dtype=np.uint8)


def _alg(name: str):
    m, gens = RINGS[name]
    return algebra(m, gens)


def _ecb(key: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    enc = Cipher(algorithms.AES(bytes(key)), modes.ECB()).encryptor()
    return np.frombuffer(enc.update(blocks.tobytes()) + enc.finalize(), dtype=np.uint8).reshape(-1, 16)


class _Recorder:
    """A SlotEvaluator that records every call (name, argument) — to compare with plan() and to
    catch encoding during evaluation."""

    def __init__(self, alg) -> None:
        self.inner = SlotEvaluator(alg)
        self.algebra = alg
        self.calls: list[tuple[str, int | None]] = []

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)

        def call(*args):
            arg = args[1] if name in ("frobenius", "automorphism") else None
            self.calls.append((name, arg))
            return method(*args)

        return call

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)


# ---------------------------------------------------------------------------------------------
# GF(2^8) and the clear reference
# ---------------------------------------------------------------------------------------------


def _sbox_from_bits(x: int) -> int:
    """FIPS-197 §5.1.1 literally: inverse by search, then b'_i = b_i ⊕ b_{i+4} ⊕ b_{i+5} ⊕ b_{i+6}
    ⊕ b_{i+7} ⊕ c_i."""
    inv = next((y for y in range(1, 256) if int(aes.gf256_mul(x, y)) == 1), 0)
    out = 0
    for i in range(8):
        bit = (inv >> i) ^ (inv >> (i + 4) % 8) ^ (inv >> (i + 5) % 8) ^ (inv >> (i + 6) % 8) ^ (inv >> (i + 7) % 8)
        out |= ((bit ^ (0x63 >> i)) & 1) << i
    return out


def test_sbox_matches_its_bitwise_definition_and_fips_values():
    assert [int(v) for v in aes.SBOX] == [_sbox_from_bits(x) for x in range(256)]
    assert (aes.SBOX[0x00], aes.SBOX[0x01], aes.SBOX[0x53], aes.SBOX[0xFF]) == (0x63, 0x7C, 0xED, 0x16)
    assert sorted(aes.SBOX.tolist()) == list(range(256))


def test_gf256_mul_is_the_aes_field_product():
    assert int(aes.gf256_mul(0x57, 0x83)) == 0xC1  # FIPS-197 §4.2
    assert int(aes.gf256_mul(0x57, 0x13)) == 0xFE  # §4.2.1
    x = np.arange(256, dtype=np.uint8)
    assert (aes.gf256_mul(x[1:], aes.gf256_pow(x[1:], 254)) == 1).all()


def test_inversion_chain_computes_x_to_the_254():
    x = np.arange(256, dtype=np.uint8)
    x2 = aes.gf256_pow(x, 2)
    x3 = aes.gf256_mul(x2, x)
    x12 = aes.gf256_pow(x3, 4)
    x14 = aes.gf256_mul(x12, x2)
    x15 = aes.gf256_mul(x12, x3)
    x240 = aes.gf256_pow(x15, 16)
    assert (aes.gf256_mul(x240, x14) == aes.gf256_pow(x, 254)).all()


def _solve_gf256(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Gaussian elimination over GF(2^8): the x with a @ x = b (a square, invertible)."""
    a, b = a.copy(), b.copy()
    n = len(b)
    for col in range(n):
        piv = next(r for r in range(col, n) if a[r, col])
        a[[col, piv]], b[[col, piv]] = a[[piv, col]], b[[piv, col]]
        inv = aes.gf256_pow(a[col, col], 254)
        a[col], b[col] = aes.gf256_mul(a[col], inv), aes.gf256_mul(b[col], inv)
        for r in range(n):
            if r != col and a[r, col]:
                f = a[r, col]
                a[r] ^= aes.gf256_mul(a[col], f)
                b[r] ^= aes.gf256_mul(b[col], f)
    return b


def test_affine_gamma_solves_the_moore_system_and_gives_the_sbox():
    # the GF(2)-linear part A of the affine map on the basis Y^i, from the S-box itself:
    # S(x) = A(x^-1) + 0x63, so A(Y^i) = S((Y^i)^-1) + 0x63
    basis = np.array([1 << i for i in range(8)], dtype=np.uint8)
    images = aes.SBOX[aes.gf256_pow(basis, 254)] ^ np.uint8(0x63)
    moore = np.stack([aes.gf256_pow(basis, 1 << j) for j in range(8)], axis=1)  # [i, j] = (Y^i)^(2^j)
    gamma = _solve_gf256(moore, images)
    assert tuple(int(g) for g in gamma) == aes.AFFINE_GAMMA == (0x05, 0x09, 0xF9, 0x25, 0xF4, 0x01, 0xB5, 0x8F)
    y = aes.gf256_pow(np.arange(256), 254)
    lin = np.zeros(256, dtype=np.uint8)
    for j, g in enumerate(aes.AFFINE_GAMMA):
        lin ^= aes.gf256_mul(g, aes.gf256_pow(y, 1 << j))
    assert (lin ^ 0x63 == aes.SBOX).all()


def test_reference_matches_fips197_appendix_b_round_by_round():
    key, plain = _hex(FIPS_B_KEY), _hex(FIPS_B_PLAIN)[None, :]
    trace: list[np.ndarray] = []
    out = aes.encrypt_reference(plain, key, trace)
    assert out[0].tobytes().hex() == FIPS_B_CIPHER
    # Appendix B, round 1: start, after SubBytes, ShiftRows, MixColumns; round key 1; start of round 2
    assert trace[0][0].tobytes().hex() == "193de3bea0f4e22b9ac68d2ae9f84808"
    s = aes.sub_bytes(trace[0])
    assert s[0].tobytes().hex() == "d42711aee0bf98f1b8b45de51e415230"
    s = aes.shift_rows(s)
    assert s[0].tobytes().hex() == "d4bf5d30e0b452aeb84111f11e2798e5"
    s = aes.mix_columns(s)
    assert s[0].tobytes().hex() == "046681e5e0cb199a48f8d37a2806264c"
    keys = aes.expand_key(key)
    assert keys[1].tobytes().hex() == "a0fafe1788542cb123a339392a6c7605"
    assert keys[10].tobytes().hex() == "d014f9a8c9ee2589e13f0cc8b6630ca6"  # Appendix A.1
    assert trace[1][0].tobytes().hex() == "a49c7ff2689f352b6b5bea43026a5049"
    assert len(trace) == 11


def test_reference_matches_fips197_c1_and_cryptography_on_random_blocks():
    out = aes.encrypt_reference(_hex(FIPS_C1_PLAIN)[None, :], _hex(FIPS_C1_KEY))
    assert out[0].tobytes().hex() == FIPS_C1_CIPHER
    rng = np.random.default_rng(7)
    for _ in range(4):
        key = rng.integers(0, 256, 16, dtype=np.uint8)
        blocks = rng.integers(0, 256, (50, 16), dtype=np.uint8)
        assert (aes.encrypt_reference(blocks, key) == _ecb(key, blocks)).all()


def test_linear_layer_steps_reach_every_offset_with_five_rotation_keys():
    for last, steps, nrot in ((False, aes.FULL_ROUND_STEPS, 6), (True, aes.LAST_ROUND_STEPS, 2)):
        matrix = aes.linear_layer_matrix(last)
        k, j = np.nonzero(matrix)
        offsets = set(((j - k) % 16).tolist())
        baby, giant = steps
        assert offsets <= {(a + b) % 16 for a in baby for b in giant}
        assert len(baby) + len(giant) - 2 == nrot
        assert len(offsets) == (4 if last else 13)
    # the last round needs no rotation the full rounds do not already have
    full = set(aes.FULL_ROUND_STEPS[0] + aes.FULL_ROUND_STEPS[1]) - {0}
    assert set(aes.LAST_ROUND_STEPS[0] + aes.LAST_ROUND_STEPS[1]) - {0} <= full
    assert full == {2, 5, 7, 8, 12}
    # the masks recombine to the matrix
    for last, steps in ((False, aes.FULL_ROUND_STEPS), (True, aes.LAST_ROUND_STEPS)):
        rebuilt = np.zeros((16, 16), dtype=np.uint8)
        for (a, b), mask in aes._bsgs_masks(aes.linear_layer_matrix(last), steps).items():
            for k in range(16):
                rebuilt[k, (k + a + b) % 16] ^= mask[(k + b) % 16]
        assert (rebuilt == aes.linear_layer_matrix(last)).all()


# ---------------------------------------------------------------------------------------------
# layout and packing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, dim, good, stride, nblocks", [
    ("257", 0, False, 1, 1),
    ("4369", 0, False, 8, 16),
    ("4369-helib", 0, True, 1, 16),
    ("53261", 0, True, 15, 120),
    ("53261-helib", 0, True, 1, 120),
])
def test_layout_puts_a_blocks_bytes_on_a_dimension_of_order_16r(name, dim, good, stride, nblocks):
    alg = _alg(name)
    lay = aes.aes_layout(alg)
    assert (lay.dim, alg.good[lay.dim], lay.stride, lay.nblocks) == (dim, good, stride, nblocks)
    assert lay.nblocks * 16 == alg.nslots
    assert sorted(lay.slots.ravel().tolist()) == list(range(alg.nslots))  # every slot used once
    e = alg.exponents[lay.slots]  # (nblocks, 16, ndims)
    assert (e[:, :, lay.dim] == np.arange(16)[None, :] * stride + e[:, :1, lay.dim]).all()
    others = [i for i in range(alg.ndims) if i != lay.dim]
    assert (e[:, :, others] == e[:, :1, others]).all()  # a block's bytes differ on the byte dimension only
    assert (lay.byte_of_slot[lay.slots] == np.arange(16)[None, :]).all()


def test_layout_on_helib_hypercubes_is_helibs_slot_j_plus_k_nslots_over_16():
    for name in ("4369-helib", "53261-helib"):
        alg = _alg(name)
        n = alg.nslots // 16
        expected = np.arange(n)[:, None] + np.arange(16)[None, :] * n
        assert (aes.aes_layout(alg).slots == expected).all()


def test_refuses_an_algebra_whose_d_is_not_a_multiple_of_8():
    alg = algebra(1271)
    assert alg.d == 20
    with pytest.raises(ValueError, match=r"8 \| d.*m = 1271 has d = 20"):
        aes.aes_layout(alg)
    with pytest.raises(ValueError, match="8 | d"):
        aes.AesCircuit(SlotEvaluator(alg))


def test_refuses_an_algebra_without_a_dimension_of_order_divisible_by_16():
    alg = algebra(17)  # d = 8, two slots
    with pytest.raises(ValueError, match=r"order divisible by 16.*m = 17 has dimensions of orders \(2,\)"):
        aes.pack_blocks(np.zeros((1, 16), dtype=np.uint8), alg)


def test_pack_and_unpack_round_trip_with_zero_unused_blocks():
    alg = _alg("4369")
    rng = np.random.default_rng(3)
    blocks = rng.integers(0, 256, (5, 16), dtype=np.uint8)
    values = aes.pack_blocks(blocks, alg)
    assert values.dtype == np.uint64 and values.shape == (alg.nslots,)
    assert (aes.unpack_blocks(values, alg, 5) == blocks).all()
    assert (aes.unpack_blocks(values, alg, 16)[5:] == 0).all()
    with pytest.raises(ValueError, match="17 blocks do not fit: m = 4369 holds 16"):
        aes.pack_blocks(np.zeros((17, 16), dtype=np.uint8), alg)
    with pytest.raises(ValueError, match=r"\(n, 16\)"):
        aes.pack_blocks(np.zeros((2, 15), dtype=np.uint8), alg)
    with pytest.raises(ValueError, match="not in the image of GF"):
        aes.unpack_blocks(np.full(alg.nslots, 2, dtype=np.uint64), alg, 1)


def test_round_keys_are_the_expanded_key_in_every_block():
    alg = _alg("53261")
    key = _hex(FIPS_B_KEY)
    packed = aes.pack_round_keys(key, alg)
    assert len(packed) == 11
    expanded = aes.expand_key(key)
    for i, v in enumerate(packed):
        assert (aes.unpack_blocks(v, alg, 120) == expanded[i][None, :]).all()
    with pytest.raises(ValueError, match="16 bytes"):
        aes.pack_round_keys(b"short", alg)


# ---------------------------------------------------------------------------------------------
# the circuit on the simulator
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["257", "4369", "4369-helib"])
def test_fips197_vectors_through_the_slot_circuit(name):
    alg = _alg(name)
    ev = SlotEvaluator(alg)
    for key, plain, cipher in ((FIPS_C1_KEY, FIPS_C1_PLAIN, FIPS_C1_CIPHER), (FIPS_B_KEY, FIPS_B_PLAIN, FIPS_B_CIPHER)):
        nblocks = aes.aes_layout(alg).nblocks
        blocks = np.broadcast_to(_hex(plain), (nblocks, 16))
        keys = [ev.encode(k) for k in aes.pack_round_keys(_hex(key), alg)]
        out = aes.encrypt_blocks(ev, aes.pack_blocks(blocks, alg), keys)
        got = aes.unpack_blocks(out, alg, nblocks)
        assert all(row.tobytes().hex() == cipher for row in got)


@pytest.mark.parametrize("name", ["4369", "4369-helib", "53261", "53261-helib"])
def test_random_blocks_match_cryptography_aes_ecb(name):
    alg = _alg(name)
    ev = SlotEvaluator(alg)
    circuit = aes.AesCircuit(ev)
    rng = np.random.default_rng(sum(map(ord, name)))
    nblocks = circuit.layout.nblocks
    for n in (nblocks, nblocks // 2 + 1):  # full and partly filled
        key = rng.integers(0, 256, 16, dtype=np.uint8)
        blocks = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        out = circuit.encrypt(aes.pack_blocks(blocks, alg), aes.pack_round_keys(key, alg))
        assert (aes.unpack_blocks(out, alg, n) == _ecb(key, blocks)).all()


@pytest.mark.parametrize("name", ["257", "4369", "53261-helib"])
def test_every_round_state_equals_the_clear_round(name):
    alg = _alg(name)
    circuit = aes.AesCircuit(SlotEvaluator(alg))
    n = circuit.layout.nblocks
    rng = np.random.default_rng(11)
    key = rng.integers(0, 256, 16, dtype=np.uint8)
    blocks = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    clear: list[np.ndarray] = []
    aes.encrypt_reference(blocks, key, clear)
    slots: list[np.ndarray] = []
    circuit.encrypt(aes.pack_blocks(blocks, alg), aes.pack_round_keys(key, alg), slots)
    assert len(slots) == len(clear) == 11
    for i, (s, c) in enumerate(zip(slots, clear)):
        assert (aes.unpack_blocks(s, alg, n) == c).all(), f"round {i}"


@pytest.mark.parametrize("name", ["257", "4369", "4369-helib", "53261"])
def test_each_step_equals_its_clear_counterpart(name):
    alg = _alg(name)
    circuit = aes.AesCircuit(SlotEvaluator(alg))
    n = circuit.layout.nblocks
    state = np.random.default_rng(5).integers(0, 256, (n, 16), dtype=np.uint8)
    x = aes.pack_blocks(state, alg)

    def run(op):
        return aes.unpack_blocks(op(x), alg, n)

    assert (run(circuit.inverse) == aes.gf256_pow(state, 254)).all()
    assert (run(circuit.sub_bytes) == aes.sub_bytes(state)).all()
    assert (run(circuit.shift_rows) == aes.shift_rows(state)).all()
    assert (run(circuit.shift_rows_mix_columns) == aes.mix_columns(aes.shift_rows(state))).all()
    y = aes.gf256_pow(state, 254)
    assert (aes.unpack_blocks(circuit.affine(aes.pack_blocks(y, alg)), alg, n) == aes.sub_bytes(state)).all()


@pytest.mark.parametrize("name", ["4369", "53261"])
def test_sbox_of_all_256_bytes_through_the_slot_path(name):
    alg = _alg(name)
    circuit = aes.AesCircuit(SlotEvaluator(alg))
    n = circuit.layout.nblocks
    everything = np.resize(np.arange(256, dtype=np.uint8), (n, 16))
    out = aes.unpack_blocks(circuit.sub_bytes(aes.pack_blocks(everything, alg)), alg, n)
    assert (out == aes.SBOX[everything]).all()
    assert set(everything.ravel().tolist()) == set(range(256))


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_linear_layers_agree_with_the_clear_ones_on_any_state(block):
    alg = _alg("257")  # the bad dimension: rotation masks folded into the layer's masks
    circuit = aes.AesCircuit(SlotEvaluator(alg))
    state = np.frombuffer(block, dtype=np.uint8)[None, :]
    x = aes.pack_blocks(state, alg)
    expected = aes.mix_columns(aes.shift_rows(state))
    assert (aes.unpack_blocks(circuit.shift_rows_mix_columns(x), alg, 1) == expected).all()
    assert (aes.unpack_blocks(circuit.shift_rows(x), alg, 1) == aes.shift_rows(state)).all()


def test_left_rotation_by_a_bytes_is_the_rotation_slots_rotate_makes():
    for name in ("257", "4369", "53261"):
        alg = _alg(name)
        lay = aes.aes_layout(alg)
        ev = SlotEvaluator(alg)
        state = np.random.default_rng(2).integers(0, 256, (lay.nblocks, 16), dtype=np.uint8)
        for a in (1, 5, 12):
            out = rotate(ev, aes.pack_blocks(state, alg), lay.dim, lay.rotation_amount(a))
            assert (aes.unpack_blocks(out, alg, lay.nblocks) == np.roll(state, -a, axis=1)).all()


def test_evaluation_encodes_nothing_and_the_circuit_is_made_once_per_evaluator():
    alg = _alg("4369")
    ev = _Recorder(alg)
    keys = aes.pack_round_keys(_hex(FIPS_C1_KEY), alg)
    x = aes.pack_blocks(np.zeros((16, 16), dtype=np.uint8), alg)
    aes.encrypt_blocks(ev, x, keys)
    encodes = ev.count("encode")
    assert encodes > 0
    aes.encrypt_blocks(ev, x, keys)
    assert ev.count("encode") == encodes  # the second run reuses the first run's plaintexts
    circuit = aes.AesCircuit(ev)
    before = ev.count("encode")
    circuit.encrypt(x, keys)
    assert ev.count("encode") == before


def test_round_key_count_is_checked():
    alg = _alg("257")
    with pytest.raises(ValueError, match="needs 11 round keys, got 10"):
        aes.AesCircuit(SlotEvaluator(alg)).encrypt(np.zeros(16, dtype=np.uint64), [np.zeros(16, dtype=np.uint64)] * 10)


# ---------------------------------------------------------------------------------------------
# the plan: counts and the key-switching keys
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["257", "4369", "53261", "53261-helib"])
def test_plan_counts_what_a_run_calls_and_names_every_automorphism(name):
    alg = _alg(name)
    ev = _Recorder(alg)
    circuit = aes.AesCircuit(ev)
    plan = circuit.plan()
    ev.calls.clear()
    keys = aes.pack_round_keys(_hex(FIPS_B_KEY), alg)
    circuit.encrypt(aes.pack_blocks(np.zeros((1, 16), dtype=np.uint8), alg), keys)
    assert ev.count("encode") == 0
    assert plan["multiplications"] == ev.count("mul") == 40
    assert plan["constant_multiplications"] == ev.count("mul_plain")
    assert plan["additions"] == ev.count("add")
    assert plan["plaintext_additions"] == ev.count("add_plain") == 10
    assert plan["frobenius"] == ev.count("frobenius") == 70
    assert plan["rotation_automorphisms"] == ev.count("automorphism")
    used = {pow(2, j, alg.m) for n, j in ev.calls if n == "frobenius"} | {u for n, u in ev.calls if n == "automorphism"}
    assert set(plan["automorphisms"]) == used and 1 not in used
    assert plan["frobenius_exponents"] == [1, 2, 4]
    assert plan["depth"] == 30
    assert plan["constant_depth"] == 20
    assert plan["key_switching_keys"] == len(plan["automorphisms"]) + 1


@pytest.mark.parametrize("name", ["53261", "53261-helib", "4369-helib"])
def test_plan_on_a_good_byte_dimension_needs_nine_keys(name):
    alg = _alg(name)
    lay = aes.aes_layout(alg)
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()
    g, r = alg.gens[lay.dim], lay.stride
    # left rotation by a bytes = rotation by -a·r = κ_u with u = g^(a·r)
    assert plan["rotation_u"] == sorted(pow(g, a * r, alg.m) for a in (2, 5, 7, 8, 12))
    assert plan["automorphisms"] == sorted([2, 4, 16] + plan["rotation_u"])
    assert plan["key_switching_keys"] == 9
    assert plan["rotation_automorphisms"] == 9 * 6 + 2
    assert plan["key_switches"] == 40 + 70 + 56
    assert plan["constant_multiplications"] == 10 * 8 + 9 * 12 + 4
    assert plan["blocks"] == lay.nblocks


def test_plan_on_a_bad_byte_dimension_has_two_automorphisms_per_rotation():
    plan = aes.AesCircuit(SlotEvaluator(_alg("257"))).plan()
    assert len(plan["rotation_u"]) == 10
    assert plan["key_switching_keys"] == 14
    assert plan["depth"] == 30 and plan["constant_depth"] == 20  # masks folded: no extra layer


# ---------------------------------------------------------------------------------------------
# the same circuit on BGV ciphertexts
# ---------------------------------------------------------------------------------------------


def test_the_same_circuit_runs_on_bgv_ciphertexts_for_two_rounds():
    scheme = pytest.importorskip("shaper.crypto.bgv.scheme")
    params = pytest.importorskip("shaper.crypto.bgv.params").named("test-257")  # 14 levels: 3 rounds fit
    alg = algebra(params.m)
    keys = scheme.keygen(params, aes.AesCircuit(SlotEvaluator(alg)).plan()["automorphisms"])
    ev = scheme.Evaluator(params, keys.relin, keys.galois)
    circuit = aes.AesCircuit(ev)
    rng = np.random.default_rng(257)
    key = rng.integers(0, 256, 16, dtype=np.uint8)
    blocks = rng.integers(0, 256, (1, 16), dtype=np.uint8)
    clear: list[np.ndarray] = []
    aes.encrypt_reference(blocks, key, clear)

    def encrypt(values):
        return scheme.encrypt(keys.public, ev.encode(values))

    round_keys = [encrypt(v) for v in aes.pack_round_keys(key, alg)]
    x = ev.add(encrypt(aes.pack_blocks(blocks, alg)), round_keys[0])
    for i in (1, 2):
        x = circuit.round(x, round_keys[i])
        assert (aes.unpack_blocks(scheme.decrypt(keys.secret, x), alg, 1) == clear[i]).all(), f"round {i}"
