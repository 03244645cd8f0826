"""dbspark.io: change batches round-trip through every format; bad batches get errors naming the fault."""

from __future__ import annotations

import datetime as dt
import tempfile
from decimal import Decimal
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import SchemaError, UnsupportedError
from dbspark.io import list_batches, read_changes, read_delta_cdf, write_changes

FORMATS = {"parquet": "batch.parquet", "csv": "batch.csv", "json": "batch.json", "delta": "batch_table"}
RICH = pl.Schema(
    {
        "k": pl.Int64,
        "n": pl.Int32,
        "s": pl.String,
        "x": pl.Float64,
        "b": pl.Boolean,
        "d": pl.Date,
        "t": pl.Datetime("us"),
        "m": pl.Decimal(12, 2),
        "l": pl.List(pl.Int64),
    }
)
RICH_ROWS = {
    "k": [1, None, -(2**62), 7],
    "n": [None, 2, -3, 2**31 - 1],
    "s": ["", None, 'a,"b"\nc', "ünï"],
    "x": [0.1, None, -1e300, 2.5],
    "b": [True, None, False, True],
    "d": [dt.date(2024, 2, 29), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    "t": [dt.datetime(2024, 1, 1, 1, 2, 3, 456789), None, dt.datetime(1970, 1, 1), None],
    "m": [Decimal("1.25"), None, Decimal("-3.00"), Decimal("0.01")],
    "l": [[1, None], None, [], [3]],
}


def frame(schema: pl.Schema, rows: dict[str, list], weights: list[int]) -> pl.DataFrame:
    return pl.DataFrame({**rows, WEIGHT: weights}, schema={**schema, WEIGHT: pl.Int64})


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_typed_rows_with_nulls_and_negative_weights(tmp_path: Path, fmt: str) -> None:
    schema = pl.Schema({c: t for c, t in RICH.items() if not (fmt == "csv" and c == "l")})  # CSV is flat
    df = frame(schema, {c: RICH_ROWS[c] for c in schema}, [1, -2, 0, 2**40])
    path = write_changes(df, tmp_path / FORMATS[fmt], format=fmt)
    rows, weights = read_changes(path, schema)
    assert rows.schema == schema
    assert rows.equals(df.drop(WEIGHT))
    assert weights.dtype == np.int64 and weights.tolist() == [1, -2, 0, 2**40]
    untyped, w2 = read_changes(path)  # without a schema: the file's own columns, weights the same
    assert untyped.columns == list(schema) and w2.tolist() == weights.tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_empty_batch(tmp_path: Path, fmt: str) -> None:
    schema = pl.Schema({"k": pl.Int64, "s": pl.String})
    path = write_changes(frame(schema, {"k": [], "s": []}, []), tmp_path / FORMATS[fmt], format=fmt)
    rows, weights = read_changes(path, schema)
    assert rows.schema == schema and rows.height == 0 and weights.shape == (0,)


ROW = st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.text(max_size=8),
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
    st.none() | st.booleans(),
    st.none() | st.dates(),
)
SIMPLE = pl.Schema({"k": pl.Int64, "s": pl.String, "x": pl.Float64, "b": pl.Boolean, "d": pl.Date})


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=25, deadline=None)
@given(batch=st.lists(st.tuples(ROW, st.integers(-(2**62), 2**62)), max_size=12))
def test_round_trip_property(fmt: str, batch: list) -> None:
    rows = {c: [r[i] for r, _ in batch] for i, c in enumerate(SIMPLE)}
    df = frame(SIMPLE, rows, [w for _, w in batch])
    with tempfile.TemporaryDirectory() as d:
        back, weights = read_changes(write_changes(df, Path(d) / FORMATS[fmt], format=fmt), SIMPLE)
    assert back.equals(df.drop(WEIGHT))
    assert weights.tolist() == df[WEIGHT].to_list()


