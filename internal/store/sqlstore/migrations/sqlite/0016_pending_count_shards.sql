-- Postgres 0016 moves its pending counts to per-connection shards counted
-- at commit. SQLite has one writer and one shard: nothing changes; this
-- keeps the two dialects' numbering the same.
SELECT 1;
