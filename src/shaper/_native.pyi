"""Type stubs for the Rust extension ``shaper._native`` (native/src: lib.rs assembles py/*.rs).

Values are 2-D ``uint64`` arrays, one row per value holding its little-endian 64-bit words
(``Context.words`` of them), reduced modulo the context's modulus; exponents are rows of
little-endian words of any width. With ``mont=True`` (and ``to_mont``/``from_mont``/``mont_mul``)
values are instead rows of the *Montgomery storage layout*: ``Context.mont_width`` words holding
x*R mod m in the engine's own digits, in [0, 2m), checked on the way in; ciphertexts kept this
way between operations cost no conversion. Every kernel releases the GIL and runs on the extension's
thread pool. Exponentiations are constant time in the exponent values.
"""

from typing import Literal, Sequence

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

def set_threads(threads: int) -> None:
    """Size of the native thread pool (>= 1)."""

def threads() -> int:
    """Threads of the native thread pool (default: available cores)."""

def ifma_available() -> bool:
    """True when the CPU supports AVX-512F and AVX-512 IFMA."""

class CombTable:
    """Fixed-base comb table (entries base^(d * 2^(window * i)), Montgomery form)."""

    @property
    def window(self) -> int: ...
    @property
    def windows(self) -> int: ...
    @property
    def nbytes(self) -> int: ...

class Context:
    """Montgomery context for one odd modulus (3 <= m < 2^8192) on one engine."""

    def __init__(self, modulus: U64, engine: Literal["auto", "ifma", "portable"] = "auto") -> None: ...
    @property
    def words(self) -> int: ...
    @property
    def mont_width(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def engine(self) -> Literal["ifma", "portable"]: ...
    def powmod_same(self, bases: U64, exponent: U64, mont: bool = False) -> U64:
        """``b ** exponent mod m`` for every row."""
    def powmod(self, bases: U64, exponents: U64, mont: bool = False) -> U64:
        """``b_i ** e_i mod m``; one exponent row per base."""
    def mulmod(self, a: U64, b: U64) -> U64:
        """``a_i * b_i mod m``."""
    def to_mont(self, values: U64) -> U64:
        """Canonical rows into the Montgomery storage layout."""
    def from_mont(self, values: U64) -> U64:
        """Montgomery storage rows back to canonical rows."""
    def mont_mul(self, a: U64, b: U64) -> U64:
        """``a_i * b_i`` of Montgomery storage rows, in the same layout (one product each)."""
    def prod_rows(self, values: U64, indices: I64, indptr: I64, mont: bool = False) -> U64:
        """CSR gather-product: row r is the product of ``values[indices[indptr[r]:indptr[r+1]]]``."""
    def horner(self, columns: npt.NDArray[np.uint64], shift_bits: int) -> U64:
        """Columns (k, count, words): ``acc = col[k-1]; acc = acc**(2**shift) * col[j]``, j = k-2..0."""
    def horner_multiexp(self, bases: npt.NDArray[np.uint64], exponents: npt.NDArray[np.uint64],
                        shift_bits: int) -> U64:
        """Bases (T, k, count, words), exponents (T, k, count, ew): Horner over slots of
        ``prod_t bases[t][j] ** exponents[t][j]``."""
    def comb_table(self, base: U64, window: int, windows: int) -> CombTable:
        """Comb table for one base (a single row of words); window 1..8 bits."""
    def fixed_base(self, tables: Sequence[CombTable], exponents: Sequence[U64],
                   multipliers: U64 | None = None, mont_in: bool = False,
                   mont_out: bool = False) -> U64:
        """``mult_i * prod_t base_t ** e_{t,i} mod m``."""

# three-party replicated sharing (shaper.protocols.replicated): a party's share arrays x, a are
# (slots, words) uint64, modified in place; gate rows are int32 slot numbers.
def rss_local(x: U64, a: U64, gates: npt.NDArray[np.int32]) -> None:
    """Local gates, rows [op, a, b, c, out] (op 0 XOR, 2 INV, 3 EQW, 4 EQ0, 5 EQ1, 6 XOR3;
    -1 = no input)."""
def rss_and_masked(x: U64, a: U64, ands: npt.NDArray[np.int32], out: U64, m1: U64, m2: U64) -> None:
    """``out[g] = m1[g] ^ m2[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])`` for AND rows [a, b, out]; (n, words)."""
def rss_and_finish(x: U64, a: U64, ands: npt.NDArray[np.int32], r: U64, r_prev: U64) -> None:
    """Output share of AND row g: (r_prev[g] ^ r[g], r[g])."""
def rss_and_prf(x: U64, a: U64, ands: npt.NDArray[np.int32], out: U64, own: KeyStream,
                prev: KeyStream) -> None:
    """As ``rss_and_masked`` with the masks drawn from the two keystreams row by row."""

class KeyStream:
    """AES-128-CTR keystream (zero IV, big-endian block counter) computed with VAES; the same
    stream as ``cryptography``'s ``modes.CTR(b"\\0" * 16)``. Consecutive calls continue it."""

    def __init__(self, key: bytes) -> None: ...
    @staticmethod
    def available() -> bool:
        """True when this CPU has VAES and AVX-512."""
    def words(self, count: int) -> U64:
        """The next ``count`` 64-bit words of the stream."""

class RistrettoKey:
    """A secret blinding scalar of Ristretto255 (ECDH PSI, ``shaper.protocols.psi.ecdh``)."""

    def __init__(self, wide: bytes) -> None: ...  # 64 bytes of os.urandom
    @staticmethod
    def from_bytes(raw: bytes) -> RistrettoKey: ...
    def to_bytes(self) -> bytes: ...
    def hash_blind(self, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.uint64],
                   order: npt.NDArray[np.int64] | None = None) -> bytes:
        """k * H(item) for the items data[offsets[i]:offsets[i+1]] (those at ``order``, in that
        order, when given), 32 bytes each."""
    def blind(self, points: bytes) -> bytes:
        """k * P for each 32-byte encoding; ValueError names the first invalid one."""

