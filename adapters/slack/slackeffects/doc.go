// Package slackeffects is the one runtime of Casebook's Slack effects (thread posts, List rows and
// every later kind): River's only home package, with one client per process and one queue per
// effect kind; the neutral target key (tenant + installation + destination + inquiry + kind); one
// attempt ledger for writes that are not idempotent; one guard (the destination's shared 429
// cooldown, its circuit, an installation-wide circuit after an uninstall); one failure classifier
// (Classify, following Slack's documented error semantics); one health record per target; one
// event writer; and the operator's recovery view (Runtime.Effects, Retry, Cancel).
//
// # Adding an effect kind
//
// Write, in the package of the kind (threads, lists, …), three things and register them:
//
//  1. Args: the job's arguments, a struct with tenant_id, inquiry_id and version JSON fields
//     implementing river.JobArgs (Kind names the kind and its queue) and Ref.
//  2. Kind.Plan: re-read canonical state (never a projection) and return nil when there is nothing
//     to do (zero Slack I/O), else a Plan naming its Target and the installation to call with.
//  3. Plan.Do: render and call Slack. A write that is not idempotent (chat.postMessage,
//     slackLists.items.create) claims its key in the Ledger first; when the claim says an earlier
//     attempt exists, or the call's outcome is unknown (CertainlyNotApplied is false), Do looks the
//     effect up by its key or marker (reconcile) and adopts what it finds before creating anything.
//     Record the result with Runtime.Record before any other work.
//
// Then call Register(runtime, kind) before Runtime.Open. The runtime does the rest: debouncing,
// the guard, classification and its outcome (snooze, cancel, retry), health, retention, recovery
// and metrics.
package slackeffects
