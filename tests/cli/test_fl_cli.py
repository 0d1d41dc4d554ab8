"""``shaper fl``: --local runs of both modes from one file, a vertical job as three processes over a
parties file, and input errors named before a job starts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from shaper.cli import main


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
                 "--label-column", "label", "--epochs", "2", "--key-bits", "512", "--validation", str(bc_csv)])
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
