"""Plots the loss curves scripts/bench/train_lm.py wrote: the language-model
runs (PyTorch's cross-entropy vs tilejit's fused linear CE) and the
distillation runs side by side, and prints how far each pair is apart.

    python3 scripts/bench/plot_training.py train.json docs/training.png
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"ce": "PyTorch cross_entropy (f32 logits)",
          "tilejit": "tilejit FusedLinearCrossEntropyLoss",
          "distill": "tilejit fused_ce_tvd",
          "distill-torch": "PyTorch CE + TVD (f32)",
          "ce-noise": "PyTorch, GEMMs reducing otherwise (bf16 noise)",
          "distill-torch-noise": "PyTorch, GEMMs reducing otherwise (bf16 noise)"}
PAIRS = (("ce", "tilejit", "ce-noise"),
         ("distill-torch", "distill", "distill-torch-noise"))


def main(path, png):
    result = json.load(open(path))
    runs = {r["run"]: r for r in result["runs"]}
    cfg = result["config"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, names, title in zip(axes, PAIRS, (
            "language model: cross-entropy",
            "distillation from the trained model: CE + TVD")):
        for name, style in zip(names, ("-", "-", ":")):
            if name in runs:
                r = runs[name]
                ax.plot(r["loss"], style, label=f"{LABELS[name]}: "
                        f"{r['step_ms']:.1f} ms/step, {r['peak_GiB']:.1f} GiB",
                        linewidth=1, color=None if style == "-" else "grey")
        base = runs.get(names[0])
        for other in names[1:]:
            if base and other in runs:
                b = runs[other]["loss"]
                diff = [abs(x - y) for x, y in zip(base["loss"], b)]
                print(f"{names[0]} vs {other}: max |diff| {max(diff):.4f}, "
                      f"mean {statistics.mean(diff):.4f}, last "
                      f"{base['loss'][-1]:.4f} vs {b[-1]:.4f}")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{result['gpu']}: Llama, {cfg['layers']} layers, hidden "
                 f"{cfg['hidden']}, V = {cfg['vocab']}, {cfg['batch']} x "
                 f"{cfg['seq']} tokens per step, bf16, AdamW lr {cfg['lr']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    for r in result["runs"]:
        print(f"{r['run']}: {r['step_ms']:.2f} ms/step, "
              f"{r['peak_GiB']:.2f} GiB peak, loss {r['loss'][0]:.3f} -> "
              f"{r['loss'][-1]:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
