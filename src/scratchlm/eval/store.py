"""Where a checkpoint's evaluations live: `<checkpoints>/evals/<checkpoint id>/`, next to the checkpoint.

The checkpoint ID hashes the weights file's checksum, so the same weights copied elsewhere keep their ID,
and an evaluation can never be attributed to weights it was not run on.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..ids import content_id, file_digest, read_json
from ..model.checkpoint import verify_checkpoint, weights_file

EVAL_FILE = "eval.json"


def checkpoint_id(checkpoint: Path) -> str:
    return id_from_meta(verify_checkpoint(checkpoint))


def id_from_meta(meta: dict) -> str:
    """The ID of a checkpoint whose meta.json (`meta`) has been verified against its files."""
    return content_id("checkpoint", meta["checksums"][weights_file(meta)])


def evals_dir(checkpoint: Path) -> Path:
    checkpoint = Path(checkpoint).resolve()
    return checkpoint.parent / "evals" / checkpoint_id(checkpoint)


def find_evaluation(checkpoint: Path, pipeline_eval: Path | None = None) -> Path | None:
    """The checkpoint's suite result, else the pipeline eval stage's result when it was run on this checkpoint."""
    own = evals_dir(checkpoint) / EVAL_FILE
    if own.exists():
        return own
    if pipeline_eval is not None and pipeline_eval.exists():
        evaluated = Path(read_json(pipeline_eval)["checkpoint"])
        if evaluated.exists() and checkpoint_id(evaluated) == checkpoint_id(checkpoint):
            return pipeline_eval
    return None


def check_same_tokenizer(checkpoint: Path, tokenizer_json: Path) -> None:
    """Per-domain metrics on shards made by another tokenizer would be silently meaningless."""
    ours = Path(checkpoint) / "tokenizer.json"
    if not ours.exists():
        raise UserError(f"checkpoint {checkpoint} has no tokenizer.json")
    if file_digest(ours) != file_digest(tokenizer_json):
        raise UserError(f"checkpoint {checkpoint} was trained with a different tokenizer than this config's "
                        f"({tokenizer_json}); evaluate it with the config it was trained from")
