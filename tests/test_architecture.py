"""The architecture, kept true by a test: imports point only downward through the layers, and no package imports
another that imports it back.

The layers, lowest first, follow the pipeline's order: a stage may use what runs before it, never what runs after.
Every import counts, including those inside functions: a lazy import is still a dependency.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "scratchlm"

LAYERS = (
    # shared helpers that know nothing of the pipeline
    ("base", ("errors", "ids", "md", "progress", "disk", "pool", "rating", "userjsonl", "workdir_lock", "atomic",
              "toml_text", "gpu_peaks", "sampling", "forced", "levels")),
    ("config", ("config", "presets", "executor")),  # the typed config, the model presets it expands, where tasks run
    ("pipeline", ("pipeline", "artifact_files")),  # artifacts: IDs, skipping, manifests; no stage knowledge
    ("data", ("data",)),
    ("decontaminate", ("decontaminate",)),
    ("tokenizer", ("tokenizer",)),
    ("model", ("model",)),
    ("monitor", ("monitor",)),
    ("eval", ("eval",)),
    ("train", ("train",)),
    ("sft", ("sft",)),
    ("export", ("export",)),
    ("plan", ("plan",)),
    ("report", ("report",)),
    # the stage registry and the commands: they know every stage
    ("top", ("stages", "cli", "__main__", "quickstart", "config_template", "config_reference", "experiments")),
)


def _unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: scratchlm.data.clean.quality -> data."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer_of() -> dict[str, int]:
    return {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _imports() -> dict[tuple[str, str], set[str]]:
    """(importing unit, imported unit) -> the modules that import across, for every scratchlm import."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        package = list(rel.parts) if path.name == "__init__.py" else list(rel.parts[:-1])
        if path.name == "__init__.py":
            package = package[:-1]
        module = ".".join(package + ([] if path.name == "__init__.py" else [rel.parts[-1]]))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target == "scratchlm" or target.startswith("scratchlm."):
                    a, b = _unit(module), _unit(target)
                    if a and b and a != b:
                        edges[(a, b)].add(module)
    return edges


def test_every_package_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert sorted(units - set(_layer_of())) == [], "add the new package or module to LAYERS"


def test_imports_point_downward():
    layer = _layer_of()
    upward = [f"{sorted(mods)[0]} imports {b}, a higher layer" for (a, b), mods in sorted(_imports().items())
              if a in layer and b in layer and layer[b] > layer[a]]
    assert upward == []


def test_no_package_cycles():
    edges = _imports()
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    cycles = []
    for a, b in edges:  # an edge a -> b closes a cycle when b reaches a
        seen, stack = set(), [b]
        while stack:
            node = stack.pop()
            if node == a:
                cycles.append(f"{a} -> {b} -> ... -> {a} (from {sorted(edges[(a, b)])[0]})")
                break
            if node not in seen:
                seen.add(node)
                stack.extend(graph[node])
    assert cycles == []
