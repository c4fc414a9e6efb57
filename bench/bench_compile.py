"""Compile latency, and compiling against fitting a LoRA by gradient descent.

    python -m bench.bench_compile [--threads 1] [--train-steps 150] [--fit-skills 3] [--skip-step-cost]

Part 1: adapters for the real shapes of Qwen2.5-0.5B and Qwen2.5-7B (configs written from
their published dimensions, models built on the meta device), q_proj and v_proj at rank 8:
time to encode the skill, run the hypernetwork, and write the PEFT folder. The timing does not
depend on the weights' values, so a freshly initialised hypernetwork of the default size is used.

Part 2, side by side on a tiny base: a hypernetwork is trained briefly (stage 1) on a generated
skill library; for held-out skills the compiled adapter's reconstruction loss is measured, then
a fresh LoRA of the same rank is fitted to the same text by Adam until it reaches that loss.
The ratio is fitting time over compile time.

Part 3: the cost of one LoRA gradient step on a model of Qwen2.5-0.5B's size (random weights,
since only the cost matters) against one compile for the same shapes.
"""
from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config

from skillgraft.hypernet.compile import Compiler
from skillgraft.hypernet.evaluate import batch_loss, collate, token_loss
from skillgraft.hypernet.hypernetwork import HypernetConfig
from skillgraft.hypernet.objectives import stage1_example
from skillgraft.hypernet.train import TrainConfig, split_heldout, train_stage1

QWEN_05B = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=32768)
QWEN_7B = Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                      num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False, max_position_embeddings=32768)

SKILL = """# flaky-test-triage

Use this when a test fails only sometimes.

## Steps

1. Run the failing test alone ten times: `pytest -x -p no:randomly tests/test_x.py::test_y --count 10`.
2. If it passes alone, run the whole file with `-p randomly` and note the seed that fails.
3. Look for shared state: module-level caches, temp files with fixed names, time.sleep-based waits.
4. Replace sleeps with polling on the condition; give temp files unique names with tmp_path.
5. Re-run with the failing seed until it passes twenty times in a row.

## Pitfalls

Do not mark the test as xfail to make the run green. Do not raise timeouts without a reason.
"""

TOOLS = ["pytest", "ruff", "mypy", "git bisect", "pip", "make", "docker", "sed", "grep", "tox", "black", "coverage"]
ACTS = ["find the failing test", "fix the import order", "pin the dependency", "rerun only failures",
        "bisect the regression", "format the file"]


