"""structure.parse classifies every line as it did before it was rewritten for speed (bench/structure_speed.py
compares the two on real man pages, manuals and code): the core corpus's lines by digest, with their counts per
kind so a failure says what moved, and hand-written edge cases line by line.

The pinned values were computed with the parse of efc5c86, before the rewrite. A change to a rule changes them on
purpose: recompute them with the new rule and say in the commit which lines moved and why."""
from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from scratchlm.data.clean.structure import Line, parse

# domain: (documents, sha256 over each document's id and its lines' (kind, block, unit), lines per kind)
CORE = {
    "code": (36, "acaf75d5250e2a12af03df540acae0ddff81688007da09bc6a8fb04ca4212934",
             {"blank": 1346, "code": 3707, "heading": 624, "option": 18, "prose": 2400, "table": 4}),
    "docs": (79, "3e1508da395bf4268a44783da191333f42f7b1f2852e60990e8274c90324a6b3",
             {"blank": 2695, "code": 1530, "heading": 698, "list": 201, "prose": 5970, "table": 359}),
    "web": (81, "57f9f8f8d6212c8207aad24080657fd711583bf3c1833295b318969ef73117b2",
            {"blank": 5079, "code": 7178, "heading": 1949, "list": 1953, "option": 22, "prose": 4579, "table": 178}),
}


def _shape(lines: list[Line]) -> list[tuple[str, int, int]]:
    return [(line.kind, line.block, line.unit) for line in lines]


@pytest.mark.parametrize("domain", sorted(CORE))
def test_the_core_corpus_lines_keep_their_kinds_blocks_and_units(core_corpus, domain):
    digest, kinds, docs = hashlib.sha256(), Counter(), 0
    with open(core_corpus[domain], encoding="utf-8") as f:
        for row in f:
            doc = json.loads(row)
            lines = parse(doc["text"])
            assert [line.text for line in lines] == doc["text"].split("\n")
            digest.update(json.dumps([doc["id"], _shape(lines)]).encode())
            kinds.update(line.kind for line in lines)
            docs += 1
    want_docs, want_digest, want_kinds = CORE[domain]
    assert (docs, dict(sorted(kinds.items()))) == (want_docs, want_kinds)
    assert digest.hexdigest() == want_digest


# Texts that reach the corners of the rewritten rules: no lines, odd white space (CR, tabs, form feed, ideographic
# and no-break spaces, NEL and the line separator), capitals outside ASCII (titlecase "ǅ", "ª" without case, Roman
# numerals, superscript digits that read as letters), digits outside ASCII, tables, options and code.
EDGES = {
    "empty": "",
    "only_blank_lines": "\n\n  \n\t\n",
    "one_line": "A single sentence.",
    "crlf": "NAME\r\n       ls - list directory contents\r\n\r\nSYNOPSIS\r\n       ls [OPTION]... [FILE]...\r\n",
    "tabs": "Operation\t\tCommand\nList units\t\tsystemctl list-units\n"
            "\tindented by a tab, then words of a sentence here\nkey\tvalue",
    "all_caps": "DESCRIPTION\nÉTAT DES LIEUX\nΠΕΡΙΓΡΑΦΗ\nǅEMAL ǅUBA DŽ\nª BCD\nⅫ ⅩⅠ CHAPTER\nSEE ALSO.\n"
                "NAME   SYNOPSIS   OPTIONS\nAB\nA B C D E F G H I\nX1 Y2 Z3\nMOSTLY CAPS but\n²³ ABC",
    "options": "       -v, --verbose\n              Print more.\n       --color[=WHEN]\n"
               "              Colorize the output. This goes on unless the\n       --reinstall option is given.\n"
               "       +N     Skip N lines.\nStorage=\n       Where to store. Either\nExecStart=, ExecStartPre=\n"
               "       Commands.",
    "table": "Name    Value   Unit\nalpha   1       m\nbeta    22      kg\n\n| a | b | c |\n| 1 | 2 | 3 |\n"
             "+-----+-----+\nHome | About | Contact",
    "code_and_data": "   $ ls -l /etc\n   -rw-r--r-- 1 root root 17 Oct 16 21:42 foo\nlocale.gettext(msg)\n"
                     "chcpu(1), chrt(1), lscpu(1), ps(1),\nsee chcpu(1) and the words around it for more\n"
                     "unsigned short s;\nx² + y² = z² and ①②③ ④⑤⑥ ⑦⑧⑨ plus ١٢٣ ٤٥٦ ٧٨٩ ٠١٢\n"
                     "deb http://deb.debian.org/debian bookworm main\nsmtpd_milters = inet:localhost:12345\n"
                     "{ a[i] = b; }",
    "odd_whitespace": "Words\x0cwith a form feed in the middle of them all\n\u3000\u3000全角の空白で始まる行です。\n"
                      "\xa0\xa0NBSP-indented   column   line\nnext\x85line\u2028here   with   gaps\n\x1c\x1d",
    "man_page": "LS(1)                      User Commands                     LS(1)\n\nNAME\n"
                "       ls - list directory contents\n\nDESCRIPTION\n"
                "       List  information  about  the FILEs (the current directory by default).\n"
                "       Sort entries alphabetically if none of -cftuvSUX nor --sort is specified.\n\n"
                "   Subsection title\n"
                "       Mandatory arguments to long options are mandatory for short options too.\n\n"
                "       -a, --all\n              do not ignore entries starting with .\n\n"
                "           if (x) {\n               y = 1;\n           }\n\n"
                "           This indented block reads as a paragraph of prose with many words in it.\n\n"
                "SEE ALSO\n       chcpu(1), chrt(1)",
    "markdown": "# Title\n\nSome text here that is a sentence.\n\n```python\nprint('x')\n# not a heading\n```\n\n"
                "Heading\n=======\n\n1. First item\n2. Second item\n- bullet\n   that wraps\n\n3.2 Numbered heading\n",
}

