-- The quickstart (quickstart.yaml) written in SQL: an unbounded generator,
-- per-key one-second tumbling windows, written to files that become visible
-- one checkpoint at a time.
--
--   go run ./cmd/ingest run examples/quickstart.sql
--
-- Committed output appears under examples/data/sql-out/; checkpoints under
-- examples/data/sql-checkpoints/. See docs/sql.md.
SET checkpoint.interval = '1s';
SET checkpoint.dir = 'data/sql-checkpoints';
SET checkpoint.retain = 3;

CREATE SOURCE events WITH (
  connector = 'datagen', parallelism = 2,
  rate = 1000,            -- records per second over all subtasks
  keys = 10,
  start_time = 'now',     -- event time starts at the first start's wall clock
  event_interval = '1ms'  -- one window per second
);

CREATE SINK out AS
  SELECT key, window_start, window_end,
         count(*) AS count, sum(value) AS sum, min(value) AS min, max(value) AS max, avg(value) AS avg
  FROM TUMBLE(events, event_time, INTERVAL '1' SECOND)
  GROUP BY key, window_start
  WITH (connector = 'file', path = 'data/sql-out', parallelism = 2);
