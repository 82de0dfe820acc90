"""The one TOML config, loaded into typed dataclasses.

Every section and key has a default, so a file holding only `[[data.sources]]` tables is a valid config.
Unknown keys are rejected with the closest valid key suggested, because a typo that silently falls back to a
default is the most expensive kind of config bug: it is found weeks later.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import operator
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError
from .ids import FILE_NAME

FORMATS = ("text", "jsonl", "parquet", "html")
HTML_EXTRACT = ("auto", "main", "full")  # SourceConfig.html_extract: how an HTML page is read (data/clean/html.py)
# How Muon orthogonalizes an update (train/optim.py implements each); `train.orthogonalizer` names one.
ORTHOGONALIZERS = ("newton_schulz", "polar_express")

# The values each string key allows, by dotted key ([[tables]] without their brackets). One table: validate() checks
# it and the config reference (config_reference.py, docs/config.md) prints it, so the two cannot disagree. Numeric
# ranges live beside their keys instead (bounded()); the filter profiles (data.sources.profile) are the data
# stage's (data/quality_config.py PROFILES, checked in data/config_checks.py).
CHOICES: dict[str, tuple] = {
    "data.sources.format": FORMATS,
    "data.sources.html_extract": HTML_EXTRACT,
    "data.executor": ("local", "ray"),
    "model.mlp": ("swiglu", "gelu", "relu2"),
    "train.optimizer": ("adamw", "muon", "muonh"),
    "train.orthogonalizer": ORTHOGONALIZERS,
    "train.schedule": ("cosine", "wsd", "constant"),
    "train.precision": ("auto", "bf16", "fp16", "fp32"),
    "train.device": ("auto", "cpu", "cuda", "mps"),
    "train.compile": ("auto", True, False),
    "train.eval": ("inline", "external"),
    "train.on_spike": ("warn", "skip", "rollback", "stop"),
    "eval.suite.humaneval": ("auto", "on", "off"),
    "eval.suite.tasks.kind": ("multiple_choice", "completion"),
    "decontaminate.mode": ("document", "span"),
    "monitor.wandb_mode": ("offline", "online"),
}


def either(choices: tuple) -> str:
    """`a, b or c`, values as TOML writes them (true, not True): how messages and the reference list choices."""
    shown = [("true" if c else "false") if isinstance(c, bool) else str(c) for c in choices]
    return f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]


@dataclass(frozen=True)
class Range:
    """The values a numeric key allows. Declared once, beside the key (see bounded()); validate() checks every
    declared range and words the message from it, so the check and its message cannot drift apart."""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def __contains__(self, v: float) -> bool:
        finite = not isinstance(v, float) or math.isfinite(v)  # TOML allows nan and inf; no key wants them
        return finite and all(bound is None or test(v, bound) for bound, test in (
            (self.ge, operator.ge), (self.gt, operator.gt), (self.le, operator.le), (self.lt, operator.lt)))

    def __str__(self) -> str:
        low, high = (self.ge if self.ge is not None else self.gt), (self.le if self.le is not None else self.lt)
        if high is None:
            return f"{'>=' if self.ge is not None else '>'} {low:g}"
        if low is None:
            return f"{'<=' if self.le is not None else '<'} {high:g}"
        return f"in {'[' if self.ge is not None else '('}{low:g}, {high:g}{']' if self.le is not None else ')'}"


def bounded(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            operational: bool = False, **limits) -> Any:
    """A config key with its allowed values beside it: `bounded(0.1, ge=0)`, `bounded(0.5, gt=0, le=1)`.
    On a table of numbers (dict) the range holds for each value. operational: see operational()."""
    return field(default=default, default_factory=default_factory,
                 metadata={"range": Range(**limits), "in_id": not operational})


def operational(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A key that changes how a stage runs (processes, logging, timing) or what another command does, never what
    the stage produces: it stays out of the stage's artifact ID (Config.identity), so changing it reruns nothing."""
    return field(default=default, default_factory=default_factory, metadata={"in_id": False})


# Source names and domains become file names (train/<source>.jsonl.zst, val/<domain>.jsonl) and parts of
# document IDs (<source>/<file>:<line>), so a `/`, a space or a leading dot would break a path or an ID.
FILE_NAME_RULE = ("a file-name-safe name (letters, digits and `_.+-`, not starting with `.` or `-`; without `/` or "
                  "spaces)")


def file_name() -> Any:
    """A required key whose value becomes part of file names and IDs; validate() holds it to FILE_NAME."""
    return field(metadata={"file_name": True})


