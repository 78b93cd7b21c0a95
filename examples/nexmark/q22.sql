-- Nexmark q22, get URL directories: every bid with the first three
-- directories of its url. Beam's generator gives bids no url, so over its
-- events the directories are NULL; TestSQLQ21AndQ22OverURLs runs it over
-- bids that have urls.
SET checkpoint.dir = 'data/q22-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q22 AS
  SELECT auction, bidder, price, channel,
         split_part(url, '/', 4) AS dir1,
         split_part(url, '/', 5) AS dir2,
         split_part(url, '/', 6) AS dir3
  FROM bid
  WITH (connector = 'file', path = 'data/q22');
