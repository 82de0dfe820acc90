"""The run report's "Tokenizer" section: sample composition, fertility per domain and language with verdicts,
vocabulary use, and the corpus measured in real tokens."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..ids import read_json

TOP_LANGUAGES = 12


def _f(v, digits: int = 2):
    return "-" if v is None else f"{v:.{digits}f}"


def plot_fertility(fertility: dict, of_use: list[str], out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .fertility import MAX_TOKENS_PER_WORD, fertility as prose_fertility

    domains = {d: m["chars_per_token"] for d, m in fertility["domains"].items() if m["chars_per_token"]}
    langs = {k: prose_fertility(fertility["languages"][k]) for k in of_use
             if prose_fertility(fertility["languages"][k])}
    if not domains:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=110)
    a.bar(list(domains), list(domains.values()), color="tab:blue")
    a.set_title("characters per token (held-out, higher is cheaper)")
    b.bar(list(langs), list(langs.values()), color="tab:orange")
    b.axhline(MAX_TOKENS_PER_WORD, color="tab:red", ls="--", lw=1, label=f"warning above {MAX_TOKENS_PER_WORD}")
    b.set_title("tokens per prose word, languages of use")
    b.legend()
    for ax in (a, b):
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = out / "tokenizer_fertility.png"
    fig.savefig(path)
    plt.close(fig)
    return path


DIGEST_KEY = "tokenizer_json_digest"


def name_the_digest(record: dict) -> dict:
    """A copy of a stage's record (tokenizer_info.json, fertility.json, shards.json) for the report, its
    `tokenizer_id` named for what it is: the digest of tokenizer.json's content, which the shards check their
    tokenizer against (shards.check_tokenizer_matches). It is no artifact's ID: shown as one, beside the tokenizer
    artifact's own, it was read as the tokenizer's."""
    if "tokenizer_id" not in record:
        return record
    renamed = {k: v for k, v in record.items() if k != "tokenizer_id"}
    renamed[DIGEST_KEY] = record["tokenizer_id"]
    return renamed


def tokenizer_section(tokenizer_dir: Path, shards: dict, out: Path, table: Callable[[list[str], list[list]], str],
                      artifact_id: str | None = None) -> tuple[list[str], dict, Path | None]:
    """Markdown lines, the JSON for report.json, and the plot (or None). `table` is the report's table writer.
    artifact_id: the tokenizer artifact's ID, the one the report's other lines name; by default its directory's
    name, which the pipeline gives it (<workdir>/tokenizer/<id>/)."""
    artifact_id = artifact_id or tokenizer_dir.name
    if not (tokenizer_dir / "fertility.json").exists():  # a tokenizer trained before fertility was measured
        return ["## Tokenizer", "", "No fertility report for this tokenizer: retrain it with "
                                    "`scratchlm tokenizer train --force`.", ""], {}, None
    info = read_json(tokenizer_dir / "tokenizer_info.json")
    fertility = read_json(tokenizer_dir / "fertility.json")
    sample = info["sample"]
    quotas = sample["languages"]
    of_use = fertility.get("languages_of_use", [])
    plot = plot_fertility(fertility, of_use, out) if fertility["overall"]["docs"] else None

    md = ["## Tokenizer", ""]
    md.append(f"Byte-level BPE, {info['vocab_size']:,} tokens (artifact `{artifact_id}`), trained on a stratified "
              f"sample of {sample['chars']:,} characters from {sample['docs']:,} training documents (budget "
              f"{sample['budget_chars']:,}, at most {sample['max_doc_chars']:,} per document). Fertility is measured "
              f"on the validation split, which the sample never contains"
              + (f" ({sample['skipped']['in_validation_split']} sampled documents skipped for being in it)."
                 if sample["skipped"].get("in_validation_split") else "."))
    md += ["", "Sample composition:", ""]
    md.append(table(["domain", "quota", "sample chars", "share", "docs"],
                    [[d, _f(r["quota"], 3), r["chars"], _f(r["share"], 3), r["docs"]]
                     for d, r in sample["domains"].items()]))
    md += [""]
    md.append(table(["language", "quota (of prose)", "sample chars", "share", "share of prose", "docs"],
                    [[k, _f(r["quota"], 3), r["chars"], _f(r["share"], 3), _f(r.get("prose_share"), 3), r["docs"]]
                     for k, r in list(quotas.items())[:TOP_LANGUAGES]]))
    md += ["", "Fertility on held-out text, per domain. tokens/word counts every whitespace-separated word; "
               "prose tokens/word, which the verdicts judge, only the words of paragraphs and list items, without "
               "code, options, tables, paths and identifiers. Largest doc: the share of the prose words that "
               "come from one document.", ""]
    md.append(table(["domain", "docs", "tokens", "tokens/word", "prose tokens/word", "prose words", "largest doc",
                     "chars/token", "bytes/token"],
                    [[d, m["docs"], m["tokens"], _f(m["tokens_per_word"]), _f(m.get("prose_tokens_per_word")),
                      m.get("prose_words"), _f(m.get("largest_doc_share"), 2), _f(m["chars_per_token"]),
                      _f(m["bytes_per_token"])] for d, m in fertility["domains"].items()]))
    md += ["", "Per language (`code` = the domains in tokenizer.code_domains; `und` = no clear language):", ""]
    md.append(table(["language", "of use", "docs", "words", "tokens/word", "prose tokens/word", "prose docs",
                     "largest doc", "chars/token", "bytes/token"],
                    [[k, "yes" if k in of_use else "", m["docs"], m["words"], _f(m["tokens_per_word"]),
                      _f(m.get("prose_tokens_per_word")), m.get("prose_docs"), _f(m.get("largest_doc_share"), 2),
                      _f(m["chars_per_token"]), _f(m["bytes_per_token"])]
                     for k, m in list(fertility["languages"].items())[:TOP_LANGUAGES]]))
    vocab = fertility["vocab"]
    md += ["", f"Vocabulary used on the held-out text: {vocab['used']:,} of {vocab['size']:,} tokens "
               f"({vocab['used_share']:.1%}).",
           "Most frequent: " + ", ".join(f"`{t['token']!r}` {t['share']:.1%}" for t in vocab["most_frequent"]) + ".",
           "Longest: " + ", ".join(f"`{t['token']!r}` ({t['bytes']} B)" for t in vocab["longest"]) + "."]
    if vocab.get("degenerate"):
        md.append(f"Degenerate entries (long, no letter or digit): {vocab['degenerate_count']}, e.g. "
                  + ", ".join(f"`{t['token']!r}` ({t['bytes']} B)" for t in vocab["degenerate"]) + ".")
    md.append("")
    # the sample's verdicts (size, quotas), then the fertility's; a tokenizer trained before the sample had
    # verdicts recorded only the fertility's
    found = info.get("verdicts", fertility["verdicts"])
    md += ["Verdicts:", ""] + [f"- **{v['level']}** {v['check']}: {v['message']}" for v in found]
    per_domain = shards.get("tokens_per_domain")
    if per_domain:
        md += ["", "Corpus in tokens of this tokenizer:", ""]
        md.append(table(["domain", "train docs", "train chars", "train tokens", "chars/token", "val tokens"],
                        [[d, r["train_docs"], r["train_chars"], r["train_tokens"], _f(r["chars_per_token"]),
                          r["val_tokens"]] for d, r in per_domain.items()]))
    if plot:
        md += ["", f"![tokenizer fertility]({plot.name})"]
    md.append("")
    return md, {"info": name_the_digest(info), "fertility": name_the_digest(fertility)}, plot

