-- Issue 11: what an approval gains in the 2026-07-28 era. Times are bigint
-- unix milliseconds UTC. No foreign keys: rows expire on their own
-- (expires_at, pruned by the gate's sweeper) and must not stop requests from
-- being removed.

-- The result ledger: the outcome of a consumed approval, returned to a
-- re-send that names the approval and to its task, instead of running the
-- call again. result is the JSON result (or a truncated stand-in, truncated
-- 1), error the JSON-RPC error object when the dispatch failed; size the
-- original size in bytes.
CREATE TABLE approval_results (
	request_id  text COLLATE "C" PRIMARY KEY,
	result      text,
	error       text,
	truncated   bigint NOT NULL,
	size        bigint NOT NULL,
	recorded_at bigint NOT NULL,
	expires_at  bigint NOT NULL
);
CREATE INDEX approval_results_expiry ON approval_results (expires_at);

-- Approvals that a client follows as an MCP task: the principal that made the
-- call (JSON) and its raw arguments sealed with the gateway key, so any
-- instance can run the call once approved; arguments is NULL once not needed.
CREATE TABLE approval_tasks (
	request_id text COLLATE "C" PRIMARY KEY,
	principal  text NOT NULL,
	arguments  bytea,
	created_at bigint NOT NULL,
	expires_at bigint NOT NULL
);
CREATE INDEX approval_tasks_expiry ON approval_tasks (expires_at);

-- Multi round-trip request states already used (each is single-use).
CREATE TABLE request_states (
	nonce      text COLLATE "C" PRIMARY KEY,
	request_id text NOT NULL,
	expires_at bigint NOT NULL
);
CREATE INDEX request_states_expiry ON request_states (expires_at);

-- Secrets every instance shares (the key that signs request states and task
-- ids and seals task arguments, unless approvals.key_file gives one).
CREATE TABLE secrets (
	name       text COLLATE "C" PRIMARY KEY,
	value      bytea NOT NULL,
	created_at bigint NOT NULL
);
