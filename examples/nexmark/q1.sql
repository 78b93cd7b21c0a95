-- Nexmark q1, currency conversion: every bid's price in euros.
SET checkpoint.dir = 'data/q1-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q1 AS
  SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid
  WITH (connector = 'file', path = 'data/q1');
