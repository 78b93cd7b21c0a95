-- Nexmark q8, monitor new users: the people who opened an auction in the
-- 10-second window they registered in. Both sides are windowed first (the
-- distinct people and sellers of each window), then joined on the key and
-- the window: results of equal windows, which the planner pairs with an
-- interval join that forgets them once the watermark passes.
SET checkpoint.dir = 'data/q8-checkpoints';
CREATE SOURCE auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Auction',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);
CREATE SOURCE person (
  id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR,
  date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Person',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);

CREATE VIEW p AS
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(person, date_time, INTERVAL '10' SECOND)
  GROUP BY id, name, window_start, window_end;
CREATE VIEW a AS
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND)
  GROUP BY seller, window_start, window_end;

CREATE SINK nexmark_q8 AS
  SELECT p.id, p.name, p.starttime AS stime
  FROM p JOIN a ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime
  WITH (connector = 'file', path = 'data/q8');
