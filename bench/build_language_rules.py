"""Regenerate src/scratchlm/data/clean/language_rules.json from a FineWeb-2 checkout.

    python bench/build_language_rules.py /path/to/fineweb-2 [--out src/scratchlm/data/clean/language_rules.json]

The path may be a work tree or a bare git directory (then the files are read at HEAD with `git show`). Get one with
`git clone https://github.com/huggingface/fineweb-2`. Needs PyYAML.

FineWeb-2 (Penedo et al. 2025) tuned the Gopher/FineWeb heuristic filters per language and published the thresholds
and stop words in configs/<iso639-3>_<Script>.yml. This script maps fastText lid.176's labels (what
scratchlm.data.clean.langid returns) to those configs and renames the fields to our rule names:

    stopwords                  -> stop_words             (Gopher: a document needs >= 2 occurrences)
    min_avg_word_length        -> min_mean_word_len
    max_avg_word_length        -> max_mean_word_len
    max_non_alpha_words_ratio  -> min_alpha_word_share   (a minimum, despite its name: datatrove's
                                                          GopherQualityFilter drops documents whose share of words
                                                          with a letter is below it)
    line_punct_thr             -> min_punct_line_share   (FineWeb: share of lines ending in terminal punctuation;
                                                          -1 or 0 in FineWeb-2 means the rule is off -> null)
    new_line_ratio             -> max_newlines_per_word  (FineWeb: newlines / words)

The repetition thresholds (dup_line_frac, top_n_grams, dup_n_grams) and language_score (a GlotLID confidence, not
comparable to fastText's) are not carried over.
"""
import argparse
import json
import subprocess
import unicodedata
from pathlib import Path

import yaml

