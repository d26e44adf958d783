"""Checks a segbench report folder as CI does: every file written, the JSON well formed,
amp within tolerance of fp32, a diagnosis for the naive fp16 run, every mode's dtypes, the
ablation ladder complete when it ran, the gradient-exponent figure, and the update/weight
ratios of the first steps (JSON, table, figure)."""
import json
import os
import sys

folder = sys.argv[1]
tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
for name in ["report.json", "report.md", "report.html", "metrics.csv", "samples.png"]:
    path = os.path.join(folder, name)
    assert os.path.isfile(path) and os.path.getsize(path) > 0, f"missing or empty: {name}"
report = json.load(open(os.path.join(folder, "report.json")))
runs = {r["precision"]: r for r in report["runs"]}
for mode in ["fp32", "amp", "fp16"]:
    assert mode in runs, f"no {mode} run in the report"
d32, damp = runs["fp32"]["val_dice_mean_fg"], runs["amp"]["val_dice_mean_fg"]
assert abs(d32 - damp) <= tolerance, f"amp Dice {damp:.3f} differs from fp32 {d32:.3f} by more than {tolerance}"
assert runs["fp16"]["diagnosis"], "the fp16 run has no diagnosis"
for run in report["runs"]:
    d = run["dtypes"]
    assert all(d[k] for k in ["params", "activations", "grads", "optimizer_state"]), f"{run['precision']}: dtypes missing"
ladder = ["amp-noscale", "fp16-f32state", "fp32-sgd", "amp-sgd", "fp16-sgd"]
if any(m in runs for m in ladder):
    missing = [m for m in ladder if m not in runs]
    assert not missing, f"the ablation ladder ran without {missing}"
assert os.path.isfile(os.path.join(folder, "grad_exponents.svg")), "no gradient-exponent figure"
for run in report["runs"]:
    steps = [u["step"] for u in run["updates"]]
    assert steps[:1] == [0], f"{run['precision']}: no update/weight ratio for step 0"
md = open(os.path.join(folder, "report.md")).read()
assert "## Update size over the first steps" in md, "report.md has no update/weight ratio table"
assert os.path.isfile(os.path.join(folder, "update_ratio.svg")), "no update/weight ratio figure"
html = open(os.path.join(folder, "report.html")).read()
assert "<svg" in html and "<script" not in html, "report.html lacks plots or contains scripts"
print(f"report ok: fp32 Dice {d32:.3f}, amp {damp:.3f}; fp16: {runs['fp16']['diagnosis'][:120]}")
