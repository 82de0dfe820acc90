"""The one TOML config, loaded into typed dataclasses.

Every section and key has a default, so a file holding only `[[data.sources]]` tables is a valid config.
Unknown keys are rejected with the closest valid key suggested, because a typo that silently falls back to a
default is the most expensive kind of config bug: it is found weeks later.
"""
from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError

FORMATS = ("text", "jsonl", "parquet", "html")


@dataclass
class SourceConfig:
    name: str
    domain: str
    path: str  # file, folder or glob, relative to the config file
    format: str | None = None  # text | jsonl | parquet | html; inferred from the extension when absent
    text_field: str = "text"
    weight: float = 1.0  # share of training tokens (normalized over sources)


@dataclass
class DataConfig:
    sources: list[SourceConfig] = field(default_factory=list)
    normalization: str = "NFC"  # Unicode normalization form applied to every document
    min_chars: int = 200  # documents shorter than this carry too little context to learn from
    max_chars: int = 1_000_000  # longer documents are usually dumps or logs, not prose
    val_fraction: float = 0.02  # share of each domain held out for validation, drawn before anything else
    val_max_docs: int = 500  # cap per domain, so validation stays cheap on large corpora
    val_min_docs: int = 2  # a domain with fewer clean documents gets no validation split (reported)
    shard_docs: int = 50_000  # documents per output shard
    seed: int = 1234  # seeds the validation draw; separate from train.seed so a new training seed keeps the split


@dataclass
class TokenizerConfig:
    vocab_size: int = 32768
    sample_chars: int = 200_000_000  # character budget of the training sample
    max_doc_chars: int = 100_000  # cap per document in the sample, so one huge file cannot dominate
    min_frequency: int = 2
    domain_quotas: dict[str, float] = field(default_factory=dict)  # sample share per domain; empty: the source weights
    language_quotas: dict[str, float] = field(default_factory=dict)  # share of the prose sample per language code
    code_domains: list[str] = field(default_factory=lambda: ["code"])  # domains of source code: no language, no tokens/word
    min_language_share: float = 0.02  # languages with less of the held-out prose are not checked as languages of use


@dataclass
class ShardsConfig:
    shard_tokens: int = 268_435_456  # tokens per .bin file; a larger source is split into several
    workers: int = 0  # tokenizer processes; 0 uses every core


@dataclass
class ModelConfig:
    n_layer: int = 12
    d_model: int = 768
    n_head: int = 12
    n_kv_head: int | None = None  # grouped-query attention; None means n_head (plain multi-head)
    seq_len: int = 1024
    mlp: str = "swiglu"  # swiglu | gelu | relu2
    mlp_ratio: float = 4.0  # hidden width / d_model (swiglu uses 2/3 of it so the parameter count matches)
    qk_norm: bool = True
    rope_theta: float = 10000.0
    tie_embeddings: bool = True
    logit_softcap: float = 0.0  # 0 disables; e.g. 15.0 caps logits smoothly (gemma/nanochat)
    dropout: float = 0.0
    init_std: float = 0.02


@dataclass
class TrainConfig:
    max_steps: int = 5000
    batch_size: int = 16  # sequences per micro-batch
    grad_accum: int = 1  # micro-batches per optimizer step
    optimizer: str = "adamw"  # adamw | muon | muonh
    learning_rate: float = 3e-3
    min_lr_ratio: float = 0.1  # final learning rate as a share of the peak
    warmup_steps: int = 100
    schedule: str = "cosine"  # cosine | wsd | constant
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 disables clipping (not recommended)
    precision: str = "auto"  # auto | bf16 | fp16 | fp32; auto picks bf16 where the device supports it
    device: str = "auto"  # auto | cpu | cuda | mps
    compile: bool = False
    seed: int = 1337
    checkpoint_every: int = 500  # steps; a checkpoint is also written at the end
    keep_last: int = 3  # checkpoints kept on disk
    eval_every: int = 500
    log_every: int = 10
    threads: int = 0  # CPU threads for torch; 0 uses every core