@dataclass
class SourceConfig:
    name: str = file_name()  # names the source's output files and its documents' IDs (<source>/<file>:<line>)
    domain: str = file_name()  # what the text is (web, docs, code...): validation split, per-domain loss and quotas go by domain
    path: str  # file, folder or glob, relative to the config file
    format: str | None = None  # text | jsonl | parquet | html; inferred from the extension when absent
    html_extract: str = "auto"  # auto | main | full: how HTML pages are read; auto keeps the body without nav, headers, footers, banners and tables of contents, main is resiliparse's main content (crawled articles), full every visible element
    text_field: str = "text"  # the JSONL or parquet field holding a document's text
    weight: float = bounded(1.0, gt=0)  # share of training tokens (normalized over sources)
    languages: list[str] | None = None  # overrides data.languages for this source
    profile: str | None = None  # prose | technical | code | auto: filter set; default code for domain "code", auto otherwise
    skip_rules: list[str] = field(default_factory=list)  # ledger rules switched off for this source, e.g. ["repeated_line"]
    language_rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-language overrides of the language-dependent rules for this source, e.g. {de = {max_mean_word_len = 18}}

    @property
    def filter_profile(self) -> str:
        """The configured filter set; "auto" is resolved from the source's documents by the prepare stage
        (data/profile_choice.py)."""
        return self.profile or ("code" if self.domain.strip().lower() == "code" else "auto")


@dataclass
class QualityOverrides:
    # Per-profile overrides of the Gopher / C4 / FineWeb / code thresholds (keys: the fields of
    # scratchlm.data.clean.quality.QualityConfig; `false` switches a rule off). `scratchlm init` lists every key.
    prose: dict[str, Any] = field(default_factory=dict)  # web-crawl prose: the published thresholds
    technical: dict[str, Any] = field(default_factory=dict)  # documentation, READMEs, manuals: prose with code, tables and headings
    code: dict[str, Any] = field(default_factory=dict)  # source files: the prose rules off, the code-file rules on


PREPARE_STEPS = ("boilerplate", "repeated_lines", "language", "quality", "promo", "exact_dedup", "fuzzy_dedup",
                 "paragraph_dedup")

@dataclass
class DataConfig:
    sources: list[SourceConfig] = field(default_factory=list)  # [[data.sources]]: one table per source
    normalization: str = "NFC"  # Unicode normalization form applied to every document
    min_chars: int = bounded(200, ge=0)  # shorter documents carry too little context to learn from (a CJK character counts two)
    max_chars: int = bounded(1_000_000, ge=1)  # longer documents are usually dumps or logs, not prose
    val_fraction: float = bounded(0.02, ge=0, lt=0.5)  # share of each domain held out for validation, drawn before anything else
    val_max_docs: int = bounded(500, ge=1)  # cap per domain, so validation stays cheap on large corpora
    val_min_docs: int = bounded(2, ge=1)  # a domain with fewer clean documents gets no validation split (reported)
    val_min_chars: int = bounded(20_000, ge=0)  # more documents are held out until a domain's validation text has this many ...
    val_max_share: float = bounded(0.1, ge=0, lt=0.5)  # ... but never past this share of the domain's characters (per-domain losses on a few hundred tokens are noise)
    shard_docs: int = bounded(50_000, ge=1)  # documents per output shard
    seed: int = bounded(1234, ge=0)  # seeds the validation draw; separate from train.seed so a new training seed keeps the split
    workers: int = bounded(0, ge=0, operational=True)  # processes for the per-shard steps; 0 uses every core
    executor: str = operational("local")  # local (a process pool) or ray (tasks on a Ray cluster): data and tokenize stages
    ray_address: str = operational("")  # with executor = "ray": a cluster's address ("auto", "ray://head:10001"); empty starts Ray here
    sort_mb: int = bounded(256, ge=16, operational=True)  # memory for one on-disk sort of the corpus-wide steps (dedup, paragraphs, repeated lines): more is faster, never needed more
    unit_mb: int = bounded(64, ge=1)  # inputs are cut into work units of about this size (big plain JSONL files by line ranges)
    skip: list[str] = field(default_factory=list)  # steps to switch off, e.g. ["promo", "fuzzy_dedup"]
    languages: list[str] = field(default_factory=lambda: ["en"])  # languages to keep; [] keeps all; code skips
    language_min_score: float = bounded(0.65, gt=0, le=1)  # fastText probability floor (FineWeb's English threshold, Penedo et al. 2024)
    repeated_line_min_docs: int = bounded(5, ge=2)  # a line in at least this many documents of a source ...
    repeated_line_min_share: float = bounded(0.01, gt=0, le=1)  # ... and in this share of them is template, removed (not on code)
    promo_threshold: float = bounded(0.5, gt=0, le=1)  # promotional/spam score (0-1) at or above which a document is dropped
    fuzzy_threshold: float = bounded(0.7, gt=0, le=1)  # MinHash-estimated Jaccard of word 5-grams (256 permutations) at which two documents are near copies: 0.7 finds copies with 3% of their words changed (J = 0.75)
    paragraph_fuzzy_threshold: float = bounded(0.8, gt=0, le=1)  # MinHash-estimated Jaccard of word 3-grams (64 permutations) at which two paragraphs are near copies
    containment_threshold: float = bounded(0.8, gt=0, le=1)  # share of a document's word 5-grams inside a longer one that makes it a copy
    min_paragraph_words: int = bounded(10, ge=1)  # paragraph dedup leaves shorter paragraphs alone (headings, "Returns:", "}")
    paragraph_min_docs: int = bounded(25, ge=2)  # a paragraph is cut as a duplicate when this many documents hold it (2: every copy)
    token_sample_chars: int = bounded(2_000_000, ge=1)  # sample for the tokens/char estimate before the tokenizer exists
    html_loss_ledger: float = bounded(0.2, ge=0, le=1)  # an HTML page whose extraction drops more than this share of its text gets each dropped element in the ledger (every drop is counted in the stats)
    quality: QualityOverrides = field(default_factory=QualityOverrides)  # [data.quality.<profile>]: overrides of a filter set's thresholds
    language_rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-language overrides of stop words and thresholds for every source: [data.language_rules.de] stop_words = [...]

