"""Side by side in one process: CPU time of promo_score of an older promo.py (its path, the first argument) and now, on the
cleaning benchmark's documentation corpus. Usage: git show 3cb4ecc:src/scratchlm/data/clean/promo.py > /tmp/promo_before.py;
python bench/promo_speed.py /tmp/promo_before.py [CORPUS_DIR]"""
import importlib.util, glob, time, sys


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m; spec.loader.exec_module(m); return m
old = load(sys.argv[1], "scratchlm.data.clean.promo_old")
root = sys.argv[2] if len(sys.argv) > 2 else "/work/bench-cleaning/corpus"
from scratchlm.data.clean import promo as new
texts = []
for p in sorted(glob.glob(f"{root}/**/*", recursive=True)):
    try: texts.append(open(p, errors="replace").read())
    except (IsADirectoryError, UnicodeDecodeError): pass
mb = sum(len(t) for t in texts) / 1e6
for rnd in range(2):
    for name, m in (("before", old), ("after", new)):
        t0 = time.process_time(); [m.promo_score(t) for t in texts]; dt = time.process_time() - t0
        print(f"round {rnd} {name}: {len(texts)} docs {mb:.1f} MB in {dt:.2f} s CPU = {mb/dt:.2f} MB/s")
