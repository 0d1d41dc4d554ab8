"""AES-128 in Gentry–Halevi–Smart's packed style, written once against an abstract evaluator
(ghs.md §3 "Slots, encoding and the AES round", §4 "Matrices for AES"; HElib ``misc/aes/homAES.cpp``).

The circuit runs unchanged on the plaintext slot simulator (:class:`~.slots.SlotEvaluator`, the
oracle) and on BGV ciphertexts (:class:`~.scheme.Evaluator`): it only calls ``ev.encode``,
``add``, ``add_plain``, ``mul``, ``mul_plain``, ``frobenius`` and ``automorphism``, all on whole
slot vectors, and it encodes every constant once, in :class:`AesCircuit`'s constructor.

Layout
------
The slots of GF(2)[X]/Φ_m are GF(2^d) values on a hypercube (:mod:`.algebra`); GF(2^8), the AES
field, is embedded in GF(2^d) (8 | d). AES needs a dimension whose order is a multiple of 16, say
ord = 16·r (a *good* one is preferred: its rotations cost one automorphism instead of two). Byte k
of a block (FIPS-197 order: state index k = row + 4·column, which is the byte order of the block)
lies at coordinate e = k·r + s on that dimension, s < r; the other coordinates and s number the
blocks, nslots/16 of them, in increasing slot order. A rotation by -a·r along the dimension
therefore moves every block's byte k + a to byte k at once ("left rotation by a bytes"). With
HElib's hypercubes (dimension 0 of order 16, most significant) this is HElib's layout, byte k of
block j in slot j + k·nslots/16. An algebra with 8 ∤ d or no such dimension is refused.

The round (AddRoundKey first, then 9 full rounds and a last one without MixColumns)
------------------------------------------------------------------------------------
* **SubBytes, inversion** x^254 by the chain x², x³ = x²·x, x¹² = (x³)^4, x¹⁴ = x¹²·x², x¹⁵ = x¹²·x³,
  x²⁴⁰ = (x¹⁵)^16, x²⁵⁴ = x²⁴⁰·x¹⁴: 4 products, multiplicative depth 3, Frobenius maps 1, 2, 4.
* **SubBytes, affine map**: the GF(2)-linear part is the linearised polynomial Σ_{j<8} γ_j·y^(2^j)
  with γ = (05, 09, f9, 25, f4, 01, b5, 8f) (:data:`AFFINE_GAMMA`, checked against the S-box), then
  0x63 is added. Embedded bytes satisfy y^(2^8) = y, so the polynomial works unchanged in GF(2^d).
  It is evaluated baby-step/giant-step over the Frobenius powers: with y_j = y^(2^j) for j < 4
  (y_1 = κ_2(y), y_2 = κ_4(y), y_3 = κ_4(y_1)), z_0 = Σ γ_j·y_j, z_1 = Σ γ_{4+j}^16·y_j and the
  result z_0 + κ_16(z_1) (since (γ^16·y^(2^j))^16 = γ·y^(2^(j+4)) on GF(2^8)): 4 Frobenius maps
  instead of 7, using only the maps 1, 2 and 4 of the inversion; 8 constant products.
* **ShiftRows∘MixColumns** is a GF(2^8)-linear map on each block's 16 bytes: out[k] = Σ_j M[k, j]·in[j],
  M having 4 entries {2, 3, 1, 1} per row at 13 distinct offsets j - k mod 16. It is evaluated
  baby-step/giant-step: out = Σ_b rot_b(Σ_a m_ab ⊙ rot_a(in)), rot_a the left rotation by a bytes
  and m_ab constant byte masks. The sets baby = {0, 2, 5, 7} and giant = {0, 2, 8, 12}
  (:data:`FULL_ROUND_STEPS`) were chosen by exhaustive search: 6 rotations per round (the least
  for 13 offsets: |A|·|B| >= 13), and the last round's ShiftRows (offsets 0, 4, 8, 12) then needs
  only baby {0, 8} and giant {0, 12} (:data:`LAST_ROUND_STEPS`, 2 rotations) with no new keys:
  5 rotation keys (left shifts 2, 5, 7, 8, 12) where HElib's encRowColTran/encRowShift use 8.
  The masks of a bad dimension's rotations (:meth:`.algebra.Algebra.rotation`) are folded into
  m_ab, so the linear layer is one layer of constant products on any dimension.
* **AddRoundKey** adds the round key, expanded in the clear by the key owner, replicated over all
  blocks and encrypted (:func:`pack_round_keys`).

Cost on a good byte dimension (:meth:`AesCircuit.plan` counts them by running the circuit on a
counting evaluator): 40 products, multiplicative depth 30 (3 per round) plus two layers of
constant products per round; per full round 7 Frobenius maps and 6 rotations, in the last one 7
and 2, so 166 key switches. **Key-switching keys: 9** — relinearisation, Frobenius κ_2, κ_4, κ_16
and 5 rotations (ghs.md §4 counts 16 for HElib's circuit: Frobenius 1–7 and 8 rotations). On a
bad dimension every rotation is two automorphisms, so 10 rotation keys.

Also here, for tests and for the key owner: a clear AES-128 in the same (n, 16) byte layout
(:func:`sub_bytes`, :func:`shift_rows`, :func:`mix_columns`, :func:`expand_key`,
:func:`encrypt_reference`), and packing of blocks and round keys into slot vectors.

Security: the circuit reveals nothing beyond what the evaluator does (data-independent operation
sequence). The clear AES here is for reference and key expansion only: table look-ups, not
constant time.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .algebra import Algebra
from .gf2 import clmul, poly_mod

__all__ = [
    "AFFINE_CONSTANT",
    "AFFINE_GAMMA",
    "FULL_ROUND_STEPS",
    "LAST_ROUND_STEPS",
    "MIX_COLUMNS_ROW",
    "SBOX",
    "AesCircuit",
    "AesLayout",
    "aes_layout",
    "encrypt_blocks",
    "encrypt_reference",
    "expand_key",
    "gf256_mul",
    "gf256_pow",
    "linear_layer_matrix",
    "mix_columns",
    "pack_blocks",
    "pack_round_keys",
    "shift_rows",
    "sub_bytes",
    "unpack_blocks",
]

ROUNDS = 10
AES_MODULUS = 0x11B  # Y^8 + Y^4 + Y^3 + Y + 1
AFFINE_GAMMA: tuple[int, ...] = (0x05, 0x09, 0xF9, 0x25, 0xF4, 0x01, 0xB5, 0x8F)
AFFINE_CONSTANT = 0x63
MIX_COLUMNS_ROW: tuple[int, ...] = (2, 3, 1, 1)  # out[r] = 2·s[r] + 3·s[r+1] + s[r+2] + s[r+3]
Steps = tuple[tuple[int, ...], tuple[int, ...]]
# (baby, giant) left byte offsets of the linear layers' baby-step/giant-step evaluation
FULL_ROUND_STEPS: Steps = ((0, 2, 5, 7), (0, 2, 8, 12))
LAST_ROUND_STEPS: Steps = ((0, 8), (0, 12))


# ----------------------------------------------------------------------------------------------
# GF(2^8) and AES-128 in the clear
# ----------------------------------------------------------------------------------------------

def _gf256_mul_scalar(a: int, b: int) -> int:
    return poly_mod(clmul(a, b), AES_MODULUS)


def _gf256_table() -> np.ndarray:
    """(256, 256) uint8 product table from exp/log tables of the generator 3."""
    exp = np.zeros(510, dtype=np.int64)
    log = np.zeros(256, dtype=np.int64)
    x = 1
    for i in range(255):
        exp[i] = exp[i + 255] = x
        log[x] = i
        x = _gf256_mul_scalar(x, 3)
    table = exp[log[:, None] + log[None, :]].astype(np.uint8)
    table[0, :] = 0
    table[:, 0] = 0
    return table


_MUL = _gf256_table()


def gf256_mul(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Elementwise product in the AES field (uint8 arrays or ints in [0, 256), broadcast)."""
    return _MUL[np.asarray(a, dtype=np.uint8), np.asarray(b, dtype=np.uint8)]


