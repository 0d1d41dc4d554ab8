"""The Bristol Fashion parser checks the sizes a file declares against its text before it
allocates anything of that size."""

import tracemalloc

import pytest

from shaper.circuits import bristol
from shaper.circuits.bristol import CircuitFormatError


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("wires", [1 << 30, (1 << 30) - 1, 1 << 20, 4])
def test_a_file_declaring_more_wires_than_its_gates_write_is_refused_before_allocating(wires):
    text = f"1 {wires}\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n"  # one AND gate: three wires can exist

    def parse():
        with pytest.raises(CircuitFormatError, match=f"declares {wires} wires.*at most 3"):
            bristol.parse(text, "huge")

    assert _peak_bytes(parse) < 8 << 20


def test_a_file_declaring_2_to_the_30_input_bits_is_refused_before_allocating():
    bits = (1 << 30) - 2
    text = f"1 {1 << 30}\n1 {bits}\n1 1\n\n2 1 0 1 {bits} AND\n"

    def parse():
        with pytest.raises(CircuitFormatError, match="input bits is beyond"):
            bristol.parse(text, "wide")

    assert _peak_bytes(parse) < 8 << 20


def test_a_file_declaring_more_gates_than_it_has_is_refused():
    with pytest.raises(CircuitFormatError, match="header says 1073741824 gates, the file has 1"):
        bristol.parse(f"{1 << 30} 3\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n", "gates")


def test_circuits_that_fit_still_parse():
    c = bristol.parse("1 3\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n", "and")
    assert c.wires == 3 and c.and_gates == 1
    aes = bristol.load(bristol.resolve("aes_128.txt"))
    assert aes.wires > 30000 and aes.and_gates == 6400