# fastText lid.176 label -> (FineWeb-2 config, English name). lid.176 uses ISO 639-1 where it exists, otherwise the
# Wikipedia edition's code, which is not always ISO 639-3: "als" is the Alemannic Wikipedia (FineWeb-2's als_Latn is
# Tosk Albanian, which lid.176 calls "sq"). Macrolanguages map to the individual language GlotLID labels the bulk of
# the web text as (ar -> arb, fa -> fas, ms -> zsm, et -> ekk, lv -> lvs, no -> nob, zh -> cmn, ...).
# Left out on purpose: "sh" (Serbo-Croatian, no FineWeb-2 config), "qu" (which Quechua?), "gom" (Konkani is written
# in Devanagari and Latin alike): rules_for() returns None for them and the caller's defaults apply.
LID_TO_FINEWEB2 = {
    "af": ("afr_Latn", "Afrikaans"),
    "als": ("gsw_Latn", "Alemannic"),
    "am": ("amh_Ethi", "Amharic"),
    "an": ("arg_Latn", "Aragonese"),
    "ar": ("arb_Arab", "Arabic"),
    "arz": ("arz_Arab", "Egyptian Arabic"),
    "as": ("asm_Beng", "Assamese"),
    "ast": ("ast_Latn", "Asturian"),
    "av": ("ava_Cyrl", "Avar"),
    "az": ("azj_Latn", "Azerbaijani"),
    "azb": ("azb_Arab", "South Azerbaijani"),
    "ba": ("bak_Cyrl", "Bashkir"),
    "bar": ("bar_Latn", "Bavarian"),
    "bcl": ("bcl_Latn", "Central Bikol"),
    "be": ("bel_Cyrl", "Belarusian"),
    "bg": ("bul_Cyrl", "Bulgarian"),
    "bh": ("bho_Deva", "Bihari (Bhojpuri)"),  # the bh Wikipedia is written in Bhojpuri
    "bn": ("ben_Beng", "Bengali"),
    "bo": ("bod_Tibt", "Tibetan"),
    "bpy": ("bpy_Beng", "Bishnupriya"),
    "br": ("bre_Latn", "Breton"),
    "bs": ("bos_Latn", "Bosnian"),
    "bxr": ("bxr_Cyrl", "Buryat"),
    "ca": ("cat_Latn", "Catalan"),
    "cbk": ("cbk_Latn", "Chavacano"),
    "ce": ("che_Cyrl", "Chechen"),
    "ceb": ("ceb_Latn", "Cebuano"),
    "ckb": ("ckb_Arab", "Central Kurdish"),
    "co": ("cos_Latn", "Corsican"),
    "cs": ("ces_Latn", "Czech"),
    "cv": ("chv_Cyrl", "Chuvash"),
    "cy": ("cym_Latn", "Welsh"),
    "da": ("dan_Latn", "Danish"),
    "de": ("deu_Latn", "German"),
    "diq": ("diq_Latn", "Zazaki"),
    "dsb": ("dsb_Latn", "Lower Sorbian"),
    "dty": ("dty_Deva", "Doteli"),
    "dv": ("div_Thaa", "Dhivehi"),
    "el": ("ell_Grek", "Greek"),
    "eml": ("eml_Latn", "Emilian-Romagnol"),
    "eo": ("epo_Latn", "Esperanto"),
    "es": ("spa_Latn", "Spanish"),
    "et": ("ekk_Latn", "Estonian"),
    "eu": ("eus_Latn", "Basque"),
    "fa": ("fas_Arab", "Persian"),
    "fi": ("fin_Latn", "Finnish"),
    "fr": ("fra_Latn", "French"),
    "frr": ("frr_Latn", "North Frisian"),
    "fy": ("fry_Latn", "Western Frisian"),
    "ga": ("gle_Latn", "Irish"),
    "gd": ("gla_Latn", "Scottish Gaelic"),
    "gl": ("glg_Latn", "Galician"),
    "gn": ("gug_Latn", "Guarani"),
    "gu": ("guj_Gujr", "Gujarati"),
    "gv": ("glv_Latn", "Manx"),
    "he": ("heb_Hebr", "Hebrew"),
    "hi": ("hin_Deva", "Hindi"),
    "hif": ("hif_Latn", "Fiji Hindi"),
    "hr": ("hrv_Latn", "Croatian"),
    "hsb": ("hsb_Latn", "Upper Sorbian"),
    "ht": ("hat_Latn", "Haitian Creole"),
    "hu": ("hun_Latn", "Hungarian"),
    "hy": ("hye_Armn", "Armenian"),
    "ia": ("ina_Latn", "Interlingua"),
    "id": ("ind_Latn", "Indonesian"),
    "ie": ("ile_Latn", "Interlingue"),
    "ilo": ("ilo_Latn", "Ilocano"),
    "io": ("ido_Latn", "Ido"),
    "is": ("isl_Latn", "Icelandic"),
    "it": ("ita_Latn", "Italian"),
    "ja": ("jpn_Jpan", "Japanese"),
    "jbo": ("jbo_Latn", "Lojban"),
    "jv": ("jav_Latn", "Javanese"),
    "ka": ("kat_Geor", "Georgian"),
    "kk": ("kaz_Cyrl", "Kazakh"),
    "km": ("khm_Khmr", "Khmer"),
    "kn": ("kan_Knda", "Kannada"),
    "ko": ("kor_Hang", "Korean"),
    "krc": ("krc_Cyrl", "Karachay-Balkar"),
    "ku": ("kmr_Latn", "Kurdish (Kurmanji)"),  # the ku Wikipedia; Sorani is lid.176's "ckb"
    "kv": ("kpv_Cyrl", "Komi"),
    "kw": ("cor_Latn", "Cornish"),
    "ky": ("kir_Cyrl", "Kyrgyz"),
    "la": ("lat_Latn", "Latin"),
    "lb": ("ltz_Latn", "Luxembourgish"),
    "lez": ("lez_Cyrl", "Lezghian"),
    "li": ("lim_Latn", "Limburgish"),
    "lmo": ("lmo_Latn", "Lombard"),
    "lo": ("lao_Laoo", "Lao"),
    "lrc": ("lrc_Arab", "Northern Luri"),
    "lt": ("lit_Latn", "Lithuanian"),
    "lv": ("lvs_Latn", "Latvian"),
    "mai": ("mai_Deva", "Maithili"),
    "mg": ("plt_Latn", "Malagasy"),
    "mhr": ("mhr_Cyrl", "Eastern Mari"),
    "min": ("min_Latn", "Minangkabau"),
    "mk": ("mkd_Cyrl", "Macedonian"),
    "ml": ("mal_Mlym", "Malayalam"),
    "mn": ("khk_Cyrl", "Mongolian"),
    "mr": ("mar_Deva", "Marathi"),
    "mrj": ("mrj_Cyrl", "Western Mari"),
    "ms": ("zsm_Latn", "Malay"),
    "mt": ("mlt_Latn", "Maltese"),
    "mwl": ("mwl_Latn", "Mirandese"),
    "my": ("mya_Mymr", "Burmese"),
    "myv": ("myv_Cyrl", "Erzya"),
    "mzn": ("mzn_Arab", "Mazanderani"),
    "nah": ("nah_Latn", "Nahuatl"),
    "nap": ("nap_Latn", "Neapolitan"),
    "nds": ("nds_Latn", "Low German"),
    "ne": ("npi_Deva", "Nepali"),
    "new": ("new_Deva", "Newari"),
    "nl": ("nld_Latn", "Dutch"),
    "nn": ("nno_Latn", "Norwegian Nynorsk"),
    "no": ("nob_Latn", "Norwegian (Bokmål)"),
    "oc": ("oci_Latn", "Occitan"),
    "or": ("ory_Orya", "Odia"),
    "os": ("oss_Cyrl", "Ossetian"),
    "pa": ("pan_Guru", "Punjabi"),
    "pam": ("pam_Latn", "Kapampangan"),
    "pfl": ("pfl_Latn", "Palatine German"),
    "pl": ("pol_Latn", "Polish"),
    "pms": ("pms_Latn", "Piedmontese"),
    "pnb": ("pnb_Arab", "Western Punjabi"),
    "ps": ("pbt_Arab", "Pashto"),
    "pt": ("por_Latn", "Portuguese"),
    "rm": ("roh_Latn", "Romansh"),
    "ro": ("ron_Latn", "Romanian"),
    "ru": ("rus_Cyrl", "Russian"),
    "rue": ("rue_Cyrl", "Rusyn"),
    "sa": ("san_Deva", "Sanskrit"),
    "sah": ("sah_Cyrl", "Yakut"),
    "sc": ("srd_Latn", "Sardinian"),
    "scn": ("scn_Latn", "Sicilian"),
    "sco": ("sco_Latn", "Scots"),
    "sd": ("snd_Arab", "Sindhi"),
    "si": ("sin_Sinh", "Sinhala"),
    "sk": ("slk_Latn", "Slovak"),
    "sl": ("slv_Latn", "Slovenian"),
    "so": ("som_Latn", "Somali"),
    "sq": ("als_Latn", "Albanian"),
    "sr": ("srp_Cyrl", "Serbian"),
    "su": ("sun_Latn", "Sundanese"),
    "sv": ("swe_Latn", "Swedish"),
    "sw": ("swh_Latn", "Swahili"),
    "ta": ("tam_Taml", "Tamil"),
    "te": ("tel_Telu", "Telugu"),
    "tg": ("tgk_Cyrl", "Tajik"),
    "th": ("tha_Thai", "Thai"),
    "tk": ("tuk_Latn", "Turkmen"),
    "tl": ("fil_Latn", "Tagalog"),
    "tr": ("tur_Latn", "Turkish"),
    "tt": ("tat_Cyrl", "Tatar"),
    "tyv": ("tyv_Cyrl", "Tuvan"),
    "ug": ("uig_Arab", "Uyghur"),
    "uk": ("ukr_Cyrl", "Ukrainian"),
    "ur": ("urd_Arab", "Urdu"),
    "uz": ("uzn_Latn", "Uzbek"),
    "vec": ("vec_Latn", "Venetian"),
    "vep": ("vep_Latn", "Veps"),
    "vi": ("vie_Latn", "Vietnamese"),
    "vls": ("vls_Latn", "West Flemish"),
    "vo": ("vol_Latn", "Volapük"),
    "wa": ("wln_Latn", "Walloon"),
    "war": ("war_Latn", "Waray"),
    "wuu": ("wuu_Hani", "Wu Chinese"),
    "xal": ("xal_Cyrl", "Kalmyk"),
    "xmf": ("xmf_Geor", "Mingrelian"),
    "yi": ("ydd_Hebr", "Yiddish"),
    "yo": ("yor_Latn", "Yoruba"),
    "yue": ("yue_Hani", "Cantonese"),
    "zh": ("cmn_Hani", "Chinese"),
}

