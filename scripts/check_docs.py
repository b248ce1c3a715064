#!/usr/bin/env python3
"""The docs check: referenced paths exist, and the course's commands run.

  python3 scripts/check_docs.py --paths
      Every repository path that README.md, docs/**/*.md and exercises/README.md reference (in
      `backticks`, in fenced code blocks and in [markdown](links)) must exist. A path counts as a
      repository path when its first component is a directory of the repository root (include/,
      docs/, scripts/, ...) or of the page's own directory (figures/ next to docs/README.md), or
      when it is a link. A link's #anchor must name a heading of the page it points to.
      Not checked: build outputs (build/..., build-*/...), run outputs (runs/..., /tmp/...),
      data/ (scripts/get_data.sh downloads the corpus there), URLs, and placeholders (<name>,
      ..., NAME, $VAR). A glob (docs/figures/course_*.svg) must match at least one file.
      Each broken reference is reported as "file:line: path ... does not exist"; exit 1 if any.

  python3 scripts/check_docs.py --commands [--run BUILD_DIR] [--timeout S] [--long]
      The shell commands of docs/course/*.md: every line of a ```sh / ```bash / ```shell block,
      and the "$ " lines of any other block (```console, output blocks). Lines that belong
      together (a "\\" continuation, an open quote, a for loop) make one command. Without --run,
      lists them and checks that each unmarked one can run: it parses (bash -n) and its program
      is a shell builtin, on PATH, a build output (build/...) or an existing script. With --run,
      runs each unmarked command with bash (set -eo pipefail: every part must succeed) from the
      repository root, "build" rewritten to BUILD_DIR and "/tmp/" to a fresh temporary directory
      (one per page, so that a page's commands see each other's files), each within --timeout
      seconds (default 60), and checks its exit status. A variable assigned by a command of its own
      (F=build/tools/fbt; CK=...) stays set for the page's later commands, as in the reader's shell.

  Marking a command: an HTML comment on the line(s) right before the fence, at its indentation:
      <!-- docs-check: long (about 2 min of training) -->   not run (--long runs it, unless it builds)
      <!-- docs-check: skip (needs torch) -->              never run: needs what the check lacks
      <!-- docs-check: exit 1 (the stub fails) -->         runs, and must exit with status 1
      <!-- docs-check: exit 77 or 0 (stub or solved) -->   runs, and must exit with one of the statuses
  A marker applies to every command of the fence, or with "for: PREFIX" only to the commands
  that start with PREFIX. A long command may name a quick stand-in, run in its place, that leaves
  what the page's later commands need (a checkpoint, a log):
      <!-- docs-check: long (2 min) instead: build/tools/fbt train ... --steps 40 --out_dir /tmp/x -->
  Commands that build (cmake, scripts/build.sh, scripts/test.sh) are long; a marker that matches
  no command, or stands anywhere but right before a fence, is an error.

Standard library only. Exit status 0 when everything checks, 1 when something does not, 2 on
usage errors.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------
# Markdown reading: fences, inline code spans, links, headings.

FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
MARKER_RE = re.compile(r"^\s*<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
MARKER_START_RE = re.compile(r"<!--\s*docs-check:")


class Fence:
    def __init__(self, start, indent, info, lines, markers):
        self.start = start        # 1-based line number of the opening fence
        self.indent = indent      # the opening fence's indentation (stripped from its lines)
        self.info = info.lower()  # sh, bash, console, text, ...
        self.lines = lines        # [(line number, text)] between the fences
        self.markers = markers    # [(line number, marker text)] right before the opening fence


def read_page(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def parse_page(lines):
    """Returns (fences, prose, stray markers). prose is the page with every fence line blanked,
    so that offsets into "\\n".join(prose) still give line numbers."""
    fences, prose, stray = [], [], []
    i, n = 0, len(lines)
    pending = []  # markers on the lines right above
    while i < n:
        line = lines[i]
        m = FENCE_RE.match(line)
        if m:
            indent, mark, info = m.group(1), m.group(2), m.group(3)
            start = i + 1
            body = []
            prose.append("")
            i += 1
            while i < n:
                close = lines[i].strip()
                if close.startswith(mark[0] * len(mark)) and close.strip(mark[0]) == "":
                    break
                text = lines[i]
                if text.startswith(indent):
                    text = text[len(indent):]
                body.append((i + 1, text))
                prose.append("")
                i += 1
            prose.append("")  # the closing fence (or the end of the page)
            fences.append(Fence(start, indent, info, body, pending))
            pending = []
            i += 1
            continue
        mm = MARKER_RE.match(line)
        if mm:
            pending.append((i + 1, mm.group(1)))
        else:
            if MARKER_START_RE.search(line):
                stray.append((i + 1, "a docs-check marker must be an HTML comment on a line of its own"))
            stray.extend((ln, "docs-check marker not right before a code fence") for ln, _ in pending)
            pending = []
        prose.append(line)
        i += 1
    stray.extend((ln, "docs-check marker not right before a code fence") for ln, _ in pending)
    return fences, prose, stray


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


CODE_SPAN_RE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def code_spans(text):
    """Inline code spans of prose text (no blank line inside one): [(offset, content)]."""
    out = []
    for m in CODE_SPAN_RE.finditer(text):
        if re.search(r"\n\s*\n", m.group(2)):
            continue
        out.append((m.start(2), m.group(2)))
    return out


def mask_code_spans(text):
    return CODE_SPAN_RE.sub(lambda m: m.group(1) + re.sub(r"[^\n]", " ", m.group(2)) + m.group(1), text)


LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.M)


def links(text):
    """Markdown links and images of prose text, code spans excluded: [(offset, target)]."""
    masked = mask_code_spans(text)
    out = [(m.start(1), m.group(1).strip("<>")) for m in LINK_RE.finditer(masked)]
    out += [(m.start(1), m.group(1).strip("<>")) for m in REF_DEF_RE.finditer(masked)]
    return out


def slug(heading):
    """GitHub's anchor of a heading: inline markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    h = h.replace("`", "").replace("*", "").strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        fences, prose, _ = parse_page(read_page(path))
        seen, out = {}, set()
        for line in prose:
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
        for line in prose:  # explicit anchors: <a id="x"> / <a name="x">
            for m in re.finditer(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
                out.add(m.group(1))
        _anchor_cache[path] = out
    return _anchor_cache[path]


# ---------------------------------------------------------------------------------------------
# Check a: referenced paths exist.

def path_pages():
    pages = ["README.md", "exercises/README.md"]
    pages += sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [p for p in pages if os.path.isfile(os.path.join(ROOT, p))]


# First components that are never repository paths: build trees, run outputs, the downloaded corpus.
NOT_REPO_TOP = re.compile(r"^(build[^/]*|runs|out|data|\.git|\.venv[^/]*|__pycache__)$")


def repo_top_dirs():
    return {d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d)) and not NOT_REPO_TOP.match(d)}


