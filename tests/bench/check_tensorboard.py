"""Reads segbench's TensorBoard event files (<out>/tb/<mode>/) back with the `tensorboard`
package's own event reader and checks them against report.json: every loss, loss scale,
skipped-step count, Dice and gradient-exponent histogram. Skips visibly without the package."""
import glob
import json
import math
import os
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"SKIPPED: the tensorboard package is not importable ({e}); event files not read back")
    sys.exit(0)

folder = sys.argv[1]
report = json.load(open(os.path.join(folder, "report.json")))
checked = 0
for run in report["runs"]:
    mode = run["precision"]
    files = glob.glob(os.path.join(folder, "tb", mode, "events.out.tfevents.*"))
    assert len(files) == 1, f"{mode}: expected one event file, found {files}"
    acc = EventAccumulator(files[0], size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    curves = run["curves"]

    def scalars(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    def close(a, b):  # simple_value is an f32
        return a == b or abs(a - b) <= 1e-6 * max(abs(a), abs(b))

    losses = [(s, l) for s, l in zip(curves["step"], curves["loss"]) if l is not None and math.isfinite(l)]
    got = scalars("train/loss")
    assert [s for s, _ in got] == [s for s, _ in losses], f"{mode}: loss steps differ"
    assert all(close(a, b) for (_, a), (_, b) in zip(got, losses)), f"{mode}: loss values differ"
    assert [v for _, v in scalars("amp/loss_scale")] == curves["scale"], f"{mode}: loss scales differ"
    skipped = scalars("amp/skipped_steps")
    assert skipped[-1][1] == len(run["skipped_steps"]), f"{mode}: skipped-step count differs"
    dice = scalars("val/dice")
    assert [s for s, _ in dice] == curves["eval_step"], f"{mode}: Dice steps differ"
    assert all(close(a, b) for (_, a), b in zip(dice, curves["eval_dice"])), f"{mode}: Dice values differ"
    samples = [u for u in run["underflow"] if u["logits_grad"]["numel"] > 0]
    hists = acc.Histograms("grad/logits_log2") if samples else []
    assert [h.step for h in hists] == [u["step"] for u in samples], f"{mode}: histogram steps differ"
    for h, u in zip(hists, samples):
        g = u["logits_grad"]
        assert list(h.histogram_value.bucket) == [float(c) for c in g["log2_bins"]], f"{mode}: histogram counts differ"
        assert h.histogram_value.num == sum(g["log2_bins"]), f"{mode}: histogram total differs"
    checked += 1
print(f"tensorboard ok: {checked} runs read back with tensorboard's EventAccumulator")
