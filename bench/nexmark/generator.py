"""A seeded Nexmark event generator: the three streams (persons, auctions, bids) of the Nexmark benchmark
as its reference generator defines them (Apache Beam's `NexmarkGenerator` / `NexmarkUtils`, which Flink's
and Feldera's Nexmark suites follow), vectorized with NumPy.

Event i (from 0) is, by i mod 50: a person (0), an auction (1-3) or a bid (4-49). Its time is the start
time plus i times the inter-event delay (10,000 events/s by default: 100 µs apart), so the streams are in
time order. Ids and references follow the reference generator:

- a person's id is 1000 + the number of persons before it;
- an auction's seller is a "hot" seller (the last person id rounded down to a multiple of 4) with
  probability 3/4, else one of the last 1,000 persons (and a few ids ahead); its category is 10-14; it
  expires 1 ms to twice the time of 1,666 events (the in-flight auctions' horizon) after it starts;
- a bid's auction is a hot auction (the last auction id rounded down to an even one) with probability
  1/2, else one of the last 100 auctions (and a few ahead); its bidder is hot with probability 3/4; its
  price is 10^U(0, 6) cents rounded; its channel one of four names or a numbered channel, and its URL
  names it.

The names, cities and states are the reference generator's lists. The `extra` padding columns are
empty strings (the reference pads records to an average size; the queries do not read them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import polars as pl

PERSON, AUCTION, BID, DENOMINATOR = 1, 3, 46, 50
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, CATEGORIES = 10, 5
HOT_AUCTION_RATIO, HOT_SELLER_RATIO, HOT_BIDDER_RATIO = 2, 4, 4
ACTIVE_PEOPLE, IN_FLIGHT_AUCTIONS = 1000, 100
PERSON_ID_LEAD, AUCTION_ID_LEAD = 10, 10
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
START = dt.datetime(2026, 11, 1, 0, 0)

PERSON_SCHEMA = {
    "id": pl.Int64,
    "name": pl.String,
    "email_address": pl.String,
    "credit_card": pl.String,
    "city": pl.String,
    "state": pl.String,
    "date_time": pl.Datetime("us"),
    "extra": pl.String,
}
AUCTION_SCHEMA = {
    "id": pl.Int64,
    "item_name": pl.String,
    "description": pl.String,
    "initial_bid": pl.Int64,
    "reserve": pl.Int64,
    "date_time": pl.Datetime("us"),
    "expires": pl.Datetime("us"),
    "seller": pl.Int64,
    "category": pl.Int64,
    "extra": pl.String,
}
BID_SCHEMA = {
    "auction": pl.Int64,
    "bidder": pl.Int64,
    "price": pl.Int64,
    "channel": pl.String,
    "url": pl.String,
    "date_time": pl.Datetime("us"),
    "extra": pl.String,
}


@dataclass(frozen=True)
class Events:
    """One batch of events: the persons, auctions and bids among events [first, first + n)."""

    person: pl.DataFrame
    auction: pl.DataFrame
    bid: pl.DataFrame

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"person": self.person, "auction": self.auction, "bid": self.bid}


def last_person(i: np.ndarray) -> np.ndarray:
    """The base-0 id of the last person at or before event i."""
    epoch, offset = i // DENOMINATOR, i % DENOMINATOR
    return epoch * PERSON + np.minimum(offset, PERSON - 1)


def last_auction(i: np.ndarray) -> np.ndarray:
    """The base-0 id of the last auction at or before event i (-1 before the first)."""
    epoch, offset = i // DENOMINATOR, i % DENOMINATOR
    before = offset < PERSON
    off = np.where(before | (offset >= PERSON + AUCTION), AUCTION - 1, offset - PERSON)
    return np.where(before, epoch - 1, epoch) * AUCTION + off


def events(first: int, n: int, seed: int, delay_us: int = 100) -> Events:
    """Events [first, first + n) of the stream with this seed (a batch depends on its range only)."""
    rng = np.random.default_rng([seed, first, n])
    i = np.arange(first, first + n, dtype=np.int64)
    t = pl.Series(np.datetime64(START, "us") + (i * delay_us).astype("timedelta64[us]"))
    kind = i % DENOMINATOR
    p, a = kind < PERSON, (kind >= PERSON) & (kind < PERSON + AUCTION)
    b = ~(p | a)
    return Events(
        _persons(rng, i[p], t.filter(pl.Series(p))),
        _auctions(rng, i[a], t.filter(pl.Series(a)), delay_us),
        _bids(rng, i[b], t.filter(pl.Series(b))),
    )


def _pick(rng: np.random.Generator, words: list[str], n: int) -> pl.Series:
    return pl.Series(np.asarray(words, dtype=object)[rng.integers(0, len(words), n)], dtype=pl.String)


def _some_person(rng: np.random.Generator, i: np.ndarray) -> np.ndarray:
    people = last_person(i) + 1
    active = np.minimum(people, ACTIVE_PEOPLE)
    return people - active + rng.integers(0, active + PERSON_ID_LEAD)


def _some_auction(rng: np.random.Generator, i: np.ndarray) -> np.ndarray:
    hi = np.maximum(last_auction(i), 0)
    lo = np.maximum(hi - IN_FLIGHT_AUCTIONS, 0)
    return lo + rng.integers(0, hi - lo + 1 + AUCTION_ID_LEAD)


def _price(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


def _persons(rng: np.random.Generator, i: np.ndarray, t: pl.Series) -> pl.DataFrame:
    n = len(i)
    first, last = _pick(rng, FIRST_NAMES, n), _pick(rng, LAST_NAMES, n)
    return pl.DataFrame(
        {
            "id": last_person(i) + FIRST_PERSON_ID,
            "name": first + " " + last,
            "email_address": first.str.to_lowercase() + "@" + last.str.to_lowercase() + ".com",
            "credit_card": pl.Series(rng.integers(0, 10**16, n)).cast(pl.String).str.zfill(16),
            "city": _pick(rng, US_CITIES, n),
            "state": _pick(rng, US_STATES, n),
            "date_time": t,
            "extra": pl.Series([""] * n, dtype=pl.String),
        },
        schema=PERSON_SCHEMA,
    )


def _auctions(rng: np.random.Generator, i: np.ndarray, t: pl.Series, delay_us: int) -> pl.DataFrame:
    n = len(i)
    hot = rng.integers(0, HOT_SELLER_RATIO, n) > 0
    seller = np.where(hot, last_person(i) // HOT_SELLER_RATIO * HOT_SELLER_RATIO, _some_person(rng, i))
    horizon_us = IN_FLIGHT_AUCTIONS * DENOMINATOR // AUCTION * delay_us
    length_us = 1000 + rng.integers(0, 2 * horizon_us, n)
    initial = _price(rng, n)
    ids = last_auction(i) + FIRST_AUCTION_ID
    return pl.DataFrame(
        {
            "id": ids,
            "item_name": "item-" + pl.Series(ids).cast(pl.String),
            "description": pl.Series([""] * n, dtype=pl.String),
            "initial_bid": initial,
            "reserve": initial + _price(rng, n),
            "date_time": t,
            "expires": t + pl.Series(length_us).cast(pl.Duration("us")),
            "seller": seller + FIRST_PERSON_ID,
            "category": FIRST_CATEGORY_ID + rng.integers(0, CATEGORIES, n),
            "extra": pl.Series([""] * n, dtype=pl.String),
        },
        schema=AUCTION_SCHEMA,
    )


def _bids(rng: np.random.Generator, i: np.ndarray, t: pl.Series) -> pl.DataFrame:
    n = len(i)
    hot_a = rng.integers(0, HOT_AUCTION_RATIO, n) > 0
    auction = np.where(hot_a, last_auction(i) // HOT_AUCTION_RATIO * HOT_AUCTION_RATIO, _some_auction(rng, i))
    hot_b = rng.integers(0, HOT_BIDDER_RATIO, n) > 0
    bidder = np.where(hot_b, last_person(i) // HOT_BIDDER_RATIO * HOT_BIDDER_RATIO + 1, _some_person(rng, i))
    numbered = rng.integers(0, 10, n) == 0
    chan_no = rng.integers(0, 10_000, n)
    named = _pick(rng, CHANNELS, n)
    channel = pl.select(
        pl.when(pl.Series(numbered))
        .then(pl.lit("channel-") + pl.Series(chan_no).cast(pl.String))
        .otherwise(named)
    ).to_series()
    url = (
        "https://www.nexmark.com/"
        + channel.str.to_lowercase()
        + "/item.htm?query=1&channel_id="
        + pl.Series(chan_no).cast(pl.String)
    )
    return pl.DataFrame(
        {
            "auction": np.maximum(auction, 0) + FIRST_AUCTION_ID,
            "bidder": bidder + FIRST_PERSON_ID,
            "price": _price(rng, n),
            "channel": channel,
            "url": url,
            "date_time": t,
            "extra": pl.Series([""] * n, dtype=pl.String),
        },
        schema=BID_SCHEMA,
    )