def is_placeholder(path):
    if "<" in path or ">" in path or "..." in path or "$" in path or "{" in path or "%" in path:
        return True
    for comp in path.split("/"):
        # NAME, DIR, N, OUT_DIR: an all-capitals component without an extension.
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", comp):
            return True
    return False


def clean_token(tok):
    while True:
        old = tok
        tok = tok.strip("\"'`()[],;")
        tok = re.sub(r"[.:]+$", "", tok)             # a sentence's full stop, a trailing colon
        tok = re.sub(r":\d+(-\d+)?$", "", tok)        # file.cpp:123 or file.cpp:10-20
        if tok == old:
            return tok


def candidate_paths(text, page_dir, tops):
    """Tokens of a code span or a code block that look like repository paths: (token, base dir)."""
    out = []
    for raw in re.split(r"[\s=]+", text):
        tok = clean_token(raw)
        if "/" not in tok or "://" in tok or tok.startswith(("/", "~", "-")):
            continue
        first = tok.split("/", 1)[0]
        if first in (".", ".."):
            bases = (page_dir,)
        elif first in tops:
            bases = ("",)
        elif page_dir and os.path.isdir(os.path.join(ROOT, page_dir, first)) and not NOT_REPO_TOP.match(first):
            bases = (page_dir,)
        elif SOURCE_FILE.search(tok) and (first == "fbt" or first in library_dirs()):
            bases = SHORT_BASES  # model/pass.hpp, fbt/layers/fuser.hpp: the library's headers, abbreviated
        else:
            continue
        out.append((tok, bases))
    return out


SOURCE_FILE = re.compile(r"\.(hpp|h|cpp|cu|cuh)$")
SHORT_BASES = ("include/fbt", "include", "tests")


def library_dirs():
    d = os.path.join(ROOT, "include", "fbt")
    return {x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))} if os.path.isdir(d) else set()


def exists(rel):
    """rel (repository-relative, normalised) exists; a glob must match something."""
    if any(c in rel for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, rel)))
    return os.path.exists(os.path.join(ROOT, rel))


def ignored(rel):
    first = rel.split("/", 1)[0]
    return bool(NOT_REPO_TOP.match(first)) or rel.startswith("..")


