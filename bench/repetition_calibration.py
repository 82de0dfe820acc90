"""Calibration of the generation repetition measures: 300-char chunks of real text vs looping texts."""
import glob, gzip, random, re, subprocess
from scratchlm.model.repetition import repeated_char_ngram_rate, compression_ratio
from scratchlm.eval.diversity import distinct_n, repeated_ngram_rate
random.seed(0)
CH = 300
def chunks(text, k=200):
    text = re.sub(r"[ \t]+", " ", text)
    if len(text) < CH * 2: return []
    starts = [random.randrange(0, len(text) - CH) for _ in range(k)]
    return [text[s:s + CH] for s in starts]
def read(p):
    try:
        return (gzip.open(p, "rt", errors="replace") if p.endswith(".gz") else open(p, errors="replace")).read()
    except Exception: return ""
def man(p):
    try: return subprocess.run(["man", "-l", p], capture_output=True, text=True, env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin"}, timeout=10).stdout
    except Exception: return ""
groups = {}
def add(name, texts):
    cs = [c for t in texts for c in chunks(t, 20)]
    random.shuffle(cs); groups[name] = cs[:400]
py = sorted(glob.glob("/usr/lib/python3*/**/*.py", recursive=True)); random.shuffle(py)
add("python stdlib source", [read(p) for p in py[:60]])
docs = [p for p in glob.glob("/usr/share/doc/**/*", recursive=True) if re.search(r"(README|NEWS|changelog|copyright|\.txt)(\.gz)?$", p)]
random.shuffle(docs); add("/usr/share/doc (README, changelog, copyright)", [read(p) for p in docs[:120]])
for lang in ["", "de", "fr", "es", "ja", "ru", "pl", "it"]:
    pages = glob.glob(f"/usr/share/man/{lang + '/' if lang else ''}man1/*.gz"); random.shuffle(pages)
    if pages: add(f"man pages {lang or 'en'}", [man(p) for p in pages[:25]])
loops = []
for unit in ["cpcpcpcp_____", "the ", "the cat sat on the mat. ", "def f(x):\n    return x\n", "I am a model. ", "ababab", "0", "= ", "print(1)\n"]:
    t = unit * (CH // len(unit) + 2)
    loops.append(t[:CH])
    loops.append(("Once upon a time there was a little girl who lived near a forest. " + t)[:CH])  # prefix then loop
groups["looping texts"] = loops
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print(f"{'group':48} {'n':>4} | char10 rep p50/p95/p99/max | zlib ratio min/p01/p05/p50 | word4 rep p99")
for name, cs in groups.items():
    r = [x for x in (repeated_char_ngram_rate(c) for c in cs) if x is not None]
    z = [x for x in (compression_ratio(c) for c in cs) if x is not None]
    w = [x for x in (repeated_ngram_rate([c], 4) for c in cs) if x is not None]
    print(f"{name:48} {len(cs):4} | {q(r,.5):.3f} {q(r,.95):.3f} {q(r,.99):.3f} {max(r):.3f} | {min(z):.3f} {q(z,.01):.3f} {q(z,.05):.3f} {q(z,.5):.3f} | {q(w,.99) if w else float('nan'):.3f}")
    if name != "looping texts":
        # distinct-2 over 16 chunks, as the suite does over its generations
        d = [distinct_n(random.sample(cs, 16), 2) for _ in range(50)]
        d = [x for x in d if x is not None]
        print(f"{'':48}      distinct-2 over 16 chunks min {min(d):.3f} p50 {q(d,.5):.3f}; distinct-1 min {min(distinct_n(random.sample(cs,16),1) for _ in range(50)):.3f}")
print("loops, one by one (char10 rate, zlib ratio):")
for t in loops: print(f"  {repeated_char_ngram_rate(t):.3f} {compression_ratio(t):.3f} {t[:40]!r}")
print("distinct-2 over loop set:", distinct_n(loops, 2), "distinct-1:", distinct_n(loops, 1))
print("suite-like: mean char10 rate over 16 random chunks (max of 200 draws) / mean zlib ratio (min of 200 draws):")
for name, cs in groups.items():
    if name == "looping texts": continue
    rates = {id(c): repeated_char_ngram_rate(c) for c in cs}
    ms = []; zs = []
    for _ in range(200):
        s = random.sample(cs, 16)
        v = [rates[id(c)] for c in s if rates[id(c)] is not None]
        ms.append(sum(v) / len(v)); zs.append(sum(compression_ratio(c) for c in s) / 16)
    print(f"  {name:48} char10 mean max {max(ms):.3f} p50 {q(ms,.5):.3f} | zlib mean min {min(zs):.3f}")