def _ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def part1(repeats: int) -> None:
    print("== compile latency on published shapes (meta-device bases, q_proj+v_proj, rank 8) ==")
    for name, config in (("Qwen2.5-0.5B", QWEN_05B), ("Qwen2.5-7B", QWEN_7B)):
        compiler = Compiler.load(None, config, config=HypernetConfig(rank=8))
        params = sum(p.numel() for p in compiler.net.parameters())
        enc_ms = _ms(lambda: compiler.encoder.encode([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
        encoded = compiler.encoder.encode([SKILL])

        def net_only():
            with torch.inference_mode():
                compiler.net(encoded)

        net_ms = _ms(net_only, repeats)
        total_ms = _ms(lambda: compiler.compile([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
        with tempfile.TemporaryDirectory() as tmp:
            save_ms = _ms(lambda: compiler.compile_to_dir(SKILL, Path(tmp) / "a"), max(3, repeats // 3))
        print(f"{name:13s} hypernet {params / 1e6:5.1f}M params, {len(compiler.net.spec.modules)} modules | "
              f"encode {enc_ms:6.1f} ms  hypernet {net_ms:6.1f} ms  compile (uncached text) {total_ms:6.1f} ms  "
              f"+ write PEFT folder {save_ms:6.1f} ms")
    print("goal: compile <= 100 ms for the 7B shapes")


def _skills(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tool, act, other = rng.choice(TOOLS), rng.choice(ACTS), rng.choice(TOOLS)
        out.append(f"# {tool} {act}\n\nUse {tool} to {act}. First run `{tool} --help` and read the output.\n\n"
                   f"## Steps\n\n1. Run `{tool}` in the repo root.\n2. If it fails, {act} with {other}.\n3. Run `{tool}` again.\n\n"
                   f"## Pitfalls\n\nDo not call {other} before {tool}. Keep the {tool} output short.\n")
    return out


def _tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def _fit_lora(base_state: dict, config: LlamaConfig, tokens, goal: float, lr: float, max_steps: int) -> tuple[float, int, float]:
    from peft import LoraConfig, get_peft_model

    model = LlamaForCausalLM(config)
    model.load_state_dict(base_state)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    ids, attn, labels = tokens
    start = time.perf_counter()
    loss = float("inf")
    for step in range(1, max_steps + 1):
        total, n = token_loss(model, ids, attn, labels)
        loss = float(total.detach()) / n
        if loss <= goal:
            return time.perf_counter() - start, step - 1, loss
        optim.zero_grad()
        (total / n).backward()
        optim.step()
    return time.perf_counter() - start, max_steps, loss


def part2(train_steps: int, fit_skills: int, max_fit_steps: int) -> float | None:
    """Returns the median number of Adam steps needed to match the compiled adapter."""
    print("\n== compile vs. fitting a LoRA by gradient descent (tiny Llama, rank 8, q_proj+v_proj) ==")
    skills = _skills(40)
    tok = _tokenizer(skills)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.15)
    base = LlamaForCausalLM(config).eval()
    state = {k: v.clone() for k, v in base.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        cfg = TrainConfig(steps=train_steps, batch_size=8, lr=3e-3, max_len=160, heldout=0.2, save_every=0,
                          progress=False, hypernet=HypernetConfig(hidden=128, embed_dim=32, rank=8))
        result = train_stage1((base, tok), skills, Path(tmp) / "ckpt", cfg)
        print(f"hypernetwork trained for {train_steps} steps in {time.perf_counter() - t:.0f} s; "
              f"held-out loss: no adapter {result.evaluation['none']:.3f}, compiled {result.evaluation['adapter']:.3f}")
        compiler = Compiler.load(Path(tmp) / "ckpt", base)
    _, held = split_heldout(skills, 0.2, 0)
    rng = random.Random(0)
    ratios, steps_needed = [], []
    for i in held[:fit_skills]:
        text = skills[i]
        example = stage1_example(0, text, "full", tok, 160, rng)
        compile_ms = _ms(lambda: compiler.compile([text + f" <!-- {time.perf_counter()} -->"]), 5)
        with torch.no_grad():
            enc = compiler.encoder.encode([text])
            total, n, _ = batch_loss(base, compiler.net, enc, [example], tok.pad_token_id)
            goal = float(total) / n
        tokens = collate([example.tokens()], tok.pad_token_id)
        best = None
        for lr in (1e-2, 3e-2):
            fit = _fit_lora(state, config, tokens, goal, lr, max_fit_steps)
            if fit[2] <= goal and (best is None or fit[0] < best[0]):
                best = fit + (lr,)
        if best is None:
            print(f"skill {i}: compiled loss {goal:.3f}; gradient descent did not reach it in {max_fit_steps} steps")
            continue
        secs, steps, _, lr = best
        ratio = secs * 1e3 / compile_ms
        ratios.append(ratio)
        steps_needed.append(steps)
        print(f"skill {i}: compiled loss {goal:.3f} in {compile_ms:.1f} ms | Adam (lr {lr}) reached it after "
              f"{steps} steps, {secs * 1e3:.0f} ms | ratio {ratio:.0f}x")
    if ratios:
        print(f"median ratio fitting/compiling: {statistics.median(ratios):.0f}x  (goal >= 1000x)")
    return statistics.median(steps_needed) if steps_needed else None


def part3(fit_steps: float | None, repeats: int) -> None:
    """One LoRA gradient step at the size of Qwen2.5-0.5B (random weights: only the cost matters)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    print("\n== cost of one LoRA gradient step at Qwen2.5-0.5B size vs. one compile ==")
    compiler = Compiler.load(None, QWEN_05B, config=HypernetConfig(rank=8))
    compile_ms = _ms(lambda: compiler.compile([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(QWEN_05B)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ids = torch.randint(0, QWEN_05B.vocab_size, (1, 256))

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        optim.zero_grad()
        loss.backward()
        optim.step()

    step_ms = _ms(step, 2)
    print(f"compile {compile_ms:.0f} ms | one Adam step on a 256-token skill {step_ms:.0f} ms | "
          f"ratio per step {step_ms / compile_ms:.0f}x")
    if fit_steps:
        print(f"at the {fit_steps:.0f} steps the tiny base needed to match the compiled adapter: "
              f"{fit_steps * step_ms / compile_ms:.0f}x (step cost measured here, step count from part 2)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: fair on a shared machine)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--train-steps", type=int, default=150)
    ap.add_argument("--fit-skills", type=int, default=3)
    ap.add_argument("--max-fit-steps", type=int, default=2000)
    ap.add_argument("--skip-fit", action="store_true", help="only part 1")
    ap.add_argument("--skip-step-cost", action="store_true", help="skip part 3 (builds a 0.5B-parameter model, ~2 GB)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    part1(args.repeats)
    if not args.skip_fit:
        steps = part2(args.train_steps, args.fit_skills, args.max_fit_steps)
        if not args.skip_step_cost:
            part3(steps, args.repeats)


if __name__ == "__main__":
    main()