def check_paths(pages, verbose=False):
    tops = repo_top_dirs()
    errors, checked = [], 0
    for page in pages:
        lines = read_page(os.path.join(ROOT, page))
        page_dir = os.path.dirname(page)
        fences, prose, _ = parse_page(lines)
        text = "\n".join(prose)
        refs = []  # (line, shown path, repository-relative path, anchor or None)
        for off, content in code_spans(text):
            for tok, base in candidate_paths(content, page_dir, tops):
                refs.append((line_of(text, off), tok, tok, base, None))
        for fence in fences:
            for ln, body_line in fence.lines:
                for tok, base in candidate_paths(body_line, page_dir, tops):
                    refs.append((ln, tok, tok, base, None))
        for off, target in links(text):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            if not path:  # #section of this page
                path = os.path.basename(page)
            refs.append((line_of(text, off), target, path, (page_dir,), anchor or None))
        for ln, shown, path, bases, anchor in refs:
            if is_placeholder(path):
                continue
            rels = [os.path.normpath(os.path.join(base, path)) for base in bases]
            rel = rels[0]
            if ignored(rel):
                continue
            checked += 1
            if not any(exists(r) for r in rels):
                where = "" if rels == [shown] else " (%s)" % (rel if len(rels) == 1 else "under " + ", ".join(b + "/" for b in bases))
                errors.append((page, ln, "path %s does not exist%s" % (shown, where)))
            elif anchor and rel.endswith(".md") and os.path.isfile(os.path.join(ROOT, rel)):
                if anchor not in anchors(os.path.join(ROOT, rel)):
                    errors.append((page, ln, "path %s: %s has no heading with the anchor #%s" % (shown, rel, anchor)))
            elif verbose:
                print("%s:%d: %s ok" % (page, ln, rel))
    for page, ln, what in sorted(errors, key=lambda e: (pages.index(e[0]), e[1])):
        print("%s:%d: %s" % (page, ln, what))
    print("check_docs.py --paths: %d reference(s) in %d page(s), %d broken" % (checked, len(pages), len(errors)))
    return not errors


# ---------------------------------------------------------------------------------------------
# Check b: the lessons' commands.

SHELL_INFOS = {"sh", "bash", "shell", "zsh"}
BUILDS = re.compile(r"^(\S+=\S+\s+)*(cmake\b|make\b|ninja\b|bash\s+scripts/(build|test|quickstart|setup)\.sh\b)")
ASSIGN_ONLY = re.compile(r"^\s*(?:[A-Za-z_]\w*=(?:[^\s;'\"]+|'[^']*'|\"[^\"]*\")?\s*;?\s*)+$")


class Command:
    def __init__(self, page, line, text):
        self.page, self.line, self.text = page, line, text
        self.kind = "run"      # run | long | skip
        self.exit = (0,)       # the expected exit statuses (any of them)
        self.reason = ""
        self.instead = None    # the stand-in of a long command
        self.problem = None    # why it cannot run as written