def gf256_pow(a: np.ndarray | int, e: int) -> np.ndarray:
    """a^e elementwise in the AES field (e >= 0; 0^0 = 1)."""
    if e < 0:
        raise ValueError(f"gf256_pow: negative exponent {e}")
    a = np.asarray(a, dtype=np.uint8)
    result = np.ones(a.shape, dtype=np.uint8)
    while e:
        if e & 1:
            result = _MUL[result, a]
        a = _MUL[a, a]
        e >>= 1
    return result


def _make_sbox() -> np.ndarray:
    """FIPS-197 §5.1.1: inverse (0 ↦ 0), then b_i ⊕ b_{i+4} ⊕ b_{i+5} ⊕ b_{i+6} ⊕ b_{i+7} ⊕ c_i,
    i.e. b ⊕ rotl(b, 1) ⊕ rotl(b, 2) ⊕ rotl(b, 3) ⊕ rotl(b, 4) ⊕ 0x63."""
    b = gf256_pow(np.arange(256), 254).astype(np.int64)
    out = b.copy()
    for s in range(1, 5):
        out ^= ((b << s) | (b >> (8 - s))) & 0xFF
    return (out ^ AFFINE_CONSTANT).astype(np.uint8)


SBOX = _make_sbox()
SBOX.setflags(write=False)

