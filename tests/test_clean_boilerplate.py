import random

import pytest

from scratchlm.data.clean.boilerplate import (
    BoilerplateConfig,
    RepeatedLineFinder,
    boilerplate_reason,
    line_hash,
    normalize_line,
    remove_lines,
    strip_boilerplate_lines,
)

ARTICLE = [
    "The council approved the new cycling lanes after a two-hour debate on Monday evening.",
    "Residents had asked for safer routes to the school since the junction was redesigned in 2019.",
]


@pytest.mark.parametrize(
    "line, reason",
    [
        ("We use cookies to improve your experience. By continuing to browse, you agree to our use of cookies.", "cookie"),
        ("Accept all cookies", "cookie"),
        ("By using this website, you accept", "cookie"),
        ("We value your privacy", "cookie"),
        ("Manage cookie preferences", "cookie"),
        ("Home | About | Contact", "nav"),
        ("Home > News > Local > Cycling", "nav"),
        ("News • Sport • Weather • Culture", "nav"),
        ("© 2024 Example Media Ltd. All rights reserved.", "copyright"),
        ("Copyright 2023 ACME Corp", "copyright"),
        ("Share this article", "share"),
        ("Share on Facebook", "share"),
        ("Follow us on Instagram", "share"),
        ("Subscribe to our newsletter for weekly updates", "newsletter"),
        ("Sign up for our free weekly newsletter", "newsletter"),
        ("Subscribe to the Valley Times newsletter and get the top stories every morning.", "newsletter"),
        ("Related stories", "widget"),
        ("Privacy Policy", "legal"),
        ("Please enable JavaScript to use this site", "browser"),
        ("Leave a comment", "comments"),
        ("Leave a Reply", "comments"),
        ("12 comments", "comments"),
        ("Click here to download the brochure", "prompt"),
        ("Skip to main content", "widget"),
        ("Read more »", "widget"),
        ("Back to top ↑", "widget"),
    ],
)
def test_boilerplate_lines_are_recognised(line, reason):
    assert boilerplate_reason(line) == reason


@pytest.mark.parametrize(
    "line",
    ARTICLE
    + [
        "",
        "The TCP/IP/UDP stack handles the rest.",
        "| Name | Age | City |",
        "Cats, dogs and rabbits are the most common pets.",
        "Bakers use cookies and cakes to test a new oven before the shop opens.",
        "Home ownership rates fell for the third year in a row.",
        # a long paragraph that mentions cookies and copyright is content, not a banner
        "The court held that the use of cookies without consent breached the directive, and that copyright "
        + "in the database could not be claimed by the operator, because the data had been collected by others "
        + "and the investment in presenting it was too small to qualify for the separate database right at all.",
    ],
)
def test_content_lines_are_kept(line):
    assert boilerplate_reason(line) is None


def test_strip_boilerplate_lines_returns_text_and_removed():
    page = "\n".join(["Home | About | Contact", "", ARTICLE[0], "", "Share this", "Follow us on Instagram", "",
                      "Print", ARTICLE[1], "", "", "", "© 2024 Example"])
    cleaned, removed = strip_boilerplate_lines(page)
    # chrome at the ends and a block made only of chrome go; a chrome word inside a block of text stays
    assert cleaned == ARTICLE[0] + "\n\nPrint\n" + ARTICLE[1]
    assert removed == ["Home | About | Contact", "Share this", "Follow us on Instagram", "© 2024 Example"]
    assert strip_boilerplate_lines("\n".join(ARTICLE)) == ("\n".join(ARTICLE), [])


def test_max_words_config_limits_pattern_rules():
    line = "We use cookies " + "and more words " * 10
    assert boilerplate_reason(line) == "cookie"
    assert boilerplate_reason(line, BoilerplateConfig(max_words=10)) is None


def test_normalize_folds_case_space_and_digits():
    assert normalize_line("  © 2023   ACME ") == normalize_line("© 2024 acme")
    assert line_hash("© 2023 ACME") == line_hash("©   2024 acme")
    assert line_hash("© 2023 ACME") != line_hash("© ACME Inc")


def _site_docs(n: int, rng: random.Random) -> list[str]:
    footer = "Example Gazette is published by Example Media, 1 High Street, Springfield."
    docs = []
    for i in range(n):
        body = [f"Story {i} paragraph {j}: " + " ".join(rng.choice(["red", "blue", "green", "fast", "slow", "river", "hill"])
                for _ in range(12)) + "." for j in range(4)]  # sentences: the footer is not their wrapped tail
        docs.append("\n".join(body + [footer]))
    return docs


def test_repeated_line_finder_finds_site_template_lines():
    rng = random.Random(0)
    finder = RepeatedLineFinder()
    docs = _site_docs(50, rng)
    for doc in docs:
        finder.feed(doc)
    assert finder.n_docs == 50
    footer = docs[0].split("\n")[-1]
    assert finder.count(footer) == 50
    frequent = finder.frequent(min_docs=5, min_share=0.2)
    assert frequent == {line_hash(footer)}
    cleaned, removed = remove_lines(docs[3], frequent)
    assert removed == [footer] and footer not in cleaned and cleaned == "\n".join(docs[3].split("\n")[:-1])
    # min_docs and min_share both have to hold
    assert finder.frequent(min_docs=51, min_share=0.0) == set()
    assert finder.frequent(min_docs=1, min_share=1.01) == set()


def test_a_line_repeated_inside_one_document_counts_once():
    finder = RepeatedLineFinder()
    finder.feed("the same long line here\n" * 10)
    assert finder.count("the same long line here") == 1


def test_short_lines_are_never_counted():
    finder = RepeatedLineFinder(min_line_chars=10)
    for _ in range(20):
        finder.feed("}\nreturn x\nsomething long enough")
    assert finder.count("}") == 0 and finder.count("return x") == 0
    assert finder.count("something long enough") == 20


def test_memory_stays_bounded_and_frequent_lines_survive_pruning():
    rng = random.Random(1)
    finder = RepeatedLineFinder(max_entries=2_000, merge_every=500)
    template = "Subscribe to the Example Gazette print edition today"
    for i in range(3_000):
        # letters, not digits: normalize_line folds digits, which would make these lines identical
        unique = ["unique line " + "".join(rng.choices("abcdefghij", k=12)) for _ in range(5)]
        finder.feed("\n".join(unique + [template]))
        assert len(finder._keys) <= finder.max_entries  # the table never exceeds its cap after a merge
    assert len(finder) <= 2_000
    assert finder.undercount_bound > 0  # pruning happened
    assert line_hash(template) in finder.frequent(min_docs=100, min_share=0.5)
    # stored counts are lower bounds of the truth
    assert 3_000 - finder.undercount_bound <= finder.count(template) <= 3_000


def test_remove_lines_without_hashes_is_identity():
    assert remove_lines("a\n\nb", set()) == ("a\n\nb", [])