def item_digests(prefix: bytes, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.uint64], width: int) -> bytes:
    """The first ``width`` (<= 32) bytes of SHA-256(prefix || item) per packed item."""

# -- oblivious transfer (native/src/ot; used by shaper.protocols.nparty.ot) ---------------------------
class BaseOtSender:
    """Chou-Orlandi base OTs on Ristretto255, sender side (the party that will receive extended OTs)."""

    def __init__(self, count: int, seed: bytes, session: bytes) -> None: ...  # seed: 64 random bytes
    def message(self) -> bytes:
        """A = a G (32 bytes)."""
    def keys(self, reply: bytes) -> tuple[bytes, bytes]:
        """(k0, k1), ``count`` 16-byte keys each, from the receiver's ``count`` points (once)."""

class BaseOtReceiver:
    """Chou-Orlandi base OTs, receiver side, with packed choice bits (LSB first)."""

    def __init__(self, choices: bytes, count: int, seed: bytes, session: bytes) -> None: ...  # count*64 bytes
    def reply(self, message: bytes) -> bytes:
        """The points B_i (32 bytes each), once."""
    def keys(self) -> bytes:
        """The chosen keys, 16 bytes each (after ``reply``)."""

class IknpReceiver:
    """IKNP extension, receiver side (was the base-OT sender with k0, k1); base of SoftReceiver."""

    def __init__(self, k0: bytes, k1: bytes) -> None: ...
    def extend(self, choices: npt.NDArray[np.uint8], count: int) -> tuple[bytes, npt.NDArray[np.uint8]]:
        """(u for the sender, rows t (count, 16)); ``count`` rounded up to 128 in ``index``;
        u is 128/k bits per rounded OT."""
    def extend_hash(self, choices: npt.NDArray[np.uint8], count: int, domain: int, start: int | None = None,
                    out: npt.NDArray[np.uint8] | None = None) -> tuple[bytes, npt.NDArray[np.uint8]]:
        """(u, H(t_j, tweak(start + j))) in one pass, ``start`` by default ``index``; ``out``: a
        reusable C-contiguous (count, 16) uint8 array to fill and return."""
    def extend_cot(self, choices: npt.NDArray[np.uint8], count: int, domain: int, moduli: U64, bits: int,
                   start: int | None = None, out: U64 | None = None) -> tuple[bytes, U64]:
        """extend + the receiver's pad sums of a correlated OT (no rows kept): (u, pads (e, k)),
        written into ``out`` when given."""
    def extend_bits(self, choices: npt.NDArray[np.uint8], count: int, domain: int, start: int | None = None
                    ) -> tuple[bytes, U64]:
        """(u, the lowest hash bits packed 64 per word) in one pass."""
    @property
    def index(self) -> int: ...
    @property
    def checked(self) -> bool:
        """Whether calls carry the consistency check (SoftReceiver(..., check=context))."""
    @property
    def k(self) -> int:
        """Base OTs per group: 1 (IKNP), 2 or 4 (SoftSpoken)."""