@dataclass
class TokenizerConfig:
    vocab_size: int = bounded(32768, ge=272)  # at least the 256 byte tokens and room for the special tokens
    sample_chars: int = bounded(200_000_000, ge=1)  # character budget of the training sample: fewer when a stratum's text cannot fill its quota at this size
    max_doc_chars: int = bounded(100_000, ge=1)  # cap per document in the sample, so one huge file cannot dominate
    min_frequency: int = bounded(2, ge=1)  # a pair seen fewer times in the sample is never merged
    domain_quotas: dict[str, float] = bounded(default_factory=dict, ge=0)  # sample share per domain; empty: the source weights
    language_quotas: dict[str, float] = bounded(default_factory=dict, ge=0)  # share of the prose sample per language code
    code_domains: list[str] = field(default_factory=lambda: ["code"])  # domains of source code: no language, no tokens/word
    min_language_share: float = bounded(0.02, ge=0, le=1)  # a language the config neither keeps (data.languages) nor gives a quota is checked only with this share of the held-out prose
    max_quota_deviation: float = bounded(0.25, gt=0)  # a sample share off its quota by more than this fraction of the quota is a warning: 0.25 flags 7.4% against 10%
    min_sample_chars_per_vocab: int = bounded(100, ge=1)  # the sample shrinks to meet its quotas, never below vocab_size x this many chars (fewer leave merges learned from a handful of occurrences)
    min_judged_words: int = bounded(1000, ge=1)  # a language's tokens/word on fewer held-out prose words is reported, not judged: too small a sample


@dataclass
class ShardsConfig:
    shard_tokens: int = bounded(268_435_456, ge=1)  # tokens per .bin file; a larger source is split into several
    workers: int = bounded(0, ge=0, operational=True)  # tokenizer processes; 0 uses every core

@dataclass
class ModelConfig:
    preset: str | None = None  # tiny | 50m | 125m | 350m | 1b; fills every model key the file leaves unset
    n_layer: int = bounded(12, ge=1)  # transformer blocks
    d_model: int = bounded(768, ge=1)  # width of the residual stream
    n_head: int = bounded(12, ge=1)  # attention heads
    n_kv_head: int | None = bounded(None, ge=1)  # grouped-query attention; None means n_head (plain multi-head)
    head_dim: int | None = bounded(None, ge=2)  # width of one attention head; None means d_model / n_head
    seq_len: int = bounded(1024, ge=1)  # context length in tokens
    mlp: str = "swiglu"  # swiglu | gelu | relu2
    mlp_ratio: float = bounded(4.0, gt=0)  # hidden width / d_model (swiglu uses 2/3 of it so the parameter count matches)
    qk_norm: bool = True  # RMS-normalize queries and keys: steadier attention logits at high learning rates
    rope_theta: float = bounded(10000.0, gt=0)  # base of the rotary position frequencies
    tie_embeddings: bool = True  # the output layer reuses the token embedding matrix
    logit_softcap: float = bounded(0.0, ge=0)  # 0 disables; e.g. 15.0 caps logits smoothly (gemma/nanochat)
    dropout: float = bounded(0.0, ge=0, lt=1)  # 0: pretraining that reads its data about once does not overfit
    init_std: float = bounded(0.02, gt=0)  # standard deviation of the normal weight initialization

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.d_model // self.n_head


# The largest learning rate a key accepts. The defaults are AdamW's 1e-3 and Muon's 0.02 (train/optim.py); language
# models train with AdamW at ~1e-4..1e-2 and Muon at ~0.02-0.05. At 1 an AdamW step moves every weight by about 1,
# 50x the init std: the run diverges at once, so a larger value is a typo (1e308 for 1e-3), not a choice.
MAX_LEARNING_RATE = 1.0


