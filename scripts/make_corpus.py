#!/usr/bin/env python3
"""make_corpus.py: a real text corpus that every machine with Python has, for the scale ladder (docs/EXPERIMENTS.md,
"Scale"): the Python standard library's own source files (*.py) of the interpreter that runs this script.

    python3 scripts/make_corpus.py OUT_DIR [--max-bytes N] [--check MANIFEST]
    python3 scripts/make_corpus.py --self-test

Deterministic: the files are the *.py files under sysconfig's "stdlib" path, in sorted order of their path
relative to it, without the test suites (test/, tests/, idle_test/ and idlelib/: Debian ships the test suite
as a separate package, so it is not on every machine) and without site-packages / dist-packages / __pycache__.
Each file is one document: the byte tokenizer's separator (id 256) and then its bytes (ids 0..255), exactly the
ids `fbt train` gives a text file's documents. The split is by file and fixed: a file is in validation when the
first byte of sha256(its relative path) is below 13 (about 5% of the files; a file's side never depends on
the others, so a newer Python moves only the files it changes).

Writes OUT_DIR/train.bin and OUT_DIR/val.bin (uint16 token ids: `fbt train --data OUT_DIR/train.bin --val_data
OUT_DIR/val.bin --token_dtype uint16 --doc_sep_id 256`, the byte model's vocabulary of 257) and
OUT_DIR/corpus.json: the Python version and path, the file and token counts of each split, the sha256 of each
.bin file and of the list of (path, sha256 of the file) pairs. The same Python (Debian 12's /usr/bin/python3,
3.11.2, is the reference of the results in docs/EXPERIMENTS.md) gives the same bytes; --check MANIFEST compares
the corpus just built with a manifest and exits 1 on a difference. --max-bytes N keeps the first files in
order up to about N bytes of training text (a smoke run).
"""
import array
import hashlib
import json
import os
import struct
import sys
import sysconfig
import tempfile

SEP = 256
EXCLUDED_DIRS = {"test", "tests", "idle_test", "idlelib", "site-packages", "dist-packages", "__pycache__"}
VAL_THRESHOLD = 13  # first byte of sha256(relative path) below this: a validation file (13/256 = 5.1%)


def stdlib_files(root):
    """The corpus's files: (relative path, absolute path), sorted by relative path (with '/' separators)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in EXCLUDED_DIRS]
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, root).replace(os.sep, "/"), p))
    out.sort()
    return out


def is_validation(rel):
    return hashlib.sha256(rel.encode("utf-8")).digest()[0] < VAL_THRESHOLD


def write_tokens(path, docs):
    """uint16 little-endian ids: per document the separator, then its bytes. Returns (tokens, sha256)."""
    h = hashlib.sha256()
    n = 0
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for data in docs:
            ids = array.array("H", [SEP])
            ids.extend(data)  # bytes -> one id per byte
            if sys.byteorder == "big":
                ids.byteswap()
            chunk = ids.tobytes()
            f.write(chunk)
            h.update(chunk)
            n += len(ids)
    os.replace(tmp, path)
    return n, h.hexdigest()


def build(out_dir, root=None, max_bytes=0):
    root = root or sysconfig.get_paths()["stdlib"]
    files = stdlib_files(root)
    if not files:
        raise SystemExit("make_corpus.py: no .py files under %s" % root)
    train, val, listing = [], [], hashlib.sha256()
    train_bytes = 0
    for rel, p in files:
        with open(p, "rb") as fh:
            data = fh.read()
        if max_bytes and not is_validation(rel) and train_bytes >= max_bytes:
            continue
        if max_bytes and is_validation(rel) and sum(len(v[1]) for v in val) >= max(max_bytes // 20, 1):
            continue
        listing.update(("%s %s\n" % (rel, hashlib.sha256(data).hexdigest())).encode("utf-8"))
        (val if is_validation(rel) else train).append((rel, data))
        if not is_validation(rel):
            train_bytes += len(data)
    os.makedirs(out_dir, exist_ok=True)
    manifest = {
        "corpus": "python-stdlib",
        "python": sys.version.split()[0],
        "implementation": sys.implementation.name,
        "stdlib": root,
        "excluded_dirs": sorted(EXCLUDED_DIRS),
        "validation_rule": "sha256(relative path)[0] < %d" % VAL_THRESHOLD,
        "max_bytes": max_bytes,
        "files_sha256": listing.hexdigest(),
    }
    for name, docs in (("train", train), ("val", val)):
        tokens, digest = write_tokens(os.path.join(out_dir, name + ".bin"), [d for _, d in docs])
        manifest[name] = {"files": len(docs), "bytes": sum(len(d) for _, d in docs), "tokens": tokens, "sha256": digest}
    tmp = os.path.join(out_dir, "corpus.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, os.path.join(out_dir, "corpus.json"))
    return manifest


def self_test():
    """A small tree: sorted order, exclusions, the split rule, the token layout and determinism."""
    with tempfile.TemporaryDirectory() as t:
        root = os.path.join(t, "lib")
        for rel, text in (("b.py", "x = 1\n"), ("a/c.py", "def f():\n    return 2\n"), ("test/t.py", "skip\n"),
                          ("a/__pycache__/c.py", "skip\n"), ("d.txt", "skip\n")):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)
        got = [r for r, _ in stdlib_files(root)]
        assert got == ["a/c.py", "b.py"], got
        m1 = build(os.path.join(t, "out1"), root)
        m2 = build(os.path.join(t, "out2"), root)
        assert m1["train"]["sha256"] == m2["train"]["sha256"] and m1["files_sha256"] == m2["files_sha256"]
        assert m1["train"]["files"] + m1["val"]["files"] == 2
        with open(os.path.join(t, "out1", "train.bin"), "rb") as fh:
            ids = struct.unpack("<%dH" % (os.path.getsize(fh.name) // 2), fh.read())
        want = []
        for rel in got:
            if not is_validation(rel):
                with open(os.path.join(root, rel), "rb") as src:
                    want += [SEP] + list(src.read())
        assert list(ids) == want, (ids[:20], want[:20])
        assert m1["train"]["tokens"] == len(want)
    print("make_corpus.py self-test: ok")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, max_bytes, check = argv[1], 0, None
    i = 2
    while i < len(argv):
        if argv[i] == "--max-bytes" and i + 1 < len(argv):
            max_bytes = int(argv[i + 1]); i += 2
        elif argv[i] == "--check" and i + 1 < len(argv):
            check = argv[i + 1]; i += 2
        else:
            print("make_corpus.py: unknown argument %r" % argv[i], file=sys.stderr)
            return 2
    m = build(out, max_bytes=max_bytes)
    print("corpus: Python %s stdlib (%s): train %d files, %d tokens; validation %d files, %d tokens; %s/{train,val}.bin" %
          (m["python"], m["stdlib"], m["train"]["files"], m["train"]["tokens"], m["val"]["files"], m["val"]["tokens"], out))
    if check:
        with open(check) as fh:
            ref = json.load(fh)
        keys = ("python", "files_sha256", "train", "val")
        diff = [k for k in keys if ref.get(k) != m.get(k)]
        if diff:
            print("make_corpus.py: differs from %s in %s (another Python or stdlib than the reference's %s)" % (check, ", ".join(diff), ref.get("python")),
                  file=sys.stderr)
            return 1
        print("corpus matches %s" % check)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
