"""Every Python parser, fed mutated inputs: a documented refusal or a result, nothing else.

A quick, deterministic version of the fuzz campaign (``fuzz/run``; harnesses in
``tests/fuzz/targets.py``): the committed seeds, then a few hundred byte mutations of them per
parser (hypothesis, derandomised, no example database, no shrinking), each allowed 1 s of CPU
time (a slower input is a hang; CPU time, not wall time, so a loaded machine does not fail it). An exception outside the parser's documented types fails the test.

Known findings wait in :data:`KNOWN_FINDINGS` until their fix lands: each is a concrete input,
run as a strict xfail (it fails the suite once it passes, so the entry gets cleared), and random
inputs failing the same way (same exception type, raised in the same function) are not reported
twice. Never skip a whole harness.
"""

from __future__ import annotations

import re
import time
import traceback

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .targets import TARGETS, Finding

#: (target, input, signature, why): one entry per open finding. The signature is a regex over
#: "<exception type>: <function that raised it>: <message>"; random inputs failing that way are
#: not reported again. The lead clears an entry when the fix lands (its xfail then fails as XPASS).
KNOWN_FINDINGS: list[tuple[str, bytes, str, str]] = [
    # src/shaper/crypto/ou.py:106, OUPublicKey.__init__ computes max_int = (1 << (prime_bits - 2)) - 1
    # before _validate() checks prime_bits against n: an OU public key (file or peer) with prime
    # size 0 or 1 raises a bare ValueError ("negative shift count") instead of KeyValidationError ...
    ("ahe_key", bytes.fromhex("5348505201000102400000002b134328bd8d42ca483a165fb73425e469ef2ba141b655f53af4e5dc5b3baa34be41b1d8a8fdb883749b8a4729e0db767d460a567274f092e0f815d1672789a54000000055cf1f55f141a95a984d50f4880e6c60804878322d4ebe25a9b084b0c69097ffa97b6921a704b3d21df97cb2fcfc355eca4c050d6bededc608fc771c2d48b76540000000eeebfd642b17a77172d41ff7bab4d59646d0f25a87ef751534a96467bf44d56543d1c1e8e03698f9365e0f0c788bf1aeebfe3639ba757eb41eb7047c44a43d1a01000000a0000000"),
     r"^ValueError: __init__: negative shift count", "OU prime size 1: ValueError, not KeyValidationError"),
    # ... and with prime size 2^32 - 1 it builds a 2^32-bit integer first (1.1 GiB peak RSS, ~1.3 s
    # of CPU) and only then refuses the key.
    ("ahe_key", bytes.fromhex("5348505201000102400000002b134328bd8d42ca483a165fb73425e469ef2ba141b655f53af4e5dc5b3baa34be41b1d8a8fdb883749b8a4729e0db767d460a567274f092e0f815d1672789a54000000055cf1f55f141a95a984d50f4880e6c60804878322d4ebe25a9b084b0c69097ffa97b6921a704b3d21df97cb2fcfc355eca4c050d6bededc608fc771c2d48b76540000000eeebfd642b17a77172d41ff7bab4d59646d0f25a87ef751534a96467bf44d56543d1c1e8e03698f9365e0f0c788bf1aeebfe3639ba757eb41eb7047c44a43d1affffffffa0000000"),
     r"^Finding: .*CPU time: b'SHPR\\x01\\x00\\x0[12]\\x02", "OU prime size 2^32-1: 1.1 GiB and 1.3 s before refusal"),
    # src/shaper/net/config.py, load_parties: path.read_text() raises UnicodeDecodeError on a
    # parties file that is not UTF-8 (only FileNotFoundError and TOMLDecodeError become ConfigError).
    ("parties", b'[[party]]\nname = "\xb4"\n',
     r"^UnicodeDecodeError: load_parties: ", "non-UTF-8 parties file: UnicodeDecodeError, not ConfigError"),
]

EXAMPLES = 200
CPU_LIMIT_S = 1.0
_NUMBERS = [b"0", b"-1", b"65536", b"1073741824", b"4294967296", b"9223372036854775808",
            b"99999999999999999999", b"1e308", b"nan"]
