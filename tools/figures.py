#!/usr/bin/env python3
"""The course's figures: hand-tidy SVG files in docs/figures/, written by this script.

    python3 tools/figures.py            writes every figure into docs/figures/<name>.svg
    python3 tools/figures.py --check    exits 1 naming every figure whose committed file differs
                                        from what this script generates (or is missing)
    python3 tools/figures.py NAME ...   writes only the named figures

Python 3 standard library only; the output is deterministic (no timestamps, fixed number
formatting), so `--check` compares bytes. One function per figure, named fig_<name>; every
layout fact a figure draws (fragment layouts, swizzle, barrier parities, tile classes) is
computed here from the same formula the course's code uses, and asserted against it where the
code states it differently (see the comments next to each helper).

Text markup in labels: `_{...}` is a subscript, `^{...}` a superscript (drawn with tspan dy
shifts, which every browser and librsvg render); a plain `_` stays an underscore.
"""
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "docs", "figures")

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"

# ---- palette: light fill, dark stroke ---------------------------------------------------------
TEXT = "#1a1a1a"
MUTED = "#5a5a5a"
GRID = "#9e9e9e"
Q = ("#dbe8f7", "#1f4e8c")      # queries: blue
K = ("#fde3c8", "#b35900")      # keys: orange
V = ("#d8f0d8", "#2e7d32")      # values: green
O = ("#e8dcf3", "#5e3596")      # outputs: purple
S = ("#ececec", "#555555")      # scores S, probabilities P: grey
STAT = ("#fff3bf", "#8a6d00")   # row statistics m, ℓ: yellow
HI = "#c62828"                  # highlight: red
WHITE = "#ffffff"
OFF = ("#f6f6f6", "#bdbdbd")    # not used / skipped / empty
TEAL = ("#d3f0ec", "#00695c")   # a second actor (consumer 0, stream 0 …)
PINK = ("#f9dbe7", "#ad1457")   # a third actor (consumer 1, stream 2 …)
# Eight light hues for "one colour per index" figures (swizzle chunks).
EIGHT = ["#f8d7d7", "#fde3c8", "#fff3bf", "#d8f0d8", "#d3f0ec", "#dbe8f7", "#e3dcf5", "#f5dcef"]


def num(x):
    """A number as SVG wants it: at most two decimals, no trailing zeros, no '-0'."""
    s = ("%.2f" % x).rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_MARK = re.compile(r"([_^])\{([^}]*)\}")


def parse_rich(s):
    """'Q_{i} K_{j}^{T}' -> [(text, shift)] with shift 0 (normal), 1 (sub), -1 (super)."""
    out, pos = [], 0
    for m in _MARK.finditer(s):
        if m.start() > pos:
            out.append((s[pos:m.start()], 0))
        out.append((m.group(2), 1 if m.group(1) == "_" else -1))
        pos = m.end()
    if pos < len(s):
        out.append((s[pos:], 0))
    return out


def sub_size(size):
    return max(11, round(size * 0.8))


def text_width(s, size):
    """A rough width of a label in DejaVu Sans (for layout only: boxes, legends)."""
    w = 0.0
    for part, shift in parse_rich(s):
        sz = size if shift == 0 else sub_size(size)
        for ch in part:
            w += sz * (0.34 if ch in " .,:;il|!'()[]" else 0.62)
    return w


class Svg:
    def __init__(self, width, height, title, desc):
        self.w, self.h = width, height
        self.title, self.desc = title, desc
        self.items = []
        self.markers = []  # colours of arrow heads used, in order of first use

    # -- primitives ------------------------------------------------------------------------
    def rect(self, x, y, w, h, fill, stroke=None, sw=1, rx=0, dash=None, opacity=None):
        a = 'x="%s" y="%s" width="%s" height="%s"' % (num(x), num(y), num(w), num(h))
        if rx:
            a += ' rx="%s"' % num(rx)
        a += ' fill="%s"' % fill
        if opacity is not None:
            a += ' fill-opacity="%s"' % num(opacity)
        if stroke:
            a += ' stroke="%s" stroke-width="%s"' % (stroke, num(sw))
        if dash:
            a += ' stroke-dasharray="%s"' % dash
        self.items.append("<rect %s/>" % a)

    def box(self, x, y, w, h, colours, sw=1.2, rx=3, dash=None):
        self.rect(x, y, w, h, colours[0], colours[1], sw, rx, dash)

    def line(self, x1, y1, x2, y2, stroke=TEXT, sw=1.2, dash=None, arrow=False, arrow_start=False):
        a = 'x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"' % (
            num(x1), num(y1), num(x2), num(y2), stroke, num(sw))
        if dash:
            a += ' stroke-dasharray="%s"' % dash
        if arrow:
            a += ' marker-end="url(#%s)"' % self._marker(stroke)
        if arrow_start:
            a += ' marker-start="url(#%s)"' % self._marker(stroke)
        self.items.append("<line %s/>" % a)

    def path(self, d, stroke=TEXT, sw=1.2, fill="none", dash=None, arrow=False):
        a = 'd="%s" fill="%s" stroke="%s" stroke-width="%s"' % (d, fill, stroke, num(sw))
        if dash:
            a += ' stroke-dasharray="%s"' % dash
        if arrow:
            a += ' marker-end="url(#%s)"' % self._marker(stroke)
        self.items.append("<path %s/>" % a)

    def poly(self, pts, fill, stroke=None, sw=1):
        a = 'points="%s" fill="%s"' % (" ".join("%s,%s" % (num(x), num(y)) for x, y in pts), fill)
        if stroke:
            a += ' stroke="%s" stroke-width="%s"' % (stroke, num(sw))
        self.items.append("<polygon %s/>" % a)

    def circle(self, cx, cy, r, fill, stroke=None, sw=1):
        a = 'cx="%s" cy="%s" r="%s" fill="%s"' % (num(cx), num(cy), num(r), fill)
        if stroke:
            a += ' stroke="%s" stroke-width="%s"' % (stroke, num(sw))
        self.items.append("<circle %s/>" % a)

    def text(self, x, y, s, size=14, anchor="start", weight=None, fill=TEXT, italic=False, mono=False,
             rotate=None):
        a = 'x="%s" y="%s"' % (num(x), num(y))
        if rotate is not None:
            a += ' transform="rotate(%s %s %s)"' % (num(rotate), num(x), num(y))
        if size != 14:
            a += ' font-size="%s"' % num(size)
        if anchor != "start":
            a += ' text-anchor="%s"' % anchor
        if weight:
            a += ' font-weight="%s"' % weight
        if italic:
            a += ' font-style="italic"'
        if fill != TEXT:
            a += ' fill="%s"' % fill
        if mono:
            a += ' font-family="%s"' % MONO
        body, cur = "", 0.0
        for part, shift in parse_rich(s):
            want = {0: 0.0, 1: round(size * 0.3, 1), -1: -round(size * 0.4, 1)}[shift]
            attrs = ""
            if want != cur:
                attrs += ' dy="%s"' % num(want - cur)
                cur = want
            if shift:
                attrs += ' font-size="%s"' % sub_size(size)
            if len(parse_rich(s)) > 1:  # a space next to a tspan edge must survive every renderer
                part = part[:1].replace(" ", "\u00a0") + part[1:-1] + part[-1:].replace(" ", "\u00a0") \
                    if len(part) > 1 else part.replace(" ", "\u00a0")
            body += "<tspan%s>%s</tspan>" % (attrs, esc(part)) if attrs else esc(part)
        if "<tspan" in body or "  " in s:
            a += ' xml:space="preserve"'
        self.items.append("<text %s>%s</text>" % (a, body))

    def open_group(self, **attrs):
        """Opens a <g> with the given attributes (font_size -> font-size); close with close_group."""
        self.items.append("<g %s>" % " ".join('%s="%s"' % (k.replace("_", "-"), v) for k, v in attrs.items()))

    def close_group(self):
        self.items.append("</g>")

    def raw_text(self, x, y, s):
        """A bare <text> (attributes from the enclosing group): for large grids of labels."""
        self.items.append('<text x="%s" y="%s">%s</text>' % (num(x), num(y), esc(s)))

    def _marker(self, colour):
        if colour not in self.markers:
            self.markers.append(colour)
        return "ah" + colour.lstrip("#")

    # -- composites --------------------------------------------------------------------------
    def legend(self, x, y, entries, size=12, gap=26):
        """entries: (colours, label) with colours a (fill, stroke) pair; laid out in one row.
        Returns the x after the last entry."""
        for colours, label in entries:
            self.rect(x, y - 11, 16, 14, colours[0], colours[1], 1.2, 2)
            self.text(x + 22, y, label, size)
            x += 22 + text_width(label, size) + gap
        return x

    def render(self):
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
               'role="img" aria-labelledby="title desc">' % (self.w, self.h, self.w, self.h),
               '<title id="title">%s</title>' % esc(self.title),
               '<desc id="desc">%s</desc>' % esc(self.desc)]
        if self.markers:
            out.append("<defs>")
            for c in self.markers:
                out.append('<marker id="ah%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
                           'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
                           '<path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>' % (c.lstrip("#"), c))
            out.append("</defs>")
        out.append('<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>' % (self.w, self.h))
        out.append('<g font-family="%s" font-size="14" fill="%s">' % (FONT, TEXT))
        out.extend(self.items)
        out.append("</g>")
        out.append("</svg>")
        return "\n".join(out) + "\n"


def heading(svg, s, sub=None):
    svg.text(24, 30, s, 17, weight="bold")
    if sub:
        svg.text(24, 52, sub, 13, fill=MUTED)


def grid_lines(svg, x, y, cw, ch, cols, rows, colour=GRID, sw=0.6):
    """The inner lines and the frame of a cols × rows grid of cw × ch cells, as one path."""
    d = "".join("M%s,%sV%s" % (num(x + c * cw), num(y), num(y + rows * ch)) for c in range(1, cols))
    d += "".join("M%s,%sH%s" % (num(x), num(y + r * ch), num(x + cols * cw)) for r in range(1, rows))
    svg.path(d, colour, sw)
    svg.rect(x, y, cols * cw, rows * ch, "none", TEXT, 1.2)


def brace_h(svg, x1, x2, y, label, size=12, down=True, colour=MUTED):
    """A square bracket under (down) or over a span, with a centred label."""
    d = 6 if down else -6
    svg.path("M%s,%s V%s H%s V%s" % (num(x1), num(y), num(y + d), num(x2), num(y)), colour, 1)
    svg.text((x1 + x2) / 2, y + d + (14 if down else -5), label, size, "middle", fill=colour)


# =============================================================================================
# flash_tiling: Q_i against K_j, V_j; m_i, ℓ_i, O_i; the outer (grid) and inner (j) loops
# =============================================================================================
def fig_flash_tiling():
    svg = Svg(1000, 560, "FlashAttention tiling: one block per query tile Q_i, a loop over key tiles K_j, V_j",
              "Q is cut into query tiles Q_i of B_r rows, K and V into key tiles K_j, V_j of B_c keys. "
              "One thread block owns Q_i and walks j = 0 to T_c - 1; the score tile S_ij and the "
              "probabilities P_ij live on chip only; the row statistics m_i, l_i and the output O_i "
              "stay in registers until the epilogue writes O_i / l_i.")
    heading(svg, "Flash attention: one block per query tile, a loop over key tiles",
            "S_{ij} and P_{ij} exist only on chip; m_{i}, ℓ_{i}, O_{i} stay in registers for the whole loop")
    tr, tc, cell, dw = 4, 6, 58, 52     # query tiles, key tiles, tile size (px), head-dim width
    i_hi, j_hi = 1, 2
    sx, sy = 170, 170                   # the S grid's corner
    # K^T on top (d × Nk), V^T at the bottom (d × Nk): the same keys in the same columns
    for name, colours, y in (("K", K, sy - dw - 24), ("V", V, sy + tr * cell + 24)):
        for j in range(tc):
            hi = j == j_hi
            svg.rect(sx + j * cell, y, cell, dw, colours[0], colours[1], 2.4 if hi else 1)
            svg.text(sx + j * cell + cell / 2, y + dw / 2 + 5, name + "_{%s}^{T}" % ("j" if hi else j), 13,
                     "middle", weight="bold" if hi else None, fill=colours[1])
        svg.text(sx - 12, y + dw / 2 + 5, name + "^{T}", 15, "end", weight="bold", fill=colours[1])
    svg.text(sx + tc * cell / 2, sy - dw - 34, "keys →   (tiles of B_{c} keys, T_{c} tiles)", 12, "middle",
             fill=MUTED)
    svg.text(sx + tc * cell / 2, sy + tr * cell + dw + 42,
             "V is stored keys × d; drawn transposed so that V_{j} sits under K_{j}", 12, "middle", fill=MUTED)
    # Q on the left (Nq × d)
    qx = sx - dw - 40
    for i in range(tr):
        hi = i == i_hi
        svg.rect(qx, sy + i * cell, dw, cell, Q[0], Q[1], 2.4 if hi else 1)
        svg.text(qx + dw / 2, sy + i * cell + cell / 2 + 5, "Q_{%s}" % ("i" if hi else i), 13, "middle",
                 weight="bold" if hi else None, fill=Q[1])
    svg.text(qx + dw / 2, sy - 8, "Q", 15, "middle", weight="bold", fill=Q[1])
    # the S grid
    for i in range(tr):
        for j in range(tc):
            row = i == i_hi
            fill = "#d6d6d6" if (row and j == j_hi) else (S[0] if row else WHITE)
            svg.rect(sx + j * cell, sy + i * cell, cell, cell, fill, GRID, 1)
    for i in range(tr):
        if i != i_hi:
            label = "another block (query tile %d), in parallel" % i
            wl = text_width(label, 12) + 12
            svg.rect(sx + tc * cell / 2 - wl / 2, sy + i * cell + cell / 2 - 9, wl, 20, WHITE)
            svg.text(sx + tc * cell / 2, sy + i * cell + cell / 2 + 5, label, 12, "middle", fill=MUTED)
    svg.rect(sx + j_hi * cell, sy + i_hi * cell, cell, cell, "none", HI, 2.4)
    svg.text(sx + j_hi * cell + cell / 2, sy + i_hi * cell + 25, "S_{ij}", 14, "middle", weight="bold")
    svg.text(sx + j_hi * cell + cell / 2, sy + i_hi * cell + 44, "P_{ij}", 14, "middle", weight="bold")
    # the inner loop arrow along row i
    ya = sy + i_hi * cell + cell - 8
    svg.line(sx + 6, ya, sx + tc * cell - 6, ya, HI, 1.6, arrow=True)
    svg.text(sx + 8, sy + i_hi * cell + 16, "j = 0 … T_{c} − 1", 12, fill=HI)
    # the outer "loop": the grid
    svg.line(qx - 16, sy + 4, qx - 16, sy + tr * cell - 4, Q[1], 1.6, arrow=True)
    svg.text(qx - 24, sy + tr * cell / 2, "grid: one block per Q_{i}", 12, "middle", fill=Q[1], rotate=-90)
    svg.text(sx - 60, sy + tr * cell + 14, "queries ↓", 12, "middle", fill=MUTED)
    # O, m, ℓ on the right of the S grid
    ox = sx + tc * cell + 30
    for i in range(tr):
        hi = i == i_hi
        svg.rect(ox, sy + i * cell, dw, cell, O[0], O[1], 2.4 if hi else 1)
        svg.text(ox + dw / 2, sy + i * cell + cell / 2 + 5, "O_{%s}" % ("i" if hi else i), 13, "middle",
                 weight="bold" if hi else None, fill=O[1])
    svg.text(ox + dw / 2, sy - 8, "O", 15, "middle", weight="bold", fill=O[1])
    for k, name in enumerate(("m_{i}", "ℓ_{i}")):
        x = ox + dw + 10 + k * 30
        svg.rect(x, sy + i_hi * cell, 22, cell, STAT[0], STAT[1], 1.4)
        svg.text(x + 11, sy + i_hi * cell - 6, name, 13, "middle", weight="bold", fill=STAT[1])
    # the update, in the paper's notation
    fx, fy = ox + dw + 90, sy - 40
    svg.text(fx, fy, "For j = 0 … T_{c} − 1 (block of Q_{i}):", 14, weight="bold")
    lines = ["load K_{j}, V_{j} into shared memory",
             "S_{ij} = scale · Q_{i} K_{j}^{T}   (B_{r} × B_{c})",
             "m_{new} = max(m_{i}, rowmax S_{ij})",
             "P_{ij} = exp(S_{ij} − m_{new})",
             "α = exp(m_{i} − m_{new})",
             "ℓ_{i} ← α ℓ_{i} + rowsum P_{ij}",
             "O_{i} ← α O_{i} + P_{ij} V_{j}",
             "m_{i} ← m_{new}"]
    for k, s in enumerate(lines):
        svg.text(fx + 12, fy + 28 + 26 * k, s, 14)
    svg.text(fx, fy + 28 + 26 * len(lines) + 12, "Epilogue: O_{i} ← O_{i} / ℓ_{i}", 14, weight="bold")
    svg.text(fx, fy + 28 + 26 * len(lines) + 36, "HBM traffic: Q_{i} once, K and V once", 12, fill=MUTED)
    svg.text(fx, fy + 28 + 26 * len(lines) + 54, "per query tile, O once; S never", 12, fill=MUTED)
    svg.legend(24, 540, [(Q, "Q_{i}: query tile (B_{r} rows)"), (K, "K_{j}: key tile"), (V, "V_{j}: value tile"),
                         (S, "S_{ij}, P_{ij}: on chip only"), (STAT, "m_{i}, ℓ_{i}: row statistics"),
                         (O, "O_{i}: output rows")], 12, 18)
    return svg


