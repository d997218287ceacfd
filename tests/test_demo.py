"""``sparseopt demo --quick`` writes a Markdown report whose figures all exist."""

import re

import pytest

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


def _entry(name, value):
    from importlib.metadata import EntryPoint

    return EntryPoint(name=name, value=value, group="sparseopt.demo_sections")


def test_contributed_sections_follow_the_core_and_no_minilm_drops_only_minilm(monkeypatch):
    """Sections contributed through the ``sparseopt.demo_sections`` entry points come after
    the core's, by name; ``minilm=False`` (``--no-minilm``) leaves out only ``minilm``."""
    import sparseopt.demo as demo
    from sparseopt.demo import layer, prox_paths, recovery

    core = [prox_paths.section, layer.section, recovery.section]
    extra = [_entry("minilm", "sparseopt.demo.recovery:section"),
             _entry("zzz", "sparseopt.demo.layer:section")]
    monkeypatch.setattr(demo, "_contributed", lambda: extra)
    assert sections(minilm=True) == core + [recovery.section, layer.section]
    assert sections(minilm=False) == core + [layer.section]


def test_minilm_section_without_the_adapter_names_the_install(monkeypatch):
    import sparseopt.demo as demo

    monkeypatch.setattr(demo, "_contributed", lambda: [])
    assert len(sections(minilm=False)) == 3
    with pytest.raises(ImportError, match="pip install torch==2.13.0"):
        sections(minilm=True)
    monkeypatch.setattr(demo, "_contributed",
                        lambda: [_entry("minilm", "sparseopt_no_such_module:section")])
    with pytest.raises(ImportError, match="no-minilm"):
        sections(minilm=True)
