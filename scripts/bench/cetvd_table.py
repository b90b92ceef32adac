"""Tabulates a CE+TVD shape sweep (scripts/gpu-cetvd-shapes.sh): tilejit's
times, roofline fractions and check verdicts from its logs, beside the peers'
times from peers.jsonl, as a Markdown table.

  python3 scripts/bench/cetvd_table.py --peers peers.jsonl [--peers ...] tilejit.log [...]

A log line either follows a "## BT:V:dtype" header (tilejit.log) or starts
with the shape (the script's summary lines). A reduced run whose bench header
says "in place" fills the in-place column. Where a shape appears twice, the
later file wins.
"""
import argparse
import json
import re

ROW = re.compile(r"^(?:(\d+:\d+:\w+)\s+)?\s*(forward|backward|fwd\+bwd|loss \+ grad)"
                 r"\s+([\d.]+) ms .*fraction ([\d.]+)")
VERDICT = re.compile(r"^(?:(\d+:\d+:\w+)\s+)?\s*(PASS|FAIL)\s*$")
# `tilejit bench`'s header: says whether the reduced run wrote in place.
BENCH = re.compile(r"^fused_ce_tvd bench \(reduction=\w+(, in place)?\)")


def read_tilejit(paths):
    runs = {}
    for path in paths:
        shape, in_place = None, False
        for line in open(path):
            if line.startswith("## "):
                shape, in_place = line[3:].strip(), False
                continue
            m = BENCH.match(line)
            if m:
                in_place = bool(m.group(1))
                continue
            m = ROW.match(line)
            if m:
                s = m.group(1) or shape
                name = m.group(2) + (" in place" if in_place else "")
                runs.setdefault(s, {})[name] = (float(m.group(3)), float(m.group(4)))
                continue
            m = VERDICT.match(line)
            if m:
                s = m.group(1) or shape
                runs.setdefault(s, {}).setdefault("checks", []).append(m.group(2))
    return runs


def read_peers(paths):
    peers = {}
    for path in paths:
        for line in open(path):
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("kind") == "cetvd" and "fwd_bwd_ms" in row:
                key = f"{row['BT']}:{row['V']}:{row['dtype']}"
                peers.setdefault(key, {})[row["provider"]] = row
    return peers


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", action="append", default=[],
                    help="peers.jsonl written by scripts/bench/cetvd_peers.py (repeatable)")
    ap.add_argument("logs", nargs="+",
                    help="tilejit logs of scripts/gpu-cetvd-shapes.sh (tilejit.log)")
    a = ap.parse_args()
    runs, peers = read_tilejit(a.logs), read_peers(a.peers)

    def key(s):
        bt, v, dt = s.split(":")
        return (dt, int(v), int(bt))

    print("| BT | V | dtype | reduced loss+grad ms (fraction) | in place ms (fraction) "
          "| fwd ms (fraction, 2 units) "
          "| bwd ms (fraction) | fwd+bwd ms (fraction) | Liger fwd / fwd+bwd ms "
          "| torch.compile fwd / fwd+bwd ms | tilejit reduced vs Liger | checks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sorted(runs, key=key):
        r, p = runs[s], peers.get(s, {})
        bt, v, dt = s.split(":")

        def cell(name):
            return f"{r[name][0]:.3f} ({r[name][1]:.2f})" if name in r else "-"

        def peer(name):
            if name not in p:
                return "-"
            return f"{p[name]['fwd_ms']:.3f} / {p[name]['fwd_bwd_ms']:.3f}"

        speedup = "-"
        if "liger" in p and "loss + grad" in r:
            speedup = f"{p['liger']['fwd_bwd_ms'] / r['loss + grad'][0]:.2f}x"
        checks = r.get("checks", [])
        verdict = f"{checks.count('PASS')}/{len(checks)} PASS" if checks else "-"
        print(f"| {bt} | {v} | {dt} | {cell('loss + grad')} | "
              f"{cell('loss + grad in place')} | {cell('forward')} | "
              f"{cell('backward')} | {cell('fwd+bwd')} | {peer('liger')} | "
              f"{peer('torch_compile')} | {speedup} | {verdict} |")


if __name__ == "__main__":
    main()
