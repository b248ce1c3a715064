"""fbt.track: a run's JSONL logs (train.jsonl, eval.jsonl) into an experiment tracker, after the fact or live.

    python -m fbt.track RUN_DIR --to tensorboard [--logdir DIR] [--follow] [--idle 600]
    python -m fbt.track RUN_DIR --to wandb [--project fbt] [--name NAME]      # a W&B offline run (wandb sync to upload)

and from Python, ``fbt.train(..., track="tensorboard")`` (or ``"wandb"``) logs the same scalars while the run trains.

What is logged, per line: every number of the line under ``train/<field>`` (``eval/<field>``), and every list of numbers
as one scalar per pass, ``train/loss/pass_1`` .. ``pass_K`` (``eval/val_loss/pass_k``, ``train/gate_mean/pass_2``, ...), at the
line's ``step`` (the lines' lists are per pass: ``loss``, ``val_loss``, ``state_rms``, ``gate_mean``, ``gate_std``,
``feedback_ratio``). Nested objects (``contraction``, ``loss_by_position``) are left out: their numbers are in eval.jsonl.

TensorBoard: the event files are written by this module itself (the TFRecord framing with masked CRC-32C and the
three protobuf messages a scalar needs), so nothing beyond the standard library is needed to write them; TensorBoard
(``pip install tensorboard``) reads them: ``tensorboard --logdir RUN_DIR/tensorboard``. W&B: needs ``pip install wandb``;
the run is offline (``WANDB_MODE=offline`` unless set) and ``wandb sync`` uploads it.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

__all__ = ["TensorBoardWriter", "WandbWriter", "make_writer", "scalars", "follow", "read_events", "Tracker"]

# ---------------------------------------------------------------------------------------------- the event file format
_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data):
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # int64 as protobuf writes it (two's complement)
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(num, payload):  # a length-delimited field (string, bytes, message)
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def _event(wall_time, step=None, file_version=None, tag=None, value=None):
    """An Event message: wall_time (1, double), step (2, int64), file_version (3) or summary (5) holding one
    Summary.Value {tag (1), simple_value (2, float)}."""
    e = bytes([0x09]) + struct.pack("<d", wall_time)
    if step is not None:
        e += bytes([0x10]) + _varint(int(step))
    if file_version is not None:
        e += _field_bytes(3, file_version.encode())
    if tag is not None:
        v = _field_bytes(1, tag.encode()) + bytes([0x15]) + struct.pack("<f", float(value))
        e += _field_bytes(5, _field_bytes(1, v))
    return e


def _record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", _masked_crc(n)) + data + struct.pack("<I", _masked_crc(data))


def _read_varint(b, i):
    n = shift = 0
    while True:
        x = b[i]
        i += 1
        n |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return n, i


def _fields(b):
    """(number, wire type, value) of a protobuf message's fields (varint, fixed64, length-delimited, fixed32)."""
    i = 0
    while i < len(b):
        key, i = _read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("unsupported protobuf wire type %d" % wt)
        yield num, wt, v


def read_events(path):
    """The scalars of an event file as [(step, tag, value)], its CRCs checked (ValueError naming the record otherwise)."""
    out = []
    data = open(path, "rb").read()
    i = k = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("%s: record %d is cut short" % (path, k))
        n = struct.unpack("<Q", data[i:i + 8])[0]
        if struct.unpack("<I", data[i + 8:i + 12])[0] != _masked_crc(data[i:i + 8]):
            raise ValueError("%s: record %d: the length's CRC does not match" % (path, k))
        body = data[i + 12:i + 12 + n]
        if len(body) != n or struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] != _masked_crc(body):
            raise ValueError("%s: record %d: the data's CRC does not match" % (path, k))
        i, k = i + 16 + n, k + 1
        step = 0
        summary = None
        for num, _, v in _fields(body):
            if num == 2:
                step = v - (1 << 64) if v >= 1 << 63 else v
            elif num == 5:
                summary = v
        if summary is None:
            continue
        for num, _, value in _fields(summary):
            if num != 1:
                continue
            tag, x = None, None
            for vn, _, vv in _fields(value):
                if vn == 1:
                    tag = bytes(vv).decode()
                elif vn == 2:
                    x = struct.unpack("<f", vv)[0]
            if tag is not None and x is not None:
                out.append((step, tag, x))
    return out


# ------------------------------------------------------------------------------------------------------- the writers
class TensorBoardWriter:
    """Scalars into a TensorBoard event file under `logdir` (created), written and flushed record by record."""

    name = "tensorboard"

    def __init__(self, logdir, **_):
        os.makedirs(logdir, exist_ok=True)
        self.path = os.path.join(logdir, "events.out.tfevents.%d.%s.fbt" % (int(time.time()), socket.gethostname()))
        self._f = open(self.path, "ab")
        self._f.write(_record(_event(time.time(), step=0, file_version="brain.Event:2")))
        self._f.flush()

    def log(self, step, values):
        now = time.time()
        for tag, v in values.items():
            self._f.write(_record(_event(now, step=step, tag=tag, value=v)))
        self._f.flush()

    def close(self):
        if self._f:
            self._f.close()
            self._f = None