def parses(text):
    r = subprocess.run(["bash", "-n"], input=text, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return r.returncode == 0, r.stderr.strip()


def group_commands(page, items):
    """items: [(line number, text)] of command lines. Joins continuation lines (a trailing \\, an open
    quote or loop: bash -n fails) into commands. Comment-only and blank lines between commands go."""
    out, buf, first = [], [], None
    for ln, text in items:
        if not buf and (not text.strip() or text.strip().startswith("#")):
            continue
        if not buf:
            first = ln
        buf.append(text)
        joined = "\n".join(buf)
        if joined.rstrip().endswith("\\"):
            continue
        ok, _ = parses(joined + "\n")
        if ok:
            out.append(Command(page, first, joined))
            buf = []
    if buf:
        cmd = Command(page, first, "\n".join(buf))
        cmd.problem = "does not parse: " + parses(cmd.text + "\n")[1]
        out.append(cmd)
    return out


def fence_commands(page, fence):
    if fence.info in SHELL_INFOS:
        return group_commands(page, fence.lines)
    # Any other block: "$ " lines are commands, with their continuation lines.
    cmds, items, cont = [], [], False
    for ln, text in fence.lines:
        if text.startswith("$ "):
            if items and not cont:
                cmds += group_commands(page, items)
                items = []
            items.append((ln, text[2:]))
            cont = text.rstrip().endswith("\\") or not parses("\n".join(t for _, t in items) + "\n")[0]
        elif cont:
            items.append((ln, text[2:] if text.startswith("> ") else text))
            cont = text.rstrip().endswith("\\") or not parses("\n".join(t for _, t in items) + "\n")[0]
    if items:
        cmds += group_commands(page, items)
    return cmds


MARKER_SYNTAX = re.compile(r"^(long|skip|exit\s+(\d+(?:\s+or\s+\d+)*))\b\s*(.*)$", re.S)


def parse_marker(text):
    """'long (why) for: PREFIX instead: COMMAND' -> dict, or a string saying what is wrong."""
    m = MARKER_SYNTAX.match(text)
    if not m:
        return "unknown docs-check marker %r (long, skip, exit N or exit N or M)" % text
    kind = "exit" if m.group(2) else m.group(1)
    rest = m.group(3).strip()
    reason = ""
    if rest.startswith("("):
        depth = 0
        for i, c in enumerate(rest):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                reason, rest = rest[1:i], rest[i + 1:].strip()
                break
        else:
            return "unbalanced parenthesis in marker %r" % text
    prefix = instead = None
    m2 = re.match(r"^(?:for:\s*(.*?)\s*)?(?:\binstead:\s*(.*))?$", rest, re.S)
    if not m2 or (not m2.group(1) and not m2.group(2) and rest):
        return "cannot read %r in marker %r (expected: for: PREFIX, instead: COMMAND)" % (rest, text)
    prefix, instead = m2.group(1), m2.group(2)
    if instead and kind != "long":
        return "instead: belongs to a long marker (%r)" % text
    return {"kind": kind, "exit": tuple(int(x) for x in re.findall(r"\d+", m.group(2))) if m.group(2) else (0,), "reason": reason,
            "for": prefix, "instead": instead}


def collect_commands(pages):
    """All commands of the pages, markers applied. Returns (commands, errors)."""
    commands, errors = [], []
    for page in pages:
        fences, _, stray = parse_page(read_page(os.path.join(ROOT, page)))
        errors += ["%s:%d: %s" % (page, ln, why) for ln, why in stray]
        for fence in fences:
            cmds = fence_commands(page, fence)
            for ln, text in fence.markers:
                mk = parse_marker(text)
                if isinstance(mk, str):
                    errors.append("%s:%d: %s" % (page, ln, mk))
                    continue
                hit = [c for c in cmds if mk["for"] is None or c.text.lstrip().startswith(mk["for"])]
                if not hit:
                    errors.append("%s:%d: marker %r matches no command of the fence below" % (page, ln, text))
                for c in hit:
                    if mk["kind"] == "exit":
                        c.exit = mk["exit"]
                    else:
                        c.kind = mk["kind"]
                        c.instead = mk["instead"]
                    c.reason = mk["reason"] or c.reason
            commands += cmds
    return commands, errors


def program_problem(cmd):
    """Why an unmarked command could not run as written, or None."""
    if cmd.problem:
        return cmd.problem
    text = cmd.text
    if BUILDS.match(text.lstrip()):
        return "it builds: mark it <!-- docs-check: long (builds) -->"
    for m in re.finditer(r"\b(?:bash|sh|python3?)\s+((?:scripts|tools|examples|exercises|docs|tests|benchmarks)/\S+)", text):
        if not os.path.isfile(os.path.join(ROOT, m.group(1))):
            return "%s does not exist" % m.group(1)
    words = re.sub(r"^(\s*[A-Za-z_]\w*=\S*\s+)*", "", text.lstrip()).split()
    if not words or ASSIGN_ONLY.match(text):
        return None
    prog = words[0]
    if prog.startswith(("build/", "$", "./build/")) or prog in SHELL_WORDS or shutil.which(prog):
        return None
    if os.path.isfile(os.path.join(ROOT, prog)):
        return None
    return "%s is neither a build output, a script of the repository, a shell builtin nor on PATH" % prog


SHELL_WORDS = set("for while until if case { ( [ [[ ! cd echo printf export set unset test true false read "
                  "source . eval exec time".split())


def rewrite(text, build_dir, tmp_dir):
    # /tmp/ first: the build directory may itself be under /tmp (a CI clone), and must not be rewritten.
    text = re.sub(r"(?<![\w.-])/tmp/", tmp_dir.replace("\\", "\\\\") + "/", text)
    # "build" as a path (build/tools/fbt, --test-dir build, scripts/build.sh build), not --build or build.sh.
    return re.sub(r"(?<![\w./-])build(?=/|\s|$|;|\))", build_dir.replace("\\", "\\\\"), text)


def run_one(script, timeout, env):
    start = time.time()
    p = subprocess.Popen(["bash", "-c", "set -eo pipefail\n" + script], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out, time.time() - start, False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out, time.time() - start, True


def short(text, width=100):
    one = " ".join(line.strip() for line in text.split("\n"))
    return one if len(one) <= width else one[:width - 3] + "..."


def check_commands(pages, build_dir=None, timeout=60.0, run_long=False, long_timeout=1800.0, verbose=False):
    commands, errors = collect_commands(pages)
    for e in errors:
        print(e)
    failed = len(errors)
    if build_dir is not None:
        build_dir = os.path.abspath(build_dir)
        if not os.path.isdir(build_dir):
            print("check_docs.py: build directory %s does not exist" % build_dir)
            return False
    env = dict(os.environ)
    env.setdefault("LC_ALL", "C.UTF-8")
    tmp_dirs, preludes = {}, {}
    total_start = time.time()
    ran = 0
    try:
        for c in commands:
            where = "%s:%d" % (c.page, c.line)
            label = c.kind if c.exit == (0,) else "%s, exit %s" % (c.kind, " or ".join(map(str, c.exit)))
            if c.reason:
                label += " (%s)" % c.reason
            problem = program_problem(c) if c.kind == "run" else c.problem
            if problem:
                print("%s: %s: %s" % (where, short(c.text), problem))
                failed += 1
                continue
            script = c.text
            instead = ""
            if c.kind == "long" and (not run_long or BUILDS.match(c.text.lstrip())):  # --long never builds
                script = c.instead
                if c.instead:
                    instead = "\n    instead: " + short(c.instead, 200)
            elif c.kind == "skip":
                script = None
            if build_dir is None or script is None:
                print("%s: [%s] %s%s" % (where, label, short(c.text), instead))
                continue
            if c.page not in tmp_dirs:
                tmp_dirs[c.page] = tempfile.mkdtemp(prefix="fbt-docs-check-")
                preludes[c.page] = []
            script = rewrite(script, build_dir, tmp_dirs[c.page])
            limit = long_timeout if c.kind == "long" and run_long else timeout
            rc, out, secs, timed_out = run_one("\n".join(preludes[c.page] + [script]), limit, env)
            ran += 1
            if ASSIGN_ONLY.match(c.text):
                preludes[c.page].append(script)
            if timed_out:
                status = "FAIL: no exit within %g s (mark it <!-- docs-check: long -->)" % limit
            elif rc not in c.exit:
                status = "FAIL: exit status %d, expected %s" % (rc, " or ".join(map(str, c.exit)))
            else:
                status = "ok"
            print("%s: [%s] %.1f s %s: %s%s" % (where, label, secs, status, short(c.text), instead))
            if verbose and out.strip() and status == "ok":
                print("    " + out.rstrip().replace("\n", "\n    "))
            if status != "ok":
                failed += 1
                print("    command: " + script.replace("\n", "\n             "))
                tail = out.strip().split("\n")[-25:]
                print("    output (last lines):\n      " + "\n      ".join(tail))
    finally:
        for d in tmp_dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    n_run = sum(c.kind == "run" for c in commands)
    summary = "check_docs.py --commands: %d command(s) in %d page(s): %d to run, %d long, %d skipped" % (
        len(commands), len(pages), n_run, sum(c.kind == "long" for c in commands), sum(c.kind == "skip" for c in commands))
    if build_dir is not None:
        summary += "; ran %d in %.1f s" % (ran, time.time() - total_start)
    print(summary + "; %d problem(s)" % failed)
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description="The docs check: referenced paths exist, the course's commands run.",
                                 epilog="Markers and rules: the docstring of this file, and docs/README.md.")
    ap.add_argument("--paths", action="store_true", help="check that referenced repository paths exist")
    ap.add_argument("--commands", action="store_true", help="list and check the commands of docs/course/*.md")
    ap.add_argument("--run", metavar="BUILD_DIR", help="with --commands: run them, build/ rewritten to BUILD_DIR")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per command (default 60)")
    ap.add_argument("--long", action="store_true", help="with --run: run the long commands too, except those that build")
    ap.add_argument("--long-timeout", type=float, default=1800.0, help="seconds per long command with --long (default 1800)")
    ap.add_argument("--verbose", action="store_true",
                    help="print every path checked (--paths) and every command's output (--run)")
    ap.add_argument("pages", nargs="*", help="pages to check (default: the pages named above)")
    args = ap.parse_args()
    if not (args.paths or args.commands):
        ap.error("say --paths, --commands or both")
    if args.run and not args.commands:
        ap.error("--run goes with --commands")
    ok = True
    if args.paths:
        ok &= check_paths(args.pages or path_pages(), args.verbose)
    if args.commands:
        pages = args.pages or sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "course", "*.md")))
        ok &= check_commands(pages, args.run, args.timeout, args.long, args.long_timeout, args.verbose)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
