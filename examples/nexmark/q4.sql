-- Nexmark q4, average price for a category: the mean of the winning bids
-- (each auction's highest bid between its start and its expiry) per
-- category. RisingWave's text, with the auction id selected from the
-- subquery, and the auction's id declared its key: Nexmark's generator
-- never repeats an auction id. With that declaration the join keeps no bid
-- once its auction has come, and each auction's winning bid is final, and
-- emitted once, when the watermark passes the auction's expiry; the mean
-- per category is then updated once per closed auction. (Without it, a
-- later auction of the same id could still raise any maximum, so every
-- maximum is an updating result, and the mean takes each auction's
-- previous maximum back when it rises; the final rows are the same.)
SET checkpoint.dir = 'data/q4-checkpoints';
CREATE SOURCE auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  PRIMARY KEY (id) NOT ENFORCED,
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

CREATE SINK nexmark_q4 AS
  SELECT Q.category AS id, avg(Q.final) AS final
  FROM (
    SELECT max(B.price) AS final, A.id, A.category
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
  ) AS Q
  GROUP BY Q.category
  WITH (connector = 'file', path = 'data/q4');
