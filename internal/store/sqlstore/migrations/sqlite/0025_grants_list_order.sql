-- The order of the grants list (see the Postgres migration of the same
-- number): list_order numbers grants as they are created, from the
-- counter that numbers requests (list_orders, migration 24; the two lists
-- never compare their numbers, and one counter that never goes back
-- serves both). One transaction writes at a time, so this is commit
-- order. The grant's INSERT (sqlstore's orderedInsert) takes the next
-- number itself; the trigger moves the counter and numbers a row
-- inserted without one. Grants stored before this migration keep 0 and
-- come first, in id order, as before.
ALTER TABLE grants ADD COLUMN list_order INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER grants_list_order AFTER INSERT ON grants
BEGIN
	UPDATE list_orders SET last = last + 1 WHERE id = 1;
	UPDATE grants SET list_order = (SELECT last FROM list_orders WHERE id = 1)
		WHERE rowid = NEW.rowid AND NEW.list_order <> (SELECT last FROM list_orders WHERE id = 1);
END;
CREATE INDEX grants_list_order ON grants (list_order, id);
