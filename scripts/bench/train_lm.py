"""Trains a small causal LM (transformers' Llama, random weights, nothing
downloaded) on synthetic tokens with each loss, from the same initial
weights and batches, and writes the loss of every step, the median step
time and the peak memory as JSON (plot with scripts/bench/plot_training.py).

Runs, in order:
  ce        logits = lm_head(h) in bf16, F.cross_entropy on them upcast to
            f32 (what transformers' causal-LM loss does);
  tilejit   tilejit.torch.FusedLinearCrossEntropyLoss(lm_head.weight, h, y);
  distill   a student from the same initial weights learns from the model
            `ce` trained (frozen teacher) with tilejit.torch.fused_ce_tvd
            on the student's and teacher's logits;
  distill-torch  the same with CE + TVD written in PyTorch (f32);
  ce-noise, distill-torch-noise  ce and distill-torch again with cuBLAS's
            bf16 GEMMs reducing in another precision (allow_bf16_reduced_
            precision_reduction flipped): the same math rounded otherwise,
            the yardstick of bf16 noise the tilejit curves are read against.

The tokens follow a fixed random Markov chain over a subset of the vocab
(each token has four equally likely successors), so the loss has something
to learn and a floor of ln 4.

    TILEJIT_LIBRARY=... PYTHONPATH=python python3 scripts/bench/train_lm.py \\
        --steps 300 --out train.json
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from tilejit.torch import FusedLinearCrossEntropyLoss, fused_ce_tvd


def batches(steps, batch, seq, vocab, active, seed):
    """steps x (batch, seq + 1) tokens of the Markov chain."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    ids = torch.randperm(vocab, device="cuda", generator=g)[:active]
    succ = torch.randint(0, active, (active, 4), device="cuda", generator=g)
    rows = steps * batch
    state = torch.randint(0, active, (rows,), device="cuda", generator=g)
    out = torch.empty(rows, seq + 1, dtype=torch.int64, device="cuda")
    for i in range(seq + 1):
        out[:, i] = ids[state]
        pick = torch.randint(0, 4, (rows,), device="cuda", generator=g)
        state = succ[state, pick]
    return out.view(steps, batch, seq + 1)


def model_of(args):
    torch.manual_seed(args.seed)
    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                      intermediate_size=4 * args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=16,
                      num_key_value_heads=16, max_position_embeddings=4096,
                      tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)


def hidden_and_labels(model, tokens):
    h = model.model(input_ids=tokens[:, :-1]).last_hidden_state
    return h.reshape(-1, h.size(-1)), tokens[:, 1:].reshape(-1)


def ce_loss(model, tokens, _teacher):
    h, y = hidden_and_labels(model, tokens)
    return F.cross_entropy(model.lm_head(h).float(), y)


_flce = FusedLinearCrossEntropyLoss()


def tilejit_loss(model, tokens, _teacher):
    h, y = hidden_and_labels(model, tokens)
    return _flce(model.lm_head.weight, h, y)


def logits_pair(model, teacher, tokens):
    h, y = hidden_and_labels(model, tokens)
    with torch.no_grad():
        th, _ = hidden_and_labels(teacher, tokens)
        t = teacher.lm_head(th)
    return model.lm_head(h), t, y


def distill_loss(model, tokens, teacher):
    s, t, y = logits_pair(model, teacher, tokens)
    return fused_ce_tvd(s, t, y)


def distill_torch_loss(model, tokens, teacher):
    s, t, y = logits_pair(model, teacher, tokens)
    sf = s.float()
    ce = F.cross_entropy(sf, y)
    tvd = 0.5 * (torch.softmax(sf, -1) - torch.softmax(t.float(), -1)
                 ).abs().sum(-1).mean()
    return ce + tvd


def train(args, name, loss_fn, data, teacher=None):
    matmul = torch.backends.cuda.matmul
    default = matmul.allow_bf16_reduced_precision_reduction
    if name.endswith("-noise"):
        matmul.allow_bf16_reduced_precision_reduction = not default
    try:
        return _train(args, name, loss_fn, data, teacher)
    finally:
        matmul.allow_bf16_reduced_precision_reduction = default


def _train(args, name, loss_fn, data, teacher):
    model = model_of(args)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    losses, times = [], []
    for i in range(args.steps):
        if i == 10:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        loss = loss_fn(model, data[i], teacher)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        stop.record()
        losses.append(loss.detach())
        times.append((start, stop))
    torch.cuda.synchronize()
    ms = [a.elapsed_time(b) for a, b in times[10:]]
    row = {"run": name, "loss": torch.stack(losses).float().tolist(),
           "step_ms": statistics.median(ms),
           "peak_GiB": torch.cuda.max_memory_allocated() / 2**30}
    print(json.dumps({k: v for k, v in row.items() if k != "loss"} |
                     {"first": row["loss"][0], "last": row["loss"][-1]}),
          flush=True)
    return model, row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--active", type=int, default=4096,
                    help="tokens the Markov chain visits")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="ce,ce-noise,tilejit,distill,"
                    "distill-torch,distill-torch-noise")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.time()
    data = batches(args.steps, args.batch, args.seq, args.vocab, args.active,
                   args.seed + 1)
    runs = args.runs.split(",")
    result = {"config": vars(args), "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "runs": []}
    teacher, ce_row = train(args, "ce", ce_loss, data)
    result["runs"].append(ce_row)
    teacher.requires_grad_(False)
    teacher.eval()
    fns = {"ce-noise": ce_loss, "tilejit": tilejit_loss,
           "distill": distill_loss, "distill-torch": distill_torch_loss,
           "distill-torch-noise": distill_torch_loss}
    for name in runs:
        if name == "ce":
            continue
        model, row = train(args, name, fns[name], data, teacher)
        result["runs"].append(row)
        del model
        torch.cuda.empty_cache()
    result["wall_s"] = time.time() - t0
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
