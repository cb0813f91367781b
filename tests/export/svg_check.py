#!/usr/bin/python3
"""Checks of `prepost trace export --svg` output (tests/test_export.c runs them).

  svg_check.py labels SVG        each message's label, one per line
  svg_check.py fit SVG           every label fits between its lane and the next (monospace 11 px)
  svg_check.py scale SVG NS      delivered arrows are as long as their time at NS ns per pixel
  svg_check.py shot PNG SVG      a browser's screenshot of SVG shows its lanes and its RNR NAKs
Exit 0 when the check holds; otherwise a line on stderr saying what did not, and exit 1.
"""
import re
import sys
import xml.etree.ElementTree as ET

NS = {"s": "http://www.w3.org/2000/svg"}
CHAR_PX = 6.7  # an 11 px monospace glyph's advance, as the writer assumes


def fail(msg):
    print("svg_check:", msg, file=sys.stderr)
    sys.exit(1)


def load(path):
    root = ET.parse(path).getroot()
    lanes = sorted(float(x.get("x1")) for x in root.findall("s:line", NS)
                   if x.get("class") == "lane")
    msgs = [g for g in root.findall("s:g", NS) if g.get("class", "").startswith("msg")]
    return root, lanes, msgs


def label_of(g):
    """The label of a message's group (the cross of an undelivered one is centred)."""
    return next(t for t in g.findall("s:text", NS) if t.get("text-anchor") in ("start", "end"))


def cmd_labels(path):
    for g in load(path)[2]:
        print(label_of(g).text)


def cmd_fit(path):
    _, lanes, msgs = load(path)
    if len(lanes) < 2:
        fail("fewer than two lanes")
    gap = lanes[1] - lanes[0]
    for g in msgs:
        t = label_of(g)
        need = len(t.text) * CHAR_PX + 6
        if need > gap:
            fail(f"label {t.text!r} needs {need:.0f} px, the lanes are {gap:.0f} px apart")


def cmd_scale(path, ns):
    ns = float(ns)
    n = 0
    for g in load(path)[2]:
        m = re.search(r"(\d+) ns to (\d+) ns$", g.find("s:title", NS).text)
        if not m:
            continue  # not delivered: drawn one row long
        line = g.find("s:line", NS)
        dy = float(line.get("y2")) - float(line.get("y1"))
        want = (int(m.group(2)) - int(m.group(1))) / ns
        if abs(dy - want) > 0.11:
            fail(f"{label_of(g).text!r}: {dy:.1f} px for {want:.1f} px of time")
        n += 1
    if n == 0:
        fail("no delivered message")


def cmd_shot(png, path):
    from PIL import Image

    root, lanes, msgs = load(path)
    img = Image.open(png).convert("RGB")
    w, h = img.size
    px = img.load()
    top = 70  # ROW_Y0: where the lanes begin
    for x in lanes:
        col = [px[int(x), y] for y in range(top, min(h, int(root.get("height"))) - 30)]
        dark = sum(1 for p in col if max(p) < 140)
        if dark < 0.6 * len(col):
            fail(f"the lane at x={x:.0f} is not drawn ({dark} of {len(col)} pixels dark)")
    red = sum(1 for y in range(h) for x in range(w)
              if px[x, y][0] > 180 and px[x, y][1] < 80 and px[x, y][2] < 80)
    if any("rnr" in g.get("class") for g in msgs) and red < 30:
        fail(f"RNR NAKs in the SVG but {red} red pixels in the screenshot")
    blue = sum(1 for y in range(h) for x in range(w)
               if px[x, y][2] > 150 and px[x, y][0] < 80)
    if blue < 100:
        fail(f"{blue} blue pixels: the data arrows are not drawn")


if __name__ == "__main__":
    cmds = {"labels": cmd_labels, "fit": cmd_fit, "scale": cmd_scale, "shot": cmd_shot}
    if len(sys.argv) < 3 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](*sys.argv[2:])
