"""The stable key hash: fixed values (a golden vector), the same in another process, type rules."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from decimal import Decimal

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbspark.algebra import keyhash
from dbspark.algebra.keyhash import bucket_of, one_to_one, stable_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def golden_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "i": pl.Series([0, 1, -1, 2**63 - 1, None, 42], dtype=pl.Int64),
            "s": pl.Series(["", "a", "héllo wörld ✓", None, "x" * 100, "日本"], dtype=pl.String),
            "f": pl.Series([0.0, -0.0, float("nan"), 1.5, None, -2.25], dtype=pl.Float64),
            "d": pl.Series(
                [
                    Decimal("0.00"),
                    Decimal("1.23"),
                    Decimal("-1.23"),
                    None,
                    Decimal("99999999.99"),
                    Decimal("-0.01"),
                ],
                dtype=pl.Decimal(10, 2),
            ),
            "t": pl.Series(
                [
                    datetime.date(1970, 1, 1),
                    datetime.date(2024, 2, 29),
                    None,
                    datetime.date(1900, 1, 1),
                    datetime.date(2000, 1, 1),
                    datetime.date(9999, 12, 31),
                ]
            ),
            "b": pl.Series([True, False, None, True, False, True]),
        }
    )


# Written once from the implementation: any change of the function (which would move every stored
# key to another bucket of existing state directories) fails here.
GOLDEN = {
    "i": [
        9846649770866748099,
        5626881984039482431,
        18104739346796688862,
        8808903255505420005,
        13876372659500758171,
        9292762740894141031,
    ],
    "s": [
        8437367036368045964,
        5100308038826233616,
        11185275626596347481,
        13876372659500758171,
        2889097651706793330,
        18040577835999682991,
    ],
    "f": [
        5294002391298099289,
        5294002391298099289,
        15123123641292864735,
        4576725283587487373,
        13876372659500758171,
        581745036609358388,
    ],
    "d": [
        9846649770866748099,
        9321102724712475563,
        12819665092267963926,
        13876372659500758171,
        14792916185840215585,
        18104739346796688862,
    ],
    "t": [
        9846649770866748099,
        14729770069332149426,
        13876372659500758171,
        15216274147459501,
        16243812662290496516,
        10248354632855404874,
    ],
    "b": [
        5626881984039482431,
        9846649770866748099,
        13876372659500758171,
        5626881984039482431,
        9846649770866748099,
        5626881984039482431,
    ],
    "*": [
        11924444008479747228,
        14916603451594765928,
        9598656135833030216,
        16554025939146675618,
        6870831600629000572,
        17407759308212350917,
    ],
}


def test_golden_vector() -> None:
    df = golden_frame()
    for c in df.columns:
        assert stable_hash(df, [c]).tolist() == GOLDEN[c], c
    assert stable_hash(df, df.columns).tolist() == GOLDEN["*"]
    assert stable_hash(df, df.columns).dtype == np.uint64


def test_same_in_another_process() -> None:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from tests.test_keyhash import golden_frame; "
        "from dbspark.algebra.keyhash import stable_hash; df = golden_frame(); "
        "print(json.dumps({c: stable_hash(df, [c]).tolist() for c in df.columns}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "POLARS_MAX_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code, ROOT], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    ).stdout
    df = golden_frame()
    assert json.loads(out) == {c: stable_hash(df, [c]).tolist() for c in df.columns}


@pytest.mark.parametrize(
    "dtype", [pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.Int128, pl.UInt128]
)
def test_integer_widths_hash_by_value(dtype: pl.DataType) -> None:
    vals = [0, 1, 5, 100, None] + ([-1, -100] if dtype.is_signed_integer() else [])
    ref = stable_hash(pl.DataFrame({"k": pl.Series(vals, dtype=pl.Int64)}), ["k"])
    got = stable_hash(pl.DataFrame({"k": pl.Series(vals, dtype=dtype)}), ["k"])
    assert got.tolist() == ref.tolist()


def test_wide_integers() -> None:
    big = [2**63, 2**64 - 1]
    u = stable_hash(pl.DataFrame({"k": pl.Series(big, dtype=pl.UInt64)}), ["k"])
    assert u.tolist() == stable_hash(pl.DataFrame({"k": pl.Series(big, dtype=pl.Int128)}), ["k"]).tolist()
    # 2**64 - 1 is not -1: integers hash by their value, not their bits
    assert u[1] != stable_hash(pl.DataFrame({"k": [-1]}), ["k"])[0]
    v = [2**100, -(2**100), -(2**127)]
    h = stable_hash(pl.DataFrame({"k": pl.Series(v, dtype=pl.Int128)}), ["k"])
    assert len(set(h.tolist())) == 3


def test_floats_nan_and_signed_zero() -> None:
    a = pl.DataFrame({"f": pl.Series([0.0, -0.0, float("nan"), -float("nan"), 1.5, None], dtype=pl.Float64)})
    h = stable_hash(a, ["f"])
    assert h[0] == h[1] and h[2] == h[3] and len(set(h.tolist())) == 4
    nan_payload = np.array([0x7FF8000000000123], dtype=np.uint64).view(np.float64)
    assert stable_hash(pl.DataFrame({"f": nan_payload}), ["f"])[0] == h[2]
    f32 = stable_hash(a.with_columns(pl.col("f").cast(pl.Float32)), ["f"])
    assert f32.tolist() == h.tolist()


def test_nulls_in_every_type() -> None:
    n = 3
    cols = {
        "i": pl.Series([None] * n, dtype=pl.Int32),
        "u": pl.Series([None] * n, dtype=pl.UInt64),
        "f": pl.Series([None] * n, dtype=pl.Float32),
        "b": pl.Series([None] * n, dtype=pl.Boolean),
        "s": pl.Series([None] * n, dtype=pl.String),
        "bin": pl.Series([None] * n, dtype=pl.Binary),
        "d": pl.Series([None] * n, dtype=pl.Decimal(20, 4)),
        "t": pl.Series([None] * n, dtype=pl.Date),
        "ts": pl.Series([None] * n, dtype=pl.Datetime("us")),
        "du": pl.Series([None] * n, dtype=pl.Duration("ms")),
        "tm": pl.Series([None] * n, dtype=pl.Time),
        "c": pl.Series([None] * n, dtype=pl.Categorical),
        "n": pl.Series([None] * n, dtype=pl.Null),
        "i128": pl.Series([None] * n, dtype=pl.Int128),
    }
    df = pl.DataFrame(cols)
    ref = stable_hash(df, ["n"])
    for c in cols:
        assert stable_hash(df, [c]).tolist() == ref.tolist(), c
    # a NULL next to values: the values keep their hashes
    mixed = pl.DataFrame({"s": ["a", None, "b"]})
    assert (
        stable_hash(mixed, ["s"])[[0, 2]].tolist()
        == stable_hash(pl.DataFrame({"s": ["a", "b"]}), ["s"]).tolist()
    )


def test_strings() -> None:
    vals = ["", "a", "ab", "ba", "é", "e\u0301", "日本語", "🙂", "a" * 70_000, None, ""]
    df = pl.DataFrame({"s": vals})
    h = stable_hash(df, ["s"])
    assert h[0] == h[10]
    assert len(set(h.tolist())) == len(vals) - 1
    # a slice (Arrow offsets not starting at 0), Categorical, Binary and a large column agree
    assert stable_hash(df.slice(3, 5), ["s"]).tolist() == h[3:8].tolist()
    assert stable_hash(df.with_columns(pl.col("s").cast(pl.Categorical)), ["s"]).tolist() == h.tolist()
    assert stable_hash(df.with_columns(pl.col("s").cast(pl.Binary)), ["s"]).tolist() == h.tolist()
    many = pl.DataFrame({"s": [f"key-{i}-ünï" for i in range(300_000)]})  # several hashing passes
    hm = stable_hash(many, ["s"])
    assert hm[12345] == stable_hash(pl.DataFrame({"s": ["key-12345-ünï"]}), ["s"])[0]
    assert len(np.unique(hm)) == many.height


def test_columns_in_order_and_types() -> None:
    df = pl.DataFrame({"a": [1, 2], "b": [2, 1]})
    ab, ba = stable_hash(df, ["a", "b"]), stable_hash(df, ["b", "a"])
    assert ab[0] != ba[0] and ab[0] == ba[1]
    t = pl.DataFrame({"d": [datetime.datetime(2020, 1, 1, 12)]})
    assert (
        stable_hash(t, ["d"])[0] != stable_hash(t.with_columns(pl.col("d").dt.cast_time_unit("ms")), ["d"])[0]
    )
    assert stable_hash(pl.DataFrame({"x": []}, schema={"x": pl.String}), ["x"]).shape == (0,)
    with pytest.raises(TypeError, match="'l'"):
        stable_hash(pl.DataFrame({"l": [[1]]}), ["l"])


def test_buckets_are_even() -> None:
    h = stable_hash(pl.DataFrame({"k": np.arange(100_000)}), ["k"])
    for n in (1, 7, 16, 64):
        counts = np.bincount(bucket_of(h, n), minlength=n)
        assert len(counts) == n and counts.sum() == 100_000
        assert counts.min() > 0.9 * 100_000 / n and counts.max() < 1.1 * 100_000 / n, counts
    assert bucket_of(h, 16).dtype == np.int32
    sh = np.sort(h)
    assert np.all(np.diff(bucket_of(sh, 13)) >= 0)  # monotone in the hash


M64 = (1 << 64) - 1


def _unfmix64(x: int) -> int:
    """The inverse of MurmurHash3's fmix64 (x ^= x >> 33 is its own inverse; the products by the odd
    constants' inverses mod 2**64)."""
    x ^= x >> 33
    x = x * pow(0xC4CEB9FE1A85EC53, -1, 1 << 64) & M64
    x ^= x >> 33
    x = x * pow(0xFF51AFD7ED558CCD, -1, 1 << 64) & M64
    return x ^ (x >> 33)


