-- Nexmark q18, find last bid: each bidder's latest bid on each auction
-- (deduplication). An updating result keyed by (bidder, auction): a later
-- bid replaces the row; of two bids at one time, the first stays.
SET checkpoint.dir = 'data/q18-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q18 AS
  SELECT auction, bidder, price, channel, url, date_time, extra
  FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number FROM bid) AS b
  WHERE rank_number <= 1
  WITH (connector = 'file', path = 'data/q18');
