"""Promotional / spam / templated-text scorer.

Eight surface signals, each measured as a density, squashed to [0, 1] by dividing by a saturation point
(the density at which the signal is as strong as it gets), and combined as a noisy-OR (see _SCALE).
Landing pages light up several signals at once (lexicon, calls to action, prices, "!", ALL CAPS); SEO spam lights up
the templated-sentence signal; link farms the URL signal. Soft (B2B) marketing has none of those: no prices, no "!",
no "buy now", but "book a demo", "trusted by leading teams", "our platform empowers teams to..."; the soft-sell
signal counts those phrases. Technical prose lights up almost none of them.
"""
import re
from dataclasses import dataclass

# Documents above this are promotional enough to drop from a pretraining corpus. Only the templated signal
# reaches it alone; otherwise two or more signals must be strong together. Measured on CPython 3.11: the
# 79 pydoc_data.topics entries and the 1685 docstrings of 20+ words in Lib/*.py score at most 0.27 (99th
# percentile 0.22); the landing page and the templated SEO page in tests/test_clean_promo.py score 0.89
# and 0.76.
PROMO_THRESHOLD = 0.5
# Documents at or above this read as marketing even when kept under the drop threshold; the data stage reports the
# share of them per source. On bench/promo_soft_labels.jsonl 27 of the 43 marketing pages and 13 of the 158
# documentation items reach it (mostly web help pages about plans and billing); among the 1889 files of the
# cleaning benchmark (man pages, Debian Reference, Python docs; templates off) at most 5.6% of a source does.
MARKETING_LEVEL = 0.3

_MARKETING = (
    r"\b(best|greatest|finest|cheapest|lowest prices?|biggest savings|ultimate|unbeatable|amazing|incredible"
    r"|exclusive|limited[- ]time|(?<!not )(?<!never )guaranteed?|risk[- ]free|money[- ]back|free shipping"
    r"|free trial|free gift"
    r"|100% free|for free|no obligation|discount(ed|s)?|(great|best|hot|daily) deals?|on sale|sale|bargains?"
    r"|bonus|hurry|must-have|top[- ]rated|best[- ]selling|bestsellers?|world[- ]class|revolutionary|premium|luxury"
    r"|number one|satisfaction|buy now|sign up|special offer|act now|don'?t miss)\b|(?<!\w)#1\b"
)
_CALL_TO_ACTION = (
    r"\b(buy|shop|order|call|book|register|join|apply|subscribe|download|act) (now|today)\b"
    r"|\badd to (cart|basket|bag)\b|\bsign up\b|\bget started\b|\bclick here\b|\blearn more\b"
    r"|\bstart (your|a) free trial\b|\btry it (for )?free\b|\bget (yours|it now|your free)\b|\bclaim your\b"
    r"|\bdon'?t miss( out)?\b|\bcontact us today\b|\bcheck ?out now\b"
)
_PRICE = (
    r"[$€£¥]\s?\d[\d,]*(\.\d\d)?"
    r"|\b\d[\d,]*(\.\d\d)?\s?(usd|eur|gbp|dollars|euros)\b"
    r"|\b\d{1,3}\s?% (off|discount|savings?)\b|\bsave (up to )?(\d{1,3}\s?%|[$€£]\s?\d+)"
    r"|\bhalf[- ]price\b|\bbuy one,? get one\b"
)
class CaseBlind:
    """A pattern of ASCII words matched whatever their case: on the lowercased text, where it is about 2 to 5 times
    faster than re.IGNORECASE (man pages in three languages, bench/promo_speed.py), with the same matches: str.lower()
    and IGNORECASE agree on every character but three ("İ" lowers to two characters, and IGNORECASE also reads
    "ı" as "i" and "ſ" as "s"). A text holding one of those is matched as before, with IGNORECASE, on its own case.
    A leading look-ahead on the characters a match can start with lets most positions fail at once."""

    EXCEPTIONS = ("İ", "ı", "ſ")

    def __init__(self, pattern: str, starts: str):
        self.lowered = re.compile(f"(?={starts})(?:{pattern})")
        self.either_case = re.compile(pattern, re.IGNORECASE)

    @staticmethod
    def lowered_text(text: str) -> str | None:
        """text.lower(), or None where lowering would not match as IGNORECASE does."""
        return None if any(c in text for c in CaseBlind.EXCEPTIONS) else text.lower()

    def count(self, text: str, lowered: str | None) -> int:
        return len(self.lowered.findall(lowered)) if lowered is not None else len(self.either_case.findall(text))