@dataclass
class TrainConfig:
    max_steps: int = bounded(5000, ge=1)  # optimizer steps; the learning-rate schedule spans them
    batch_size: int = bounded(16, ge=1)  # sequences per micro-batch
    grad_accum: int = bounded(1, ge=1)  # micro-batches per optimizer step
    batch_tokens: int = bounded(0, ge=0)  # global batch in tokens; when set, grad_accum = batch_tokens / (batch_size*seq_len*ranks)
    optimizer: str = "adamw"  # adamw | muon | muonh
    learning_rate: float = bounded(3e-3, gt=0, le=MAX_LEARNING_RATE)  # peak learning rate, reached after warmup_steps
    muon_lr: float | None = bounded(None, gt=0, le=MAX_LEARNING_RATE)  # learning rate of the Muon-updated matrices; None uses the optimizer's default
    muon_momentum: float = bounded(0.95, ge=0, lt=1)  # momentum of the Muon-updated matrices
    orthogonalizer: str = "newton_schulz"  # newton_schulz | polar_express: how muon and muonh orthogonalize an update
    min_lr_ratio: float = bounded(0.1, ge=0, le=1)  # final learning rate as a share of the peak
    warmup_steps: int = bounded(100, ge=0)  # steps of linear warmup to the peak learning rate
    schedule: str = "cosine"  # cosine | wsd | constant
    weight_decay: float = bounded(0.1, ge=0)  # decoupled weight decay
    beta1: float = bounded(0.9, ge=0, lt=1)  # AdamW's decay of the gradient mean
    beta2: float = bounded(0.95, ge=0, lt=1)  # AdamW's decay of the squared-gradient mean
    grad_clip: float = bounded(1.0, ge=0)  # 0 disables clipping (not recommended)
    precision: str = "auto"  # auto | bf16 | fp16 | fp32; auto: bf16 on a GPU of compute capability >= 8.0 (else fp16), on a CPU with native bf16 (avx512_bf16/amx_bf16, torch not limited to AVX2), else fp32; decided once per run and recorded in its checkpoints
    device: str = "auto"  # auto | cpu | cuda | mps
    compile: bool | str = "auto"  # auto | true | false: torch.compile the model; auto compiles when the plan measured that the time saved over max_steps exceeds the compile time
    activation_checkpointing: bool = False  # recompute each block in backward: less memory, ~30% more compute
    fsdp: bool = False  # under torchrun, shard parameters and optimizer state (FSDP2) instead of replicating (DDP)
    prefetch: int = bounded(2, ge=0, operational=True)  # batches prepared ahead by a background thread; 0 reads in the training thread
    seed: int = bounded(1337, ge=0)  # seeds the initialization and the order batches are drawn in
    checkpoint_every: int = bounded(500, ge=1)  # steps; a checkpoint is also written at the end
    checkpoint_minutes: float = bounded(0.0, ge=0, operational=True)  # also checkpoint when this many minutes passed since the last one; 0 disables
    keep_last: int = bounded(3, ge=1)  # checkpoints kept on disk (plus the best by validation loss)
    eval_every: int = bounded(500, ge=1)  # steps between evaluations (per-domain validation loss, samples)
    eval: str = operational("inline")  # inline | external: external leaves evaluation and sampling at eval_every steps to `scratchlm eval watch`, beside the run
    log_every: int = bounded(10, ge=1, operational=True)  # steps between rows of metrics.jsonl
    threads: int = bounded(0, ge=0, operational=True)  # CPU threads for torch; 0 uses every core
    on_spike: str = "warn"  # warn | skip | rollback | stop: what a step whose loss or gradient norm spikes (monitor.grad_spike_*) does: alert only; skip its update; go back to the last checkpoint and skip it there; stop with a checkpoint before it. skip and stop read both values back every step

@dataclass
class PlanConfig:
    # What `plan`, `check` and `run` judge the planned run against (--budget-hours / --price-per-hour override).
    budget_hours: float | None = bounded(None, gt=0, operational=True)  # wall-clock hours the run must fit in; a plan over it is an error that stops `run`
    price_per_hour: float | None = bounded(None, ge=0, operational=True)  # device price per hour, for the plan's cost line

@dataclass
class TaskConfig:
    name: str  # the task's name in the results and the report
    path: str  # JSONL, relative to the config file
    kind: str  # multiple_choice (scored by log-likelihood) | completion (scored by exact match)


@dataclass
class EvalSetConfig:
    name: str = file_name()  # names the set in contamination reports and in its fingerprint files
    path: str  # JSONL (.jsonl, .jsonl.gz, .jsonl.zst: an item per line) or text (an item per paragraph)
    fields: list[str] = field(default_factory=list)  # JSONL fields holding the text; empty: text, else prompt/question/...
    domain: str = ""  # the domain it measures; the mix report warns when that domain gets almost no training tokens


HUMAN_CRITERIA = [
    "correct: the content is factually / technically right for the prompt",
    "fluent: grammatical, reads naturally, no broken tokens",
    "on_tone: the register the domain expects (not promotional, not chatty where it should be terse)",
    "not_repetitive: no loops, no repeated sentences or boilerplate",
]

