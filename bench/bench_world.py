"""SkillWorld table on held-out seeds: expert, untrained policy, and the trained policy under
none / context / parametric / both, for seen and skill-only families.

    python -m bench.bench_world --episodes 100 --workers 2
    python -m bench.bench_world --episodes 25 --groups skill-only --rows none,context,parametric,both

Episodes per cell = --episodes per family x families in the group. The untrained policy (same
architecture and tokenizer, random weights) is the side-by-side baseline; each cell also prints
its ratio to the trained policy's "none" cell of the same group.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillworld.evaluate import AdapterCache, ThreadModels, cells, run_eval
from skillworld.families import GROUPS


def untrained_copy(policy: Path, out: Path, seed: int = 0) -> Path:
    """The policy's architecture and tokenizer with fresh random weights."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(AutoConfig.from_pretrained(policy))
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(policy).save_pretrained(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100, help="held-out episodes per family and cell")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policy", type=Path, default=None, help="policy folder (default: the bundled skillworld-tiny)")
    ap.add_argument("--hypernet", type=Path, default=None, help="hypernetwork checkpoint (default: the bundled one)")
    ap.add_argument("--models-dir", type=Path, default=Path.home() / ".skillgraft" / "models")
    ap.add_argument("--no-parametric", action="store_true", help="skip the parametric and both cells")
    ap.add_argument("--rows", default="expert,untrained,none,context,parametric,both")
    ap.add_argument("--groups", default="seen,skill-only",
                    help="family groups to run; the skill-only group has 4 families, so 25 episodes each make 100 per cell")
    args = ap.parse_args()

    from agent.models.factory import make_model
    from skillworld.default_model import ensure_hypernet, ensure_policy
    from skillworld.expert import ExpertModel

    console = Console()
    policy = args.policy or ensure_policy(args.models_dir)
    rows = args.rows.split(",")
    if args.no_parametric:
        rows = [r for r in rows if r not in ("parametric", "both")]
    adapters = None
    if any(r in ("parametric", "both") for r in rows):
        hypernet = args.hypernet or ensure_hypernet(args.models_dir)
        adapters = AdapterCache(hypernet, policy)
    scratch = Path(tempfile.mkdtemp(prefix="bench-world-"))
    untrained = untrained_copy(policy, scratch / "untrained")

    def hf(folder: Path):
        return ThreadModels(lambda: make_model(f"hf:{folder}"))

    plan = {"expert": (ExpertModel, "none"), "untrained": (hf(untrained), "none")}
    for cond in ("none", "context", "parametric", "both"):
        plan[cond] = (hf(policy), cond)
    table: dict[tuple[str, str], object] = {}
    for row in rows:
        factory, cond = plan[row]
        for group in args.groups.split(","):
            fams = GROUPS[group]
            started = time.monotonic()
            results = run_eval(factory, cond, fams, args.episodes, workers=args.workers, adapters=adapters)
            cell = [c for c in cells(results, "group") if c.name == group][0]
            table[(row, group)] = cell
            lo, hi = cell.interval
            console.print(f"{row:>10} {group:>10}: {cell.successes}/{cell.episodes} = {cell.rate:.1%} "
                          f"[{lo:.1%}, {hi:.1%}] mean steps {cell.mean_steps:.2f} ({time.monotonic() - started:.0f} s)")
    view = Table(title=f"SkillWorld, held-out seeds, {args.episodes} episodes per family per cell")
    for col in ("row", "group", "success", "95% CI", "episodes", "mean steps", "÷ trained none"):
        view.add_column(col)
    for (row, group), cell in table.items():
        base = table.get(("none", group))
        ratio = f"{cell.rate / base.rate:.2f}" if base is not None and base.rate else "n/a"
        lo, hi = cell.interval
        view.add_row(row if row in ("expert", "untrained") else f"trained · {row}", group, f"{cell.rate:.1%}",
                     f"{lo:.1%}–{hi:.1%}", str(cell.episodes), f"{cell.mean_steps:.2f}", ratio)
    console.print(view)


if __name__ == "__main__":
    main()