_MARKETING, _CALL_TO_ACTION, _PRICE = (CaseBlind(_MARKETING, r"[\w#]"), CaseBlind(_CALL_TO_ACTION, r"\w"),
                                       CaseBlind(_PRICE, r"[$€£¥\dshb]"))

# The register of B2B marketing pages, product blogs and vendor case studies (bench/promo_soft_labels.jsonl):
# demo and quote requests, social proof, superlatives of the trade, transformation verbs aimed at "your business".
# Each is rare in manuals, man pages and tickets; a page that uses several per 100 words is selling. English,
# German, French and Spanish forms of the calls to action, since users bring documentation in those too.
_SOFT_SELL = re.compile(  # `(?=\w)\b(?:` lets most positions fail before the alternatives are tried
    r"(?=\w)\b(?:\b(book|request|schedule|get|see|watch|try) (a |an |your |our )?"
    r"(free |personali[sz]ed |live |quick |product )?demo\b"
    r"|\b(request|get) a (free |custom )?quote\b|\bget in touch\b|\bfree consultation\b|\bno credit card\b"
    r"|\b(talk|speak) (to|with) (sales|an expert|one of our|our (team|experts|sales))|\bcontact (our )?sales\b"
    r"|\b(trusted|loved|chosen) by\b|\bjoin (thousands|millions|over|more than)\b"
    r"|\b(used|relied on) by (thousands|millions|over|more than|leading|the world)"
    r"|\b(leading|innovative|forward-thinking|fastest-growing) (provider|platform|solution|companies|brands"
    r"|organi[sz]ations|enterprises|teams|businesses)"
    r"|\bindustry[- ]leading\b|\bbest[- ]in[- ]class\b|\bcutting[- ]edge\b|\bnext[- ]gen(eration)?\b"
    r"|\bstate[- ]of[- ]the[- ]art\b|\benterprise[- ]grade\b|\baward[- ]winning\b|\bfuture[- ]proof\b"
    r"|\bgame[- ]chang(er|ing)\b|\ball[- ]in[- ]one\b|\bturnkey\b|\bpeace of mind\b|\bcompetitive (edge|advantage)\b"
    r"|\bempower(s|ed|ing)?\b|\bseamless(ly)?\b|\beffortless(ly)?\b|\bsupercharge|\bstreamlin(e|es|ed|ing)\b"
    r"|\bunlock(s|ing)? (the |your |new |real )?(power|potential|value|insights?|growth)"
    r"|\b(boost|accelerate|drive|grow|scale|transform|elevate|optimi[sz]e|maximi[sz]e) (your|their) "
    r"|\b(driving|drive|drives|fuel) (growth|results|innovation|revenue|success)\b|\breimagin(e|es|ing)\b"
    r"|\bcustomer (success )?stor(y|ies)\b|\bsuccess stor(y|ies)\b|\bcase stud(y|ies)\b|\btestimonials?\b"
    r"|\bwhat our (customers|clients) say\b|\bour (solutions?|experts|mission|clients|platform)\b"
    r"|\byour (business|brand|bottom line|revenue)\b|\btailored (to|solutions?)\b"
    r"|\bdemo (anfordern|vereinbaren|buchen)\b|\bjetzt (kostenlos )?(testen|starten|anfragen)\b"
    r"|\bkostenlose[n]? (beratung|demo|testversion)\b|\bkontaktieren sie uns\b|\bihr(e|em|en)? unternehmen\b"
    r"|\bma(ß|ss)geschneidert|\bdemande[rz] une d[ée]mo\b|\bessai gratuit\b|\bcontactez[- ]nous\b"
    r"|\bvotre entreprise\b|\bsur mesure\b|\bcl[ée] en main\b|\bsolicit(a|e|ar) una demo\b|\bprueba gratis\b"
    r"|\bcont[áa]ctanos\b|\b(su|tu) empresa\b"
    r"|\bwe help\b|\bhelp(s|ing)? (teams|companies|businesses|organi[sz]ations|brands|clients|customers)\b"
    r"|\bso (that )?you can (focus|spend|get back)|\bwithout (the )?(hassle|complexity|guesswork|headaches?)\b"
    r"|\bwhether you('re| are) an? \b|\b(we're|we are) (proud|excited|thrilled|happy|committed) to\b"
    r"|\bour (mission|vision) is\b|\bschedule a call\b|\bpartner with us\b|\b(speak|talk) to a specialist\b"
    r"|\bcontact us for (a quote|pricing|a demo)\b|\b(personali[sz]ed|guided|product) walkthrough\b"
    r"|\b(see|discover|learn|find out) (why|how) (leading|thousands|teams|companies|customers|businesses)\b"
    r"|\bcompanies (choose|trust)\b|\b\d[\d,.]*k?\+ (companies|customers|teams|businesses|brands|organi[sz]ations)\b"
    r")",  # matched on the lowercased text: 3.5x faster than re.IGNORECASE on the benchmark's documentation
)
# Soft-sell phrases are counted per word over at least this many words: one "case study" or "helps teams" in a
# 45-word index page is not a register (one phrase saturated the signal on two short Python docs pages).
_SOFT_MIN_WORDS = 100
# The vocabulary of selling to companies: who buys (businesses, customers, clients) and what they are promised
# (growth, revenue, productivity, efficiency, innovation, transformation, ROI). Help-centre pages about plans and
# billing and tickets about customers use some of it, manuals and man pages almost none; so it is a weak signal
# (see _SCALE) that only tips a page over when soft-sell phrases are there too.
_BUSINESS = re.compile(
    r"\b(business(es)?|compan(y|ies)|organi[sz]ations|enterprises|customers|clients|revenue|growth|productivity"
    r"|efficiency|innovation|innovative|transformation|strateg(y|ic)|roi|insights|solutions|competitive|brands"
    r"|stakeholders|leaders|engagement|outcomes|marketing|profitab(le|ility)|unternehmen|kunden|wachstum|umsatz"
    r"|l[öo]sungen|vertrieb|effizienz|entreprises|croissance|efficacit[ée]|strat[ée]gie|empresas|clientes"
    r"|crecimiento|soluciones|ventas|eficiencia)\b",  # matched on the lowercased text, like _SOFT_SELL
)
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)
_EXCLAMATION = re.compile(r"!+(?=\s|$)")  # sentence-ending "!", not "!=" or "{!r}"
_CAPS_WORD = re.compile(r"\b[A-Z]{3,}\b")
_WORD = re.compile(r"\b\w[\w'-]*\b")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class PromoScore:
    total: float  # noisy-OR of the saturated components, in [0, 1]; compare with PROMO_THRESHOLD
    lexicon: float  # marketing words/phrases per word
    calls_to_action: float  # calls to action per sentence
    prices: float  # prices and discounts per 100 words
    urls: float  # URLs per 100 words
    exclamations: float  # sentence-ending "!" per sentence
    caps: float  # share of words that are ALL CAPS (3+ letters)
    templated: float  # share of sentences that share a template with 2+ other sentences
    soft_sell: float = 0.0  # B2B marketing phrases ("book a demo", "trusted by", "empowers") per word (100+ words)
    business: float = 0.0  # business vocabulary (customers, growth, revenue, solutions) per word


