#!/usr/bin/env python3
"""tests/fleet/compare.py UNSHARDED MERGED SHARDS: the merged summary of SHARDS shards
(`prepost explore merge`) equals the summary of the unsharded run of the same seeds in every
deterministic field, and its JUnit file (MERGED's directory, junit.xml) has the shape CI systems
read. Exit 0 when so, 1 with the differences otherwise."""
import json
import os
import sys
import xml.etree.ElementTree as ET

unsharded, merged, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = json.load(open(unsharded))
m = json.load(open(merged))
bad = []
for key in ("format", "prepost", "mix", "seeds_run", "complete", "totals",
            "failures_per_invariant", "failures", "distinct"):
    if a.get(key) != m.get(key):
        bad.append(f"{key}: unsharded {json.dumps(a.get(key))[:400]}\n"
                   f"   merged {json.dumps(m.get(key))[:400]}")
if a["seeds"]["shards"] != 1 or m["seeds"]["shards"] != shards:
    bad.append(f"shards: {a['seeds']['shards']} / {m['seeds']['shards']}, expected 1 / {shards}")
if sorted(s["shard"] for s in m["shards"]) != list(range(1, shards + 1)):
    bad.append(f"merged shards {[s['shard'] for s in m['shards']]}")
if sum(s["seeds_run"] for s in m["shards"]) != a["seeds_run"] or a["seeds_run"] == 0:
    bad.append("the shards' seeds do not add up to the unsharded run's")
if not a["failures"]:
    bad.append("no failure: pick seeds that fail, so that the failure sets are compared")
d = os.path.dirname(merged)
for f in m["failures"]:
    for name in f["files"]:
        if not os.path.exists(os.path.join(d, name)):
            bad.append(f"failure file {name} not in {d}")
root = ET.parse(os.path.join(d, "junit.xml")).getroot()
suite = root.find("testsuite")
if root.tag != "testsuites" or suite is None or \
        int(suite.get("failures")) != sum(1 for n in m["failures_per_invariant"].values() if n) or \
        len(suite.findall("testcase")) != int(suite.get("tests")):
    bad.append("junit.xml: not the testsuites/testsuite/testcase/failure shape")
if bad:
    print("compare: the merged summary differs from the unsharded run:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"compare: merged summary of {shards} shards == unsharded run "
      f"({a['seeds_run']} seeds, {a['totals']['messages']} messages, "
      f"{len(a['failures'])} failures, {len(a['distinct'])} distinct)")
