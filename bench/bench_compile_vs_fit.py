"""Compiling a skill against fitting it, side by side on the default model.

    python -m bench.bench_compile_vs_fit [--family wrong_boolean] [--train 6] [--heldout 3]
                                         [--max-steps 40] [--lrs 1e-3,3e-3]

The default model is SmolLM2-135M-Instruct with the SkillWorld policy; its shipped hypernetwork
compiles the family's skill into a LoRA (rank and modules as it was trained: q_proj and v_proj).
The yardstick is the next-token loss on the expert's replies in held-out demonstration episodes
of the family, with no skill text in the prompt: what the adapter must carry. Gradient descent
then fits a fresh PEFT LoRA of the same rank and modules on the family's other episodes (AdamW,
each learning rate given) until its held-out loss is no higher than the compiled adapter's. The
fitting clock counts training steps only, not the held-out checks between them. The ratio is
fitting time over compile time.
"""
from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch


def held_out_loss(model, examples, pad: int) -> float:
    from skillgraft.hypernet.evaluate import token_loss
    from skillgraft.hypernet.fit import collate

    total, count = 0.0, 0
    with torch.inference_mode():
        for example in examples:
            ids, labels, attn = collate([example], pad)
            loss, n = token_loss(model, ids, attn, labels)
            total, count = total + float(loss), count + n
    return total / count


def fit_until(policy: Path, rank: int, targets: list[str], train, heldout, pad: int, goal: float, lr: float,
              max_steps: int) -> tuple[float, int, float]:
    """(training seconds, steps, held-out loss) when the loss first reaches `goal`, or at max_steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from skillgraft.hypernet.evaluate import token_loss
    from skillgraft.hypernet.fit import collate

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(policy),
                           LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0, target_modules=targets))
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    order = random.Random(0)
    seconds, loss = 0.0, held_out_loss(model, heldout, pad)
    for step in range(1, max_steps + 1):
        started = time.perf_counter()
        model.train()
        ids, labels, attn = collate(order.sample(train, 2), pad)
        total, n = token_loss(model, ids, attn, labels)
        optim.zero_grad()
        (total / n).backward()
        optim.step()
        model.eval()
        seconds += time.perf_counter() - started
        loss = held_out_loss(model, heldout, pad)
        if loss <= goal:
            return seconds, step, loss
    return seconds, max_steps, loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="wrong_boolean")
    ap.add_argument("--train", type=int, default=6, help="episodes gradient descent fits on")
    ap.add_argument("--heldout", type=int, default=3, help="episodes the loss is measured on")
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--lrs", default="1e-3,3e-3")
    args = ap.parse_args()
    torch.set_num_threads(2)

    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.hypernet.compile import Compiler
    from skillgraft.settings import load_settings
    from skillgraft.skillworld import library
    from skillgraft.skillworld.dataset import build_episodes
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.generate import HELDOUT_START
    from skillgraft.skillworld.policy.data import conversations
    from skillgraft.hypernet.fit import pad_id
    from skillgraft.skillworld.policy.lora_policy import encode

    models = load_settings().models
    policy, hypernet = ensure_policy(models), ensure_hypernet(models)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    pad = pad_id(tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        records = build_episodes([args.family], args.train + args.heldout, Path(tmp) / "episodes.jsonl",
                                 first_seed=HELDOUT_START + 900)
    examples = [encode(tokenizer, c, 2048) for c in conversations(records, with_skill=False)]
    train, heldout = examples[: args.train], examples[args.train:]
    skill = library.pick(args.family, random.Random(0), 0)
    print(f"{args.family}: {len(train)} episodes to fit on, {len(heldout)} held out "
          f"({sum(sum(m) for _, m in heldout)} scored tokens); skill {skill.name!r}")

    compiler = Compiler.load(hypernet, str(policy))
    compiler.compile([skill.body])  # warm: first-call costs are not the compile's
    times = []
    for i in range(7):  # a fresh text each time, so the encoder's cache does not answer
        started = time.perf_counter()
        compiler.compile([f"{skill.body}\n<!-- {i} -->"])
        times.append(time.perf_counter() - started)
    compile_s = statistics.median(times)
    targets = sorted(compiler.meta.config.target_modules)
    rank = compiler.meta.config.rank

    base = AutoModelForCausalLM.from_pretrained(policy).eval()
    none_loss = held_out_loss(base, heldout, pad)
    with tempfile.TemporaryDirectory() as tmp:
        [delta] = compiler.compile([skill.body])
        folder = compiler.save(delta, Path(tmp) / "adapter")
        compiled = PeftModel.from_pretrained(base, str(folder)).eval()
        goal = held_out_loss(compiled, heldout, pad)
    print(f"held-out loss: no adapter {none_loss:.4f}, compiled adapter {goal:.4f}; "
          f"compile {compile_s * 1e3:.1f} ms (median of 7)")
    if goal >= none_loss:
        print("the compiled adapter does not lower the held-out loss: there is nothing for gradient descent to match")
        return

    best = None
    for lr in (float(x) for x in args.lrs.split(",")):
        seconds, steps, loss = fit_until(policy, rank, targets, train, heldout, pad, goal, lr, args.max_steps)
        reached = loss <= goal
        print(f"gradient descent, lr {lr:g}: {'reached' if reached else 'did not reach'} {goal:.4f} "
              f"after {steps} steps, {seconds:.1f} s of training (held-out loss {loss:.4f})")
        if reached and (best is None or seconds < best[0]):
            best = (seconds, steps, loss, lr)
    if best is None:
        print(f"no learning rate reached the compiled adapter's loss in {args.max_steps} steps: the ratio is at least "
              f"the longest fit over the compile")
        return
    seconds, steps, loss, lr = best
    print(f"compile against fitting: {seconds / compile_s:,.0f}×  (fit {seconds:.1f} s at lr {lr:g}, {steps} steps, "
          f"loss {loss:.4f}; compile {compile_s * 1e3:.1f} ms, loss {goal:.4f}; goal ≥ 1000×)")


if __name__ == "__main__":
    main()
