"""``shaper fl``: --local runs of both modes from one file, a vertical job as three processes over a
parties file, and input errors named before a job starts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from shaper.cli import main

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only


@pytest.fixture()
def bc_csv(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)  # horizontal clients train on features already on one scale
    path = tmp_path / "bc.csv"
    header = "id," + ",".join(f"f{i}" for i in range(X.shape[1])) + ",label"
    rows = [f"{i}," + ",".join(f"{v:.6g}" for v in X[i]) + f",{int(y[i])}" for i in range(len(y))]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("mode", ["vertical", "horizontal"])
def test_local_run_of_every_role(bc_csv, tmp_path, capsys, mode):
    code = main(["fl", "train", "--mode", mode, "--model", "logistic", "--local", "3", "--data", str(bc_csv),
                 "--label-column", "label", "--epochs", "2", "--key-bits", "512", "--validation", str(bc_csv),
                 "--out", str(tmp_path / "fl-model.npz")])  # not into the working directory
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert "per step" in out and "encryption" in out
    aucs = [float(v) for v in re.findall(r"'auc': ([0-9.]+)", out)]
    assert aucs and min(aucs) > 0.95  # scored on its own rows: a working model, not a constant


def test_input_errors_are_named(capsys):
    assert main(["fl", "train", "--mode", "vertical", "--role", "client", "--data", "x.csv"]) == 2
    assert "--mode vertical takes --role guest | host | arbiter" in capsys.readouterr().err
    assert main(["fl", "train", "--mode", "horizontal", "--model", "mlp", "--role", "coordinator",
                 "--parties", "p.toml", "--me", "c", "--data", "x.csv"]) == 2
    assert "holds no data" in capsys.readouterr().err
    assert main(["fl", "train", "--mode", "vertical", "--model", "mlp", "--local", "2", "--data", "x.csv",
                 "--label-column", "y"]) == 2
    assert "x.csv" in capsys.readouterr().err


def test_vertical_job_on_three_hosts_with_a_parties_file(tmp_path):
    """guest, host and arbiter as separate `shaper fl train` processes over mutual TLS, as on
    three machines; the arbiter is started without data."""
    import socket
    import subprocess
    import sys

    import pandas as pd

    X, y = load_breast_cancer(return_X_y=True)
    ids = [f"p{i}" for i in range(len(y))]
    pd.DataFrame({"id": ids, **{f"g{j}": X[:, j] for j in range(5)}, "label": y}).to_csv(tmp_path / "guest.csv",
                                                                                       index=False)
    pd.DataFrame({"id": ids, **{f"h{j}": X[:, 5 + j] for j in range(10)}}).to_csv(tmp_path / "host.csv", index=False)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = sock.getsockname()[1]
    sock.close()
    assert main(["certs", "--parties", "guest", "host", "arbiter", "--out", str(tmp_path / "certs"),
                 "--write-parties", str(tmp_path / "parties.toml"), "--base-port", str(base)]) == 0
    common = ["--mode", "vertical", "--model", "logistic", "--parties", str(tmp_path / "parties.toml"), "--epochs", "2",
              "--batch-size", "128", "--key-bits", "512"]
    roles = {"guest": ["--data", str(tmp_path / "guest.csv"), "--label-column", "label"],
             "host": ["--data", str(tmp_path / "host.csv")], "arbiter": []}
    procs = {name: subprocess.Popen([sys.executable, "-m", "shaper", "fl", "train", "--role", name, "--me", name,
                                     "--out", str(tmp_path / f"{name}.npz"), *common, *extra],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, extra in roles.items()}
    outs = {name: p.communicate(timeout=300) for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, outs[name][1]
    assert "guest: epoch 2/2: train loss" in outs["guest"][0]
    assert "encryption" in outs["host"][0] and "waiting" in outs["arbiter"][0]
    assert np.load(tmp_path / "guest.npz")["coef"].shape == (5,)
    assert np.load(tmp_path / "host.npz")["coef"].shape == (10,)
    assert not (tmp_path / "arbiter.npz").exists()  # the arbiter holds no model


def test_local_needs_two_data_parties(capsys):
    assert main(["fl", "train", "--mode", "vertical", "--local", "1", "--data", "x.csv", "--label-column", "y"]) == 2
    assert "--local takes 2..16 data parties" in capsys.readouterr().err


def test_local_train_writes_the_model_where_out_says(bc_csv, tmp_path, capsys):
    """`--local N --out model.npz` used to train and then write nothing, silently."""
    out = tmp_path / "model.npz"
    assert main(["fl", "train", "--mode", "vertical", "--local", "3", "--data", str(bc_csv), "--label-column",
                 "label", "--epochs", "1", "--key-bits", "512", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for name, cols in (("guest", 10), ("host-1", 10), ("host-2", 10)):
        part = np.load(tmp_path / f"model.{name}.npz")
        assert part["coef"].shape == (cols,) and part["intercept"].shape == (1,) and str(part["role"]) in name
        assert f"model.{name}.npz" in text
    assert main(["fl", "train", "--mode", "horizontal", "--local", "3", "--data", str(bc_csv), "--label-column",
                 "label", "--epochs", "1", "--key-bits", "512", "--out", str(out)]) == 0
    assert np.load(out)["params"].shape == (31,) and f"the model written to {out}" in capsys.readouterr().out
    assert main(["fl", "predict", "--weights", str(out), "--data", str(bc_csv), "--label-column", "label",
                 "--out", str(tmp_path / "p.csv")]) == 0  # a horizontal model is whole at a client: scored here
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 570


def _in_job_scores(session, X, y, columns, opts):
    """The trained model's own scores of its training rows (at the guest), as `fl train --local`
    splits the columns."""
    from shaper.ml.fl import HeteroLinearModel

    model = HeteroLinearModel("logistic", **opts)
    if session.name == "arbiter":
        model.fit(session, None, role="arbiter")
        model.decision_function(session)
        return None
    c = columns[session.name]
    guest = session.name == "guest"
    model.fit(session, X[:, c], y if guest else None, role="guest" if guest else "host")
    return model.decision_function(session, X[:, c])


def test_fl_predict_gives_the_scores_of_the_trained_model(bc_csv, tmp_path, capsys):
    """`shaper fl predict --local 3` adds every data party's part (its weights on its columns and
    its constant, once) and gets the scores the trained model gives in the job."""
    from shaper.net import launch

    out = tmp_path / "model.npz"
    assert main(["fl", "train", "--mode", "vertical", "--local", "3", "--data", str(bc_csv), "--label-column",
                 "label", "--epochs", "2", "--key-bits", "512", "--learning-rate", "auto", "--out", str(out)]) == 0
    assert "learning rate" in capsys.readouterr().out
    scores = tmp_path / "scores.csv"
    assert main(["fl", "predict", "--local", "3", "--weights", str(out), "--data", str(bc_csv), "--label-column",
                 "label", "--out", str(scores)]) == 0
    assert "AUC" in capsys.readouterr().out
    got = np.loadtxt(scores, delimiter=",", skiprows=1, usecols=1)
    X, y = load_breast_cancer(return_X_y=True)
    X = np.loadtxt(bc_csv, delimiter=",", skiprows=1)[:, 1:-1]
    columns = dict(zip(["guest", "host-1", "host-2"], np.array_split(np.arange(X.shape[1]), 3)))
    res = launch(["guest", "host-1", "host-2", "arbiter"], _in_job_scores, X, y, columns,
                 {"max_iter": 2, "key_bits": 512, "learning_rate": "auto"})
    np.testing.assert_allclose(got, res[0], atol=1e-4)
    assert sum(abs(float(np.load(tmp_path / f"model.{n}.npz")["intercept"][0])) for n in ("host-1", "host-2")) > 0


def test_split_line_prints_every_part_and_they_add_up():
    """The demo printed 0.214 s = 0.032 + 0.016 + 0.000 + 0.067: 'other' was missing."""
    from shaper.jobs.fl import split_line

    for per in ({"seconds": 0.214, "encrypt": 0.032, "decrypt": 0.016, "homomorphic": 0.0, "wait": 0.067,
                 "other": 0.099},
                {"seconds": 1.0 / 3, "encrypt": 1 / 9, "decrypt": 1 / 9, "homomorphic": 1 / 27, "wait": 2 / 27,
                 "other": 0.0}):
        line = split_line(per)
        assert "other" in line and "waiting" in line
        total, *parts = [float(v) for v in re.findall(r"(\d+\.\d{3})", line)]
        assert len(parts) == 5 and round(sum(parts), 3) == total
    assert split_line({"seconds": 0.214, "encrypt": 0.032, "decrypt": 0.016, "homomorphic": 0.0, "wait": 0.067,
                       "other": 0.099}).endswith("waiting 0.067 + other 0.099 s")


def test_fl_demo_reports_each_job_with_tables_titled_plots_and_honest_margins(tmp_path):
    """The report's figures are tables (no Python dicts or lists), each of the three jobs has its
    plots, titled by the job; every time split adds up; scikit-learn's warnings stay out of the
    output; a comparison is called within its margin only when it is, else the gap is said."""
    import json
    import os
    import subprocess
    import sys

    report, figures = tmp_path / "fl.html", tmp_path / "fl.json"
    proc = subprocess.run([sys.executable, "-m", "shaper", "fl", "demo", "--key-bits", "512", "--report", str(report),
                           "--json", str(figures)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode in (0, 1), proc.stderr
    assert "Warning" not in proc.stdout + proc.stderr and "site-packages" not in proc.stdout + proc.stderr
    assert re.search(r"encryption .* decryption .* homomorphic .* waiting .* other", proc.stdout)
    page = report.read_text()
    splits = re.findall(r"<tr><td>[a-z0-9-]+</td>" + r"<td>(\d+\.\d{3})</td>" * 6 + "</tr>", page)
    assert len(splits) == 3 + 3 + 2  # guest, host, arbiter twice; the coordinator and a client
    for total, *parts in splits:
        assert round(sum(float(p) for p in parts), 3) == float(total)
    summary = json.loads(figures.read_text())
    for line in summary["checks"]:
        assert ("within the margin" in line or "or better" in line or "MORE than" in line
                or "equals FedAvg in plaintext" in line), line
    mlp = summary["horizontal_mlp"]
    gap = mlp["sklearn_accuracy"] - mlp["accuracy"]
    if gap > 0:
        assert f"{gap:.4f} below scikit-learn's" in " ".join(summary["checks"])
    body = page.split("</style>")[1]
    assert "{'" not in body and "[{" not in body and "': " not in body
    for job in ("vertical logistic regression", "vertical linear regression", "horizontal FedAvg MLP"):
        assert f'aria-label="{job}: losses"' in page
    assert page.count("<polyline") >= 7 and page.count("<th>other</th>") == 3
