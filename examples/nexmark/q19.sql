-- Nexmark q19, auction top-10 price: the ten highest bids of each auction
-- (top-N). An updating result keyed by (auction, rank_number).
SET checkpoint.dir = 'data/q19-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q19 AS
  SELECT *
  FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid) AS b
  WHERE rank_number <= 10
  WITH (connector = 'file', path = 'data/q19');
