"""The README stays a short entry point and the docs stay navigable: the word budget, the set-up commands CI runs,
every relative link and #anchor, the docs index, and the benchmarks grouped in pipeline order."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_WORDS = 1500
SETUP_WITHIN_WORDS = 200
# The top-level sections of docs/benchmarks.md, in the order of the pipeline (and of docs/README.md).
BENCHMARK_SECTIONS = ["Data", "Decontamination", "Tokenizer", "Plan", "Training", "Monitoring",
                      "Evaluation, SFT and export", "Experiments"]

FENCE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")  # CommonMark: a backtick fence's info string has no backtick
INLINE_CODE = re.compile(r"(`+)(?:.+?)\1")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation other than '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text: str) -> list[str]:
    found = []
    for line in _prose_lines(text):
        found += LINK.findall(INLINE_CODE.sub("", line))
    return found


def broken_links(path: Path, text: str | None = None) -> list[str]:
    """Every relative link of a Markdown file whose file or #anchor does not exist."""
    text = path.read_text(encoding="utf-8") if text is None else text
    broken = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if file_part and not dest.exists():
            broken.append(f"{path.name}: {target} (no such file)")
            continue
        if anchor and dest.suffix == ".md":
            own = text if dest == path else dest.read_text(encoding="utf-8")
            if anchor not in anchors(own):
                broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_readme_is_short():
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= README_MAX_WORDS, f"README.md has {words} words; at most {README_MAX_WORDS} (move details to docs/)"


def _ci_test_command() -> str:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")][-1]


def test_setup_commands_open_the_readme_and_the_test_command_is_the_one_ci_runs():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no bash code block"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) >= 2, commands
    install, test = commands[0], commands[1]
    assert install.endswith("scratchlm quickstart"), install
    assert test == _ci_test_command(), f"README's test command {test!r} is not .ci/run's {_ci_test_command()!r}"
    first_words = " ".join(text.split()[:SETUP_WITHIN_WORDS])
    for command in (install, test):
        assert " ".join(command.split()) in first_words, f"not within the first {SETUP_WITHIN_WORDS} words: {command}"


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading, with punctuation!\n", encoding="utf-8")
    good = "# Page\n\n[ok](#page) [ok](other.md#a-code-heading-with-punctuation) [ext](https://example.com/#x)\n"
    assert broken_links(page, good) == []
    bad = good + "[bad](#nowhere) [bad](other.md#other) [bad](missing.md)\n```\n[in code](#ignored)\n```\n"
    assert broken_links(page, bad) == ["page.md: #nowhere (no such heading)", "page.md: other.md#other (no such heading)",
                                       "page.md: missing.md (no such file)"]


def test_slugs_follow_github():
    assert slug("Big corpora: executors, memory, disk") == "big-corpora-executors-memory-disk"
    assert slug("Dedup (MinHash LSH, bench/dedup_bench.py)") == "dedup-minhash-lsh-benchdedup_benchpy"
    assert slug("Evaluate beside the run: `scratchlm eval watch`") == "evaluate-beside-the-run-scratchlm-eval-watch"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def _index_pages() -> list[str]:
    text = (DOCS / "README.md").read_text(encoding="utf-8")
    pages = []
    for target in links(text):
        name = target.partition("#")[0]
        if name.endswith(".md") and "/" not in name and name not in pages:
            pages.append(name)
    return pages


def test_every_page_of_the_docs_index_exists_and_every_page_is_indexed():
    pages = _index_pages()
    assert pages, "docs/README.md links no page"
    assert [p for p in pages if not (DOCS / p).exists()] == []
    assert sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md") == sorted(pages)


def test_benchmarks_follow_the_pipeline_order():
    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    sections = [m.group(2) for line in _prose_lines(text) if (m := HEADING.match(line)) and len(m.group(1)) == 2]
    assert [s for s in sections if s != "Index"] == BENCHMARK_SECTIONS
    # each section names its docs page, and the pages come in the docs index's order
    order = _index_pages()
    bodies = re.split(r"^## .*$", text, flags=re.M)[2:]  # [0] before the first, [1] the index
    pages = [next(t.partition("#")[0] for t in links(body) if t.partition("#")[0] in order) for body in bodies]
    assert [order.index(p) for p in pages] == sorted(order.index(p) for p in pages), pages
