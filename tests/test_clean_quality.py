import dataclasses
import sysconfig
from pathlib import Path

import pytest

from scratchlm.data.clean.quality import (
    CODE,
    PROSE,
    Failure,
    QualityConfig,
    c4_filter_lines,
    c4_line_reason,
    profile_for_domain,
    quality_verdict,
)

GOOD_PROSE = """\
The river town grew up around a ford where traders crossed with their cattle on the way to the coast.
By the twelfth century a wooden bridge had replaced the ford, and a market was held beside it every week.

Records kept by the abbey show that the bridge was rebuilt in stone after a flood carried the old one away.
The new bridge had seven arches, and the masons who built it were paid with grain as well as coin.

Today the market square is quieter than it once was, but the bridge still carries traffic into the town.
Visitors often stop to read the worn inscription that names the abbot who paid for the work.
Local historians have argued for decades about whether that name was carved at the time or added later.
"""


def rules(text: str, cfg: QualityConfig = PROSE) -> set[str]:
    return {f.rule for f in quality_verdict(text, cfg)}


def only(cfg_field: str, value) -> QualityConfig:
    """A config with every rule off except the one named, to test rules one at a time."""
    off = {f.name: None for f in dataclasses.fields(QualityConfig) if f.default is not None and f.name.startswith(
        ("min_", "max_", "c4_min", "fw_min", "fw_max", "code_max", "code_min", "code_autogen_head"))
        and not isinstance(f.default, tuple)}
    off.update(max_top_ngram_char_share=(), max_dup_ngram_char_share=(), c4_terminal_punctuation=None,
               c4_drop_javascript_lines=False, c4_reject_lorem_ipsum=False, c4_reject_curly_braces=False)
    off[cfg_field] = value
    return dataclasses.replace(PROSE, **off)


def test_good_prose_passes_every_rule():
    assert quality_verdict(GOOD_PROSE, PROSE) == []
    cleaned, removed = c4_filter_lines(GOOD_PROSE, PROSE)
    assert removed == [] and cleaned == GOOD_PROSE


def test_gibberish_fails():
    gibberish = " ".join(["xq7#zv", "##", "k3!@p", "qwrtzpl", "..."] * 30)
    failed = rules(gibberish)
    assert {"gopher_hash_per_word", "gopher_alpha_word_share", "gopher_stop_words"} <= failed


def test_repetitive_text_fails_repetition_rules():
    repetitive = "\n".join(["Buy the best widgets in town today at the shop."] * 20 + GOOD_PROSE.split("\n"))
    failed = rules(repetitive)
    assert {"gopher_dup_line_share", "gopher_dup_line_char_share", "fw_dup_line_char_ratio"} <= failed
    assert "gopher_dup_10gram_char_share" in failed


def test_list_like_document_fails():
    listing = "\n".join(f"- catalogue item {i}" for i in range(60))
    failed = rules(listing)
    assert {"gopher_bullet_line_share", "fw_newlines_per_word", "fw_punct_line_share", "c4_min_sentences"} <= failed


def test_empty_document_fails_only_word_count():
    assert quality_verdict("", PROSE) == [Failure("gopher_min_words", 0.0, 50.0)]
    assert rules("", CODE) == {"gopher_min_words"}