# component: (saturation point, alone): a component at or past its saturation point scores `alone` on its
# own. Components combine as a noisy-OR, total = 1 - prod(1 - alone * saturated), so independent signals
# reinforce each other and no single one except the templated-sentence signal (near-certain evidence of
# generated text) and the soft-sell signal reaches PROMO_THRESHOLD by itself: one enthusiastic review full of
# "best" is not spam, but two or more "book a demo" / "trusted by" / "empowers teams" per 100 words is a sales
# page, and such pages light up nothing else. The business vocabulary only tips a page that has some of them.
# soft_sell and business were tuned on the tune half of bench/promo_soft_labels.jsonl with no new removal among
# its documentation nor among the 1889 documentation files of the cleaning benchmark (bench/promo_bench.py).
_SCALE = {
    "lexicon": (0.05, 0.45),
    "calls_to_action": (0.20, 0.45),
    "prices": (3.0, 0.35),
    "urls": (5.0, 0.30),
    "exclamations": (0.40, 0.30),
    "caps": (0.10, 0.25),
    "templated": (0.50, 0.60),
    "soft_sell": (0.02, 0.55),
    "business": (0.03, 0.35),
}


def _templated_share(sentences: list[list[str]]) -> float:
    # A template keeps its frame and swaps a slot: "Best hotels in Paris at low prices." /
    # "Best hotels in Rome at low prices.". Key a sentence by its first 3 and last 2 words (digits
    # folded); a key shared by 3+ sentences is a template.
    long = [s for s in sentences if len(s) >= 6]
    if len(long) < 5:
        return 0.0
    keys = [tuple(s[:3] + s[-2:]) for s in long]
    counts: dict[tuple, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return sum(counts[key] >= 3 for key in keys) / len(long)


def promo_score(text: str, templates: bool = True) -> PromoScore:
    """How promotional / spammy / templated one document reads. `templates=False` leaves the templated-sentence
    signal out: a reference page repeats its sentence frames by design ("If x is a NaN, a NaN is returned." for
    every variant), and on the man pages and Python docs of docs/benchmarks.md it was what made real pages
    score as spam."""
    words = _WORD.findall(text)
    if not words:
        return PromoScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # Per-word densities use at least 50 words: one "best" in a 15-word docstring is not a density.
    n_words = max(len(words), 50)
    raw_sentences = [s for s in _SENTENCE_SPLIT.split(text) if _WORD.search(s)]
    n_sentences = max(len(raw_sentences), 1)
    templated = 0.0
    if templates:
        # Only sentence-like pieces (ending in . ! ?) can be templated prose; this leaves out code lines and
        # doctest transcripts, which repeat their frame legitimately.
        templated = _templated_share([_WORD.findall(_DIGITS.sub("0", s.lower())) for s in raw_sentences
                                      if s.rstrip().endswith((".", "!", "?"))])
    lowered = CaseBlind.lowered_text(text)
    # phrases wrap across lines in manuals and mail: match them on the text with its whitespace folded
    folded = " ".join(text.split()).lower()
    values = {
        "lexicon": _MARKETING.count(text, lowered) / n_words,
        "calls_to_action": _CALL_TO_ACTION.count(text, lowered) / n_sentences,
        "prices": 100 * _PRICE.count(text, lowered) / n_words,
        "urls": 100 * len(_URL.findall(text)) / n_words,
        "exclamations": len(_EXCLAMATION.findall(text)) / n_sentences,
        "caps": len(_CAPS_WORD.findall(text)) / n_words,
        "templated": templated,
        "soft_sell": len(_SOFT_SELL.findall(folded)) / max(len(words), _SOFT_MIN_WORDS),
        "business": len(_BUSINESS.findall(folded)) / n_words,
    }
    keep = 1.0
    for name, (scale, alone) in _SCALE.items():
        keep *= 1.0 - alone * min(1.0, values[name] / scale)
    return PromoScore(total=1.0 - keep, **values)