class IknpSender:
    """IKNP extension, sender side (was the base-OT receiver with choice bits ``delta``); base of
    SoftSender."""

    def __init__(self, keys: bytes, delta: bytes) -> None: ...
    def extend(self, u: bytes, count: int) -> npt.NDArray[np.uint8]:
        """Rows q (count, 16), q_j = t_j XOR b_j delta; ValueError if ``u`` has the wrong length."""
    def extend_hash(self, u: bytes, count: int, domain: int, start: int | None = None,
                    out: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]] | None = None
                    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
        """(H(q_j, tweak), H(q_j XOR delta, tweak)) in one pass; ``out``: two distinct arrays to fill."""
    def extend_bits(self, u: bytes, count: int, domain: int, start: int | None = None) -> tuple[U64, U64]:
        """The lowest bits of both hashes, packed 64 per word."""
    def extend_cot(self, u: bytes, count: int, domain: int, offsets: U64, moduli: U64, bits: int,
                   start: int | None = None) -> tuple[U64, U64]:
        """``cot_send`` on the rows in one pass: (corrections (e, bits, k), share (e, k))."""
    @property
    def index(self) -> int: ...
    @property
    def delta(self) -> bytes: ...
    @property
    def checked(self) -> bool:
        """Whether calls are checked (SoftSender(..., check=context))."""
    @property
    def failed(self) -> bool:
        """A call failed the consistency check: every later call raises ValueError."""
    @property
    def k(self) -> int:
        """Base OTs per group: 1 (IKNP), 2 or 4 (SoftSpoken)."""

class SoftReceiver(IknpReceiver):
    """SoftSpoken OT extension (repetition code), receiver side: IknpReceiver's methods and rows,
    128/k message bits per OT. k = 1 is IKNP (empty setup message). With ``check`` (the 16-byte
    context both sides agree on) every call carries the KOS/SoftSpoken consistency check: 256
    extra random rows (in ``index``) and 32 more message bytes per call."""

    def __init__(self, k0: bytes, k1: bytes, k: int, seed: bytes, check: bytes | None = None
                 ) -> None: ...  # k in (1, 2, 4); seed: 16 random bytes
    @property
    def setup_message(self) -> bytes:
        """For SoftSender's constructor, once: 4096 bytes (b"" for k = 1)."""

class SoftSender(IknpSender):
    """SoftSpoken OT extension, sender side; ``delta`` its base-OT choice bits, as for IKNP. With
    ``check`` (the receiver's context) a message that fails the consistency check raises
    ValueError ("... failed the consistency check ...") and every later call is refused."""

    def __init__(self, keys: bytes, delta: bytes, k: int, setup_message: bytes, check: bytes | None = None
                 ) -> None: ...

