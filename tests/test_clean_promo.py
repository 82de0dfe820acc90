import ast
import json
import sysconfig
from pathlib import Path

import pydoc_data.topics

from scratchlm.data.clean.promo import (_CALL_TO_ACTION, _MARKETING, _PRICE, MARKETING_LEVEL, PROMO_THRESHOLD, CaseBlind,
                                        PromoScore, promo_score)

PAGES = Path(__file__).resolve().parents[1] / "bench" / "promo_soft_pages.jsonl"

LANDING_PAGE = """\
SUMMER MEGA SALE! Get the BEST deals on the ultimate wireless headphones!
Limited time offer: 50% off everything, today only! Was $199.99, now just $99.99!
FREE SHIPPING on all orders over $25. Buy now and save up to 70%!
Exclusive members-only bonus: sign up today and get a free gift with your first order!
Our top-rated, best-selling headphones are guaranteed to deliver amazing, incredible sound!
100% satisfaction guaranteed or your money back, risk-free! Don't miss out!
Add to cart now! Hurry, stock is running out! Order today and get yours before it's gone!
Shop now at https://example-shop.com/deals and https://example-shop.com/sale - click here to claim your discount!
"""

SEO_SPAM = "\n".join(
    f"Find the cheapest hotels in {city} with our booking service today. "
    f"Compare cheap hotel deals in {city} for your next trip today."
    for city in ["Paris", "Rome", "Berlin", "Madrid", "Vienna", "Prague", "Lisbon", "Dublin"]
)

TECH_DOC = """\
The json module exposes an API familiar to users of the standard library marshal and pickle modules.
json.dumps serializes an object to a JSON formatted str using a conversion table. If skipkeys is true,
dict keys that are not of a basic type are skipped instead of raising a TypeError. If ensure_ascii is
true, the output is guaranteed to have all incoming non-ASCII characters escaped. If indent is a
non-negative integer or string, JSON array elements and object members will be pretty-printed with that
indent level. The best way to handle custom types is to pass a default function that returns a
serializable version of the object or raises TypeError.
"""


def test_landing_page_scores_high_and_lights_up_its_signals():
    score = promo_score(LANDING_PAGE)
    assert score.total > PROMO_THRESHOLD
    assert score.total > 0.7
    assert score.lexicon > 0.05 and score.calls_to_action > 0.2 and score.prices > 3
    assert score.exclamations > 0.5 and score.caps > 0 and score.urls > 0


def test_templated_seo_spam_scores_above_threshold():
    score = promo_score(SEO_SPAM)
    assert score.templated > 0.9
    assert score.total > PROMO_THRESHOLD


def test_technical_doc_scores_low_despite_a_best_and_a_guaranteed():
    score = promo_score(TECH_DOC)
    assert score.total < 0.3
    assert score.prices == 0 and score.calls_to_action == 0 and score.exclamations == 0


def test_every_pydoc_topic_scores_below_threshold():
    scores = {name: promo_score(text).total for name, text in pydoc_data.topics.topics.items()}
    assert len(scores) > 50
    worst = max(scores, key=scores.get)
    assert scores[worst] < 0.35, (worst, scores[worst])


def test_stdlib_docstrings_score_below_threshold():
    lib = Path(sysconfig.get_paths()["stdlib"])
    docstrings = []
    for name in ["json/__init__.py", "argparse.py", "functools.py", "pathlib.py", "subprocess.py", "typing.py"]:
        tree = ast.parse((lib / name).read_text(encoding="utf-8"))
        nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        docstrings += [d for n in nodes if (d := ast.get_docstring(n)) and len(d.split()) >= 20]
    assert len(docstrings) > 50
    assert max(promo_score(d).total for d in docstrings) < 0.35


def test_each_signal_fires_on_its_own_and_not_on_plain_prose():
    plain = "The committee met on Tuesday to review the draft report and agreed to publish it in March. " * 3
    base = promo_score(plain)
    assert base.total == 0.0
    assert promo_score(plain + "Buy now. Sign up. Learn more.").calls_to_action > 0
    assert promo_score(plain + "It costs $19.99 with 50% off.").prices > 0
    assert promo_score(plain + "See https://example.org/x and www.example.org.").urls > 0
    assert promo_score(plain + "Wow! Great!").exclamations > 0
    assert promo_score(plain + "This is AMAZING and FANTASTIC.").caps > 0
    assert promo_score(plain + "An exclusive, limited time, guaranteed bargain.").lexicon > 0
    assert promo_score(plain + "The #1 choice.").lexicon > 0
    # "!=" and "{!r}" in code-like text are not exclamations; "not guaranteed" is not a promise
    assert promo_score(plain + "Use a != b or f'{x!r}'. Order is not guaranteed.").exclamations == 0
    assert promo_score("Order is not guaranteed. " * 10).lexicon == 0


def test_empty_text():
    assert promo_score("") == PromoScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert promo_score("   \n ").total == 0.0


