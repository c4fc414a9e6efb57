"""SkillWorld table on held-out seeds: the expert, the untuned base, and the default model under
none / context / parametric / both, for seen and skill-only families.

    python -m bench.bench_world --episodes 12 --groups seen          # 108 episodes per cell
    python -m bench.bench_world --episodes 25 --groups skill-only    # 100 episodes per cell

Episodes per cell = --episodes per family x families in the group. The base the policy was
trained on (SmolLM2-135M-Instruct, no adapter) is the side-by-side baseline; each cell also
prints its ratio to the default model's "none" cell of the same group.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.ray_option import add_ray_option, ray_runner
from skillgraft.agent.episodes import ThreadModels
from skillgraft.agent.unstick import Unstick
from skillgraft.skillworld.evaluate import cells, run_eval, world_compiler
from skillgraft.skillworld.families import GROUPS, resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100, help="held-out episodes per family and cell")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policy", type=Path, default=None, help="policy model folder (default: the bundled skillworld model)")
    ap.add_argument("--hypernet", type=Path, default=None, help="hypernetwork checkpoint (default: the bundled one)")
    ap.add_argument("--no-memory", action="store_true",
                    help="compile with the hypernetwork alone, without its command memory (the ablation)")
    ap.add_argument("--models-dir", type=Path, default=None, help="default: HOME/models (SKILLGRAFT_HOME or ~/.skillgraft)")
    ap.add_argument("--no-parametric", action="store_true", help="skip the parametric and both cells")
    ap.add_argument("--rows", default="expert,base,none,context,parametric,both")
    ap.add_argument("--groups", default="seen,skill-only",
                    help="family groups to run, or single families, comma-separated; the skill-only group has 4 families, "
                         "so 25 episodes each make 100 per cell")
    ap.add_argument("--max-new-tokens", type=int, default=128,
                    help="reply budget per turn (the expert's longest reply is under 80 tokens)")
    ap.add_argument("--unstick", action="store_true",
                    help="go back and draw again where a run repeats a command or writes no command, as skillgraft run "
                         "does (agent.unstick); without it every reply is taken as it comes")
    ap.add_argument("--out", type=Path, default=None, help="also write the cells and every episode as JSON lines here")
    add_ray_option(ap)  # the expert's episodes run here either way
    args = ap.parse_args()

    from skillgraft.agent.models.bases import ensure_base
    from skillgraft.agent.models.factory import make_model
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.expert import ExpertModel
    from skillgraft.skillworld.recipe import BASE

    console = Console(width=120)
    models_dir = args.models_dir or load_settings().models
    policy = args.policy or ensure_policy(models_dir)
    rows = args.rows.split(",")
    if args.no_parametric:
        rows = [r for r in rows if r not in ("parametric", "both")]
    compiler = None
    if any(r in ("parametric", "both") for r in rows):
        hypernet = args.hypernet or ensure_hypernet(models_dir)
        compiler = world_compiler(hypernet, policy)
        if args.no_memory:
            compiler = compiler.beside_text()

    runners: dict[Path, Any] = {}  # on a cluster: one set of workers per model folder

    def hf(folder: Path):
        make = partial(make_model, f"hf:{folder}", max_new_tokens=args.max_new_tokens)
        if folder not in runners:
            runners[folder] = ray_runner(args.ray, make, args.workers)
        return ThreadModels(make), runners[folder]

    plan = {"expert": ((ExpertModel, None), "none")}
    for row, cond in (("base", "none"), ("none", "none"), ("context", "context"), ("parametric", "parametric"),
                      ("both", "both")):
        if row in rows:
            plan[row] = (hf(ensure_base(BASE, models_dir) if row == "base" else policy), cond)
    table: dict[tuple[str, str], object] = {}
    for row in rows:
        (factory, runner), cond = plan[row]
        for group in args.groups.split(","):
            fams = resolve([group])
            started = time.monotonic()
            with Progress(console=console, transient=True) as bar:
                job = bar.add_task(f"{row} · {group}", total=args.episodes * len(fams))
                results = run_eval(factory, cond, fams, args.episodes, workers=args.workers, compiler=compiler,
                                   on_result=lambda _r: bar.advance(job), runner=runner,
                                   unstick=Unstick() if args.unstick else None)
            cell = [c for c in cells(results, "group" if group in GROUPS else "family") if c.name == group][0]
            table[(row, group)] = cell
            lo, hi = cell.interval
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps({"row": row, "group": group, "successes": cell.successes, "episodes": cell.episodes,
                                         "rate": cell.rate, "ci95": [lo, hi], "mean_steps": cell.mean_steps,
                                         "seconds": round(time.monotonic() - started),
                                         "by_family": {c.name: [c.successes, c.episodes] for c in cells(results, "family")},
                                         "results": [asdict(r) for r in results]}) + "\n")
            console.print(f"{row:>10} {group:>10}: {cell.successes}/{cell.episodes} = {cell.rate:.1%} "
                          f"[{lo:.1%}, {hi:.1%}] mean steps {cell.mean_steps:.2f} ({time.monotonic() - started:.0f} s)")
    view = Table(title=f"SkillWorld, held-out seeds, {args.episodes} episodes per family per cell")
    for col in ("row", "group", "success", "95% CI", "episodes", "mean steps", "÷ skillworld none"):
        view.add_column(col)
    for (row, group), cell in table.items():
        base = table.get(("none", group))
        ratio = f"{cell.rate / base.rate:.2f}" if base is not None and base.rate else "n/a"
        lo, hi = cell.interval
        view.add_row(row if row in ("expert", "base") else f"skillworld · {row}", group, f"{cell.rate:.1%}",
                     f"{lo:.1%}–{hi:.1%}", str(cell.episodes), f"{cell.mean_steps:.2f}", ratio)
    console.print(view)


if __name__ == "__main__":
    main()