def ot_hash(rows: npt.NDArray[np.uint8], domain: int, start: int, delta: bytes | None = None
            ) -> npt.NDArray[np.uint8] | tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Random-OT messages H(row, tweak(start + j)): the receiver's, or the sender's pair."""
def ot_bits(rows: npt.NDArray[np.uint8], domain: int, start: int, delta: bytes | None = None
            ) -> U64 | tuple[U64, U64]:
    """As ``ot_hash``, the lowest bit of each hash only, packed 64 per word."""
def cot_send(q: npt.NDArray[np.uint8], delta: bytes, domain: int, start: int, offsets: U64, moduli: U64,
             bits: int) -> tuple[U64, U64]:
    """Gilboa / correlated OT, sender: (corrections (e, bits, k), share (e, k))."""
def cot_recv(t: npt.NDArray[np.uint8], domain: int, start: int, choices: U64, corrections: U64, moduli: U64,
             bits: int) -> U64:
    """Gilboa / correlated OT, receiver: share (e, k); sender + receiver = offsets * choices mod q."""
def cot_finish(pads: U64, values: U64, corrections: U64, moduli: U64, bits: int) -> U64:
    """Completes IknpReceiver.extend_cot's pads (e, k) in place into the receiver's shares (equal
    to cot_recv's) and returns them."""
def gf128_combine(rows: npt.NDArray[np.uint8], seed: bytes) -> bytes:
    """sum_j seed^(m - 1 - j) row_j over GF(2^128) for (m, 16) rows, 16 bytes (the KOS check's field)."""
def gf128_mul(a: bytes, b: bytes) -> bytes:
    """a b over GF(2^128), 16-byte little-endian blocks."""
def pack_choice_bits(values: U64, bits: int) -> npt.NDArray[np.uint8]:
    """Row e*bits + i = bit i of values[e], packed LSB first."""

# -- word-size modular arithmetic (native/src/modq.rs) ----------------------------------------------
def mod_mul(a: U64, b: U64, moduli: U64) -> U64:
    """a * b element-wise for (n, L) arrays, column c mod moduli[c] (odd, < 2^62; inputs reduced)."""
def mod_matmul(a: U64, b: U64, modulus: int) -> U64:
    """a @ b mod one odd modulus < 2^62."""

# -- RNS-CKKS polynomial kernels (native/src/rns, contract: shaper.kernels.rns) ----------------
def ntt_primes(n: int, bits: int, count: int, exclude: Sequence[int] = ()) -> list[int]:
    """SEAL's rule: the `count` largest primes of exactly `bits` bits with q = 1 mod 2n,
    descending, skipping `exclude` (ValueError when there are not enough)."""

class RnsContext:
    """NTT primes (< 2^62, = 1 mod 2n) and tables for ring degree n (a power of two, 8..2^17).

    Arrays are uint64, C-contiguous, shape (..., len(mods), n), row i reduced mod
    ``primes[mods[i]]`` (checked: ValueError naming the row). ``roots`` default to the smallest
    primitive 2n-th roots. Every kernel releases the GIL and runs on the native pool."""

    def __init__(self, n: int, primes: Sequence[int], roots: Sequence[int] | None = None) -> None: ...
    @property
    def n(self) -> int: ...
    @property
    def primes(self) -> list[int]: ...
    @property
    def roots(self) -> list[int]: ...
    def ntt(self, a: U64, mods: Sequence[int]) -> None:
        """In place (a writable array): A[k] = a(psi^(2 brv(k) + 1))."""
    def intt(self, a: U64, mods: Sequence[int]) -> None:
        """In place: the inverse of ntt."""
    def add(self, a: U64, b: U64, mods: Sequence[int]) -> U64: ...
    def sub(self, a: U64, b: U64, mods: Sequence[int]) -> U64: ...
    def neg(self, a: U64, mods: Sequence[int]) -> U64: ...
    def mul(self, a: U64, b: U64, mods: Sequence[int]) -> U64: ...
    def mul_acc(self, acc: U64, a: U64, b: U64, mods: Sequence[int]) -> None:
        """acc += a * b in place."""
    def mul_scalar(self, a: U64, scalars: U64, mods: Sequence[int]) -> U64:
        """Row i times scalars[i] (uint64, shape (len(mods),), each below its prime: ValueError otherwise)."""
    def tensor(self, a: U64, b: U64, mods: Sequence[int]) -> U64:
        """(2, r, n) x (2, r, n) -> (3, r, n): (a0 b0, a0 b1 + a1 b0, a1 b1)."""
    def automorph(self, a: U64, g: int) -> U64:
        """NTT-form X -> X^g (g odd, 0 < g < 2n) of every row (..., n)."""
    def from_signed(self, x: npt.NDArray[np.int64], mods: Sequence[int]) -> U64:
        """x int64 C-contiguous (..., n), |x| < 2^62 (ValueError otherwise) -> (..., len(mods), n):
        x mod primes[mods[i]] in row i (coefficient form, no NTT)."""
    def divide_round_last(self, a: U64, mods: Sequence[int]) -> U64:
        """(..., r, n) -> (..., r - 1, n): round(a / q_last) (rescale, mod-down)."""
    def decompose(self, a: U64, mods: Sequence[int], sp: int) -> U64:
        """(..., l+1, n) NTT form -> (..., l+1, l+2, n): digit j = centred lift of intt(row j)
        over mods + [sp], NTT form."""
    def key_switch(self, digits: U64, key: U64, mods: Sequence[int], sp: int, g: int = 1) -> U64:
        """digits (l+1, l+2, n), key (D, 2, len(primes), n) indexed [context prime of the digit,
        b/a, context prime of the row] -> (2, l+1, n): divide_round_last over mods + [sp] of
        sum_j sigma_g(digits[j]) * key[mods[j], c, mods + [sp]]."""

class CycloContext:
    """The double-CRT transform of Z_q[X]/Phi_m for odd m, 3 <= m <= 2^16 + 1 (the contract of
    shaper.kernels.cyclo): primes < 2^62, prime, distinct, q = 1 mod 2 N m with N the Bluestein
    NTT length (the least power of two >= 2m - 2, at least 8); ValueError naming the prime
    otherwise. Arrays are uint64, C-contiguous, shape (len(limbs), phi), row l reduced mod
    ``primes[limbs[l]]`` (checked: ValueError naming the row). The GIL is released; several rows
    run on the native pool."""

    def __init__(self, m: int, primes: Sequence[int]) -> None: ...
    @property
    def m(self) -> int: ...
    @property
    def phi(self) -> int: ...
    @property
    def ntt_size(self) -> int: ...
    @property
    def primes(self) -> list[int]: ...
    @property
    def roots(self) -> list[int]:
        """zeta of each prime: its smallest primitive m-th root of unity."""
    def forward(self, coeffs: U64, limbs: Sequence[int]) -> U64:
        """Coefficients (degree < phi) -> values: [l, i] = a_l(zeta^u_i), u_i the units of Z_m increasing."""
    def inverse(self, values: U64, limbs: Sequence[int]) -> U64:
        """Values -> the coefficients of the polynomial of degree < phi taking them."""
    def add(self, a: U64, b: U64, limbs: Sequence[int]) -> U64:
        """a + b mod each row's prime: (..., L, phi) operands of equal shapes, or one of them
        (L, phi) broadcast over the other's leading axes; every entry checked to be reduced."""
    def sub(self, a: U64, b: U64, limbs: Sequence[int]) -> U64:
        """a - b mod each row's prime (shapes as for add)."""
    def mul(self, a: U64, b: U64, limbs: Sequence[int]) -> U64:
        """a b mod each row's prime (shapes as for add)."""
    def mul_acc(self, acc: U64, a: U64, b: U64, limbs: Sequence[int]) -> None:
        """In place: acc += a b mod each row's prime; a and b have acc's shape or (L, phi); acc
        is unchanged when the call fails."""
    def mul_scalar(self, a: U64, scalars: Sequence[int], limbs: Sequence[int]) -> U64:
        """Row l of a (..., L, phi) times scalars[l], reduced mod primes[limbs[l]]."""
    def extend(self, residues: U64, src: Sequence[int], dst: Sequence[int]) -> U64:
        """The centred fast basis extension (shaper.kernels.cyclo's contract): residues
        (len(src), phi) mod the distinct primes of src -> (len(dst), phi) mod those of dst."""
    def divide_round(self, a: U64, limbs: Sequence[int], drop: Sequence[int]) -> U64:
        """(a - delta) D^-1 on limbs without drop, delta = 2 extend([a 2^-1]_D): a (..., L, phi)
        values over distinct limbs -> (..., len(keep), phi) (ring.py's Ring.divide_round)."""
    def digits(self, a: U64, limbs: Sequence[int], groups: Sequence[Sequence[int]],
               target: Sequence[int]) -> U64:
        """Key-switching digits: a (L, phi) values -> (len(groups), len(target), phi), per group
        a's own rows and forward(extend(a's coefficients on the group)) elsewhere."""
