"""Run in the datatrove venv: apply datatrove's Gopher repetition, Gopher quality, C4 quality and FineWeb quality
filters, with their defaults and in FineWeb's pipeline order, to the documents of an input .jsonl.gz.

    python dt_worker.py INPUT.jsonl.gz OUT.jsonl.gz

Each output line: {"id", "source", "status": "kept"|"dropped", "rule", "final"(kept), "removed_lines": [[line,
rule], ...]}. A dropped document's rule is "dt_<filter>:<reason>" of the first filter that dropped it; C4's
line removals get "dt_c4_line:<reason>", the reason computed by a copy of C4QualityFilter's line loop (checked
against the filter's own output text, so the attribution cannot drift from what the filter did).
datatrove's LanguageFilter is not applied: it downloads a fastText model, and this machine has no network.
"""
import gzip
import json
import sys

import datatrove
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.pipeline.filters.c4_filters import CITATION_REGEX, ELLIPSIS, END_PUNCTUATION, POLICY_SUBSTRINGS

FILTERS = [("gopher_rep", GopherRepetitionFilter()), ("gopher_quality", GopherQualityFilter()),
           ("c4", C4QualityFilter()), ("fineweb", FineWebQualityFilter())]


def c4_line_reasons(text: str, f: C4QualityFilter) -> tuple[list[str], list[tuple[str, str]]]:
    """(kept lines, [(removed line, reason)]) exactly as C4QualityFilter.filter's loop decides them."""
    kept, removed = [], []
    for raw in text.splitlines():
        line = raw.strip()
        words = line.split()
        if f.max_word_length != -1 and any(len(w) > f.max_word_length for w in words):
            removed.append((line, "too_long_word"))
            continue
        if f.remove_citations:
            line = CITATION_REGEX.sub("", line)
        if f.filter_no_terminal_punct and (not line.endswith(END_PUNCTUATION) or line.endswith(ELLIPSIS)):
            removed.append((raw.strip(), "no_terminal_punct"))
            continue
        if len(words) < f.min_words_per_line:
            removed.append((raw.strip(), "too_few_words"))
            continue
        low = line.lower()
        if f.filter_javascript and "javascript" in low:
            removed.append((raw.strip(), "javascript"))
            continue
        if f.filter_policy and any(p in low for p in POLICY_SUBSTRINGS):
            removed.append((raw.strip(), "policy"))
            continue
        kept.append(line)
    return kept, removed


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    n = dropped = 0
    with gzip.open(src, "rt", encoding="utf-8") as fin, gzip.open(out, "wt", encoding="utf-8") as fout:
        for line in fin:
            rec = json.loads(line)
            if rec["text"] is None:
                continue
            n += 1
            doc = Document(text=rec["text"], id=rec["id"])
            result = {"id": rec["id"], "source": rec["source"], "status": "kept", "rule": None, "removed_lines": []}
            for name, f in FILTERS:
                before = doc.text
                verdict = f.filter(doc)
                ok, reason = (verdict, None) if isinstance(verdict, bool) else verdict
                if not ok:
                    result.update(status="dropped", rule=f"dt_{name}:{reason or 'rejected'}")
                    break
                if name == "c4":
                    kept, removed = c4_line_reasons(before, f)
                    assert "\n".join(kept).strip() == doc.text, rec["id"]
                    final = {" ".join(x.split()) for x in doc.text.split("\n")}
                    seen = set()
                    for ln, why in removed:
                        ln = " ".join(ln.split())  # whitespace collapsed, as systems.removed_lines does
                        if ln and ln not in final and ln not in seen:
                            seen.add(ln)
                            result["removed_lines"].append([ln, f"dt_c4_line:{why}"])
            if result["status"] == "kept":
                result["final"] = doc.text
            else:
                result["removed_lines"] = []
                dropped += 1
            fout.write(json.dumps(result, ensure_ascii=False) + "\n")
    print(f"datatrove {datatrove.__version__ if hasattr(datatrove, '__version__') else ''}: {n} documents, "
          f"{dropped} dropped", file=sys.stderr)


if __name__ == "__main__":
    main()
