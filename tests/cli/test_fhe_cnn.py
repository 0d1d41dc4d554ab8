"""``shaper fhe`` and ``shaper cnn``: input checks of ``fhe encrypt``, the demo on real hosts (a
parties file, one process per party), the retired spellings, and the CNN report (misclassified
images first, the accuracy line of ``cnn infer``)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shaper.cli import build_parser, main
from shaper.crypto import ckks
from shaper.jobs.cnn import html_report, infer_report, shown_order
from shaper.protocols import threshold_ckks as tc

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only

NATIVE = importlib.util.find_spec("shaper._native") is not None
SMALL = ["--params", "2048:50,40,40:50:40", "--insecure"]


@pytest.fixture(scope="module")
def public_keys(tmp_path_factory):
    """Two parties' key directories of public material (a single-key CKKS key made here: no MPC
    needed): input checks happen before any party starts."""
    params = ckks.Parameters.from_literal(2048, [50, 40, 40], 50, 40, insecure=True)
    keys = ckks.KeySet(params)
    root = tmp_path_factory.mktemp("fhe") / "keys"
    for i in range(2):
        tc.PublicKeys(params, keys.public, keys.relin, {}).save(root / f"party{i}")
    return root


@pytest.mark.parametrize("name, text, problem", [
    ("empty.csv", "", "holds no values"),
    ("blank.csv", "\n\n", "holds no values"),
    ("words.csv", "1.5\nabc\n", "expected one column of numbers"),
    ("nan.csv", "1.5\nnan\n", "NaN or infinite"),
    ("inf.csv", "1.5\n-inf\n", "NaN or infinite"),
    ("wide.csv", "1,2\n3,4\n", "expected one column of numbers"),
    ("many.csv", "1\n" * 1025, "1025 values; a ciphertext holds 1024 slots"),
])
def test_encrypt_refuses_bad_input_in_one_line(public_keys, tmp_path, capsys, name, text, problem):
    path = tmp_path / name
    path.write_text(text)
    assert main(["fhe", "encrypt", "--local", "2", "--keys", str(public_keys), "--input", str(path),
                 "--out", str(tmp_path / "x.ct"), "--insecure"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0] and name in lines[0], err
    assert "encrypted" not in out and not (tmp_path / "x.ct").exists()


def test_encrypt_refuses_an_empty_npy_and_values_beyond_the_bound(public_keys, tmp_path, capsys):
    np.save(tmp_path / "empty.npy", np.zeros(0))
    assert main(["fhe", "encrypt", "--local", "2", "--keys", str(public_keys), "--input", str(tmp_path / "empty.npy"),
                 "--out", str(tmp_path / "x.ct"), "--insecure"]) == 2
    assert "holds no values" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1.5\n-2\n0.25\n")
    assert main(["fhe", "encrypt", "--local", "2", "--keys", str(public_keys), "--input", str(tmp_path / "x.csv"),
                 "--out", str(tmp_path / "x.ct"), "--insecure"]) == 2
    assert "beyond --bound 1" in capsys.readouterr().err and not (tmp_path / "x.ct").exists()


def test_the_retired_spellings_still_parse_with_a_deprecation_line(capsys):
    parser = build_parser()
    args = parser.parse_args(["fhe", "decrypt", "--local-keys", "k", "--ciphertext", "y.ct"])
    assert args.keys == "k" and "--local-keys is deprecated" in capsys.readouterr().err
    args = parser.parse_args(["cnn", "infer", "--local-keys", "k"])
    assert args.keys == "k" and "--local-keys is deprecated" in capsys.readouterr().err
    args = parser.parse_args(["cnn", "demo", "--images", "7"])
    assert args.mnist_sample == 7 and "use --mnist-sample K" in capsys.readouterr().err
    args = parser.parse_args(["cnn", "train", "--out", "m.npz", "--data", "d"])
    assert args.mnist_dir == "d" and "--data is deprecated" in capsys.readouterr().err
    assert parser.parse_args(["cnn", "plan", "--json", "-"]).json == "-"


def test_a_local_count_needs_party_directories(tmp_path, capsys):
    (tmp_path / "k" / "party0").mkdir(parents=True)
    assert main(["fhe", "decrypt", "--local", "2", "--keys", str(tmp_path / "k"), "--ciphertext", "y.ct"]) == 2
    assert "holds no party directories" in capsys.readouterr().err
    assert main(["fhe", "demo", "--local", "40"]) == 2
    assert "between 2 and 16" in capsys.readouterr().err


def test_cnn_plan_writes_json_to_a_path_or_stdout(tmp_path, capsys):
    import json

    assert main(["cnn", "plan", "--json", "-"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["rotation_steps"]) == 28
    assert main(["cnn", "plan", "--json", str(tmp_path / "plan.json")]) == 0
    assert "rotation keys (28)" in capsys.readouterr().out
    assert json.loads((tmp_path / "plan.json").read_text()) == plan


# -- the demo on real hosts ------------------------------------------------------------------------

def _parties_file(root: Path, *names: str) -> Path:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
    assert main(["certs", "--names", *names, "--out", str(root / "certs"), "--write-parties",
                 str(root / "parties.toml"), "--base-port", str(base)]) == 0
    return root / "parties.toml"


@pytest.mark.skipif(not NATIVE, reason="the demo runs the production engine: OT extension is native only")
def test_fhe_demo_runs_on_real_hosts_from_a_parties_file(tmp_path):
    parties = _parties_file(tmp_path, "bank", "shop", "lab")
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "fhe", "demo", "--parties", str(parties), "--me", me,
                               *SMALL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in ("bank", "shop", "lab")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    for me, (out, _) in zip(("bank", "shop", "lab"), outs):
        assert "bank's x is encrypted jointly, every party computes rot(x*x, 1)" in out
        assert "largest error" in out and f"at {me}" in out


# -- the CNN report ----------------------------------------------------------------------------------

def test_the_report_shows_every_misclassified_image_first():
    labels = np.arange(40) % 10
    predicted = labels.copy()
    predicted[[30, 35]] = (labels[[30, 35]] + 1) % 10
    order = shown_order(predicted, labels, shown=16)
    assert order[:2] == [30, 35] and order[2:] == list(range(14)) and len(order) == 16
    many = (labels + 1) % 10  # all 40 wrong: every one is shown, beyond the limit
    assert shown_order(many, labels, shown=16) == list(range(40))
    # no labels: against the plaintext model's predictions
    assert shown_order(predicted, None, labels, shown=3) == [30, 35, 0]


def test_the_report_cards_put_the_misclassified_image_in(tmp_path):
    images = np.zeros((40, 28, 28))
    images[30, 5:20, 10:12] = 1.0  # a distinctive image
    labels = np.arange(40) % 10
    predicted = labels.copy()
    predicted[30] = 3
    text = html_report(tmp_path / "r.html", title="t", images=images, labels=labels, predicted=predicted).read_text()
    assert text.count("data:image/png;base64,") == 16
    assert "<b>predicted 3</b><br>label 0" in text  # image 30's card: label 0, predicted 3
    assert "the 1 misclassified first" in text


def test_the_infer_report_has_an_accuracy_line_when_labels_are_known(tmp_path):
    images = np.zeros((4, 28, 28))
    report = {"images": 4, "client": "bank", "model_owner": "lab", "evaluator": "bank",
              "predicted": np.array([1, 2, 3, 4]), "labels": np.array([1, 2, 3, 5]), "accuracy": 0.75,
              "confusion": np.eye(10, dtype=int), "phases": [{"name": "evaluate", "seconds": 1.0, "bytes_sent": 0}]}
    text = infer_report(tmp_path / "r.html", report, images).read_text()
    assert "accuracy (encrypted)" in text and "75.00%" in text
    del report["labels"], report["accuracy"], report["confusion"]
    assert "accuracy" not in infer_report(tmp_path / "s.html", report, images).read_text()


def test_the_parser_knows_the_bundled_sample_size():
    """cli/cnn.py keeps the sample size as a literal (the parser does not import the ML stack)."""
    from shaper.cli import cnn as cli_cnn
    from shaper.ml.cnn import mnist

    assert cli_cnn.SAMPLE == mnist.SAMPLE_COUNT == len(mnist.sample()[1])