# Serbian and Uzbek are written in two scripts and lid.176 has one label for both: take the thresholds of the main
# config and add the other script's stop words, so a document in either script can pass the stop-word rule.
SECOND_SCRIPT = {"sr": "srp_Latn", "uz": "uzn_Cyrl"}

# Scripts written without spaces between words. FineWeb-2 split them into words with a per-language tokenizer
# (spaCy/SudachiPy, pythainlp, khmer-nltk, ...) that scratchlm does not ship; on whitespace tokens the word rules
# would measure sentences, so they are off (null).
NO_SPACES = {"Hani", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"}

# Korean separates words by spaces, but FineWeb-2's Korean tokenizer (Kiwi) splits off particles and endings, and
# its stop words are those morphemes (의, 는, 다, 을, ...): they never stand alone between spaces.
NO_WHITESPACE_STOP_WORDS = {"ko"}

# Characters that end a sentence or a line of prose. ASCII . ! ? everywhere (numbers, code and English quotes
# occur in every script); … and closing quotes because a quoted sentence ends in one. German and Danish close
# with “ and «, so both directions of each quote mark are in.
BASE_PUNCT = [".", "!", "?", "…", '"', "'", "”", "’", "»", "“", "«", "‘"]
SCRIPT_PUNCT = {
    "Grek": [";", "\u037e"],  # the Greek question mark; U+037E normalizes (NFC) to ASCII ";", so both
    "Armn": ["։", ":"],  # Armenian full stop; on the web usually typed as an ASCII colon
    "Ethi": ["።", "፧", "፨"],
    "Arab": ["؟", "۔", "؞"],  # Arabic question mark, Urdu full stop, Arabic triple dot
    "Thaa": ["؟"],  # Dhivehi borrows the Arabic question mark
    "Hebr": ["׃"],  # sof pasuq
    "Sinh": ["।", "॥", "෴"],
    "Hani": ["。", "！", "？", "．", "｡", "」", "』", "）"],
    "Jpan": ["。", "！", "？", "．", "｡", "」", "』", "）"],
    "Hang": ["。", "！", "？"],
    "Thai": ["๚", "๛"],  # rare: Thai ends sentences with a space, which is why FineWeb-2's threshold is 0 (off)
    "Laoo": [],  # likewise no sentence mark; threshold 0 (off)
    "Khmr": ["។", "៕"],
    "Mymr": ["။"],
    "Tibt": ["།", "༎"],
}

# Indic scripts share the Devanagari danda and double danda (Unicode encodes them once, for all of them).
INDIC = ("Deva", "Beng", "Guru", "Orya", "Gujr", "Knda", "Telu", "Mlym", "Taml")
SCRIPT_PUNCT |= {script: ["।", "॥"] for script in INDIC}

ENGLISH = {
    "name": "English",
    "source": "Gopher (Rae et al. 2021, appendix A.1.1) and FineWeb (Penedo et al. 2024, datatrove "
              "FineWebQualityFilter defaults); FineWeb-2 has no English config",
    "script": "Latn",
    "spaces": True,
    "stop_words": ["the", "be", "to", "of", "and", "that", "have", "with"],
    "min_mean_word_len": 3,
    "max_mean_word_len": 10,
    "min_alpha_word_share": 0.8,
    "min_punct_line_share": 0.12,
    "max_newlines_per_word": 0.3,
    "terminal_punctuation": BASE_PUNCT,
}

ABOUT = (
    "Per-language thresholds for the Gopher/FineWeb heuristic filters, keyed by fastText lid.176 label. Every "
    "language but English comes from FineWeb-2's published per-language configs (github.com/huggingface/fineweb-2, "
    "configs/<iso639-3>_<Script>.yml, commit {commit}; Penedo et al. 2025), regenerated by "
    "bench/build_language_rules.py: stopwords -> stop_words, min/max_avg_word_length -> min/max_mean_word_len, "
    "max_non_alpha_words_ratio -> min_alpha_word_share (a minimum despite the name), line_punct_thr -> "
    "min_punct_line_share (FineWeb-2's -1 and 0 switch the rule off and become null), new_line_ratio -> "
    "max_newlines_per_word. FineWeb-2 required 2 stop-word occurrences (datatrove counted occurrences when "
    "FineWeb-2 was built; it counts distinct stop words since January 2025). English (absent from FineWeb-2) "
    "takes Gopher's stop words and word-length bounds and FineWeb's defaults. FineWeb-2 measured words with a "
    "per-language word tokenizer, which splits punctuation into tokens of its own: on whitespace tokens the "
    "alpha-word share is higher (more lenient) and newlines per word a little higher (stricter). For scripts "
    "written without spaces (Hani, Jpan, Thai, Laoo, Khmr, Mymr, Tibt) the word rules need that tokenizer, which "
    "we do not ship, so stop_words, the word-length bounds and max_newlines_per_word are null there "
    "(min_alpha_word_share stays: on whitespace chunks it is lenient). Korean keeps spaces, but its stop words are "
    "morphemes of the Kiwi tokenizer that never stand between spaces, so its stop_words are null. Stop words are "
    "lowercased and deduplicated, and entries that are only punctuation (the Arabic comma, the middle dot) are "
    "dropped; elided forms such as French l' and d' are kept although they only match when apostrophes split "
    "words. Serbian and Uzbek add the stop words of their second script (srp_Latn, uzn_Cyrl). "
    "terminal_punctuation is ours, per script: ASCII . ! ?, the ellipsis and quote marks, plus the script's own "
    "sentence marks."
)


def read_config(root: Path, name: str) -> dict:
    if (root / "configs").is_dir():
        return yaml.safe_load((root / "configs" / f"{name}.yml").read_text())
    out = subprocess.run(["git", "-C", str(root), "show", f"HEAD:configs/{name}.yml"],
                         capture_output=True, text=True, check=True)
    return yaml.safe_load(out.stdout)


def clean_stop_words(words) -> list[str]:
    out = []
    for w in words or []:
        w = str(w).strip().lower()
        # a tokenizer's punctuation token, not a word
        if w and not all(unicodedata.category(c)[0] in "PZC" for c in w) and w not in out:
            out.append(w)
    return out


def entry(root: Path, commit: str, lang: str) -> dict:
    config, name = LID_TO_FINEWEB2[lang]
    cfg = read_config(root, config)
    script = config.split("_")[1]
    spaces = script not in NO_SPACES
    stop_words = clean_stop_words(cfg["stopwords"])
    source = f"FineWeb-2 configs/{config}.yml"
    if lang in SECOND_SCRIPT:
        other = SECOND_SCRIPT[lang]
        stop_words += [w for w in clean_stop_words(read_config(root, other)["stopwords"]) if w not in stop_words]
        source += f" + stop words of configs/{other}.yml"
    punct = cfg["line_punct_thr"]
    return {
        "name": name,
        "source": f"{source} (commit {commit})",
        "script": script,
        "spaces": spaces,
        "stop_words": stop_words if spaces and lang not in NO_WHITESPACE_STOP_WORDS else None,
        "min_mean_word_len": cfg["min_avg_word_length"] if spaces else None,
        "max_mean_word_len": cfg["max_avg_word_length"] if spaces else None,
        "min_alpha_word_share": cfg["max_non_alpha_words_ratio"],
        "min_punct_line_share": punct if punct is not None and punct > 0 else None,
        "max_newlines_per_word": cfg["new_line_ratio"] if spaces else None,
        "terminal_punctuation": BASE_PUNCT + [c for c in SCRIPT_PUNCT.get(script, []) if c not in BASE_PUNCT],
    }


def dump(about: str, languages: dict) -> str:
    """JSON with one field per line and each list on one line, so a diff shows which value changed."""
    def obj(d: dict, indent: str) -> str:
        return ",\n".join(f"{indent}{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in d.items())

    blocks = [f'    {json.dumps(lang)}: {{\n{obj(e, " " * 6)}\n    }}' for lang, e in languages.items()]
    return ('{\n  "_about": ' + json.dumps(about, ensure_ascii=False) + ',\n  "languages": {\n'
            + ",\n".join(blocks) + "\n  }\n}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fineweb2", type=Path, help="FineWeb-2 checkout (work tree or bare git dir)")
    ap.add_argument("--out", type=Path, default=Path("src/scratchlm/data/clean/language_rules.json"))
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(args.fineweb2), "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    languages = {"en": ENGLISH} | {lang: entry(args.fineweb2, commit, lang) for lang in LID_TO_FINEWEB2}
    args.out.write_text(dump(ABOUT.format(commit=commit), dict(sorted(languages.items()))), encoding="utf-8")
    print(f"{args.out}: {len(languages)} languages from FineWeb-2 commit {commit[:12]}")


if __name__ == "__main__":
    main()
