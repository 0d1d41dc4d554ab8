"""``shaper fl``: --local runs of both modes from one file, and input errors named before a job starts."""

from __future__ import annotations

import re

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
