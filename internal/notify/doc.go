// Package notify announces approval events on notification channels
// (webhooks, Slack) through a transactional outbox (issue 14).
//
// The event log is the outbox. Every change of an approval request writes
// its event rows in the transaction of the change (internal/store), and
// nothing else happens on the decision path. An [Outbox] then:
//
//  1. fans out: moves the store's outbox cursor past new events and, in
//     the same transaction, inserts one delivery row for each channel
//     whose [Route] matches the event (its type, the request's rule and
//     server, and the channel's max_age);
//  2. claims due deliveries with a lease, so that of N gateway instances
//     sharing one database exactly one attempts each delivery in the
//     normal case (a lease that lapses because its instance died lets
//     another retry: receivers deduplicate by the event id);
//  3. attempts each through its [Channel]; a failure is retried with
//     exponential backoff and jitter until the channel's max_age after the
//     event, then counts as failed.
//
// A receiver that is down therefore loses no event (the row waits), and
// one that is slow delays only its own channel's deliveries, never a
// decision. Each request's events reach a channel in order (a Slack
// message is posted before it is updated).
//
// Channels live in sub-packages: webhook (signed JSON POSTs) and slack
// (messages updated in place, and the interaction endpoint for approval
// buttons).
package notify
