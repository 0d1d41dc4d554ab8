#!/usr/bin/env python3
"""Writes the committed seed corpora: fuzz/corpus/<target>/ for the native targets (hand-made
inputs that reach each mode of each target) and fuzz/corpus/py_<target>/ for the Python
harnesses (valid objects from shaper itself, from tests/fuzz/targets.py). Deterministic: running
it again rewrites the same files. Run from anywhere: `python fuzz/seeds.py`."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent

# the Ristretto255 base point, a second valid point (2·B) and invalid encodings
BASE = bytes.fromhex("e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76")
BASE2 = bytes.fromhex("6a493210f7499cd17fecb510ae0cea23a110e8d5b901f8acadd3095c73a3b919")
IDENTITY = bytes(32)
NONCANONICAL = bytes([0xff] * 32)


def filler(n: int, seed: int) -> bytes:
    out = b""
    k = 0
    while len(out) < n:
        out += hashlib.sha256(bytes([seed]) + k.to_bytes(4, "little")).digest()
        k += 1
    return out[:n]


def u16(v: int) -> bytes:
    return v.to_bytes(2, "little")


def native_seeds() -> dict[str, list[bytes]]:
    one = (1).to_bytes(32, "little")
    return {
        "psi_points": [
            one + BASE + BASE2,
            one + BASE * 3,
            IDENTITY + BASE + IDENTITY,
            one + BASE2[:31],
            one + NONCANONICAL,
            filler(32, 1) + filler(96, 2),
        ],
        "psi_items": [
            bytes([32, 3, 1, ord("p"), 0, 0, 0, 5, 4, 3]) + b"alicebob!x",
            bytes([5, 4, 0, 1, 3, 0, 2, 1, 0, 0, 3, 3, 3, 3]) + filler(12, 3),
            bytes([33, 2, 0, 0, 1, 1, 9, 9]) + b"xyz",
            bytes([1, 0, 0, 0, 0]),
        ],
        "ot_base": [
            bytes([0]) + u16(1) + BASE2,
            bytes([0]) + u16(2) + BASE + BASE2,
            bytes([0]) + u16(3) + BASE + IDENTITY,
            bytes([1]) + u16(4) + bytes([0b1010]) + BASE,
            bytes([1]) + u16(4) + bytes([0b1010]) + NONCANONICAL,
            bytes([2, 3]) + u16(64) + filler(64, 4) + u16(16) + filler(16, 5) + u16(1) + b"\x01" + filler(40, 6),
            bytes([3]) + u16(5) + b"\x15" + filler(16, 7) + filler(64, 8) + filler(5 * 64, 9),
        ],
        "ot_extension": [
            # checked (KOS/SoftSpoken check) peer messages for k = 4: 0 and 128 OTs, with their trailer
            bytes([0, 1]) + filler(16, 31) + bytes([2, 0, 2]) + bytes(8) + bytes([1, 1]) + bytes(4) + bytes([8, 0, 0])
            + filler(1056, 32),
            bytes([0, 1]) + filler(16, 33) + bytes([2, 1, 2]) + bytes(8) + bytes([1, 1]) + bytes(4) + bytes([8, 0, 0])
            + filler(1568, 34),
            # an honest checked run (k = 2, 300 OTs)
            bytes([1, 1]) + filler(16, 35) + bytes([1]) + u16(300) + filler(8, 36) + filler(38, 37),
            bytes([0]) + filler(16, 10) + bytes([0, 2, 1]) + filler(10, 11) + bytes([3, 0]) + filler(8, 12) + filler(16 * 16, 13),
            bytes([0]) + filler(16, 14) + bytes([2, 3, 2]) + filler(10, 15) + bytes([8, 2, 3]) + filler(40, 16) + filler(4 * 64, 17),
            bytes([1]) + filler(16, 18) + bytes([1]) + u16(300) + filler(8, 19) + filler(38, 20),
            bytes([2]) + filler(16, 21) + bytes([2]) + u16(7) + u16(4) + bytes([2, 2, 5, 0, 0, 0, 0, 0, 0, 0]) + filler(300, 22),
        ],
        "ot_softspoken_setup": [
            bytes([2]) + filler(16, 23) + bytes([1, 0]) + filler(64, 24),
            bytes([5]) + filler(16, 25) + bytes([1, 2]) + filler(4096, 26),
            bytes([1]) + filler(16, 27) + bytes([1, 3]),
            bytes([0, 3]) + filler(16, 28) + bytes([1, 3]) + filler(4096, 29),
        ],
        "bigint_rows": [
            bytes([1]) + (2**61 - 1).to_bytes(8, "little") + bytes([0, mode]) + filler(300, 30 + mode)
            for mode in range(6)
        ] + [
            bytes([8, 4]) + filler(32, 40) + bytes([1, 0]) + bytes([3, 0]) + filler(400, 41),
            bytes([0, 130, 0]) + filler(600, 42),
        ],
        "rns_inputs": [
            bytes([1, 2]) + u16(0) + bytes([op]) + u16(2) + bytes([0, 0, 0, 1, 0]) + filler(700, 50 + op)
            for op in range(10)
        ] + [
            bytes([0, 1]) + u16(3) + u16(2) + u16(38) + u16(0) + bytes([0]),
            bytes([0, 0]) + (16).to_bytes(4, "little") + u16(1) + u16(28) + u16(1) + bytes([1, 2]) + filler(40, 60),
        ],
    }


def write(target: str, seeds: list[bytes]) -> None:
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    for s in seeds:
        (d / f"seed-{hashlib.sha1(s).hexdigest()[:16]}").write_bytes(s)


def main() -> None:
    for target, seeds in native_seeds().items():
        write(target, seeds)
    if "--native-only" not in sys.argv:
        sys.path.insert(0, str(ROOT / "src"))
        sys.path.insert(0, str(ROOT))
        from tests.fuzz.targets import TARGETS

        for name, target in TARGETS.items():
            write(f"py_{name}", target.seeds())


if __name__ == "__main__":
    main()
