-- SQLite's 0019 adds requests (state, id): its planner, without
-- statistics, listed one state in id order (the inbox: pending, newest
-- first) by sorting every row of that state. Postgres's planner reads
-- that page by a backward scan of the primary key when most rows have the
-- state (0.1 ms at 10,000 pending, measured with and without the index),
-- and through requests_state_expires with a small sort when few do, so
-- it needs no index, and this version only keeps the two dialects'
-- numbering the same (docs/performance.md, branch list28).
SELECT 1;