# Soft (B2B) marketing: no prices, no "!", no "buy now"; it passed the scorer before the soft-sell signal.
SOFT_MARKETING = [
    """Book a personalised demo with our team. Trusted by leading engineering organisations around the world, our
platform empowers teams to ship reliable software faster. Read the customer stories to see how release managers
cut their lead time in half. Request a quote for your organisation and talk to our experts about a rollout that
fits your security review. Seamless integration with the tools your teams already use, and support included.""",
    """Customer stories. Hundreds of finance teams rely on us to close the books in days instead of weeks. Our
solution connects to your ERP in minutes and gives controllers real-time insights into cash, spend and revenue.
Join thousands of companies that have streamlined their month-end close. Schedule a demo to see the platform in
action, or get in touch with our sales team for a tailored proposal for your business.""",
    """Introducing the next generation of our observability platform. Engineering leaders at fast-growing companies
use it to unlock insights from every log, metric and trace, and to drive innovation without the complexity of
running their own stack. It is enterprise-grade from day one: single sign-on, audit trails and a dedicated
customer success manager. Book a demo today and see why industry-leading teams made the switch.""",
    """Unsere Plattform unterstützt Ihr Unternehmen dabei, Prozesse zu digitalisieren und Wachstum zu sichern.
Führende Unternehmen aus Industrie und Handel vertrauen auf unsere Lösungen. Demo anfordern und jetzt kostenlos
testen: unsere Expertinnen und Experten beraten Sie gern und entwickeln mit Ihnen ein maßgeschneidertes Konzept
für Ihr Unternehmen. Kontaktieren Sie uns für eine kostenlose Beratung und erfahren Sie mehr über unsere
Kunden.""",
]

# Ordinary documentation that talks about the same things: plans, sales, demos, customers, contact.
DOCS_ABOUT_SALES = [
    """Enterprise billing. Customers on the Enterprise plan are invoiced yearly. To change the number of seats,
open Settings > Billing and select Change plan; the new seat count takes effect on the next invoice. If your
organisation needs a purchase order number on the invoice, contact your account manager before the renewal date.
Invoices can be downloaded as PDF from the Billing page. Payments by card are charged on the first day of the
billing period; payments by bank transfer are due within 30 days.""",
    """demo-server(1) starts a local copy of the web interface with sample data, for trying the product without a
licence. Options: --port PORT listens on PORT (default 8080). --data DIR reads the sample customers and orders
from DIR instead of the bundled set. --reset deletes the sample database before starting. The server stops on
SIGINT; the sample data are kept in ~/.cache/demo-server unless --reset is given. Exit status is 0 on a clean
shutdown and 2 when the port is in use.""",
    """Ticket 4512: a customer reports that the quote export fails for companies with more than 200 line items.
Steps to reproduce: open a quote with 250 items, choose Export > PDF. Expected: a PDF with all items. Actual:
the export stops at item 200 and the log shows "page limit reached". Cause: the PDF template sets a fixed page
count. Fix: compute the page count from the number of items; released in 4.2.1. Workaround for older versions:
split the quote into two.""",
]


def test_soft_marketing_scores_promotional_and_lights_up_soft_sell():
    for text in SOFT_MARKETING:
        score = promo_score(text)
        assert score.total >= PROMO_THRESHOLD, (round(score.total, 2), text[:60])
        assert score.soft_sell > 0.02
        # none of the hard-sell signals carries it
        assert score.prices == 0 and score.exclamations == 0


def test_documentation_about_plans_sales_and_customers_stays_below_the_marketing_level():
    for text in DOCS_ABOUT_SALES:
        score = promo_score(text)
        assert score.total < MARKETING_LEVEL < PROMO_THRESHOLD, (round(score.total, 2), text[:60])


def test_one_soft_sell_phrase_in_a_short_page_is_not_a_register():
    # a 45-word index page of the Python docs that "helps teams" once must not saturate the signal
    text = ("These libraries help teams with publishing and installing Python software. While these modules are "
            "designed to work in conjunction with the Python Package Index, they can also be used with a local "
            "index server, or without any index server at all.")
    assert promo_score(text).total < MARKETING_LEVEL


def test_real_marketing_pages_from_the_labeled_set():
    pages = {p["origin"]: p for p in map(json.loads, PAGES.read_text(encoding="utf-8").splitlines())}
    for origin in ["https://www.ceocommunicator.com/the-impact-real-customer-stories-have-on-business-performance-2/",
                   "https://www.forexvps.net/kb/uptime", "https://www.electricians.ai/pricing/"]:
        assert pages[origin]["label"] == "marketing"
        assert promo_score(pages[origin]["text"]).total >= PROMO_THRESHOLD, origin
    for origin in ["https://decimake.app/documentation/enterprise", "https://help.giraffe.build/en/articles/"
                   "12571905-invoice-billing-teams-enterprise", "https://docs.sevenbridges.com/docs/"
                   "about-the-enterprise-feature"]:
        assert pages[origin]["label"] == "documentation"
        assert promo_score(pages[origin]["text"]).total < PROMO_THRESHOLD, origin


