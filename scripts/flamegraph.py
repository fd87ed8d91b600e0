#!/usr/bin/env python3
"""A flame graph from `perf script` output, as one self-contained SVG.

Reads `perf script` text on stdin (samples recorded with `perf record -g`),
folds each sample's stack (root first, the thread's name as the root frame),
and draws every frame as a box as wide as its share of samples; hovering a
box shows its name, samples and share. Names are shortened: Rust hashes and
generic arguments dropped. Used by scripts/profile.sh.

    perf script | scripts/flamegraph.py --title "..." > out.svg
"""
import argparse
import html
import re
import sys
from collections import defaultdict

HASH = re.compile(r"::h[0-9a-f]{16}$")
OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def short(name):
    name = OFFSET.sub("", name)
    name = HASH.sub("", name)
    # Drop generic arguments, keeping the path readable.
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1 and out and out[-1] != ":":
                out.append("<..>")
            continue
        if ch == ">":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out).replace("<..>", "") or name
    return s[:160]


def fold(lines):
    stacks = defaultdict(int)
    comm, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                stacks[tuple([comm] + frames[::-1])] += 1
            comm, frames = None, []
            continue
        if not line[0].isspace():
            comm = line.split()[0] if line.split() else "?"
            # Thread names may contain spaces; perf prints "name pid ...".
            m = re.match(r"^(.*?)\s+\d+(/\d+)?\s", line)
            if m:
                comm = m.group(1).strip()
            frames = []
            continue
        parts = line.strip().split(" ", 1)
        sym = parts[1] if len(parts) > 1 else parts[0]
        sym = re.sub(r"\s+\([^)]*\)$", "", sym).strip()
        if sym == "[unknown]":
            continue
        frames.append(short(sym))
    if comm is not None:
        stacks[tuple([comm] + frames[::-1])] += 1
    return stacks


def tree(stacks):
    root = {"n": "all", "v": 0, "c": {}}
    for stack, count in stacks.items():
        root["v"] += count
        node = root
        for f in stack:
            node = node["c"].setdefault(f, {"n": f, "v": 0, "c": {}})
            node["v"] += count
    return root


def colour(name):
    h = sum(ord(c) for c in name)
    if "[k]" in name or name.startswith(("__", "do_", "sys_", "entry_")):
        return f"rgb({200 + h % 55},{120 + h % 60},{60 + h % 40})"
    return f"rgb({220 + h % 35},{90 + h % 110},{40 + h % 40})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--width", type=int, default=1800)
    args = ap.parse_args()
    root = tree(fold(sys.stdin))
    total = max(root["v"], 1)
    W, H, top = args.width, 16, 40
    boxes, maxdepth = [], 0

    def walk(node, x, depth):
        nonlocal maxdepth
        maxdepth = max(maxdepth, depth)
        w = node["v"] / total * (W - 20)
        if w < 0.3:
            return
        boxes.append((x, depth, w, node))
        cx = x
        for child in sorted(node["c"].values(), key=lambda c: c["n"]):
            walk(child, cx, depth + 1)
            cx += child["v"] / total * (W - 20)

    walk(root, 10, 0)
    height = top + (maxdepth + 2) * H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="100%" height="100%" fill="#fdfdf6"/>',
        f'<text x="{W/2}" y="20" text-anchor="middle" font-size="15">'
        f"{html.escape(args.title)} ({total} samples)</text>",
    ]
    for x, depth, w, node in boxes:
        y = height - (depth + 1) * H - 4
        pct = node["v"] * 100.0 / total
        label = html.escape(node["n"])
        out.append(
            f'<g><title>{label} ({node["v"]} samples, {pct:.2f}%)</title>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{H - 1}" '
            f'fill="{colour(node["n"])}" rx="2"/>'
        )
        chars = int(w / 6.6)
        if chars >= 3:
            text = node["n"] if len(node["n"]) <= chars else node["n"][: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.1f}" y="{y + 11}">{html.escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
