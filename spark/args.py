"""The audit's command-line arguments (shared by ``rmqspec audit`` and ``spark/job.py``).

Kept free of pyspark imports so building the ``rmqspec`` parser stays fast.
"""

from __future__ import annotations

import argparse

from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--config", metavar="FILE", help="audit parameters (JSON; docs/configuration.md)")
    parser.add_argument(
        "--profile",
        choices=sorted(VERSIONS),
        default=DEFAULT_VERSION,
        help=f"the RocketMQ version that wrote the traces (default {DEFAULT_VERSION}); under 5.1+ "
        "COMMIT/ROLLBACK ops are written in batches (the config's transactionOpBatchInterval, default 3000 ms) "
        "and TXN_CHECK_AFTER_RESOLVED allows for them",
    )
    parser.add_argument("--json", action="store_true", help="print summary.json instead of a table")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable), e.g. spark.driver.memory=4g",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--plan",
        choices=("auto", "reference", "small", "scale"),
        default="auto",
        help="reference: the reference checker run per trace in Spark's Python workers, one job; "
        "small: the Spark rules on cached input, one shuffle partition, one job; scale: the Spark rules "
        "with AQE and shuffles sized to the input; auto (default): reference for local input up to 2 MB "
        "of Parquet, small up to 8 MB, else scale",
    )
    parser.add_argument(
        "--since",
        metavar="STATE_DIR",
        help="incremental audit: PATH is the next day of the history whose state a previous run wrote "
        "with --state-out; the findings are those of the whole history (spark/README.md)",
    )
    parser.add_argument(
        "--state-out",
        metavar="STATE_DIR2",
        help="write the state the next day's --since reads: the rows of open keys, closed keys' tombstones "
        "and the final findings (a new directory, not --since's)",
    )
