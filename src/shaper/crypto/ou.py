"""Okamoto–Uchiyama encryption (n = p^2 q), batched, behind the same interface as Paillier.

We use the accelerated form of Coron, Naccache and Paillier ("Accelerating Okamoto-Uchiyama's
public-key cryptosystem", Electronics Letters 1999), the one HEU and FATE ship:

* p = 2 t u + 1 with t a prime of twice the security level (224 bits for 2048-bit keys), q a
  prime of the same size as p, n = p^2 q of the requested length;
* G = g^(2u) mod n with g^(p-1) of order p mod p^2, and H = h^(2 u n) mod n, so that
  G^t mod p^2 has order p and H^t = 1 mod p^2;
* Enc(m; r) = G^m H^r mod n with r uniform in [0, 2^exponent_bits), exponent_bits = 2 × the
  security level (224 bits at 2048; HEU uses about half that, which leaves r within reach of
  Pollard's lambda method);
* Dec(c) = L(c^t mod p^2) / L(G^t mod p^2) mod p with L(x) = (x - 1) / p: a t-bit exponent
  modulo p^2, which is why OU decrypts several times faster than Paillier.

The plaintext space is Z_p with p secret, so the public bound is derived from p's bit length k:
|m| <= 2^(k-2) - 1 (``max_int``), and decryption reports values in the overflow band. Negative
messages use a table of G^-1.

Security: IND-CPA under the p-subgroup assumption (plus the short-exponent assumption for r);
OU is not Paillier and its security rests on factoring n = p^2 q. The gmpy2 kernel is not
constant time.

**A peer's OU key.** A party that re-randomises under another party's key (H2S, secure mat-vec,
FNP) relies on H^r hiding what it multiplied in. Unlike Paillier's h_s, H cannot be derived from
n by the peer: fast decryption needs H^t = 1 mod p^2, which only the holder of u (p = 2tu + 1)
can arrange. So a peer's key is checked instead (:meth:`OUPublicKey._validate`): G and H are
units other than ±1, both have Jacobi symbol +1 (an honest G = g^(2u) and H = h^(2un) always
do, so every honest ciphertext does too, and a received ciphertext with symbol -1 is refused:
see :meth:`~shaper.crypto.ahe.AHEPublicKey.validate_received`), and neither has an order made
only of prime powers below 2^12 (H^M != 1 for M = lcm(1..2^12)), which rules out H = n - 1 and
every small smooth order. What remains: a key owner can still give H a moderately small order
with a large prime factor (say a 20-bit prime), which no check without the factorisation can
see, and then read the peer's multipliers out of re-randomised results. OU therefore protects a
party only against a key owner who generated its key honestly; between parties that do not
trust each other's key generation, use Paillier (its h_s is derived from n).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from ..arrays import object_array
from ..errors import KeyValidationError, SerializationError
from ..kernels import FixedBaseSpec, get_kernel, int_to_exponent_bytes
from . import counters, primes, wire
from .ahe import AHEPrivateKey, AHEPublicKey
from .prg import default_prg, system_randbelow

__all__ = ["OUPublicKey", "OUPrivateKey", "keygen", "security_bits", "MIN_KEY_BITS"]

MIN_KEY_BITS = 512
_SMALL_ORDER_BOUND = 1 << 12


def _lcm_up_to(bound: int) -> int:
    out = 1
    for p in range(2, bound + 1):
        if gmpy2.is_prime(p):
            power = p
            while power * p <= bound:
                power *= p
            out *= power
    return out


_SMALL_ORDERS = mpz(_lcm_up_to(_SMALL_ORDER_BOUND))


def security_bits(bits: int) -> int:
    """Symmetric-equivalent security of a factoring modulus (NIST SP 800-57)."""
    if bits >= 3072:
        return 128
    if bits >= 2048:
        return 112
    return 80


def _split_signed(values: Sequence[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Exponent bytes of max(v, 0) and max(-v, 0)."""
    pos = [v if v > 0 else 0 for v in values]
    neg = [-v if v < 0 else 0 for v in values]
    return int_to_exponent_bytes(pos, width), int_to_exponent_bytes(neg, width)


