-- Postgres's 0022 drops events.request_id's foreign key (its check was an
-- SPI query per event row, four per approval). SQLite keeps it: dropping
-- a key there means rebuilding the events table, and its check is a
-- lookup in the same process. This version keeps the two dialects'
-- numbering the same.
SELECT 1;
