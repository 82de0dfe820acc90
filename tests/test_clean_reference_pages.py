"""Reference pages that share a template or a table with their siblings (charset tables, coreutils pages, half
translated man pages) are separate documents, not copies, and not foreign pages."""
from __future__ import annotations

import dataclasses
import json
import random

from scratchlm.data.clean.quality import TECHNICAL, quality_verdict
from scratchlm.data.clean.structure import HEADING, PROSE, TABLE, parse, similarity_text
from scratchlm.data.dedup import ContainmentFinder

from test_clean_multilingual import _kept, _ledger, _prepare

NAMES = ["LATIN CAPITAL LETTER A WITH OGONEK", "LATIN SMALL LETTER A WITH OGONEK", "LATIN CAPITAL LETTER L WITH STROKE",
         "EURO SIGN", "LATIN CAPITAL LETTER S WITH CARON", "SECTION SIGN", "LATIN SMALL LETTER S WITH CARON",
         "COPYRIGHT SIGN", "LATIN CAPITAL LETTER S WITH COMMA BELOW", "LEFT-POINTING DOUBLE ANGLE QUOTATION MARK"]


def _table(rows: int = 96) -> list[str]:
    return [f"       {o:03o}   {o:3d}   {o:02X}     x     {NAMES[o % len(NAMES)]}" for o in range(160, 160 + rows)]


def _prose(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    vocab = ("the encoding covers letters used in languages of central and eastern europe and adds a few symbols "
             "that earlier parts lacked while keeping the layout of the original standard for most positions").split()
    text = " ".join(rng.choice(vocab) for _ in range(words))
    return "\n".join("       " + text[i:i + 66] for i in range(0, len(text), 66))


def _charset_page(name: str, seed: int) -> str:
    return "\n".join([f"{name}(7)            Miscellaneous Information Manual            {name}(7)", "", "NAME",
                      f"       {name} - character set encoded in octal, decimal, and hexadecimal", "",
                      "DESCRIPTION", _prose(seed), "", *_table(), "", "SEE ALSO", "       ascii(7), charsets(7)"])


def test_table_rows_are_table_lines_whatever_their_case_or_separator():
    lines = parse("\n".join([
        "DESCRIPTION",
        "       The full set of alphabets includes:",
        "       ISO 8859-1    West European languages (Latin-1)",
        "       ISO 8859-2    Central and East European languages (Latin-2)",
        "",
        "       200   128   80     ─     BOX DRAWINGS LIGHT HORIZONTAL",
        "       201   129   81     │     BOX DRAWINGS LIGHT VERTICAL"]))
    kinds = [line.kind for line in lines if line.text.strip()]
    assert kinds == [HEADING, PROSE, TABLE, TABLE, TABLE, TABLE]
    html_table = parse("Operation\t\tCommand\nList all target units\t\tsystemctl list-units --type=target\n"
                       "List all service units\t\tsystemctl list-units --type=service")  # cells of extracted HTML
    assert [line.kind for line in html_table] == [TABLE] * 3


def test_similarity_text_leaves_tables_out_unless_little_else_is_left():
    page = _charset_page("iso_8859-2", 1)
    assert "OGONEK" not in similarity_text(page) and "character set encoded" in similarity_text(page)
    only_table = "\n".join(_table())
    assert similarity_text(only_table) == only_table


def test_sibling_reference_pages_sharing_a_table_are_both_kept_but_copies_are_not(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "iso_8859-2.7.txt").write_text(_charset_page("iso_8859-2", 1))
    (tmp_path / "docs" / "iso_8859-16.7.txt").write_text(_charset_page("iso_8859-16", 2))  # own prose, same table
    copy = _charset_page("iso_8859-2", 1).replace("SEE ALSO", "SEE ALSO\n       utf-8(7)")
    (tmp_path / "docs" / "iso_8859-2-copy.7.txt").write_text(copy)  # a near copy of the first page
    out, _ = _prepare(tmp_path, [{"name": "man", "domain": "docs", "path": "docs", "format": "text",
                                  "profile": "technical"}], skip=["quality"])
    kept = {k.rsplit("/", 1)[-1] for k in _kept(out)}
    assert "iso_8859-16.7.txt" in kept and len(kept) == 2  # one of the two copies: the first read
    assert [r["rule"] for r in _ledger(out) if r["level"] == "document"] == ["near_duplicate"]


def test_a_family_of_pages_from_one_template_is_not_a_set_of_copies():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)]
    template = " ".join(rng.choice(vocab) for _ in range(900))  # the stock notes every page of a package carries
    pages = [f"{template} " + " ".join(rng.choice(vocab) for _ in range(120)) for _ in range(10)]
    finder = ContainmentFinder()
    finder.add_batch([f"p{i}" for i in range(10)], pages)
    assert finder.contained() == {}
    # the same two pages alone: one is most of the other, a copy
    pair = ContainmentFinder()
    pair.add_batch(["p0", "p0-and-more"], [pages[0], pages[0] + " " + " ".join(rng.choice(vocab) for _ in range(600))])
    assert set(pair.contained()) == {"p0"}


