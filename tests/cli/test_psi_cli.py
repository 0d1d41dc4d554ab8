"""``shaper psi`` shows where a long run stands: every step and the protocol's counts on stderr,
as lines when stderr is a log (a bar on a terminal)."""

import io
import subprocess
import sys

import pytest

from shaper.jobs.psi import PsiProgress

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only


def _phase(name, status, **extra):
    return {"event": "phase", "phase": name, "status": status, **extra}


def test_a_log_gets_each_step_and_a_stage_line_at_its_start_and_end():
    out = io.StringIO()
    with PsiProgress("bank", out, live=False, every=3600) as progress:
        progress.describe("intersect", "private set intersection of 400,000 ids (ecdh)")
        progress(_phase("intersect", "start"))
        for done in range(65_536, 400_000, 65_536):
            progress({"event": "psi", "stage": "blind", "done": done, "total": 400_000})
        progress({"event": "psi", "stage": "blind", "done": 400_000, "total": 400_000})
        progress(_phase("intersect", "done", seconds=14.2, bytes=0, items=400_000))
    assert out.getvalue().splitlines() == [
        "bank: private set intersection of 400,000 ids (ecdh) ...",
        "bank: blinding the peer's ids: 65,536 / 400,000",  # the first count at once, then every hour here
        "bank: blinding the peer's ids: 400,000 / 400,000",
        "bank: private set intersection of 400,000 ids (ecdh): done in 14.2 s",
    ]
    out = io.StringIO()
    with PsiProgress("bank", out, live=False, every=0) as progress:
        for done in (4096, 8192, 8192, 9000):
            progress({"event": "psi", "stage": "decrypt", "done": done, "total": 9000})
    assert len(out.getvalue().splitlines()) == 3  # every change, when the interval is zero


def test_both_hosts_log_the_steps_and_counts_of_a_run(job):
    """Two `shaper psi` processes whose stderr is a pipe (no terminal): each logs reading,
    connecting, the intersection with its protocol counts, and writing (FNP, which needs no native
    extension: the client encrypts and decrypts, the server evaluates)."""
    a = job.csv("bank.csv", "id,x\n" + "".join(f"k{i},{i}\n" for i in range(0, 60, 2)))
    b = job.csv("shop.csv", "id,y\n" + "".join(f"k{i},{i}\n" for i in range(0, 60, 3)))
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "psi", "--parties", str(job.parties), "--me", me,
                               "--data", str(data), "--id-column", "id", "--protocol", "fnp", "--key-bits", "768",
                               "--out", str(job.root / f"{me}.out.csv")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me, data in (("bank", a), ("shop", b))]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    for me, rows, (stdout, stderr) in zip(("bank", "shop"), (30, 20), outs):
        assert "in common" in stdout
        for line in ("reading the rows", f"{rows} rows in", "connecting to the peer",
                     f"private set intersection of {rows} ids (fnp) ...", f"private set intersection of {rows} ids (fnp): done in",
                     "writing the aligned rows: done in"):
            assert f"{me}: " + line in stderr, stderr
    client, server = outs[0][1], outs[1][1]  # the party of lower index is FNP's client
    assert "bank: encrypting polynomials: " in client and "bank: decrypting results: 20 / 20" in client
    assert "shop: evaluating polynomials: 20 / 20" in server
