-- Nexmark q7, highest bid: the bids of each 10-second tumbling window
-- priced at the window's highest price. The window's maximum is joined
-- back to the bids between its start and its end, both included (a bid at
-- a window's end instant belongs to the next window, but BETWEEN includes
-- it): an interval join on the window result's window_end.
SET checkpoint.dir = 'data/q7-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q7 AS
  SELECT B.auction, B.bidder, B.price, B.date_time, B.extra
  FROM bid AS B
  JOIN (SELECT max(price) AS maxprice, window_end AS date_time
        FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
        GROUP BY window_end) AS B1
    ON B.price = B1.maxprice
  WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time
  WITH (connector = 'file', path = 'data/q7');
