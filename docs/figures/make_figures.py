#!/usr/bin/env python3
"""docs/figures/make_figures.py: draws the course figures (docs/course/01-architecture.md).

    python3 docs/figures/make_figures.py

Its only need is matplotlib (Debian: apt-get install python3-matplotlib; pip install matplotlib); it
runs from any directory and writes next to itself. FBT_FIG_PNG=DIR also writes PNG previews into DIR.

writes, next to this script:

    course_axes.svg         (a) the two axes of a decoder: positions x depth        (spec section 1)
    course_channels.svg     (b) the narrow (token) and the wide (state) feedback channel  (spec section 2)
    course_jacobi.svg       (c) the K-pass chain as a Jacobi iteration; invariant 1   (spec sections 3, 5)
    course_contraction.svg  (d) why 3-pass batches make the fused map contract     (spec sections 3, 6)
    course_backward.svg     (e) the K-pass backward through shift_right (exercise E2) (spec section 3)

Every figure is a diagram. (d) is a SCHEMATIC: its curves are shapes (q^k), not measurements; the
measured contraction curves belong to docs/EXPERIMENTS.md. The output is deterministic (fixed hash
salt, no date), so re-running the script on unchanged code leaves the SVGs byte-identical under the
same matplotlib version (another version writes the same drawing with different path data).
The hand-written two_axes.svg (docs/architecture.md) is not touched.
"""
import os

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

plt.rcParams.update({
    "svg.hashsalt": "fbt-course",   # stable ids
    "svg.fonttype": "none",         # text stays text (searchable, small files)
    "font.family": "DejaVu Sans",
    "font.size": 10,
})

BLUE = "#1f5fbf"     # the wide channel: the fed-back state
ORANGE = "#d9771e"   # the narrow channel: the token
GREY = "#888888"     # attention
DARK = "#333333"
GREEN = "#3a9a4a"    # exact positions
PLAIN = "#cfcfcf"    # plain positions


def arrow(ax, x0, y0, x1, y1, color=DARK, lw=1.4, style="-|>", ls="-", rad=0.0, z=2, ms=10):
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=ms, color=color, lw=lw,
                                 linestyle=ls, connectionstyle=f"arc3,rad={rad}", zorder=z, shrinkA=0, shrinkB=0))


def node(ax, x, y, r=0.16, fc="white", ec=DARK, z=3):
    ax.add_patch(plt.Circle((x, y), r, fc=fc, ec=ec, lw=1.3, zorder=z))


def box(ax, x, y, w, h, text, fc="white", ec=DARK, fs=9, color=DARK):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=fc, ec=ec, lw=1.2, zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fs, color=color, zorder=4)


def save(fig, name):
    path = os.path.join(HERE, name)
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": "docs/figures/make_figures.py"})
    if os.environ.get("FBT_FIG_PNG"):  # optional PNG previews in that directory (not committed)
        fig.savefig(os.path.join(os.environ["FBT_FIG_PNG"], name.replace(".svg", ".png")), format="png", dpi=90)
    plt.close(fig)
    print("wrote", os.path.relpath(path, os.path.dirname(os.path.dirname(HERE))))


