"""Checks the op profile of a segbench report folder run with --profile-ops (CI): the
section in report.md with a diagnosis per mode, and a valid Chrome trace per mode."""
import json
import os
import sys

folder = sys.argv[1]
md = open(os.path.join(folder, "report.md")).read()
assert "## Op profile" in md, "report.md has no Op profile section"
section = md.split("## Op profile", 1)[1].split("\n## ", 1)[0]
report = json.load(open(os.path.join(folder, "report.json")))
modes = [r["precision"] for r in report["runs"]]
for mode in modes:
    assert f"### {mode} (trace: trace_{mode}.json)" in section, f"no op profile for {mode}"
    trace = json.load(open(os.path.join(folder, f"trace_{mode}.json")))
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 for e in spans), mode
    tids = {e["tid"] for e in spans if e.get("cat") == "op"}
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(tids) >= 2 and tids <= named, f"{mode}: forward and backward tracks {tids}, named {named}"
    assert any(e["ph"] == "C" for e in events), f"{mode}: no memory counter"
if "fp32" in modes and "amp" in modes:
    assert "amp's ops took" in section and "against fp32's" in section, "no amp-vs-fp32 diagnosis"
print(f"op profile ok: {', '.join(modes)}")
