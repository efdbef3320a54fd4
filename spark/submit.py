"""Package rmqspec for ``spark-submit --py-files`` and print the command to run the audit.

``python -m rmqspec.spark.submit [--zip rmqspec.zip] [--master URL] -- PATH... --out DIR``

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
import shlex
import sys
import zipfile
from pathlib import Path

PACKAGES = ("model", "properties", "traces", "spark")


def build_zip(target: str | Path) -> Path:
    """Write ``target`` holding ``rmqspec/{model,properties,traces,spark}`` sources."""
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
                zf.write(path, f"rmqspec/{name}/{path.relative_to(root)}")
    return target


def command(zip_path: Path, master: str, job_args: list[str]) -> list[str]:
    job = Path(importlib.import_module("rmqspec.spark.job").__file__ or "job.py")
    return ["spark-submit", "--master", master, "--py-files", str(zip_path), str(job), *job_args]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, job_args = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(prog="python -m rmqspec.spark.submit", description=__doc__.splitlines()[0])
    parser.add_argument("--zip", default="dist/rmqspec.zip", help="where to write the zip")
    parser.add_argument("--master", default="yarn", help="the cluster's master URL")
    args = parser.parse_args(argv)
    zip_path = build_zip(args.zip).resolve()
    print(shlex.join(command(zip_path, args.master, job_args or ["PATH", "--out", "DIR"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
