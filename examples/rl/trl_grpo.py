"""TRL's GRPO trainer with kiln's check as the reward: the wiring, for a couple of steps.

A real run trains on a `kiln curriculum` export (its `grpo` config has a `prompt` column, the
Coder's messages, and a `problem` column, the module kiln checks the completion against):

    pip install 'kernelkiln[rl]'
    python examples/rl/trl_grpo.py --export runs/curriculum/export --model Qwen/Qwen2.5-Coder-7B-Instruct \
        --device cuda --steps 100 --generations 8

The CPU proof (what the tests run): a randomly initialised two-layer model with a character-level
tokenizer built here, so nothing is downloaded; its completions are noise, so every reward is 0
(kiln's check records each as a compile error), and the point is that TRL calls kiln's reward,
batch by batch, and steps:

    python examples/rl/trl_grpo.py --tiny --problems tests/fixtures/problems/relu.py --steps 2
"""

from __future__ import annotations

import argparse
import collections
import json
import string
from pathlib import Path

from kiln.rewards import KilnReward
from kiln.tools.records import CheckOptions

CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def tiny_model_and_tokenizer():  # noqa: ANN201 - transformers types
    """A character-level tokenizer and a 2-layer Llama with random weights: no download."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(specials + list(dict.fromkeys(string.printable)))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")
    tokenizer.chat_template = CHAT_TEMPLATE
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                      pad_token_id=0, bos_token_id=2, eos_token_id=3)
    return LlamaForCausalLM(cfg), tokenizer


def dataset(args: argparse.Namespace):  # noqa: ANN201 - datasets.Dataset
    """The export's grpo rows, or one row per problem file (with a short prompt for the tiny model)."""
    import datasets

    if args.export:
        ds = datasets.load_dataset(str(args.export), "grpo", split="train")
        return ds.select_columns(["prompt", "problem"])
    rows = [{"prompt": [{"role": "user", "content": f"Write ModelNew in Triton for:\n{Path(p).read_text()}"}],
             "problem": Path(p).read_text()} for p in args.problems]
    return datasets.Dataset.from_list(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--export", type=Path, help="a kiln curriculum export folder")
    src.add_argument("--problems", type=Path, nargs="+", help="KernelBench-format problem files")
    ap.add_argument("--model", help="a Hugging Face model name or path")
    ap.add_argument("--tiny", action="store_true", help="a random tiny model on CPU (no download)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--generations", type=int, default=2, help="completions per prompt (the GRPO group)")
    ap.add_argument("--max-completion", type=int, default=24)
    ap.add_argument("--device", default="cpu", help="where kiln checks: cpu, cuda, auto")
    ap.add_argument("--out", type=Path, default=Path("runs/trl_grpo"))
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    if args.tiny:
        model, tokenizer = tiny_model_and_tokenizer()
    elif args.model:
        model, tokenizer = AutoModelForCausalLM.from_pretrained(args.model), AutoTokenizer.from_pretrained(args.model)
    else:
        ap.error("give --model NAME or --tiny")
    reward = KilnReward(device=args.device, options=CheckOptions(trials=2), cache=args.out / "checks.sqlite")
    statuses: collections.Counter[str] = collections.Counter()

    def kiln_reward(prompts, completions, **kwargs):  # noqa: ANN001, ANN202 - TRL's reward_funcs signature
        out = reward(prompts=prompts, completions=completions, **kwargs)
        statuses.update(r.status for r in reward.records)
        return out

    cfg = GRPOConfig(output_dir=str(args.out), max_steps=args.steps, per_device_train_batch_size=args.generations,
                     num_generations=args.generations, max_completion_length=args.max_completion,
                     learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to="none",
                     use_cpu=args.device == "cpu" or args.tiny, bf16=False)
    trainer = GRPOTrainer(model=model, reward_funcs=[kiln_reward], args=cfg, train_dataset=dataset(args),
                          processing_class=tokenizer)
    trainer.train()
    print(json.dumps({"steps": trainer.state.global_step, "completions_checked": sum(statuses.values()),
                      "statuses": dict(statuses)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
