"""The command line: demo, keygen, info, and the README/CI contract."""

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shaper.cli import main
from shaper.crypto import ckks
from shaper.crypto.serialization import load_key
from shaper.errors import ConfigError
from shaper.protocols import threshold_ckks as tc

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only

ROOT = Path(__file__).resolve().parents[1]


def test_lr_demo_quick_run(tmp_path):
    out, report, events = tmp_path / "demo.json", tmp_path / "report.html", tmp_path / "events.jsonl"
    code = main(["demo", "--key-bits", "768", "--json", str(out), "--report", str(report), "--events", str(events)])
    summary = json.loads(out.read_text())
    assert code == 0 and abs(summary["auc"] - summary["sklearn_auc"]) <= 0.01
    assert summary["bytes"] > 0 and summary["seconds"] > 0 and summary["crypto_operations"]["encryptions"] > 0
    from shaper.jobs.lr import dataset, psi_available

    shared = len(dataset()["shared"])
    assert summary["rows_aligned"] == shared
    if psi_available():  # partly different patients, lined up by PSI (skipped without the extension)
        from shaper.protocols.psi import resolve

        assert shared < min(summary["rows_held"].values())
        assert summary["psi_protocol"] == resolve("auto")  # align's default: okvs where the extension has it
    assert report.read_text().count("<polyline") == 2
    kinds = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert kinds.count("epoch") == 10 and kinds[-1] == "done"