def test_delta_appends_and_files_are_replaced(tmp_path: Path) -> None:
    schema = pl.Schema({"k": pl.Int64})
    for i in range(2):
        write_changes(frame(schema, {"k": [i]}, [-1]), tmp_path / "t", format="delta")
        write_changes(frame(schema, {"k": [i]}, [-1]), tmp_path / "f.parquet")
    rows, weights = read_changes(tmp_path / "t", schema)
    assert sorted(rows["k"].to_list()) == [0, 1] and weights.tolist() == [-1, -1]
    assert read_changes(tmp_path / "f.parquet", schema)[0]["k"].to_list() == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.parquet", "t"]  # no temporaries left


def test_write_changes_rejects_bad_frames(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="__w"):
        write_changes(pl.DataFrame({"k": [1]}), tmp_path / "a.parquet")
    with pytest.raises(SchemaError, match="'weight'"):
        write_changes(pl.DataFrame({"weight": [1], WEIGHT: [1]}), tmp_path / "a.parquet")
    with pytest.raises(UnsupportedError, match="csv"):
        write_changes(pl.DataFrame({"k": [1], WEIGHT: [1]}), tmp_path / "a.csv")  # default parquet
    with pytest.raises(UnsupportedError, match="nested"):
        write_changes(pl.DataFrame({"l": [[1]], WEIGHT: [1]}), tmp_path / "a.csv", format="csv")
    assert list(tmp_path.iterdir()) == []


# ---- weights from a weight or op column ---------------------------------------------------------------


def test_op_column_spellings(tmp_path: Path) -> None:
    text = "k,op\n1,insert\n2,DELETE\n3,+\n4,-\n5,i\n6,D\n7, Insert \n"
    rows, weights = read_changes(write_text(tmp_path / "b.csv", text), pl.Schema({"k": pl.Int64}))
    assert rows["k"].to_list() == list(range(1, 8))
    assert weights.tolist() == [1, -1, 1, -1, 1, -1, 1]
    jl = '{"k": 1, "op": "delete"}\n{"k": null, "op": "+"}\n'
    rows, weights = read_changes(write_text(tmp_path / "b.ndjson", jl))
    assert rows["k"].to_list() == [1, None] and weights.tolist() == [-1, 1]


def test_no_weight_column_means_inserts(tmp_path: Path) -> None:
    rows, weights = read_changes(
        write_text(tmp_path / "b.csv", "k,s\n1,a\n2,\n"), pl.Schema({"s": pl.String, "k": pl.Int8})
    )
    assert rows.columns == ["s", "k"] and rows.schema["k"] == pl.Int8
    assert weights.tolist() == [1, 1]


def test_weights_as_integral_floats_and_text(tmp_path: Path) -> None:
    jl = '{"k": 1, "weight": 2.0}\n{"k": 2, "weight": -3}\n'
    assert read_changes(write_text(tmp_path / "b.jsonl", jl))[1].tolist() == [2, -3]
    csv = "k,weight\n1, 4\n2,-1.0\n"
    assert read_changes(write_text(tmp_path / "c.csv", csv), pl.Schema({"k": pl.Int64}))[1].tolist() == [
        4,
        -1,
    ]


def test_schema_column_named_op_is_data(tmp_path: Path) -> None:
    rows, weights = read_changes(
        write_text(tmp_path / "b.csv", "op,weight\nx,2\n"), pl.Schema({"op": pl.String})
    )
    assert rows["op"].to_list() == ["x"] and weights.tolist() == [2]


def test_format_override(tmp_path: Path) -> None:
    rows, weights = read_changes(write_text(tmp_path / "b.txt", "k,weight\n1,-1\n"), format="csv")
    assert rows["k"].to_list() == [1] and weights.tolist() == [-1]


# ---- errors -----------------------------------------------------------------------------------------


def test_unknown_op_names_file_row_and_value(tmp_path: Path) -> None:
    path = write_text(tmp_path / "b.csv", "k,op\n1,insert\n2,upsert\n")
    with pytest.raises(SchemaError, match=r"b\.csv.*row 1.*'upsert'"):
        read_changes(path)
    with pytest.raises(SchemaError, match=r"row 0.*None"):
        read_changes(write_text(tmp_path / "n.jsonl", '{"k": 1, "op": null}\n'))


