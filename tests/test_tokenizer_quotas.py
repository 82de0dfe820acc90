"""The tokenizer sample's quotas hold on a corpus smaller than the budget (or a verdict says why not), and every
language the config keeps gets a fertility verdict however small its share of the held-out text (issue 37)."""
from scratchlm.tokenizer.fertility import verdicts
from scratchlm.tokenizer.report_section import tokenizer_section
from scratchlm.tokenizer.sample import StratifiedSample
from scratchlm.tokenizer.sample_plan import fit_cells, plan_sample
from scratchlm.tokenizer.sample_verdicts import far_from_quota, sample_verdicts
from scratchlm.tokenizer.stage import kept_languages, train_tokenizer
from tokenizer_fixtures import CODE, DE, EN, ES, fake_data, tokenizer_cfg

BUDGET = 200_000_000  # the default sample_chars: far above every corpus here


def _docs(prefix: str, text: str, n: int, domain: str, lang: str | None = None) -> list[dict]:
    return [{"id": f"{prefix}{i}", "text": f"{i} {text}", "domain": domain, **({"lang": lang} if lang else {})}
            for i in range(n)]


def _code_heavy(tmp_path):
    """Code ~76% of the characters, prose ~24%: the split of the issue's corpus."""
    code = _docs("c", CODE * 6, 400, "code")  # ~152,000 characters
    prose = _docs("p", EN * 4, 120, "prose", "en")  # ~48,000
    return fake_data(tmp_path, {"code": code, "prose": prose}, [])


SOURCES = [{"name": "code", "domain": "code", "path": "x", "weight": 0.1},
           {"name": "prose", "domain": "prose", "path": "y", "weight": 0.9}]


def _drawn(cfg, data) -> dict:
    sample = StratifiedSample(cfg, data)
    texts = list(sample.texts())
    comp = sample.composition()
    assert comp["chars"] == sum(map(len, texts))
    return comp


def test_a_corpus_under_the_budget_is_drawn_to_a_ten_percent_code_quota(tmp_path):
    cfg = tokenizer_cfg(SOURCES)
    data = _code_heavy(tmp_path)
    comp = _drawn(cfg, data)
    code, prose = comp["domains"]["code"], comp["domains"]["prose"]
    assert code["quota"] == 0.1 and abs(code["share"] - 0.1) < 0.005  # was 0.76: the whole corpus
    assert prose["docs"] == 120 and code["docs"] < 400  # the short stratum whole, the code subsampled
    assert comp["census"] == ["code", "prose"]  # neither fills its quota at the budget: counted, not bounded
    size, *quotas = sample_verdicts(comp, cfg.tokenizer)
    assert size["level"] == "ok" and f"under the {BUDGET:,} budget" in size["message"]
    assert "set by domain prose" in size["message"] and f"sample of {comp['chars']:,} characters" in size["message"]
    assert [(v["level"], v["check"]) for v in quotas] == [("ok", "sample quotas")]


def test_when_the_quotas_would_leave_too_small_a_sample_the_verdict_names_the_quota_and_the_share(tmp_path):
    cfg = tokenizer_cfg(SOURCES, min_sample_chars_per_vocab=500)  # floor 150,000 > 53,000 on the quotas
    comp = _drawn(cfg, _code_heavy(tmp_path))
    assert comp["plan"]["quotas_met"] is False and comp["chars"] == comp["plan"]["floor"] == 150_000
    found = {v["check"]: v for v in sample_verdicts(comp, cfg.tokenizer)}
    size = found["tokenizer sample size"]
    assert size["level"] == "warning" and "the quotas cannot be met" in size["message"]
    assert "under the floor of 150,000 characters for a 300-token vocabulary" in size["message"]
    assert "all the text of domain prose" in size["message"]
    code = found["sample quota domain code"]
    share = comp["domains"]["code"]["share"]
    assert code["level"] == "warning" and f"{share:.1%} of the sample against a quota of 10.0%" in code["message"]
    assert "sample quota domain prose" in found  # 32% against 90%: far too


def test_the_language_quota_the_fertility_warning_suggests_changes_a_small_sample(tmp_path):
    prose = _docs("en", EN * 4, 400, "prose", "en") + _docs("es", ES * 4, 100, "prose", "es")
    data = fake_data(tmp_path, {"prose": prose}, [])
    src = [{"name": "prose", "domain": "prose", "path": "x"}]
    before = _drawn(tokenizer_cfg(src), data)["languages"]
    assert abs(before["es"]["prose_share"] - 0.2) < 0.01  # no quota: the corpus's own mix
    cfg = tokenizer_cfg(src, language_quotas={"es": 0.8})  # "give es a larger share of the sample"
    comp = _drawn(cfg, data)
    assert abs(comp["languages"]["es"]["prose_share"] - 0.8) < 0.01
    assert comp["languages"]["es"]["docs"] == 100  # all the Spanish; the English subsampled to 20%
    assert [v["check"] for v in sample_verdicts(comp, cfg.tokenizer)] == ["tokenizer sample size", "sample quotas"]


