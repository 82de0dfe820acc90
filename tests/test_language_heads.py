"""An option and its description, a heading and its section, are one unit for the language step (issue 37): on
real partly translated man pages (tests/fixtures/manpages/README.md), an English description goes with its
option line, a section that went whole takes its heading, and whatever still has something under it stays."""
from __future__ import annotations

from pathlib import Path

import pytest

from scratchlm.data.clean.outline import emptied_heads, heads
from scratchlm.data.clean.structure import HEADING, OPTION, PROSE, hangs_at, indent_of, parse

from test_clean_multilingual import _kept, _ledger, _prepare

PAGES = Path(__file__).parent / "fixtures" / "manpages"


def _clean(tmp_path, name: str, lang: str) -> tuple[str, list[dict]]:
    """The page after the prepare stage (one text source keeping `lang`), and its language_paragraph records."""
    (tmp_path / "man").mkdir()
    (tmp_path / "man" / name).write_text((PAGES / name).read_text())
    out, _ = _prepare(tmp_path, [{"name": "man", "domain": "docs", "path": "man", "format": "text",
                                  "languages": [lang], "profile": "technical"}])
    kept = list(_kept(out).values())
    assert len(kept) == 1, _ledger(out)
    return kept[0], [r for r in _ledger(out) if r["rule"] == "language_paragraph"]


def _left_bare(text: str) -> list[str]:
    """Option lines and headings with nothing under them: the next non-blank line is as far left as they are."""
    lines = [line for line in parse(text) if line.kind != "blank"]
    return [line.text.strip() for line, below in zip(lines, lines[1:] + [None])
            if line.kind in (OPTION, HEADING) and indent_of(line.text) < 7
            and (below is None or indent_of(below.text) <= indent_of(line.text))
            and line is not lines[0] and below is not None]  # the page's title and footer lines stand alone


def test_options_go_with_their_english_descriptions_and_none_is_left_bare(tmp_path):
    text, cuts = _clean(tmp_path, "groupdel.8.de.txt", "de")
    for option in ("-f, --force", "-R, --root CHROOT_DIR", "-P, --prefix PREFIX_DIR"):
        assert option not in text
        record = next(r for r in cuts if r["excerpt"].strip().startswith(option))  # one piece: option and text
        assert "Apply changes" in record["excerpt"] or "forces the removal" in record["excerpt"]
        assert "option line" in record["detail"] and ">> " + option in record["context"]
    assert "-h, --help\n           zeigt die Hilfe an und beendet das Programm" in text  # German: both kept
    assert _left_bare(text) == []


def test_names_stacked_over_one_description_go_with_it_and_a_description_is_judged_whole(tmp_path):
    text, cuts = _clean(tmp_path, "addr2line.1.es.options.txt", "es")
    assert "--addresses" not in text and "\n       -a\n" not in text
    assert any(r["excerpt"].startswith("       -a\n       --addresses\n") for r in cuts)
    # its first sentence alone is too short to judge: the description is judged as the paragraph it is
    assert "--demangle" not in text and "Decode (demangle)" not in text
    assert "-b nombrebfd\n       --target=nombrebfd\n           Especifica" in text
    assert _left_bare(text) == []


def test_a_heading_whose_whole_section_went_goes_with_it_and_one_with_text_left_stays(tmp_path):
    text, cuts = _clean(tmp_path, "groupdel.8.de.txt", "de")
    assert "BESCHREIBUNG" not in text and "The groupdel command modifies" not in text
    assert any(r["excerpt"].startswith("BESCHREIBUNG\n") for r in cuts)
    assert "WARNUNGEN" in text and "OPTIONEN" in text  # German text, and the German -h, are left under them


def test_a_term_and_a_section_of_a_spanish_page(tmp_path):
    text, cuts = _clean(tmp_path, "bashbug.1.es.txt", "es")
    assert "correo-electrónico-informe-fallo" not in text and "Comma separated list" not in text
    assert "AUTOR" not in text and "This manual page was written" not in text
    # DESCRIPCIÓN loses its English paragraph, not its heading nor its Spanish ones
    assert "bashbug will start up" not in text
    assert "DESCRIPCIÓN\n       bashbug es una aplicación" in text and "Si inicia bashbug por error" in text
    assert "--version\n              Muestra la versión de bashbug" in text
    assert {r["excerpt"].split("\n")[0].strip() for r in cuts} == {
        "bashbug will start up your preferred editor with a preformatted bug",
        "correo-electrónico-informe-fallo", "AUTOR"}
    assert _left_bare(text) == []


def test_an_option_keeps_its_own_spanish_line_when_its_english_paragraph_goes(tmp_path):
    text, cuts = _clean(tmp_path, "savelog.8.es.txt", "es")
    assert "For xz no strength option is set" not in text
    assert "-J     Comprime con xz, en lugar de gzip" in text  # what the option says on its line is kept
    assert "FALLOS" not in text and "If a process is still writing" not in text
    assert any(r["excerpt"].startswith("FALLOS\n") for r in cuts)


def test_justified_lines_of_a_description_are_prose_and_go_with_it(tmp_path):
    page = (PAGES / "bash.1.es.readline-variables.txt").read_text()
    lines = parse(page)
    justified = next(i for i, line in enumerate(lines) if "\"undoes\"" in line.text)
    assert lines[justified].kind == PROSE and lines[justified].unit == lines[justified + 1].unit
    text, _ = _clean(tmp_path, "bash.1.es.readline-variables.txt", "es")
    for gone in ("active-region-end-color", "undoes", "bind-tty-special-chars", "completion-map-case"):
        assert gone not in text
    for kept in ("bell-style (audible)\n              Controla qué pasa", "comment-begin", "convert-meta (On)"):
        assert kept in text


@pytest.mark.parametrize("name", ["groupdel.8.de.txt", "bashbug.1.es.txt", "savelog.8.es.txt"])
def test_paragraphs_of_prose_are_no_heads(name):
    lines = parse((PAGES / name).read_text())
    for head in heads(lines):  # a heading, an option, a name, or a tag whose text hangs over the lines below
        line, below = lines[head.lines[-1]], lines[head.lines[-1] + 1]
        assert line.kind in (HEADING, OPTION) or len(line.text.split()) <= 8 \
            or hangs_at(line.text, indent_of(below.text)), line.text
    starts = ("Sie können nicht", "Si inicia bashbug", "La  orden savelog")
    paragraph = next(i for i, line in enumerate(lines) if line.text.strip().startswith(starts))
    assert all(paragraph not in head.lines for head in heads(lines))


def test_ranked_headings_of_markdown_govern_up_to_the_next_of_their_rank():
    text = "# Guide\nIntro.\n\n## Install\nRun it.\n\n### Notes\nA note.\n\n## Use\nUse it.\n\n# Index\nEnd."
    lines = parse(text)
    spans = {lines[h.lines[0]].text: [lines[k].text for k in h.span if lines[k].text] for h in heads(lines)}
    assert spans["## Install"] == ["## Install", "Run it.", "### Notes", "A note."]
    assert spans["# Guide"][-1] == "Use it." and spans["# Index"] == ["# Index", "End."]
    cut = {i for i, line in enumerate(lines) if line.text in ("Run it.", "A note.")}
    assert [lines[h.lines[0]].text for h in emptied_heads(lines, cut)] == ["## Install"]