_INTS = [0, 1, 2**15, 2**16 - 1, 2**30, 2**31 - 1, 2**32 - 1, 2**63, 2**64 - 1]


def mutated(draw: st.DataObject, seeds: list[bytes]) -> bytes:
    if draw.draw(st.integers(0, 9), label="fresh") == 0:
        return draw.draw(st.binary(max_size=256), label="random")
    buf = bytearray(draw.draw(st.sampled_from(seeds), label="seed"))
    for _ in range(draw.draw(st.integers(1, 6), label="mutations")):
        op = draw.draw(st.integers(0, 6), label="op")
        pos = draw.draw(st.integers(0, len(buf)), label="pos")
        if op == 0 and buf:
            buf[pos % len(buf)] ^= 1 << draw.draw(st.integers(0, 7))
        elif op == 1 and buf:
            buf[pos % len(buf)] = draw.draw(st.sampled_from([0, 1, 0x22, 0x7F, 0x80, 0xFF]))
        elif op == 2:
            buf[pos:pos] = draw.draw(st.binary(min_size=1, max_size=8))
        elif op == 3:
            del buf[pos:pos + draw.draw(st.integers(1, 16))]
        elif op == 4:
            del buf[pos:]
        elif op == 5:
            buf[pos:pos + 8] = draw.draw(st.sampled_from(_INTS)).to_bytes(8, "little")
        else:  # text formats: a number in the text becomes an extreme one
            runs = [m.span() for m in re.finditer(rb"\d+", bytes(buf))]
            if runs:
                a, b = draw.draw(st.sampled_from(runs))
                buf[a:b] = draw.draw(st.sampled_from(_NUMBERS))
    return bytes(buf)


def signature(exc: BaseException) -> str:
    """"<type>: <innermost shaper function>: <message>" of a finding."""
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/shaper/" in f.filename.replace("\\", "/")] or frames
    return f"{type(exc).__name__}: {inner[-1].name if inner else ''}: {exc}"


def known(name: str, exc: BaseException) -> bool:
    sig = signature(exc)
    return any(t == name and re.search(pattern, sig) for t, _, pattern, _ in KNOWN_FINDINGS)


def run_one(name: str, data: bytes) -> None:
    """One input through one harness, with the CPU-time limit of a hang."""
    start = time.process_time()
    TARGETS[name].check(data)
    spent = time.process_time() - start
    if spent > CPU_LIMIT_S:
        raise Finding(f"{name}: one input took {spent:.2f} s of CPU time: {data[:64]!r}...")


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_are_parsed_or_refused_by_name(name: str) -> None:
    target = TARGETS[name]
    seeds = target.seeds()
    assert seeds, f"no seeds for {name}"
    for seed in seeds:
        target.check(seed)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutated_inputs_are_parsed_or_refused_by_name(name: str) -> None:
    target = TARGETS[name]
    seeds = target.seeds()

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(draw: st.DataObject) -> None:
        data = mutated(draw, seeds)
        try:
            run_one(name, data)
        except Exception as exc:
            if known(name, exc):
                return
            raise

    one()


@pytest.mark.parametrize("name,data,pattern,why", KNOWN_FINDINGS, ids=[f"{t}-{i}" for i, (t, *_) in
                                                                     enumerate(KNOWN_FINDINGS)])
@pytest.mark.xfail(strict=True, reason="an open fuzz finding (see KNOWN_FINDINGS)")
def test_known_finding_is_fixed(name: str, data: bytes, pattern: str, why: str) -> None:
    try:
        run_one(name, data)
    except Exception as exc:
        assert re.search(pattern, signature(exc)), f"fails differently now: {signature(exc)}"
        raise


def test_every_parser_has_a_harness() -> None:
    assert set(TARGETS) >= {"frames", "channel", "sealed", "ahe_key", "ahe_key_json", "key_file", "ahe_array",
                            "packed_array", "ckks", "parties", "bristol", "table"}
