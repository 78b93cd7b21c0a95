-- Nexmark q6, average selling price by seller: for each auction's winning
-- bid (its highest between its start and its expiry), the mean of it and
-- the winning bids of the seller's 10 auctions before it, ordered by the
-- winning bids' times. Nexmark's Flink text (which Flink cannot run: its
-- OVER window does not take updates), in the dialect's top-N form, with
-- the auction id selected (the result's updates are keyed by it). A
-- winning bid is an updating result: when an auction's highest bid rises,
-- its row moves in its seller's order, and the means of the rows after it
-- are updated.
SET checkpoint.dir = 'data/q6-checkpoints';
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

CREATE SINK nexmark_q6 AS
  SELECT
    Q.id, Q.seller,
    avg(Q.price) OVER (PARTITION BY Q.seller ORDER BY Q.date_time ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg
  FROM (
    SELECT id, seller, price, date_time FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC, date_time) AS rownum
      FROM (
        SELECT A.id, A.seller, B.price, B.date_time
        FROM auction AS A JOIN bid AS B ON A.id = B.auction
        WHERE B.date_time BETWEEN A.date_time AND A.expires
      ) AS J
    ) AS R
    WHERE rownum <= 1
  ) AS Q
  WITH (connector = 'file', path = 'data/q6');
