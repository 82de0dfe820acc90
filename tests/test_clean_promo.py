import ast
import sysconfig
from pathlib import Path

import pydoc_data.topics

from scratchlm.data.clean.promo import PROMO_THRESHOLD, PromoScore, promo_score

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
    assert promo_score("") == PromoScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert promo_score("   \n ").total == 0.0
