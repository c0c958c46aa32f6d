-- The order of the approvals list (see the Postgres migration of the same
-- number): list_order numbers requests as they are created, from a
-- counter that never goes back (deleting the newest request does not
-- free its number, as max(...) + 1 or a rowid would). One transaction
-- writes at a time, so this is commit order, and a page's cursor never
-- has a request committed after it but placed before it. CreateRequest's
-- INSERT takes the next number itself; the trigger moves the counter and
-- numbers a row inserted without one (then rewriting it). Requests stored
-- before this migration keep 0 and come first, in id order, as before.
CREATE TABLE list_orders (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last INTEGER NOT NULL
) STRICT;
INSERT INTO list_orders (id, last) VALUES (1, 0);
ALTER TABLE requests ADD COLUMN list_order INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER requests_list_order AFTER INSERT ON requests
BEGIN
	UPDATE list_orders SET last = last + 1 WHERE id = 1;
	UPDATE requests SET list_order = (SELECT last FROM list_orders WHERE id = 1)
		WHERE rowid = NEW.rowid AND NEW.list_order <> (SELECT last FROM list_orders WHERE id = 1);
END;
-- The list of one state (the inbox: pending, newest first) reads its page
-- through (state, list_order, id), as it read (state, id) before (0019);
-- the list of every state through (list_order, id).
DROP INDEX requests_state_id;
CREATE INDEX requests_state_list_order ON requests (state, list_order, id);
CREATE INDEX requests_list_order ON requests (list_order, id);
