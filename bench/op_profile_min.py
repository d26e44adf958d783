#!/usr/bin/env python3
"""Per-mode op time of segbench's profiled step, robust to a shared machine: runs segbench
--profile-ops R times (all modes in each run, so load hits them alike) and, op call by op call,
keeps the fastest of the R runs. A preempted thread only ever adds time to a call (on a
loaded 2-core machine one call can take a whole scheduler slice, ~5-8 ms, and then dominates
the step's sum), so the sum of per-call minima estimates the quiet-machine op time.
    bench/op_profile_min.py --segbench build-cpu/bench/segbench --runs 5 --threads 2
Prints each mode's plain op time (median over runs), the sum of per-call minima, and the ops
with the largest minima. --baseline OTHER_SEGBENCH alternates runs of the two programs (a
before/after comparison under the same load) and prints both."""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def top_level_ops(trace_path):
    """The step's top-level op events [(name, dtype, dur_us)] in trace order; an op that runs
    inside another on the same thread (a cast inside a module's op) is counted by its parent."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "op"]
    events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    ops, end_of = [], {}
    for e in events:
        if e["ts"] < end_of.get(e["tid"], -1.0):
            continue
        end_of[e["tid"]] = e["ts"] + e["dur"]
        ops.append((e["name"], e["args"].get("dtype", ""), e["dur"]))
    return ops


def run_segbench(segbench, args, out):
    cmd = [segbench, "--device", "cpu", "--profile", "cpu", "--precision", args.modes, "--steps", "3",
           "--profile-ops", "2", "--val-images", "16", "--eval-every", "0", "--monitor-every", "0",
           "--threads", str(args.threads), "--no-progress", "--out", out] + args.extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--segbench", default="build-cpu/bench/segbench")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default="fp32,amp,bf16")
    p.add_argument("--top", type=int, default=8, help="ops listed per mode")
    p.add_argument("extra", nargs="*", help="more segbench flags, after --")
    p.add_argument("--baseline", help="a second segbench (e.g. main's build), run alternately with --segbench")
    args = p.parse_args()
    programs = [args.segbench] + ([args.baseline] if args.baseline else [])
    modes = args.modes.split(",")
    runs = {prog: {m: [] for m in modes} for prog in programs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for k, prog in enumerate(programs):
                out = os.path.join(tmp, f"{r}_{k}")
                run_segbench(prog, args, out)
                for m in modes:
                    runs[prog][m].append(top_level_ops(os.path.join(out, f"trace_{m}.json")))
    for prog in programs:
        report(prog, runs[prog], modes, args)


def report(prog, runs, modes, args):
    print(f"{prog}: profiled step, {args.threads} thread(s), {args.runs} runs; ms")
    print(f"{'mode':<6} {'op ms (median of runs)':>24} {'sum of per-call minima':>24}")
    per_op = {}
    for m in modes:
        plain = statistics.median(sum(d for _, _, d in ops) for ops in runs[m]) / 1e3
        sequences = {tuple((n, t) for n, t, _ in ops) for ops in runs[m]}
        if len(sequences) != 1:
            sys.exit(f"{m}: the runs dispatched different op sequences; cannot pair calls")
        minima = [min(ops[i][2] for ops in runs[m]) for i in range(len(runs[m][0]))]
        by_name = collections.Counter()
        for (name, dtype, _), d in zip(runs[m][0], minima):
            by_name[f"{name} ({dtype})"] += d / 1e3
        per_op[m] = by_name
        print(f"{m:<6} {plain:>24.1f} {sum(minima) / 1e3:>24.1f}")
    for m in modes:
        print(f"\n{m}: largest ops by per-call minima (ms)")
        for name, ms in per_op[m].most_common(args.top):
            print(f"  {name:<40} {ms:8.2f}")
    print()

if __name__ == "__main__":
    main()
