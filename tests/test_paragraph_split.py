"""The one paragraph splitter: its three boundaries, each what its steps have always split on."""
from scratchlm.data.paragraph_split import paragraph_starts, paragraphs_and_breaks, split_paragraphs


def test_the_strict_boundary_keeps_its_blank_lines_so_the_text_can_be_rebuilt():
    text = "a\r\n\r\nb\n \t\n\nc\nd"
    paragraphs, breaks = paragraphs_and_breaks(text)
    assert paragraphs == ["a", "b", "c\nd"] and breaks == ["\r\n\r\n", "\n \t\n\n"]
    assert "".join(p + b for p, b in zip(paragraphs, breaks + [""])) == text
    assert split_paragraphs(text) == paragraphs  # the deduper's indices are the structure check's


def test_the_filters_boundary_takes_a_line_of_any_whitespace_for_blank():
    text = "a\n\u00a0\nb\n\x0c\nc"
    assert split_paragraphs(text) == [text]  # strict: a no-break space or a form feed is text
    assert [p.strip() for p in split_paragraphs(text, any_space=True)] == ["a", "b", "c"]


def test_a_paragraph_starts_at_its_first_character_after_a_blank_line():
    text = "one\n\n  two\nthree\n \n\n four"
    assert [text[i:i + 3] for i in paragraph_starts(text)] == ["two", "fou"]
