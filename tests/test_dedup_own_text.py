"""A page that says something of its own is no copy, however much of another it holds (git-diff-files(1) around
git's diff options); a copy with nothing of its own is still dropped. CJK text is compared character by
character."""
from __future__ import annotations

import random

from scratchlm.data.dedup import ContainmentFinder
from scratchlm.data.dedup.words import normalize_for_hash, word_shingles

from test_clean_multilingual import _kept, _ledger, _prepare

RNG = random.Random(3)
VOCAB = ["".join(RNG.choice("bcdfglmnprstv") + RNG.choice("aeiou") for _ in range(RNG.randint(1, 4)))
         for _ in range(4000)]


def _sentence(n: int = 14) -> str:
    return " ".join(RNG.choice(VOCAB) for _ in range(n)).capitalize() + "."


OPTIONS = [(f"--opt{i}", _sentence()) for i in range(90)]  # the options text that several pages include
INCLUDE = "\n\n".join(f"{name}\n    {text}" for name, text in OPTIONS)


def _page(name: str, own_sentences: int) -> str:
    own = " ".join(_sentence() for _ in range(own_sentences))
    return f"NAME\n\n{name} - does one thing\n\nDESCRIPTION\n\n{own}\n\nOPTIONS\n\n{INCLUDE}\n"


def test_a_page_of_its_own_around_an_include_is_kept_whole_but_a_bare_copy_is_dropped(tmp_path):
    (tmp_path / "man").mkdir()
    (tmp_path / "man" / "a-tree.txt").write_text(_page("git-diff-tree", 40))
    files = _page("git-diff-files", 14)  # ~200 words of its own around the include: over 80% contained
    (tmp_path / "man" / "b-files.txt").write_text(files)
    (tmp_path / "man" / "c-copy.txt").write_text(_page("git-diff-copy", 1))  # the include and one sentence
    out, _ = _prepare(tmp_path, [{"name": "man", "domain": "docs", "path": "man", "format": "text",
                                  "profile": "technical"}], skip=["quality", "language"])
    kept = {k.rsplit("/", 1)[-1]: v for k, v in _kept(out).items()}
    assert set(kept) == {"a-tree.txt", "b-files.txt"} and kept["b-files.txt"].strip() == files.strip()
    dropped = [r for r in _ledger(out) if r["level"] == "document"]
    assert [r["id"].rsplit("/", 1)[-1] for r in dropped] == ["c-copy.txt"]
    assert dropped[0]["rule"] in ("near_duplicate", "contained_duplicate")


def test_own_counts_the_sampled_shingles_the_other_lacks():
    finder = ContainmentFinder()
    finder.add_batch(["big", "small"], [_page("big", 40), _page("small", 2)])
    assert finder.own("small", "big") < finder.cfg.own_min <= finder.own("big", "small")


def test_unspaced_scripts_are_compared_character_by_character():
    assert normalize_for_hash("Debian のパッケージ管理") == "debian の パ ッ ケ ー ジ 管 理"
    japanese = "これはテストの文章です。パッケージを管理します。"
    assert len(word_shingles(japanese)) > 10  # not one shingle of a single "word"