# ------------------------------------------------------------------------------------------------
# (a) the two axes: positions (attention, horizontal) x depth (blocks, vertical)
# ------------------------------------------------------------------------------------------------
def fig_axes():
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    T, levels = 5, ["layer-0 input $u_t$", "block 1", "block 2", "block L", "top state $s_t$"]
    xs = [1.6 + 1.25 * t for t in range(T)]
    ys = [0.6 + 0.85 * l for l in range(len(levels))]
    for l, name in enumerate(levels):
        ax.text(0.95, ys[l], name, ha="right", va="center", fontsize=9.5)
    # depth: the state climbs the blocks at each position
    for x in xs:
        for l in range(len(levels) - 1):
            arrow(ax, x, ys[l] + 0.17, x, ys[l + 1] - 0.17, color=DARK, lw=1.6)
    # attention: block 2 at position 4 reads block 1's outputs at positions <= 4
    t_read, l_read = 3, 2
    for t in range(t_read + 1):
        arrow(ax, xs[t] + (0.12 if t < t_read else 0.0), ys[l_read - 1] + 0.12, xs[t_read] - (0.1 if t < t_read else 0.0),
              ys[l_read] - 0.15, color=GREY, lw=1.1, rad=-0.12 if t < t_read else 0.0)
    for l in range(len(levels)):
        for t, x in enumerate(xs):
            hl = (l == l_read and t == t_read)
            node(ax, x, ys[l], fc="#fff3c4" if hl else "white")
    for t, x in enumerate(xs):
        ax.text(x, ys[0] - 0.45, f"t = {t + 1}", ha="center", va="center", fontsize=9.5)
    # the two axis arrows
    arrow(ax, xs[0] - 0.2, -0.35, xs[-1] + 0.3, -0.35, color=GREY, lw=1.4)
    ax.text((xs[0] + xs[-1]) / 2, -0.6, "positions (horizontal): attention reads the level below at positions <= t",
            ha="center", va="center", fontsize=9.5, color="#555")
    arrow(ax, xs[-1] + 0.75, ys[0], xs[-1] + 0.75, ys[-1], color=DARK, lw=1.4)
    ax.text(xs[-1] + 0.95, (ys[0] + ys[-1]) / 2, "depth (vertical):\nL blocks at\none position", ha="left", va="center",
            fontsize=9.5)
    ax.text(xs[t_read] + 0.22, ys[l_read] + 0.27, "block 2 at t = 4", fontsize=8.5, color="#8a6d00")
    ax.set_title("(a) The two axes of a decoder (spec section 1)", fontsize=11, loc="left")
    ax.set_xlim(-0.9, xs[-1] + 2.3)
    ax.set_ylim(-0.8, ys[-1] + 0.45)
    ax.set_aspect("equal")
    ax.axis("off")
    save(fig, "course_axes.svg")


# ------------------------------------------------------------------------------------------------
# (b) the narrow (token) and the wide (state) feedback channel
# ------------------------------------------------------------------------------------------------
def fig_channels():
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.8))
    titles = ["(b) standard decoder: only the token goes back", "full-bandwidth: the top state goes back too"]
    for panel, ax in enumerate(axes):
        wide = panel == 1
        x0, x1 = 0.9, 4.1          # position t and t+1
        xm = (x0 + x1) / 2         # the gap between them
        ybot, ytop = 1.4, 3.6      # layer-0 input and top state
        for x, lab in ((x0, "t"), (x1, "t+1")):
            ax.add_patch(Rectangle((x - 0.35, ybot), 0.7, ytop - ybot, fc="#f4f4f4", ec=DARK, lw=1.2, zorder=1))
            ax.text(x, (ybot + ytop) / 2, "L\nblocks", ha="center", va="center", fontsize=9)
            ax.text(x, 0.1, f"position {lab}", ha="center", va="center", fontsize=9.5)
            node(ax, x, ytop + 0.2, r=0.13)
            arrow(ax, x, 0.98, x, ybot, color=DARK, lw=1.4)
        ax.text(x0 - 0.45, ytop + 0.45, "$s_t$", fontsize=10)
        ax.text(x1 + 0.2, ytop + 0.45, "$s_{t+1}$", fontsize=10)
        # narrow channel: top state -> head -> sampled token -> embedding -> bottom of t+1
        box(ax, xm, ytop + 0.75, 1.55, 0.4, "head, sample", fs=8.5)
        arrow(ax, x0 + 0.13, ytop + 0.28, xm - 0.78, ytop + 0.7, color=DARK, lw=1.2)
        ax.text(xm, ytop + 1.35, "narrow: the token $x_{t+1}$,\none id, at most $\\log_2 V$ bits", ha="center", fontsize=8.5,
                color=ORANGE)
        arrow(ax, xm + 0.1, ytop + 0.55, x1 - 0.47, 0.85, color=ORANGE, lw=1.6)
        if wide:
            box(ax, x1, 0.78, 0.9, 0.4, "Fuse", fc="#e8f0fb", ec=BLUE, color=BLUE)
            ax.text(x1 + 0.5, 1.05, "$u_{t+1} = N_{in}(\\mathrm{Fuse}(s_t, e_{t+1}))$", fontsize=8.5, color=BLUE)
            # wide channel: the whole D-vector s_t goes into the fuser of t+1
            arrow(ax, x0 - 0.05, ytop + 0.07, x1 - 0.47, 0.7, color=BLUE, lw=3.2, rad=0.28, ms=14)
            ax.text(xm - 0.05, 2.35, "wide: $s_t$,\nD numbers", color=BLUE, fontsize=9, ha="center")
        else:
            box(ax, x1, 0.78, 0.9, 0.4, "$E[x]$", fs=9)
            ax.text(x1 + 0.5, 1.05, "$u_{t+1} = e_{t+1}$", fontsize=8.5)
            ax.text(xm - 0.2, 2.2, "$s_t$ is used once\n(to predict $x_{t+1}$)\nand dropped", color="#777", fontsize=8.5,
                    ha="center")
        ax.set_title(titles[panel], fontsize=10.5, loc="left")
        ax.set_xlim(0.1, 5.6)
        ax.set_ylim(-0.1, 5.5)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.text(0.5, 0.02, "Attention (not drawn) still lets every block read the block below at earlier positions; "
             "the feedback path is the only one from the TOP of t to the BOTTOM of t+1.", ha="center", fontsize=8.5,
             color="#555")
    save(fig, "course_channels.svg")


