-- Nexmark q12, processing-time windows: each bidder's bids in 10-second
-- tumbling windows of the wall clock (p_time AS PROCTIME()). Which window a
-- bid falls in depends on when it was processed, so the rows differ from run
-- to run and after a recovery (the plan says so); every bid is counted once.
SET checkpoint.dir = 'data/q12-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  p_time TIMESTAMP AS PROCTIME(),
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q12 AS
  SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(bid, p_time, INTERVAL '10' SECOND)
  GROUP BY bidder, window_start, window_end
  WITH (connector = 'file', path = 'data/q12');
