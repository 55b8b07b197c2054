"""Sample input for a push: ``python -m segment_lineage.sample DIR [--rows N] [--files K] [--label L]``.

Writes K Parquet files of (label, i) rows into DIR, replacing what an earlier
run wrote there; the deployment's push job uses it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

MAX_ROWS = 100_000_000


def write_sample(directory: Path, rows: int, files: int, label: str) -> list[Path]:
    if not 0 < rows <= MAX_ROWS:
        raise ValueError(f"invalid row count {rows}: 1 to {MAX_ROWS}")
    if not 0 < files <= min(rows, 1000):
        raise ValueError(f"invalid file count {files}: 1 to min(rows, 1000)")
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("sample-*.parquet"):
        old.unlink()
    written = []
    per_file, extra = divmod(rows, files)
    start = 0
    for index in range(files):
        count = per_file + (1 if index < extra else 0)
        table = pa.table({"label": pa.array([label] * count), "i": pa.array(range(start, start + count))})
        path = directory / f"sample-{index:04d}.parquet"
        pq.write_table(table, path)
        written.append(path)
        start += count
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m segment_lineage.sample", description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--label", default="sample")
    args = parser.parse_args(argv)
    try:
        written = write_sample(args.directory, args.rows, args.files, args.label)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.rows} rows in {len(written)} file(s) to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
