"""``shaper mpc run``: a --local job as processes over TLS, a killed party, and input errors
named before a job starts."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from shaper.cli import main
from shaper.errors import PartyError
from shaper.net import launch

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only

NEEDS_NATIVE = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                  reason="OT extension runs in the native extension only")


@NEEDS_NATIVE
def test_local_run_prints_every_operation(capsys):
    code = main(["mpc", "run", "--local", "3", "--count", "2000", "--moduli", "2305843009213693951,17"])
    out = capsys.readouterr().out
    assert code == 0
    for op in ("ot", "triples-61", "bit-triples", "gaussian", "ternary", "b2a-61", "b2a", "t2a", "a2b"):
        assert re.search(rf"party0: {op}\s+[0-9,]+ /s", out), op
    assert "sample std" in out


def _dies(session):
    from shaper.protocols import OtTriples
    from shaper.protocols.additive import AdditiveEngine

    e = AdditiveEngine(session, triple_source=OtTriples(), frac_bits=0)
    if session.index == 2:
        os._exit(3)  # killed mid-job
    return e.gaussian(1000, 17).reveal()


@NEEDS_NATIVE
def test_a_killed_party_fails_the_others_fast():
    with pytest.raises(PartyError, match="party2"):
        launch(4, _dies, timeout=120)


def test_input_errors_are_named(capsys):
    assert main(["mpc", "run", "--local", "17"]) == 2
    assert "--local takes 2..16 parties" in capsys.readouterr().err
    assert main(["mpc", "run", "--local", "2", "--ops", "ot,teleport"]) == 2
    assert "unknown operation(s) teleport" in capsys.readouterr().err
    assert main(["mpc", "run", "--local", "2", "--moduli", "12"]) == 2
    assert "modulus 12 must be odd" in capsys.readouterr().err
    assert main(["mpc", "run"]) == 2
    assert "--parties FILE and --me NAME" in capsys.readouterr().err