# =============================================================================================
# online_softmax_example: one row, two tiles of two keys (the worked example of 10_hopper_wgmma)
# =============================================================================================
def fig_online_softmax_example():
    f4 = lambda a: "%d" % round(a) if abs(a - round(a)) < 1e-12 else "%.4f" % a
    e = math.exp
    # (a) day 01 · 04_softmax: one element at a time over x = 1, 3, 2 (m, ℓ)
    xs = [1.0, 3.0, 2.0]
    states, m, l = [], -math.inf, 0.0
    for x in xs:
        m_new = max(m, x)
        alpha = e(m - m_new) if m != -math.inf else 0.0
        l = l * alpha + e(x - m_new)
        states.append((m_new, alpha, l))
        m = m_new
    assert [f4(st[2]) for st in states] == ["1", "1.1353", "1.5032"]
    # (b) day 06 · 02_flash_attention: two tiles of two keys, scores (0, 2) | (4, 1), values (1, 3) | (5, 0)
    sc, vs = [[0.0, 2.0], [4.0, 1.0]], [[1.0, 3.0], [5.0, 0.0]]
    tiles, m, l, o = [], -math.inf, 0.0, 0.0
    for st, vt in zip(sc, vs):
        m_new = max([m] + st)
        alpha = e(m - m_new) if m != -math.inf else 0.0
        p = [e(x - m_new) for x in st]
        l = alpha * l + sum(p)
        o = alpha * o + sum(a * b for a, b in zip(p, vt))
        tiles.append((m_new, alpha, p, l, o))
        m = m_new
    allw = [e(x - m) for x in sc[0] + sc[1]]
    assert abs(sum(allw) - l) < 1e-12 and abs(sum(a * b for a, b in zip(allw, vs[0] + vs[1])) - o) < 1e-12
    assert ("%.3f" % tiles[0][4], "%.3f" % l, "%.3f" % o, "%.3f" % (o / l)) == ("3.135", "1.203", "5.424", "4.507")

    svg = Svg(1000, 625, "The online softmax worked on one row: element by element, and tile by tile",
              "Top: the running max m and sum l over the row x = 1, 3, 2, one element at a time. When the max grows "
              "from 1 to 3 the sum so far is multiplied by e^(1-3) = 0.1353; when it does not, by 1; the result, "
              "m = 3 and l = 1.5032, is the three-pass softmax's. Bottom: one query row over two key tiles, scores "
              "0, 2 and 4, 1 with values 1, 3 and 5, 0; after tile 1 m = 2, l = 1.1353, O = 3.1353; tile 2 raises "
              "the max to 4, so l and O are first multiplied by alpha = e^(2-4) = 0.1353; O / l = 4.5074.")
    heading(svg, "The online softmax, worked on one row",
            "the state after each step; when the max grows, everything summed so far is rescaled to the new max")
    # ---- (a)
    ya = 96
    svg.text(24, ya, "One element at a time: x = 1, 3, 2, state (m, ℓ), starting from (−∞, 0)", 14, weight="bold")
    bw, gap = 262, 72
    notes = ["first element", "the max grew: rescale by e^{1 − 3}", "same max: factor 1"]
    for k, (x, (m_k, alpha, l_k)) in enumerate(zip(xs, states)):
        bx = 24 + k * (bw + gap)
        prev_l = 0.0 if k == 0 else states[k - 1][2]
        prev_m = "−∞" if k == 0 else "%d" % states[k - 1][0]
        svg.rect(bx, ya + 14, bw, 122, WHITE, GRID, 1.2, 4)
        svg.rect(bx, ya + 14, bw, 26, S[0], S[1], 1.2, 4)
        svg.text(bx + bw / 2, ya + 32, "x_{%d} = %d" % (k + 1, x), 14, "middle", weight="bold")
        svg.text(bx + 12, ya + 62, "m = max(%s, %d) = %d" % (prev_m, x, m_k), 13)
        if k == 0:
            svg.text(bx + 12, ya + 86, "ℓ = 0 · e^{−∞} + e^{1 − 1} = 1", 13)
        else:
            svg.text(bx + 12, ya + 86, "ℓ = %s · e^{%s − %d} + e^{%d − %d}" % (f4(prev_l), prev_m, m_k, x, m_k), 13)
            svg.text(bx + 12, ya + 104, "  = %s + %s = %s" % (f4(prev_l * alpha), f4(e(x - m_k)), f4(l_k)), 13)
        svg.text(bx + 12, ya + 126, notes[k], 12, fill=HI if k == 1 else MUTED)
        if k:
            svg.line(bx - gap + 4, ya + 70, bx - 6, ya + 70, TEXT, 1.4, arrow=True)
            svg.text(bx - gap / 2, ya + 62, "× %s" % (f4(alpha) if alpha != 1 else "1"), 12, "middle",
                     fill=HI if alpha != 1 else MUTED)
    svg.text(24, ya + 158, "m = 3 and ℓ = 1.5032, the three-pass values, found in one pass.", 13, fill=MUTED)
    # ---- (b)
    yb = ya + 196
    svg.text(24, yb, "One tile at a time: two key tiles of two keys, scores s and values v (D = 1), state (m, ℓ, O)",
             14, weight="bold")
    cx, cw, ch = 110, 58, 28
    svg.text(cx - 10, yb + 36, "s", 14, "end", weight="bold")
    svg.text(cx - 10, yb + 36 + ch, "v", 14, "end", weight="bold")
    for t in range(2):
        for k in range(2):
            xx = cx + (2 * t + k) * cw + t * 14
            svg.rect(xx, yb + 16, cw, ch, S[0], S[1], 1)
            svg.text(xx + cw / 2, yb + 35, "%d" % sc[t][k], 14, "middle")
            svg.rect(xx, yb + 16 + ch, cw, ch, V[0], V[1], 1)
            svg.text(xx + cw / 2, yb + 35 + ch, "%d" % vs[t][k], 14, "middle")
        x1 = cx + 2 * t * cw + t * 14
        brace_h(svg, x1 + 2, x1 + 2 * cw - 2, yb + 16 + 2 * ch + 4, "tile %d" % (t + 1))
    bw2, by2 = 400, yb + 112
    for t, (m_t, alpha, pp, l_t, o_t) in enumerate(tiles):
        bx = 24 + t * (bw2 + 56)
        svg.rect(bx, by2, bw2, 128, WHITE, GRID, 1.2, 4)
        svg.text(bx + 12, by2 + 22, "after tile %d" % (t + 1), 14, weight="bold")
        prev_l = 0.0 if t == 0 else tiles[0][3]
        prev_o = 0.0 if t == 0 else tiles[0][4]
        prev_m = "−∞" if t == 0 else "%d" % tiles[0][0]
        rows = [("m", STAT, "max(%s, %d, %d) = %d" % (prev_m, sc[t][0], sc[t][1], m_t)),
                ("α", STAT, "e^{%s − %d} = %s" % (prev_m, m_t, "0" if t == 0 else f4(alpha))),
                ("ℓ", STAT, "%s · %s + %s + %s = %s" % ("0" if t == 0 else f4(alpha), "0" if t == 0 else f4(prev_l),
                                                      f4(pp[0]), f4(pp[1]), f4(l_t))),
                ("O", O, "%s · %s + %s · %d + %s · %d = %s" % ("0" if t == 0 else f4(alpha),
                                                               "0" if t == 0 else f4(prev_o), f4(pp[0]),
                                                               vs[t][0], f4(pp[1]), vs[t][1], f4(o_t)))]
        for k, (name, colours, expr) in enumerate(rows):
            y = by2 + 46 + 22 * k
            svg.rect(bx + 12, y - 14, 24, 19, colours[0], colours[1], 1, 3)
            svg.text(bx + 24, y, name, 13, "middle", weight="bold", fill=colours[1])
            svg.text(bx + 46, y, expr, 13)
    svg.line(24 + bw2 + 6, by2 + 60, 24 + bw2 + 50, by2 + 60, TEXT, 1.4, arrow=True)
    svg.text(24 + bw2 + 28, by2 + 52, "× α", 12, "middle", fill=HI)
    ry = by2 + 162
    svg.rect(24, ry - 20, 952, 58, O[0], O[1], 1.2, 4)
    svg.text(40, ry, "Epilogue: O / ℓ = %s / %s = %s" % (f4(o), f4(l), f4(o / l)), 14, weight="bold", fill=O[1])
    svg.text(40, ry + 24, "In one go: weights e^{s − 4} = %s, %s, %s, %s sum to %s = ℓ; Σ weight · v = %s = O."
             % (f4(allw[0]), f4(allw[1]), f4(allw[2]), f4(allw[3]), f4(sum(allw)), f4(o)), 13)
    return svg


# =============================================================================================
# paged_block_table: logical token -> block table -> physical block, slot (day 06 · 04)
# =============================================================================================
def fig_paged_block_table():
    block_size, table, ctx, n_pool = 4, [7, 2, 5], 10, 8
    t_hi = 9
    lb, slot = t_hi // block_size, t_hi % block_size
    assert (lb, slot, table[lb]) == (2, 1, 5)  # the lesson's worked example: slot 1 of block 5
    svg = Svg(960, 560, "Paged KV cache: token t of a sequence through its block table to a physical block and slot",
              "A sequence of 10 tokens with block_size 4 sees logical blocks 0, 1, 2; its row of the block "
              "table, [7, 2, 5], maps them to physical blocks 7, 2 and 5 of the pool, out of order. Token 9 "
              "is in logical block 9 / 4 = 2, slot 9 mod 4 = 1: slot 1 of physical block 5. Slots past "
              "the context length hold garbage; the other blocks belong to other sequences or are free.")
    heading(svg, "Paged KV cache: logical token → block table → physical block, slot",
            "sequence b: context_lens[b] = 10, block_size = 4, block_table[b] = [7, 2, 5]")
    # the token strip
    cw, ch, gap = 48, 34, 14
    x0, y0 = 170, 100
    svg.text(x0 - 12, y0 + 22, "token t", 13, "end", weight="bold")
    svg.text(x0 - 12, y0 + ch + 18, "slot", 13, "end", fill=MUTED)
    tx = {}
    for t in range(len(table) * block_size):
        b = t // block_size
        x = x0 + t * cw + b * gap
        tx[t] = x
        live = t < ctx
        colours = K if live else OFF
        svg.rect(x, y0, cw, ch, colours[0], HI if t == t_hi else colours[1], 2.4 if t == t_hi else 1)
        svg.text(x + cw / 2, y0 + 22, "%d" % t if live else "–", 14, "middle", weight="bold" if t == t_hi else None)
        svg.text(x + cw / 2, y0 + ch + 18, "%d" % (t % block_size), 12, "middle", fill=MUTED)
    svg.text(x0 + 12 * cw + 2 * gap + 10, y0 + 22, "t < 10: cached", 12, fill=MUTED)
    svg.text(x0 + 12 * cw + 2 * gap + 10, y0 + ch + 18, "= t mod 4", 12, fill=MUTED)
    # logical blocks and the table
    ty = y0 + 110
    svg.text(x0 - 12, ty - 30, "logical block", 13, "end", weight="bold")
    svg.text(x0 - 12, ty + 24, "block_table[b]", 13, "end", weight="bold")
    table_centre = {}
    for b, phys in enumerate(table):
        x1, x2 = tx[b * block_size], tx[b * block_size + 3] + cw
        brace_h(svg, x1 + 2, x2 - 2, y0 + ch + 28, "")
        svg.text((x1 + x2) / 2, ty - 30, "%d = t / %d" % (b, block_size), 13, "middle")
        bx = (x1 + x2) / 2 - 40
        svg.rect(bx, ty, 80, 36, STAT[0], HI if b == lb else STAT[1], 2.4 if b == lb else 1.2, 3)
        svg.text(bx + 40, ty + 24, "[%d] = %d" % (b, phys), 14, "middle", weight="bold")
        table_centre[b] = (bx + 40, ty + 36)
    # the pool
    py, sw = 380, 24
    bw = block_size * sw
    pgap = (960 - 48 - n_pool * bw) / (n_pool - 1)
    svg.text(24, py + 56, "↑ the pool of physical blocks, shared by all sequences  (k_cache, v_cache:"
             " [num_blocks, Hkv, block_size, D])", 13, weight="bold")
    owner = {phys: b for b, phys in enumerate(table)}
    for p in range(n_pool):
        x = 24 + p * (bw + pgap)
        svg.text(x + bw / 2, py - 10, "block %d" % p, 13, "middle", weight="bold" if p in owner else None,
                 fill=TEXT if p in owner else MUTED)
        for sl in range(block_size):
            if p in owner:
                t = owner[p] * block_size + sl
                live = t < ctx
                colours = K if live else OFF
                hi = t == t_hi
                svg.rect(x + sl * sw, py, sw, 32, colours[0], HI if hi else colours[1], 2.4 if hi else 1)
                svg.text(x + sl * sw + sw / 2, py + 21, "%d" % t if live else "✗", 12, "middle",
                         weight="bold" if hi else None, fill=TEXT if live else MUTED)
            else:
                svg.rect(x + sl * sw, py, sw, 32, OFF[0], OFF[1], 1)
                svg.text(x + sl * sw + sw / 2, py + 21, "·", 12, "middle", fill=MUTED)
        if p in owner:
            cx, cy = table_centre[owner[p]]
            svg.line(cx, cy + 2, x + bw / 2, py - 28, HI if owner[p] == lb else K[1], 1.6 if owner[p] == lb else 1.2,
                     arrow=True)
    # the worked example
    ey = py + 96
    svg.text(24, ey, "Token 9: logical block ⌊9 / 4⌋ = 2, slot 9 mod 4 = 1;  block_table[b][2] = 5  →  slot 1 of"
             " physical block 5.", 14, weight="bold")
    svg.text(24, ey + 24, "offset of (t, KV head hk, element d) = ((block_table[b][⌊t / block_size⌋] · Hkv + hk) ·"
             " block_size + t mod block_size) · D + d", 13, mono=False)
    svg.legend(24, ey + 58, [(K, "a token of sequence b"), (OFF, "✗ slot past context_lens[b]: garbage;"
                                                              "  · another sequence's token, or free")], 12)
    return svg


