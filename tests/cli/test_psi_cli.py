"""``shaper psi`` shows where a long run stands: every step and the protocol's counts on stderr,
as lines when stderr is a log (a bar on a terminal)."""

import io
import random
import subprocess
import sys

import pytest

from shaper.errors import ConfigError
from shaper.jobs.psi import PsiOptions, PsiProgress, prepare
from shaper.kernels import okvs as okvs_kernel
from shaper.protocols.psi import resolve

from .conftest import Job

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


def test_a_log_counts_okvs_batches():
    """OT-based PSI reports a count per batch of OKVS clusters, shown as "OKVS batches"."""
    out = io.StringIO()
    with PsiProgress("bank", out, live=False, every=3600) as progress:
        for done in range(1, 5):
            progress({"event": "psi", "stage": "okvs", "done": done, "total": 4})
    assert out.getvalue().splitlines() == ["bank: OKVS batches: 1 / 4", "bank: OKVS batches: 4 / 4"]


def test_auto_is_the_default_and_resolves_as_the_options_need(tmp_path):
    """--protocol auto (the default) is checked as the protocol it runs: labelled PSI resolves to
    okvs where the native core has it (else FNP), the size only or a checkpoint to ECDH."""
    data = tmp_path / "a.csv"
    data.write_text("id,tier\nk1,gold\nk2,silver\n")
    assert PsiOptions(("id",)).protocol == "auto"
    labelled = PsiOptions(("id",), payload_bytes=8, payload_column="tier", to="shop")
    assert labelled.resolved() == ("okvs" if okvs_kernel.available() else "fnp")
    assert len(prepare("bank", data, None, labelled)) == 2
    assert PsiOptions(("id",), cardinality_only=True).resolved() == "ecdh"
    assert PsiOptions(("id",), checkpoint_dir=str(tmp_path)).resolved() == "ecdh"
    assert PsiOptions(("id",), protocol="ecdh", cardinality_only=True).resolved() == "ecdh"


@pytest.mark.parametrize("extra, problem", [
    (["--cardinality-only"], "--protocol okvs cannot tell only the intersection's size"),
    (["--checkpoint-dir", "ck"], "--protocol okvs keeps no checkpoint"),
])
def test_okvs_refuses_what_it_cannot_do_before_connecting(tmp_path, extra, problem):
    """An explicit --protocol okvs with --cardinality-only or --checkpoint-dir stops at
    once, naming the problem and the protocol that does it, before the job connects."""
    job = Job(tmp_path, connect_timeout="1s")  # the peer never comes: abort_job waits 1 s for it
    data = job.csv("bank.csv", "id,y\nk1,1\nk2,2\n")
    out = [] if "--cardinality-only" in extra else ["--out", str(tmp_path / "out.csv")]
    proc = subprocess.run([sys.executable, "-m", "shaper", "psi", "--parties", str(job.parties), "--me", "bank",
                           "--data", str(data), "--id-column", "id", "--protocol", "okvs", *extra, *out],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert problem in proc.stderr and ("--protocol ecdh" in proc.stderr or "--protocol fnp" in proc.stderr)
    assert "connecting to the peer" not in proc.stderr and "reading the rows" not in proc.stderr
    assert proc.stderr.index(problem) < proc.stderr.index("telling the other parties")
    with pytest.raises(ConfigError, match="okvs"):  # the same check, in the job's own terms
        prepare("bank", data, None if "--cardinality-only" in extra else str(tmp_path / "out.csv"),
                PsiOptions(("id",), protocol="okvs", cardinality_only="--cardinality-only" in extra,
                           checkpoint_dir="ck" if "--checkpoint-dir" in extra else None,
                           payload_bytes=8 if "--payload-bytes" in extra else 0, payload_column="y", to="shop"
                           if "--payload-bytes" in extra else "both"))


@pytest.mark.skipif(not okvs_kernel.available(), reason="OT-based PSI runs in the native extension only")
def test_a_default_run_is_okvs_and_gives_the_rows_of_the_set_intersection(job):
    """Two `shaper psi` processes with no --protocol run OT-based okvs: each writes its rows of
    exactly Python's set intersection of the ids, both in the same order (by id), and names the
    protocol in its summary and its progress lines."""
    rng = random.Random(7)
    pool = [f"cust-{v:06d}" for v in rng.sample(range(10**6), 3000)]
    bank_ids, shop_ids = pool[:2000], pool[1200:]  # 800 shared, each side in its own order
    rng.shuffle(bank_ids)
    rng.shuffle(shop_ids)
    a = job.csv("bank.csv", "id,x\n" + "".join(f"{v},{i}\n" for i, v in enumerate(bank_ids)))
    b = job.csv("shop.csv", "id,y\n" + "".join(f"{v},{-i}\n" for i, v in enumerate(shop_ids)))
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "psi", "--parties", str(job.parties), "--me", me,
                               "--data", str(data), "--id-column", "id", "--out", str(job.root / f"{me}.out.csv")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me, data in (("bank", a), ("shop", b))]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    want = sorted(set(bank_ids) & set(shop_ids))
    assert len(want) == 800
    for me, ids, (stdout, stderr) in zip(("bank", "shop"), (bank_ids, shop_ids), outs):
        lines = (job.root / f"{me}.out.csv").read_text().splitlines()
        assert [r.split(",")[0] for r in lines[1:]] == want
        column = "x" if me == "bank" else "y"
        sign = 1 if me == "bank" else -1
        assert lines[0] == f"id,{column}"
        assert all(ids[sign * int(r.split(",")[1])] == r.split(",")[0] for r in lines[1:])  # whole rows
        assert "800 in common (okvs, " in stdout
        assert f"{me}: private set intersection of {len(ids):,} ids (okvs) ..." in stderr
        assert f"{me}: OKVS batches: 1 / 1" in stderr
    assert resolve() == "okvs"
