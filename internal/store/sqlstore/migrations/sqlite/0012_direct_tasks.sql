-- Issue 11, the Tasks extension: tasks of calls that policy allowed ("direct
-- tasks": a 2026-07-28 client that declares the extension calls a tool whose
-- execution.taskSupport is optional or required). A direct task has no
-- request row: state is NULL for an approval's task (the request is its
-- state), else 'working' or 'cancelled' (its result, once recorded, is in
-- approval_results under the same id). lease_until (unix ms UTC) is when the
-- instance running it stops vouching for it unless renewed: a working task
-- whose lease lapsed without a result has an unknown outcome and is never
-- run again.
ALTER TABLE approval_tasks ADD COLUMN state TEXT;
ALTER TABLE approval_tasks ADD COLUMN lease_until INTEGER;
