"""The shop project's sources, generated: `python examples/sdp/data.py [--batches N] [--orders N]`.

`data/orders/` is a folder of Parquet files, one per batch (order_id, cust, amount DECIMAL(12,2) with
some zero and negative amounts and NULL customers, order_date); `data/customers/` is a Delta table with
its change data feed on (id, name, region with NULLs, active). `batch(root, k)` adds batch k: a new
orders file, and customers inserted, updated (region, active) and deleted in Delta commits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

ORDERS = pa.schema(
    [
        ("order_id", pa.int64()),
        ("cust", pa.int64()),
        ("amount", pa.decimal128(12, 2)),
        ("order_date", pa.date32()),
    ]
)
CUSTOMERS = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("region", pa.string()), ("active", pa.bool_())]
)
REGIONS = ["north", "south", "east", "west", None]


def _customers(ids: range, rng: random.Random) -> pa.Table:
    rows = [(i, f"customer {i}", rng.choice(REGIONS), rng.random() < 0.85) for i in ids]
    return pa.Table.from_pylist([dict(zip(CUSTOMERS.names, r, strict=True)) for r in rows], schema=CUSTOMERS)


def _orders(first: int, n: int, customers: int, rng: random.Random) -> pa.Table:
    day0 = dt.date(2026, 11, 1)
    rows = []
    for i in range(first, first + n):
        cents = rng.choice([0, -rng.randint(1, 500)]) if rng.random() < 0.05 else rng.randint(1, 100_000)
        cust = None if rng.random() < 0.02 else rng.randint(0, customers + 10)  # some have no customer
        rows.append(
            {
                "order_id": i,
                "cust": cust,
                "amount": Decimal(cents).scaleb(-2),
                "order_date": day0 + dt.timedelta(days=rng.randint(0, 29)),
            }
        )
    return pa.Table.from_pylist(rows, schema=ORDERS)


def initial(root: Path, orders: int = 2_000, customers: int = 100, seed: int = 0) -> None:
    """The sources as the first run finds them."""
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    rng = random.Random(seed)
    (root / "data" / "orders").mkdir(parents=True, exist_ok=True)
    pq.write_table(_orders(0, orders, customers, rng), root / "data" / "orders" / "batch-0000.parquet")
    write_deltalake(
        str(root / "data" / "customers"),
        _customers(range(customers), rng),
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def batch(root: Path, k: int, orders: int = 500, seed: int = 0) -> None:
    """Batch k >= 1 of changes: a new orders file; customers updated, deleted and inserted."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    rng = random.Random(seed * 1000 + k)
    table = DeltaTable(str(root / "data" / "customers"))
    ids = sorted(table.to_pyarrow_table().column("id").to_pylist())
    first = k * 1_000_000
    pq.write_table(_orders(first, orders, len(ids), rng), root / "data" / "orders" / f"batch-{k:04d}.parquet")
    for i in rng.sample(ids, min(5, len(ids))):
        region = rng.choice(REGIONS)
        table.update(
            {"region": f"'{region}'" if region else "NULL", "active": rng.choice(["true", "false"])},
            predicate=f"id = {i}",
        )
    gone = rng.sample(ids, min(3, len(ids)))
    table.delete(f"id IN ({', '.join(map(str, gone))})")
    new = range(max(ids) + 1, max(ids) + 4)
    write_deltalake(str(root / "data" / "customers"), _customers(new, rng), mode="append")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", type=Path, default=Path(__file__).parent)
    ap.add_argument("--batches", type=int, default=0, help="batches of changes after the first data")
    ap.add_argument("--orders", type=int, default=2_000)
    a = ap.parse_args()
    if not (a.root / "data" / "customers").exists():
        initial(a.root, a.orders)
    done = len(list((a.root / "data" / "orders").glob("batch-*.parquet"))) - 1
    for k in range(done + 1, done + 1 + a.batches):
        batch(a.root, k)


if __name__ == "__main__":
    main()