def test_weight_and_op_together(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"b\.csv.*both.*'weight'.*'op'"):
        read_changes(write_text(tmp_path / "b.csv", "k,weight,op\n1,1,insert\n"))


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("a.csv", "k,weight\n1,1\n2,1.5\n", r"a\.csv.*row 1.*'1\.5'.*not an integer"),
        ("b.csv", "k,weight\n1,\n", r"b\.csv.*row 0.*None.*null"),
        ("c.jsonl", '{"k": 1, "weight": 1}\n{"k": 2, "weight": 0.5}\n', r"c\.jsonl.*row 1.*0\.5"),
        ("d.jsonl", '{"k": 1, "weight": "x"}\n', r"d\.jsonl.*row 0.*'x'"),
        ("e.jsonl", '{"k": 1, "weight": true}\n', r"e\.jsonl.*type Boolean"),
        ("f.jsonl", '{"k": 1, "weight": 1e30}\n', r"f\.jsonl.*row 0.*1e\+30"),
    ],
)
def test_bad_weights(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        read_changes(write_text(tmp_path / name, text), pl.Schema({"k": pl.Int64}))


def test_missing_and_extra_columns(tmp_path: Path) -> None:
    path = write_text(tmp_path / "b.csv", "k,weight\n1,1\n")
    with pytest.raises(SchemaError, match=r"b\.csv.*missing.*\['s'\]"):
        read_changes(path, pl.Schema({"k": pl.Int64, "s": pl.String}))
    with pytest.raises(SchemaError, match=r"b\.csv.*\['k'\].*not in the schema"):
        read_changes(path, pl.Schema({}))


@pytest.mark.parametrize(
    "name, text, schema, message",
    [
        ("a.csv", "k\n1\nabc\n", {"k": pl.Int64}, r"a\.csv.*'k'.*'abc'"),
        ("b.csv", "k\n1.5\n", {"k": pl.Int64}, r"b\.csv.*'k'.*1\.5"),
        ("c.csv", "b\ntrue\nmaybe\n", {"b": pl.Boolean}, r"c\.csv.*'b'.*'maybe'"),
        ("d.csv", "d\n2024-13-45\n", {"d": pl.Date}, r"d\.csv.*'d'.*'2024-13-45'"),
        ("e.jsonl", '{"k": 300}\n', {"k": pl.Int8}, r"e\.jsonl.*'k'.*300"),
        ("f.jsonl", '{"k": "x"}\n', {"k": pl.Float64}, r"f\.jsonl.*'k'.*'x'"),
    ],
)
def test_uncastable_values(tmp_path: Path, name: str, text: str, schema: dict, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        read_changes(write_text(tmp_path / name, text), pl.Schema(schema))


def test_uncastable_parquet_column(tmp_path: Path) -> None:
    path = write_changes(pl.DataFrame({"k": ["1", "two"], WEIGHT: [1, 1]}), tmp_path / "b.parquet")
    with pytest.raises(SchemaError, match=r"b\.parquet.*'k'.*'two'"):
        read_changes(path, pl.Schema({"k": pl.Int64}))


def test_paths_that_are_not_batches(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(UnsupportedError, match="not a Delta table"):
        read_changes(tmp_path / "plain")
    with pytest.raises(UnsupportedError, match="suffix"):
        read_changes(write_text(tmp_path / "b.txt", "k\n1\n"))
    with pytest.raises(FileNotFoundError):
        read_changes(tmp_path / "absent.csv")
    with pytest.raises(UnsupportedError, match="format 'xml'"):
        read_changes(tmp_path / "b.txt", format="xml")


# ---- listing ----------------------------------------------------------------------------------------


def test_list_batches_natural_order(tmp_path: Path) -> None:
    for name in [
        "batch10.csv",
        "batch2.parquet",
        "batch1.json",
        "Batch3.jsonl",
        ".hidden.csv",
        "_tmp.csv",
        ".batch5.csv.0123.tmp",
        "notes.txt",
        "batch20.ndjson",
    ]:
        write_text(tmp_path / name, "")
    (tmp_path / "batch7_delta" / "_delta_log").mkdir(parents=True)
    (tmp_path / "batch8_plain").mkdir()
    names = [p.name for p in list_batches(tmp_path)]
    assert names == [
        "batch1.json",
        "batch2.parquet",
        "Batch3.jsonl",
        "batch7_delta",
        "batch10.csv",
        "batch20.ndjson",
    ]


# ---- the Delta change data feed ----------------------------------------------------------------------


def grouped(rows: pl.DataFrame, weights: np.ndarray) -> pl.DataFrame:
    out = rows.with_columns(pl.Series(WEIGHT, weights)).group_by(rows.columns).agg(pl.col(WEIGHT).sum())
    return out.filter(pl.col(WEIGHT) != 0).sort(rows.columns, nulls_last=True)


def table_contents(path: Path, version: int | None = None) -> pl.DataFrame:
    df = pl.DataFrame(pl.from_arrow(DeltaTable(str(path), version=version).to_pyarrow_table()))
    return grouped(df, np.ones(df.height, dtype=np.int64))


def test_delta_change_data_feed(tmp_path: Path) -> None:
    path = tmp_path / "cdf"
    first = pl.DataFrame({"k": [1, 2, 3, None], "s": ["a", "b", None, "d"]})
    write_deltalake(str(path), first.to_arrow(), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(str(path), pl.DataFrame({"k": [2, 4], "s": ["b", "e"]}).to_arrow(), mode="append")
    table = DeltaTable(str(path))
    table.delete("k = 2")
    table.update(updates={"s": "'z'"}, predicate="k = 3")
    schema = pl.Schema({"s": pl.String, "k": pl.Int64})
    rows, weights = read_delta_cdf(path, 0, schema=schema)
    assert rows.schema == schema
    assert sorted(weights.tolist()) == [-1, -1, -1] + [1] * 7  # 6 inserts, 2 deletes, 1 pre- and post-image
    final = table_contents(path)
    assert grouped(rows, weights).equals(final.select(*schema, WEIGHT).sort(list(schema), nulls_last=True))
    assert final["k"].to_list() == [1, 3, 4, None]
    # the contents at version 1 plus the feed of versions 2.. give the final contents
    later, w_later = read_delta_cdf(path, 2)
    before = table_contents(path, version=1)
    both = pl.concat([before.select("k", "s"), later])
    w_both = np.concatenate([before[WEIGHT].to_numpy(), w_later])
    assert grouped(both, w_both).equals(final)
    only_update, w_update = read_delta_cdf(path, 3, 3)
    assert set(zip(only_update["s"].to_list(), w_update.tolist(), strict=True)) == {(None, -1), ("z", 1)}


def test_delta_without_change_data_feed(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), pl.DataFrame({"k": [1]}).to_arrow())
    with pytest.raises(UnsupportedError, match=r"delta\.enableChangeDataFeed"):
        read_delta_cdf(tmp_path / "t", 0)
    on = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(str(tmp_path / "c"), pl.DataFrame({"k": [1]}).to_arrow(), configuration=on)
    with pytest.raises(ValueError, match="versions 5"):
        read_delta_cdf(tmp_path / "c", 5)


def test_a_write_removes_what_a_killed_writer_of_the_same_file_left(tmp_path: Path) -> None:
    left = tmp_path / ".step-1.parquet.0123abcd.tmp"  # a writer of step-1.parquet killed mid-write
    left.write_bytes(b"half a file")
    other = tmp_path / ".step-2.parquet.0123abcd.tmp"  # another target's: not ours to remove
    other.write_bytes(b"half a file")
    write_changes(pl.DataFrame({"x": [1], WEIGHT: [1]}), tmp_path / "step-1.parquet")
    assert sorted(f.name for f in tmp_path.iterdir()) == [".step-2.parquet.0123abcd.tmp", "step-1.parquet"]
