"""Package rmqspec for ``spark-submit --py-files`` and print the command to run the audit.

``python -m rmqspec.spark.submit [--zip rmqspec.zip] [--master URL] [--run] -- PATH... --out DIR``

Prints the command; with ``--run`` also runs it (``spark-submit`` from ``PATH``, else the one beside this
Python, PySpark's) and exits with its exit code (the job's: 0, 1 violations, 2 bad input).

rmqspec is a namespace package whose sub-packages live in separate folders
(``model/``, ``traces/``, …), so the zip is built from the imported
sub-packages: ``rmqspec/model/…``, ``rmqspec/properties/…``,
``rmqspec/traces/…``, ``rmqspec/spark/…`` — everything the audit imports
(``cli`` is not needed on the cluster). The executors need ``attrs``,
``pyarrow``, ``lark``, ``numpy`` and ``pandas`` as well (``pip install attrs
pyarrow lark numpy pandas`` on the nodes, or a packed virtualenv via
``spark.archives``): the ``mapInArrow`` judges import numpy, and PySpark's
``mapInArrow`` checks for pandas.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGES = ("model", "properties", "traces", "spark")


def _bytecode(path: Path, arcname: str) -> bytes:
    """``path`` compiled by this Python as a hash-checked ``.pyc`` (zipimport reads ``name.pyc`` beside
    ``name.py`` in a zip and checks it against the source there; another Python's magic number makes it
    fall back to the source)."""
    source = path.read_bytes()
    code = compile(source, arcname, "exec", dont_inherit=True)
    return bytes(importlib._bootstrap_external._code_to_hash_pyc(  # type: ignore[attr-defined]
        code, importlib.util.source_hash(source), checked=True))


def build_zip(target: str | Path) -> Path:
    """Write ``target`` holding ``rmqspec/{model,properties,traces,spark}``: sources and their bytecode
    (without it, every Python worker of every application compiles the modules it imports from the
    zip anew: zipimport writes no bytecode)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        # zipimport does not find the sub-packages of a namespace package: in the zip rmqspec is a
        # regular package (without this, executors without rmqspec installed cannot unpickle the
        # Python functions of the filter rules and of the reference plan)
        zf.writestr("rmqspec/__init__.py", '"""rmqspec, as shipped to Spark executors (spark/submit.py)."""\n')
        for name in PACKAGES:
            module = importlib.import_module(f"rmqspec.{name}")
            root = Path(next(iter(module.__path__)))
            for path in sorted(root.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                arcname = f"rmqspec/{name}/{path.relative_to(root)}"
                zf.write(path, arcname)
                zf.writestr(f"{arcname}c", _bytecode(path, arcname))
    return target


def command(zip_path: Path, master: str, job_args: list[str]) -> list[str]:
    job = Path(importlib.import_module("rmqspec.spark.job").__file__ or "job.py")
    return ["spark-submit", "--master", master, "--py-files", str(zip_path), str(job), *job_args]


def spark_submit() -> str:
    """``spark-submit`` on ``PATH``, else the one installed beside this Python (PySpark's), else the bare
    name (the run then fails with a clear error)."""
    found = shutil.which("spark-submit")
    if found:
        return found
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.exists() else "spark-submit"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, job_args = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(prog="python -m rmqspec.spark.submit", description=__doc__.splitlines()[0])
    parser.add_argument("--zip", default="dist/rmqspec.zip", help="where to write the zip")
    parser.add_argument("--master", default="yarn", help="the cluster's master URL")
    parser.add_argument("--run", action="store_true",
                        help="also run the command (spark-submit from PATH, else PySpark's) and exit with its code")
    args = parser.parse_args(argv)
    if args.run and not job_args:
        parser.error("--run needs the job's arguments after --: PATH... --out DIR")
    zip_path = build_zip(args.zip).resolve()
    argv_out = command(zip_path, args.master, job_args or ["PATH", "--out", "DIR"])
    if not args.run:
        print(shlex.join(argv_out))
        return 0
    argv_out[0] = spark_submit()
    print(shlex.join(argv_out), file=sys.stderr, flush=True)
    try:
        return subprocess.run(argv_out, check=False).returncode
    except OSError as exc:
        print(f"{parser.prog}: error: cannot run {argv_out[0]}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