@dataclass
class EvalConfig:
    max_batches: int = 20  # validation batches per domain
    prompts: list[str] = field(default_factory=list)  # empty: one prompt per domain, taken from validation docs
    max_new_tokens: int = 64
    temperature: float = 0.8
    top_k: int = 50


@dataclass
class RunConfig:
    workdir: str = "run"  # where every stage writes, relative to the config file


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    shards: ShardsConfig = field(default_factory=ShardsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
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

    def to_dict(self) -> dict[str, Any]:
        return {f.name: self.section(f.name) for f in dataclasses.fields(self) if f.name != "path"}


def load_config(path: str | Path) -> Config:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file {path} not found (create one with `scratchlm init DIR`)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    cfg = config_from_dict(raw, where=str(path))
    cfg.path = path.resolve()
    validate(cfg, str(path))
    return cfg


def config_from_dict(raw: dict[str, Any], where: str = "config") -> Config:
    return _build(Config, raw, where, section="")


def _build(cls: type, raw: Any, where: str, section: str):
    label = f"[{section}]" if section else "the top level"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: {label} must be a table")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if not (cls is Config and f.name == "path")]
    kwargs = {}
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


def validate(cfg: Config, where: str) -> None:
    d, m, t, k = cfg.data, cfg.model, cfg.train, cfg.tokenizer
    _check(bool(d.sources), where, "no [[data.sources]] given; add at least one source table")
    names = [s.name for s in d.sources]
    _check(len(set(names)) == len(names), where, f"source names must be unique, got {names}")
    for s in d.sources:
        _check(s.format is None or s.format in FORMATS, where,
               f"source `{s.name}`: format must be one of {', '.join(FORMATS)}, got `{s.format}`")
        _check(s.weight > 0, where, f"source `{s.name}`: weight must be > 0")
    _check(0 <= d.val_fraction < 0.5, where, "`data.val_fraction` must be in [0, 0.5)")
    _check(m.d_model % m.n_head == 0, where,
           f"`model.d_model` ({m.d_model}) must be divisible by `model.n_head` ({m.n_head})")
    _check((m.d_model // m.n_head) % 2 == 0, where, "`model.d_model / model.n_head` must be even for RoPE")
    kv = m.n_kv_head or m.n_head
    _check(m.n_head % kv == 0, where, f"`model.n_head` ({m.n_head}) must be divisible by `model.n_kv_head` ({kv})")
    _check(m.mlp in ("swiglu", "gelu", "relu2"), where, f"`model.mlp` must be swiglu, gelu or relu2, got `{m.mlp}`")
    _check(k.vocab_size >= 256 + 16, where, "`tokenizer.vocab_size` must be at least 272 (256 bytes + special tokens)")
    for key in ("domain_quotas", "language_quotas"):
        for name, share in getattr(k, key).items():
            _check(share >= 0, where, f"`tokenizer.{key}.{name}` must be >= 0, got {share}")
    _check(cfg.shards.shard_tokens > 0, where, "`shards.shard_tokens` must be > 0")
    _check(t.optimizer in ("adamw", "muon", "muonh"), where, f"`train.optimizer` must be adamw, muon or muonh")
    _check(t.schedule in ("cosine", "wsd", "constant"), where, "`train.schedule` must be cosine, wsd or constant")
    _check(t.precision in ("auto", "bf16", "fp16", "fp32"), where, "`train.precision` must be auto, bf16, fp16 or fp32")
    _check(t.device in ("auto", "cpu", "cuda", "mps"), where, "`train.device` must be auto, cpu, cuda or mps")
    for key in ("max_steps", "batch_size", "grad_accum", "checkpoint_every", "eval_every", "log_every", "keep_last"):
        _check(getattr(t, key) > 0, where, f"`train.{key}` must be > 0")
    _check(t.learning_rate > 0, where, "`train.learning_rate` must be > 0")