@dataclass
class SuiteConfig:
    """The keys of `scratchlm eval suite` (the full suite) and `eval human` (the rating sheet). The
    pipeline's eval stage does not use them, so they are not part of its ID."""
    diversity_samples: int = bounded(4, ge=1)  # generations per prompt for distinct-n and the repeated n-gram rate
    humaneval: str = "auto"  # auto (when a source has domain "code" and `eval suite` estimates it fits --humaneval-cap-minutes) | on | off
    humaneval_problems: int = bounded(0, ge=0)  # 0 runs all 164 problems; fewer for a quick look
    humaneval_samples: int = bounded(10, ge=1)  # completions per problem (pass@1 and pass@10 are estimated from them)
    humaneval_max_new_tokens: int = bounded(256, ge=1)  # tokens per completion, at most (the Codex stop sequences end most sooner)
    humaneval_temperature: float = bounded(0.8, ge=0)  # sampling temperature of the completions (pass@10 needs varied ones)
    sandbox_timeout_s: float = bounded(5.0, gt=0)  # wall-clock limit per candidate program
    sandbox_memory_mb: int = bounded(512, ge=1)  # address-space limit per candidate program
    unsafe_run_code_unsandboxed: bool = False  # true: where no OS sandbox (bubblewrap) can be made, HumanEval runs model-written code as you, with only an audit hook (docs/eval.md); false refuses
    tasks: list[TaskConfig] = field(default_factory=list)  # [[eval.suite.tasks]] name/path/kind: your own JSONL tasks
    human_criteria: list[str] = field(default_factory=lambda: list(HUMAN_CRITERIA))  # "name: what it means"
    human_scale: int = bounded(5, ge=2)  # every criterion is scored 1..human_scale


@dataclass
class EvalConfig:
    max_batches: int = bounded(20, ge=1)  # validation batches per domain
    prompts: list[str] = field(default_factory=list)  # empty: one prompt per domain, taken from validation docs
    max_new_tokens: int = bounded(64, ge=1)  # tokens sampled per prompt
    temperature: float = bounded(0.8, ge=0)  # 0: greedy
    top_k: int = bounded(50, ge=0)  # 0: sample from the whole vocabulary
    suite: SuiteConfig = operational(default_factory=SuiteConfig)
    sets: list[EvalSetConfig] = operational(default_factory=list)  # [[eval.sets]]: held-out sets the training data is guarded against; part of the decontaminate stage's ID


@dataclass
class DecontaminateConfig:
    ngram: int = bounded(13, ge=1)  # words per fingerprint (13 as in GPT-3); an eval item shares one with a copy of itself
    min_words: int = bounded(8, ge=1)  # items shorter than ngram are matched whole if at least this long, else not checked
    mode: str = "document"  # document: drop a contaminated training document | span: cut the match +- span_window
    span_window: int = bounded(200, ge=0)  # characters cut on each side of a match in span mode
    min_piece_chars: int = bounded(200, ge=0)  # span mode: a piece left shorter than this is dropped too
    guard_validation: bool = True  # the validation split is guarded too: its near copies leave training
    validation_min_coverage: float = bounded(0.5, gt=0, le=1)  # share of a validation doc's n-grams a training doc must hold to be a copy
    error_train_share: float = bounded(0.2, gt=0, le=1)  # an eval set whose copies are more than this share of the training text is an error
    workers: int = bounded(0, ge=0, operational=True)  # scan processes; 0 uses every core

@dataclass
class SFTConfig:
    learning_rate: float = bounded(0.0, ge=0, le=MAX_LEARNING_RATE)  # 0: train.learning_rate x lr_scale (fine-tuning wants a much lower rate)
    lr_scale: float = bounded(0.1, gt=0)  # with learning_rate 0, fine-tuning runs at train.learning_rate x this
    max_steps: int = bounded(200, ge=1)  # optimizer steps of fine-tuning
    batch_size: int = bounded(8, ge=1)  # packed rows per step
    warmup_steps: int = bounded(10, ge=0)  # steps of linear warmup
    min_lr_ratio: float = bounded(0.1, ge=0, le=1)  # final learning rate as a share of the peak
    weight_decay: float = bounded(0.0, ge=0)  # 0: none
    grad_clip: float = bounded(1.0, ge=0)  # 0 disables clipping
    pack: bool = True  # several short conversations per row (never split one across rows)
    seed: int = bounded(4321, ge=0)  # seeds fine-tuning: the order of the conversations and the held-out draw
    heldout: str = ""  # JSONL of held-out conversations, relative to the config file; empty: draw heldout_share of the data
    heldout_share: float = bounded(0.1, ge=0, lt=1)  # share of the conversations held out when `heldout` is empty (0: none)
    eval_every: int = bounded(50, ge=1)  # steps between held-out loss evaluations (and at the end)
    answers: int = bounded(40, ge=0)  # held-out and training prompts answered after fine-tuning, each; 0 skips the answer check
    answer_max_new_tokens: int = bounded(128, ge=1)  # tokens per answer, at most (an answer should end with <|end|> before)
    max_epochs: float = bounded(5.0, gt=0)  # passes over the training conversations above which the epochs verdict warns

