"""Reports and progress output for training jobs: JSON-lines events and a self-contained HTML
report (inline SVG curves, no plotting dependency): the loss and AUC per epoch, the results next
to a plaintext reference, and the run's parameters and figures as tables."""

from __future__ import annotations

import html
import json
import math
import time
from pathlib import Path
from typing import IO, Any, Callable


def jsonl_writer(target: str | Path | IO[str]) -> Callable[[dict], None]:
    """A progress callback writing each event as one JSON line (with a wall-clock time)."""
    fh = open(target, "a", buffering=1) if isinstance(target, (str, Path)) else target

    def write(event: dict) -> None:
        fh.write(json.dumps({"time": round(time.time(), 3), **event}) + "\n")
        fh.flush()

    return write


def _svg_chart(title: str, series: dict[str, list[tuple[float, float]]], reference: dict[str, float] | None = None,
               y_label: str = "", width: int = 460, height: int = 270) -> str:
    """A line chart over epochs: integer epoch ticks on the x axis, three value ticks on the y axis,
    dashed horizontal lines for the reference values."""
    left, right, top, bottom = 52, 18, 48, 46
    points = [p for values in series.values() for p in values]
    refs = list((reference or {}).values())
    if not points:
        return f"<p>{html.escape(title)}: no data</p>"
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + refs
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys)
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 0.5, y1 + 0.5
    margin = 0.08 * (y1 - y0)
    y0, y1 = y0 - margin, y1 + margin

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    base = height - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(title)}" font-family="sans-serif">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#444"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#444"/>']
    for frac in (0.0, 0.5, 1.0):
        yv = y0 + frac * (y1 - y0)
        parts.append(f'<line x1="{left - 4}" y1="{sy(yv):.1f}" x2="{left}" y2="{sy(yv):.1f}" stroke="#444"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end" font-size="10">{yv:.3g}</text>')
    first, last = math.ceil(x0), math.floor(x1)
    step = max(1, math.ceil((last - first + 1) / 12))  # at most about a dozen labelled epochs
    for tick in range(first, last + 1, step):
        parts.append(f'<line class="epoch-tick" x1="{sx(tick):.1f}" y1="{base}" x2="{sx(tick):.1f}" '
                     f'y2="{base + 4}" stroke="#444"/>')
        parts.append(f'<text class="epoch-label" x="{sx(tick):.1f}" y="{base + 16}" text-anchor="middle" '
                     f'font-size="10">{tick}</text>')
    parts.append(f'<text x="{left + (width - left - right) / 2}" y="{height - 8}" text-anchor="middle" '
                 'font-size="11">epoch</text>')
    if y_label:
        parts.append(f'<text x="12" y="{top + (base - top) / 2}" text-anchor="middle" font-size="11" '
                     f'transform="rotate(-90 12 {top + (base - top) / 2})">{html.escape(y_label)}</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = colours[i % len(colours)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in values:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
    for name, value in (reference or {}).items():
        parts.append(f'<line x1="{left}" y1="{sy(value):.1f}" x2="{width - right}" y2="{sy(value):.1f}" '
                     'stroke="#888" stroke-dasharray="5,4"/>')
    # the legend sits between the title and the plot, one entry per series and reference line
    legend = [(name, colour, "") for name, colour in zip(series, colours * len(series))]
    legend += [(f"{name} {value:.4f}", "#888", ' stroke-dasharray="5,4"') for name, value in (reference or {}).items()]
    x = left
    for text, colour, dash in legend:
        parts.append(f'<line x1="{x}" y1="33" x2="{x + 18}" y2="33" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 22}" y="37" font-size="11">{html.escape(text)}</text>')
        x += 30 + 6.5 * len(text)
    parts.append("</svg>")
    return "".join(parts)


# How the run record's keys read in the report; other keys read with "_" as a space.
_LABELS = {
    "auc": "test AUC", "sklearn_auc": "scikit-learn test AUC", "accuracy": "test accuracy",
    "sklearn_accuracy": "scikit-learn test accuracy", "seconds": "wall time (s)", "bytes": "bytes on the wire",
    "crypto_operations": "cryptographic operations", "compute_seconds": "computation (s)",
    "communication_seconds": "waiting for the peer (s)", "params": "parameters", "key_bits": "key bits",
    "ciphertext_products": "ciphertext products", "packed_values": "packed values",
}
_EPOCH_LABELS = {"loss": "validation log-loss", "auc": "validation AUC", "seconds": "seconds"}


def _label(key: str, labels: dict[str, str] = _LABELS) -> str:
    return labels.get(key, key.replace("_", " "))


def _value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "–"}[value]
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) < 1:
            return f"{value:.4f}"  # AUCs, losses, rates: the same decimals down a column
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _rows(rows: list[tuple[str, ...]], header: tuple[str, ...] | None = None) -> str:
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>" if header else ""
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{cells}</table>"


