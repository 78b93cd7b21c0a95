-- Nexmark q13, bounded side input join: every bid with the value a bounded
-- table holds for its auction id modulo the table's size. The table,
-- side_input.jsonl beside this file, has Beam's default 500 rows (key 0 to
-- 499, value the key as text; RisingWave's version has 10,000 and takes
-- mod 10000). Each subtask reads it whole when it starts: a lookup join,
-- whose output depends on the table as it is then (plans report it as
-- nondeterministic).
SET checkpoint.dir = 'data/q13-checkpoints';
CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  connector = 'nexmark', nexmark.table.type = 'Bid',
  nexmark.event.num = '${NEXMARK_EVENTS:-10000000}'
);
CREATE TABLE side_input (key BIGINT, value VARCHAR)
  WITH (connector = 'file', path = 'side_input.jsonl') FORMAT PLAIN ENCODE JSON;

CREATE SINK nexmark_q13 AS
  SELECT B.auction, B.bidder, B.price, B.date_time, S.value
  FROM bid B
  JOIN side_input FOR SYSTEM_TIME AS OF PROCTIME() S
  ON mod(B.auction, 500) = S.key
  WITH (connector = 'file', path = 'data/q13');
