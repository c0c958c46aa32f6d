-- The order of the approvals list (GET /v1/approvals, the inbox, the CLI;
-- sqlstore's listing, store.ListPosition): list_order is the id of the
-- transaction that created the request, and the list pages by
-- (list_order, id). Paging by id alone skipped requests: an id is a
-- UUIDv7 from the creating instance's clock, so an instance whose clock
-- lags, or a creation that commits after a later id was listed, adds a
-- request before a cursor already handed out (branch page41). A
-- transaction id can come out of order too (a transaction commits after
-- one with a higher id), but the list knows which transactions were still
-- running when it read a page (pg_current_snapshot()) and reads their
-- requests on the next page. Requests stored before this migration get 0,
-- below every real transaction id, so they come first, in id order (the
-- order cursors had before, which stay valid as the position of that id
-- among them). The constant default keeps ADD COLUMN from rewriting the
-- table; the index gives the list's order and its reads of open
-- transactions' requests. The column never changes, so it costs no HOT
-- update.
ALTER TABLE requests ADD COLUMN list_order xid8 NOT NULL DEFAULT '0';
ALTER TABLE requests ALTER COLUMN list_order SET DEFAULT pg_current_xact_id();
CREATE INDEX requests_list_order ON requests (list_order, id);
