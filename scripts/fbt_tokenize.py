#!/usr/bin/env python3
"""Turn a text file into a token file that `fbt train --data` reads (docs/training.md, section 4).

    python3 scripts/fbt_tokenize.py --tokenizer DIR_OR_NAME --input corpus.txt --output corpus.bin \
        [--val_output corpus.val.bin --val_fraction 0.1] [--dtype auto|uint16|uint32|int32|int64] \
        [--doc_split blank_line|none] [--sep_id eos|none|N]

--tokenizer is a Hugging Face tokenizer: a directory holding tokenizer.json (read with the `tokenizers`
package), or a name or directory for transformers' AutoTokenizer; or `bytes`, fbt's own byte tokenizer
(ids 0-255 are the bytes, 256 the separator: vocabulary 257), which needs nothing installed. Neither
package is needed by fbt itself; this script imports them only when asked for such a tokenizer.

The text is cut into documents (blank_line: paragraphs; none: one document) and each document is written
as the separator id followed by its tokens, the layout fbt's byte format uses, so doc_start marks every
document's first position. --sep_id: the separator (default eos: the tokenizer's end-of-text id; `bytes`:
256); `none` writes no separator (the stream is one document for fbt). The output's extension picks the
format: .bin (raw little-endian, as nanoGPT writes) or .npy (a 1-d NumPy array, written without numpy).
--dtype auto is uint16 when every id fits (vocabulary <= 65,536), else uint32. With --val_output, the last
--val_fraction of the documents go to that file instead. The last line printed is the fbt train command.

--self_test checks the writers (bytes tokenizer, .bin and .npy, read back; numpy reads the .npy when it
is installed) and, when `tokenizers` is installed, a small BPE tokenizer trained in memory: no network.
"""
# (named fbt_tokenize.py, not tokenize.py: a script's directory is first on sys.path, and a tokenize.py
# there would shadow Python's own tokenize module for every script in scripts/, which `import torch` needs)
import argparse
import os
import struct
import sys
import tempfile

DTYPES = {"uint16": ("<u2", "H", 2, 0, 2**16 - 1), "uint32": ("<u4", "I", 4, 0, 2**32 - 1),
          "int32": ("<i4", "i", 4, -2**31, 2**31 - 1), "int64": ("<i8", "q", 8, -2**63, 2**63 - 1)}


class ByteTok:
    """fbt's byte tokenizer: ids 0-255 are the bytes, 256 the separator."""
    vocab_size = 257
    eos = 256

    def encode(self, text):
        return list(text.encode("utf-8"))


class HfTok:
    """A Hugging Face tokenizer: tokenizer.json through `tokenizers`, else AutoTokenizer."""

    def __init__(self, name):
        self.tok = self.auto = None
        path = os.path.join(name, "tokenizer.json") if os.path.isdir(name) else name
        if path.endswith(".json") and os.path.isfile(path):
            try:
                from tokenizers import Tokenizer
                self.tok = Tokenizer.from_file(path)
            except ImportError:
                pass
        if self.tok is None:
            try:
                from transformers import AutoTokenizer
            except ImportError:
                sys.exit("fbt_tokenize.py: --tokenizer %s needs the `tokenizers` or `transformers` package "
                         "(pip install tokenizers); fbt itself does not" % name)
            self.auto = AutoTokenizer.from_pretrained(name)
        if self.tok is not None:
            self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)
            self.eos = None
            for t in ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "[SEP]"):
                i = self.tok.token_to_id(t)
                if i is not None:
                    self.eos = i
                    break
        else:
            self.vocab_size = len(self.auto)
            self.eos = self.auto.eos_token_id

    def encode(self, text):
        if self.tok is not None:
            return self.tok.encode(text, add_special_tokens=False).ids
        return self.auto.encode(text, add_special_tokens=False)


