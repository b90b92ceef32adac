#!/usr/bin/env python3
"""Counts the SASS instructions of each loop in a listing.

Usage: tilejit compile KERNEL ... --emit=sass | python3 scripts/bench/sass_loops.py

A loop is a backward branch; for each one it prints the start and end
addresses, the instructions between them (both sides of any branch inside
it count) and the most frequent opcodes. The loops of the cluster CE+TVD
kernels are listed in order: pass 1's whole steps, its tail's whole tiles,
its partial tile, and so on.
"""
import re
import sys
from collections import Counter

ins = []
for line in sys.stdin:
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))
for addr, text in ins:
    m = re.search(r"BRA(?: !?U?P\d,)?\s+0x([0-9a-f]+)", text)
    if not m or int(m.group(1), 16) >= addr:
        continue
    start = int(m.group(1), 16)
    body = [t for a, t in ins if start <= a <= addr]
    ops = Counter(
        re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body
    )
    top = ", ".join(f"{op} {n}" for op, n in ops.most_common(8))
    print(f"{start:#06x}-{addr:#06x} {len(body):5d}  {top}")
