// Package lists projects the active working set of inquiries into Slack Lists: one row per
// inquiry per List, one-way (Casebook → List), the bot the only writer.
//
// Contracts:
//   - A List projection starts disabled and does zero Slack I/O until `casebook lists activate`
//     ran a reversible probe (access, schema read, create, update, read back, delete) and stored the
//     resolved column ids, option values and a schema fingerprint (activate.go). Activation state,
//     schema health, sync health and the List's rate-limit cooldown/circuit are separate columns;
//     none clears another. Activation, deactivation and drift are events in
//     listprojection-{tenant}-{list}.
//   - Cells are written by column_id with typed values (text as rich_text) and hold only fields
//     cleared for the List's audience (slackproj's policy: domain.FieldClasses × clearance).
//   - Every row carries an ownership marker cb1.<receipt>.<hmac> binding tenant, List and inquiry.
//   - items.create is never retried blindly: an attempt is recorded first; an unknown result or an
//     earlier attempt leads to a paginated items.list lookup of the marker, then adopt or create.
//     The row id is recorded (ListRowCreated/ListRowAdopted in slackproj-{tenant}-{inquiry}) before
//     anything else; the listrowmap projection rebuilds (tenant, inquiry, list) → row from them.
//   - Working set: only non-terminal inquiries get rows. A terminal row is updated, then deleted
//     (not archived: the API cannot archive) by a job scheduled at the terminal transition's time +
//     the List's remove-after delay, which re-checks canonical state and the marker first.
//     Removals are never held back by the List's capacity circuit (Plan.Frees).
//   - Reconciler (reconcile.go, sweep.go): Slack Lists emit no events, so a periodic, budgeted
//     sweep pages the active and the archived rows, classifies every row and desired inquiry
//     (Outcomes) and acts: adopt, update, recreate only after a confirmed absence, delete only
//     verified rows, quarantine forged or copied markers. An incomplete run confirms nothing.
package lists
