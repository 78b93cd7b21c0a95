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

CREATE SINK nexmark_q5 AS
  SELECT AuctionBids.auction, AuctionBids.num
  FROM (
    SELECT auction, count(*) AS num, window_start AS starttime
    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
    GROUP BY window_start, auction
  ) AS AuctionBids
  JOIN (
    SELECT max(CountBids.num) AS maxn, CountBids.starttime_c
    FROM (
      SELECT count(*) AS num, window_start AS starttime_c
      FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
      GROUP BY auction, window_start
    ) AS CountBids
    GROUP BY CountBids.starttime_c
  ) AS MaxBids
  ON AuctionBids.starttime = MaxBids.starttime_c AND AuctionBids.num >= MaxBids.maxn
  WITH (connector = 'file', path = 'data/q5');
