-- Nexmark q17, auction statistics per day: bids in three price ranges, and
-- the lowest, highest, mean and total price of each auction each day. An
-- updating result, written as a changelog with _op.
SET checkpoint.dir = 'data/q17-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q17 AS
  SELECT auction, day,
         count(*) AS total_bids,
         count(*) FILTER (WHERE price < 10000) AS rank1_bids,
         count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
         count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
         min(price) AS min_price, max(price) AS max_price, avg(price) AS avg_price, sum(price) AS sum_price
  FROM (SELECT auction, to_char(date_time, 'YYYY-MM-DD') AS day, price FROM bid) AS b
  GROUP BY auction, day
  WITH (connector = 'file', path = 'data/q17');