def test_a_huge_document_cut_to_max_doc_chars_does_not_leave_its_domain_short(tmp_path):
    # stats.json bounds the prose at 58,000 characters; cut to max_doc_chars it holds 5,000 + 20 x ~420
    prose = [{"id": "huge", "text": EN * 480, "domain": "prose"}, *_docs("p", EN * 4, 20, "prose")]
    data = fake_data(tmp_path, {"code": _docs("c", CODE * 6, 400, "code"), "prose": prose}, [])
    src = [{"name": "code", "domain": "code", "path": "x"}, {"name": "prose", "domain": "prose", "path": "y"}]
    comp = _drawn(tokenizer_cfg(src, max_doc_chars=5_000, min_sample_chars_per_vocab=10), data)
    assert comp["domains"]["prose"]["docs"] == 21 and abs(comp["domains"]["prose"]["share"] - 0.5) < 0.005


def test_far_from_quota_is_relative_to_the_quota():
    assert far_from_quota(0.76, 0.10, 0.25) and far_from_quota(0.02, 0.01, 0.25) and far_from_quota(0.01, 0.0, 0.25)
    assert not far_from_quota(0.11, 0.10, 0.25) and not far_from_quota(0.0, 0.0, 0.25)
    assert far_from_quota(0.074, 0.10, 0.25) and not far_from_quota(0.076, 0.10, 0.25)


def test_plan_and_cells_hold_both_the_sources_and_the_languages():
    plan = plan_sample(10_000, 1_000, {"code": 0.2, "web": 0.8}, {"code": 500, "web": 100_000}, {"web"})
    assert plan.on_quota == 2_500 and plan.domain_chars == {"code": 500, "web": 2_000}
    assert plan.limited_by == [["domain", "code"]] and plan.quotas_met
    cells = fit_cells({"a": {"en": 1_000, "de": 100}, "b": {"en": 1_000, "de": 1_000}},
                      rows={"a": 600, "b": 600}, columns={"en": 600, "de": 600})
    assert cells["a"]["de"] == 100  # all of a's German ...
    assert abs(sum(cells["a"].values()) - 600) <= 2 and abs(cells["a"]["de"] + cells["b"]["de"] - 600) <= 2


def _lang(tpw: float, chars: int, words: int, docs: int = 40) -> dict:
    return {"tokens_per_word": tpw, "prose_tokens_per_word": tpw, "chars": chars, "chars_per_token": 3.0,
            "prose_docs": docs, "prose_words": words, "largest_doc_share": 0.05}


def test_every_kept_language_gets_its_verdict_with_its_sample_size():
    result = {"languages": {"en": _lang(1.2, 200_000, 30_000), "nl": _lang(1.3, 100_000, 15_000),
                            "de": _lang(1.85, 4_000, 1_200), "fr": _lang(1.3, 300, 50), "xx": _lang(9.0, 100, 20)},
              "vocab": {"size": 1000, "used_share": 0.95}, "overall": {"tokens": 10_000}}
    found = {v["check"]: v for v in verdicts(result, 0.02, kept=["en", "nl", "de", "fr", "it"], min_words=1000)}
    de = found["tokens/word de"]  # 1.3% of the held-out prose: under min_language_share, kept all the same
    assert de["level"] == "warning" and "1.85 tokens/word on 1,200 held-out prose words > 1.4" in de["message"]
    assert "de costs 1.54x" in found["language cost ratio"]["message"]
    fr = found["tokens/word fr"]
    assert fr["level"] == "warning" and "too small to judge: 50 words < 1,000" in fr["message"]
    assert "absent from the held-out text" in found["tokens/word it"]["message"]
    assert "tokens/word xx" not in found  # neither kept nor of use
    assert "1.30 tokens/word on 15,000 held-out prose words <= 1.4" in found["tokens/word nl"]["message"]


def test_kept_languages_come_from_the_prose_sources():
    cfg = tokenizer_cfg([{"name": "a", "domain": "web", "path": "x"},
                         {"name": "b", "domain": "docs", "path": "y", "languages": ["nl", "en"]},
                         {"name": "c", "domain": "code", "path": "z", "languages": ["fr"]}],
                        data={"languages": ["en", "de"]})
    assert kept_languages(cfg) == ["en", "de", "nl"]


def test_stage_judges_a_small_kept_language_and_reports_the_sample_verdicts(tmp_path):
    train = {"code": _docs("c", CODE * 6, 400, "code"),
             "prose": _docs("en", EN * 4, 100, "prose", "en") + _docs("de", DE * 4, 20, "prose", "de")}
    val = _docs("ve", EN * 5, 40, "prose", "en") + _docs("vd", DE * 2, 1, "prose", "de")  # German ~1%
    (tmp_path / "data").mkdir()
    data = fake_data(tmp_path / "data", train, val)
    cfg = tokenizer_cfg(SOURCES, data={"languages": ["en", "de", "nl"]}, min_sample_chars_per_vocab=500)
    (tmp_path / "tok").mkdir()
    info = train_tokenizer(cfg, data, tmp_path / "tok")
    found = {v["check"]: v for v in info["verdicts"]}  # what `scratchlm check` reads from the manifest
    assert "too small to judge" in found["tokens/word de"]["message"]
    assert "nl: named in data.languages but absent" in found["tokens/word nl"]["message"]
    assert found["sample quota domain code"]["level"] == "warning"
    md, _, _ = tokenizer_section(tmp_path / "tok", {}, tmp_path, lambda h, rows: "\n".join(map(str, [h, *rows])))
    text = "\n".join(md)
    assert "sample quota domain code" in text and "tokens/word de" in text and "share of prose" in text
