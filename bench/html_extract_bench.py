"""HTML main-content extraction: resiliparse vs trafilatura, speed and accuracy on generated pages.

Each generated page has a known article (3-8 paragraphs) wrapped in the usual boilerplate: cookie banner,
nav menu, breadcrumbs, sidebar with links, newsletter box, share buttons, comment section and footer.
A third of the pages use semantic HTML5 tags (<nav>, <article>, <footer>), a third only <div>s with
telling class/id names ("menu", "footer"), a third <div>s with meaningless generated class names (as CSS
modules emit), where only text-density heuristics can tell content from boilerplate. The cookie banner
and breadcrumbs keep telling names on every page. Measured per extractor, in one run, same pages:
The resiliparse rows are the reader's modes: extract_main_text is html_extract = "main" (resiliparse's
main-content heuristic), "auto" the default (data/clean/html_chrome.py drops the chrome the markup names).
  docs/s          pages extracted per second (single process)
  article kept    share of article characters whose paragraph appears intact in the output
  boilerplate rm  share of boilerplate snippets that do not appear in the output

Run: python bench/html_extract_bench.py [--pages 400] [--seed 0]
"""
import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no what can more out up some time "
    "river harbour council school market bridge village winter summer history museum railway station garden "
    "library farmer teacher engineer doctor family island mountain forest valley weather storm harvest festival "
    "built opened closed restored measured discovered recorded described repaired visited crossed planted"
).split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 24))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(2, 5)))


MARKUP = ("semantic", "named divs", "anonymous divs")


def make_page(rng: random.Random, markup: str) -> tuple[str, list[str], list[str]]:
    """(html, article paragraphs, boilerplate snippets)."""
    article = [paragraph(rng) for _ in range(rng.randint(3, 8))]
    site = rng.choice(["Cape Gazette", "Valley Times", "Harbour Herald", "Northern Post"])
    nav_items = rng.sample(["Home", "News", "Sport", "Culture", "Weather", "About us", "Contact", "Shop", "Events"], 6)
    cookie = f"We use cookies to give you the best experience on {site}. By continuing you agree to our cookie policy."
    newsletter = f"Subscribe to the {site} newsletter and get the top stories every morning."
    related = [f"Related: {sentence(rng)[:-1]}" for _ in range(4)]
    comments = [f"Comment by reader{rng.randint(1, 999)}: {sentence(rng)}" for _ in range(rng.randint(2, 5))]
    footer = f"Copyright {rng.randint(2015, 2025)} {site} Media Group. All rights reserved."
    boilerplate = [cookie, newsletter, footer, "Share on Facebook", "Accept all cookies"] + related + comments
    boilerplate += [" | ".join(nav_items)]

    nav_links = "".join(f'<li><a href="/{i}">{item}</a></li>' for i, item in enumerate(nav_items))
    related_links = "".join(f'<li><a href="/r{i}">{r}</a></li>' for i, r in enumerate(related))
    comment_html = "".join(f'<div class="comment"><p>{c}</p></div>' for c in comments)
    body = "".join(f"<p>{p}</p>" for p in article)
    title = sentence(rng)[:60]

    def block(tag: str, cls: str, inner: str) -> str:
        if markup == "semantic":
            return f'<{tag} class="{cls}">{inner}</{tag}>'
        if markup == "named divs":
            return f'<div class="{cls}" id="{cls}">{inner}</div>'
        return f'<div class="_{rng.getrandbits(24):06x}">{inner}</div>'

    html = (
        f"<!doctype html><html><head><title>{title} - {site}</title>"
        '<script>window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments);}</script>'
        "<style>body { font-family: sans-serif }</style></head><body>"
        f'<div class="cookie-banner" id="cookie-consent"><p>{cookie}</p><button>Accept all cookies</button></div>'
        + block("header", "site-header", f"<h2>{site}</h2>" + block("nav", "menu", f"<ul>{nav_links}</ul>"))
        + '<div class="breadcrumbs"><a href="/">Home</a> &gt; <a href="/news">News</a></div>'
        + '<div class="content">'
        + block("article", "post", f"<h1>{title}</h1>{body}"
                + '<div class="share-buttons"><a href="#">Share on Facebook</a> <a href="#">Tweet</a></div>')
        + block("section", "comments", f"<h3>Comments</h3>{comment_html}")
        + "</div>"
        + block("aside", "sidebar", f"<h3>Related stories</h3><ul>{related_links}</ul>"
                f'<div class="newsletter"><p>{newsletter}</p><input type="email"><button>Sign up</button></div>')
        + block("footer", "footer", f"<p>{footer}</p><a href='/privacy'>Privacy policy</a>")
        + "</body></html>"
    )
    return html, article, boilerplate