# =============================================================================================
# gqa_grouping: G query heads share one KV head; the packed rows of one block (day 06 · 03)
# =============================================================================================
def fig_gqa_grouping():
    hq, hkv, nq = 8, 2, 3
    g_size = hq // hkv
    hk_hi = 1
    svg = Svg(1000, 610, "GQA: G query heads share one KV head; a block packs their rows",
              "Eight query heads over two KV heads (G = 4): query head h reads KV head h / G. One block of "
              "KV head 1 packs the rows of its four query heads, position outer and head inner: packed row "
              "r = i G + g is position i = r / G of query head h = hk G + g. All of them are scored against "
              "the same K_j, V_j tile, copied once.")
    heading(svg, "GQA: G query heads share one KV head, packed into one block",
            "Hq = 8 query heads, Hkv = 2 KV heads, G = Hq / Hkv = 4, Nq = 3 query positions")
    # heads
    hw, hh, hx, hy = 78, 34, 150, 96
    svg.text(hx + 28, hy + 22, "query head h", 13, "end", weight="bold")
    for h in range(hq):
        x = hx + 40 + h * (hw + 12) + (h // g_size) * 40
        hi = h // g_size == hk_hi
        svg.rect(x, hy, hw, hh, Q[0], Q[1], 2 if hi else 1, 3)
        svg.text(x + hw / 2, hy + 22, "h = %d" % h, 13, "middle", weight="bold" if hi else None)
        # arrow to the KV head
        kx = hx + 40 + (h // g_size) * (g_size * (hw + 12) + 40) + (g_size * (hw + 12) - 12) / 2
        svg.line(x + hw / 2, hy + hh + 2, kx + (x + hw / 2 - kx) * 0.25, hy + 96, Q[1], 1, arrow=True)
    for hk in range(hkv):
        x1 = hx + 40 + hk * (g_size * (hw + 12) + 40)
        wdt = g_size * (hw + 12) - 12
        svg.rect(x1 + wdt / 2 - 120, hy + 100, 115, 34, K[0], K[1], 2 if hk == hk_hi else 1, 3)
        svg.text(x1 + wdt / 2 - 62, hy + 122, "K[b, %d]" % hk, 13, "middle", weight="bold")
        svg.rect(x1 + wdt / 2 + 5, hy + 100, 115, 34, V[0], V[1], 2 if hk == hk_hi else 1, 3)
        svg.text(x1 + wdt / 2 + 62, hy + 122, "V[b, %d]" % hk, 13, "middle", weight="bold")
        svg.text(x1 + wdt / 2, hy + 154, "KV head hk = %d   (h / G = %d)" % (hk, hk), 12, "middle", fill=MUTED)
    svg.text(hx + 28, hy + 122, "KV head", 13, "end", weight="bold")
    # the packed rows of one block of KV head 1
    py = hy + 230
    svg.text(24, py - 26, "One block (query tile 0 of KV head hk = 1): 64 threads, one packed row each", 14,
             weight="bold")
    labels = ["packed row r", "position i = r / G", "g = r mod G", "query head h = hk·G + g"]
    cw, ch, x0 = 42, 26, 220
    for k, lab in enumerate(labels):
        svg.text(x0 - 12, py + 18 + k * ch, lab, 12, "end", weight="bold" if k == 0 else None)
    shown = 16
    for r in range(shown):
        x = x0 + r * cw + (r // g_size) * 6
        real = r < g_size * nq
        i, g = r // g_size, r % g_size
        for k in range(4):
            colours = Q if real else OFF
            fill = colours[0] if k == 0 or not real else WHITE
            svg.rect(x, py + k * ch, cw, ch, fill, colours[1] if real else OFF[1], 1)
            if real:
                val = [r, i, g, hk_hi * g_size + g][k]
                svg.text(x + cw / 2, py + 18 + k * ch, "%d" % val, 13, "middle")
            elif k == 0:
                svg.text(x + cw / 2, py + 18, "%d" % r, 13, "middle", fill=MUTED)
    svg.text(x0 + shown * cw + 4 * 6 + 8, py + 18, "… 63", 13, fill=MUTED)
    xe = x0 + 12 * cw + 3 * 6
    svg.text(xe + 2 * cw, py + 4 * ch + 20, "r ≥ G·Nq = 12:", 12, "middle", fill=MUTED)
    svg.text(xe + 2 * cw, py + 4 * ch + 36, "no row, no store", 12, "middle", fill=MUTED)
    brace_h(svg, x0, x0 + 12 * cw + 2 * 6 + 0, py + 4 * ch + 6,
            "each thread scores its own row of Q (its head h, its position i) …", 12)
    # the shared tile
    ty = py + 4 * ch + 52
    svg.rect(x0 + 60, ty, 200, 36, K[0], K[1], 1.6, 3)
    svg.text(x0 + 160, ty + 23, "K_{j} of KV head 1", 13, "middle", weight="bold")
    svg.rect(x0 + 280, ty, 200, 36, V[0], V[1], 1.6, 3)
    svg.text(x0 + 380, ty + 23, "V_{j} of KV head 1", 13, "middle", weight="bold")
    svg.text(x0 + 270, ty + 56, "… against the same tile in shared memory, copied once for all G = 4 heads", 12,
             "middle", fill=MUTED)
    svg.text(24, ty + 92, "Worked example: thread r = 9 → position i = ⌊9 / 4⌋ = 2, g = 9 mod 4 = 1, head h = 1·4 "
                          "+ 1 = 5;",
             13)
    svg.text(24, ty + 112, "with b = 1 its row of Q and O ([B, Hq, Nq, D]) is (b·Hq + h)·Nq + i = (8 + 5)·3 + 2 = 41:"
             " packed rows are scattered over 4 heads.", 13)
    return svg


# =============================================================================================
# split_kv_merge: the context cut into splits, each a partial (m_s, ℓ_s, O_s), merged by LSE
# =============================================================================================
def fig_split_kv_merge():
    window, splits, length = 20, 3, 17
    split_len = -(-window // splits)
    ranges = [(s * split_len, min((s + 1) * split_len, length)) for s in range(splits)]
    assert split_len == 7 and ranges == [(0, 7), (7, 14), (14, 17)]  # 06_split_kv_decode's example
    svg = Svg(1000, 600, "Split-KV decode: each split of the context yields a partial (m_s, l_s, O_s); "
                         "the partials are merged with weights e^(m_s - m)",
              "One sequence of 17 cached tokens in a window of 20, cut into 3 splits of 7 tokens: [0, 7), [7, 14) "
              "and [14, 17), the last cut at the context length. Pass 1 runs one block per split, each "
              "producing its own maximum m_s, sum l_s and unnormalised output O_s. Pass 2 takes m = max m_s "
              "and sums l = sum of e^(m_s - m) l_s and O = sum of e^(m_s - m) O_s, then divides O by l.")
    heading(svg, "Split-KV (flash-decoding): partial softmaxes, merged exactly",
            "one sequence, one query head: window = 20 tokens, len = 17, num_splits = 3, split_len = ⌈20 / 3⌉ = 7")
    cw, x0, y0 = 38, 150, 96
    svg.text(x0 - 12, y0 + 20, "token t", 13, "end", weight="bold")
    colours_s = [K, V, Q]
    for t in range(window):
        live = t < length
        s = t // split_len
        c = colours_s[s] if live else OFF
        svg.rect(x0 + t * cw, y0, cw, 30, c[0], c[1], 1)
        svg.text(x0 + t * cw + cw / 2, y0 + 20, "%d" % t, 12, "middle", fill=TEXT if live else MUTED)
    svg.text(x0 + (length + window) / 2 * cw, y0 - 8, "t ≥ len: not loaded", 12, "middle", fill=MUTED)
    bw, by, bh = 250, y0 + 92, 118
    centres = []
    for s, (a, b) in enumerate(ranges):
        brace_h(svg, x0 + a * cw + 2, x0 + b * cw - 2, y0 + 36,
                "split %d: [%d, %d)%s" % (s, a, b, ", cut at len" if b < (s + 1) * split_len else ""), 12,
                colour=colours_s[s][1])
        bx = 60 + s * (bw + 60)
        c = colours_s[s]
        svg.rect(bx, by, bw, bh, WHITE, c[1], 1.4, 4)
        svg.rect(bx, by, bw, 26, c[0], c[1], 1.4, 4)
        svg.text(bx + bw / 2, by + 18, "pass 1, block of split %d" % s, 13, "middle", weight="bold")
        svg.text(bx + 14, by + 50, "m_{%d} = max S_{t}" % s, 13)
        svg.text(bx + 14, by + 74, "ℓ_{%d} = Σ exp(S_{t} − m_{%d})" % (s, s), 13)
        svg.text(bx + 14, by + 98, "O_{%d} = Σ exp(S_{t} − m_{%d}) V_{t}" % (s, s), 13)
        svg.text(bx + bw - 10, by + 50, "t ∈ [%d, %d)" % (a, b), 12, "end", fill=MUTED)
        centres.append(bx + bw / 2)
        svg.line((x0 + (a + b) / 2 * cw), y0 + 58, bx + bw / 2, by - 2, c[1], 1.2, arrow=True)
    # the merge
    my, mw, mh = by + bh + 90, 560, 128
    mx = 500 - mw / 2
    for s, cx in enumerate(centres):
        ex = mx + mw / 2 + (s - 1) * 150
        svg.line(cx, by + bh + 2, ex, my - 2, colours_s[s][1], 1.4, arrow=True)
        svg.text((cx + ex) / 2 + (-12 if s == 0 else 12), by + bh + 50, "(m_{%d}, ℓ_{%d}, O_{%d})" % (s, s, s), 13,
                 "end" if s == 0 else "start", fill=colours_s[s][1], weight="bold")
    svg.rect(mx, my, mw, mh, O[0], O[1], 1.4, 4)
    svg.text(mx + mw / 2, my + 22, "pass 2: merge the partials (fp32, unnormalised)", 14, "middle", weight="bold",
             fill=O[1])
    svg.text(mx + 24, my + 50, "m = max_{s} m_{s}", 14)
    svg.text(mx + 24, my + 76, "ℓ = Σ_{s} exp(m_{s} − m) ℓ_{s}", 14)
    svg.text(mx + 24, my + 102, "O = Σ_{s} exp(m_{s} − m) O_{s}", 14)
    svg.text(mx + 300, my + 76, "weight of split s: exp(m_{s} − m) ≤ 1", 13, fill=MUTED)
    svg.text(mx + 300, my + 102, "output: o = O / ℓ", 14, weight="bold")
    svg.text(24, my + mh + 34, "Every term of split s was measured against m_{s}; exp(m_{s} − m) moves it to the "
                               "common maximum:"
             " the online softmax's rescaling, with splits for tiles.", 13, fill=MUTED)
    svg.text(24, my + mh + 54, "Scores S_{t} here include the softmax scale (the kernel keeps raw scores and computes"
             " 2^{(S − m)·scale·log₂e}); an empty split writes no partial.", 13, fill=MUTED)
    return svg


# =============================================================================================
# mma_m16n8k16_fragment: who holds what of the m16n8k16 C/D and A fragments
# =============================================================================================
def ptx_c_position(lane, i):
    """common/mma_layout_check.h: C/D element c_i (i = 0..3) of lane -> (row, col) of 16 × 8."""
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8, t * 2 + (i & 1))


def ptx_a_position(lane, i):
    """common/mma_layout_check.h: A element a_i (i = 0..7, register i / 2) -> (row, col) of 16 × 16."""
    g, t = lane >> 2, lane % 4
    lower = i in (2, 3, 6, 7)
    return (g + 8 if lower else g, t * 2 + (i & 1) + (0 if i < 4 else 8))


def mma_p_a_source(kk, j):
    """solutions/day10-optimizations/05_fp16_mma.cu: A register j of k-step kk <- accumulator
    fragment, first element (the pair is that element and the next)."""
    return 2 * kk + j // 2, 2 * (j % 2)


def _check_mma_layouts():
    seen_c, seen_a = set(), set()
    for lane in range(32):
        for i in range(4):
            seen_c.add(ptx_c_position(lane, i))
        for i in range(8):
            seen_a.add(ptx_a_position(lane, i))
        # P stays in registers: A register j of k-step kk holds, in this lane, exactly the two
        # elements of accumulator fragment 2kk + j/2 that mma_p_a_source names.
        for kk in range(4):
            for j in range(4):
                frag, e = mma_p_a_source(kk, j)
                for h in range(2):
                    ar, ac = ptx_a_position(lane, 2 * j + h)
                    cr, cc = ptx_c_position(lane, e + h)
                    assert (ar, 16 * kk + ac) == (cr, 8 * frag + cc)
    assert len(seen_c) == 128 and len(seen_a) == 256


def fig_mma_m16n8k16_fragment():
    _check_mma_layouts()
    lane_hi = 13
    svg = Svg(1000, 670, "The mma.sync m16n8k16 fragments: which lane holds which element",
              "Left: the 16 x 8 fp32 accumulator C/D. Lane l = 4g + t holds c0, c1 at row g, columns 2t and 2t+1, "
              "and c2, c3 at row g + 8, the same columns; the four lanes of a quad (same g) hold rows g and g + 8 "
              "whole. Right: the 16 x 16 A operand; register 0 holds row g, columns 2t, 2t+1; register 1 row g + 8; "
              "registers 2 and 3 the same rows 8 columns further. Two neighbouring accumulators side by side are "
              "exactly an A fragment, which is how P stays in registers. Lane 13 (g = 3, t = 1) is outlined.")
    heading(svg, "mma.sync.m16n8k16: the fragment layouts, lane by lane",
            "lane = 4g + t:  g = lane / 4 (the group, 0–7),  t = lane mod 4 (0–3);  a quad = the 4 lanes of one g")
    c_row = [("#dbe8f7", "#1f4e8c"), ("#e8dcf3", "#5e3596")]        # c0,c1 (row g) / c2,c3 (row g+8)
    a_reg = [("#dbe8f7", "#1f4e8c"), ("#e8dcf3", "#5e3596"), ("#d3f0ec", "#00695c"), ("#f9dbe7", "#ad1457")]
    # ---- C/D, 16 × 8
    cw, ch, cx, cy = 46, 24, 96, 118
    cell = {}
    for lane in range(32):
        for i in range(4):
            cell[ptx_c_position(lane, i)] = (lane, i)
    # the colour of a region follows from the layout; check that it is uniform before filling it whole
    assert all(cell[(r, c)][1] // 2 == r // 8 for r in range(16) for c in range(8))
    svg.text(cx + 4 * cw, cy - 28, "C, D: 16 × 8 fp32, 4 registers c0 … c3", 14, "middle", weight="bold")
    for half in range(2):
        svg.rect(cx, cy + 8 * half * ch, 8 * cw, 8 * ch, c_row[half][0])
    svg.open_group(font_size="11", text_anchor="middle")
    for r in range(16):
        for c in range(8):
            lane, i = cell[(r, c)]
            if lane != lane_hi:
                svg.raw_text(cx + c * cw + cw / 2, cy + r * ch + 16, "%d:c%d" % (lane, i))
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="end", fill=MUTED)
    for r in range(16):
        svg.raw_text(cx - 8, cy + r * ch + 16, "row %d  g=%d" % (r, r % 8))
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="middle", fill=MUTED)
    for c in range(8):
        svg.raw_text(cx + c * cw + cw / 2, cy - 6, "%d" % c)
    svg.close_group()
    grid_lines(svg, cx, cy, cw, ch, 8, 16)
    svg.line(cx, cy + 8 * ch, cx + 8 * cw, cy + 8 * ch, TEXT, 1.4)
    for t in range(4):
        brace_h(svg, cx + 2 * t * cw + 3, cx + (2 * t + 2) * cw - 3, cy + 16 * ch + 6, "t = %d" % t, 11)
    for (r, c), (lane, i) in sorted(cell.items()):
        if lane == lane_hi:
            svg.rect(cx + c * cw + 1, cy + r * ch + 1, cw - 2, ch - 2, "none", HI, 2.2)
            svg.text(cx + c * cw + cw / 2, cy + r * ch + 16, "%d:c%d" % (lane, i), 11, "middle", weight="bold")
    for r in (3, 11):  # the quad of lane 13: rows 3 and 11
        svg.rect(cx - 2, cy + r * ch - 1, 8 * cw + 4, ch + 2, "none", TEXT, 1.4, dash="4 3")
    # ---- A, 16 × 16
    aw, ax = 27, 530
    acell = {}
    for lane in range(32):
        for i in range(8):
            acell[ptx_a_position(lane, i)] = (lane, i)
    assert all(acell[(r, c)][1] // 2 == (r // 8) + 2 * (c // 8) for r in range(16) for c in range(16))
    svg.text(ax + 8 * aw, cy - 28, "A: 16 × 16, 4 registers of two 16-bit values", 14, "middle", weight="bold")
    for reg in range(4):
        svg.rect(ax + 8 * aw * (reg // 2), cy + 8 * ch * (reg % 2), 8 * aw, 8 * ch, a_reg[reg][0])
    svg.open_group(font_size="11", text_anchor="middle")
    for r in range(16):
        for c in range(16):
            lane, i = acell[(r, c)]
            if lane != lane_hi:
                svg.raw_text(ax + c * aw + aw / 2, cy + r * ch + 16, "%d" % lane)
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="end", fill=MUTED)
    for r in range(16):
        svg.raw_text(ax - 6, cy + r * ch + 16, "%d" % r)
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="middle", fill=MUTED)
    for c in range(16):
        svg.raw_text(ax + c * aw + aw / 2, cy - 6, "%d" % c)
    svg.close_group()
    grid_lines(svg, ax, cy, aw, ch, 16, 16)
    svg.line(ax, cy + 8 * ch, ax + 16 * aw, cy + 8 * ch, TEXT, 1.4)
    svg.line(ax + 8 * aw, cy, ax + 8 * aw, cy + 16 * ch, TEXT, 1.4)
    for (r, c), (lane, i) in sorted(acell.items()):
        if lane == lane_hi:
            svg.rect(ax + c * aw + 1, cy + r * ch + 1, aw - 2, ch - 2, "none", HI, 2.2)
            svg.text(ax + c * aw + aw / 2, cy + r * ch + 16, "%d" % lane, 11, "middle", weight="bold")
    brace_h(svg, ax + 3, ax + 8 * aw - 3, cy + 16 * ch + 6, "acc. fragment 2kk", 11)
    brace_h(svg, ax + 8 * aw + 3, ax + 16 * aw - 3, cy + 16 * ch + 6, "acc. fragment 2kk + 1", 11)
    # legends and notes
    ly = cy + 16 * ch + 62
    svg.legend(24, ly, [(c_row[0], "c0, c1: row g"), (c_row[1], "c2, c3: row g + 8")], 12, 16)
    svg.legend(ax - 30, ly, [(a_reg[0], "reg 0: row g, cols 2t, 2t+1"), (a_reg[2], "reg 2: row g, cols 8+2t, 8+2t+1")],
               12, 16)
    svg.legend(ax - 30, ly + 22, [(a_reg[1], "reg 1: row g+8, cols 2t, 2t+1"),
                                  (a_reg[3], "reg 3: row g+8, cols 8+2t, …")], 12, 10)
    svg.text(24, ly + 22, "cell = lane:element", 12)
    svg.text(24, ly + 52, "Red: lane 13 (g = 3, t = 1); dashed: its quad, lanes 12–15, which holds rows 3 and 11 "
                          "whole.",
             12)
    svg.text(24, ly + 72, "A register j packs two 16-bit values (PTX a2j, a2j+1), the lower column in the low half. "
             "Two accumulators side by side (keys 16kk … 16kk + 15)", 12)
    svg.text(24, ly + 92, "hold, lane by lane, exactly the A fragment of P: reg 0, 1 = c0,c1 / c2,c3 of fragment 2kk;"
             " reg 2, 3 = the same of fragment 2kk + 1.", 12)
    return svg


# =============================================================================================
# wgmma_accumulator: the m64nNk16 accumulator over a warpgroup's 128 threads
# =============================================================================================
def wgmma_acc_row(t, i):
    """solutions/day10-optimizations/10_hopper_wgmma.cu, wgmma_acc_row."""
    return 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)


def wgmma_acc_col(t, i):
    """solutions/day10-optimizations/10_hopper_wgmma.cu, wgmma_acc_col."""
    return 8 * (i // 4) + 2 * (t % 4) + i % 2


def _check_wgmma_layout(n):
    seen = set()
    for t in range(128):
        w, lane = t // 32, t % 32
        for i in range(n // 2):
            r, c = wgmma_acc_row(t, i), wgmma_acc_col(t, i)
            # the PTX statement: warp w owns rows 16w … 16w + 15; within it, block i/4 is an m16n8 C fragment
            pr, pc = ptx_c_position(lane, i % 4)
            assert (r, c) == (16 * w + pr, 8 * (i // 4) + pc)
            seen.add((r, c))
    assert len(seen) == 64 * n


def fig_wgmma_accumulator():
    n = 64
    _check_wgmma_layout(n)
    _check_wgmma_layout(128)
    t_hi = 37
    svg = Svg(1000, 650, "The wgmma m64nNk16 accumulator over the 128 threads of a warpgroup",
              "Left: the 64 x N fp32 result (N = 64 drawn). Warp w of the warpgroup owns rows 16w to 16w + 15; "
              "thread t = 32w + lane holds N/2 elements d[i]. Right: one warp's 16 rows and one 8-column block n, "
              "cell = lane:element; it is the m16n8 accumulator of mma.sync, elements d[4n] to d[4n+3] in the places "
              "of c0 to c3. Thread 37 (warp 1, lane 5) is marked: rows 17 and 25, columns 2, 3 of every block.")
    heading(svg, "wgmma m64nNk16: the accumulator, warp by warp, thread by thread",
            "thread t = 32w + lane of the warpgroup (t = 0 … 127); g = lane / 4, t4 = lane mod 4;  d[0 … N/2 − 1] "
            "per thread")
    warp_col = [("#dbe8f7", "#1f4e8c"), ("#e8dcf3", "#5e3596"), ("#d3f0ec", "#00695c"), ("#f9dbe7", "#ad1457")]
    # ---- overview: 64 × N
    px, py, ps = 110, 120, 5
    svg.text(px + n * ps / 2, py - 22, "the 64 × N tile (N = 64 drawn)", 13, "middle", weight="bold")
    for w in range(4):
        svg.rect(px, py + 16 * w * ps, n * ps, 16 * ps, warp_col[w][0])
        svg.text(px - 8, py + (16 * w + 8) * ps - 2, "warp %d" % w, 12, "end", fill=warp_col[w][1], weight="bold")
        svg.text(px - 8, py + (16 * w + 8) * ps + 13, "rows %d–%d" % (16 * w, 16 * w + 15), 11, "end", fill=MUTED)
    d = "".join("M%s,%sV%s" % (num(px + 8 * b * ps), num(py), num(py + 64 * ps)) for b in range(1, n // 8))
    d += "".join("M%s,%sH%s" % (num(px), num(py + 16 * w * ps), num(px + n * ps)) for w in range(1, 4))
    svg.path(d, GRID, 0.8)
    svg.rect(px, py, n * ps, 64 * ps, "none", TEXT, 1.2)
    for i in range(n // 2):
        svg.rect(px + wgmma_acc_col(t_hi, i) * ps, py + wgmma_acc_row(t_hi, i) * ps, ps, ps, HI)
    for b in range(n // 8):
        svg.text(px + (8 * b + 4) * ps, py - 6, "%d" % b, 11, "middle", fill=MUTED)
    svg.text(px + n * ps / 2, py + 64 * ps + 18, "8-column blocks n = 0 … N/8 − 1", 11, "middle", fill=MUTED)
    # zoom frame: warp 1, block 0
    w_z = 1
    svg.rect(px - 1, py + 16 * w_z * ps - 1, 8 * ps + 2, 16 * ps + 2, "none", TEXT, 1.6)
    # ---- zoom: one warp, one block
    zx, zy, zw, zh = 548, 120, 54, 22
    svg.line(px + 8 * ps + 1, py + 16 * w_z * ps, zx - 66, zy + 4, GRID, 1, dash="4 3")
    svg.line(px + 8 * ps + 1, py + 32 * w_z * ps, zx - 66, zy + 16 * zh - 4, GRID, 1, dash="4 3")
    svg.text(zx + 4 * zw, zy - 22, "warp w, column block n: cell = lane : element index i", 13, "middle", weight="bold")
    svg.rect(zx, zy, 8 * zw, 16 * zh, warp_col[w_z][0])
    svg.open_group(font_size="11", text_anchor="middle")
    for lane in range(32):
        for e in range(4):
            r, c = wgmma_acc_row(32 * w_z + lane, e) - 16 * w_z, wgmma_acc_col(32 * w_z + lane, e)
            label = "%d:4n%s" % (lane, "+%d" % e if e else "")
            if lane != t_hi % 32:
                svg.raw_text(zx + c * zw + zw / 2, zy + r * zh + 15, label)
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="end", fill=MUTED)
    for r in range(16):
        svg.raw_text(zx - 8, zy + r * zh + 15, "16w + %d" % r)
    svg.close_group()
    svg.open_group(font_size="11", text_anchor="middle", fill=MUTED)
    for c in range(8):
        svg.raw_text(zx + c * zw + zw / 2, zy - 6, "8n+%d" % c)
    svg.close_group()
    grid_lines(svg, zx, zy, zw, zh, 8, 16)
    svg.line(zx, zy + 8 * zh, zx + 8 * zw, zy + 8 * zh, TEXT, 1.4)
    for e in range(4):
        r, c = wgmma_acc_row(t_hi, e) - 16 * w_z, wgmma_acc_col(t_hi, e)
        svg.rect(zx + c * zw + 1, zy + r * zh + 1, zw - 2, zh - 2, "none", HI, 2.2)
        svg.text(zx + c * zw + zw / 2, zy + r * zh + 15, "%d:4n%s" % (t_hi % 32, "+%d" % e if e else ""), 11,
                 "middle", weight="bold")
    # formulas and the worked example
    fy = py + 64 * ps + 60
    svg.text(24, fy, "element d[i] of thread t:   row = 16w + g + 8·((i / 2) mod 2),   column = 8·(i / 4) + 2·t4 + "
                     "(i mod 2)",
             14, weight="bold")
    svg.text(24, fy + 22, "so d[4n … 4n+3] are c0 … c3 of mma.sync's m16n8 accumulator, block n, in warp w's 16 rows",
             13, fill=MUTED)
    ey = fy + 56
    svg.text(24, ey, "Red: thread t = 37 (w = 1, lane 5, g = 1, t4 = 1): rows 17 and 25, columns 2, 3 of every block;"
             " e.g. d[6] is (25, 10), d[63] is (25, 123) at N = 128.", 12)
    svg.text(24, ey + 20, "A quad (same w and g) holds two whole rows: a row max or sum needs two shuffles (XOR 1,"
             " XOR 2).", 12)
    svg.text(24, ey + 40, "S (N = B_{c}) and O (N = D) follow the same rule: a thread's O elements lie in the rows "
                          "of its"
             " S elements, so one α per row serves both.", 12)
    assert (wgmma_acc_row(37, 6), wgmma_acc_col(37, 6)) == (25, 10)
    assert (wgmma_acc_row(37, 63), wgmma_acc_col(37, 63)) == (25, 123)
    svg.legend(24, ey + 70, [(warp_col[w], "warp %d" % w) for w in range(4)] + [((HI, HI), "thread 37")], 12, 18)
    return svg


# =============================================================================================
# swizzle_128b: the 128-byte swizzle atom, 8 rows × 8 chunks of 16 bytes, chunk ^ (row mod 8)
# =============================================================================================
def swizzled_chunk(row, chunk):
    """common/arch/sm80.cuh `swizzled` and the TMA/wgmma 128-byte mode: logical
    16-byte chunk `chunk` of row `row` is stored at physical chunk chunk ^ (row mod 8)."""
    return chunk ^ (row & 7)


def sw128_byte(r, c, rows):
    """10_hopper_wgmma's byte offset of element (r, c) of a 16-bit tile of `rows` rows."""
    return (c // 64) * rows * 128 + r * 128 + 16 * (((c % 64) // 8) ^ (r % 8)) + 2 * (c % 8)


def fig_swizzle_128b():
    assert sw128_byte(10, 77, 128) == 17722  # the lesson's worked example
    for p in range(8):  # every physical column holds 8 different logical chunks (XOR is its own inverse)
        assert sorted(swizzled_chunk(r, p) for r in range(8)) == list(range(8))
        assert all(swizzled_chunk(r, swizzled_chunk(r, p)) == p for r in range(8))
    svg = Svg(1000, 540, "The 128-byte swizzle: logical 16-byte chunk c of row r is stored at chunk c XOR (r mod 8)",
              "A swizzle atom is 8 rows of 128 bytes, each row 8 chunks of 16 bytes (8 fp16 values). Left: the "
              "logical layout, chunk c of every row in column c. Right: where the 128-byte swizzle stores them; "
              "each cell shows the logical chunk stored there. Logical chunk 0 of the 8 rows (outlined) lands in 8 "
              "different physical chunks, so 8 rows read together touch all 32 banks instead of the same 4.")
    heading(svg, "The 128-byte swizzle atom: physical chunk = logical chunk XOR (row mod 8)",
            "8 rows × 128 bytes = 1024 bytes; a chunk = 16 bytes = 8 fp16 values = 4 banks; the atom repeats every "
            "8 rows")
    cw, ch, y0 = 42, 34, 130
    lx, rx = 90, 540
    c_hi = 0
    for panel, x0 in (("logical: chunk c of row r", lx), ("physical chunk p: the logical chunk stored there", rx)):
        svg.text(x0 + 4 * cw, y0 - 40, panel, 14, "middle", weight="bold")
        for r in range(8):
            for p in range(8):
                c = p if x0 == lx else swizzled_chunk(r, p)   # XOR is its own inverse
                svg.rect(x0 + p * cw, y0 + r * ch, cw, ch, EIGHT[c], GRID, 0.6)
                svg.text(x0 + p * cw + cw / 2, y0 + r * ch + 22, "%d" % c, 13, "middle",
                         weight="bold" if c == c_hi else None)
                if c == c_hi:
                    svg.rect(x0 + p * cw + 1.5, y0 + r * ch + 1.5, cw - 3, ch - 3, "none", HI, 2.2)
        svg.rect(x0, y0, 8 * cw, 8 * ch, "none", TEXT, 1.2)
        for p in range(8):
            svg.text(x0 + p * cw + cw / 2, y0 - 8, "%d" % p, 12, "middle", fill=MUTED)
    svg.text(lx - 8, y0 - 8, "c", 12, "end", fill=MUTED)
    svg.text(rx - 8, y0 - 8, "p", 12, "end", fill=MUTED)
    for r in range(8):
        svg.text(lx - 10, y0 + r * ch + 22, "row %d" % r, 12, "end")
        svg.text(rx - 10, y0 + r * ch + 22, "%d" % r, 12, "end")
        svg.text(rx + 8 * cw + 10, y0 + r * ch + 22, "bytes %d–%d" % (128 * r, 128 * r + 127), 12, fill=MUTED)
    svg.line(lx + 8 * cw + 16, y0 + 4 * ch, rx - 24, y0 + 4 * ch, TEXT, 1.6, arrow=True)
    svg.text((lx + 8 * cw + rx) / 2 - 4, y0 + 4 * ch - 10, "c ⊕ r", 13, "middle", weight="bold")
    # banks under the physical panel
    for p in range(8):
        svg.text(rx + p * cw + cw / 2, y0 + 8 * ch + 18, "%d–%d" % (4 * p, 4 * p + 3), 11, "middle", fill=MUTED)
    svg.text(rx - 12, y0 + 8 * ch + 18, "banks", 11, "end", fill=MUTED)
    svg.text(lx + 4 * cw, y0 + 8 * ch + 18, "colour = logical chunk; unswizzled, chunk 0 of 8 rows = banks 0–3,"
             " 8 times", 11, "middle", fill=MUTED)
    ny = y0 + 8 * ch + 58
    svg.text(24, ny, "Red: logical chunk 0 of rows 0–7, what one column read (ldmatrix, wgmma) asks for: in 8 different"
             " physical chunks, all 32 banks, one wavefront.", 13)
    svg.text(24, ny + 22, "In address bits: bits 4–6 (the chunk) ^= bits 7–9 (the row within the atom); a tile "
                          "must start"
             " on a 1024-byte boundary.", 13)
    svg.text(24, ny + 44, "Element (r, c) of a 16-bit tile of R rows, 64-column blocks:  byte = (c / 64)·R·128 + r·128"
             " + 16·(((c mod 64) / 8) ⊕ (r mod 8)) + 2·(c mod 8)", 13)
    svg.text(24, ny + 66, "e.g. K_{j} at D = 128, R = 128, key r = 10, c = 77: 16384 + 1280 + 16·(1 ⊕ 2) + 10 = "
                          "byte 17722.",
             13, fill=MUTED)
    return svg


# =============================================================================================
# mbarrier_ring: a ring of S stages, full/empty barriers per stage, parities over the laps
# =============================================================================================
def ring_parities(j, stages):
    """solutions/day10-optimizations/10_hopper_wgmma.cu: tile j uses stage j % kStages; the
    consumers wait on k_full/v_full[s] for parity (j / kStages) & 1, the producer on
    k_empty/v_empty[s] for free_parity = ((j / kStages) & 1) ^ 1."""
    s, r = j % stages, j // stages
    return s, r, (r & 1) ^ 1, r & 1


def fig_mbarrier_ring():
    stages, tiles = 2, 6
    # the lesson's table (2 stages, 5 tiles): producer 1, 1, 0, 0, 1; consumers 0, 0, 1, 1, 0
    assert [ring_parities(j, 2)[2] for j in range(5)] == [1, 1, 0, 0, 1]
    assert [ring_parities(j, 2)[3] for j in range(5)] == [0, 0, 1, 1, 0]
    svg = Svg(1000, 640, "A ring of two shared-memory stages with full and empty mbarriers, and the parities each "
                         "side waits for",
              "The producer thread waits until stage s is empty, announces the tile's bytes on the stage's full "
              "barrier and lets the copy engine (TMA) fill it; the consumers wait until the full barrier's phase "
              "completes, compute, and release the stage with one arrival per warp on its empty barrier. Tile j uses "
              "stage s = j mod S in lap r = j / S. Consumers wait on full[s] for parity r mod 2, the producer on "
              "empty[s] for the opposite parity; in lap 0 that is parity 1, which a fresh barrier counts as "
              "already complete.")
    heading(svg, "mbarrier ring: S = 2 stages, full and empty barriers, parity by lap",
            "tile j → stage s = j mod S, lap r = ⌊j / S⌋;  K and V each have their own full/empty pair per stage "
            "(x = k or v)")
    # ---- the actors and the stages
    y0 = 92
    svg.box(24, y0 + 40, 160, 86, Q)
    svg.text(104, y0 + 66, "producer", 14, "middle", weight="bold", fill=Q[1])
    svg.text(104, y0 + 88, "thread 0 of", 12, "middle")
    svg.text(104, y0 + 106, "warpgroup 0", 12, "middle")
    svg.box(796, y0 + 40, 180, 86, O)
    svg.text(886, y0 + 66, "consumers", 14, "middle", weight="bold", fill=O[1])
    svg.text(886, y0 + 88, "warpgroups 1 and 2", 12, "middle")
    svg.text(886, y0 + 106, "8 warps", 12, "middle")
    svg.rect(214, y0 - 10, 472, 180, "#fbfbfb", MUTED, 1, 6, dash="5 3")
    svg.text(224, y0 + 162, "shared memory", 12, fill=MUTED)
    svg.box(228, y0 + 26, 70, 44, Q)
    svg.text(263, y0 + 53, "Q_{i}", 13, "middle", weight="bold")
    svg.box(228, y0 + 82, 70, 30, TEAL)
    svg.text(263, y0 + 102, "q_full", 12, "middle", fill=TEAL[1], weight="bold")
    for s in range(stages):
        sx, sy = 312 + s * 184, y0
        svg.rect(sx, sy, 172, 156, WHITE, TEXT, 1.2, 4)
        svg.text(sx + 86, sy + 18, "stage %d" % s, 14, "middle", weight="bold")
        svg.box(sx + 12, sy + 26, 70, 44, K)
        svg.text(sx + 47, sy + 53, "K stage", 12, "middle", weight="bold")
        svg.box(sx + 90, sy + 26, 70, 44, V)
        svg.text(sx + 125, sy + 53, "V stage", 12, "middle", weight="bold")
        svg.box(sx + 12, sy + 82, 148, 30, TEAL)
        svg.text(sx + 86, sy + 102, "k_full[%d], v_full[%d]" % (s, s), 11, "middle", fill=TEAL[1])
        svg.box(sx + 12, sy + 118, 148, 30, PINK)
        svg.text(sx + 86, sy + 138, "k_empty[%d], v_empty[%d]" % (s, s), 11, "middle", fill=PINK[1])
    # arrows: producer -> shared memory (expect_tx + TMA), shared memory -> consumers
    svg.line(184, y0 + 60, 226, y0 + 50, Q[1], 1.4, arrow=True)
    svg.text(150, y0 + 28, "expect_tx, TMA", 12, "middle", fill=Q[1])
    svg.line(682, y0 + 50, 794, y0 + 62, O[1], 1.4, arrow=True)
    svg.text(740, y0 + 46, "read", 12, "middle", fill=O[1])
    svg.line(324, y0 + 135, 186, y0 + 116, PINK[1], 1.2, dash="5 3", arrow=True)
    svg.text(205, y0 + 142, "wait", 12, "middle", fill=PINK[1])
    svg.line(794, y0 + 110, 674, y0 + 133, PINK[1], 1.2, arrow=True)
    svg.text(740, y0 + 140, "release", 12, "middle", fill=PINK[1])
    svg.line(674, y0 + 97, 794, y0 + 90, TEAL[1], 1.2, dash="5 3", arrow=True)
    svg.text(740, y0 + 86, "wait", 12, "middle", fill=TEAL[1])
    svg.text(500, y0 + 192, "full: 1 arrival (the producer's arrive.expect_tx) + the tile's bytes landing;"
             "  empty: 8 arrivals, one per consumer warp", 12, "middle", fill=MUTED)
    # ---- the table
    ty, cw, lw, rh = y0 + 226, 112, 270, 32
    tx = 24 + lw
    rows = ["tile j", "stage s = j mod 2", "lap r = ⌊j / 2⌋", "producer waits x_empty[s], parity",
            "  … which means", "consumers wait x_full[s], parity", "  … for the phase of x_full[s]"]
    for k, lab in enumerate(rows):
        svg.text(tx - 10, ty + k * rh + 21, lab, 13, "end", weight="bold" if k == 0 else None,
                 fill=MUTED if lab.startswith("  ") else TEXT)
    par_col = {0: ("#eef6ff", "#1f4e8c"), 1: ("#fff3bf", "#8a6d00")}
    for j in range(tiles):
        s, r, p_wait, c_wait = ring_parities(j, stages)
        x = tx + j * cw
        cells = [("%d" % j, None), ("%d" % s, None), ("%d" % r, None), ("%d" % p_wait, p_wait),
                 ("fresh: passes" if r == 0 else "tile %d released" % (j - stages), None),
                 ("%d" % c_wait, c_wait), ("phase %d" % r, None)]
        for k, (val, par) in enumerate(cells):
            fill = par_col[par][0] if par is not None else (S[0] if k == 0 else WHITE)
            svg.rect(x, ty + k * rh, cw, rh, fill, GRID, 0.8)
            svg.text(x + cw / 2, ty + k * rh + 21, val, 14 if k in (0, 3, 5) else 12, "middle",
                     weight="bold" if k in (0, 3, 5) else None, fill=TEXT if k != 4 or r else MUTED)
    svg.rect(tx, ty, tiles * cw, len(rows) * rh, "none", TEXT, 1.2)
    ny = ty + len(rows) * rh + 30
    svg.text(24, ny, "A barrier remembers only the parity of its phase in progress (0 after init). try_wait.parity(P)"
             " returns once the phase of parity P has completed;", 12)
    svg.text(24, ny + 18, "on a fresh barrier parity 1 counts as complete, so the producer passes the empty "
                          "barriers of lap 0."
             " The producer's parity is always the consumers' ⊕ 1.", 12)
    svg.legend(24, ny + 46, [(par_col[0], "parity 0"), (par_col[1], "parity 1"), (TEAL, "full barrier"),
                             (PINK, "empty barrier")], 12, 18)
    return svg


# =============================================================================================
# timeline_overlap and timeline_pingpong: what the tensor cores and the CUDA cores do over time
# =============================================================================================
# Durations in arbitrary units, the lesson's proportions at D = 128: an S GEMM and a P·V GEMM take
# about as long as the softmax of a tile (512 clocks each); the rescale of O and the packing of P
# are short.
T_S, T_PV, T_SM, T_PK = 2.0, 2.0, 2.0, 0.6
GEMM_S = ("#ececec", "#555555")
GEMM_PV = V
SOFTMAX = STAT
PACK = O


def _bar(svg, x0, y, scale, t0, t1, colours, label, h=30, size=12, dash=None):
    svg.rect(x0 + t0 * scale, y, (t1 - t0) * scale, h, colours[0], colours[1], 1.2, 2, dash=dash)
    if label and text_width(label, size) < (t1 - t0) * scale - 4:
        svg.text(x0 + (t0 + t1) / 2 * scale, y + h / 2 + 5, label, size, "middle")


def _time_axis(svg, x0, y, scale, t_end):
    svg.line(x0, y, x0 + t_end * scale + 10, y, MUTED, 1, arrow=True)
    svg.text(x0 + t_end * scale + 14, y + 4, "time", 11, fill=MUTED)


def overlap_schedules(tiles):
    """The serial loop and FlashAttention-3's intra-warpgroup overlap, as lists of
    (lane, t0, t1, kind, j) with lane 0 = tensor cores, 1 = the warpgroup's CUDA cores."""
    serial, t = [], 0.0
    for j in range(tiles):
        serial += [(0, t, t + T_S, "S", j), (1, t + T_S, t + T_S + T_SM, "softmax", j),
                   (1, t + T_S + T_SM, t + T_S + T_SM + T_PK, "pack", j),
                   (0, t + T_S + T_SM + T_PK, t + T_S + T_SM + T_PK + T_PV, "PV", j)]
        t += T_S + T_SM + T_PK + T_PV
    over = [(0, 0.0, T_S, "S", 0), (1, T_S, T_S + T_SM, "softmax", 0), (1, T_S + T_SM, T_S + T_SM + T_PK, "pack", 0)]
    t = T_S + T_SM + T_PK
    for j in range(1, tiles):
        # issue S_j and P_{j-1}V_{j-1}; wait_group<1> (S_j done): softmax of S_j while P·V runs;
        # wait_group<0> (P·V done): rescale O, pack P_j
        s_end = t + T_S
        pv_end = s_end + T_PV
        sm_end = s_end + T_SM
        ready = max(pv_end, sm_end)
        over += [(0, t, s_end, "S", j), (0, s_end, pv_end, "PV", j - 1), (1, s_end, sm_end, "softmax", j),
                 (1, ready, ready + T_PK, "pack", j)]
        t = ready + T_PK
    over.append((0, t, t + T_PV, "PV", tiles - 1))
    return serial, over


def _label(kind, j):
    return {"S": "S_{%d}", "PV": "P_{%d}V_{%d}", "softmax": "softmax S_{%d}", "pack": "P_{%d}"}[kind].replace(
        "%d", str(j))


def fig_timeline_overlap():
    tiles = 3
    serial, over = overlap_schedules(tiles)
    t_end = max(e[2] for e in serial)
    assert max(e[2] for e in over) < t_end
    svg = Svg(1000, 470, "Hiding the softmax under the GEMMs: one consumer warpgroup, serial and overlapped",
              "Top: the serial loop; per tile the tensor cores compute S_j, then wait while the warpgroup runs the "
              "softmax, then compute P_j V_j. Bottom: FlashAttention-3's intra-warpgroup overlap; the warpgroup "
              "issues S_j and P_(j-1) V_(j-1) back to back, waits for S_j only (wait_group 1), runs the softmax of "
              "S_j while the tensor cores compute P_(j-1) V_(j-1), then (wait_group 0) rescales O and packs P_j. "
              "Three tiles take visibly less time.")
    heading(svg, "Hiding the softmax under the GEMMs (one consumer warpgroup, 3 key tiles)",
            "durations in the proportions of D = 128: S GEMM ≈ P·V GEMM ≈ softmax of a tile; rescale and pack short")
    x0, scale = 170, 39
    for k, (title, sched, y) in enumerate((("serial (kSerial, kTwoStages)", serial, 96),
                                           ("overlapped (kOverlapped)", over, 250))):
        svg.text(24, y, title, 14, weight="bold")
        lanes_y = (y + 14, y + 56)
        svg.text(x0 - 10, lanes_y[0] + 20, "tensor cores", 13, "end")
        svg.text(x0 - 10, lanes_y[1] + 20, "warpgroup (CUDA)", 13, "end")
        for lane, t0, t1, kind, j in sched:
            colours = {"S": GEMM_S, "PV": GEMM_PV, "softmax": SOFTMAX, "pack": PACK}[kind]
            _bar(svg, x0, lanes_y[lane], scale, t0, t1, colours, _label(kind, j))
        end = max(e[2] for e in sched)
        _time_axis(svg, x0, lanes_y[1] + 42, scale, t_end)
        svg.line(x0 + end * scale, lanes_y[0] - 6, x0 + end * scale, lanes_y[1] + 42, HI, 1.4, dash="4 3")
        svg.text(x0 + end * scale + 4, lanes_y[0] - 8, "done", 12, fill=HI)
    # the waits of iteration 1 of the overlapped schedule
    s1 = [e for e in over if e[3] == "S" and e[4] == 1][0]
    pv0 = [e for e in over if e[3] == "PV" and e[4] == 0][0]
    for t, lab in ((s1[1], "issue S_{1}, P_{0}V_{0}"), (s1[2], "wait_group<1>"), (pv0[2], "wait_group<0>")):
        svg.line(x0 + t * scale, 250 + 6, x0 + t * scale, 250 + 14 + 86, TEXT, 1, dash="2 2")
    svg.text(x0 + s1[1] * scale - 4, 250 - 2 + 2, "issue S_{1}, P_{0}V_{0}", 11, "end", fill=MUTED)
    svg.text(x0 + s1[2] * scale + 4, 250 - 2 + 2, "wait_group<1>: S_{1} done", 11, fill=MUTED)
    svg.text(x0 + pv0[2] * scale + 4, 250 + 112 + 12, "wait_group<0>: P_{0}V_{0} done", 11, fill=MUTED)
    svg.legend(24, 420, [(GEMM_S, "S_{j} = Q_{i} K_{j}^{T} (wgmma)"), (GEMM_PV, "O_{i} += P_{j} V_{j} (wgmma)"),
                         (SOFTMAX, "softmax of S_{j}: mask, max, α, exp2"), (PACK, "O ← α·O; P_{j} → A registers")],
               12, 18)
    svg.text(24, 448, "While P_{j−1}V_{j−1} runs, the softmax may not touch O or the P registers: that group reads "
                      "them."
             " S_{j}, P_{j−1} and O are live at once.", 12, fill=MUTED)
    return svg


def pingpong_schedule(iterations, t_sm):
    """The two consumers of 10_hopper_wgmma under kPingPong (with the overlapped loop): consumer c
    may issue iteration k only after the other consumer has issued its previous turn (named
    barriers 3 + c: wait, 3 + (1 - c): arrive), and the tensor cores run the GEMMs in issue order.
    Returns (issues, gemms, cuda): issues[(c, k)] = time; gemms = (c, k, kind, t0, t1) on the tensor
    cores; cuda = (c, k, kind, t0, t1) on consumer c's own CUDA cores."""
    ready, last_issue, tc = [0.0, 0.0], [None, None], 0.0
    issues, gemms, cuda = {}, [], []
    for k in range(iterations):
        for c in (0, 1):
            other = last_issue[1 - c]
            issue = max(ready[c], other if other is not None else 0.0)
            s0 = max(issue, tc)
            s1 = s0 + T_S
            p1 = s1 + T_PV
            tc = p1
            sm1 = s1 + t_sm
            pk0 = max(p1, sm1)
            ready[c] = pk0 + T_PK
            last_issue[c] = issue
            issues[(c, k)] = issue
            gemms += [(c, k, "S", s0, s1), (c, k, "PV", s1, p1)]
            cuda += [(c, k, "softmax", s1, sm1), (c, k, "pack", pk0, pk0 + T_PK)]
    return issues, gemms, cuda


def fig_timeline_pingpong():
    t_sm = 3.0   # a softmax a little longer than one GEMM (D = 64: "as long as the GEMMs")
    issues, gemms, cuda = pingpong_schedule(5, t_sm)
    # the tensor cores never idle and alternate between the consumers
    g_sorted = sorted(gemms, key=lambda e: e[3])
    assert all(abs(a[4] - b[3]) < 1e-9 for a, b in zip(g_sorted, g_sorted[1:]))
    assert [e[0] for e in g_sorted[::2]] == [0, 1] * 5
    t_end = 22.0
    svg = Svg(1000, 490, "Ping-pong: two consumer warpgroups take turns issuing their GEMMs",
              "The tensor cores run consumer 0's S_j and P_(j-1) V_(j-1), then consumer 1's, then consumer 0's next "
              "pair, without a gap. A consumer issues its pair only once the other has issued its own (named barrier "
              "3 is consumer 0's turn, 4 consumer 1's: wait on your own, arrive on the other's), so each consumer's "
              "softmax runs while the other consumer's GEMMs occupy the tensor cores.")
    heading(svg, "Ping-pong: two consumer warpgroups take turns on the tensor cores",
            "steady state of the overlapped loop with kPingPong; each consumer: issue S_{j} and P_{j−1}V_{j−1}, "
            "softmax of S_{j}, rescale O and pack P_{j}")
    x0, scale = 150, 36
    lanes = {0: 100, "tc": 190, 1: 280}
    svg.text(x0 - 10, lanes["tc"] + 20, "tensor cores", 13, "end", weight="bold")
    svg.text(x0 - 10, lanes[0] + 14, "consumer 0", 13, "end", weight="bold", fill=TEAL[1])
    svg.text(x0 - 10, lanes[0] + 30, "(warpgroup 1)", 12, "end", fill=MUTED)
    svg.text(x0 - 10, lanes[1] + 14, "consumer 1", 13, "end", weight="bold", fill=PINK[1])
    svg.text(x0 - 10, lanes[1] + 30, "(warpgroup 2)", 12, "end", fill=MUTED)
    cons = {0: TEAL, 1: PINK}
    jl = lambda k, d=0: "j" if k + d == 0 else ("j+%d" % (k + d) if k + d > 0 else "j−%d" % -(k + d))
    for c, k, kind, t0, t1 in gemms:
        if t0 >= t_end:
            continue
        t1 = min(t1, t_end)
        lab = "S_{%s}" % jl(k) if kind == "S" else "P_{%s}V_{%s}" % (jl(k, -1), jl(k, -1))
        _bar(svg, x0, lanes["tc"], scale, t0, t1, cons[c], lab)
    for c, k, kind, t0, t1 in cuda:
        if t0 >= t_end:
            continue
        t1 = min(t1, t_end)
        colours = SOFTMAX if kind == "softmax" else PACK
        _bar(svg, x0, lanes[c], scale, t0, t1, colours, "softmax S_{%s}" % jl(k) if kind == "softmax" else "")
    # issues: a marker on the consumer's row, a dotted line to where its GEMMs start
    for (c, k), t in sorted(issues.items()):
        if t >= t_end:
            continue
        x = x0 + t * scale
        s0 = [e[3] for e in gemms if e[0] == c and e[1] == k and e[2] == "S"][0]
        if s0 >= t_end:
            continue
        if c == 0:
            y = lanes[0] + 34
            svg.poly([(x - 6, y), (x + 6, y), (x, y + 8)], cons[c][1])
            svg.line(x, y + 8, x0 + s0 * scale + 2, lanes["tc"] - 2, cons[c][1], 1.1, dash="2 3")
        else:
            y = lanes[1] - 4
            svg.poly([(x - 6, y), (x + 6, y), (x, y - 8)], cons[c][1])
            svg.line(x, y - 8, x0 + s0 * scale + 2, lanes["tc"] + 32, cons[c][1], 1.1, dash="2 3")
    _time_axis(svg, x0, lanes[1] + 46, scale, t_end)
    ly = lanes[1] + 84
    svg.legend(24, ly, [(TEAL, "consumer 0's GEMMs"), (PINK, "consumer 1's GEMMs"), (SOFTMAX, "softmax"),
                        (PACK, "O ← α·O, pack P")], 12, 18)
    svg.poly([(720, ly - 11), (732, ly - 11), (726, ly - 3)], TEXT)
    svg.text(738, ly, "issue: S_{j} and P_{j−1}V_{j−1}", 12)
    svg.text(24, ly + 28, "A turn: consumer c waits on named barrier 3 + c (bar.sync, 256 threads), issues its two "
                          "GEMMs,"
             " and arrives on 3 + (1 − c) (bar.arrive): the other's turn.", 12)
    svg.text(24, ly + 46, "The issues alternate, so the GEMMs reach the tensor cores in the order C0, C1, C0, …"
             " (dotted: issued, then queued),", 12)
    svg.text(24, ly + 64, "and one consumer's softmax runs while the other consumer's GEMMs occupy the tensor "
                          "cores.", 12)
    svg.text(24, ly + 88, "Durations are schematic (softmax 1.5× one GEMM); the waits on the K/V mbarriers come before"
             " the turn, so no consumer holds the turn while a copy lands.", 12, fill=MUTED)
    return svg


# =============================================================================================
# backward_two_sides: a key tile's dK_j/dV_j (owned, in registers) and the query tiles' dQ_i
# =============================================================================================
def fig_backward_two_sides():
    tr, tc, cell = 6, 6, 46
    j_hi, i_hi = 2, 4
    svg = Svg(1000, 610, "Flash backward: one block per key tile accumulates dK_j and dV_j; dQ_i is summed across "
                         "blocks",
              "Left: the grid of (query tile i, key tile j) pairs under a causal mask. The block of key tile j walks "
              "down its column over the query tiles that see it and keeps dK_j and dV_j in registers: sums over i, "
              "owned by one block, written once. dQ_i is a sum along row i, over key tiles, that is over different "
              "blocks: atomic adds into dQ, or a second pass with the query tile outside. Right: the per-tile work of "
              "the block's two sides, the V side (P_ij, dV_j) and the K side (dS_ij, dK_j).")
    heading(svg, "Flash backward: the key tile outside, dQ accumulated across blocks",
            "FlashAttention-2's backward: one block per (batch, KV head, key tile K_{j}, V_{j}); causal: only "
            "query tiles i ≥ the first that sees K_{j}")
    gx, gy = 110, 120
    for i in range(tr):
        for j in range(tc):
            vis = i >= j   # causal, square tiles: tile (i, j) holds a visible pair iff i ≥ j
            fill = WHITE if vis else OFF[0]
            svg.rect(gx + j * cell, gy + i * cell, cell, cell, fill, GRID, 0.8)
            if not vis:
                svg.text(gx + j * cell + cell / 2, gy + i * cell + cell / 2 + 4, "·", 12, "middle", fill=MUTED)
    for i in range(j_hi, tr):   # the column this block walks
        svg.rect(gx + j_hi * cell + 3, gy + i * cell + 3, cell - 6, cell - 6, K[0], K[1], 1.2, 2)
    for j in range(0, i_hi + 1):  # the row dQ_i sums over
        svg.rect(gx + j * cell + 8, gy + i_hi * cell + 8, cell - 16, cell - 16, "none", O[1], 1.6, 2, dash="3 2")
    svg.rect(gx, gy, tc * cell, tr * cell, "none", TEXT, 1.2)
    for j in range(tc):
        svg.text(gx + j * cell + cell / 2, gy - 8, "K_{%s}" % ("j" if j == j_hi else j), 12, "middle",
                 weight="bold" if j == j_hi else None, fill=K[1] if j == j_hi else MUTED)
    for i in range(tr):
        svg.text(gx - 8, gy + i * cell + cell / 2 + 5, "Q_{%s}" % ("i" if i == i_hi else i), 12, "end",
                 weight="bold" if i == i_hi else None, fill=Q[1] if i == i_hi else MUTED)
    svg.line(gx + j_hi * cell + cell / 2, gy + j_hi * cell + 8, gx + j_hi * cell + cell / 2, gy + tr * cell - 6, K[1],
             1.6, arrow=True)
    gb = gy + tr * cell
    svg.text(gx, gb + 24, "column j: one block, i = first … end − 1", 12, fill=K[1], weight="bold")
    svg.text(gx, gb + 42, "dK_{j}, dV_{j} in its registers: no atomics,", 12, fill=K[1])
    svg.text(gx, gb + 58, "bit-identical on every run", 12, fill=K[1])
    svg.text(gx, gb + 82, "row i (dashed): dQ_{i} = Σ_{j} over key tiles,", 12, fill=O[1], weight="bold")
    svg.text(gx, gb + 100, "i.e. over blocks: fp32 atomics (FA2, here)", 12, fill=O[1])
    svg.text(gx, gb + 116, "or a 2nd pass with the query tile outside", 12, fill=O[1])
    # ---- the block's work per query tile
    bx, by, bw = 450, 100, 526
    svg.rect(bx, by, bw, 420, WHITE, TEXT, 1.2, 4)
    svg.text(bx + bw / 2, by + 22, "block (b, hk, j), for each query tile i it meets:", 14, "middle", weight="bold")
    svg.box(bx + 16, by + 36, bw - 32, 34, S)
    svg.text(bx + bw / 2, by + 58, "load Q_{i}, dO_{i}, L_{i}, D_{i}  (K_{j}, V_{j} loaded once, before the loop)", 13,
             "middle")
    col_w = (bw - 48) / 2
    sides = [("V side: P_{ij} → dV_{j}", V, ["S_{ij} = scale · Q_{i} K_{j}^{T}", "P_{ij} = exp(S_{ij} − L_{i})",
                                             "", "dV_{j} += P_{ij}^{T} dO_{i}"]),
             ("K side: dS_{ij} → dK_{j}", K, ["dP_{ij} = dO_{i} V_{j}^{T}", "",
                                             "dS_{ij} = P_{ij} ∘ (dP_{ij} − D_{i})", "dK_{j} += dS_{ij}^{T} Q_{i}"])]
    for k, (title, colours, lines) in enumerate(sides):
        x = bx + 16 + k * (col_w + 16)
        svg.rect(x, by + 84, col_w, 236, colours[0], colours[1], 1.2, 4)
        svg.text(x + col_w / 2, by + 106, title, 13, "middle", weight="bold", fill=colours[1])
        for n, line in enumerate(lines):
            if line:
                svg.rect(x + 10, by + 122 + n * 48, col_w - 20, 34, WHITE, colours[1], 1.6 if n == 3 else 0.8, 3)
                svg.text(x + col_w / 2, by + 144 + n * 48, line, 13, "middle", weight="bold" if n == 3 else None)
    xl = bx + 16 + col_w
    svg.line(xl - 10, by + 186, xl + 26, by + 218, TEXT, 1.3, arrow=True)
    svg.text(xl + 8, by + 184, "P_{ij}", 12, "middle")
    svg.text(bx + bw / 2, by + 340, "dV_{j}, dK_{j} in registers, summed over every i (and the group's"
             " query heads)", 12, "middle", fill=MUTED)
    svg.box(bx + 16, by + 356, bw - 32, 48, O)
    svg.text(bx + bw / 2, by + 376, "dQ_{i} += scale · dS_{ij} K_{j}", 13, "middle", weight="bold")
    svg.text(bx + bw / 2, by + 395, "atomic adds into dQ in global memory (dQ cleared first)", 12, "middle")
    svg.text(bx, by + 444, "before: D_{i} = rowsum(dO_{i} ∘ O_{i}) (a preprocessing kernel); L_{i} = m_{i} + ln ℓ_{i}"
             " from the forward", 12)
    svg.text(bx, by + 462, "after the loop: write dV_{j} and scale · dK_{j}, once", 12)
    svg.legend(24, 594, [(K, "key tile j: dK_{j}, K side"), (V, "V side: P_{ij}, dV_{j}"), (O, "dQ_{i}: across blocks"),
                         (OFF, "causal: skipped")], 12, 18)
    return svg


# =============================================================================================
# sliding_window_band: the band of width w, the tiles each query tile visits, full and partial
# =============================================================================================
def window_band_tiles(q0, q_last, off, w, seq_k, bc):
    """solutions/day10-optimizations/02_sliding_window.cu, window_band_tiles: (first, count)."""
    lo, hi = max(q0 + off - w, 0), min(q_last + off, seq_k - 1)
    return lo // bc, (0 if hi < lo else hi // bc - lo // bc + 1)


def window_tile_is_full(kv0, q0, q_last, off, w, bc):
    """solutions/day10-optimizations/02_sliding_window.cu, window_tile_is_full."""
    return kv0 + bc - 1 <= q0 + off and kv0 >= q_last + off - w


def fig_sliding_window_band():
    n, w, b = 32, 13, 4
    off = 0
    visible = lambda i, j: i + off - w <= j <= i + off
    classes = {}
    for qt in range(n // b):
        q0, q_last = qt * b, qt * b + b - 1
        first, count = window_band_tiles(q0, q_last, off, w, n, b)
        for kt in range(n // b):
            if first <= kt < first + count:
                classes[(qt, kt)] = "full" if window_tile_is_full(kt * b, q0, q_last, off, w, b) else "partial"
            else:
                classes[(qt, kt)] = "skip"
                # a skipped tile holds no visible pair
                assert not any(visible(i, j) for i in range(q0, q_last + 1) for j in range(kt * b, kt * b + b))
            if classes[(qt, kt)] == "full":
                assert all(visible(i, j) for i in range(q0, q_last + 1) for j in range(kt * b, kt * b + b))
    # the lesson's picture: query tile 5 visits K_1 … K_5 as part, part, full, full, part
    assert [classes[(5, k)] for k in range(8)] == ["skip", "partial", "partial", "full", "full", "partial",
                                                   "skip", "skip"]
    svg = Svg(1000, 560, "Sliding-window attention: the band of visible keys and the key tiles each query tile visits",
              "A 32 x 32 score matrix, window w = 13, tiles of 4 x 4, bottom-right aligned (off = 0). Query i sees "
              "keys i - w to i (w + 1 keys). Each query tile visits only the key tiles its band touches: green tiles "
              "are full (every pair visible, no mask), orange tiles partial (the per-element mask runs), white tiles "
              "are skipped. Query tile 5 (rows 20 to 23) visits K_1 to K_5: partial, partial, full, full, partial.")
    heading(svg, "Sliding window: key j visible to query i iff i + off − w ≤ j ≤ i + off",
            "Nq = Nk = 32 (off = 0), w = 13 (w + 1 = 14 keys a row), B_{r} = B_{c} = 4;  dots = visible pairs")
    cs, gx, gy = 12, 110, 96
    tile_fill = {"full": V[0], "partial": K[0], "skip": WHITE}
    for (qt, kt), cl in sorted(classes.items()):
        svg.rect(gx + kt * b * cs, gy + qt * b * cs, b * cs, b * cs, tile_fill[cl])
    d = ""
    for i in range(n):
        for j in range(n):
            if visible(i, j):
                d += "M%s,%sh6v6h-6z" % (num(gx + j * cs + 3), num(gy + i * cs + 3))
    svg.path(d, "none", 0, fill=Q[1])
    d = "".join("M%s,%sV%s" % (num(gx + k * b * cs), num(gy), num(gy + n * cs)) for k in range(1, n // b))
    d += "".join("M%s,%sH%s" % (num(gx), num(gy + k * b * cs), num(gx + n * cs)) for k in range(1, n // b))
    svg.path(d, GRID, 1)
    svg.rect(gx, gy, n * cs, n * cs, "none", TEXT, 1.2)
    for k in range(n // b):
        svg.text(gx + (k + 0.5) * b * cs, gy - 8, "K_{%d}" % k, 12, "middle", fill=MUTED)
        svg.text(gx - 8, gy + (k + 0.5) * b * cs + 5, "Q_{%d}" % k, 12, "end", fill=HI if k == 5 else MUTED,
                 weight="bold" if k == 5 else None)
    svg.text(gx + n * cs / 2, gy + n * cs + 22, "key j →", 12, "middle", fill=MUTED)
    svg.text(gx - 8, gy + n * cs + 22, "query i ↓", 12, "end", fill=MUTED)
    # query tile 5
    svg.rect(gx - 2, gy + 5 * b * cs - 1, n * cs + 4, b * cs + 2, "none", HI, 2)
    # the two edges of the band
    svg.line(gx, gy, gx + n * cs, gy + n * cs, TEXT, 1, dash="4 3")
    svg.line(gx, gy + w * cs, gx + (n - w) * cs, gy + n * cs, TEXT, 1, dash="4 3")
    svg.text(gx + 20 * cs + 6, gy + 14 * cs, "diagonal j = i + off", 12)
    svg.rect(gx + 2, gy + 28.4 * cs, text_width("j = i + off − w", 12) + 6, 2.9 * cs, WHITE)
    svg.text(gx + 4, gy + 29.6 * cs, "window edge", 12)
    svg.text(gx + 4, gy + 31 * cs, "j = i + off − w", 12)
    # the explanation on the right
    ex = gx + n * cs + 40
    svg.text(ex, 110, "Query tile 5 (rows 20 … 23):", 14, weight="bold", fill=HI)
    svg.text(ex, 134, "band = [q0 + off − w, q_last + off] = [7, 23]", 13)
    svg.text(ex, 156, "tiles ⌊7 / 4⌋ = 1 … ⌊23 / 4⌋ = 5: five of eight", 13)
    row = ["skip", "part", "part", "full", "full", "part", "skip", "skip"]
    for k, cl in enumerate(row):
        x = ex + k * 54
        fill = {"skip": WHITE, "part": K[0], "full": V[0]}[cl]
        svg.rect(x, 172, 50, 26, fill, GRID, 1)
        svg.text(x + 25, 190, cl, 12, "middle")
        svg.text(x + 25, 214, "K_{%d}" % k, 12, "middle", fill=MUTED)
    lines = [("full", "every row sees every key: no mask, as non-causal"),
             ("", "tile ends ≤ q0 + off (first row's diagonal) and"),
             ("", "starts ≥ q_last + off − w (last row's window edge)"),
             ("partial", "one edge cuts it: the element test runs"),
             ("skip", "no visible pair: never loaded")]
    y = 250
    for name, text in lines:
        if name:
            y += 8
            svg.text(ex, y, name, 13, weight="bold")
        svg.text(ex + 70, y, text, 13)
        y += 22
    svg.text(ex, y + 18, "Work per query tile ≈ (w + B_{r}) / B_{c} + 1 tiles,", 13)
    svg.text(ex, y + 38, "constant in N: O(N·w) instead of O(N²).", 13)
    svg.legend(24, 540, [(V, "full tile"), (K, "partial tile"), ((WHITE, GRID), "skipped tile"),
                         ((Q[1], Q[1]), "visible pair (i, j)")], 12, 20)
    return svg


# =============================================================================================
# block_sparse_layout: BSR row pointers and column indices over the block grid
# =============================================================================================
def fig_block_sparse_layout():
    # 03_block_sparse's first example: 4 × 4 blocks of 64 × 64, a band of radius 1 (local_band)
    radius, nb = 1, 4
    layout = {r: [c for c in range(nb) if abs(c - r) <= radius] for r in range(nb)}
    row_ptr, col_idx = [0], []
    for r in range(nb):
        col_idx += layout[r]
        row_ptr.append(len(col_idx))
    assert row_ptr == [0, 2, 5, 8, 10] and col_idx == [0, 1, 0, 1, 2, 1, 2, 3, 2, 3]
    r_hi = 2
    hi_fill = "#b9d3f0"
    svg = Svg(1000, 515, "Block-sparse attention: a BSR layout of listed 64 x 64 blocks, row pointers and column "
                         "indices",
              "A 4 x 4 grid of 64 x 64 blocks with a band of radius 1: query block r lists key blocks r - 1 to r + 1. "
              "col_idx holds the listed key-block ids row after row, ascending: 0 1 | 0 1 2 | 1 2 3 | 2 3; "
              "row_ptr = 0, 2, 5, 8, 10 says where each row's entries begin: row r owns col_idx[row_ptr[r]] up to, "
              "not including, col_idx[row_ptr[r+1]]. Row 2 owns entries 5, 6, 7, key blocks 1, 2, 3. Blocks not "
              "listed are never loaded.")
    heading(svg, "Block-sparse attention: the BSR layout over the block grid",
            "4 × 4 blocks of 64 × 64, a band of radius 1 (query block r sees key blocks r − 1 … r + 1);  x = listed")
    bs, gx, gy = 64, 100, 110
    for r in range(nb):
        for c in range(nb):
            listed = c in layout[r]
            fill = (hi_fill if r == r_hi else Q[0]) if listed else WHITE
            svg.rect(gx + c * bs, gy + r * bs, bs, bs, fill, GRID, 1)
            if listed:
                svg.text(gx + c * bs + bs / 2, gy + r * bs + bs / 2 + 6, "x", 16, "middle", weight="bold", fill=Q[1])
    svg.rect(gx, gy, nb * bs, nb * bs, "none", TEXT, 1.2)
    svg.rect(gx - 3, gy + r_hi * bs - 3, nb * bs + 6, bs + 6, "none", HI, 2)
    for c in range(nb):
        svg.text(gx + c * bs + bs / 2, gy - 8, "c = %d" % c, 12, "middle", fill=MUTED)
    for r in range(nb):
        svg.text(gx - 8, gy + r * bs + bs / 2 + 5, "r = %d" % r, 12, "end", fill=HI if r == r_hi else MUTED,
                 weight="bold" if r == r_hi else None)
    svg.text(gx + 2 * bs, gy - 30, "key block c", 12, "middle", fill=MUTED)
    svg.text(gx - 50, gy - 8, "query block r", 12, "middle", fill=MUTED)
    # the arrays
    ax, cw = 430, 46
    ay_idx, ay_col, ay_ptr = 130, 172, 300
    svg.text(ax - 12, ay_idx + 4, "index e", 12, "end", fill=MUTED)
    svg.text(ax - 12, ay_col + 22, "col_idx", 14, "end", weight="bold")
    for e, c in enumerate(col_idx):
        row = max(r for r in range(nb) if row_ptr[r] <= e)
        hi = row == r_hi
        svg.text(ax + e * cw + cw / 2, ay_idx + 4, "%d" % e, 12, "middle", fill=MUTED)
        svg.rect(ax + e * cw, ay_col, cw, 34, hi_fill if hi else Q[0], HI if hi else Q[1], 2 if hi else 1)
        svg.text(ax + e * cw + cw / 2, ay_col + 23, "%d" % c, 15, "middle", weight="bold" if hi else None)
    svg.text(ax + len(col_idx) * cw + 8, ay_idx + 4, "nnz = 10", 12, fill=MUTED)
    for r in range(nb):
        brace_h(svg, ax + row_ptr[r] * cw + 3, ax + row_ptr[r + 1] * cw - 3, ay_col + 40, "row %d" % r, 12,
                colour=HI if r == r_hi else MUTED)
    svg.text(ax - 12, ay_ptr + 22, "row_ptr", 14, "end", weight="bold")
    for r, pv in enumerate(row_ptr):
        x = ax + r * (cw + 52)
        hi = r in (r_hi, r_hi + 1)
        svg.rect(x, ay_ptr, cw, 34, STAT[0], HI if hi else STAT[1], 2 if hi else 1)
        svg.text(x + cw / 2, ay_ptr + 23, "%d" % pv, 15, "middle", weight="bold" if hi else None)
        svg.text(x + cw / 2, ay_ptr + 52, "[%d]" % r, 12, "middle", fill=MUTED)
        tx = ax + pv * cw
        svg.line(x + cw / 2, ay_ptr - 2, tx + 2, ay_col + 62 if pv < len(col_idx) else ay_col + 36,
                 HI if hi else STAT[1], 1.6 if hi else 1, dash=None if hi else "3 3", arrow=True)
    ey = gy + nb * bs + 46
    svg.text(24, ey, "Query block 2: entries e = row_ptr[2] … row_ptr[3] − 1 = 5, 6, 7 → key blocks"
             " col_idx[5], col_idx[6], col_idx[7] = 1, 2, 3; block 0 is never loaded.", 13)
    svg.text(24, ey + 22, "row_ptr[r + 1] − row_ptr[r] = FlexAttention's kv_num_blocks[r]; the row's slice of"
             " col_idx = kv_indices[r].", 13, fill=MUTED)
    svg.text(24, ey + 44, "An empty row has row_ptr[r] = row_ptr[r + 1].", 13, fill=MUTED)
    svg.legend(24, ey + 76, [(Q, "listed block (loaded, in col_idx order)"),
                             ((WHITE, GRID), "not listed: never loaded"),
                             (STAT, "row_ptr: where row r's entries begin")], 12, 18)
    return svg


# =============================================================================================
# rope_rotation: NeoX (half-split) and GPT-J (interleaved) pairing; the rotation of one pair
# =============================================================================================
def rope_pair(layout, i, d):
    """common/reference_rope.h: pair i's elements (a, b), a gets cos: NeoX a = i, b = i + D/2;
    GPT-J a = 2i, b = 2i + 1."""
    return (i, i + d // 2) if layout == "neox" else (2 * i, 2 * i + 1)


def fig_rope_rotation():
    d = 8
    pair_col = [("#dbe8f7", "#1f4e8c"), ("#fde3c8", "#b35900"), ("#d8f0d8", "#2e7d32"), ("#e8dcf3", "#5e3596")]
    # the lesson's worked example (D = 4, base 100, m = 2, x = (1, 2, 3, 4))
    x = [1.0, 2.0, 3.0, 4.0]
    theta = [100.0 ** (-2.0 * i / 4) for i in range(2)]
    for layout, want in (("neox", [-3.14404, 1.16546, -0.33914, 4.31761]),
                         ("gptj", [-2.23474, 0.07700, 2.14553, 4.51628])):
        y = [0.0] * 4
        for i in range(2):
            a, b = rope_pair(layout, i, 4)
            ang = 2 * theta[i]
            y[a] = x[a] * math.cos(ang) - x[b] * math.sin(ang)
            y[b] = x[a] * math.sin(ang) + x[b] * math.cos(ang)
        assert all(abs(u - v) < 2e-5 for u, v in zip(y, want))  # the lesson works with 5-digit cos, sin
    svg = Svg(1000, 540, "RoPE: which two dimensions form a rotated pair, NeoX (half-split) against GPT-J "
                         "(interleaved)",
              "For D = 8 the head vector has 4 pairs. NeoX pairs element i with element i + D/2: (0, 4), (1, 5), "
              "(2, 6), "
              "(3, 7). GPT-J pairs neighbours: (0, 1), (2, 3), (4, 5), (6, 7). Either way pair i is rotated by the "
              "angle m theta_i at position m, theta_i = base^(-2i/D): a goes to a cos - b sin, b to a sin + b cos. "
              "Pair 0 turns fastest. The rotation is the same; only the addressing differs.")
    heading(svg, "RoPE: two layouts, one rotation",
            "D = 8: pairs i = 0 … 3; a_{i} gets cos, b_{i} gets sin; colour = pair i (rotated by m·θ_{i}, θ_{i} = "
            "base^{−2i/D})")
    cw, x0 = 62, 200
    for k, (name, layout, y) in enumerate((("NeoX (half-split)", "neox", 120), ("GPT-J (interleaved)", "gptj", 280))):
        svg.text(x0 - 16, y + 26, name, 14, "end", weight="bold")
        label = {}
        for i in range(d // 2):
            a, b = rope_pair(layout, i, d)
            label[a], label[b] = ("a_{%d}" % i, i), ("b_{%d}" % i, i)
        for e in range(d):
            lab, i = label[e]
            svg.rect(x0 + e * cw, y, cw, 40, pair_col[i][0], pair_col[i][1], 1.2)
            svg.text(x0 + e * cw + cw / 2, y + 26, lab, 15, "middle", weight="bold", fill=pair_col[i][1])
            svg.text(x0 + e * cw + cw / 2, y - 8, "%d" % e, 12, "middle", fill=MUTED)
        # arcs joining the pairs, under the row
        for i in range(d // 2):
            a, b = rope_pair(layout, i, d)
            xa, xb = x0 + a * cw + cw / 2, x0 + b * cw + cw / 2
            depth = 20 + 9 * i if layout == "neox" else 20
            svg.path("M%s,%s C%s,%s %s,%s %s,%s" % (num(xa), num(y + 42), num(xa), num(y + 42 + depth),
                                                   num(xb), num(y + 42 + depth), num(xb), num(y + 42)),
                     pair_col[i][1], 1.6)
        svg.text(x0 + d * cw + 14, y + 18, "pair i = (i, i + D/2)" if layout == "neox" else "pair i = (2i, 2i + 1)", 13)
        svg.text(x0 + d * cw + 14, y + 36, "GPT-NeoX; HF's rotate_half" if layout == "neox" else
                 "GPT-J; Meta's original Llama", 12, fill=MUTED)
    svg.text(x0 - 16, 100, "element", 12, "end", fill=MUTED)
    # the rotation of one pair
    cx, cy, r = 160, 450, 62
    svg.circle(cx, cy, r, "none", GRID, 1)
    svg.line(cx - r - 14, cy, cx + r + 20, cy, MUTED, 1, arrow=True)
    svg.line(cx, cy + r + 10, cx, cy - r - 16, MUTED, 1, arrow=True)
    svg.text(cx + r + 24, cy + 5, "a", 13, fill=MUTED)
    svg.text(cx - 8, cy - r - 10, "b", 13, "end", fill=MUTED)
    a0 = math.radians(15)
    a1 = a0 + math.radians(60)
    p0 = (cx + r * math.cos(a0), cy - r * math.sin(a0))
    p1 = (cx + r * math.cos(a1), cy - r * math.sin(a1))
    svg.line(cx, cy, p0[0], p0[1], pair_col[1][1], 1.6, arrow=True)
    svg.line(cx, cy, p1[0], p1[1], pair_col[1][1], 2.2, arrow=True)
    ar = 30
    svg.path("M%s,%s A%s,%s 0 0 0 %s,%s" % (num(cx + ar * math.cos(a0)), num(cy - ar * math.sin(a0)), num(ar), num(ar),
                                          num(cx + ar * math.cos(a1)), num(cy - ar * math.sin(a1))),
             TEXT, 1, arrow=True)
    svg.text(cx + 34, cy - 30, "mθ_{i}", 12)
    svg.text(p0[0] + 8, p0[1] + 4, "(x_{a}, x_{b})", 12)
    svg.text(p1[0] + 8, p1[1] - 4, "(y_{a}, y_{b})", 12)
    tx = 330
    svg.text(tx, 426, "y_{a} = x_{a} cos(mθ_{i}) − x_{b} sin(mθ_{i})", 15)
    svg.text(tx, 452, "y_{b} = x_{a} sin(mθ_{i}) + x_{b} cos(mθ_{i})", 15)
    svg.text(tx, 484, "Pair 0 turns 1 rad per position, the last ≈ 1/base: a bank of clocks; q·k then depends on"
             " m − n only.", 12, fill=MUTED)
    svg.text(tx, 502, "A checkpoint run with the other layout rotates elements with the wrong partner:"
             " wrong logits, no crash.", 12, fill=MUTED)
    return svg


# =============================================================================================
# streams_timeline: H2D, kernel, D2H of each chunk, one stream against three (day 01 · 05)
# =============================================================================================
def stream_schedule(chunks, streams):
    """Each chunk's copy in, kernel and copy out, in order on stream c mod S; one copy engine per
    direction and the SM array each run one step at a time (unit steps). Returns
    {(engine, chunk): start}."""
    free = {"H2D": 0, "kernel": 0, "D2H": 0}
    stream_free = [0] * streams
    start = {}
    for c in range(chunks):
        t = stream_free[c % streams]
        for eng in ("H2D", "kernel", "D2H"):
            t = max(t, free[eng])
            start[(eng, c)] = t
            t += 1
            free[eng] = t
        stream_free[c % streams] = t
    return start


def fig_streams_timeline():
    chunks = 3
    one, three = stream_schedule(chunks, 1), stream_schedule(chunks, 3)
    end1 = max(one.values()) + 1
    end3 = max(three.values()) + 1
    assert (end1, end3) == (3 * chunks, chunks + 2)  # 3C·t against (C + 2)·t
    stream_col = [TEAL, STAT, PINK]
    svg = Svg(1000, 490, "Streams: each chunk's copy in, kernel and copy out, on one stream and on three",
              "Three chunks, every step one time unit. On one stream nothing overlaps: 9 units. With chunk c on "
              "stream c mod 3, each chunk's three steps stay in order but different chunks overlap, so the "
              "host-to-device copy engine, the SMs and the device-to-host copy engine work at once: 5 units, "
              "(C + 2) steps instead of 3C.")
    heading(svg, "Streams: copies and kernels of different chunks overlap",
            "3 chunks; each chunk: H2D copy → kernel → D2H copy, in order on its stream (stream c mod S); every "
            "step one unit")
    x0, u = 190, 72
    for title, sched, end, y, nstreams in (("one stream: nothing overlaps", one, end1, 96, 1),
                                           ("three streams: three engines at work at once", three, end3, 286, 3)):
        svg.text(24, y, title + "  (%d units)" % end, 14, weight="bold")
        for k, eng in enumerate(("H2D", "kernel", "D2H")):
            ly = y + 16 + k * 40
            svg.text(x0 - 12, ly + 22, {"H2D": "H2D copy engine", "kernel": "SMs (kernel)",
                                       "D2H": "D2H copy engine"}[eng], 13, "end")
            svg.rect(x0, ly, 9 * u, 32, "#fafafa", "#e0e0e0", 0.8)
            for c in range(chunks):
                t = sched[(eng, c)]
                col = stream_col[c % nstreams]
                svg.rect(x0 + t * u + 1, ly + 1, u - 2, 30, col[0], col[1], 1.2, 3)
                svg.text(x0 + t * u + u / 2, ly + 21, "chunk %d" % c, 12, "middle")
        ay = y + 16 + 3 * 40 + 4
        svg.line(x0, ay, x0 + 9 * u + 12, ay, MUTED, 1, arrow=True)
        for t in range(10):
            svg.line(x0 + t * u, ay - 3, x0 + t * u, ay + 3, MUTED, 1)
            svg.text(x0 + t * u, ay + 16, "%d" % t, 11, "middle", fill=MUTED)
        svg.line(x0 + end * u, y + 10, x0 + end * u, ay, HI, 1.4, dash="4 3")
    svg.legend(24, 472, [(TEAL, "stream 0 (chunks 0, 3, 6, …)"), (STAT, "stream 1 (1, 4, …)"),
                         (PINK, "stream 2 (2, 5, …)")], 12, 18)
    svg.text(650, 472, "C chunks: 3C·t on one stream, (C + 2)·t pipelined", 12, fill=MUTED)
    return svg


# =============================================================================================
# ring_schedule and zigzag_split: ring attention over R ranks (day 10 · 12)
# =============================================================================================
# One colour per rank (R = 4): teal, yellow, pink, lavender.
RANK_COL = [TEAL, STAT, PINK, ("#e3dcf5", "#4527a0")]


def ring_chunk(rank, half, ranks, zigzag=True):
    """solutions/day10-optimizations/12_ring_attention.cu, ring_chunk: the chunk (of 2R) that rank
    holds as its half 0 or 1; zigzag r and 2R − 1 − r, naive 2r and 2r + 1."""
    if zigzag:
        return rank if half == 0 else 2 * ranks - 1 - rank
    return 2 * rank + half


def ring_chunks(r, ranks, zigzag=True):
    return (ring_chunk(r, 0, ranks, zigzag), ring_chunk(r, 1, ranks, zigzag))


def ring_source(rank, step, ranks):
    """12_ring_attention.cu, ring_source: the rank whose K/V block rank holds at step:
    (rank − step) mod ranks, received from rank − 1."""
    return ((rank - step) % ranks + ranks) % ranks


def ring_pair_kind(q_chunk, k_chunk, causal=True):
    """12_ring_attention.cu, ring_pair_kind: 'full' (not causal, or the key chunk before the
    query chunk: the kernel without a mask), 'diag' (the same chunk: the causal call, Nq = Nk)
    or 'skip' (causal, the key chunk after the query chunk)."""
    if not causal or k_chunk < q_chunk:
        return "full"
    return "diag" if k_chunk == q_chunk else "skip"


def ring_work(r, s, ranks, zigzag=True):
    """Causal work of rank r at step s in full pairs (a diagonal pair is half a pair)."""
    w = {"skip": 0.0, "full": 1.0, "diag": 0.5}
    return sum(w[ring_pair_kind(qc, kc)] for qc in ring_chunks(r, ranks, zigzag)
               for kc in ring_chunks(ring_source(r, s, ranks), ranks, zigzag))


def _check_ring(ranks):
    for zigzag in (True, False):
        owners = sorted(c for r in range(ranks) for c in ring_chunks(r, ranks, zigzag))
        assert owners == list(range(2 * ranks))  # every chunk on exactly one rank
    for r in range(ranks):
        # over R steps every rank holds every rank's K/V once; step s + 1's is what r − 1 held at step s
        assert sorted(ring_source(r, s, ranks) for s in range(ranks)) == list(range(ranks))
        for s in range(ranks - 1):
            assert ring_source(r, s + 1, ranks) == ring_source((r - 1) % ranks, s, ranks)
        # zigzag: 2 blocks of work at every step; naive: 2, then 4 or nothing
        assert all(ring_work(r, s, ranks) == 2.0 for s in range(ranks))
        assert ring_work(r, 0, ranks, False) == 2.0
        assert all(ring_work(r, s, ranks, False) == (4.0 if s <= r else 0.0) for s in range(1, ranks))
    # the pair kind is the token-level causal mask of the two chunks (chunk c = [⌊cN/2R⌋, ⌊(c+1)N/2R⌋))
    n = 2 * ranks * 3 + 1
    start = lambda c: c * n // (2 * ranks)
    for qc in range(2 * ranks):
        for kc in range(2 * ranks):
            seen = [j <= i for i in range(start(qc), start(qc + 1)) for j in range(start(kc), start(kc + 1))]
            want = "full" if all(seen) and kc != qc else ("skip" if not any(seen) else "diag")
            assert ring_pair_kind(qc, kc) == want
    # every (query chunk, key chunk) pair of the causal triangle is computed exactly once
    total = sum(ring_work(r, s, ranks, z) for r in range(ranks) for s in range(ranks) for z in (True,))
    assert total == (2 * ranks) ** 2 / 2


T_FULL, T_DIAG, T_MERGE, T_XFER, T_COPY = 1.4, 0.7, 0.25, 2.2, 0.4  # schematic durations


def ring_timeline(r, ranks, zigzag=True):
    """Rank r's two streams as 12_ring_attention.cu enqueues them. Comm stream: the copy of the
    rank's own block into slot 0 (then kv_ready(r, 0)), and at step s < R − 1 the transfer (send
    slot s % 2 to r + 1, receive slot (s + 1) % 2 from r − 1), which for s > 0 first waits for
    kv_free of step s − 1 (recorded after its last merge); kv_ready(r, (s + 1) % 2) is recorded
    after it. Compute stream: step s waits for kv_ready(r, s % 2), then per pair that is not
    skipped (order: query half, key half)
    the attention call and its merge; then kv_free. Returns (pairs, xfers): pairs = [(s, kind,
    t0, t1, t_merge_end)], xfers = {s: (t0, t1)} for the transfer that delivers step s's block."""
    pairs, xfers = [], {}
    copy_end = T_COPY
    ready = {0: copy_end}
    free_at = {}
    comm_free, comp_free = copy_end, 0.0
    for s in range(ranks):
        if s + 1 < ranks:
            t0 = max(comm_free, free_at[s - 1] if s > 0 else 0.0)
            xfers[s + 1] = (t0, t0 + T_XFER)
            comm_free = ready[s + 1] = t0 + T_XFER
        t = max(comp_free, ready[s])
        src = ring_source(r, s, ranks)
        for qc in ring_chunks(r, ranks, zigzag):
            for kc in ring_chunks(src, ranks, zigzag):
                kind = ring_pair_kind(qc, kc)
                if kind == "skip":
                    continue
                t1 = t + (T_FULL if kind == "full" else T_DIAG)
                pairs.append((s, kind, t, t1, t1 + T_MERGE))
                t = t1 + T_MERGE
        comp_free = free_at[s] = t
    return pairs, xfers


def fig_ring_schedule():
    ranks = 4
    _check_ring(ranks)
    pairs, xfer = ring_timeline(1, ranks)
    per_step = [sum(e[3] - e[2] for e in pairs if e[0] == st) for st in range(ranks)]
    assert all(abs(w - per_step[0]) < 1e-9 for w in per_step)  # zigzag: the same work every step
    t_end = max(e[4] for e in pairs)
    assert abs(t_end - (T_COPY + sum(per_step) + T_MERGE * len(pairs))) < 1e-9  # hidden: compute back to back
    assert len(xfer) == ranks - 1                      # R − 1 transfers: nothing is sent after the last step
    svg = Svg(1000, 670, "Ring attention: R = 4 ranks pass their K/V chunks around a ring while each computes "
                         "attention of its own queries",
              "Four GPUs in a ring. Each rank keeps its query chunks and, at step s, holds the K/V chunks of rank "
              "(r - s) mod 4: its own at step 0, then those of r - 1, r - 2, r - 3. Meanwhile it sends the K/V it "
              "holds to rank r + 1 and receives the next from r - 1, so after 4 steps every rank has seen every "
              "rank's keys. Below, one rank's two streams: the compute stream runs each pair on slot s % 2 and merges "
              "the partial result; the communication stream receives the next step's K/V into the other slot. "
              "Events order them: a step waits for its K/V to land (kv_ready), a transfer waits until the slot it "
              "overwrites is no longer read.")
    heading(svg, "The ring schedule: queries stay, K/V chunks travel one rank per step",
            "R = 4 ranks, zigzag chunks (rank r holds chunks r and 2R − 1 − r); at step s rank r holds the K/V of "
            "rank (r − s) mod R")
    # -- the ring -----------------------------------------------------------------------------
    cx, cy, rad, nr = 135, 230, 78, 27
    ang = [-90 + 90 * r for r in range(ranks)]
    pos = [(cx + rad * math.cos(math.radians(a)), cy + rad * math.sin(math.radians(a))) for a in ang]
    for r in range(ranks):
        a0, a1 = math.radians(ang[r] + 24), math.radians(ang[r] + 90 - 24)
        ro = rad
        svg.path("M%s,%s A%s,%s 0 0 1 %s,%s" % (num(cx + ro * math.cos(a0)), num(cy + ro * math.sin(a0)),
                                                num(ro), num(ro),
                                                num(cx + ro * math.cos(a1)), num(cy + ro * math.sin(a1))),
                 TEXT, 1.6, arrow=True)
    for r, (x, y) in enumerate(pos):
        svg.circle(x, y, nr, RANK_COL[r][0], RANK_COL[r][1], 1.6)
        svg.text(x, y - 2, "GPU %d" % r, 12, "middle", weight="bold")
        svg.text(x, y + 13, "rank %d" % r, 11, "middle", fill=MUTED)
    svg.text(cx, cy - 4, "send K/V", 12, "middle", fill=MUTED)
    svg.text(cx, cy + 12, "to r + 1", 12, "middle", fill=MUTED)
    svg.text(cx, cy + rad + nr + 26, "ncclSend to r + 1, ncclRecv from r − 1,", 12, "middle", fill=MUTED)
    svg.text(cx, cy + rad + nr + 42, "one group per step, all ranks at once", 12, "middle", fill=MUTED)
    # -- who holds what -----------------------------------------------------------------------
    gx, gy, cw, gap, rh, rgap = 395, 104, 122, 26, 50, 16
    pitch, rpitch = cw + gap, rh + rgap
    for s in range(ranks):
        svg.text(gx + s * pitch + cw / 2, gy - 12, "step %d" % s, 13, "middle", weight="bold")
    for r in range(ranks):
        y = gy + r * rpitch
        q = ring_chunks(r, ranks)
        svg.text(gx - 14, y + 20, "rank %d" % r, 13, "end", weight="bold", fill=RANK_COL[r][1])
        svg.text(gx - 14, y + 38, "Q: chunks %d, %d" % q, 12, "end", fill=MUTED)
        for s in range(ranks):
            j = ring_source(r, s, ranks)
            x = gx + s * pitch
            svg.rect(x, y, cw, rh, RANK_COL[j][0], RANK_COL[j][1], 1.2, 3)
            svg.text(x + cw / 2, y + 20, "K/V of rank %d" % j, 13, "middle")
            svg.text(x + cw / 2, y + 38, "chunks %d, %d · slot %d" % (ring_chunks(j, ranks) + (s % 2,)), 11,
                     "middle", fill=MUTED)
    for s in range(ranks - 1):
        for r in range(ranks):
            x1 = gx + s * pitch + cw + 2
            y1 = gy + r * rpitch + rh / 2 + 8
            if r + 1 < ranks:
                svg.line(x1, y1, x1 + gap - 4, y1 + rpitch - 16, TEXT, 1.1, arrow=True)
            else:  # rank R − 1 sends to rank 0: out at the bottom, in at the top
                svg.line(x1, y1, x1 + 8, gy + ranks * rpitch - rgap + 10, TEXT, 1.1, dash="3 2")
                svg.line(x1 + gap - 12, gy - 6, x1 + gap - 4, gy + 6, TEXT, 1.1, dash="3 2", arrow=True)
    gb = gy + ranks * rpitch - rgap
    svg.text(gx + ranks * pitch - gap, gb + 24, "dashed: rank 3 → rank 0 (the ring closes)", 12, "end", fill=MUTED)
    # -- one rank's two streams ---------------------------------------------------------------
    ty = 420
    svg.text(24, ty, "Rank 1's two streams (double buffering: step s reads slot s % 2, the transfer fills the "
                     "other)", 14, weight="bold")
    x0, scale = 200, 53
    lane_c, lane_x, bh = ty + 38, ty + 98, 30
    svg.text(x0 - 12, lane_c + 20, "compute stream", 13, "end")
    svg.text(x0 - 12, lane_x + 14, "comm stream", 13, "end")
    svg.text(x0 - 12, lane_x + 30, "(NCCL)", 12, "end", fill=MUTED)
    starts = {}
    for st, kind, t0, t1, t2 in pairs:
        _bar(svg, x0, lane_c, scale, t0, t1, V, kind, bh, 11)
        _bar(svg, x0, lane_c, scale, t1, t2, O, "", bh)
        starts.setdefault(st, t0)
    ends = {st: max(e[4] for e in pairs if e[0] == st) for st in range(ranks)}
    for st in range(ranks):
        brace_h(svg, x0 + starts[st] * scale + 2, x0 + ends[st] * scale - 2, lane_c - 4,
                "step %d · slot %d" % (st, st % 2), 12, down=False)
    _bar(svg, x0, lane_x, scale, 0, T_COPY, K, "", bh)
    svg.text(x0 + T_COPY * scale / 2, lane_x + bh + 14, "own → slot 0", 11, "start", fill=MUTED)
    for st, (t0, t1) in sorted(xfer.items()):
        _bar(svg, x0, lane_x, scale, t0, t1, K, "K/V %d → slot %d" % (st, st % 2), bh, 12)
    # the events: kv_ready (a block has landed → its step) and kv_free (step s − 1 done → transfer s + 1)
    svg.line(x0 + T_COPY * scale, lane_x - 1, x0 + starts[0] * scale + 1, lane_c + bh + 2, HI, 1.2, dash="3 2")
    for st, (t0, t1) in sorted(xfer.items()):
        svg.line(x0 + t1 * scale, lane_x - 1, x0 + starts[st] * scale - 1, lane_c + bh + 2, HI, 1.2, dash="3 2",
                 arrow=True)
        if st >= 2:
            svg.line(x0 + ends[st - 2] * scale, lane_c + bh + 1, x0 + t0 * scale + 1, lane_x - 2, TEXT, 1.2,
                     dash="3 2", arrow=True)
    _time_axis(svg, x0, lane_x + bh + 24, scale, t_end)
    svg.line(x0 + t_end * scale, lane_c - 6, x0 + t_end * scale, lane_x + bh + 24, HI, 1.4, dash="4 3")
    ly = lane_x + bh + 56
    svg.legend(24, ly, [(V, "exercise 05 on one pair (full or diagonal)"), (O, "merge into fp32 (O, L)"),
                        (K, "K/V s: receive step s's block from r − 1, send to r + 1")], 12, 18)
    svg.line(24, ly + 22, 50, ly + 22, HI, 1.2, dash="3 2", arrow=True)
    svg.text(56, ly + 26, "kv_ready: the block has landed", 12)
    svg.line(270, ly + 22, 296, ly + 22, TEXT, 1.2, dash="3 2", arrow=True)
    svg.text(302, ly + 26, "kv_free: the slot the transfer overwrites is no longer read", 12)
    svg.text(24, ly + 50, "Each step: two pairs' worth of work (step 0: diagonal, full, diagonal). The transfers are"
                          " shorter than a step and hide; nothing is sent after the last step.", 12, fill=MUTED)
    return svg


def fig_zigzag_split():
    ranks = 4
    _check_ring(ranks)
    n_chunks = 2 * ranks
    owner = {z: {c: r for r in range(ranks) for c in ring_chunks(r, ranks, z)} for z in (False, True)}
    work = {z: [sum(ring_work(r, s, ranks, z) for s in range(ranks)) for r in range(ranks)] for z in (False, True)}
    assert work[False] == [2.0, 6.0, 10.0, 14.0] and work[True] == [8.0] * ranks
    svg = Svg(1000, 720, "Zigzag: N cut into 2R chunks; naive and zigzag assignment to R = 4 ranks, and the causal "
                         "work each rank does",
              "The sequence is cut into 8 chunks. Naive: rank r holds chunks 2r and 2r + 1, so rank 0 holds the "
              "first quarter and rank 3 the last. Zigzag: rank r holds chunks r and 7 - r, one early and one late. "
              "Under the causal mask a query chunk computes a full block with every earlier key chunk and half a "
              "block (the diagonal) with its own. Coloured by the rank that owns the query chunk, the triangle "
              "gives rank r of the naive split 4r + 2 blocks (2, 6, 10, 14) and every rank of the zigzag split 8.")
    heading(svg, "Zigzag: one early and one late chunk per rank balances the causal triangle",
            "2R chunks (chunk c = tokens [⌊c·N/2R⌋, ⌊(c + 1)·N/2R⌋)), R = 4; a pair = (query chunk, key chunk)")
    # -- the sequence, cut two ways -----------------------------------------------------------
    x0, cwid = 190, 92
    for k, (z, title, y) in enumerate(((False, "naive: 2r, 2r + 1", 86), (True, "zigzag: r, 2R − 1 − r", 142))):
        svg.text(x0 - 14, y + 25, title, 13, "end", weight="bold")
        for c in range(n_chunks):
            r = owner[z][c]
            svg.rect(x0 + c * cwid, y, cwid, 40, RANK_COL[r][0], RANK_COL[r][1], 1.2)
            svg.text(x0 + c * cwid + cwid / 2, y + 17, "chunk %d" % c, 12, "middle", weight="bold")
            svg.text(x0 + c * cwid + cwid / 2, y + 33, "rank %d" % r, 11, "middle", fill=MUTED)
    svg.line(x0, 212, x0 + n_chunks * cwid + 12, 212, MUTED, 1, arrow=True)
    svg.text(x0 + n_chunks * cwid + 16, 216, "token", 11, fill=MUTED)
    svg.text(x0, 230, "0", 11, "middle", fill=MUTED)
    svg.text(x0 + n_chunks * cwid, 230, "N", 11, "middle", fill=MUTED)
    # -- the causal triangle of blocks, coloured by the query chunk's rank ----------------------
    cs, ty = 34, 290
    for k, (z, title, gx) in enumerate(((False, "naive", 110), (True, "zigzag", 590))):
        svg.text(gx + n_chunks * cs / 2, ty - 34, "%s: pairs by computing rank" % title, 14, "middle",
                 weight="bold")
        for qc in range(n_chunks):
            r = owner[z][qc]
            for kc in range(n_chunks):
                x, y = gx + kc * cs, ty + qc * cs
                kind = ring_pair_kind(qc, kc)
                if kind == "full":
                    svg.rect(x, y, cs, cs, RANK_COL[r][0])
                elif kind == "diag":
                    svg.poly([(x, y), (x + cs, y + cs), (x, y + cs)], RANK_COL[r][0])
            svg.text(gx - 8, ty + qc * cs + cs / 2 + 5, "q %d" % qc, 12, "end", fill=RANK_COL[r][1], weight="bold")
        for kc in range(n_chunks):
            svg.text(gx + kc * cs + cs / 2, ty - 8, "%d" % kc, 12, "middle", fill=MUTED)
        grid_lines(svg, gx, ty, cs, cs, n_chunks, n_chunks)
        svg.line(gx, ty, gx + n_chunks * cs, ty + n_chunks * cs, TEXT, 1, dash="4 3")
        svg.text(gx - 8, ty - 8, "k →", 12, "end", fill=MUTED)
        # per-rank totals as bars
        by, unit = ty + n_chunks * cs + 32, 12
        svg.text(gx - 8, by - 10, "pairs per rank (diagonal = ½):", 12, fill=MUTED)
        for r in range(ranks):
            y = by + r * 22
            full = sum(1 for qc in ring_chunks(r, ranks, z) for kc in range(n_chunks) if kc < qc)
            assert full + 1 == work[z][r]  # two diagonal halves
            svg.text(gx + 40, y + 13, "rank %d" % r, 12, "end", fill=RANK_COL[r][1], weight="bold")
            svg.rect(gx + 48, y + 1, work[z][r] * unit, 16, RANK_COL[r][0], RANK_COL[r][1], 1.1)
            svg.text(gx + 56 + work[z][r] * unit, y + 14, "%d + 2 × ½ = %d" % (full, work[z][r]), 12)
    svg.text(24, 700, "Q stays on its rank, so the rank that owns query chunk q computes row q. The slowest rank sets "
                      "the time: 14 pair-times naive, 8 zigzag (32 / 4).", 12, fill=MUTED)
    return svg


# =============================================================================================
# kv_block_pool: day 11 · 01's worked example: the pool, two block tables, the free stack
# =============================================================================================
class KvBlockManagerModel:
    """solutions/day11-serving/01_kv_block_manager.cu: the free pool is a stack with block 0 on
    top; append takes the blocks the new length needs from the top, all or nothing; free pushes a
    table's blocks back in reverse, so its first block is on top again."""

    def __init__(self, num_blocks, block_size, max_blocks):
        self.bs, self.max_blocks = block_size, max_blocks
        self.free = list(range(num_blocks - 1, -1, -1))  # the top is the end of the list
        self.tokens, self.table = {}, {}

    def append(self, seq, n):
        held = self.tokens.get(seq, 0)
        needed = -(-(held + n) // self.bs)
        add = needed - len(self.table.get(seq, []))
        if needed > self.max_blocks or add > len(self.free):
            return False
        self.tokens[seq] = held + n
        self.table.setdefault(seq, []).extend(self.free.pop() for _ in range(add))
        return True

    def release(self, seq):
        self.free.extend(reversed(self.table.pop(seq)))
        del self.tokens[seq]

    def slot_of(self, seq, t):
        return self.table[seq][t // self.bs] * self.bs + t % self.bs


def kv_worked_example():
    """The steps of day11-serving/01_kv_block_manager/03-a-worked-example.md."""
    m = KvBlockManagerModel(8, 4, 4)
    steps = [("A", 6, True), ("B", 3, True), ("C", 9, True), ("A", 1, True), ("B", 1, True), ("B", 1, True),
             ("A", 6, False), ("C", None, True), ("A", 6, True)]
    for seq, n, ok in steps:
        if n is None:
            m.release(seq)
        else:
            assert m.append(seq, n) == ok, (seq, n)
    assert m.table == {"A": [0, 1, 3, 4], "B": [2, 6]} and m.tokens == {"A": 13, "B": 5} and m.free == [7, 5]
    assert m.slot_of("A", 9) == 13 and m.slot_of("B", 4) == 24
    return m


def fig_kv_block_pool():
    m = kv_worked_example()
    bs, n_pool = m.bs, 8
    seq_col = {"A": Q, "B": K}
    svg = Svg(960, 560, "KV block manager: a pool of blocks, one block table per sequence, a free stack",
              "A pool of 8 physical blocks of 4 token slots each. Sequence A holds 13 tokens in blocks 0, 1, 3 "
              "and 4 (its block table), sequence B holds 5 tokens in blocks 2 and 6; blocks 5 and 7 are on the "
              "free stack, 5 on top. Token 9 of A is in logical block 2, which the table maps to physical block 3: "
              "slot 3 times 4 plus 1, that is 13.")
    heading(svg, "KV block manager: block tables over a pool of blocks, and a free stack",
            "block_size 4, 8 blocks, max_blocks_per_seq 4; the worked example after its 9 steps (C was freed)")
    # the pool
    cw, gap, x0, py = 24, 16, 40, 118
    bw = bs * cw
    owner = {b: (s, i) for s, t in m.table.items() for i, b in enumerate(t)}
    hi_seq, hi_t = "A", 9
    hi_block = m.table[hi_seq][hi_t // bs]
    bx = {}
    svg.text(x0, py - 34, "the pool: k_cache, v_cache [num_blocks, Hkv, block_size, D] of every layer", 13,
             weight="bold")
    for p in range(n_pool):
        x = x0 + p * (bw + gap)
        bx[p] = x
        own = owner.get(p)
        svg.text(x + bw / 2, py - 10, "block %d" % p, 13, "middle", weight="bold" if own else None,
                 fill=TEXT if own else MUTED)
        for sl in range(bs):
            slot = p * bs + sl
            if own:
                s, lb = own
                t = lb * bs + sl
                live = t < m.tokens[s]
                c = seq_col[s] if live else OFF
                hi = s == hi_seq and t == hi_t
                svg.rect(x + sl * cw, py, cw, 30, c[0], HI if hi else c[1], 2.4 if hi else 1)
                svg.text(x + sl * cw + cw / 2, py + 20, "%d" % t if live else "·", 12, "middle",
                         weight="bold" if hi else None, fill=TEXT if live else MUTED)
            else:
                svg.rect(x + sl * cw, py, cw, 30, OFF[0], OFF[1], 1)
            svg.text(x + sl * cw + cw / 2, py + 46, "%d" % slot, 10, "middle", fill=HI if slot == 13 else MUTED)
    svg.text(x0 + n_pool * (bw + gap) - gap, py + 62, "flat slot = block · 4 + place", 11, "end", fill=MUTED)
    # the block tables, side by side
    ty = 262
    for s, lx, tx in (("A", x0, 180), ("B", 476, 600)):
        c = seq_col[s]
        svg.text(lx, ty + 22, "%s: %d tokens" % (s, m.tokens[s]), 14, weight="bold", fill=c[1])
        svg.text(lx, ty + 42, "block_table(%s)" % s, 12, fill=MUTED, mono=True)
        for i, b in enumerate(m.table[s]):
            cx = tx + i * 62
            hi = s == hi_seq and i == hi_t // bs
            svg.rect(cx, ty + 4, 54, 32, c[0], HI if hi else c[1], 2.4 if hi else 1.2, 3)
            svg.text(cx + 27, ty + 25, "%d" % b, 14, "middle", weight="bold")
            svg.text(cx + 27, ty + 52, "[%d]" % i, 11, "middle", fill=MUTED)
            svg.line(cx + 27, ty + 3, bx[b] + bw / 2, py + 66, HI if hi else c[1], 1.6 if hi else 1, arrow=True)
    # the free stack, top first
    fy = 352
    svg.text(x0, fy + 22, "free stack", 14, weight="bold")
    svg.text(x0, fy + 42, "top first", 12, fill=MUTED)
    for i, b in enumerate(reversed(m.free)):
        svg.rect(180 + i * 62, fy + 4, 54, 32, OFF[0], TEXT, 1.2, 3)
        svg.text(207 + i * 62, fy + 25, "%d" % b, 14, "middle", weight="bold")
    svg.text(180 + len(m.free) * 62 + 8, fy + 25, "append pops blocks from the top; free pushes a table's blocks "
                                                  "back, its first block last", 12, fill=MUTED)
    # the slot of one token
    ey = 452
    svg.text(24, ey, "Token 9 of A: logical block ⌊9 / 4⌋ = 2, block_table(A)[2] = 3, slot 3 · 4 + 9 mod 4 = 13.",
             14, weight="bold")
    svg.text(24, ey + 24, "A grew to 13 tokens only after free(C) returned blocks 3, 4, 5: an append takes all the "
                          "blocks it needs, or none.", 13, fill=MUTED)
    svg.legend(24, ey + 62, [(Q, "a token of A"), (K, "a token of B"), (OFF, "a free block, or · an empty slot of "
                                                                              "a held block")], 12)
    return svg


# =============================================================================================
# batch_scheduler_example: day 11 · 02's worked example, step by step (chunks, preemptions, pages)
# =============================================================================================
def scheduler_model(num_blocks, bs, cfg, requests, max_steps=64):
    """The policy of day11-serving/02_batch_scheduler.h on a pool of num_blocks blocks of bs tokens:
    [(plan, preempted, blocks held after planning {id: n}, free blocks after planning)] per step."""
    max_num_seqs, budget0, chunk_max = cfg
    seqs = {i: {"prompt": p, "max_new": m, "gen": 0, "comp": 0, "kv": 0} for i, p, m in requests}
    running, waiting, steps = [], [i for i, _, _ in requests], []

    def held(i):  # blocks for the sequence's tokens (ceil)
        return -(-seqs[i]["kv"] // bs)

    def free():
        return num_blocks - sum(held(i) for i in seqs)

    def append(i, n):
        s = seqs[i]
        if -(-(s["kv"] + n) // bs) - held(i) > free():
            return False
        s["kv"] += n
        return True

    for _ in range(max_steps):
        if not running and not waiting:
            return steps
        plan, pre, budget = [], [], budget0
        for i in list(running):
            if i not in running:
                break
            s = seqs[i]
            want = min(s["prompt"] + s["gen"] - s["comp"], chunk_max, budget)
            if want == 0:
                continue
            while not append(i, want):
                v = running.pop()
                seqs[v]["kv"], seqs[v]["comp"] = 0, 0
                waiting.insert(0, v)
                pre.append(v)
                if v == i:
                    break
            if i in running:
                plan.append((i, s["comp"], want, s["comp"] + want == s["prompt"] + s["gen"]))
                budget -= want
        while not pre and waiting and len(running) < max_num_seqs and budget > 0:
            i = waiting[0]
            s = seqs[i]
            n = min(s["prompt"] + s["gen"] - s["comp"], chunk_max, budget)
            if not append(i, n):
                break
            running.append(waiting.pop(0))
            plan.append((i, s["comp"], n, s["comp"] + n == s["prompt"] + s["gen"]))
            budget -= n
        steps.append((plan, pre, {i: held(i) for i in seqs}, free()))
        for i, first, n, samples in plan:  # commit
            s = seqs[i]
            s["comp"] += n
            s["gen"] += 1 if samples else 0
            if samples and s["gen"] == s["max_new"]:
                s["kv"] = 0
                running.remove(i)
    raise AssertionError("scheduler_model: not finished after %d steps" % max_steps)


def fig_batch_scheduler_example():
    requests = [(1, 2, 4), (2, 2, 4), (3, 2, 2)]
    steps = scheduler_model(4, 2, (4, 16, 16), requests)

    def show(plan):  # the tests' notation: id:first+n, ! when the chunk samples
        return " ".join("%d:%d+%d%s" % (i, f, n, "!" if smp else "") for i, f, n, smp in plan)
    # The page's table and the test's expected plans (day11-serving/tests/test_02_batch_scheduler.cpp).
    assert [(show(p), pre) for p, pre, _, _ in steps] == [
        ("1:0+2! 2:0+2! 3:0+2!", []), ("1:2+1! 2:2+1!", [3]), ("1:3+1! 2:3+1!", []), ("1:4+1!", [2]),
        ("2:0+5!", []), ("3:0+3!", [])], steps
    assert [f for _, _, _, f in steps] == [1, 0, 0, 1, 1, 2]
    svg = Svg(960, 452, "Continuous batching: the worked example of day 11 exercise 02, step by step",
              "Three requests on a cache of 4 blocks of 2 tokens, over six steps. Step 1 admits all three "
              "prompts. In step 2 sequence 1 takes the last free block, sequence 2 finds none and the youngest, "
              "3, is preempted. Step 3 decodes 1 and 2; 3 waits for 2 blocks. In step 4 sequence 1 needs a "
              "third block and 2 is preempted; 1 finishes. Step 5 recomputes 2 with its 5 known tokens, step 6 "
              "recomputes 3 with its 3.")
    heading(svg, "Continuous batching with preemption: three requests, a cache of 4 blocks of 2 tokens",
            "each cell: the sequence's chunk in that step (first token + tokens, ! when it samples) and the "
            "blocks it holds")
    x0, y0, cw, ch = 150, 96, 132, 62
    n = len(steps)
    for t in range(n):
        svg.text(x0 + t * cw + cw / 2, y0 - 12, "step %d" % (t + 1), 13, "middle", weight="bold")
    max_new = {i: m for i, _, m in requests}
    finished_before, preempted_before, gen, fin, pre_seen = [], [], {i: 0 for i in max_new}, set(), set()
    for plan, pre, _, _ in steps:  # the state each column starts from
        finished_before.append(set(fin))
        preempted_before.append(set(pre_seen))
        for i, _, _, smp in plan:
            gen[i] += 1 if smp else 0
            if gen[i] == max_new[i]:
                fin.add(i)
        pre_seen |= set(pre)
    for r, (i, prompt, new) in enumerate(requests):
        y = y0 + r * ch
        svg.text(x0 - 14, y + 26, "sequence %d" % i, 13, "end", weight="bold")
        svg.text(x0 - 14, y + 44, "prompt %d, %d new" % (prompt, new), 11, "end", fill=MUTED)
        for t, (plan, pre, held, _) in enumerate(steps):
            x = x0 + t * cw
            chunk = [c for c in plan if c[0] == i]
            if i in finished_before[t]:
                svg.text(x + cw / 2, y + 36, "finished", 12, "middle", fill=MUTED, italic=True)
            elif chunk:
                _, first, k, smp = chunk[0]
                kind = K if first == 0 and i in preempted_before[t] else (Q if first == 0 else TEAL)
                svg.box(x + 8, y + 8, cw - 16, ch - 16, kind)
                svg.text(x + cw / 2, y + 29, "%d+%d%s" % (first, k, " !" if smp else ""), 14, "middle",
                         weight="bold", mono=True)
                for b in range(held[i]):
                    svg.rect(x + cw / 2 - held[i] * 7 + b * 14 + 2, y + 36, 10, 10, WHITE, kind[1], 1)
            elif i in pre:
                svg.box(x + 8, y + 8, cw - 16, ch - 16, (WHITE, HI), 1.6, dash="4 3")
                svg.text(x + cw / 2, y + 36, "preempted", 13, "middle", weight="bold", fill=HI)
            else:
                svg.box(x + 8, y + 8, cw - 16, ch - 16, OFF)
                svg.text(x + cw / 2, y + 36, "waiting", 12, "middle", fill=MUTED)
    yb = y0 + len(requests) * ch
    svg.text(x0 - 14, yb + 26, "free blocks", 13, "end", weight="bold")
    for t, (_, _, _, f) in enumerate(steps):
        svg.text(x0 + t * cw + cw / 2, yb + 26, "%d of 4" % f, 13, "middle")
    grid_lines(svg, x0, y0, cw, ch, n, len(requests) + 1)
    svg.legend(24, yb + ch + 40, [(Q, "prompt"), (TEAL, "decode"), (K, "recompute after preemption"),
                                  ((WHITE, HI), "preempted: pages freed, to the queue's front"),
                                  (OFF, "waiting")], 12)
    svg.text(24, yb + ch + 68, "Blocks held after planning are the small squares. The youngest running "
                               "sequence is preempted; the oldest, 1, runs in every step until it finishes.",
             12, fill=MUTED)
    return svg

# =============================================================================================
FIGURES = ["flash_tiling", "online_softmax_example", "paged_block_table", "gqa_grouping", "split_kv_merge",
           "mma_m16n8k16_fragment", "wgmma_accumulator", "swizzle_128b", "mbarrier_ring", "timeline_overlap",
           "timeline_pingpong", "backward_two_sides", "sliding_window_band", "block_sparse_layout",
           "rope_rotation", "streams_timeline", "ring_schedule", "zigzag_split", "kv_block_pool",
           "batch_scheduler_example"]


def generate(name):
    return globals()["fig_" + name]().render()


def main(argv):
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("-")] or FIGURES
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        print("figures.py: unknown figure(s): %s (known: %s)" % (", ".join(unknown), ", ".join(FIGURES)))
        return 2
    stale = []
    for name in names:
        text = generate(name)
        path = os.path.join(OUT_DIR, name + ".svg")
        if check:
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    same = f.read() == text
            except FileNotFoundError:
                same = False
            if not same:
                stale.append(name)
        else:
            os.makedirs(OUT_DIR, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
    if check:
        if stale:
            for name in stale:
                print("figures: docs/figures/%s.svg differs from what tools/figures.py generates (or is missing)"
                      % name)
            print("figures: run `python3 tools/figures.py` and commit docs/figures/")
            return 1
        print("figures: %d figures up to date" % len(names))
        return 0
    print("figures: wrote %d figures to docs/figures/" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
