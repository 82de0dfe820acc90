"""A source that names no filter profile gets the one its documents call for: man pages and manuals the
`technical` rules, prose the web-crawl ones; and the fixes found on the holdout corpus (docs/benchmarks.md):
HTML examples stay code, configuration lines are not read as the sentence before them, a coreutils page keeps
the sentence that opens its options, a code source under text filters is a warning."""
from __future__ import annotations

import json
from pathlib import Path

from scratchlm.data.clean.html import extract_main_text
from scratchlm.data.clean.structure import CODE, parse, structural_paragraphs
from scratchlm.data.prepare_stats import filter_warnings
from scratchlm.data.profile_choice import looks_technical

from test_clean_multilingual import _kept, _prepare

FIXTURES = Path(__file__).parent / "fixtures"


def _man_pages(tmp_path: Path, copies: int = 3) -> Path:
    """The two real man pages, each also with its first section renamed, so the source has a few documents."""
    folder = tmp_path / "man"
    folder.mkdir()
    for page in sorted((FIXTURES / "reference").glob("*.txt")):
        text = page.read_text()
        for k in range(copies):
            (folder / f"{page.stem}-{k}.txt").write_text(text.replace("DESCRIPTION", f"DESCRIPTION {k}", 1)
                                                         + f"\n\nVERSION {k}\n       Page variant number {k}.\n")
    return folder


def test_man_pages_without_a_profile_get_the_technical_filters_and_keep_their_text(tmp_path):
    folder = _man_pages(tmp_path, copies=1)
    out, stats = _prepare(tmp_path, [{"name": "man", "domain": "manpages", "path": str(folder), "format": "text"}])
    src = stats["sources"]["man"]
    assert src["profile"] == "technical"
    assert src["profile_choice"] == {"profile": "technical", "sampled": 2, "technical": 2}
    assert src["chars_kept"] >= 0.95 * src["chars_in"]
    kept = "\n".join(_kept(out).values())
    assert "APT::Default-Release" in kept and "Pin-Priority" in kept


def test_prose_without_a_profile_keeps_the_web_crawl_filters(tmp_path):
    docs = [json.loads(line)["text"] for line in (FIXTURES / "prose" / "de.jsonl").read_text().splitlines()]
    assert sum(map(looks_technical, docs)) < 0.4 * len(docs)
    (tmp_path / "de.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    _, stats = _prepare(tmp_path, [{"name": "de", "domain": "web", "path": "de.jsonl", "languages": ["de"]}])
    assert stats["sources"]["de"]["profile"] == "prose"
    assert stats["sources"]["de"]["profile_choice"]["sampled"] == len(docs)


def test_a_profile_in_the_config_is_not_second_guessed(tmp_path):
    folder = _man_pages(tmp_path, copies=1)
    _, stats = _prepare(tmp_path, [{"name": "man", "domain": "manpages", "path": str(folder), "format": "text",
                                    "profile": "prose"}])
    assert stats["sources"]["man"]["profile"] == "prose" and "profile_choice" not in stats["sources"]["man"]


def test_html_examples_come_out_fenced_and_parse_as_code():
    html = ("<html><body><article><h1>Containers</h1><p>The package creates a bridge that every new container "
            "uses through its default configuration file:</p><pre class='programlisting'>\nlxc.net.0.type = veth\n"
            "lxc.net.0.link = lxcbr0\n</pre><p>These entries mean that a virtual interface is created.</p>"
            "<pre></pre></article></body></html>")
    text = extract_main_text(html)
    assert "```\nlxc.net.0.type = veth\nlxc.net.0.link = lxcbr0\n```" in text and text.count("```") == 2
    kinds = {line.text: line.kind for line in parse(text)}
    assert kinds["lxc.net.0.type = veth"] == CODE and kinds["```"] == CODE


def test_a_line_after_a_colon_starts_an_element_and_assignments_are_code():
    text = ("Postfix hands mail to the milter named in its main configuration file:\n"
            "smtpd_milters = inet:localhost:12345\n"
            "non_smtpd_milters = inet:localhost:12345\n"
            "reads the mail of local users as well.")
    lines = parse(text)
    assert [line.kind for line in lines[1:3]] == [CODE, CODE]
    assert lines[0].unit != lines[3].unit  # no unit runs across the configuration lines


def test_the_sentence_that_opens_an_option_list_belongs_to_the_list():
    page = ("DESCRIPTION\n       Copy SOURCE to DEST.\n\n"
            "       Mandatory arguments to long options are mandatory for short options\n       too.\n\n"
            "       -a, --archive\n              same as -dR --preserve=all\n")
    assert 2 in structural_paragraphs(page)  # paragraph 2: the "Mandatory arguments" sentence


def test_a_code_source_under_text_filters_is_a_warning():
    def step(dropped):
        return {"docs_in": 10, "docs_out": 10 - dropped, "chars_in": 1000, "chars_out": 1000 - 10 * dropped,
                "dropped": {"gopher_stop_words": dropped}}

    manifest = {"sources": {"scripts": {"domain": "code", "profile": "technical",
                                        "steps": {"quality": step(3)}}}}
    warnings = filter_warnings(manifest, {"scripts": ()})
    assert len(warnings) == 1 and "domain code with the technical filters" in warnings[0]
    assert "dropped 3 of them" in warnings[0]


def test_a_complete_japanese_page_is_not_too_short():
    from scratchlm.data.clean.structure import short_of

    page = "名前\n    bcd - パンチカードの形式に変換する\n書式\n    bcd [文字列]\n" + "説明文です。" * 24
    assert len(page) < 200 and not short_of(page, 200)
    assert short_of("A short English stub of a page.", 200)


def test_a_portuguese_unit_read_as_spanish_stays_in_a_portuguese_source():
    from scratchlm.data.clean.langid import UnitLanguage, close_relative

    unit = UnitLanguage((0,), "es", 0.81, 140, also=("gl", "pt"))
    assert close_relative(unit, ("pt",))
    assert not close_relative(unit, ("de",))  # Spanish in a German source is foreign
    english = UnitLanguage((0,), "en", 0.99, 300, also=("pt", "es"))
    assert not close_relative(english, ("pt",))  # untranslated English is cut whatever comes second
