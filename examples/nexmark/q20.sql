-- Nexmark q20, expand bid with auction: every bid on an auction of
-- category 10, with the auction's columns. An inner join that keeps both
-- sides for as long as the job runs (SET join.ttl bounds that).
SET checkpoint.dir = 'data/q20-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);
CREATE SOURCE auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Auction',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q20 AS
  SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time, B.extra AS bid_extra,
         A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_date_time, A.expires,
         A.seller, A.category, A.extra AS auction_extra
  FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
  WHERE A.category = 10
  WITH (connector = 'file', path = 'data/q20');
