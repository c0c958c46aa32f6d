-- The audit trail (issue 14, docs/audit.md): a hash chain in its own table.
-- audit_log holds the links: seq is the position in the chain (1, 2, …, no
-- gaps), record the canonical JSON of the audit event (it repeats seq),
-- prev_hash the hash of the link before ('' for the first), hash
-- "sha256:" + hex SHA-256 of prev_hash followed by record; at (unix
-- milliseconds UTC) and tenant repeat the record's for filtering.
-- audit_chain (one row) is the head: the last link's seq and hash, and the
-- anchor: the last link pruned (anchor_seq 0 and anchor_hash '' when none
-- was). Every append holds this row (the IMMEDIATE transaction), so one chainer
-- appends at a time whatever the number of instances. The chain follows
-- the event log as the durable feed consumer 'audit' (feed_cursors, 0007),
-- from the start of the log ('0.0'); its position moves in the
-- transaction that appends the links.
CREATE TABLE audit_log (
	seq       INTEGER PRIMARY KEY,
	at        INTEGER NOT NULL,
	tenant    TEXT NOT NULL,
	record    TEXT NOT NULL,
	prev_hash TEXT NOT NULL,
	hash      TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at);

CREATE TABLE audit_chain (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	seq         INTEGER NOT NULL,
	hash        TEXT NOT NULL,
	anchor_seq  INTEGER NOT NULL,
	anchor_hash TEXT NOT NULL,
	anchor_at   INTEGER NOT NULL
) STRICT;
INSERT INTO audit_chain (id, seq, hash, anchor_seq, anchor_hash, anchor_at) VALUES (1, 0, '', 0, '', 0);
INSERT INTO feed_cursors (consumer, position, moved_at) VALUES ('audit', '0.0', CAST(strftime('%s', 'now') AS INTEGER) * 1000);
