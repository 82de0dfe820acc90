"""Optional metric sinks beside metrics.jsonl: TensorBoard when installed, Weights & Biases when configured.

Neither is a dependency and neither reaches the network by default: TensorBoard writes local event files,
W&B is off unless `monitor.wandb_project` is set, and then runs offline unless `monitor.wandb_mode = "online"`.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import UserError
from ..progress import log


def flatten(row: dict, prefix: str = "") -> dict[str, float]:
    """Nested metrics as `a/b/c` scalars; strings and lists are not plotted."""
    out = {}
    for k, v in row.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
            out[key] = float(v)
    return out


class TensorBoardSink:
    def __init__(self, log_dir: Path, start_step: int, writer_cls=None):
        if writer_cls is None:
            writer_cls = importlib.import_module("torch.utils.tensorboard").SummaryWriter
        # purge_step drops events a crashed run wrote after the checkpoint we resume from.
        self.writer = writer_cls(log_dir=str(log_dir), purge_step=start_step or None)

    def publish(self, step: int, scalars: dict[str, float]) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, project: str, mode: str, run_dir: Path, config: dict, wandb_module=None):
        wandb = wandb_module or importlib.import_module("wandb")
        self.run = wandb.init(project=project, mode=mode, dir=str(run_dir), config=config)

    def publish(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


def open_sinks(cfg, out: Path, start_step: int) -> list:
    m = cfg.monitor
    sinks = []
    if m.tensorboard:
        try:
            sinks.append(TensorBoardSink(out / "tensorboard", start_step))
        except ImportError:
            log("monitor: tensorboard is not installed; metrics go to metrics.jsonl only "
                "(pip install tensorboard to get event files)")
    if m.wandb_project:
        try:
            sinks.append(WandbSink(m.wandb_project, m.wandb_mode, out, cfg.to_dict()))
        except ImportError:
            raise UserError(f"`monitor.wandb_project` is set to {m.wandb_project!r} but wandb is not installed: "
                            f"pip install wandb, or remove the key") from None
    return sinks