# ------------------------------------------------------------------------------------------------
# (c) the K-pass chain is a Jacobi iteration; exactness grows one position per pass (invariant 1)
# ------------------------------------------------------------------------------------------------
def fig_jacobi():
    T, K, p = 8, 4, 2
    fig, ax = plt.subplots(figsize=(9.4, 4.9))
    cw, ch = 0.9, 0.78
    def cell_xy(j, t):  # pass j (1..K) goes down, position t (1..T) goes right
        return 1.4 + (t - 1) * cw, (K - j) * (ch + 0.42) + 0.6
    for j in range(1, K + 1):
        frontier = max(p, 1) + j - 1
        for t in range(1, T + 1):
            x, y = cell_xy(j, t)
            plain = (j == 1) or t <= max(p, 1)
            exact = t <= frontier
            fc = PLAIN if plain and exact else (GREEN if exact else "white")
            ec = DARK
            ax.add_patch(Rectangle((x - cw / 2 + 0.04, y - ch / 2), cw - 0.08, ch, fc=fc, ec=ec, lw=1.1, zorder=2))
            label = ("P" if exact else ".") if plain else ("x" if exact else ".")
            ax.text(x, y, label, ha="center", va="center", fontsize=10, color="white" if (exact and not plain) else DARK,
                    zorder=3, fontweight="bold" if exact else "normal")
        x, y = cell_xy(j, 1)
        ax.text(x - cw / 2 - 0.12, y, f"pass {j}" + (" (plain)" if j == 1 else ""), ha="right", va="center", fontsize=9.5)
        xe, _ = cell_xy(j, T)
        ax.text(xe + cw / 2 + 0.12, y, f"exact for t <= {frontier}", ha="left", va="center", fontsize=9)
        # the exactness frontier
        xf, _ = cell_xy(j, frontier)
        ax.plot([xf + cw / 2, xf + cw / 2], [y - ch / 2 - 0.06, y + ch / 2 + 0.06], color="#b02020", lw=2.2, zorder=4)
    for t in range(1, T + 1):
        x, y = cell_xy(1, t)
        ax.text(x, y + ch / 2 + 0.22, f"t={t}", ha="center", va="center", fontsize=9)
    # shift arrows: pass j at t reads pass j-1 at t-1 (all positions at once)
    for j in range(2, K + 1):
        for t in range(max(p, 1) + 1, T + 1):
            xa, ya = cell_xy(j - 1, t - 1)
            xb, yb = cell_xy(j, t)
            arrow(ax, xa + 0.18, ya - ch / 2, xb - 0.18, yb + ch / 2, color=BLUE, lw=1.0, ms=8)
    ax.text(0.0, -0.35, f"prefix p = {p}.  P: plain and exact (the reference is plain there too).  x: fed back, exact.  "
            ".: not yet exact.", fontsize=8.5, color="#444")
    ax.text(0.0, -0.72, "Blue arrows: S_j = shift_right(H_{j-1}), read through the fuser (attention also reads earlier "
            "positions, all < t).", fontsize=8.5, color=BLUE)
    ax.text(0.0, -1.05, "Pass j updates EVERY position at once from the previous iterate (Jacobi), so the exact run grows "
            "by one per pass.", fontsize=8.5, color=BLUE)
    ax.set_title("(c) The K-pass chain as a Jacobi iteration for H* = F(shift_right(H*)) (spec sections 3, 5: invariant 1)",
                 fontsize=10.5, loc="left")
    x_end, _ = cell_xy(1, T)
    ax.set_xlim(-0.2, x_end + 2.0)
    ax.set_ylim(-1.3, cell_xy(1, 1)[1] + 0.75)
    ax.set_aspect("equal")
    ax.axis("off")
    save(fig, "course_jacobi.svg")