@dataclass
class MonitorConfig:
    spike_window: int = bounded(50, ge=2)  # log intervals of training loss that a new loss is compared with
    spike_z: float = bounded(6.0, gt=0)  # a loss this many standard deviations above the window's trend line is a spike
    spike_min_history: int = bounded(10, ge=2)  # log intervals seen before the spike detector may fire
    grad_spike_window: int = bounded(128, ge=2)  # steps of gradient norm (and, for train.on_spike, of loss) a step's is compared with; judged from half a window on (OLMo-core's SkipStepOptimizer: 128, and 64)
    grad_spike_z: float = bounded(6.0, gt=0)  # a step's gradient norm (or loss) this many standard deviations above its window's mean is a spike (OLMo-core: 6)
    spike_rollbacks: int = bounded(20, ge=0)  # rollbacks train.on_spike = "rollback" may make in one run; the next spike stops it (PaLM 540B rolled back about 20 times)
    weight_growth_window: int = bounded(20, ge=2)  # log intervals the judged span (the later half of the run so far) must hold
    weight_growth: float = bounded(0.25, gt=0)  # relative growth of a layer's weight norm across that span that warns, if not slowing
    weight_growth_after: float = bounded(0.5, ge=0, lt=1)  # share of train.max_steps (and the warmup) while norms settle: not judged
    stall_share: float = bounded(0.2, gt=0, lt=1)  # share of step time spent waiting for data above which the loader is stalling
    watch_slowdown: float = bounded(0.25, gt=0, lt=1)  # tokens/s lost while a competing eval watcher evaluates (against intervals without it) above which it is stalling training
    domain_rise: float = bounded(0.01, ge=0)  # nats/token a domain's validation loss may rise while the mean falls
    overconfidence_loss_tolerance: float = bounded(0.0, ge=0)  # val loss must fall by more than this for rising logits to be ok
    repetition_ngram: int = bounded(4, ge=1)  # word n-gram size of the repetition measure on samples
    repetition_rate: float = bounded(0.5, ge=0, le=1)  # share of repeated n-grams in a sample above which it counts as repetitive
    update_ratio: bool = True  # measure |update|/|weight| per layer at log steps (one copy of the weights)
    peak_flops: float = bounded(0.0, ge=0)  # device peak FLOP/s for MFU; 0 measures a matmul peak once and caches it
    tensorboard: bool = True  # also write TensorBoard events when the tensorboard package is installed
    wandb_project: str = ""  # log to Weights & Biases under this project; empty disables
    wandb_mode: str = "offline"  # offline | online; offline writes wandb/ in the run for a later `wandb sync`

@dataclass
class RunConfig:
    workdir: str = "run"  # where every stage writes, relative to the config file
    demo: bool = False  # a demo on a corpus too small for its model (the quickstart): trains through that error

@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    shards: ShardsConfig = field(default_factory=ShardsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    decontaminate: DecontaminateConfig = field(default_factory=DecontaminateConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)

    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    path: Path | None = None  # the file this config was loaded from; never written back

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    @property
    def workdir(self) -> Path:
        return (self.base_dir / self.run.workdir).resolve()

    def resolve(self, p: str) -> Path:
        return (self.base_dir / p).expanduser()

    def section(self, name: str) -> dict[str, Any]:
        return dataclasses.asdict(getattr(self, name))

    def identity(self, name: str) -> dict[str, Any]:
        """The section as a stage's artifact ID hashes it: without its operational() keys."""
        section = getattr(self, name)
        return {f.name: v for f, v in zip(dataclasses.fields(section), self.section(name).values())
                if f.metadata.get("in_id", True)}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: self.section(f.name) for f in dataclasses.fields(self) if f.name != "path"}

def parse_config(path: str | Path) -> Config:
    """The file parsed into a Config: TOML syntax, types and unknown keys. Its values are checked by
    stages.check_config (validate() below, then each stage's own checks); stages.load_config does both."""
    path = Path(path)
    cfg = config_from_dict(read_config_file(path), where=str(path))
    cfg.path = path.resolve()
    return cfg


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's TOML as a dict; a missing file or a syntax error is a one-line UserError."""
    if not path.is_file():
        raise UserError(f"config file {path} not found (create one with `scratchlm init DIR`)")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None

_SUITE_KEYS = {f.name for f in dataclasses.fields(SuiteConfig)}


