"""`shaper fhe` on the active engine, from the command line, with one party that deviates: each
party is its own process over a parties file (mutual TLS), the deviating one running the same
CLI with its own code changed (a patch applied before `shaper.cli.main`), the others unchanged.
At 2 and 3 parties every honest party exits with status 2 and a message that names what failed
(and the culprit where a range proof fails), and writes no output:

=====================================  ========================================================
deviation (the last party, or the      what stops it
input owner)
=====================================  ========================================================
an input coefficient one above its     the range proof of the owner's coefficients, naming it
checked bound (and one far above)
a term added to its share of c_0       the check that c_0 − (−a·[s] + [m]) is the errors every
(the input owner)                      party committed, in every limb: no ciphertext is written
a term added to a share of the         the MAC check of the opening (to every party, or to the
decryption's opening                   recipient before it unmasks)
a term added to a share of the         the same check of the public key's b: no key directory
public key's opening                   is written
=====================================  ========================================================
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None
                                or os.environ.get("SHAPER_NATIVE", "").lower() in ("off", "0", "no", "false"),
                                reason="the active engine's OT extension needs the native extension")

PARAMS = ["--params", "2048:50,40,40:50:40", "--insecure"]
BOUND = 2.0

# each patch runs in the deviating party's process before the CLI
OWNER_BEYOND = """
import numpy as np
from shaper.protocols.active import ranges
import shaper.protocols.threshold_ckks.inputs as inputs
ranges.refuse_outside = lambda *a: None          # it skips its own refusal
encode = inputs.ckks.Encoder.slots_to_coefficients
def wide(self, values):
    m = encode(self, values)
    m[0] = (inputs.coefficient_bound(self.params.scale, {bound}) + {excess}) / self.params.scale
    return m
inputs.ckks.Encoder.slots_to_coefficients = wide
"""

SHARE_OFFSET = """
import numpy as np
from shaper.protocols.threshold_ckks import polys
real = polys.SharedRows.open
def shifted(self, what, to=None, **kw):
    if what.startswith({what!r}):
        self = polys.SharedRows(self.engine, self.share.copy(), self.mac, self.primes)
        flat = self.share.reshape(-1)
        flat[3] = (int(flat[3]) + 1) % self.primes[0]
    return real(self, what, to, **kw)
polys.SharedRows.open = shifted
from shaper.protocols.active import ActiveEngine
real_sum = ActiveEngine.open_sum
def shifted_sum(self, residues, moduli, phase):  # a share that carries the party's own error
    if phase.startswith({what!r}):
        residues = residues.copy()
        flat = residues.reshape(-1)
        flat[3] = (int(flat[3]) + 1) % int(moduli[3 % residues.shape[-1]])
    return real_sum(self, residues, moduli, phase)
ActiveEngine.open_sum = shifted_sum
"""


def _names(n):
    return [f"p{i}" for i in range(n)]


def _parties_file(tmp_path, names):
    from tests.test_cli import _parties_file as write

    write(tmp_path, *names)
    return str(tmp_path / "parties.toml")


def _all(parties, names, args_for, deviant=None, patch=""):
    """Every party's `shaper fhe ...` as its own process; the deviant's with ``patch`` first."""
    procs = []
    for me in names:
        argv = ["fhe", *args_for(me), "--parties", parties, "--me", me]
        if me == deviant:
            code = textwrap.dedent(patch) + f"\nimport sys\nfrom shaper.cli import main\nsys.exit(main({argv!r}))\n"
            cmd = [sys.executable, "-c", code]
        else:
            cmd = [sys.executable, "-m", "shaper", *argv]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


@pytest.fixture(scope="module", params=[2, 3])
def active_keys(request, tmp_path_factory):
    """An active key for 2 or 3 parties over a parties file, and one joint input of p0's."""
    tmp_path = tmp_path_factory.mktemp(f"active-cli-{request.param}")
    names = _names(request.param)
    parties = _parties_file(tmp_path, names)
    res = _all(parties, names, lambda me: ["keygen", "--out", str(tmp_path / me), "--security", "active",
                                           "--method", "local", *PARAMS])
    assert [r[0] for r in res] == [0] * len(names), res
    np.savetxt(tmp_path / "x.csv", [1.5, -2.0, 0.5], delimiter=",")
    return tmp_path, names, parties


