"""The config keys that differ between two runs, split by what they change, and how many things changed.

A key changes what is trained when the train stage's ID hashes it, directly or through an upstream stage (data,
decontaminate, tokenizer, shards, model, train, eval.prompts; less their operational() keys). The [eval] keys the
in-training evaluation reads (max_batches, temperature, ...) change how the runs are measured, not the model:
still a difference between two runs' numbers, so they count as a change too. Everything else (train.threads,
log_every, run.workdir, [plan], [sft], [monitor], eval.suite) has no effect on the run and is listed apart.

Some train keys are hashed into the train ID yet cannot change the trained weights: keep_last (how many
checkpoints stay on disk), checkpoint_every (when one is written) and eval_every (when the model is evaluated:
train/loop.py evaluates in eval mode, samples with its own seeded torch.Generator and reads its own batches, so
neither the training RNG nor the data order moves). They are bookkeeping: listed, never counted as a change, so
a pair differing in keep_last alone is "no change", not "one change".

Keys alone miss one kind of change: the same data keys over source files whose content changed. The recorded
upstream IDs (meta.json "ids") catch it: an ID that differs while no key of its sections does is one change.
"""
from __future__ import annotations

import dataclasses
import json
import re
import typing
from dataclasses import dataclass, field

from ..config import Config
from ..stages import STAGE

ABSENT = "(absent)"
SELECTOR = re.compile(r"\[[^\]]*\]")
# Hashed by a stage's own identity function rather than its sections (stages._train_identity,
# _decontaminate_identity): keyed by the section they count under.
HASHED_ELSEWHERE = {"eval.prompts": "train", "eval.sets": "decontaminate"}
BOOKKEEPING = ("train.keep_last", "train.checkpoint_every", "train.eval_every")  # in the ID, not in the weights
UPSTREAM_IDS = ("data", "tokenizer", "shards")  # recorded in every checkpoint's meta.json "ids"


def _upstream(stage: str) -> set[str]:
    """The stage and every stage it reads from, transitively."""
    out = {stage}
    for s in STAGE[stage].inputs:
        out |= _upstream(s)
    return out


def _sections(stage: str) -> set[str]:
    return {sec for s in _upstream(stage) for sec in STAGE[s].sections}


TRAINED_SECTIONS = _sections("train")  # data, decontaminate, tokenizer, shards, model, train


def _counted_section(key: str) -> str:
    for prefix, section in HASHED_ELSEWHERE.items():
        if key == prefix or key.startswith((prefix + "[", prefix + ".")):
            return section
    return key.split(".")[0]


def _is_operational(key: str) -> bool | None:
    """Whether a field on the key's path is declared operational() (None: not a key of this version's config)."""
    cls: typing.Any = Config
    for name in SELECTOR.sub("", key).split("."):
        if not dataclasses.is_dataclass(cls):
            return False  # inside a free-form table (quality overrides, language rules): its parent decided
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name not in fields:
            return None
        if not fields[name].metadata.get("in_id", True):
            return True
        hint = typing.get_type_hints(cls)[name]
        args = [a for a in typing.get_args(hint) if dataclasses.is_dataclass(a)]
        cls = args[0] if args else hint
    return False


def key_effect(key: str) -> str:
    """trained (changes the model trained), measured (changes its evaluation), bookkeeping or none."""
    if key in BOOKKEEPING:
        return "bookkeeping"
    if _counted_section(key) != key.split(".")[0]:
        return "trained"  # eval.prompts, eval.sets: operational for [eval], hashed by train / decontaminate
    section = key.split(".")[0]
    if section not in TRAINED_SECTIONS | {"eval"} or _is_operational(key):
        return "none"
    return "trained" if section in TRAINED_SECTIONS else "measured"


def _named(items) -> dict | None:
    """A list of tables with unique names, keyed by name (data.sources, eval.sets); else None."""
    if not items or not all(isinstance(v, dict) for v in items):
        return None
    names = [v.get("name") for v in items]
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        return None
    return dict(zip(names, items))