# ShiftRows: out[r + 4c] = in[r + 4((c + r) mod 4)]
_SHIFT_ROWS_SOURCE = np.array([k % 4 + 4 * ((k // 4 + k % 4) % 4) for k in range(16)], dtype=np.intp)


def _check_state(state: np.ndarray, what: str = "state") -> np.ndarray:
    arr = np.asarray(state)
    if arr.ndim != 2 or arr.shape[1] != 16:
        raise ValueError(f"{what}: AES blocks must be an (n, 16) byte array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" or (arr.size and (int(arr.min()) < 0 or int(arr.max()) > 255)):
        raise ValueError(f"{what}: AES blocks must hold bytes (integers in [0, 256))")
    return arr.astype(np.uint8, copy=False)


def sub_bytes(state: np.ndarray) -> np.ndarray:
    """SubBytes on (n, 16) uint8 blocks (FIPS-197 byte order)."""
    return SBOX[_check_state(state)]


def shift_rows(state: np.ndarray) -> np.ndarray:
    """ShiftRows on (n, 16) uint8 blocks: row r rotates left by r columns."""
    return _check_state(state)[:, _SHIFT_ROWS_SOURCE]


def mix_columns(state: np.ndarray) -> np.ndarray:
    """MixColumns on (n, 16) uint8 blocks: each column times the circulant (2, 3, 1, 1)."""
    s = _check_state(state).reshape(-1, 4, 4)  # (block, column, row)
    out = np.zeros_like(s)
    for i, c in enumerate(MIX_COLUMNS_ROW):
        out ^= gf256_mul(np.roll(s, -i, axis=2), c)
    return out.reshape(-1, 16)


def _key_bytes(key: bytes | np.ndarray | Sequence[int]) -> np.ndarray:
    k = np.frombuffer(key, dtype=np.uint8) if isinstance(key, (bytes, bytearray)) else np.asarray(key)
    if k.shape != (16,) or k.dtype.kind not in "iu" or int(k.min()) < 0 or int(k.max()) > 255:
        raise ValueError(f"an AES-128 key is 16 bytes, got shape {k.shape}")
    return k.astype(np.uint8)


def expand_key(key: bytes | np.ndarray | Sequence[int]) -> np.ndarray:
    """The AES-128 key schedule (FIPS-197 §5.2): (11, 16) uint8 round keys, byte k of round key i
    at [i, k] (same order as the state)."""
    words = [_key_bytes(key)[4 * i: 4 * i + 4].copy() for i in range(4)]
    rcon = 1
    for i in range(4, 4 * (ROUNDS + 1)):
        t = words[i - 1].copy()
        if i % 4 == 0:
            t = SBOX[np.roll(t, -1)]
            t[0] ^= rcon
            rcon = _gf256_mul_scalar(rcon, 2)
        words.append(words[i - 4] ^ t)
    return np.concatenate(words).reshape(ROUNDS + 1, 16)


def encrypt_reference(blocks: np.ndarray, key: bytes | np.ndarray | Sequence[int],
                      trace: list[np.ndarray] | None = None) -> np.ndarray:
    """AES-128 encryption of (n, 16) uint8 blocks in the clear. With ``trace``, the state after
    the initial AddRoundKey and after each of the 10 rounds is appended (11 arrays)."""
    keys = expand_key(key)
    state = _check_state(blocks, "blocks") ^ keys[0]
    if trace is not None:
        trace.append(state)
    for i in range(1, ROUNDS + 1):
        state = shift_rows(sub_bytes(state))
        if i < ROUNDS:
            state = mix_columns(state)
        state = state ^ keys[i]
        if trace is not None:
            trace.append(state)
    return state


def linear_layer_matrix(last: bool = False) -> np.ndarray:
    """(16, 16) uint8 matrix M over GF(2^8) of MixColumns∘ShiftRows (ShiftRows alone if ``last``):
    out[k] = Σ_j M[k, j]·in[j] for one block."""
    unit = np.eye(16, dtype=np.uint8)  # row j = e_j, so the images are the columns of M
    images = shift_rows(unit) if last else mix_columns(shift_rows(unit))
    return np.ascontiguousarray(images.T)


def _bsgs_masks(matrix: np.ndarray, steps: Steps) -> dict[tuple[int, int], np.ndarray]:
    """Byte masks m_ab (16,) uint8 with out = Σ_b rot_b(Σ_a m_ab ⊙ rot_a(in)), rot_a(v)[k] = v[k + a]:
    out[k] = Σ m_ab[k + b]·in[k + a + b], so entry M[k, j] goes to m_ab[k + b] for the first
    (a, b) with a + b ≡ j - k (mod 16)."""
    baby, giant = steps
    masks: dict[tuple[int, int], np.ndarray] = {}
    for k, j in zip(*np.nonzero(matrix)):
        offset = (int(j) - int(k)) % 16
        pair = next(((a, b) for b in giant for a in baby if (a + b) % 16 == offset), None)
        if pair is None:
            raise AssertionError(f"steps {steps} do not reach byte offset {offset}")
        masks.setdefault(pair, np.zeros(16, dtype=np.uint8))[(int(k) + pair[1]) % 16] = matrix[k, j]
    return masks


# ----------------------------------------------------------------------------------------------
# layout and packing
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class AesLayout:
    """Where AES bytes sit in the slots of an algebra (build it with :func:`aes_layout`).

    ``dim``: the hypercube dimension holding a block's bytes; ``stride`` r = ord_dim / 16 (byte k
    at coordinate k·r + s); ``nblocks`` = nslots / 16; ``slots`` (nblocks, 16) int64: the slot of
    byte k of block j; ``byte_of_slot`` (nslots,) int64: the byte index every slot holds.
    """

    algebra: Algebra
    dim: int
    stride: int
    nblocks: int
    slots: np.ndarray
    byte_of_slot: np.ndarray

    def rotation_amount(self, left_bytes: int) -> int:
        """The rotation along ``dim`` (value at e moves to e + amount) that moves byte k + a of
        every block to byte k: -a·r mod ord."""
        return (-left_bytes * self.stride) % self.algebra.ords[self.dim]


@lru_cache(maxsize=16)
def aes_layout(alg: Algebra) -> AesLayout:
    """The AES layout of an algebra: the byte dimension is the first good dimension whose order
    is a multiple of 16, failing that the first bad one. ValueError if 8 ∤ d (GF(2^8) does not
    embed) or no dimension's order is a multiple of 16."""
    if alg.d % 8:
        raise ValueError(f"AES needs 8 | d so that GF(2^8) embeds in the slots; m = {alg.m} has d = {alg.d}")
    candidates = [i for i, o in enumerate(alg.ords) if o % 16 == 0]
    if not candidates:
        raise ValueError(f"AES needs a hypercube dimension of order divisible by 16 for a block's 16 bytes; "
                         f"m = {alg.m} has dimensions of orders {alg.ords}")
    dim = next((i for i in candidates if alg.good[i]), candidates[0])
    order = alg.ords[dim]
    stride = order // 16
    e = alg.exponents[:, dim]
    first = np.flatnonzero(e < stride)  # byte 0 of every block, ascending slot index
    dim_weight = int(np.prod(alg.ords[dim + 1:], dtype=np.int64))
    slots = first[:, None] + (np.arange(16, dtype=np.int64) * stride * dim_weight)[None, :]
    byte_of_slot = (e // stride).astype(np.int64)
    for arr in (slots, byte_of_slot):
        arr.setflags(write=False)
    return AesLayout(alg, dim, stride, int(first.size), slots, byte_of_slot)


def pack_blocks(blocks: np.ndarray, alg: Algebra) -> np.ndarray:
    """(n, 16) uint8 blocks -> slot values (uint64, (nslots,)) in the AES layout, n <= nblocks;
    the slots of blocks n.. hold 0."""
    lay = aes_layout(alg)
    b = _check_state(blocks, "blocks")
    if b.shape[0] > lay.nblocks:
        raise ValueError(f"{b.shape[0]} blocks do not fit: m = {alg.m} holds {lay.nblocks} AES blocks")
    bytes_in_slots = np.zeros(alg.nslots, dtype=np.uint8)
    bytes_in_slots[lay.slots[: b.shape[0]]] = b
    return alg.embed(bytes_in_slots)


def unpack_blocks(values: np.ndarray, alg: Algebra, n: int) -> np.ndarray:
    """Slot values (uint64, (nslots,)) -> the first n blocks, (n, 16) uint8; ValueError if a value
    is not in GF(2^8)."""
    lay = aes_layout(alg)
    if not 0 <= n <= lay.nblocks:
        raise ValueError(f"cannot unpack {n} blocks: m = {alg.m} holds {lay.nblocks} AES blocks")
    v = np.asarray(values)
    if v.shape != (alg.nslots,):
        raise ValueError(f"slot vector must have shape ({alg.nslots},), got {v.shape}")
    return alg.extract(v[lay.slots[:n]])


def pack_round_keys(key: bytes | np.ndarray | Sequence[int], alg: Algebra) -> list[np.ndarray]:
    """The 11 expanded round keys, each replicated over every block: 11 slot vectors (uint64,
    (nslots,)) for the key owner to encrypt."""
    lay = aes_layout(alg)
    return [pack_blocks(np.broadcast_to(rk, (lay.nblocks, 16)), alg) for rk in expand_key(key)]


# ----------------------------------------------------------------------------------------------
# the circuit
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _LinearLayer:
    """A baby-step/giant-step linear layer in slot space: the baby automorphisms (Z_v = κ_v(x)),
    then per giant term (w, groups) the sum κ_w(Σ_group P_group ⊙ Σ_{v ∈ group} Z_v)."""

    baby: tuple[int, ...]
    giant: tuple[tuple[int, tuple[tuple[tuple[int, ...], Any], ...]], ...]


class AesCircuit:
    """AES-128 on one evaluator, its constants encoded once (here, in the constructor).

    ``ev`` needs ``algebra`` and the methods encode, add, add_plain, mul, mul_plain, frobenius and
    automorphism (:class:`~.slots.SlotEvaluator`, :class:`~.scheme.Evaluator`). Operands are
    whatever the evaluator takes: ciphertexts, or for tests the simulator's slot vectors.
    """

    def __init__(self, ev: Any) -> None:
        self.ev = ev
        self.algebra: Algebra = ev.algebra
        self.layout = aes_layout(self.algebra)
        alg = self.algebra
        self._encoded: dict[bytes, Any] = {}

        def scalar(byte: int) -> Any:
            return self._encode(alg.embed(np.full(alg.nslots, byte, dtype=np.uint8)))

        gamma = np.array(AFFINE_GAMMA, dtype=np.uint8)
        self._gamma_low = [scalar(int(c)) for c in gamma[:4]]
        self._gamma_high = [scalar(int(c)) for c in gf256_pow(gamma[4:], 16)]  # (γ^16)^16 = γ
        self._affine_constant = scalar(AFFINE_CONSTANT)
        self._full = self._linear_layer(linear_layer_matrix(last=False), FULL_ROUND_STEPS)
        self._last = self._linear_layer(linear_layer_matrix(last=True), LAST_ROUND_STEPS)

    def _encode(self, values: np.ndarray) -> Any:
        """One plaintext per distinct slot vector."""
        key = np.ascontiguousarray(values, dtype=np.uint64).tobytes()
        if key not in self._encoded:
            self._encoded[key] = self.ev.encode(np.asarray(values, dtype=np.uint64))
        return self._encoded[key]

    def _linear_layer(self, matrix: np.ndarray, steps: Steps) -> _LinearLayer:
        alg, lay, f = self.algebra, self.layout, self.algebra.field
        ones = np.ones(alg.nslots, dtype=np.uint64)
        masks = _bsgs_masks(matrix, steps)
        baby_terms: dict[int, list[tuple[int, np.ndarray]]] = {}
        for a in steps[0]:
            # κ_v(x·M) = κ_v(x)·κ_v(M): move each rotation mask to the target side, so that it
            # merges with m_ab and the baby automorphisms act on x itself
            baby_terms[a] = [(v, ones if mask is None else alg.automorphism_on_slots(v, mask))
                             for v, mask in alg.rotation(lay.dim, lay.rotation_amount(a))]
        baby_autos = sorted({v for terms in baby_terms.values() for v, _ in terms})
        giant = []
        for b in steps[1]:
            if not any(pair[1] == b for pair in masks):
                continue
            for w, source_mask in alg.rotation(lay.dim, lay.rotation_amount(b)):
                per_auto: dict[int, np.ndarray] = {}
                for a in steps[0]:
                    mab = masks.get((a, b))
                    if mab is None:
                        continue
                    coeff = alg.embed(mab[lay.byte_of_slot])
                    if source_mask is not None:
                        coeff = f.mul(coeff, source_mask)
                    for v, target_mask in baby_terms[a]:
                        c = f.mul(coeff, target_mask)
                        per_auto[v] = f.add(per_auto[v], c) if v in per_auto else c
                groups: dict[bytes, tuple[list[int], np.ndarray]] = {}
                for v in baby_autos:
                    c = per_auto.get(v)
                    if c is None or not c.any():
                        continue
                    groups.setdefault(c.tobytes(), ([], c))[0].append(v)
                if groups:
                    giant.append((int(w), tuple((tuple(vs), self._encode(c)) for vs, c in groups.values())))
        return _LinearLayer(tuple(int(v) for v in baby_autos), tuple(giant))

    # -- the pieces ---------------------------------------------------------------------------
    def inverse(self, x: Any) -> Any:
        """x^254 slotwise (the GF(2^8) inverse, 0 ↦ 0): 4 products, depth 3, Frobenius 1, 2, 4."""
        ev = self.ev
        x2 = ev.frobenius(x, 1)
        x3 = ev.mul(x2, x)
        x12 = ev.frobenius(x3, 2)
        x14 = ev.mul(x12, x2)
        x15 = ev.mul(x12, x3)
        x240 = ev.frobenius(x15, 4)
        return ev.mul(x240, x14)

    def affine(self, y: Any) -> Any:
        """The S-box's affine map Σ_j γ_j·y^(2^j) + 0x63 slotwise: Frobenius 1, 2, 2, 4 and 8
        constant products."""
        ev = self.ev
        y1, y2 = _frobenius_maps(ev, y, (1, 2))
        powers = [y, y1, y2, ev.frobenius(y1, 2)]  # y^(2^j), j < 4
        low = _sum(ev, [ev.mul_plain(p, c) for p, c in zip(powers, self._gamma_low)])
        high = _sum(ev, [ev.mul_plain(p, c) for p, c in zip(powers, self._gamma_high)])
        return ev.add_plain(ev.add(low, ev.frobenius(high, 4)), self._affine_constant)

    def sub_bytes(self, x: Any) -> Any:
        """SubBytes on every byte of every block."""
        return self.affine(self.inverse(x))

    def _apply_linear(self, layer: _LinearLayer, x: Any) -> Any:
        ev = self.ev
        z = dict(zip(layer.baby, _automorphisms(ev, x, layer.baby), strict=True))
        terms = []
        for w, groups in layer.giant:
            acc = _sum(ev, [ev.mul_plain(_sum(ev, [z[v] for v in vs]), p) for vs, p in groups])
            terms.append(acc if w == 1 else ev.automorphism(acc, w))
        return _sum(ev, terms)

    def shift_rows_mix_columns(self, x: Any) -> Any:
        """MixColumns∘ShiftRows on every block (a full round's linear layer)."""
        return self._apply_linear(self._full, x)

    def shift_rows(self, x: Any) -> Any:
        """ShiftRows on every block (the last round's linear layer)."""
        return self._apply_linear(self._last, x)

    def round(self, x: Any, round_key: Any, last: bool = False) -> Any:
        """One AES round: SubBytes, ShiftRows, MixColumns unless ``last``, AddRoundKey."""
        y = self.sub_bytes(x)
        y = self.shift_rows(y) if last else self.shift_rows_mix_columns(y)
        return self.ev.add(y, round_key)

    def encrypt(self, state: Any, round_keys: Sequence[Any], trace: list[Any] | None = None) -> Any:
        """AES-128 of every block in ``state`` under the 11 round-key operands (:func:`pack_round_keys`,
        encrypted or encoded). With ``trace``, the state after the initial AddRoundKey and after
        each round is appended (11 operands)."""
        if len(round_keys) != ROUNDS + 1:
            raise ValueError(f"AES-128 needs {ROUNDS + 1} round keys, got {len(round_keys)}")
        x = self.ev.add(state, round_keys[0])
        if trace is not None:
            trace.append(x)
        for i in range(1, ROUNDS + 1):
            x = self.round(x, round_keys[i], last=i == ROUNDS)
            if trace is not None:
                trace.append(x)
        return x

    # -- costs --------------------------------------------------------------------------------
    def plan(self) -> dict[str, Any]:
        """What :meth:`encrypt` does, counted by running it on a counting evaluator over the same
        algebra: products, constant products (``mul_plain``), additions, Frobenius maps and other
        automorphisms (each a key switch), the multiplicative depth and the depth in constant
        products, and ``automorphisms``: the sorted distinct u of every κ_u used (Frobenius maps
        as u = 2^j mod m), so that key generation can make exactly those keys plus the
        relinearisation key (``key_switching_keys``)."""
        counter = _CountingEvaluator(self.algebra)
        circuit = AesCircuit(counter)
        fresh = _Trace(0, 0)
        out = circuit.encrypt(fresh, [fresh] * (ROUNDS + 1))
        c = counter.counts
        autos = sorted(counter.autos)
        return {
            "blocks": self.layout.nblocks,
            "byte_dimension": self.layout.dim,
            "byte_dimension_good": self.algebra.good[self.layout.dim],
            "multiplications": c["mul"],
            "constant_multiplications": c["mul_plain"],
            "additions": c["add"],
            "plaintext_additions": c["add_plain"],
            "frobenius": c["frobenius"],
            "rotation_automorphisms": c["automorphism"],
            "key_switches": c["mul"] + c["frobenius"] + c["automorphism"],
            "depth": out.depth,
            "constant_depth": out.const_depth,
            "frobenius_exponents": sorted(counter.frobenius_exponents),
            "rotation_u": sorted(counter.rotation_autos),
            "automorphisms": autos,
            "key_switching_keys": len(autos) + 1,
            "encoded_constants": len(self._encoded),
        }


def _automorphisms(ev: Any, x: Any, us: Sequence[int]) -> list[Any]:
    """κ_u(x) for every u (u = 1: x itself), hoisted where the evaluator can (one key-switching
    decomposition of x for all of them)."""
    if hasattr(ev, "automorphisms"):
        return list(ev.automorphisms(x, list(us)))
    return [x if u == 1 else ev.automorphism(x, u) for u in us]


def _frobenius_maps(ev: Any, x: Any, js: Sequence[int]) -> list[Any]:
    """x^(2^j) slotwise for every j, hoisted where the evaluator can."""
    if hasattr(ev, "automorphisms"):
        return list(ev.automorphisms(x, [pow(2, j, ev.algebra.m) for j in js]))
    return [ev.frobenius(x, j) for j in js]


def _sum(ev: Any, xs: Sequence[Any]) -> Any:
    out = xs[0]
    for x in xs[1:]:
        out = ev.add(out, x)
    return out


_CIRCUITS: weakref.WeakKeyDictionary[Any, AesCircuit] = weakref.WeakKeyDictionary()


def encrypt_blocks(ev: Any, state: Any, round_keys: Sequence[Any]) -> Any:
    """AES-128 of the packed blocks in ``state`` (an operand of ``ev``) under 11 round-key
    operands; the evaluator's :class:`AesCircuit` (its encoded constants) is made once and kept
    while ``ev`` lives."""
    try:
        circuit = _CIRCUITS.get(ev)
    except TypeError:  # not weakly referenceable
        circuit = None
    if circuit is None:
        circuit = AesCircuit(ev)
        try:
            _CIRCUITS[ev] = circuit
        except TypeError:
            pass
    return circuit.encrypt(state, round_keys)


# ----------------------------------------------------------------------------------------------
# the counting evaluator behind AesCircuit.plan
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Trace:
    depth: int        # multiplicative depth
    const_depth: int  # layers of constant products


class _CountingEvaluator:
    """Evaluator stand-in whose operands are depths: counts every operation and the κ_u used."""

    def __init__(self, alg: Algebra) -> None:
        self.algebra = alg
        self.counts = {k: 0 for k in ("mul", "mul_plain", "add", "add_plain", "frobenius", "automorphism")}
        self.autos: set[int] = set()
        self.frobenius_exponents: set[int] = set()
        self.rotation_autos: set[int] = set()

    def encode(self, slots: np.ndarray) -> None:
        return None

    def add(self, x: _Trace, y: _Trace) -> _Trace:
        self.counts["add"] += 1
        return _Trace(max(x.depth, y.depth), max(x.const_depth, y.const_depth))

    def add_plain(self, x: _Trace, p: Any) -> _Trace:
        self.counts["add_plain"] += 1
        return x

    def mul(self, x: _Trace, y: _Trace) -> _Trace:
        self.counts["mul"] += 1
        return _Trace(max(x.depth, y.depth) + 1, max(x.const_depth, y.const_depth))

    def mul_plain(self, x: _Trace, p: Any) -> _Trace:
        self.counts["mul_plain"] += 1
        return _Trace(x.depth, x.const_depth + 1)

    def frobenius(self, x: _Trace, j: int) -> _Trace:
        j %= self.algebra.d
        if j:
            self.counts["frobenius"] += 1
            self.frobenius_exponents.add(j)
            self.autos.add(pow(2, j, self.algebra.m))
        return x

    def automorphism(self, x: _Trace, u: int) -> _Trace:
        u %= self.algebra.m
        if u != 1:
            self.counts["automorphism"] += 1
            self.rotation_autos.add(u)
            self.autos.add(u)
        return x
