"""Every Python parser, fed mutated inputs: a documented refusal or a result, nothing else.

A quick, deterministic version of the fuzz campaign (``fuzz/run``; harnesses in
``tests/fuzz/targets.py``): the committed seeds, then a few hundred byte mutations of them per
parser (hypothesis, derandomised, no example database, no shrinking), each allowed 1 s of CPU
time (a slower input is a hang; CPU time, not wall time, so a loaded machine does not fail it). An exception outside the parser's documented types fails the test.

Known findings wait in ``KNOWN_FINDINGS`` (``tests/fuzz/known.py``) until their fix lands: each is a concrete input,
run as a strict xfail (it fails the suite once it passes, so the entry gets cleared), and random
inputs failing the same way (same exception type, raised in the same function) are not reported
twice. Never skip a whole harness.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .known import FIXED_FINDINGS, KNOWN_FINDINGS, known, signature
from .targets import TARGETS, Finding

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


@pytest.mark.once  # the parsers are the same on every kernel: CI's first run only
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


if KNOWN_FINDINGS:  # defined only while findings are open (an empty parameter set would only skip)
    @pytest.mark.parametrize("name,data,pattern,why", KNOWN_FINDINGS, ids=[f"{t}-{i}" for i, (t, *_) in
                                                                         enumerate(KNOWN_FINDINGS)])
    @pytest.mark.xfail(strict=True, reason="an open fuzz finding (see KNOWN_FINDINGS)")
    def test_known_finding_is_fixed(name: str, data: bytes, pattern: str, why: str) -> None:
        try:
            run_one(name, data)
        except Exception as exc:
            assert re.search(pattern, signature(exc)), f"fails differently now: {signature(exc)}"
            raise


@pytest.mark.parametrize("name,data,pattern,why", FIXED_FINDINGS, ids=[f"{t}-{i}" for i, (t, *_) in
                                                                     enumerate(FIXED_FINDINGS)])
def test_fixed_findings_stay_fixed(name: str, data: bytes, pattern: str, why: str) -> None:
    run_one(name, data)  # the parser's documented errors only (run_one raises on anything else)


def test_every_parser_has_a_harness() -> None:
    assert set(TARGETS) >= {"frames", "channel", "sealed", "ahe_key", "ahe_key_json", "key_file", "ahe_array",
                            "packed_array", "ckks", "parties", "bristol", "table"}
