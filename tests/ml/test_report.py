"""The HTML report of a training run reads as a report: labelled axes, named columns, tables."""

import re

from shaper.ml.report import html_report

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