class OUPublicKey(AHEPublicKey):
    """OU public key (n, G, H, bit length of p)."""

    scheme = "ou"
    scheme_id = wire.SCHEME_OU

    def __init__(self, n: int, G: int, H: int, prime_bits: int, *, exponent_bits: int | None = None) -> None:
        self.n = mpz(n)
        self.G = mpz(G)
        self.H = mpz(H)
        self.prime_bits = int(prime_bits)
        bits = int(self.n).bit_length()
        self.exponent_bits = int(exponent_bits) if exponent_bits is not None else 2 * security_bits(bits)
        self.ciphertext_modulus = self.n
        if bits < MIN_KEY_BITS:  # before anything is sized by the prime size
            raise KeyValidationError(f"OU modulus has {bits} bits; at least {MIN_KEY_BITS} are required")
        if not 3 * self.prime_bits - 2 <= bits <= 3 * self.prime_bits + 1:
            raise KeyValidationError(
                f"prime size {self.prime_bits} bits is inconsistent with a {bits}-bit modulus n = p^2 q")
        self.max_int = (1 << (self.prime_bits - 2)) - 1
        self.packing_capacity_bits = self.prime_bits - 1
        self._validate()
        self.G_inv = gmpy2.invert(self.G, self.n)
        self._plain_width = (self.prime_bits + 7) // 8
        self._spec_G = FixedBaseSpec(int(self.G), int(self.n), self.prime_bits)
        self._spec_G_inv = FixedBaseSpec(int(self.G_inv), int(self.n), self.prime_bits)
        self._randomizer_spec = self._spec_H = FixedBaseSpec(int(self.H), int(self.n), self.exponent_bits)
        self._fast_specs = [FixedBaseSpec(s.base, s.modulus, s.exponent_bits, constant_time=False)
                            for s in (self._spec_H, self._spec_G, self._spec_G_inv)]
        width = (bits + 7) // 8
        self._fingerprint = hashlib.sha256(
            b"shaper/ou/public-key/v1" + int(self.n).to_bytes(width, "big") + int(self.G).to_bytes(width, "big")
        ).digest()

    def _validate(self) -> None:
        n = self.n
        bits = int(n).bit_length()
        if bits < MIN_KEY_BITS:
            raise KeyValidationError(f"OU modulus has {bits} bits; at least {MIN_KEY_BITS} are required")
        if n % 2 == 0:
            raise KeyValidationError("OU modulus must be odd")
        if not 3 * self.prime_bits - 2 <= bits <= 3 * self.prime_bits + 1:
            raise KeyValidationError(
                f"prime size {self.prime_bits} bits is inconsistent with a {bits}-bit modulus n = p^2 q"
            )
        for name, v in (("G", self.G), ("H", self.H)):
            if not 1 < v < n or gmpy2.gcd(v, n) != 1:
                raise KeyValidationError(f"OU {name} must be a unit in (1, n)")
            if gmpy2.jacobi(v, n) != 1:
                raise KeyValidationError(f"OU {name} has Jacobi symbol -1; an honestly made key never does")
            if gmpy2.powmod(v, _SMALL_ORDERS, n) == 1:
                raise KeyValidationError(
                    f"OU {name} has a small order (it divides lcm(1..{_SMALL_ORDER_BOUND})): "
                    "re-randomising with it would hide nothing")
        if self.exponent_bits < 128:
            raise KeyValidationError(f"random exponent of {self.exponent_bits} bits is too short (minimum 128)")

    @property
    def fingerprint(self) -> bytes:
        return self._fingerprint

    def _symbol_is_fixed(self) -> bool:
        return True  # G and H have symbol +1 (checked), so G^m H^r does

    # -- serialisation: n, G, H (width of n each), u32 prime_bits, u32 exponent_bits ----------
    def body(self) -> bytes:
        width = (self.bits + 7) // 8
        return (wire.int_field(self.n, width) + wire.int_field(self.G, width) + wire.int_field(self.H, width)
                + struct.pack("<II", self.prime_bits, self.exponent_bits))

    @classmethod
    def read_body(cls, r: wire.Reader) -> "OUPublicKey":
        n, G, H = r.integer("n"), r.integer("G"), r.integer("H")
        prime_bits, exponent_bits = r.unpack("II", "prime and exponent bits")
        return cls(n, G, H, prime_bits, exponent_bits=exponent_bits)

    def to_jwk(self) -> dict:
        return {"kty": "OU", "key_ops": ["encrypt"], "n": wire.b64(self.n), "G": wire.b64(self.G),
                "H": wire.b64(self.H), "prime_bits": self.prime_bits, "exponent_bits": self.exponent_bits,
                "kid": f"shaper ou {self.bits} {self.fingerprint.hex()[:16]}"}

    @classmethod
    def from_jwk(cls, doc: dict) -> "OUPublicKey":
        prime_bits = wire.json_int(doc, "prime_bits", "OU JSON key")
        exponent_bits = wire.json_int(doc, "exponent_bits", "OU JSON key")
        return cls(wire.unb64(doc.get("n"), "n"), wire.unb64(doc.get("G"), "G"), wire.unb64(doc.get("H"), "H"),
                   prime_bits, exponent_bits=exponent_bits)

    def __repr__(self) -> str:
        return (f"OUPublicKey(bits={self.bits}, prime_bits={self.prime_bits}, "
                f"exponent_bits={self.exponent_bits}, fingerprint={self._fingerprint.hex()[:16]})")

    def raw_encrypt(self, signed_values: Sequence[int], exponent_bytes: np.ndarray | None = None, *,
                    mont_out: bool = False, constant_time: bool = True) -> Any:
        values = [int(v) for v in signed_values]
        counters.add("encryptions", len(values))
        if exponent_bytes is None:
            exponent_bytes = default_prg().exponent_bytes(len(values), self.exponent_bits)
        pos, neg = _split_signed(values, self._plain_width)
        specs = [self._spec_H, self._spec_G, self._spec_G_inv] if constant_time else self._fast_specs
        if mont_out:
            return get_kernel().mont_fixed_base(specs, [exponent_bytes, pos, neg], None, self.n)
        return get_kernel().fixed_base_powmod(specs, [exponent_bytes, pos, neg], None, self.n)

    def raw_add_plain(self, ciphertexts: Sequence, signed_values: Sequence[int]) -> list:
        values = [int(v) for v in signed_values]
        pos, neg = _split_signed(values, self._plain_width)
        return get_kernel().fixed_base_powmod(
            [self._spec_G, self._spec_G_inv], [pos, neg], list(ciphertexts), self.n
        )



