#!/usr/bin/env python3
"""An interleaved comparison of one U-Net training step (Adam) on the CPU: halfgrad's
segbench (fp32, amp, bf16) against PyTorch 2.x (channels_last, fp32 and bf16 autocast)
with the same architecture, batch, image size and thread count. A benchmark only:
PyTorch is installed outside the repository, e.g.
    python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy
    /work/venv-torch/bin/python bench/torch_compare.py --segbench build-cpu/bench/segbench
Rounds alternate the programs so machine load affects all of them alike; each cell is the
median over rounds of each run's median step time."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CONFIGS = [(8, 16, 64), (16, 8, 64), (32, 8, 128)]  # (width, batch, size)


def halfgrad_step_ms(segbench, width, batch, size, steps, threads, modes):
    """Median step time (ms) per precision from one segbench run's report.json."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [segbench, "--device", "cpu", "--precision", ",".join(modes), "--steps", str(steps),
               "--batch", str(batch), "--size", str(size), "--width", str(width), "--threads", str(threads),
               "--eval-every", "0", "--monitor-every", "0", "--val-images", "16", "--no-progress", "--out", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    return {r["precision"]: r["timing_ms"]["step"]["median"] for r in report["runs"]}


def torch_unet(torch, width, depth=4, classes=4):
    nn = torch.nn

    def double_conv(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            c = [width * 2 ** i for i in range(depth + 1)]
            self.inc = double_conv(1, c[0])
            self.downs = nn.ModuleList(double_conv(c[i - 1], c[i]) for i in range(1, depth + 1))
            self.ups = nn.ModuleList(nn.ConvTranspose2d(c[i], c[i - 1], 2, stride=2) for i in range(depth, 0, -1))
            self.upconvs = nn.ModuleList(double_conv(2 * c[i - 1], c[i - 1]) for i in range(depth, 0, -1))
            self.outc = nn.Conv2d(c[0], classes, 1)

        def forward(self, x):
            skips = [self.inc(x)]
            for d in self.downs:
                skips.append(d(nn.functional.max_pool2d(skips[-1], 2)))
            y = skips.pop()
            for up, conv in zip(self.ups, self.upconvs):
                y = conv(torch.cat([skips.pop(), up(y)], dim=1))
            return self.outc(y)

    return UNet()


def torch_step_ms(torch, width, batch, size, steps, bf16):
    """Median step time (ms): forward, cross-entropy + soft Dice, backward, Adam."""
    torch.manual_seed(0)
    model = torch_unet(torch, width).to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, size, size).to(memory_format=torch.channels_last)
    target = torch.randint(0, 4, (batch, size, size))
    onehot = torch.nn.functional.one_hot(target, 4).permute(0, 3, 1, 2).float()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        logits = logits.float()
        p = logits.softmax(1)
        inter = (p * onehot).sum((0, 2, 3))
        dice = (2 * inter + 1) / (p.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + 1)
        loss = torch.nn.functional.cross_entropy(logits, target) + 1 - dice[1:].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[3:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segbench", default="build-cpu/bench/segbench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20, help="steps per run (the first 3 of PyTorch's are warm-up)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="all", help="'all' or e.g. 8x16x64,16x8x64 (width x batch x size)")
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    configs = CONFIGS if args.configs == "all" else [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    cells = {}
    for rnd in range(args.rounds):
        for (w, b, s) in configs:
            for mode, ms in halfgrad_step_ms(args.segbench, w, b, s, args.steps, args.threads, ["fp32", "amp", "bf16"]).items():
                cells.setdefault((w, b, s, "halfgrad " + mode), []).append(ms)
            for bf16 in (False, True):
                name = "torch " + ("bf16" if bf16 else "fp32")
                cells.setdefault((w, b, s, name), []).append(torch_step_ms(torch, w, b, s, args.steps, bf16))
            print(f"round {rnd + 1}/{args.rounds} w{w} b{b} {s}x{s} done", file=sys.stderr, flush=True)
    cols = ["halfgrad fp32", "halfgrad amp", "halfgrad bf16", "torch fp32", "torch bf16"]
    print(f"PyTorch {torch.__version__}, {args.threads} threads, median ms per training step (Adam), channels_last")
    print("| config | " + " | ".join(cols) + " | hg fp32 / torch fp32 | hg bf16 / hg fp32 |")
    print("|---" * (len(cols) + 3) + "|")
    table = []
    for (w, b, s) in configs:
        med = {c: statistics.median(cells[(w, b, s, c)]) for c in cols}
        table.append({"width": w, "batch": b, "size": s, **med})
        print(f"| w{w} b{b} {s}x{s} | " + " | ".join(f"{med[c]:.1f}" for c in cols) +
              f" | {med['halfgrad fp32'] / med['torch fp32']:.2f} | {med['halfgrad bf16'] / med['halfgrad fp32']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