def _record_tables(summary: dict[str, Any]) -> str:
    """The run record as tables: the figures (nested dicts flattened to "group: key" rows), the
    parameters, and one row per epoch for the history."""
    figures: list[tuple[str, str]] = []
    params: list[tuple[str, str]] = []
    epochs: list[dict] = []
    for key, value in summary.items():
        if key == "params" and isinstance(value, dict):
            params = [(_label(k), _value(v)) for k, v in value.items()]
        elif key == "history" and isinstance(value, list):
            epochs = [h for h in value if isinstance(h, dict)]
        elif isinstance(value, dict):
            figures += [(f"{_label(key)}: {_label(str(k))}", _value(v)) for k, v in value.items()]
        else:
            figures.append((_label(key), _value(value)))
    out = []
    if figures:
        out.append("<h3>Figures</h3>" + _rows(figures))
    if params:
        out.append("<h3>Parameters</h3>" + _rows(params))
    if epochs:
        keys = [k for k in ("epoch", "loss", "auc", "seconds") if any(k in h for h in epochs)]
        keys += sorted({k for h in epochs for k in h} - set(keys))
        out.append("<h3>Per epoch</h3>" + _rows([tuple(_value(h.get(k)) for k in keys) for h in epochs],
                                                 tuple(_label(k, _EPOCH_LABELS) for k in keys)))
    return "\n".join(out)


def html_report(path: str | Path, *, title: str, history: list[dict], summary: dict[str, Any],
                reference: dict[str, float] | None = None, table: list[tuple[str, str, str]] | None = None,
                columns: tuple[str, str] = ("shaper (secure)", "reference")) -> Path:
    """Write an HTML report: validation loss and AUC per epoch (``reference``: name -> AUC drawn
    as a dashed line), a results table (``table``: rows of measure, shaper's value, the
    reference's value, under the headings ``columns``), and the run record ``summary`` as
    tables (figures, parameters, one row per epoch)."""
    loss = [(h["epoch"], h["loss"]) for h in history if h.get("loss") is not None]
    auc = [(h["epoch"], h["auc"]) for h in history if h.get("auc") is not None]
    results = _rows([tuple(r) for r in table], ("measure", *columns)) if table else ""
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px;color:#222}} table{{border-collapse:collapse;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}} td:first-child,th:first-child{{text-align:left}}
th{{background:#f3f3f3}} h3{{margin-bottom:0.3em}}</style></head>
<body><h1>{html.escape(title)}</h1>
<div style="display:flex;gap:2em;flex-wrap:wrap">
{_svg_chart("validation log-loss", {"secure training": loss}, y_label="log-loss")}
{_svg_chart("validation AUC", {"secure training": auc}, reference, y_label="AUC")}
</div>
{"<h2>Results</h2>" + results if results else ""}
<h2>Run</h2>
{_record_tables(summary)}
</body></html>"""
    path = Path(path)
    path.write_text(body)
    return path
