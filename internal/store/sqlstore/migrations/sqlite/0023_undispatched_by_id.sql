-- Postgres's 0023 keys requests_undispatched by id, so that RecordOutcome's
-- UPDATE, which repeats the index's condition, finds its row through it
-- by id instead of reading every request in dispatch. SQLite's planner
-- reads a request by its primary key there; this version keeps the two
-- dialects' numbering the same.
SELECT 1;
