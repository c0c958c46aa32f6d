-- The pending counts of 0007 were a lock queue: each decision's trigger
-- updated the shard row hashtext(id) & 15 and held its lock until the
-- decision committed, so 32 concurrent approvers waited on 16 rows. A
-- transaction settling many requests (RevokeSession) took up to 16 shard
-- rows in the order of its request ids; it could not deadlock only because
-- revocations are serialised by the sessions lock and lock all their
-- request rows before writing any.
--
-- Now a transaction counts into one shard only, chosen by its connection
-- (pg_backend_pid() & 255: no two live connections share a pid, and a
-- pool's connections, started together, rarely share it modulo 256), and
-- only when it commits: both triggers are deferred to commit, so the shard
-- row is the last lock a transaction takes and is held only while it
-- commits. A transaction waiting for a shard row waits for one that is
-- committing and needs no other lock, so counting cannot deadlock.
--
-- What the counts mean is unchanged: pending = sum(created) -
-- sum(settled) over all shards (any shard may count any request). The
-- creator of a request checks the total cap before it inserts and holds
-- the total's advisory lock until it has committed, so the next creator
-- sees its count; a decision's settle becomes visible at its commit, as
-- before. Inside a settling transaction the count looks higher until it
-- commits, never lower: a cap is never passed. Existing counts stay in
-- shards 0..15.
INSERT INTO pending_counts (shard, created, settled) SELECT s, 0, 0 FROM generate_series(16, 255) AS s;

CREATE OR REPLACE FUNCTION toolgate_count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		IF NEW.state = 'pending' AND NEW.kind IN ('', 'tool_call', 'resource_read', 'prompt_get') THEN
			UPDATE pending_counts SET created = created + 1 WHERE shard = (pg_backend_pid() & 255);
		END IF;
		RETURN NULL;
	END IF;
	IF OLD.state = 'pending' AND OLD.kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
		AND (TG_OP = 'DELETE' OR NEW.state <> 'pending' OR NEW.kind NOT IN ('', 'tool_call', 'resource_read', 'prompt_get')) THEN
		UPDATE pending_counts SET settled = settled + 1 WHERE shard = (pg_backend_pid() & 255);
	END IF;
	RETURN NULL;
END;
$$;

DROP TRIGGER requests_count_pending ON requests;
CREATE CONSTRAINT TRIGGER requests_count_pending AFTER INSERT OR UPDATE OF state, kind OR DELETE ON requests
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION toolgate_count_pending();
