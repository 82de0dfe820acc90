import json

from scratchlm.data.builtin import build_builtin_corpus


def _lines(p):
    return [json.loads(line) for line in p.read_text().splitlines()]


def test_three_real_domains(builtin_corpus):
    code, docs, web = (_lines(builtin_corpus[d]) for d in ("code", "docs", "web"))
    assert len(code) > 10 and len(docs) > 20 and len(web) >= 1
    assert all(d["id"].startswith("stdlib/") and d["id"].endswith(".py") for d in code)
    assert sum(len(d["text"]) for d in code) <= 300_000
    assert any("def " in d["text"] for d in code)
    assert all(d["id"].startswith("pydoc/") for d in docs)
    assert all(d["id"].startswith("pypi/") for d in web)
    assert len({d["id"] for d in code + docs + web}) == len(code + docs + web)


def test_deterministic(builtin_corpus, tmp_path):
    again = build_builtin_corpus(tmp_path, code_max_chars=300_000)
    for domain, path in again.items():
        assert path.read_bytes() == builtin_corpus[domain].read_bytes()
