-- Nexmark q0, pass-through: every bid.
SET checkpoint.dir = 'data/q0-checkpoints';
--   NEXMARK_EVENTS=1000000 go run ./cmd/ingest run examples/nexmark/q0.sql
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q0 AS
  SELECT auction, bidder, price, date_time, extra FROM bid
  WITH (connector = 'file', path = 'data/q0');