def _encrypt(tmp_path, names, parties, deviant=None, patch="", out="x"):
    return _all(parties, names, lambda me: ["encrypt", "--keys", str(tmp_path / me), "--out",
                                            str(tmp_path / f"{out}-{me}.ct"), "--bound", str(BOUND), "--insecure",
                                            *(["--input", str(tmp_path / "x.csv")] if me == names[0] else [])],
                deviant, patch)


def _honest_stopped(res, names, deviant, words):
    for name, (code, out, err) in zip(names, res):
        if name == deviant:
            continue
        assert code == 2, (name, code, out, err)
        assert words in err, (name, err)


@pytest.mark.parametrize("excess", [1, 1 << 30], ids=["one-above", "far-above"])
def test_an_input_owner_beyond_its_checked_bound_is_refused_naming_it(active_keys, excess):
    tmp_path, names, parties = active_keys
    res = _encrypt(tmp_path, names, parties, names[0], OWNER_BEYOND.format(bound=BOUND, excess=excess), "beyond")
    _honest_stopped(res, names, names[0], "p0")
    assert any("range proof failed" in err for code, out, err in res[1:]), res
    assert not any((tmp_path / f"beyond-{me}.ct").exists() for me in names[1:])


def test_an_owner_that_adds_a_term_to_its_share_of_c0_is_caught(active_keys):
    tmp_path, names, parties = active_keys
    res = _encrypt(tmp_path, names, parties, names[0], SHARE_OFFSET.format(what="input-"), "c0")
    _honest_stopped(res, names, names[0], "the error it committed")
    assert not any((tmp_path / f"c0-{me}.ct").exists() for me in names)


@pytest.mark.parametrize("to", [None, "p0"], ids=["to-all", "to-p0"])
def test_a_term_added_to_a_decryption_share_is_caught(active_keys, to):
    tmp_path, names, parties = active_keys
    res = _encrypt(tmp_path, names, parties)
    assert [r[0] for r in res] == [0] * len(names), res
    deviant = names[-1]  # never the recipient
    res = _all(parties, names, lambda me: ["decrypt", "--keys", str(tmp_path / me), "--ciphertext",
                                           str(tmp_path / f"x-{me}.ct"), "--out", str(tmp_path / f"dec-{me}.csv"),
                                           "--insecure", *(["--to", to] if to else [])],
               deviant, SHARE_OFFSET.format(what="decryption"))
    _honest_stopped(res, names, deviant, "MAC check failed")
    assert not any((tmp_path / f"dec-{me}.csv").exists() for me in names)
    # the same parties, all honest, decrypt it
    res = _all(parties, names, lambda me: ["decrypt", "--keys", str(tmp_path / me), "--ciphertext",
                                           str(tmp_path / f"x-{me}.ct"), "--out", str(tmp_path / f"ok-{me}.csv"),
                                           "--insecure"])
    assert [r[0] for r in res] == [0] * len(names), res
    assert np.allclose(np.loadtxt(tmp_path / "ok-p0.csv", delimiter=",")[:3], [1.5, -2.0, 0.5], atol=1e-3)


def test_a_term_added_to_a_public_key_share_is_caught_and_no_key_is_written(active_keys):
    tmp_path, names, parties = active_keys
    deviant = names[-1]
    res = _all(parties, names, lambda me: ["keygen", "--out", str(tmp_path / f"bad-{me}"), "--security", "active",
                                           "--method", "local", *PARAMS],
               deviant, SHARE_OFFSET.format(what="pk"))
    _honest_stopped(res, names, deviant, "the error it committed")
    assert not any((tmp_path / f"bad-{me}").exists() for me in names[:-1])
