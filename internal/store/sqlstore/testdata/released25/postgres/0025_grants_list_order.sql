-- The order of the grants list (GET /v1/grants, /ui/grants, toolgate
-- grants list), as migration 24 gave the approvals list: list_order is
-- the id of the transaction that created the grant (the approval's
-- transaction, UpdateRequestGranting), and the list pages by
-- (list_order, id) with the cursor of the approvals list (sqlstore's
-- listpage.go). Paging by id skipped grants as it skipped requests: a
-- grant id is a UUIDv7 from the creating instance's clock, so a lagging
-- instance, or a creation that commits after a later id was listed, put
-- a grant before a cursor already handed out, and an admin paging
-- through grants to revoke them never saw it (branch grants42). Grants
-- stored before this migration get 0 and come first, in id order, so a
-- cursor from before (a grant id) stays valid. The constant default
-- keeps ADD COLUMN from rewriting the table.
ALTER TABLE grants ADD COLUMN list_order xid8 NOT NULL DEFAULT '0';
ALTER TABLE grants ALTER COLUMN list_order SET DEFAULT pg_current_xact_id();
CREATE INDEX grants_list_order ON grants (list_order, id);
