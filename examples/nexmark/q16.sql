-- Nexmark q16, channel statistics per day: bids, bidders and auctions in
-- three price ranges, per channel (NULL in Beam's bids, so one group a day)
-- and day. An updating result: the file sink writes its changelog.
SET checkpoint.dir = 'data/q16-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q16 AS
  SELECT channel, day,
         count(*) AS total_bids,
         count(*) FILTER (WHERE price < 10000) AS rank1_bids,
         count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
         count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
         count(DISTINCT bidder) AS total_bidders,
         count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
         count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
         count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
         count(DISTINCT auction) AS total_auctions,
         count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
         count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
         count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
  FROM (SELECT channel, to_char(date_time, 'YYYY-MM-DD') AS day, price, bidder, auction FROM bid) AS b
  GROUP BY channel, day
  WITH (connector = 'file', path = 'data/q16');