def squash(text: str) -> str:
    return " ".join(text.split())


def score(output: str, article: list[str], boilerplate: list[str]) -> tuple[int, int, int, int]:
    out = squash(output)
    kept_chars = sum(len(p) for p in article if squash(p) in out)
    removed = sum(squash(b) not in out for b in boilerplate)
    return kept_chars, sum(len(p) for p in article), removed, len(boilerplate)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    from scratchlm.data.clean.boilerplate import strip_boilerplate_lines
    from scratchlm.data.clean.html import extract_html, extract_main_text

    rng = random.Random(args.seed)
    kinds = [MARKUP[i % len(MARKUP)] for i in range(args.pages)]
    pages = [make_page(rng, kind) for kind in kinds]
    extractors = {
        # resiliparse's main-content extraction alone: what the reader ran before it counted its losses (issue 37),
        # but for the fencing of <pre> blocks
        "resiliparse main_content, raw": lambda h: extract_plain_text(h, main_content=True, alt_texts=False,
                                                                      form_fields=False, noscript=False,
                                                                      comments=False, links=False),
        "resiliparse (extract_main_text)": extract_main_text,
        # what the prepare stage does: extraction, then the line rules of boilerplate.py
        "resiliparse + strip_boilerplate": lambda h: strip_boilerplate_lines(extract_main_text(h))[0],
        # html_extract = "auto", the reader's default: the body without the chrome its markup names
        "auto (extract_html)": lambda h: extract_html(h, "auto").text,
        "auto + strip_boilerplate": lambda h: strip_boilerplate_lines(extract_html(h, "auto").text)[0],
        "trafilatura.extract (default)": lambda h: trafilatura.extract(h, include_comments=False) or "",
        "trafilatura.extract (fast=True)": lambda h: trafilatura.extract(h, include_comments=False, fast=True) or "",
    }
    mb = sum(len(h.encode()) for h, _, _ in pages) / 1e6
    print(f"{args.pages} pages, {mb:.1f} MB of HTML, seed {args.seed}, python {sys.version.split()[0]}")
    print(f"{'extractor':34s} {'docs/s':>8s} {'article kept':>13s} {'boilerplate rm':>15s}   per markup: kept / rm")
    for name, fn in extractors.items():
        for html, _, _ in pages[:10]:
            fn(html)  # warm-up: imports, lazy compilation
        start = time.perf_counter()
        outputs = [fn(html) for html, _, _ in pages]
        seconds = time.perf_counter() - start
        scores = [score(o, a, b) for o, (_, a, b) in zip(outputs, pages)]
        line = f"{name:34s} {args.pages / seconds:8.0f} {ratios(scores)}  "
        for kind in MARKUP:
            line += f" | {kind}: {ratios([s for s, k in zip(scores, kinds) if k == kind], compact=True)}"
        print(line)


def ratios(scores: list[tuple[int, int, int, int]], compact: bool = False) -> str:
    kept, total, removed, n_boiler = (sum(col) for col in zip(*scores))
    if compact:
        return f"{kept / total:.1%} / {removed / n_boiler:.1%}"
    return f"{kept / total:13.1%} {removed / n_boiler:15.1%}"

if __name__ == "__main__":
    main()
