"""Run under the scratchlm version being measured (PYTHONPATH decides which): write every document its readers
produce for a config, normalized as the read step does (Unicode form, strip), to a .jsonl.gz file.

    python read_worker.py CONFIG OUT.jsonl.gz
"""
import gzip
import json
import sys
import unicodedata
from pathlib import Path

import scratchlm
try:  # this worker also runs under older trees, from before the stage registry held the loader
    from scratchlm.stages import load_config
except ImportError:
    from scratchlm.config import load_config
from scratchlm.data.readers import iter_source


def main() -> None:
    cfg_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    cfg = load_config(cfg_path)
    n = 0
    with gzip.open(out, "wt", encoding="utf-8") as f:
        for src in cfg.data.sources:
            for item in iter_source(src, cfg_path.parent):
                if not isinstance(item, dict):
                    f.write(json.dumps({"id": item.id, "source": src.name, "text": None, "read_error": item.rule})
                            + "\n")
                    continue
                text = unicodedata.normalize(cfg.data.normalization, item["text"]).strip()
                f.write(json.dumps({"id": item["id"], "source": src.name, "text": text}, ensure_ascii=False) + "\n")
                n += 1
    print(f"read {n} documents with {scratchlm.__file__}", file=sys.stderr)


if __name__ == "__main__":
    main()