class OUPrivateKey(AHEPrivateKey):
    """OU private key (p, q, t)."""

    public_class = OUPublicKey

    def __init__(self, public_key: OUPublicKey, p: int, q: int, t: int) -> None:
        self.public_key = public_key
        self.p, self.q, self.t = mpz(p), mpz(q), mpz(t)
        self.p_squared = self.p * self.p
        self._validate()
        gt = gmpy2.powmod(public_key.G, self.t, self.p_squared)
        self._g_inv = gmpy2.invert((gt - 1) // self.p, self.p)

    def _validate(self) -> None:
        pk = self.public_key
        p, q, t = self.p, self.q, self.t
        if p * p * q != pk.n:
            raise KeyValidationError("OU private key does not factor the public modulus as p^2 q")
        if p.bit_length() != pk.prime_bits:
            raise KeyValidationError("OU prime p does not have the public key's prime size")
        for name, v in (("p", p), ("q", q), ("t", t)):
            if not primes.is_prime(v):
                raise KeyValidationError(f"OU {name} is not prime")
        if (p - 1) % t:
            raise KeyValidationError("OU t does not divide p - 1")
        p2 = self.p_squared
        gt = gmpy2.powmod(pk.G, t, p2)
        if gt == 1 or gmpy2.powmod(gt, p, p2) != 1:
            raise KeyValidationError("OU G^t mod p^2 does not have order p")
        if gmpy2.powmod(pk.H, t, p2) != 1:
            raise KeyValidationError("OU H^t mod p^2 is not 1")

    def _plaintext_modulus(self) -> int:
        return int(self.p)

    # -- serialisation: p, q, t (prime width + 1 bytes each) ----------------------------------
    def body(self) -> bytes:
        width = (self.public_key.prime_bits + 7) // 8 + 1
        return wire.int_field(self.p, width) + wire.int_field(self.q, width) + wire.int_field(self.t, width)

    @classmethod
    def read_body(cls, r: wire.Reader, public_key: AHEPublicKey) -> "OUPrivateKey":
        if not isinstance(public_key, OUPublicKey):
            raise SerializationError("an OU private key needs an OU public key")
        return cls(public_key, r.integer("p"), r.integer("q"), r.integer("t"))

    def to_jwk(self) -> dict:
        pub = self.public_key.to_jwk()
        return {"kty": "OU", "key_ops": ["decrypt"], "p": wire.b64(self.p), "q": wire.b64(self.q),
                "t": wire.b64(self.t), "pub": pub, "kid": pub["kid"]}

    @classmethod
    def from_jwk(cls, doc: dict) -> "OUPrivateKey":
        return cls(OUPublicKey.from_jwk(doc["pub"]), wire.unb64(doc.get("p"), "p"), wire.unb64(doc.get("q"), "q"),
                   wire.unb64(doc.get("t"), "t"))

    def decrypt_validated(self, cts: list) -> list:
        x = object_array(get_kernel().powmod_same_exponent(cts, self.t, self.p_squared))
        m = ((x - 1) // self.p * self._g_inv) % self.p
        return [int(v) for v in m.tolist()]


def keygen(bits: int = 2048, *, exponent_bits: int | None = None) -> tuple[OUPublicKey, OUPrivateKey]:
    """Generate an OU key pair with an exactly ``bits``-bit modulus n = p^2 q (``bits`` >= 512).

    The plaintext bound is 2^(|p| - 2) - 1 (about bits/3 - 2 bits); encryption exponents have
    ``exponent_bits`` bits (default: twice the security level).
    """
    if not isinstance(bits, int) or bits < MIN_KEY_BITS:
        raise KeyValidationError(f"OU keys need at least {MIN_KEY_BITS} bits, got {bits!r}")
    sec = security_bits(bits)
    p_bits = -(-bits // 3)
    q_bits = bits - 2 * p_bits
    t_bits = min(2 * sec, p_bits // 2)
    t = primes.random_prime(t_bits)
    p, u = primes.random_prime_with_factor(p_bits, t)
    # p, q have their top two bits set, so p^2 q has bits or bits - 1 bits; draw q until bits.
    while True:
        q = primes.random_prime(q_bits)
        n = p * p * q
        if n.bit_length() == bits and q != p:
            break
    p2 = p * p
    two_u = 2 * u
    # G = g^(2u): G^t = g^(p-1), which must have order p modulo p^2.
    while True:
        g = mpz(system_randbelow(int(n) - 3) + 2)
        if gmpy2.gcd(g, n) != 1:
            continue
        gp = gmpy2.powmod(g, p - 1, p2)
        if gp != 1:
            break
    G = gmpy2.powmod(g, two_u, n)
    while True:
        h = mpz(system_randbelow(int(n) - 3) + 2)
        if gmpy2.gcd(h, n) == 1:
            break
    H = gmpy2.powmod(h, two_u * n, n)
    public_key = OUPublicKey(n, G, H, p_bits, exponent_bits=exponent_bits)
    return public_key, OUPrivateKey(public_key, p, q, t)