PLAIN = [
    "The committee met on Tuesday to review the budget for the coming year and agreed to publish the minutes in "
    "March. Members discussed how the library could extend its opening hours without hiring more staff, and the "
    "treasurer explained that heating costs have risen sharply since last winter. After a long debate they agreed "
    "to run a three month trial and to report back to the town in spring.",
    "Volunteers counted the visitors every evening and wrote the numbers into a notebook. A small grant from the "
    "regional council paid for new windows and a ramp at the entrance, and the repairs took almost two months. "
    "Local children often visit the building with their teachers on Friday afternoons, and some of them drew "
    "pictures of the new ramp for the notice board.",
    "The school wants to use the old mill for an exhibition about the history of the valley. Older neighbours "
    "remember when it was still painted green and had a wooden fence along the river. The mayor said that the "
    "town should be proud of what the volunteers have achieved, and that the exhibition should open in summer "
    "when visitors come from the next valley by bus.",
    "Nobody expected the storm in March, which flooded the cellar and ruined several boxes of parish records. "
    "Insurance covered most of the damage, and a photographer from the newspaper came to the reopening. In the "
    "end everyone agreed that the money had been spent well, and the council asked for a plan to keep the "
    "remaining records in a dry room upstairs.",
]


def test_data_stage_reports_the_marketing_share_per_source_and_warns_when_it_dominates(tmp_path):
    from scratchlm.config import config_from_dict
    from scratchlm.data.prepare import prepare_data
    from scratchlm.data.prepare_stats import MARKETING_DOMINANCE
    from scratchlm.stages import size_estimate

    def write(name, texts):
        # one line per document: the line rules would cut the wrapped lines of the literals above
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"text": " ".join(t.split())}) + "\n"
                                                        for t in texts))
        return {"name": name, "domain": name, "path": f"{name}.jsonl"}

    cfg = config_from_dict({
        "data": {"sources": [write("vendor", SOFT_MARKETING[:3] + PLAIN[:2]),
                             write("manual", DOCS_ABOUT_SALES + PLAIN[2:])],
                 # the quality rules would drop the shorter pages (under 5 sentences) before they are scored
                 "skip": ["quality"], "min_chars": 100, "workers": 1, "val_fraction": 0.1, "val_min_docs": 1},
        "tokenizer": {"vocab_size": 300}, "model": {"n_layer": 1, "d_model": 16, "n_head": 2, "seq_len": 16}})
    cfg.path = tmp_path / "c.toml"
    out = tmp_path / "out"
    out.mkdir()
    stats = prepare_data(cfg, out, size_estimate(cfg))
    vendor, manual = stats["sources"]["vendor"]["promo"], stats["sources"]["manual"]["promo"]
    # (the German page would be left out by the language step, which keeps English by default)
    assert vendor["scored"] == 5 and vendor["marketing"] == 3 and vendor["marketing_share"] == 3 / 5
    assert vendor["promotional"] == 3  # all three are also over the drop threshold
    assert manual["scored"] == 5 and manual["marketing"] == 0 and manual["marketing_share"] == 0
    assert vendor["marketing_level"] == MARKETING_LEVEL
    verdicts = [w for w in stats["warnings"] if "read as marketing" in w]
    assert len(verdicts) == 1 and verdicts[0].startswith("source `vendor`: 60% of its documents read as marketing")
    assert f"above {MARKETING_DOMINANCE:.0%}" in verdicts[0]
    # and the run report shows both: the share in the source's paragraph, the verdict among the warnings
    from scratchlm.report.build import _table
    from scratchlm.report.data_section import data_section

    md = "\n".join(data_section(stats, None, None, _table))
    assert f"60.0% read as marketing, kept or not (3 score ≥ {MARKETING_LEVEL})" in md
    assert f"**Warning:** {verdicts[0]}" in md


def test_lowered_matching_counts_what_ignorecase_counts_and_falls_back_where_they_differ():
    texts = [LANDING_PAGE, LANDING_PAGE.upper(), LANDING_PAGE.swapcase(), SEO_SPAM, TECH_DOC, *SOFT_MARKETING, *PLAIN,
             "Price: 20 USD or 15 EUR, save 30% now! #1 choice. Half-Price. Buy one get one. Don't miss it."]
    for text in texts:
        for pattern in (_MARKETING, _CALL_TO_ACTION, _PRICE):
            assert pattern.count(text, CaseBlind.lowered_text(text)) == len(pattern.either_case.findall(text)), text
    # IGNORECASE reads "İ" and "ı" as "i", "ſ" as "s"; str.lower() does not, so such a text is matched as before
    for text in ("SİGN UP today", "sıgn up and learn more", "ſign up: ſave 50% off", "ſale"):
        assert CaseBlind.lowered_text(text) is None
        assert _CALL_TO_ACTION.count(text, None) + _MARKETING.count(text, None) + _PRICE.count(text, None) > 0, text
