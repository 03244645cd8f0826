-- Orders arrive as Parquet files (data/orders/, append-only); customers are a Delta table
-- (data/customers/, its change data feed on: updates and deletes).

CREATE TEMPORARY VIEW orders_clean AS
SELECT order_id, cust, amount, order_date FROM parquet.`data/orders` WHERE amount > 0;

CREATE TEMPORARY VIEW customers_raw AS SELECT * FROM delta.`data/customers`;

CREATE MATERIALIZED VIEW revenue_by_region AS
SELECT c.region, count(*) AS orders, sum(o.amount) AS revenue, max(o.amount) AS largest
FROM orders_clean o JOIN active_customers c ON o.cust = c.id
GROUP BY c.region;

CREATE MATERIALIZED VIEW daily AS
SELECT order_date, count(*) AS n, sum(amount) AS total, count(DISTINCT cust) AS buyers
FROM orders_clean GROUP BY order_date;
