"""``sparseopt demo --quick`` writes a Markdown report whose figures all exist."""

import re

from sparseopt.cli import main
from sparseopt.demo import sections


def test_demo_quick_writes_report_and_figures(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    report = out / "report.md"
    assert report.is_file()
    text = report.read_text()
    assert text.startswith("# sparseopt demo")
    # every section contributes a heading
    assert text.count("\n## ") >= len(sections())
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images, "the report references no figure"
    for name in images:
        png = out / name
        assert png.is_file(), f"missing figure {name}"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no NaN figure leaked into the Markdown tables
    assert "nan" not in re.split(r"[\s|]+", text.lower())
