-- Initial schema. Times are bigint unix milliseconds UTC (optional ones NULL
-- when unset); durations are bigint milliseconds; lists are text JSON ("null"
-- for a nil list). arguments is the redacted display copy, kept byte for byte
-- (text, not jsonb, which would re-encode it). Ids use the "C" collation so
-- they sort byte-wise, which is creation order for UUIDv7 ids.
CREATE TABLE requests (
	id                 text COLLATE "C" PRIMARY KEY,
	state              text NOT NULL,
	server             text NOT NULL,
	tool               text NOT NULL,
	arguments          text,
	arguments_hash     text NOT NULL,
	display_warnings   text NOT NULL,
	tool_digest        text NOT NULL,
	rule               text NOT NULL,
	mode               text NOT NULL,
	requested_by       text NOT NULL,
	on_behalf_of       text NOT NULL,
	tenant             text NOT NULL,
	created_at         bigint NOT NULL,
	expires_at         bigint NOT NULL,
	required_approvals bigint NOT NULL,
	approvers          text NOT NULL,
	valid_for_ms       bigint NOT NULL,
	reviews            text NOT NULL,
	decided_by         text NOT NULL,
	decided_at         bigint,
	reason             text NOT NULL,
	consumed_at        bigint,
	dispatch_outcome   text NOT NULL,
	held_by            text NOT NULL,
	lease_until        bigint
);

CREATE INDEX requests_state_expires ON requests (state, expires_at);
CREATE INDEX requests_requested_by_state ON requests (requested_by, state);

CREATE TABLE events (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	request_id text COLLATE "C" NOT NULL REFERENCES requests (id),
	type       text NOT NULL,
	state      text NOT NULL,
	actor      text NOT NULL,
	at         bigint NOT NULL
);

CREATE INDEX events_request ON events (request_id, seq);