@pytest.mark.parametrize(
    "field, value, fires, passes, rule",
    [
        ("min_words", 50, "word " * 49, "word " * 50, "gopher_min_words"),
        ("max_words", 100, "word " * 101, "word " * 100, "gopher_max_words"),
        ("min_mean_word_len", 3.0, "a an it " * 20, "cats dogs " * 20, "gopher_min_mean_word_len"),
        ("max_mean_word_len", 10.0, "incomprehensibilities " * 20, "reasonable " * 20, "gopher_max_mean_word_len"),
        ("max_hash_per_word", 0.1, "#tag word " * 20, "word " * 40 + "#tag", "gopher_hash_per_word"),
        ("max_ellipsis_per_word", 0.1, "wait... " * 20, "wait. " * 20, "gopher_ellipsis_per_word"),
        ("max_bullet_line_share", 0.9, "• point one\n" * 10, "• point one\nA sentence.\n" * 5,
         "gopher_bullet_line_share"),
        ("max_ellipsis_line_share", 0.3, "and so on...\n" * 10, "and so on.\n" * 10, "gopher_ellipsis_line_share"),
        ("min_alpha_word_share", 0.8, "12 34 56 words " * 10, "12 words words words words " * 10,
         "gopher_alpha_word_share"),
        ("min_stop_words", 2, "cats sleep " * 20, "the cat and the dog " * 10, "gopher_stop_words"),
        ("max_dup_line_share", 0.3, "same line here\n" * 5 + "other\n", "line one\nline two\nline three\n",
         "gopher_dup_line_share"),
        ("max_dup_paragraph_share", 0.3, "same para\n\n" * 5 + "other", "para one\n\npara two",
         "gopher_dup_paragraph_share"),
        ("max_dup_line_char_share", 0.2, "a long repeated line\n" * 3 + "x", "a long line\nanother one",
         "gopher_dup_line_char_share"),
        ("max_dup_paragraph_char_share", 0.2, "a long repeated para\n\n" * 3 + "x", "a para\n\nanother",
         "gopher_dup_paragraph_char_share"),
        ("c4_min_sentences", 5, "One. Two. Three. Four.", "One. Two. Three. Four. Five.", "c4_min_sentences"),
        ("fw_min_punct_line_share", 0.12, "no stop here\n" * 9 + "one.", "no stop here\n" * 7 + "one.",
         "fw_punct_line_share"),
        ("fw_max_short_line_share", 0.67, "short\n" * 3 + "x" * 40, "short\n" * 2 + "x" * 40,
         "fw_short_line_share"),
        ("fw_max_dup_line_char_ratio", 0.01, ("unique line " * 20 + "\n") + "dup line\ndup line",
         "unique line one\nunique line two", "fw_dup_line_char_ratio"),
        ("fw_max_newlines_per_word", 0.3, "one two\n" * 10, "one two three four\n" * 10, "fw_newlines_per_word"),
        ("code_max_line_chars", 1000, "x" * 1001, "x" * 1000, "code_max_line_chars"),
        ("code_max_mean_line_chars", 100.0, ("y" * 150 + "\n") * 3, ("y" * 50 + "\n") * 3, "code_mean_line_chars"),
        ("code_min_alnum_share", 0.25, "a = {[( )]} ;;" * 10, "value = compute(x)\n" * 10, "code_alnum_share"),
        ("code_autogen_head_lines", 5, "# Code generated by protoc. DO NOT EDIT.\nx = 1",
         "x = 1\n" * 5 + "# do not edit below this line, it was generated by hand", "code_autogenerated"),
    ],
)
def test_each_rule_fires_and_does_not_fire(field, value, fires, passes, rule):
    cfg = only(field, value)
    assert rule in rules(fires, cfg)
    assert rule not in rules(passes, cfg)
    failure = next(f for f in quality_verdict(fires, cfg) if f.rule == rule)
    assert isinstance(failure.value, float) and isinstance(failure.threshold, float)


def test_ngram_rules_fire_and_not_fire():
    top_cfg = dataclasses.replace(only("min_words", None), max_top_ngram_char_share=((2, 0.20),))
    assert "gopher_top_2gram_char_share" in rules("green apple " * 10 + "one more sentence here", top_cfg)
    assert "gopher_top_2gram_char_share" not in rules(GOOD_PROSE, top_cfg)
    dup_cfg = dataclasses.replace(only("min_words", None), max_dup_ngram_char_share=((5, 0.15),))
    words = GOOD_PROSE.split()[:40]
    assert "gopher_dup_5gram_char_share" in rules(" ".join(words + words[:20]), dup_cfg)
    assert "gopher_dup_5gram_char_share" not in rules(" ".join(words), dup_cfg)


def test_c4_document_rules():
    cfg = only("min_words", None)
    assert "c4_lorem_ipsum" in rules("Lorem ipsum dolor sit amet.", dataclasses.replace(cfg, c4_reject_lorem_ipsum=True))
    assert "c4_lorem_ipsum" not in rules(GOOD_PROSE, dataclasses.replace(cfg, c4_reject_lorem_ipsum=True))
    assert "c4_curly_braces" in rules("Use f(x) { return 1; }.", dataclasses.replace(cfg, c4_reject_curly_braces=True))
    assert "c4_curly_braces" not in rules("Use f(x) [1].", dataclasses.replace(cfg, c4_reject_curly_braces=True))