def test_he_demo_runs_and_checks_its_result(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert main(["demo-he", "--bits", "512", "--rows", "60", "--cols", "20", "--density", "0.2", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["correct"] is True and summary["nnz"] > 0
    assert summary["packed_bytes"] < summary["unpacked_bytes"]
    assert "equals numpy" in capsys.readouterr().out


def test_he_demo_with_ou(tmp_path):
    assert main(["demo-he", "--scheme", "ou", "--bits", "768", "--rows", "30", "--cols", "10", "--density", "0.3"]) == 0


def _parties_file(tmp_path, *names):
    """Certificates and ``tmp_path/parties.toml`` for local parties ``names`` on free ports."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = sock.getsockname()[1]
    sock.close()
    assert main(["certs", "--parties", *names, "--out", str(tmp_path / "certs"),
                 "--write-parties", str(tmp_path / "parties.toml"), "--base-port", str(base)]) == 0


def _two_hosts(tmp_path, *extra, rows=(range(200), range(200))):
    """Run `shaper lr train` for a bank (host) and a shop (guest) on the breast-cancer values as
    published (4 + 4 columns; by default 200 rows, ids aligned; ``rows``: each party's rows of
    the data, in its file's order); returns [(exit code, stdout, stderr)]."""
    import pandas as pd
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    ids = np.array([f"c{i}" for i in range(len(y))])
    h, g = (np.asarray(list(r)) for r in rows)
    pd.DataFrame({"id": ids[h], **{f"h{j}": X[h, j] for j in range(4)}}).to_csv(tmp_path / "host.csv", index=False)
    pd.DataFrame({"id": ids[g], **{f"g{j}": X[g, 4 + j] for j in range(4)}, "label": y[g]}).to_csv(
        tmp_path / "guest.csv", index=False)
    _parties_file(tmp_path, "bank", "shop")
    common = ["--parties", str(tmp_path / "parties.toml"), "--epochs", "2", "--batch-size", "50", "--key-bits", "768",
              *extra]
    procs = [
        subprocess.Popen([sys.executable, "-m", "shaper", "lr", "train", "--role", "host", "--me", "bank",
                          "--data", str(tmp_path / "host.csv"), "--out", str(tmp_path / "bank.npz")] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, "-m", "shaper", "lr", "train", "--role", "guest", "--me", "shop",
                          "--data", str(tmp_path / "guest.csv"), "--label-column", "label",
                          "--out", str(tmp_path / "shop.npz"), "--events", str(tmp_path / "ev.jsonl")] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def test_lr_train_on_two_hosts_from_csv_as_published(tmp_path):
    """Unscaled columns, default learning rate: both train; each reports what it may know."""
    (code_h, out_h, err_h), (code_g, out_g, err_g) = _two_hosts(tmp_path)
    assert code_h == 0 and code_g == 0, (err_h, err_g)
    assert np.load(tmp_path / "bank.npz")["coef"].shape == (4,)
    shop = np.load(tmp_path / "shop.npz")
    assert shop["coef"].shape == (4,) and shop["intercept"].shape == (1,)
    assert (tmp_path / "ev.jsonl").read_text().count('"epoch"') >= 2
    for out in (out_h, out_g):
        assert "epoch 2/2: train loss" in out and "trained 2 epochs in" in out and "MB sent" in out
        assert re.search(r"learning rate \d", out) and "final train loss" in out
    losses = [float(m) for m in re.findall(r"final train loss ([0-9.]+)", out_h + out_g)]
    assert len(losses) == 2 and losses[0] == losses[1] < 0.25  # both learn the same monitored loss


def test_lr_train_with_a_diverging_learning_rate_fails_at_both_hosts(tmp_path):
    results = _two_hosts(tmp_path, "--learning-rate", "50")
    for code, out, err in results:
        assert code == 2, (out, err)
        line = err.strip().splitlines()[-1]
        assert line.startswith("shaper lr train: error: ") and "makes training diverge" in line
        assert "learning_rate='auto'" in line
    assert not (tmp_path / "bank.npz").exists() and not (tmp_path / "shop.npz").exists()


NEEDS_NATIVE = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                  reason="ECDH PSI runs in the native extension only")


@NEEDS_NATIVE
@pytest.mark.parametrize("protocol", ["auto", "okvs", "ecdh", "fnp"])
def test_lr_train_aligns_partly_different_customers_by_psi(tmp_path, protocol):
    """Two files whose ids overlap by 80 %, each in its own order: --align auto (the OT-based okvs,
    named in the output), okvs, ecdh or fnp trains the model that training on the intersection
    aligned beforehand (sorted by id) trains, within the fixed-point rounding of its masks (fresh
    from the CSPRNG each run: --seed fixes the batch order only)."""
    import random

    from shaper.protocols.psi import resolve

    rng = random.Random(5)
    shared = rng.sample(range(569), 200)
    others = [i for i in range(569) if i not in set(shared)]
    host = shared + others[:50]
    guest = shared + others[50:100]
    rng.shuffle(host)
    rng.shuffle(guest)
    seed = ["--seed", "ab" * 32]
    results = _two_hosts(tmp_path, "--align", protocol, *seed, rows=(host, guest))
    assert all(code == 0 for code, _, _ in results), results
    ran = resolve(protocol)  # auto: okvs where the extension has it
    for _, out, _ in results:
        assert f"training rows aligned by PSI ({ran}): 200 of 250 ids are shared" in out
    aligned = [np.load(tmp_path / name) for name in ("bank.npz", "shop.npz")]
    inter = sorted(shared, key=lambda i: f"c{i}")
    (tmp_path / "pre").mkdir()
    assert all(code == 0 for code, _, _ in _two_hosts(tmp_path / "pre", *seed, rows=(inter, inter)))
    plain = [np.load(tmp_path / "pre" / name) for name in ("bank.npz", "shop.npz")]
    for a, p in zip(aligned, plain):
        np.testing.assert_allclose(a["coef"], p["coef"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(aligned[1]["intercept"], plain[1]["intercept"], rtol=1e-4, atol=1e-4)
    assert np.max(np.abs(aligned[0]["coef"])) > 0.05  # a model was learnt (the tolerance is not vacuous)


@NEEDS_NATIVE
def test_psi_command_writes_aligned_rows_at_both_hosts(tmp_path):
    _parties_file(tmp_path, "a", "b")
    (tmp_path / "a.csv").write_text("email,region\n" + "".join(f" U{i}@x.org ,r{i % 3}\n" for i in range(0, 60, 2)))
    (tmp_path / "b.csv").write_text("email,score\n" + "".join(f"u{i}@x.org,{i}\n" for i in range(0, 60, 3)))
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "psi", "--parties", str(tmp_path / "parties.toml"),
                               "--me", me, "--data", str(tmp_path / f"{me}.csv"), "--id-column", "email",
                               "--strip", "--casefold", "--output", str(tmp_path / f"{me}.out.csv")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    a = (tmp_path / "a.out.csv").read_text().splitlines()
    b = (tmp_path / "b.out.csv").read_text().splitlines()
    assert a[0] == "email,region" and b[0] == "email,score" and len(a) == len(b) == 11  # ids 0, 6, ..., 54
    assert [r.split(",")[0].strip().lower() for r in a[1:]] == [r.split(",")[0] for r in b[1:]]
    assert "30 ids here, 20 at the peer; 10 in common" in outs[0][0]


@NEEDS_NATIVE
@pytest.mark.parametrize("protocol", ["auto", "fnp"])
def test_psi_command_labelled_brings_the_other_partys_column(tmp_path, protocol):
    """Labelled PSI from the command line (auto: OT-based okvs; or FNP): the learner (a) receives,
    for each shared id, the text of the other party's --payload-column, written as a new column of
    its aligned rows."""
    _parties_file(tmp_path, "a", "b")
    (tmp_path / "a.csv").write_text("id,x\n" + "".join(f"k{i},{i}\n" for i in range(0, 30, 2)))
    (tmp_path / "b.csv").write_text("id,tier\n" + "".join(f"k{i},tier-{i % 4}\n" for i in range(0, 30, 3)))
    common = ["--parties", str(tmp_path / "parties.toml"), "--id-column", "id", "--protocol", protocol, "--to", "a",
              "--key-bits", "768", "--payload-bytes", "8", "--payload-column", "tier"]
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "psi", "--me", me, "--input", str(tmp_path / f"{me}.csv"),
                               *common, *(["--output", str(tmp_path / "a.out.csv")] if me == "a" else [])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lines = (tmp_path / "a.out.csv").read_text().splitlines()
    assert lines[0] == "id,x,tier"
    assert lines[1:] == sorted(f"k{i},{i},tier-{i % 4}" for i in range(0, 30, 6))  # sorted by id
    assert f"({'okvs' if protocol == 'auto' else 'fnp'}," in outs[0][0]  # the summary names what ran


def test_psi_row_files_read_alike_with_and_without_pyarrow(tmp_path):
    """Arrow columns (compact, used when pyarrow is installed) and lists of str (the fallback)
    give the same cells, ids and written rows: quotes, commas, a BOM, empty cells, leading zeros."""
    pytest.importorskip("pyarrow")
    from shaper.jobs.psi import RowFile

    path = tmp_path / "rows.csv"
    path.write_bytes("\ufeffid,name,n\n007,\"Lee, Ann\",\n\"\",x,3\n 8 ,\"say \"\"hi\"\"\",\n9,é,1\n".encode())
    arrow, lists = RowFile.read(path), RowFile._read_csv_lists(path)
    assert arrow.header == lists.header == ["id", "name", "n"] and len(arrow) == len(lists) == 4
    assert list(arrow.texts(["id"])) == list(lists.texts(["id"])) == ["007", "", " 8 ", "9"]
    assert arrow.ids(["id"]).to_pylist() == list(lists.ids(["id"]))  # an Arrow column, hashed in place
    assert list(arrow.texts(["id", "name"])) == list(lists.texts(["id", "name"]))
    assert arrow.texts(["name"])[2] == lists.texts(["name"])[2] == 'say "hi"'
    rows = np.array([3, 0, 2])
    for table, name in ((arrow, "a.csv"), (lists, "b.csv")):
        table.write(tmp_path / name, rows)
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()
    arrow.write(tmp_path / "c.parquet", rows)
    back = RowFile.read(tmp_path / "c.parquet")
    assert list(back.texts(["id", "name", "n"])) == [("9", "é", "1"), ("007", "Lee, Ann", ""), (" 8 ", 'say "hi"', "")]
    (tmp_path / "ragged.csv").write_text("id,v\n1,2\n3\n")
    with pytest.raises(ConfigError, match="rows all have the header's 2 cells"):
        RowFile.read(tmp_path / "ragged.csv")


def test_keygen_writes_0600_private_key(tmp_path):
    prefix = tmp_path / "bank"
    assert main(["keygen", "--bits", "512", "--out", str(prefix)]) == 0
    key = tmp_path / "bank.key.bin"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    sk = load_key(key)
    pk = load_key(tmp_path / "bank.pub.bin")
    assert sk.public_key == pk


def test_info_and_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "shaper", "info"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "kernel" in proc.stdout


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^pip install \"\.\[test\]\".*$", ci, re.M).group(0)
    assert command in readme
    assert "shaper demo" in readme


def test_lr_train_says_when_it_resumes(tmp_path):
    ck = str(tmp_path / "ck")  # shared by both runs; each run makes its own certificates and ports
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    for code, out, err in _two_hosts(tmp_path / "first", "--checkpoint-dir", ck):
        assert code == 0, err
    results = _two_hosts(tmp_path / "second", "--checkpoint-dir", ck, "--resume", "--epochs", "3")
    for code, out, err in results:
        assert code == 0, err
        assert "resuming from the checkpoint of epoch 2 (of 3)" in out and "epoch 3/3: train loss" in out
        assert "resumed from the checkpoint of epoch 2" in out and "epoch 1/3" not in out


FHE_PARAMS = ["--params", "2048:50,40,40:50:40", "--insecure"]


@NEEDS_NATIVE
def test_fhe_keygen_encrypt_and_decrypt_on_two_hosts(tmp_path):
    """`shaper fhe` over a parties file: joint keys, a joint encryption of one party's values,
    every party's own evaluation, a decryption to one party; a party that does not consent (or
    cannot account for the ciphertext) stops it for everyone, and a short --digest never starts."""
    _parties_file(tmp_path, "bank", "shop")
    common = ["--parties", str(tmp_path / "parties.toml")]

    def both(args_for):
        procs = [subprocess.Popen([sys.executable, "-m", "shaper", "fhe", *args_for(me), *common, "--me", me],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("bank", "shop")]
        outs = [p.communicate(timeout=300) for p in procs]
        return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]

    res = both(lambda me: ["keygen", "--out", str(tmp_path / me), "--rotations", "1", *FHE_PARAMS])
    assert [r[0] for r in res] == [0, 0], res
    assert "relinearisation key" in res[0][1] and "MB sent" in res[0][1]
    for f in ("secret-share.shpr", "ledger.json"):
        assert stat.S_IMODE((tmp_path / "bank" / f).stat().st_mode) == 0o600
    x = np.linspace(-1, 1, 300)
    np.save(tmp_path / "x.npy", x)
    res = both(lambda me: ["encrypt", "--keys", str(tmp_path / me), "--out", str(tmp_path / f"x-{me}.ct"), "--insecure",
                           *(["--input", str(tmp_path / "x.npy")] if me == "shop" else [])])
    assert [r[0] for r in res] == [0, 0], res
    assert (tmp_path / "x-bank.ct").read_bytes() == (tmp_path / "x-shop.ct").read_bytes()
    for me in ("bank", "shop"):  # every party computes y itself
        assert main(["fhe", "eval", "--keys", str(tmp_path / me), "--circuit", "square,rotate:1", "--insecure",
                     "--ciphertext", str(tmp_path / f"x-{me}.ct"), "--out", str(tmp_path / f"y-{me}.ct")]) == 0
    assert (tmp_path / "y-bank.ct").read_bytes() == (tmp_path / "y-shop.ct").read_bytes()
    res = both(lambda me: ["decrypt", "--keys", str(tmp_path / me), "--ciphertext", str(tmp_path / f"y-{me}.ct"),
                           "--to", "bank", "--out", str(tmp_path / f"{me}.csv"), "--insecure"])
    assert [r[0] for r in res] == [0, 0], res
    got = np.loadtxt(tmp_path / "bank.csv", delimiter=",")
    want = np.roll(np.concatenate([x, np.zeros(1024 - 300)]) ** 2, -1)
    assert got.shape == (1024,) and np.max(np.abs(got - want)) < 0.05
    assert not (tmp_path / "shop.csv").exists() and "nothing learnt here" in res[1][1]
    assert "flooded its share" in res[0][1] and "decryptions left" in res[0][1]
    # a ciphertext one party made alone: every party refuses, nothing is opened
    keys = tc.PublicKeys.load(tmp_path / "bank", insecure=True)
    ckks.save(ckks.encrypt(keys.public, ckks.Encoder(keys.params).encode(x)), tmp_path / "alone.ct")
    res = both(lambda me: ["decrypt", "--keys", str(tmp_path / me), "--ciphertext", str(tmp_path / "alone.ct"),
                           "--insecure"])
    assert [r[0] for r in res] == [2, 2] and all("unknown provenance" in r[2] for r in res), res
    res = both(lambda me: ["decrypt", "--keys", str(tmp_path / me), "--ciphertext", str(tmp_path / f"y-{me}.ct"),
                           "--insecure", *(["--digest", "ab" * 32] if me == "shop" else [])])
    assert [r[0] for r in res] == [2, 2] and all("refused by shop" in r[2] for r in res), res
    assert main(["fhe", "decrypt", *common, "--me", "bank", "--keys", str(tmp_path / "bank"), "--ciphertext",
                 str(tmp_path / "y-bank.ct"), "--digest", "", "--insecure"]) == 2


@NEEDS_NATIVE
def test_fhe_on_the_active_engine_from_the_command_line(tmp_path, capsys):
    """`fhe keygen --security active`: the key carries MAC shares, and encryption, evaluation
    and decryption follow it onto the active engine; a parties file that asks for the passive
    engine is refused with that key."""
    # --method left out: on the active engine it defaults to local (range-checked errors), not exact
    assert main(["fhe", "keygen", "--local", "2", "--out", str(tmp_path / "k"), "--security", "active",
                 *FHE_PARAMS]) == 0
    assert "(local, active engine)" in capsys.readouterr().out
    assert stat.S_IMODE((tmp_path / "k" / "party0" / "secret-macs.npz").stat().st_mode) == 0o600
    (tmp_path / "x.csv").write_text("1.5\n-2\n0.5\n")
    assert main(["fhe", "encrypt", "--local", "2", "--keys", str(tmp_path / "k"), "--input", str(tmp_path / "x.csv"),
                 "--bound", "2", "--out", str(tmp_path / "x.ct"), "--insecure"]) == 0
    assert main(["fhe", "decrypt", "--local", "2", "--keys", str(tmp_path / "k"), "--ciphertext",
                 str(tmp_path / "x.ct"), "--out", str(tmp_path / "x.out.csv"), "--insecure"]) == 0
    assert np.allclose(np.loadtxt(tmp_path / "x.out.csv", delimiter=",")[:3], [1.5, -2, 0.5], atol=1e-3)
    _parties_file(tmp_path, "bank", "shop")  # security = "passive" is refused with an active key
    text = (tmp_path / "parties.toml").read_text()
    (tmp_path / "parties.toml").write_text('security = "passive"\n' + text)
    assert main(["fhe", "decrypt", "--parties", str(tmp_path / "parties.toml"), "--me", "bank", "--keys",
                 str(tmp_path / "k" / "party0"), "--ciphertext", str(tmp_path / "x.ct"), "--insecure"]) == 2
    assert "made on the active engine" in capsys.readouterr().err
    assert main(["fhe", "demo", "--local", "2", "--security", "active", "--method", "local", *FHE_PARAMS]) == 0
    out = capsys.readouterr().out
    assert "active engine" in out and "largest error" in out


@NEEDS_NATIVE
def test_fhe_local_keygen_demo_and_clear_errors(tmp_path, capsys):
    assert main(["fhe", "keygen", "--local", "3", "--out", str(tmp_path / "k"), *FHE_PARAMS]) == 0
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == ["party0", "party1", "party2"]
    assert main(["fhe", "keygen", "--local", "3", "--out", str(tmp_path / "k"), *FHE_PARAMS]) == 2
    assert "already holds key directories" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1.5\n-2\nnan\n")
    assert main(["fhe", "encrypt", "--local", "3", "--keys", str(tmp_path / "k"), "--input", str(tmp_path / "x.csv"),
                 "--bound", "2", "--out", str(tmp_path / "x.ct"), "--insecure"]) == 2
    assert "NaN" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1.5\n-2\n0.5\n")
    assert main(["fhe", "encrypt", "--local", "3", "--keys", str(tmp_path / "k"), "--input", str(tmp_path / "x.csv"),
                 "--bound", "2", "--out", str(tmp_path / "x.ct")]) == 2  # test parameters: only when asked for
    assert "insecure test set" in capsys.readouterr().err and not (tmp_path / "x.ct").exists()
    assert main(["fhe", "encrypt", "--local", "3", "--keys", str(tmp_path / "k"), "--input", str(tmp_path / "x.csv"),
                 "--bound", "2", "--out", str(tmp_path / "x.ct"), "--insecure"]) == 0
    assert main(["fhe", "eval", "--local", "3", "--keys", str(tmp_path / "k"), "--circuit", "square",
                 "--ciphertext", str(tmp_path / "x.ct"), "--out", str(tmp_path / "y.ct"), "--insecure"]) == 0
    capsys.readouterr()
    assert main(["fhe", "decrypt", "--local", "3", "--keys", str(tmp_path / "k"), "--ciphertext",
                 str(tmp_path / "y.ct"), "--out", str(tmp_path / "y.csv"), "--insecure"]) == 0
    assert np.allclose(np.loadtxt(tmp_path / "y.csv", delimiter=",")[:3], [2.25, 4, 0.25], atol=0.05)
    assert main(["fhe", "eval", "--local", "3", "--keys", str(tmp_path / "k"), "--circuit", "cube",
                 "--ciphertext", str(tmp_path / "x.ct"), "--out", str(tmp_path / "z.ct"), "--insecure"]) == 2
    assert "unknown circuit operation 'cube'" in capsys.readouterr().err
    assert main(["fhe", "keygen", "--local", "2", "--out", str(tmp_path / "j"), "--params", "2048:50:50:40"]) == 2
    assert "exceeds the HE Standard" in capsys.readouterr().err  # refused without --insecure, before launching
    assert not (tmp_path / "j").exists()
    assert main(["fhe", "demo", "--parties", "2", *FHE_PARAMS]) == 0
    assert "largest error" in capsys.readouterr().out


FULL_CKKS = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None
                               or os.environ.get("SHAPER_NATIVE", "").lower() in ("off", "0", "no", "false"),
                               reason="N = 2^14 CKKS and the MPC engine need the native extension")


@FULL_CKKS
def test_cnn_plan_and_single_key_demo_with_report(tmp_path, capsys):
    assert main(["cnn", "plan"]) == 0
    out = capsys.readouterr().out
    assert "rotation keys (28)" in out and "ct ct products         24" in out
    report = tmp_path / "r.html"
    assert main(["cnn", "demo", "--single-key", "--images", "3", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "same prediction as plaintext  3/3" in out and "evaluation per image" in out
    text = report.read_text()
    assert text.count("data:image/png;base64,") == 3 and "Confusion matrix" in text
    assert main(["cnn", "demo", "--images", "0"]) == 2
    assert "--images takes 1..1000" in capsys.readouterr().err
    assert main(["cnn", "demo", "--single-key", "--encrypt", "weights"]) == 2
    assert "encrypt takes 'image' and/or 'model'" in capsys.readouterr().err


@FULL_CKKS
def test_cnn_infer_under_a_joint_key_from_fhe_keygen(tmp_path, capsys):
    from shaper.ml import cnn

    keys = tmp_path / "k"
    assert main(["fhe", "keygen", "--local", "2", "--rotations", "cnn", "--method", "local", "--out", str(keys)]) == 0
    capsys.readouterr()
    assert main(["cnn", "infer", "--local-keys", str(keys)]) == 2
    assert "pass the client's --images" in capsys.readouterr().err
    logits = tmp_path / "logits.npy"
    assert main(["cnn", "infer", "--local-keys", str(keys), "--mnist-sample", "4", "--out", str(logits),
                 "--report", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "client party0, model owner party1, evaluator every party" in out and "accuracy" in out
    images = cnn.mnist.sample()[0][:4] / 255.0
    want = cnn.bundled().forward(images)
    got = np.load(logits)
    # the flood's largest slot error over all 8192 slots is about 4.5 std (the bits of logit precision it prints);
    # 1.5x that is 6.75 std, exceeded by any of these 40 logits with probability < 2^-30
    predicted = float(re.search(r"about (-?[0-9.]+) bits of logit precision", out).group(1))
    assert got.shape == (4, 10) and np.array_equal(got.argmax(1), want.argmax(1))
    assert np.max(np.abs(got - want)) < 1.5 * 2.0 ** -predicted + 0.05
    # --reveal label: only the argmax, computed inside the MPC, reaches the client (written as integers);
    # --output label, the spelling of it, works with a deprecation line (--output is the retired --out)
    labels = tmp_path / "labels.csv"
    assert main(["cnn", "infer", "--local-keys", str(keys), "--mnist-sample", "4", "--output", "label",
                 "--out", str(labels)]) == 0
    captured = capsys.readouterr()
    assert "only the argmax" in captured.out and "passive key" in captured.out
    assert "--output is deprecated" in captured.err and "--reveal" in captured.err
    assert np.array_equal(np.loadtxt(labels, dtype=np.int64, delimiter=","), want.argmax(1))
    # with the model in the clear every party evaluates with it (it goes to every party)
    assert main(["cnn", "infer", "--local-keys", str(keys), "--mnist-sample", "2", "--encrypt", "image"]) == 0
    assert "evaluator every party" in capsys.readouterr().out
    assert main(["cnn", "infer", "--local-keys", str(keys), "--mnist-sample", "2", "--evaluator", "party1"]) == 2
    assert "every party evaluates" in capsys.readouterr().err


def _rows_csv(path, X, y=None):
    header = "id," + ",".join(f"f{j}" for j in range(X.shape[1])) + ("" if y is None else ",label")
    lines = [f"r{i}," + ",".join(repr(float(v)) for v in X[i]) + ("" if y is None else f",{int(y[i])}")
             for i in range(len(X))]
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    return path


def test_lr_predict_gives_the_scores_of_the_trained_model(tmp_path, capsys):
    """`shaper lr predict` scores rows with the parts `shaper lr train` wrote, each party's weights
    on its own columns and every party's constant once, and gets the scores the trained model
    gives in the job. (Adding the parts by hand and forgetting the host's constant shifted every
    score: a user's accuracy fell from 0.72 to 0.48 without a word.)"""
    from sklearn.datasets import load_breast_cancer

    from shaper.net import launch
    from tests.ml import jobs as J

    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:300, :8], y[:300]  # the values as published: each party standardises its own columns
    data = _rows_csv(tmp_path / "rows.csv", X, y)
    seed = "ab" * 32  # the same masks and batches in the command and in the job below
    assert main(["lr", "train", "--local", "2", "--data", str(data), "--label-column", "label", "--epochs", "2",
                 "--batch-size", "50", "--key-bits", "768", "--seed", seed, "--out", str(tmp_path / "model.npz")]) == 0
    out = capsys.readouterr().out
    assert "model.host.npz" in out and "model.guest.npz" in out
    assert main(["lr", "predict", "--local", "2", "--weights", str(tmp_path / "model.npz"), "--data", str(data),
                 "--label-column", "label", "--out", str(tmp_path / "scores.csv")]) == 0
    assert "scores of 300 rows written to" in capsys.readouterr().out
    scores = np.loadtxt(tmp_path / "scores.csv", delimiter=",", skiprows=1, usecols=(1, 2))
    columns = np.array_split(np.arange(8), 2)
    host, guest = launch(["host", "guest"], J.scores_job, X, y, columns,
                         {"epochs": 2, "batch_size": 50, "key_bits": 768, "seed": bytes.fromhex(seed)})
    np.testing.assert_allclose(scores[:, 0], guest["z"], atol=5e-3)
    np.testing.assert_allclose(scores[:, 1], 1 / (1 + np.exp(-guest["z"])), atol=2e-3)
    assert np.mean((scores[:, 0] >= 0) == (y == 1)) == np.mean((guest["z"] >= 0) == (y == 1)) > 0.85
    assert abs(host["intercept"]) > 1  # leaving the host's constant out would move every score by it


def test_lr_predict_on_two_hosts_gives_the_guest_the_scores(tmp_path):
    """On real hosts each party scores its own columns with its own part; the guest gets the
    sums and writes them, the host learns nothing back."""
    for code, _, err in _two_hosts(tmp_path):
        assert code == 0, err
    (tmp_path / "again").mkdir()
    _parties_file(tmp_path / "again", "bank", "shop")
    common = ["--parties", str(tmp_path / "again" / "parties.toml")]
    procs = [
        subprocess.Popen([sys.executable, "-m", "shaper", "lr", "predict", "--role", "host", "--me", "bank",
                          "--weights", str(tmp_path / "bank.npz"), "--data", str(tmp_path / "host.csv"), *common],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, "-m", "shaper", "lr", "predict", "--role", "guest", "--me", "shop",
                          "--weights", str(tmp_path / "shop.npz"), "--data", str(tmp_path / "guest.csv"),
                          "--label-column", "label", "--out", str(tmp_path / "scores.csv"), *common],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "learns nothing back" in outs[0][0] and "AUC" in outs[1][0]
    import pandas as pd

    host, guest = pd.read_csv(tmp_path / "host.csv"), pd.read_csv(tmp_path / "guest.csv")
    bank, shop = np.load(tmp_path / "bank.npz"), np.load(tmp_path / "shop.npz")
    want = (host[[f"h{j}" for j in range(4)]].to_numpy() @ bank["coef"] + bank["intercept"][0]
            + guest[[f"g{j}" for j in range(4)]].to_numpy() @ shop["coef"] + shop["intercept"][0])
    got = pd.read_csv(tmp_path / "scores.csv")
    assert list(got.columns) == ["id", "score", "probability"] and list(got["id"]) == list(guest["id"])
    np.testing.assert_allclose(got["score"], want, atol=1e-6)


def test_demo_he_takes_key_bits_and_the_old_bits_with_a_warning(tmp_path, capsys):
    out = tmp_path / "he.json"
    assert main(["demo-he", "--key-bits", "512", "--rows", "30", "--cols", "10", "--density", "0.3",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["key_bits"] == 512
    assert main(["demo-he", "--bits", "512", "--rows", "30", "--cols", "10", "--density", "0.3"]) == 0
    assert "--bits is deprecated" in capsys.readouterr().err
