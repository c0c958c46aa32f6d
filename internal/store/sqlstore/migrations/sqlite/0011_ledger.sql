-- Issue 11: what an approval gains in the 2026-07-28 era. Times are INTEGER
-- unix milliseconds UTC. No foreign keys: rows expire on their own
-- (expires_at, pruned by the gate's sweeper) and must not stop requests from
-- being removed.

-- The result ledger: the outcome of a consumed approval, returned to a
-- re-send that names the approval and to its task, instead of running the
-- call again. result is the JSON result (or a truncated stand-in, truncated
-- 1), error the JSON-RPC error object when the dispatch failed; size the
-- original size in bytes.
CREATE TABLE approval_results (
	request_id  TEXT PRIMARY KEY,
	result      TEXT,
	error       TEXT,
	truncated   INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	recorded_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX approval_results_expiry ON approval_results (expires_at);

-- Approvals that a client follows as an MCP task: the principal that made the
-- call (JSON) and its raw arguments sealed with the gateway key, so any
-- instance can run the call once approved; arguments is NULL once not needed.
CREATE TABLE approval_tasks (
	request_id TEXT PRIMARY KEY,
	principal  TEXT NOT NULL,
	arguments  BLOB,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX approval_tasks_expiry ON approval_tasks (expires_at);

-- Multi round-trip request states already used (each is single-use).
CREATE TABLE request_states (
	nonce      TEXT PRIMARY KEY,
	request_id TEXT NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX request_states_expiry ON request_states (expires_at);

-- Secrets every instance shares (the key that signs request states and task
-- ids and seals task arguments, unless approvals.key_file gives one).
CREATE TABLE secrets (
	name       TEXT PRIMARY KEY,
	value      BLOB NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
