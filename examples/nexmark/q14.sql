-- Nexmark q14, calculation: bids priced between 1,000,000 and 50,000,000
-- euros, each with the part of the day it came in and how many times 'c'
-- occurs in its extra field. RisingWave counts those with a user-defined
-- function, count_char(extra, 'c'); the same count in built-in functions
-- is the length the occurrences take away when replaced by nothing.
SET checkpoint.dir = 'data/q14-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE SINK nexmark_q14 AS
  SELECT auction, bidder, 0.908 * price AS price,
         CASE
           WHEN extract(hour FROM date_time) >= 8 AND extract(hour FROM date_time) <= 18 THEN 'dayTime'
           WHEN extract(hour FROM date_time) <= 6 OR extract(hour FROM date_time) >= 20 THEN 'nightTime'
           ELSE 'otherTime'
         END AS bidTimeType,
         date_time, extra,
         char_length(extra) - char_length(replace(extra, 'c', '')) AS c_counts
  FROM bid
  WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
  WITH (connector = 'file', path = 'data/q14');
