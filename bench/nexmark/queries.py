"""The Nexmark queries in dbspark's SQL, with DuckDB's form of each (the oracle) and Spark SQL's form for
Structured Streaming (the anchor) where it differs.

The texts follow the Nexmark suites of Apache Flink and Feldera (DuckDB dialect). q12 (processing-time
windows) has no event-time meaning and is not written; q9-q11 are outside the issue's list. `SIDE_INPUT`
is q13's bounded side table (key → value, 10,000 rows). Time windows: `tumble` / `hop` in dbspark,
`time_bucket` in DuckDB, `window()` in Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

TABLES = """
CREATE TABLE person (id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR,
    state VARCHAR, date_time TIMESTAMP, extra VARCHAR) {late};
CREATE TABLE auction (id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
    date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR) {late};
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
    date_time TIMESTAMP, extra VARCHAR) {late};
CREATE TABLE side_input (key BIGINT, value VARCHAR);
"""
LATENESS = "WITH (lateness_column = date_time, lateness = INTERVAL '4 seconds')"


@dataclass(frozen=True)
class Query:
    name: str
    sql: str  # dbspark
    duckdb: str | None = None  # None: the same text
    spark: str | None = None  # Structured Streaming's form; None: the same text; "" : not written


_DAY = "strftime(date_time, '%Y-%m-%d')"
_RANKS = """count(*) AS total_bids,
    count(*) FILTER (WHERE price < 10000) AS rank1_bids,
    count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
    count(*) FILTER (WHERE price >= 1000000) AS rank3_bids"""
_DISTINCT = """count(DISTINCT bidder) AS total_bidders,
    count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
    count(DISTINCT auction) AS total_auctions,
    count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions"""
_HOT = """SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM hop(bid, date_time, INTERVAL '2 seconds', INTERVAL '10 seconds') GROUP BY auction, window_start, window_end"""
_HOT_DUCK = """SELECT auction, count(*) AS num, ws AS starttime, ws + INTERVAL '10 seconds' AS endtime FROM (
    SELECT auction, time_bucket(INTERVAL '2 seconds', date_time) - to_seconds(2 * g) AS ws FROM bid, range(5) t(g))
    GROUP BY auction, ws"""
_Q4_INNER = """SELECT MAX(B.price) AS final, A.category FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND A.expires GROUP BY A.id, A.category"""
_CHANNEL_ID = "regexp_extract(url, '(&|^)channel_id=([^&]*)', 2)"

QUERIES = [
    Query("q0", "SELECT auction, bidder, price, date_time, extra FROM bid"),
    Query("q1", "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid"),
    Query("q2", "SELECT auction, price FROM bid WHERE auction % 123 = 0"),
    Query(
        "q3",
        """SELECT P.name, P.city, P.state, A.id FROM auction AS A JOIN person AS P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    ),
    Query("q4", f"SELECT Q.category, AVG(Q.final) AS avg_final FROM ({_Q4_INNER}) AS Q GROUP BY Q.category"),
    Query(
        "q5",
        f"""SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime FROM ({_HOT}) AS AuctionBids
        JOIN (SELECT max(num) AS maxn, starttime, endtime FROM ({_HOT}) AS CountBids GROUP BY starttime, endtime) AS MaxBids
        ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
        AND AuctionBids.num >= MaxBids.maxn""",
        f"""SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime FROM ({_HOT_DUCK}) AS AuctionBids
        JOIN (SELECT max(num) AS maxn, starttime, endtime FROM ({_HOT_DUCK}) AS CountBids GROUP BY starttime, endtime) AS MaxBids
        ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
        AND AuctionBids.num >= MaxBids.maxn""",
        "",
    ),
    Query(
        "q6",
        """SELECT seller, AVG(final) OVER (PARTITION BY seller ORDER BY date_time, id ROWS BETWEEN 10 PRECEDING
        AND CURRENT ROW) AS avg_price FROM (SELECT A.id, A.seller, MAX(B.price) AS final, MAX(B.date_time) AS date_time
        FROM auction AS A JOIN bid AS B ON A.id = B.auction WHERE B.date_time BETWEEN A.date_time AND A.expires
        GROUP BY A.id, A.seller) AS Q""",
        spark="",
    ),
    Query(
        "q7",
        """SELECT B.auction, B.price, B.bidder, B.date_time, B.extra FROM bid AS B JOIN (
            SELECT MAX(price) AS maxprice, window_end AS date_time FROM tumble(bid, date_time, INTERVAL '10 seconds')
            GROUP BY window_start, window_end) AS B1
        ON B.price = B1.maxprice WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10 seconds' AND B1.date_time""",
        """SELECT B.auction, B.price, B.bidder, B.date_time, B.extra FROM bid AS B JOIN (
            SELECT MAX(price) AS maxprice, time_bucket(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS date_time
            FROM bid GROUP BY 2) AS B1
        ON B.price = B1.maxprice WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10 seconds' AND B1.date_time""",
        """SELECT B.auction, B.price, B.bidder, B.date_time, B.extra FROM bid AS B JOIN (
            SELECT MAX(price) AS maxprice, window.end AS dt FROM bid GROUP BY window(date_time, '10 seconds')) AS B1
        ON B.price = B1.maxprice WHERE B.date_time BETWEEN B1.dt - INTERVAL 10 SECONDS AND B1.dt""",
    ),
    Query(
        "q8",
        """SELECT P.id, P.name, P.starttime FROM (
            SELECT id, name, window_start AS starttime, window_end AS endtime
            FROM tumble(person, date_time, INTERVAL '10 seconds') GROUP BY id, name, window_start, window_end) AS P
        JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
            FROM tumble(auction, date_time, INTERVAL '10 seconds') GROUP BY seller, window_start, window_end) AS A
        ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
        """SELECT P.id, P.name, P.starttime FROM (
            SELECT id, name, time_bucket(INTERVAL '10 seconds', date_time) AS starttime FROM person GROUP BY ALL) AS P
        JOIN (SELECT seller, time_bucket(INTERVAL '10 seconds', date_time) AS starttime FROM auction GROUP BY ALL) AS A
        ON P.id = A.seller AND P.starttime = A.starttime""",
        """SELECT P.id, P.name, P.starttime FROM (
            SELECT id, name, window.start AS starttime FROM person GROUP BY id, name, window(date_time, '10 seconds')) AS P
        JOIN (SELECT seller, window.start AS starttime FROM auction GROUP BY seller, window(date_time, '10 seconds')) AS A
        ON P.id = A.seller AND P.starttime = A.starttime""",
    ),
    Query(
        "q13",
        """SELECT B.auction, B.bidder, B.price, B.date_time, S.value FROM bid AS B
        JOIN side_input AS S ON B.auction % 10000 = S.key""",
    ),
    Query(
        "q14",
        """SELECT auction, bidder, 0.908 * price AS price, CASE
            WHEN hour(date_time) >= 8 AND hour(date_time) <= 18 THEN 'dayTime'
            WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime' ELSE 'otherTime' END AS bidTimeType,
            date_time, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
        FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    ),
    Query("q15", f"SELECT {_DAY} AS day, {_RANKS}, {_DISTINCT} FROM bid GROUP BY 1", spark=""),
    Query(
        "q16",
        f"""SELECT channel, {_DAY} AS day, max(strftime(date_time, '%H:%M')) AS minute, {_RANKS}, {_DISTINCT}
        FROM bid GROUP BY channel, {_DAY}""",
        spark="",
    ),
    Query(
        "q17",
        f"""SELECT auction, {_DAY} AS day, {_RANKS}, min(price) AS min_price, max(price) AS max_price,
            avg(price) AS avg_price, sum(price) AS sum_price FROM bid GROUP BY auction, {_DAY}""",
        spark="",
    ),
    Query(
        "q18",
        """SELECT auction, bidder, price, channel, url, date_time, extra FROM (SELECT *, ROW_NUMBER() OVER (
            PARTITION BY bidder, auction ORDER BY date_time DESC, price DESC) AS rank_number FROM bid) WHERE rank_number <= 1""",
    ),
    Query(
        "q19",
        """SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, date_time)
            AS rank_number FROM bid) WHERE rank_number <= 10""",
    ),
    Query(
        "q20",
        """SELECT auction, bidder, price, channel, url, B.date_time AS bid_time, B.extra AS bid_extra, item_name,
            description, initial_bid, reserve, A.date_time AS auction_time, expires, seller, category,
            A.extra AS auction_extra
        FROM bid AS B JOIN auction AS A ON B.auction = A.id WHERE A.category = 10""",
    ),
    Query(
        "q21",
        f"""SELECT auction, bidder, price, channel, CASE WHEN lower(channel) = 'apple' THEN '0'
            WHEN lower(channel) = 'google' THEN '1' WHEN lower(channel) = 'facebook' THEN '2'
            WHEN lower(channel) = 'baidu' THEN '3' ELSE {_CHANNEL_ID} END AS channel_id FROM bid
        WHERE {_CHANNEL_ID} <> '' OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
        spark=f"""SELECT auction, bidder, price, channel, CASE WHEN lower(channel) = 'apple' THEN '0'
            WHEN lower(channel) = 'google' THEN '1' WHEN lower(channel) = 'facebook' THEN '2'
            WHEN lower(channel) = 'baidu' THEN '3' ELSE {_CHANNEL_ID} END AS channel_id FROM bid
        WHERE {_CHANNEL_ID} <> '' OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    ),
    Query(
        "q22",
        """SELECT auction, bidder, price, channel, split_part(url, '/', 4) AS dir1, split_part(url, '/', 5) AS dir2,
            split_part(url, '/', 6) AS dir3 FROM bid""",
    ),
]
NOT_WRITTEN = {"q12": "processing-time windows (PROCTIME): no event-time meaning, no oracle"}
BY_NAME = {q.name: q for q in QUERIES}