def int_of_hash(h: int) -> int:
    """The Int64 value whose `stable_hash` as one column is `h` (`keyhash.one_to_one`'s argument run
    backwards: every hash has exactly one value, NULL's fixed value included)."""
    y = _unfmix64((_unfmix64(h) - keyhash.SEED * keyhash._K_ROW) & M64)
    c = int(keyhash._HI_ONES if y >> 63 == 0 else keyhash._HI_ZERO)  # (both constants' top bits are 1)
    x = y ^ c
    return x - (1 << 64) if x >> 63 else x


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_one_integer_column_hashes_one_to_one(vals: list[int]) -> None:
    """A seek by one integer-like key column compares hashes only (`trace/bucketed.py`): each hash of
    such a column is undone to its value, so different values never share a hash."""
    vals += [-(2**63), 2**63 - 1, 0, -1, 1]
    h = stable_hash(pl.DataFrame({"k": pl.Series(vals, dtype=pl.Int64)}), ["k"])
    assert [int_of_hash(int(x)) for x in h] == vals
    assert int(keyhash._HI_ZERO) >> 63 == int(keyhash._HI_ONES) >> 63


def test_one_to_one_key_types() -> None:
    for dt in (
        pl.Int8(),
        pl.Int64(),
        pl.UInt32(),
        pl.UInt64(),
        pl.Boolean(),
        pl.Date(),
        pl.Datetime("us"),
        pl.Time(),
    ):
        assert one_to_one([dt]), dt
    for dts in ([pl.Int64(), pl.Int64()], [pl.Int128()], [pl.Decimal(10, 2)], [pl.String()], [pl.Float64()]):
        assert not one_to_one(dts), dts
    # UInt64 as one column: x ^ a constant under fmix64, one-to-one on its own values
    u = pl.Series([0, 2**63, 2**64 - 1, 2**63 - 1], dtype=pl.UInt64)
    assert len(set(stable_hash(pl.DataFrame({"k": u}), ["k"]).tolist())) == 4
