-- Nexmark q10, log to the file system: every bid with its day and minute,
-- as Flink's q10 partitions its output (here, columns of each row).
SET checkpoint.dir = 'data/q10-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q10 AS
  SELECT auction, bidder, price, date_time, extra,
         to_char(date_time, 'YYYY-MM-DD') AS dt, to_char(date_time, 'HH24:MI') AS hm,
         EXTRACT(HOUR FROM date_time) AS hour
  FROM bid
  WITH (connector = 'file', path = 'data/q10');