class WandbWriter:
    """Scalars into a Weights & Biases run, offline unless WANDB_MODE says otherwise (`wandb sync DIR` uploads it)."""

    name = "wandb"

    def __init__(self, logdir, project="fbt", name=None, config=None, **_):
        try:
            import wandb
        except ImportError:
            raise SystemExit("fbt.track: --to wandb needs the wandb package: pip install wandb") from None
        os.environ.setdefault("WANDB_MODE", "offline")
        os.makedirs(logdir, exist_ok=True)
        self._wandb = wandb
        self.run = wandb.init(project=project, name=name, dir=logdir, config=config or {}, reinit=True)

    def log(self, step, values):
        self.run.log(dict(values), step=int(step))

    def close(self):
        if self.run is not None:
            self.run.finish()
            self.run = None


def make_writer(to, logdir, **kw):
    """A writer by name: "tensorboard" or "wandb" (ValueError naming the choices otherwise)."""
    writers = {"tensorboard": TensorBoardWriter, "wandb": WandbWriter}
    if to not in writers:
        raise ValueError("fbt.track: unknown tracker %r (expected tensorboard or wandb)" % (to,))
    return writers[to](logdir, **kw)


def scalars(record, prefix):
    """{tag: value} of a JSONL line: numbers as prefix/field, lists of numbers (per pass) as prefix/field/pass_k."""
    out = {}
    for k, v in record.items():
        if k == "step":
            continue
        if isinstance(v, bool):
            out["%s/%s" % (prefix, k)] = float(v)
        elif isinstance(v, (int, float)):
            out["%s/%s" % (prefix, k)] = float(v)
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            for i, x in enumerate(v):  # the lines' lists are per pass: loss, val_loss, state_rms, gate_mean, ...
                out["%s/%s/pass_%d" % (prefix, k, i + 1)] = float(x)
    return out


class Tracker:
    """Logs train.jsonl and eval.jsonl lines (dicts) to a writer: what fbt.train(track=...) and follow() use."""

    def __init__(self, writer):
        self.writer = writer

    def train(self, record):
        self.writer.log(record.get("step", 0), scalars(record, "train"))

    def eval(self, record):
        self.writer.log(record.get("step", 0), scalars(record, "eval"))

    def close(self):
        self.writer.close()


class _Tail:
    """The complete lines a JSONL file has gained since the last call (a line still being written waits)."""

    def __init__(self, path):
        self.path, self.pos, self.rest = path, 0, b""

    def lines(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = f.read()
            self.pos = f.tell()
        data = self.rest + data
        parts = data.split(b"\n")
        self.rest = parts.pop()
        out = []
        for p in parts:
            if p.strip():
                out.append(json.loads(p))
        return out


def follow(run_dir, tracker, live=False, idle=600.0, poll=1.0):
    """Logs run_dir's train.jsonl and eval.jsonl to tracker: what they hold now, and with live=True what they gain,
    until no line has come for `idle` seconds (or Ctrl-C). Returns the number of lines logged."""
    if not os.path.isdir(run_dir):
        raise SystemExit("fbt.track: %s is not a run directory (fbt train's out_dir, with train.jsonl and eval.jsonl)" % run_dir)
    if not live and not os.path.exists(os.path.join(run_dir, "train.jsonl")):
        raise SystemExit("fbt.track: %s has no train.jsonl (is it fbt train's out_dir?)" % run_dir)
    tails = [(_Tail(os.path.join(run_dir, "train.jsonl")), tracker.train), (_Tail(os.path.join(run_dir, "eval.jsonl")), tracker.eval)]
    n, last = 0, time.time()
    while True:
        got = 0
        for tail, log in tails:
            for rec in tail.lines():
                log(rec)
                got += 1
        n += got
        if got:
            last = time.time()
        if not live or time.time() - last > idle:
            return n
        try:
            time.sleep(poll)
        except KeyboardInterrupt:
            return n


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fbt.track", description="A run's train.jsonl and eval.jsonl into TensorBoard or W&B.")
    ap.add_argument("run_dir", help="fbt train's out_dir")
    ap.add_argument("--to", required=True, choices=["tensorboard", "wandb"])
    ap.add_argument("--logdir", help="where the tracker writes (default RUN_DIR/tensorboard or RUN_DIR/wandb)")
    ap.add_argument("--follow", action="store_true", help="keep logging the lines the run adds (a run still training)")
    ap.add_argument("--idle", type=float, default=600.0, help="with --follow: stop after this many seconds without a new line")
    ap.add_argument("--project", default="fbt", help="wandb: the project")
    ap.add_argument("--name", default=None, help="wandb: the run's name (default the run directory's)")
    a = ap.parse_args(argv)
    logdir = a.logdir or os.path.join(a.run_dir, a.to)
    writer = make_writer(a.to, logdir, project=a.project, name=a.name or os.path.basename(os.path.abspath(a.run_dir)))
    tracker = Tracker(writer)
    try:
        n = follow(a.run_dir, tracker, live=a.follow, idle=a.idle)
    finally:
        tracker.close()
    where = getattr(writer, "path", logdir)
    print("fbt.track: %d lines of %s into %s (%s)" % (n, a.run_dir, a.to, where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