# ------------------------------------------------------------------------------------------------
# (d) why a few 3-pass batches make the map contract (SCHEMATIC)
# ------------------------------------------------------------------------------------------------
def fig_contraction():
    fig = plt.figure(figsize=(10.4, 5.6))
    axL = fig.add_axes([0.01, 0.12, 0.55, 0.78])
    axR = fig.add_axes([0.64, 0.4, 0.34, 0.45])

    def chain(y, n, label, note, color):
        # H1 (plain) -> F -> H2 -> F -> H3 ...
        axL.text(0.0, y + 0.55, label, fontsize=9.5, fontweight="bold", color=DARK)
        x = 0.35
        box(axL, x, y, 0.62, 0.42, "$H_1$", fc="#eeeeee", fs=9.5)
        for k in range(2, n + 1):
            xf = x + 0.95
            trained_on_plain = (k == 2)
            fc = "#e8f0fb"
            box(axL, xf, y, 0.55, 0.42, "F", fc=fc, ec=BLUE, color=BLUE, fs=9.5)
            arrow(axL, x + 0.32, y, xf - 0.29, y, color=DARK, lw=1.2)
            axL.text((x + xf) / 2, y + 0.3, "shift", ha="center", fontsize=7.5, color="#666")
            xh = xf + 0.85
            arrow(axL, xf + 0.28, y, xh - 0.32, y, color=DARK, lw=1.2)
            box(axL, xh, y, 0.62, 0.42, f"$H_{k}$", fs=9.5)
            axL.text(xf, y - 0.42, "input: plain-pass\nstates $H_1$" if trained_on_plain else f"input: F's own\noutput $H_{k-1}$",
                     ha="center", va="top", fontsize=7.5, color=BLUE if not trained_on_plain else "#666")
            x = xh
        axL.text(0.0, y - 1.05, note, fontsize=8.5, color=color)

    chain(3.1, 2, "1- and 2-pass batches (a 75/25 mix)",
          "F is only ever trained applied ONCE, to plain-pass states. Nothing asks F(F(.)) to be good:\n"
          "unrolled past 2 passes, F meets inputs it never saw, and the paper reports divergence.", "#b02020")
    chain(0.55, 3, "3-pass batches (3% of all steps; pass_mix 2:0.88, 3:0.12 after the start)",
          "F is trained on its own outputs: H3 = F(shift H2) must predict as well as H2. Pulling successive\n"
          "iterates together makes F a contraction near the fixed point H* = F(shift H*).", GREEN)
    axL.set_xlim(-0.1, 5.6)
    axL.set_ylim(-0.75, 4.0)
    axL.axis("off")

    ks = list(range(1, 31))
    q_c, q_d = 0.62, 1.12
    axR.semilogy(ks[1:], [q_d ** (k - 2) for k in ks[1:]], color="#b02020", lw=2, label="1/2-pass only: grows")
    axR.semilogy(ks[1:], [q_c ** (k - 2) for k in ks[1:]], color=GREEN, lw=2, label="with 3-pass batches: decays")
    axR.set_xlabel("pass k of the unrolled chain")
    axR.set_ylabel("$\\delta_k = \\mathrm{rms}(H_k - H_{k-1})$")
    axR.set_yticklabels([])
    axR.set_yticks([])
    axR.minorticks_off()
    axR.legend(fontsize=8, loc="lower left", frameon=False)
    axR.set_title("SCHEMATIC (shapes $q^k$, not measured)", fontsize=9.5, color="#b02020")
    axR.text(-0.05, -0.22, "If F contracts, $\\|F(a) - F(b)\\| \\leq q\\,\\|a - b\\|$ with $q < 1$,\n"
             "so $\\delta_{k+1} \\leq q\\,\\delta_k$: the monitor's curve decays\ngeometrically and L(k) flattens "
             "(spec section 6).\nMeasured curves: docs/EXPERIMENTS.md.", transform=axR.transAxes, fontsize=8, va="top")
    fig.text(0.01, 0.965, "(d) Why a few 3-pass batches make the fused map contract (spec sections 3 and 6; schematic)",
             fontsize=10.5)
    save(fig, "course_contraction.svg")


