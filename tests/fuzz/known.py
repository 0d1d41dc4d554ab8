"""Open findings of the parser harnesses: the explicit list the lead clears as fixes land.

Each entry is one concrete input, run by ``tests/fuzz/test_parsers.py`` as a strict xfail (a fix
makes it XPASS, which fails the suite until the entry is removed). Random inputs that fail the
same way (the signature regex) are not reported again, by the pytest version or by campaigns
(``fuzz/python_fuzz.py``), so one open bug does not stop every run of its harness.
"""

from __future__ import annotations

import re
import traceback

#: (target, input, signature, why): one entry per open finding. The signature is a regex over
#: "<exception type>: <function that raised it>: <message>"; random inputs failing that way are
#: not reported again. The lead clears an entry when the fix lands (its xfail then fails as XPASS).
KNOWN_FINDINGS: list[tuple[str, bytes, str, str]] = [
]

#: Findings that were fixed, kept as regression inputs: each must now be handled as the parser
#: promises (its documented error, or success) by ``tests/fuzz/test_parsers.py``.
FIXED_FINDINGS: list[tuple[str, bytes, str, str]] = [
    # src/shaper/crypto/ou.py:106, OUPublicKey.__init__ computes max_int = (1 << (prime_bits - 2)) - 1
    # before _validate() checks prime_bits against n: an OU public key (file or peer) with prime
    # size 0 or 1 raises a bare ValueError ("negative shift count") instead of KeyValidationError ...
    ("ahe_key", bytes.fromhex(
        "5348505201000102400000002b134328bd8d42ca483a165fb73425e469ef2ba141b655f53af4e5dc5b3baa34"
        "be41b1d8a8fdb883749b8a4729e0db767d460a567274f092e0f815d1672789a54000000055cf1f55f141a95a"
        "984d50f4880e6c60804878322d4ebe25a9b084b0c69097ffa97b6921a704b3d21df97cb2fcfc355eca4c050d"
        "6bededc608fc771c2d48b76540000000eeebfd642b17a77172d41ff7bab4d59646d0f25a87ef751534a96467"
        "bf44d56543d1c1e8e03698f9365e0f0c788bf1aeebfe3639ba757eb41eb7047c44a43d1a01000000a0000000"),
     r"^ValueError: __init__: negative shift count", "OU prime size 1: ValueError, not KeyValidationError"),
    # ... and with prime size 2^32 - 1 it builds a 2^32-bit integer first (1.1 GiB peak RSS, ~1.3 s
    # of CPU) and only then refuses the key.
    ("ahe_key", bytes.fromhex(
        "5348505201000102400000002b134328bd8d42ca483a165fb73425e469ef2ba141b655f53af4e5dc5b3baa34"
        "be41b1d8a8fdb883749b8a4729e0db767d460a567274f092e0f815d1672789a54000000055cf1f55f141a95a"
        "984d50f4880e6c60804878322d4ebe25a9b084b0c69097ffa97b6921a704b3d21df97cb2fcfc355eca4c050d"
        "6bededc608fc771c2d48b76540000000eeebfd642b17a77172d41ff7bab4d59646d0f25a87ef751534a96467"
        "bf44d56543d1c1e8e03698f9365e0f0c788bf1aeebfe3639ba757eb41eb7047c44a43d1affffffffa0000000"),
     r"^Finding: .*CPU time: b'SHPR\\x01\\x00\\x0[12]\\x02", "OU prime size 2^32-1: 1.1 GiB and 1.3 s before refusal"),
    # src/shaper/net/config.py, load_parties: path.read_text() raises UnicodeDecodeError on a
    # parties file that is not UTF-8 (only FileNotFoundError and TOMLDecodeError become ConfigError).
    ("parties", b'[[party]]\nname = "\xb4"\n',
     r"^UnicodeDecodeError: load_parties: ", "non-UTF-8 parties file: UnicodeDecodeError, not ConfigError"),
    # found by the 10-minute campaign: key JSON whose kty is a list: TypeError (unhashable), not SerializationError
    ('ahe_key_json', bytes.fromhex('7b226b7479223a205b22657074225d2c20226e223a202278467777395462593362726171434f5a5f7754463241676964386345346c7259594b527a476a5f624e76564e3063726631326d6f305f66735861696c6c69657254625933627261714362624135626562663032376565227d'), r"", 'key JSON whose kty is a list: TypeError (unhashable), not SerializationError'),
    # found by the 10-minute campaign: OU key with a 1-4-bit modulus and prime size 1 passed the size check: negative shift count
    ('key_file', bytes.fromhex('534850520100010200000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000020000000001c52ba155f53af4e5ffffffffffffffffffffffffffffffffffff757eb41eb7047c44a43d1aab000000a0000000'), r"", 'OU key with a 1-4-bit modulus and prime size 1 passed the size check: negative shift count'),
    # found by the 10-minute campaign: OU key with a 1-4-bit modulus and prime size 1 passed the size check: negative shift count
    ('ahe_key', bytes.fromhex('53485052010002020000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000400000002b134328bd8d42ca483a165fb73425e469ef2ba141b655f53af4e5dc5b3baa34be41b1d8a8fdb883749b8a4729e0db767d460a567274f092e0f815d167278da54000000055cf1f55f141a95a984d50f4880e6c60804878322d4ebe25a9b084b0c69097ffa97b6921a704b3d21df97cb2fcfc355eca4c050d6bededc608fc771c2d48b76540000000eeebfd642b17a77172d41ff7bab4d59646d0f25a87ef751534a96467bf44d56543d1c1e8e03698f9365e0f0c788bf1aeebfe3639ba757eb41eb7047c44a43d1aab000000a000000017000000bd67015440b0e7e07ea636f6030017fe0053'), r"", 'OU key with a 1-4-bit modulus and prime size 1 passed the size check: negative shift count'),
    # found by the 10-minute campaign: CKKS secret key with coefficient -2^31: ConfigError from the key class, not SerializationError
    ('ckks', bytes.fromhex('534850520100020359014f3c00d339859877dae4644920e7ffffffffffffffff0000000001000000ffffffff00000000000600000001000000ffffffff0000000001000000010000000100000000000000010000000000000001000000ffffffff0000000000000000ffffffff01000000ffffffff01000000ffffffff0100000000000000000000000000000000000000ffffffff0100000000000000010000000000800001000000ffffffff0000005348505201000503400000000381f5ffffffff030081ebffffff00fff881e4ffffff00000001f9ffffffff030000000000000070429a9999999999094000ffffffffffffff00000000ffffffff000000000100000000000000010000000000000001000000ffffffff'), r"", 'CKKS secret key with coefficient -2^31: ConfigError from the key class, not SerializationError'),
]


def signature(exc: BaseException) -> str:
    """"<type>: <innermost shaper function>: <message>" of a finding."""
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/shaper/" in f.filename.replace("\\", "/")] or frames
    return f"{type(exc).__name__}: {inner[-1].name if inner else ''}: {exc}"


def known(name: str, exc: BaseException) -> bool:
    sig = signature(exc)
    return any(t == name and re.search(pattern, sig) for t, _, pattern, _ in KNOWN_FINDINGS)
