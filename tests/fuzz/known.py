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
]


def signature(exc: BaseException) -> str:
    """"<type>: <innermost shaper function>: <message>" of a finding."""
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/shaper/" in f.filename.replace("\\", "/")] or frames
    return f"{type(exc).__name__}: {inner[-1].name if inner else ''}: {exc}"


def known(name: str, exc: BaseException) -> bool:
    sig = signature(exc)
    return any(t == name and re.search(pattern, sig) for t, _, pattern, _ in KNOWN_FINDINGS)