def differing_keys(a, b, prefix: str = "") -> list[tuple[str, typing.Any, typing.Any]]:
    """(dotted key, value in a, value in b) of every leaf that differs; a table of sources by name:
    data.sources[web].weight. A key one side lacks has ABSENT there."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in list(a) + [k for k in b if k not in a]
                for d in differing_keys(a.get(k, ABSENT), b.get(k, ABSENT), f"{prefix}.{k}" if prefix else k)]
    named_a, named_b = _named(a) if isinstance(a, list) else None, _named(b) if isinstance(b, list) else None
    if named_a is not None and named_b is not None:
        names = list(named_a) + [n for n in named_b if n not in named_a]
        return [d for n in names for d in differing_keys(named_a.get(n, ABSENT), named_b.get(n, ABSENT),
                                                          f"{prefix}[{n}]")]
    return [(prefix, a, b)]


def show(value) -> str:
    """A value as the diff prints it: strings bare, the rest as JSON (true, null, [1, 2])."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


@dataclass
class ConfigDiff:
    reference: str  # run labels
    run: str
    trained: list[tuple[str, typing.Any, typing.Any]] = field(default_factory=list)
    measured: list[tuple[str, typing.Any, typing.Any]] = field(default_factory=list)
    no_effect: list[tuple[str, typing.Any, typing.Any]] = field(default_factory=list)
    bookkeeping: list[tuple[str, typing.Any, typing.Any]] = field(default_factory=list)  # listed, not counted
    content: list[tuple[str, str, str]] = field(default_factory=list)  # (stage, id in reference, id in run)

    def changes(self) -> list[str]:
        """One entry per thing that changed what the runs are: each key, each upstream content change."""
        return ([f"{k} {show(a)} -> {show(b)}" for k, a, b in self.trained + self.measured]
                + [f"{stage}: same keys, different content (id {a} vs {b})" for stage, a, b in self.content])

    @property
    def kind(self) -> str:
        """none | one | confounded: how many things changed, for whatever styles or branches on it."""
        n = len(self.changes())
        return "none" if n == 0 else "one" if n == 1 else "confounded"

    def verdict(self) -> str:
        changes = self.changes()
        uncounted = len(self.no_effect) + len(self.bookkeeping)
        if not changes:
            return ("no change: same training config and inputs"
                    + (f" ({uncounted} key(s) with no effect on the weights differ)" if uncounted else "")
                    + "; any difference is run-to-run noise")
        if len(changes) == 1:
            return f"one change: {changes[0]}"
        names = [k for k, _, _ in self.trained + self.measured] + [f"{s} content" for s, _, _ in self.content]
        return f"confounded: {len(changes)} things changed ({', '.join(names)})"

    def to_json(self) -> dict:
        def rows(items):
            return [{"key": k, "reference": a, "run": b} for k, a, b in items]

        return {"reference": self.reference, "run": self.run, "verdict": self.verdict(), "kind": self.kind,
                "changes": self.changes(),
                "trained": rows(self.trained), "measured": rows(self.measured), "no_effect": rows(self.no_effect),
                "bookkeeping": rows(self.bookkeeping),
                "content": [{"stage": s, "reference": a, "run": b} for s, a, b in self.content]}


def diff_runs(ref_label: str, ref_config: dict, ref_ids: dict, label: str, config: dict, ids: dict) -> ConfigDiff:
    out = ConfigDiff(ref_label, label)
    for key, a, b in differing_keys(ref_config, config):
        getattr(out, {"trained": "trained", "measured": "measured", "bookkeeping": "bookkeeping",
                     "none": "no_effect"}[key_effect(key)]).append(
            (key, a, b))
    changed_sections = {_counted_section(k) for k, _, _ in out.trained}
    flagged: set[str] = set()
    for stage in UPSTREAM_IDS:
        a, b = ref_ids.get(stage), ids.get(stage)
        if a is None or b is None or a == b:
            continue
        explained = changed_sections & _sections(stage) or flagged & _upstream(stage)
        if not explained:
            out.content.append((stage, a, b))
            flagged.add(stage)
    return out
