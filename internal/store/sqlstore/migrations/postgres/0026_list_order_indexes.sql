-- toolgate:no-transaction
-- The indexes of the approvals' and grants' list order (migrations 24 and
-- 25, which built them with a plain CREATE INDEX until branch migconc43),
-- built without holding writes back: a plain CREATE INDEX holds a SHARE
-- lock on its table until the migrations' transaction ends, so on a
-- deployment with millions of requests the instances still serving during
-- a rolling upgrade could neither create nor decide an approval for as
-- long as the build took. CONCURRENTLY runs outside a transaction
-- (pgmigrate.go's noTxMarker) and takes a lock that writes do not wait for.
-- A database that applied 24 and 25 before that branch holds both indexes
-- already, with these definitions: IF NOT EXISTS keeps them, so every
-- database ends with the same schema; one a failed build left invalid is
-- dropped and built again by the runner.
CREATE INDEX CONCURRENTLY IF NOT EXISTS requests_list_order ON requests (list_order, id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS grants_list_order ON grants (list_order, id);
