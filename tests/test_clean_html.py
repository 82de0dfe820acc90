from scratchlm.data.clean.html import extract_main_text

ARTICLE_PARAGRAPHS = [
    "The old lighthouse on the northern cape was switched off for the last time in 1987, after more than a century of service to the fishing fleet.",
    "Volunteers from the village have since restored the lamp room, repainted the tower and opened a small museum about the keepers and their families.",
    "Their archive holds logbooks that record every storm, every wreck and every visit from the inspectors who came by boat twice a year.",
]


def page(charset_meta: str = "") -> str:
    body = "".join(f"<p>{p}</p>" for p in ARTICLE_PARAGRAPHS)
    return f"""<!doctype html><html><head>{charset_meta}<title>Lighthouse</title>
<script>var tracking = "should never appear";</script><style>.x {{ color: red }}</style></head>
<body>
<div id="cookie-banner" class="cookie-consent"><p>We use cookies to improve your experience.</p>
<button>Accept all cookies</button></div>
<header><nav class="main-nav"><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li>
<li><a href="/about">About</a></li><li><a href="/contact">Contact</a></li></ul></nav></header>
<main><article><h1>The lighthouse keepers' museum</h1>{body}</article></main>
<aside class="sidebar"><h3>Popular</h3><ul><li><a href="/a">Ten best beaches</a></li></ul></aside>
<footer><p>© 2024 Cape Gazette. All rights reserved.</p><a href="/privacy">Privacy policy</a></footer>
</body></html>"""


def test_keeps_article_and_drops_boilerplate():
    text = extract_main_text(page())
    for paragraph in ARTICLE_PARAGRAPHS:
        assert paragraph in text
    for boilerplate in ["should never appear", "color: red", "We use cookies", "Accept all cookies", "Contact",
                        "All rights reserved", "Privacy policy", "Ten best beaches"]:
        assert boilerplate not in text, boilerplate


def test_paragraphs_are_separated_by_blank_lines():
    text = extract_main_text(page())
    assert ARTICLE_PARAGRAPHS[0] + "\n\n" + ARTICLE_PARAGRAPHS[1] in text
    assert "\n\n\n" not in text and text == text.strip()


def test_bytes_are_decoded_with_the_declared_charset():
    html = page('<meta charset="iso-8859-1">').replace("museum", "musée")
    text = extract_main_text(html.encode("iso-8859-1"))
    assert "musée" in text


def test_empty_and_content_free_pages():
    assert extract_main_text("") == ""
    assert extract_main_text("   ") == ""
    assert extract_main_text(b"") == ""
    assert extract_main_text("<html><body><nav><a href='/'>Home</a></nav></body></html>") == ""