# ------------------------------------------------------------------------------------------------
# (e) the backward of the K-pass chain through shift_right (exercise E2; spec section 3)
# ------------------------------------------------------------------------------------------------
def fig_backward():
    """The notation of exercises/given/toy_chain.hpp and course/instructor/solutions/chain_backward.hpp, with
    positions counted from 1 as in the lessons (the code's t = 0 is position 1 here)."""
    B, T, K = 2, 5, 3
    RED = "#b02020"      # gradient (the backward)
    FWD = "#9fb7df"      # the forward shift, faint
    cw, gap, w, h, rh = 1.45, 1.0, 0.95, 0.56, 1.9
    x0 = 2.6

    def xy(b, j, t):  # sequence b (0, 1), pass j (1..K, down), position t (1..T, right)
        return x0 + b * (T * cw + gap) + (t - 1) * cw, (K - j) * rh + 1.0

    fig, ax = plt.subplots(figsize=(12.4, 5.2))
    for b in range(B):
        for j in range(1, K + 1):
            for t in range(1, T + 1):
                x, y = xy(b, j, t)
                ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.01,rounding_size=0.06",
                                            fc="#eeeeee" if j == 1 else "white", ec=DARK, lw=1.1, zorder=3))
                ax.text(x, y, f"$H_{j}[{t}]$", ha="center", va="center", fontsize=9, zorder=4)
                # this pass's own loss enters every position: dH_j = c_j R + carry_j
                arrow(ax, x + 0.33, y + h / 2 + 0.34, x + 0.33, y + h / 2, color=ORANGE, lw=1.3, ms=7, z=5)
                ax.text(x + 0.39, y + h / 2 + 0.2, f"$c_{j}R$", fontsize=7, color=ORANGE, va="center", ha="left")
        xs0, _ = xy(b, 1, 1)
        xs1, ytop = xy(b, 1, T)
        ax.text((xs0 + xs1) / 2, ytop + h / 2 + 0.7, "sequence b" if b == 0 else "sequence b+1", ha="center",
                fontsize=10, fontweight="bold")
        for t in range(1, T + 1):
            x, _ = xy(b, K, t)
            ax.text(x, xy(b, K, t)[1] - h / 2 - 0.3, f"t={t}", ha="center", va="center", fontsize=8.5, color="#555")
    # edges between pass j-1 at t-1 and pass j at t, inside each sequence
    for b in range(B):
        for j in range(2, K + 1):
            for t in range(2, T + 1):
                xa, ya = xy(b, j - 1, t - 1)
                xb, yb = xy(b, j, t)
                # forward (faint): S_j[t] = H_{j-1}[t-1]
                arrow(ax, xa + 0.05, ya - h / 2, xb - 0.45, yb + h / 2, color=FWD, lw=0.9, ms=7, z=2)
                # backward (bold): carry_{j-1}[t-1] = dS_j[t]
                arrow(ax, xb - 0.2, yb + h / 2, xa + 0.3, ya - h / 2, color=RED, lw=2.4, ms=12, z=4)
                mx, my = (xa + xb) / 2 + 0.22, (ya + yb) / 2 + 0.05
                ax.text(mx, my, f"$dS_{j}[{t}]$", fontsize=7, color=RED, ha="left", va="center", zorder=6,
                        bbox=dict(fc="white", ec="none", pad=0.3, alpha=0.85))
            # position 1 of a fed-back pass read S_j[1] = 0: its dS_j[1] goes nowhere
            xb, yb = xy(b, j, 1)
            xe, ye = xb - 0.62, yb + h / 2 + 0.42
            if b == 0:
                arrow(ax, xb - 0.2, yb + h / 2, xe, ye, color=RED, lw=1.2, ls="--", style="-", z=4)
                ax.text(xe, ye, "x", ha="center", va="center", fontsize=12, color=RED, fontweight="bold", zorder=6)
            else:
                # the tempting wrong edge: into sequence b's last position (a leak across sequences)
                xl, yl = xy(0, j - 1, T)
                xm, ym = (xb - 0.2 + xl + 0.3) / 2, (yb + h / 2 + yl - h / 2) / 2
                ax.plot([xb - 0.2, xl + 0.3], [yb + h / 2, yl - h / 2], color=RED, lw=1.0, ls=":", zorder=4)
                ax.text(xm, ym, "x", ha="center", va="center", fontsize=15, color=RED, fontweight="bold", zorder=6,
                        bbox=dict(fc="white", ec="none", pad=0.1))
    # the boundary between the sequences
    xsep = (xy(0, 1, T)[0] + xy(1, 1, 1)[0]) / 2
    ytop = xy(0, 1, 1)[1] + h / 2
    ax.plot([xsep, xsep], [xy(0, K, 1)[1] - h / 2 - 0.15, ytop + 0.5], color="#777", lw=1.2, ls=(0, (4, 3)), zorder=1)
    ax.text(xsep, ytop + 0.62, "no edge crosses\nthis boundary", ha="center", va="bottom", fontsize=8, color="#555")
    # pass labels on the left, what each pass receives on the right
    right = {1: "pass 1 is plain: S_1 = 0, so it has no dS_1\nand no dW term; the gradient stops here\n"
                "(position T gets no carry: pass 2 has no T+1)",
             K: f"the last pass: carry_{K} = 0,\nonly its own loss c_{K} R enters"}
    xr = xy(1, 1, T)[0] + w / 2 + 0.25
    for j in range(1, K + 1):
        _, y = xy(0, j, 1)
        ax.text(x0 - 1.0, y, f"pass {j}" + (" (plain)" if j == 1 else ""), ha="right", va="center", fontsize=9.5)
        ax.text(xr, y, right.get(j, f"dH_{j} = c_{j} R + carry_{j},\ncarry_{j} from pass {j + 1}; position T\n"
                                    f"gets none"), ha="left", va="center", fontsize=7.8, color="#444")
    # position 1 of a fed-back pass: its dS is dropped
    x1, y1 = xy(0, 2, 1)
    ax.text(x1 - 0.95, (xy(0, 1, 1)[1] + y1) / 2 + 0.05, "dS_j[1] dropped:\nposition 1 read\nS_j[1] = 0", fontsize=7.5,
            color=RED, ha="right", va="center")
    yb = -0.2
    lines = [
        (DARK, "Bold red: the backward, carry_{j-1}[b, t-1] = dS_j[b, t], with dS_j = dZ_j W: shift_right's backward, "
               "dH_{j-1}[:, t] += dS[:, t+1]."),
        (DARK, "Faint blue: the forward it reverses, S_j[b, t] = H_{j-1}[b, t-1]."),
        (ORANGE, "Orange: each pass's own loss enters at every position: dH_j = c_j R + carry_j, c_1 = 1, "
                 "c_j = lambda/(K-1) for j >= 2 (here K = 3)."),
        (DARK, "Walk the passes j = K..1: every pass adds to dX and dA, passes 2..K also to dW."),
        (RED, "The carry moves one position earlier INSIDE each sequence: position 1 of sequence b+1 never sends "
              "gradient to position T of sequence b (dotted, crossed out)."),
    ]
    for i, (c, txt) in enumerate(lines):
        ax.text(0.0, yb - 0.36 * i, txt, fontsize=8.3, color=c)
    ax.set_title("(e) The backward of the K-pass chain: pass j at position t sends its gradient to pass j-1 at "
                 "position t-1 (spec section 3; exercise E2)", fontsize=10.5, loc="left")
    xe, _ = xy(1, 1, T)
    ax.set_xlim(-0.1, xe + 4.3)
    ax.set_ylim(yb - 0.36 * len(lines) - 0.1, xy(0, 1, 1)[1] + h / 2 + 1.35)
    ax.set_aspect("equal")
    ax.axis("off")
    save(fig, "course_backward.svg")


if __name__ == "__main__":
    fig_axes()
    fig_channels()
    fig_jacobi()
    fig_contraction()
    fig_backward()