def test_c4_line_filter():
    text = "A heading\nThis line is a real sentence.\nPlease enable JavaScript to view the page.\nToo short.\n\nShe said \"yes, we will.\""
    cleaned, removed = c4_filter_lines(text, PROSE)
    assert cleaned == "This line is a real sentence.\n\nShe said \"yes, we will.\""
    assert removed == ["A heading", "Please enable JavaScript to view the page.", "Too short."]
    assert c4_line_reason("A heading") == "no_terminal_punctuation"
    assert c4_line_reason("Please enable JavaScript to view the page.") == "javascript"
    assert c4_line_reason("Too short.") == "too_few_words"
    assert c4_line_reason("This line is a real sentence.") is None


def test_code_profile():
    assert profile_for_domain("code") is CODE
    assert profile_for_domain("Code ") is CODE
    assert profile_for_domain("web") is PROSE and profile_for_domain(None) is PROSE
    for prose_rule in ("min_stop_words", "min_alpha_word_share", "c4_terminal_punctuation", "fw_min_punct_line_share"):
        assert getattr(CODE, prose_rule) is None
    assert CODE.c4_reject_curly_braces is False
    source = "def f(x):\n    return {x: 1}\n" * 3
    assert c4_filter_lines(source, CODE) == (source, [])


def test_real_stdlib_file_passes_code_profile_and_fails_prose_rules():
    source = (Path(sysconfig.get_paths()["stdlib"]) / "json" / "encoder.py").read_text(encoding="utf-8")
    assert quality_verdict(source, CODE) == []
    prose_failures = rules(source, PROSE)
    assert "c4_curly_braces" in prose_failures
    assert "fw_punct_line_share" in prose_failures or "fw_dup_line_char_ratio" in prose_failures
    assert len(c4_filter_lines(source, PROSE)[1]) > 100


def test_minified_and_generated_code_fail_code_profile():
    minified = "var a=function(b){return b*2};" * 200
    assert {"code_max_line_chars", "code_mean_line_chars"} <= rules(minified, CODE)
    generated = "# -*- coding: utf-8 -*-\n# Generated by the protocol buffer compiler.  DO NOT EDIT!\n" + "x = 1\n" * 20
    assert "code_autogenerated" in rules(generated, CODE)
    blob = "0x00, 0x01, 0x02, 0x03,\n" * 200
    assert "code_alnum_share" not in rules(blob, CODE)  # hex data is alnum-heavy; the dup rule catches it
    assert "gopher_dup_10gram_char_share" in rules(blob, CODE)


README = """\
# fastqueue

[![PyPI](https://img.shields.io/pypi/v/fastqueue.svg)](https://pypi.org/project/fastqueue/)

fastqueue is a small library for running background jobs in the same process as your web application. It keeps
the queue in memory, retries failed jobs with a backoff, and stops cleanly when the process is asked to exit.

## Install

```
pip install fastqueue
```

## Usage

Create a queue, register a handler for each kind of job, and start the workers when the application starts:

```python
queue = Queue(workers=4)
@queue.handler("email")
def send(job):
    mailer.send(job["to"], job["body"])
queue.start()
```

The handler receives the job as a dict. A handler that raises is retried up to three times, with the delay
doubling each time; after the last try the job is written to the dead-letter log with its traceback.

## Configuration

| key | default | what it does |
|-----|---------|--------------|
| workers | 4 | threads that run jobs |
| retries | 3 | tries before a job is given up |

See the documentation for the full list of options and for the guarantees the queue does and does not give.
"""


def test_technical_profile_keeps_a_readme_that_prose_rules_gut():
    from scratchlm.data.clean.quality import TECHNICAL

    assert rules(README, TECHNICAL) == set()
    assert "c4_curly_braces" in rules(README.replace("as a dict", "as a {dict}"))
    kept, removed = c4_filter_lines(README, PROSE)
    assert "pip install fastqueue" in removed and "queue.start()" not in kept
    assert c4_filter_lines(README, TECHNICAL) == (README, [])
    # the rules that matter for any prose stay on: junk is still junk under the technical profile
    assert "gopher_stop_words" in rules("\n".join(f"img_{i}.png thumb_{i}.jpg" for i in range(60)), TECHNICAL)
    assert rules(GOOD_PROSE, TECHNICAL) == set()
