-- Nexmark q21, add channel id: bids from a known channel, or whose url
-- names a channel_id, each with that channel's id. Beam's generator gives
-- bids no channel and no url, so over its events this query has no rows;
-- TestSQLQ21AndQ22OverURLs runs it over bids that have them.
SET checkpoint.dir = 'data/q21-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q21 AS
  SELECT auction, bidder, price, channel,
         CASE
           WHEN lower(channel) = 'apple' THEN '0'
           WHEN lower(channel) = 'google' THEN '1'
           WHEN lower(channel) = 'facebook' THEN '2'
           WHEN lower(channel) = 'baidu' THEN '3'
           ELSE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2]
         END AS channel_id
  FROM bid
  WHERE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] IS NOT NULL
     OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')
  WITH (connector = 'file', path = 'data/q21');
