"""docs/mpc.md prints the costs the code declares, not a stale copy."""

from pathlib import Path

from shaper.protocols.additive.costs import markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "mpc.md"


def test_docs_cost_table_is_generated_from_the_code():
    text = DOC.read_text()
    block = text.split("<!-- costs:begin -->")[1].split("<!-- costs:end -->")[0]
    assert block.strip() == markdown().strip(), "regenerate with: python -m shaper.protocols.additive.costs"