SPANISH_OPTIONS = [
    ("-a, --all", "Muestra todos los objetos compartidos que el proceso tiene abiertos."),
    ("-v, --verbose", "Explica con detalle lo que hace en cada momento."),
    ("-q, --quiet", "No muestra ningún mensaje salvo los errores graves."),
    ("-?, --help", "Muestra un mensaje de ayuda y finaliza."),
    ("-V, --version", "Muestra la información de la versión y finaliza."),
    ("--usage", "Muestra un breve resumen de la sintaxis y finaliza."),
]
ENGLISH = ("The command displays a list of the dynamic shared objects that are linked into the process with the "
           "specified process ID. The list includes the libraries that have been dynamically loaded using dlopen, "
           "and it is printed in the order in which the dynamic linker loaded them into memory.")


def test_a_half_translated_page_counts_its_short_translated_units(tmp_path):
    # The translated part of a man page is often its short units (NAME, one line per option); the untranslated
    # part its long paragraphs. Judged on the long units alone, the page looks foreign and is dropped whole.
    options = [line for flag, text in SPANISH_OPTIONS for line in (f"       {flag}", f"              {text}", "")]
    page = "\n".join(["PLDD(1)                    Manual del usuario                    PLDD(1)", "", "NOMBRE",
                      "       pldd - muestra los objetos compartidos enlazados en un proceso", "",
                      "DESCRIPCIÓN", "       " + ENGLISH, "", "OPCIONES", *options,
                      "ESTADO DE SALIDA", "       " + ENGLISH.replace("command", "program"), "",
                      "VERSIONES", "       Esta orden está disponible desde la versión 2.15 de la biblioteca."])
    (tmp_path / "p.jsonl").write_text(json.dumps({"text": page}) + "\n")
    out, _ = _prepare(tmp_path, [{"name": "es", "domain": "docs", "path": "p.jsonl", "languages": ["es"],
                                  "profile": "technical"}])
    kept = list(_kept(out).values())
    assert len(kept) == 1, _ledger(out)
    assert "Muestra un mensaje de ayuda y finaliza." in kept[0] and ENGLISH not in kept[0]
    assert [r["rule"] for r in _ledger(out)] == ["language_paragraph", "language_paragraph"]


def test_the_alphabetic_share_of_a_technical_page_is_read_outside_its_tables():
    # ascii(7): a paragraph, then 128 rows of octal, decimal and hex codes
    rows = [f"       {i:03o}   {i:3d}   {i:02x}   {chr(i) if 33 <= i < 127 else '.'}" for i in range(128)]
    page = "\n".join(["ASCII(7)            Miscellaneous Information Manual            ASCII(7)", "", "DESCRIPTION",
                      _prose(3), "", *rows])

    def alpha_failures(text, cfg):
        return [f.rule for f in quality_verdict(text, cfg) if f.rule == "gopher_alpha_word_share"]

    assert alpha_failures(page, dataclasses.replace(TECHNICAL, alpha_share_outside_tables=False))
    assert not alpha_failures(page, TECHNICAL)
    assert alpha_failures("\n".join(rows), TECHNICAL)  # a dump of numbers is still not text
