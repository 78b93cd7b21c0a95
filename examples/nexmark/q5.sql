-- Nexmark q5, hot items: the auctions with the most bids in each sliding
-- window (10 s, every 2 s), ties included. Each window's counts are grouped
-- by their window (a window result's rows reach a query together), and the
-- counts are joined back to the maximum of their window: an interval join
-- of [0, 0] between results of windows of one shape.
SET checkpoint.dir = 'data/q5-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

-- The per-auction counts are one view, read by both sides (RisingWave's text
-- computes them twice, in two subqueries).
CREATE VIEW auction_bids AS
  SELECT auction, count(*) AS num, window_start AS starttime
  FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  GROUP BY window_start, auction;
CREATE VIEW max_bids AS
  SELECT max(num) AS maxn, starttime AS starttime_c
  FROM auction_bids
  GROUP BY starttime;

CREATE SINK nexmark_q5 AS
  SELECT a.auction, a.num
  FROM auction_bids AS a JOIN max_bids AS m
    ON a.starttime = m.starttime_c AND a.num >= m.maxn
  WITH (connector = 'file', path = 'data/q5');