EDGE_LINES = {
    "empty": [("blank", 0, -1)],
    "only_blank_lines": [("blank", 0, -1)] * 5,
    "one_line": [("prose", 0, 0)],
    "crlf": [("heading", 0, 0), ("prose", 0, 1), ("blank", 1, -1), ("heading", 1, 2), ("code", 1, 3),
             ("blank", 2, -1)],
    "tabs": [("table", 0, 0), ("table", 0, 1), ("prose", 0, 2), ("prose", 0, 2)],
    "all_caps": [("heading", 0, 0), ("heading", 0, 1), ("heading", 0, 2), ("prose", 0, 3), ("prose", 0, 3),
                 ("heading", 0, 4), ("prose", 0, 5), ("table", 0, 6), ("prose", 0, 7), ("prose", 0, 8),
                 ("heading", 0, 9), ("prose", 0, 10), ("prose", 0, 10)],
    "options": [("option", 0, 0), ("prose", 0, 1), ("option", 0, 2), ("prose", 0, 3), ("prose", 0, 4),
                ("option", 0, 5), ("option", 0, 6), ("prose", 0, 7), ("heading", 0, 8), ("prose", 0, 9)],
    "table": [("table", 0, 0), ("table", 0, 1), ("table", 0, 2), ("blank", 1, -1), ("table", 1, 3), ("table", 1, 4),
              ("table", 1, 5), ("prose", 1, 6)],
    "code_and_data": [("code", 0, 0), ("code", 0, 1), ("code", 0, 2), ("code", 0, 3), ("prose", 0, 4),
                      ("code", 0, 5), ("code", 0, 6), ("code", 0, 7), ("code", 0, 8), ("code", 0, 9)],
    "odd_whitespace": [("prose", 0, 0), ("prose", 0, 0), ("table", 0, 1), ("table", 0, 2), ("blank", 1, -1)],
    "man_page": [("heading", 0, 0), ("blank", 1, -1), ("heading", 1, 1), ("prose", 1, 2), ("blank", 2, -1),
                 ("heading", 2, 3), ("prose", 2, 4), ("prose", 2, 5), ("blank", 3, -1), ("heading", 3, 6),
                 ("prose", 3, 7), ("blank", 4, -1), ("option", 4, 8), ("prose", 4, 9), ("blank", 5, -1),
                 ("code", 5, 10), ("code", 5, 11), ("code", 5, 12), ("blank", 6, -1), ("prose", 6, 13),
                 ("blank", 7, -1), ("heading", 7, 14), ("code", 7, 15)],
    "markdown": [("heading", 0, 0), ("blank", 1, -1), ("prose", 1, 1), ("blank", 2, -1), ("code", 2, 2),
                 ("code", 2, 3), ("code", 2, 4), ("code", 2, 5), ("blank", 3, -1), ("heading", 3, 6),
                 ("heading", 3, 7), ("blank", 4, -1), ("heading", 4, 8), ("prose", 4, 9), ("prose", 4, 9),
                 ("prose", 4, 9), ("blank", 5, -1), ("heading", 5, 10), ("blank", 6, -1)],
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_cases_keep_their_classification(name):
    lines = parse(EDGES[name])
    assert [line.text for line in lines] == EDGES[name].split("\n")
    assert _shape(lines) == EDGE_LINES[name]