def _moved_to_suite(raw: dict, where: str) -> dict:
    """A config written before [eval.suite] existed (every `scratchlm init` wrote these keys under [eval]) still
    loads: its suite keys are read from [eval], with a warning saying where they belong now."""
    moved = [key for key in raw if key in _SUITE_KEYS]
    if not moved:
        return raw
    suite = dict(raw.get("suite") or {})
    if not isinstance(raw.get("suite", {}), dict) or any(key in suite for key in moved):
        raise UserError(f"{where}: `{moved[0]}` is set in both [eval] and [eval.suite]; keep the [eval.suite] one")
    from .progress import log

    log(f"config: {where}: {', '.join(moved)} moved from [eval] to [eval.suite] (the keys of `scratchlm eval "
        "suite`, apart from the pipeline's eval stage); read from [eval] for now, move them to silence this")
    suite.update({key: raw[key] for key in moved})
    return {**{k: v for k, v in raw.items() if k not in moved}, "suite": suite}


def config_from_dict(raw: dict[str, Any], where: str = "config") -> Config:
    return _build(Config, raw, where, section="")

def _build(cls: type, raw: Any, where: str, section: str):
    label = f"[{section}]" if section else "the top level"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: {label} must be a table")
    if cls is ModelConfig and raw.get("preset") is not None:
        from .presets import apply_preset

        raw = apply_preset(raw, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if not (cls is Config and f.name == "path")]
    kwargs = {}
    if cls is EvalConfig:
        raw = _moved_to_suite(raw, where)
    for key, value in raw.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else f"; valid keys: {', '.join(names)}"
            raise UserError(f"{where}: unknown key `{key}` in {label}{hint}")
        kwargs[key] = _coerce(hints[key], value, where, f"{section}.{key}" if section else key)
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required key is missing
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   and f.name not in kwargs]
        raise UserError(f"{where}: {label} is missing required key `{missing[0] if missing else e}`") from None

