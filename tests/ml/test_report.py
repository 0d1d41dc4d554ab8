"""The HTML report of a training run reads as a report: labelled axes, named columns, tables."""

import re

from shaper.jobs.report import html_report

HISTORY = [{"epoch": e, "seconds": 0.5, "loss": 0.6 - 0.05 * e, "auc": 0.9 + 0.01 * e} for e in range(1, 6)]
SUMMARY = {"auc": 0.95, "sklearn_auc": 0.9957, "seconds": 7.2, "bytes": 5_100_000,
           "crypto_operations": {"encryptions": 9131, "decryptions": 1966},
           "params": {"epochs": 5, "batch_size": 64, "learning_rate": 0.1, "scheme": "paillier"},
           "history": HISTORY}


def _render(tmp_path):
    return html_report(tmp_path / "r.html", title="run", history=HISTORY, summary=SUMMARY,
                       reference={"scikit-learn (plaintext)": 0.9957},
                       table=[("test AUC", "0.9500", "0.9957")],
                       columns=("shaper (secure, 2 parties)", "scikit-learn (plaintext)")).read_text()


def test_epoch_axes_have_tick_labels(tmp_path):
    page = _render(tmp_path)
    labels = re.findall(r'class="epoch-label"[^>]*>(\d+)</text>', page)
    assert labels == ["1", "2", "3", "4", "5"] * 2  # both charts


def test_many_epochs_get_a_readable_number_of_ticks(tmp_path):
    history = [{"epoch": e, "loss": 1 / e, "auc": 0.9} for e in range(1, 101)]
    page = html_report(tmp_path / "r.html", title="t", history=history, summary={}).read_text()
    labels = [int(x) for x in re.findall(r'class="epoch-label"[^>]*>(\d+)</text>', page)]
    assert 5 <= len(labels) // 2 <= 13 and labels[0] == 1 and max(labels) <= 100


def test_reference_column_is_named_for_what_it_is(tmp_path):
    page = _render(tmp_path)
    assert "<th>scikit-learn (plaintext)</th>" in page and "<th>shaper (secure, 2 parties)</th>" in page
    assert "<th>reference</th>" not in page


def test_run_record_is_tables_not_a_json_dump(tmp_path):
    page = _render(tmp_path)
    assert "<pre>" not in page and '"crypto_operations"' not in page and "{" not in page.split("</style>")[1]
    assert "<td>cryptographic operations: encryptions</td><td>9,131</td>" in page
    assert "<td>learning rate</td><td>0.1000</td>" in page
    assert "<th>epoch</th><th>validation log-loss</th><th>validation AUC</th><th>seconds</th>" in page  # one row per epoch


def test_nested_records_are_tables_never_python_literals(tmp_path):
    """Lists of records and dicts of dicts (per-party time splits, per-epoch histories inside a
    job's record) become tables of their own."""
    from shaper.jobs.report import Report

    record = {"key_bits": 2048, "vertical": {"auc": 0.99, "history": HISTORY,
                                             "per_iteration": {"guest": {"seconds": 0.2, "encrypt": 0.03},
                                                               "host": {"seconds": 0.2, "encrypt": 0.05}}},
              "rounds": [{"round": 1, "included": ["a", "b"]}]}
    page = Report("t").record(record).write(tmp_path / "r.html").read_text()
    body = page.split("</style>")[1]
    assert "{" not in body and "[" not in body
    assert "<td>vertical: test AUC</td><td>0.9900</td>" in page
    assert "<tr><th></th><th>wall time (s)</th><th>encrypt</th></tr><tr><td>guest</td><td>0.2000</td>" in page
    assert "<td>1</td><td>a, b</td>" in page


def test_a_report_holds_image_grids_and_a_confusion_matrix(tmp_path):
    """What the CNN report shows (images as PNG data URIs with captions, a confusion matrix) fits
    the same writer."""
    import base64

    import numpy as np

    from shaper.jobs.report import Report, png

    image = np.zeros((4, 4))
    image[1:3, 1:3] = 1.0
    assert png(image, scale=1).startswith(b"\x89PNG\r\n\x1a\n")
    page = (Report("cnn").images([(image, ["predicted 7", "label 7"], True), (image, ["predicted 1"], False)])
            .confusion(np.array([[3, 1], [0, 2]])).write(tmp_path / "c.html").read_text())
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(uris) == 2 and base64.b64decode(uris[0]).startswith(b"\x89PNG")
    assert '<div class="card ok">' in page and '<div class="card wrong">' in page and "<b>predicted 7</b>" in page
    assert "<th>true \\ predicted</th>" in page and ">3</td>" in page
