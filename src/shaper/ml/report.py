"""Reports and progress output for training jobs: JSON-lines events and a self-contained HTML
report with inline SVG curves (no plotting dependency)."""

from __future__ import annotations

import html
import json
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
               width: int = 460, height: int = 260) -> str:
    pad = 42
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
        return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad - (y - y0) / (y1 - y0) * (height - 2 * pad)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#444"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#444"/>']
    for frac in (0.0, 0.5, 1.0):
        yv = y0 + frac * (y1 - y0)
        parts.append(f'<text x="{pad - 4}" y="{sy(yv) + 4:.1f}" text-anchor="end" font-size="10">{yv:.3g}</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle" font-size="11">epoch</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = colours[i % len(colours)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in values:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
        parts.append(f'<text x="{width - pad}" y="{pad + 14 * i}" text-anchor="end" font-size="11" '
                     f'fill="{colour}">{html.escape(name)}</text>')
    for j, (name, value) in enumerate((reference or {}).items()):
        parts.append(f'<line x1="{pad}" y1="{sy(value):.1f}" x2="{width - pad}" y2="{sy(value):.1f}" '
                     'stroke="#888" stroke-dasharray="5,4"/>')
        parts.append(f'<text x="{pad + 4}" y="{sy(value) - 4:.1f}" font-size="10" fill="#555">'
                     f'{html.escape(name)} {value:.4f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def html_report(path: str | Path, *, title: str, history: list[dict], summary: dict[str, Any],
                reference: dict[str, float] | None = None, table: list[tuple[str, str, str]] | None = None) -> Path:
    """Write an HTML report: loss and AUC curves per epoch, and a results table."""
    loss = [(h["epoch"], h["loss"]) for h in history if h.get("loss") is not None]
    auc = [(h["epoch"], h["auc"]) for h in history if h.get("auc") is not None]
    rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
                   for a, b, c in (table or []))
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}} td:first-child{{text-align:left}}</style></head>
<body><h1>{html.escape(title)}</h1>
<div style="display:flex;gap:2em;flex-wrap:wrap">
{_svg_chart("validation log-loss", {"secure training": loss})}
{_svg_chart("validation AUC", {"secure training": auc}, reference)}
</div>
<h2>Results</h2><table><tr><th>measure</th><th>shaper</th><th>reference</th></tr>{rows}</table>
<h2>Run</h2><pre>{html.escape(json.dumps(summary, indent=1, default=str))}</pre>
</body></html>"""
    path = Path(path)
    path.write_text(body)
    return path