def _coerce(tp: Any, value: Any, where: str, key: str):
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(options) > 1 and all(a in (int, float, str, bool) for a in options):  # e.g. `bool | str`
            if not isinstance(value, tuple(options)):
                raise UserError(f"{where}: `{key}` must be {' or '.join(a.__name__ for a in options)}, "
                                f"got {type(value).__name__} {value!r}")
            return value
        return _coerce(options[0], value, where, key)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where, key)
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"{where}: `{key}` must be a table, e.g. {{ web = 0.5, code = 0.5 }}")
        _, item = typing.get_args(tp)
        return {k: _coerce(item, v, where, f"{key}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"{where}: `{key}` must be a list")
        (item,) = typing.get_args(tp)
        return [_coerce(item, v, where, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and (not isinstance(value, tp) or (tp is int and isinstance(value, bool))):
        raise UserError(f"{where}: `{key}` must be {tp.__name__}, got {type(value).__name__} {value!r}")
    return value

def _check(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise UserError(f"{where}: {msg}")

def _check_declared(obj: Any, where: str, path: str = "", label: str = "") -> None:
    """Check every key that declares its allowed values (bounded(), file_name()), in every section and table."""
    for f in dataclasses.fields(obj):
        value, dotted = getattr(obj, f.name), f"{path}.{f.name}" if path else f.name
        _check_field(f, value, where, f"{label} {f.name}")
        if dataclasses.is_dataclass(value):
            _check_declared(value, where, dotted, f"[{dotted}]")
        for i, item in enumerate(value if isinstance(value, list) else []):
            if dataclasses.is_dataclass(item):
                _check_declared(item, where, dotted, f"[[{dotted}]] #{i + 1}")

def _check_field(f: dataclasses.Field, value: Any, where: str, key: str) -> None:
    limits = f.metadata.get("range")
    if limits is not None and value is not None:
        for name, v in (value.items() if isinstance(value, dict) else [(None, value)]):
            shown = f"{v:g}" if isinstance(v, float) else v  # 0, not the 0.0 an integer in a float key became
            _check(v in limits, where, f"{key}{'.' + name if name else ''} must be {limits}, got {shown}")
    if f.metadata.get("file_name"):
        _check(FILE_NAME.fullmatch(value) is not None, where, f"{key} must be {FILE_NAME_RULE}, got {value!r}")

def _check_across_keys(cfg: Config, where: str) -> None:
    """Keys each valid alone that contradict each other."""
    d, m, mo = cfg.data, cfg.model, cfg.monitor
    for small, large, (a, b) in ((d.min_chars, d.max_chars, ("[data] min_chars", "[data] max_chars")),
                                 (mo.spike_min_history, mo.spike_window,  # the window never holds enough history
                                  ("[monitor] spike_min_history", "[monitor] spike_window"))):
        _check(small <= large, where, f"{a} ({small}) must be <= {b} ({large})")
    _check(m.head_dim is not None or m.d_model % m.n_head == 0, where,
           f"[model] d_model ({m.d_model}) must be divisible by [model] n_head ({m.n_head}), or set [model] head_dim")
    _check(m.attn_head_dim % 2 == 0, where, "the attention head width ([model] head_dim) must be even for RoPE")
    kv = m.n_kv_head or m.n_head
    _check(m.n_head % kv == 0, where, f"[model] n_head ({m.n_head}) must be divisible by [model] n_kv_head ({kv})")
    _check(not (cfg.train.fsdp and cfg.train.optimizer != "adamw"), where,
           "`train.fsdp = true` needs `train.optimizer = \"adamw\"`: Muon orthogonalizes whole matrices, FSDP shards them")
    sft_lr = cfg.train.learning_rate * cfg.sft.lr_scale  # what fine-tuning runs at while [sft] learning_rate is 0
    _check(cfg.sft.learning_rate > 0 or sft_lr <= MAX_LEARNING_RATE, where,
           f"[sft] lr_scale ({cfg.sft.lr_scale:g}) x [train] learning_rate ({cfg.train.learning_rate:g}) = {sft_lr:g} "
           f"must be <= {MAX_LEARNING_RATE:g}; lower [sft] lr_scale or set [sft] learning_rate")


def _warn_across_keys(cfg: Config, where: str) -> None:
    """Keys that contradict each other, with a use: a warning, not an error."""
    from .progress import log

    # A run no longer than its warmup never reaches the schedule's decay and ends at (or short of) the peak rate,
    # which costs final loss. Still a warning: a smoke run shorter than the default warmup (train.max_steps = 20
    # under warmup_steps = 100) is a fine use, and an error would name a key its author never set.
    for section, t in (("train", cfg.train), ("sft", cfg.sft)):
        if t.warmup_steps >= t.max_steps:
            log(f"config: {where}: warning: [{section}] warmup_steps ({t.warmup_steps}) >= [{section}] max_steps "
                f"({t.max_steps}): the learning rate never leaves its warmup, so it never decays; lower "
                f"[{section}] warmup_steps (e.g. to {max(0, t.max_steps // 10)})")

def _check_choice(cfg: Config, key: str, where: str, got=lambda v: "") -> None:
    """A string key of CHOICES (outside a [[table]]) holds one of its values."""
    value = cfg
    for part in key.split("."):
        value = getattr(value, part)
    _check(value in CHOICES[key], where, f"`{key}` must be {either(CHOICES[key])}{got(value)}")


def validate(cfg: Config, where: str) -> None:
    d, m, t = cfg.data, cfg.model, cfg.train
    _check(bool(d.sources), where, "no [[data.sources]] given; add at least one source table")
    _check_declared(cfg, where)
    _check_across_keys(cfg, where)
    for i, prompt in enumerate(cfg.eval.prompts):
        _check(bool(prompt.strip()), where, f"[eval] prompts #{i + 1} is empty; give it text or remove it")
    names = [s.name for s in d.sources]
    _check(len(set(names)) == len(names), where, f"source names must be unique, got {names}")
    for s in d.sources:
        for key in ("format", "html_extract"):
            allowed, value = CHOICES[f"data.sources.{key}"], getattr(s, key)
            _check(value is None or value in allowed, where,
                   f"source `{s.name}`: {key} must be one of {', '.join(allowed)}, got `{value}`")
    for step in d.skip:
        close = difflib.get_close_matches(step, PREPARE_STEPS, n=1)
        _check(step in PREPARE_STEPS, where, f"`data.skip`: unknown step `{step}`"
               + (f"; did you mean `{close[0]}`?" if close else f"; steps: {', '.join(PREPARE_STEPS)}"))
    # The messages differ in how they show the value (some not at all); kept as they were.
    _check_choice(cfg, "model.mlp", where, lambda v: f", got `{v}`")
    _check_choice(cfg, "train.optimizer", where, lambda v: f", got `{v}`")
    _check_choice(cfg, "train.orthogonalizer", where, lambda v: f", got `{v}`")
    _check_choice(cfg, "train.schedule", where)
    _check_choice(cfg, "train.precision", where)
    _check_choice(cfg, "train.device", where)
    _check_choice(cfg, "train.compile", where, lambda v: f", got {v!r}")
    _check_choice(cfg, "data.executor", where, lambda v: f", got {v!r}")
    _check_choice(cfg, "train.eval", where, lambda v: f", got {v!r}")
    _check_choice(cfg, "train.on_spike", where, lambda v: f", got {v!r}")
    _check_choice(cfg, "eval.suite.humaneval", where)
    kinds = CHOICES["eval.suite.tasks.kind"]
    for i, task in enumerate(cfg.eval.suite.tasks):
        _check(task.kind in kinds, where,
               f"[[eval.suite.tasks]] #{i + 1} `{task.name}`: kind must be {either(kinds)}, got `{task.kind}`")
    _validate_eval_sets(cfg, where)
    _check_choice(cfg, "monitor.wandb_mode", where)
    _warn_across_keys(cfg, where)  # last: no warning for a config an error rejects

def _validate_eval_sets(cfg: Config, where: str) -> None:
    _check_choice(cfg, "decontaminate.mode", where, lambda v: f", got `{v}`")
    names = [s.name for s in cfg.eval.sets]
    for s in cfg.eval.sets:
        _check(names.count(s.name) == 1, where, f"[[eval.sets]] name `{s.name}` is used twice")
