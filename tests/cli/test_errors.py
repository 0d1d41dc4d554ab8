"""Every failure of a ``shaper`` command ends with one line naming the problem, and exit status 2.

That a peer learns of a party's failure "at once" is checked by the cause named in its error (the
failing party's abort, with the kind of its error and the phase), never by how long it took: had
it waited for its connect timeout instead, its error would be the timeout's. What the peer learns
is only that: the failing party's message (a path, column names, a cell value) stays in its own
output.
"""

from shaper.cli import info, main

from .conftest import GUEST_CSV, HOST_CSV, Job


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("shaper lr train: error: "), err
    return lines[0]


def test_lr_train_missing_label_column_is_one_line(tmp_path, capsys):
    job = Job(tmp_path, connect_timeout="1s")  # nobody else runs: the attempt to tell the host ends soon
    data = job.csv("guest.csv", GUEST_CSV.replace("label", "outcome"))
    assert main(job.args("guest", data)) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{data} has no label column 'label'" in line and "'outcome'" in line


def test_lr_train_misaligned_ids_is_one_line_at_both_parties(job):
    shuffled = "\n".join([HOST_CSV.splitlines()[0], *reversed(HOST_CSV.splitlines()[1:])]) + "\n"
    procs = [job.start("host", job.csv("host.csv", shuffled)), job.start("guest", job.csv("guest.csv", GUEST_CSV))]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2, err
        assert "the rows are not aligned with party" in _one_line(err)


def test_lr_train_missing_key_file_is_one_line(job, capsys):
    missing = job.root / "certs" / "nope.key"
    assert main(job.args("host", job.csv("host.csv", HOST_CSV), "--key", str(missing))) == 2
    assert f"TLS private key {missing} does not exist" in _one_line(capsys.readouterr().err)


def test_unexpected_errors_are_one_line_with_a_debug_hint(monkeypatch, capsys):
    def broken(args):
        raise KeyError("kernel")

    monkeypatch.setattr(info, "run_info", broken)
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shaper info: error: internal error (KeyError: 'kernel')" in err
    assert "SHAPER_DEBUG=1" in err
    monkeypatch.setenv("SHAPER_DEBUG", "1")
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().endswith("please report it")


def _finish(proc):
    """The process's stderr once it has exited (the limit is a hang guard, far beyond the jobs'
    60 s connect timeout: a party that waited for it fails the checks below, with its error)."""
    try:
        return proc.communicate(timeout=300)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


ABORTED_AT_START = "aborted: ConfigError (phase 'start-up'); the details are in that party's own output"


def test_peer_learns_at_once_that_the_guest_failed_but_not_its_columns_or_path(job):
    """The guest's data is wrong: it still joins the job to abort it, so the host stops naming
    the guest and the kind of its error (the guest's abort), not at the 60 s connect timeout;
    the guest's file path and column names stay in the guest's own output."""
    host = job.start("host", job.csv("host.csv", HOST_CSV))
    data = job.csv("guest.csv", GUEST_CSV.replace("label", "outcome"))
    guest = job.start("guest", data)
    host_err, guest_err = _finish(host), _finish(guest)
    assert host.returncode == 2 and guest.returncode == 2, host_err + guest_err
    line = host_err.strip().splitlines()[-1]
    assert line == f"shaper lr train: error: party 'shop' {ABORTED_AT_START}", host_err
    assert "outcome" not in host_err and str(data) not in host_err and "g0" not in host_err
    guest_line = _one_line(guest_err)
    assert "no label column 'label'" in guest_line and "'outcome'" in guest_line and str(data) in guest_line


def test_peer_learns_at_once_that_the_host_failed_but_not_its_cell_values(job):
    guest = job.start("guest", job.csv("guest.csv", GUEST_CSV))
    host = job.start("host", job.csv("host.csv", HOST_CSV.replace("id,h0,h1\n", "id,h0,grade\n").replace(
        ",0\n", ",gold\n")))
    guest_err, host_err = _finish(guest), _finish(host)
    assert guest.returncode == 2 and host.returncode == 2, guest_err + host_err
    line = guest_err.strip().splitlines()[-1]
    assert line == f"shaper lr train: error: party 'bank' {ABORTED_AT_START}", guest_err
    assert "grade" not in guest_err and "gold" not in guest_err
    assert "'grade'" in host_err and "not numeric" in host_err


def test_certs_names_the_parties_with_names_and_says_so_when_they_are_missing(tmp_path, capsys):
    """``shaper certs --names NAME...`` (``--parties`` means a parties file everywhere else; the old
    ``--parties NAME...`` still works, with a deprecation line)."""
    assert main(["certs", "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shaper certs: error: pass --names NAME")
    assert main(["certs", "--names", "bank", "shop", "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "shop.pem").exists() and "deprecated" not in capsys.readouterr().err
    assert main(["certs", "--parties", "bank", "shop", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "shop.pem").exists()
    assert "--parties is deprecated and goes in the next release; use --names" in capsys.readouterr().err
    assert main(["certs", "--names", "bank", "--hosts", "shop=10.0.0.2", "--out", str(tmp_path / "c")]) == 2
    assert "not in --names: ['shop']" in capsys.readouterr().err
