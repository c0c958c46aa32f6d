-- approval.Request.NoGrants: 1 when the policy decision that held the call
-- forbids grants (an approve rule's, or the policy's, approval.grants:
-- false; branch grants50). An approve with grant terms on such a request
-- is refused (409 grants_forbidden). 0 for requests made before this
-- migration and by older binaries (which name the columns they write):
-- those may still take grant terms, but the gate never lets a grant stand
-- in for a call whose current decision forbids grants.
ALTER TABLE requests ADD COLUMN no_grants INTEGER NOT NULL DEFAULT 0;
