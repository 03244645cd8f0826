-- The orders example in SQL: `dbspark run examples/orders/pipeline.sql --changes examples/orders/changes`
CREATE TABLE customers (cust BIGINT PRIMARY KEY, name VARCHAR NOT NULL, region VARCHAR);
CREATE TABLE orders (o_id BIGINT PRIMARY KEY, cust BIGINT, total DECIMAL(12, 2));

-- revenue per region, with the median order
CREATE VIEW revenue_by_region AS
  SELECT region, count(*) AS orders, sum(total) AS revenue, median(total) AS median
  FROM orders JOIN customers USING (cust)
  GROUP BY region;

-- each customer's largest order, and customers without any order
CREATE VIEW largest_order AS
  SELECT c.name, max(o.total) AS largest, count(o.o_id) AS n
  FROM customers c LEFT JOIN orders o ON o.cust = c.cust
  GROUP BY c.name;

-- customers with a big order
CREATE VIEW big_spenders AS
  SELECT DISTINCT name FROM customers
  WHERE EXISTS (SELECT * FROM orders WHERE orders.cust = customers.cust AND total >= 500);

-- the three largest orders (a top-k maintained under inserts and deletes)
CREATE VIEW top_orders AS
  SELECT o_id, name, total FROM orders JOIN customers USING (cust)
  ORDER BY total DESC, o_id LIMIT 3;
