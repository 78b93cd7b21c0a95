-- Nexmark q11, user sessions: each bidder's bids per session (a gap of 10 s ends one).
SET checkpoint.dir = 'data/q11-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q11 AS
  SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
  FROM SESSION(bid, date_time, INTERVAL '10' SECOND)
  GROUP BY bidder, window_start, window_end
  WITH (connector = 'file', path = 'data/q11');
