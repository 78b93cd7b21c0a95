-- Nexmark q9, winning bids: each auction with its highest bid between its
-- start and its expiry (the earliest of equal ones), by ROW_NUMBER() over
-- the join of auctions and bids. An updating result keyed by the auction: a
-- higher bid replaces the row. RisingWave's text, with the auction's
-- columns listed instead of A.*.
SET checkpoint.dir = 'data/q9-checkpoints';
CREATE SOURCE auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Auction',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q9 AS
  SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
         auction, bidder, price, bid_date_time, bid_extra
  FROM (
    SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, A.date_time, A.expires, A.seller, A.category, A.extra,
           B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
           ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND A.expires
  ) AS W
  WHERE rownum <= 1
  WITH (connector = 'file', path = 'data/q9');