def split_documents(text, doc_split):
    """As fbt's TextDataset: paragraphs separated by blank lines (lines of only spaces, tabs, \\r)."""
    if doc_split == "none":
        return [text] if text else []
    docs, cur = [], []
    for line in text.splitlines(keepends=True):
        if line.strip(" \t\r\n") == "":
            if cur:
                docs.append("".join(cur))
                cur = []
        else:
            cur.append(line)
    if cur:
        docs.append("".join(cur))
    return docs


def npy_header(descr, n):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, n)
    pad = 64 - (10 + len(d) + 1) % 64
    d = d + " " * (pad % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("ascii")


def write_tokens(path, ids, dtype):
    descr, code, _, lo, hi = DTYPES[dtype]
    bad = [i for i in ids if i < lo or i > hi]
    if bad:
        sys.exit("fbt_tokenize.py: id %d does not fit in %s" % (bad[0], dtype))
    data = struct.pack("<%d%s" % (len(ids), code), *ids)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        if path.endswith(".npy"):
            f.write(npy_header(descr, len(ids)))
        f.write(data)
    os.replace(tmp, path)


def read_tokens(path, dtype):
    """Reads back what write_tokens wrote (for the self-test)."""
    descr, code, size, _, _ = DTYPES[dtype]
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".npy"):
        hl = struct.unpack("<H", raw[8:10])[0]
        assert descr in raw[10:10 + hl].decode("ascii")
        raw = raw[10 + hl:]
    return list(struct.unpack("<%d%s" % (len(raw) // size, code), raw))


def encode_docs(tok, docs, sep):
    ids = []
    for d in docs:
        if sep is not None:
            ids.append(sep)
        ids.extend(tok.encode(d))
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", help="bytes, or a Hugging Face tokenizer directory or name")
    ap.add_argument("--input", help="the text file")
    ap.add_argument("--output", help="the token file: .bin or .npy")
    ap.add_argument("--val_output", default="", help="a validation token file (the last --val_fraction of the documents)")
    ap.add_argument("--val_fraction", type=float, default=0.1)
    ap.add_argument("--dtype", default="auto", choices=["auto"] + list(DTYPES))
    ap.add_argument("--doc_split", default="blank_line", choices=["blank_line", "none"])
    ap.add_argument("--sep_id", default="eos", help="eos (the tokenizer's), none, or an id")
    ap.add_argument("--self_test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not (a.tokenizer and a.input and a.output):
        ap.error("--tokenizer, --input and --output are required")
    if not (a.output.endswith(".bin") or a.output.endswith(".npy")):
        ap.error("--output must end in .bin or .npy (fbt reads the format from the extension)")
    if a.val_output and not (a.val_output.endswith(".bin") or a.val_output.endswith(".npy")):
        ap.error("--val_output must end in .bin or .npy")
    if a.val_output and not 0 < a.val_fraction < 1:
        ap.error("--val_fraction must be in (0, 1)")
    tok = ByteTok() if a.tokenizer == "bytes" else HfTok(a.tokenizer)
    if a.sep_id == "none":
        sep = None
    elif a.sep_id == "eos":
        sep = tok.eos
        if sep is None:
            sys.exit("fbt_tokenize.py: the tokenizer has no end-of-text token; give --sep_id N or --sep_id none")
    else:
        sep = int(a.sep_id)
        if not 0 <= sep < tok.vocab_size:
            sys.exit("fbt_tokenize.py: --sep_id %d is outside the vocabulary [0, %d)" % (sep, tok.vocab_size))
    with open(a.input, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    docs = split_documents(text, a.doc_split)
    if not docs:
        sys.exit("fbt_tokenize.py: %s holds no document" % a.input)
    val_docs = []
    if a.val_output:
        if len(docs) < 2:
            sys.exit("fbt_tokenize.py: %s holds one document; a validation file needs two or more (or use fbt's val_fraction)" % a.input)
        k = min(len(docs) - 1, max(1, round(a.val_fraction * len(docs))))
        docs, val_docs = docs[:-k], docs[-k:]
    dtype = a.dtype if a.dtype != "auto" else ("uint16" if tok.vocab_size <= 2**16 else "uint32")
    ids = encode_docs(tok, docs, sep)
    write_tokens(a.output, ids, dtype)
    print("wrote %d tokens (%d documents, %s) to %s" % (len(ids), len(docs), dtype, a.output))
    cmd = "fbt train --data %s --vocab_size %d --doc_sep_id %d" % (a.output, tok.vocab_size, -1 if sep is None else sep)
    if dtype != "uint16" and a.output.endswith(".bin"):
        cmd += " --token_dtype " + dtype
    if val_docs:
        vids = encode_docs(tok, val_docs, sep)
        write_tokens(a.val_output, vids, dtype)
        print("wrote %d tokens (%d documents, %s) to %s" % (len(vids), len(val_docs), dtype, a.val_output))
        cmd += " --val_data " + a.val_output
    print("vocabulary %d, separator %s; train with:" % (tok.vocab_size, "none" if sep is None else sep))
    print(cmd)
    return 0


def self_test():
    ok = True

    def check(name, cond):
        nonlocal ok
        print(("PASS " if cond else "FAIL ") + name)
        ok = ok and cond

    text = "first document\nline two\n\n  \nsecond, with \xe9\n\n\nthird\n"
    docs = split_documents(text, "blank_line")
    check("split_documents: 3 paragraphs", docs == ["first document\nline two\n", "second, with \xe9\n", "third\n"])
    ids = encode_docs(ByteTok(), docs, 256)
    check("bytes: separator + UTF-8 bytes per document", ids[:6] == [256] + list(b"first") and ids.count(256) == 3
          and len(ids) == 3 + sum(len(d.encode("utf-8")) for d in docs))
    with tempfile.TemporaryDirectory() as d:
        for ext in (".bin", ".npy"):
            for dt in DTYPES:
                p = os.path.join(d, "t" + ext)
                write_tokens(p, ids, dt)
                check("%s %s reads back" % (ext, dt), read_tokens(p, dt) == ids)
                if ext == ".bin":
                    check(".bin %s size" % dt, os.path.getsize(p) == len(ids) * DTYPES[dt][2])
        try:
            import numpy as np
            p = os.path.join(d, "n.npy")
            write_tokens(p, ids, "int32")
            a = np.load(p)
            check("numpy reads the .npy", a.dtype == np.int32 and a.shape == (len(ids),) and a.tolist() == ids)
        except ImportError:
            print("SKIP numpy check (numpy not installed)")
        src = os.path.join(d, "c.txt")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join([text] * 3))  # a blank line between the copies: 9 documents
        out, val = os.path.join(d, "c.bin"), os.path.join(d, "c.val.bin")
        main(["--tokenizer", "bytes", "--input", src, "--output", out, "--val_output", val, "--val_fraction", "0.2"])
        t, v = read_tokens(out, "uint16"), read_tokens(val, "uint16")
        check("main: train + validation hold every document", t.count(256) + v.count(256) == 9 and v.count(256) == 2)
        try:
            from tokenizers import Tokenizer, models, pre_tokenizers, trainers
            hf = Tokenizer(models.BPE(unk_token="<unk>"))
            hf.pre_tokenizer = pre_tokenizers.ByteLevel()
            hf.train_from_iterator([text] * 20, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<unk>"]))
            tdir = os.path.join(d, "tok")
            os.makedirs(tdir)
            hf.save(os.path.join(tdir, "tokenizer.json"))
            out = os.path.join(d, "h.npy")
            main(["--tokenizer", tdir, "--input", src, "--output", out])
            h = read_tokens(out, "uint16")
            eos = hf.token_to_id("<|endoftext|>")
            check("HF tokenizer: eos separates the documents", h.count(eos) == 9 and h[0] == eos)
            check("HF tokenizer: ids are the tokenizer's", h[1:1 + 4] == hf.encode(docs[0], add_special_tokens=False).ids[:4])
        except ImportError:
            print("SKIP Hugging Face tokenizer check (the tokenizers package is not installed)")
    print("tokenize self-test: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
