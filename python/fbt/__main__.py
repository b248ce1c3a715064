"""The `fbt` command from the Python package: `fbt <command> ...` (the console script `pip install .` installs) and
`python -m fbt <command> ...`: the same subcommands as the CMake build's `fbt` (train, eval, sample, demo, ablate,
logits, export, probe), run by the extension in this process (fbt._fbt._main)."""
import os
import sys


def main(argv=None):
    """Runs `fbt` with argv (default: sys.argv) and returns its exit status."""
    from . import _fbt

    args = list(sys.argv if argv is None else argv)
    args[0] = os.path.basename(args[0]) if args else "fbt"
    if args[0] in ("__main__.py", "-m", "-c"):
        args[0] = "fbt"
    sys.stdout.flush()
    sys.stderr.flush()
    return _fbt._main([str(a) for a in args])


if __name__ == "__main__":
    sys.exit(main())
