// Package webhook delivers facts to external HTTPS endpoints as the webhook
// contract describes: matched at least once, signed, retried with backoff,
// audited as facts, dead-lettered and replayable.
//
// How it fits together:
//
//   - Configs are platform configs of type "webhook" (POST /v1/configs),
//     validated by the check RegisterConfigType installs. The contract's
//     applies_to is the config's scope_id, its scope the scope_type.
//   - Matching is the durable stream consumer "webhooks": every fact, in
//     position order, at least once, across restarts. For each match one
//     transaction records the webhook.triggered fact and inserts the
//     pending outbox row (store.Append.Outbox). The triggered fact's id is
//     derived from (fact id, config id, config version), so a fact matched
//     twice (a replayed batch, or two processes) is refused by the fact id's
//     uniqueness and creates nothing.
//   - Delivery workers lease due rows (store.ClaimOutbox: FOR UPDATE SKIP
//     LOCKED on Postgres, the single writer on SQLite), sign and POST them,
//     and record each attempt's outcome with its webhook.sent fact in one
//     transaction (store.ChangeOutbox), batched by one committer. A row
//     whose lease runs out without an outcome holds an attempt cut short by
//     a crash: the next claim records it (ATTEMPT_INTERRUPTED) and carries
//     on with the retry schedule.
//   - Secrets are kept encrypted (AES-256-GCM) and referenced by
//     secret_ref; they are shown once, at creation or rotation.
//   - Connections go only to public addresses, checked after DNS
//     resolution at connect time, unless allow-listed; redirects are not
//     followed; response bodies are read up to a cap.
//
// Service is the entry point: New, RegisterConfigType, Mount, Start, Stop,
// Collectors; ReplayStored and DeadLettersStored serve `factline webhooks`
// (cmd/factline), which runs no Service. README.md documents the
// endpoints, the payload options and the choices the contract leaves open;
// "the contract" in this package is what that README states.
package webhook
