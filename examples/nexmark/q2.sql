-- Nexmark q2, selection: the bids on every 123rd auction.
SET checkpoint.dir = 'data/q2-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q2 AS
  SELECT auction, price FROM bid WHERE auction % 123 = 0
  WITH (connector = 'file', path = 'data/q2');
