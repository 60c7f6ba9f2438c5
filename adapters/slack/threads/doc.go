// Package threads is the thread effect kind: one thread per inquiry in a destination channel, its
// root message kept current and a reply per change. Slack is a projection, never the source of
// truth.
//
// Pieces:
//   - Redaction (render.go): one policy, domain.FieldClasses × destination clearance, renders every
//     message.
//   - The slackintents projection (intents.go) queues thread jobs in its checkpoint's transaction
//     and folds thread events into the mapping table slack_threads.
//   - The kind (worker.go) re-reads canonical state, coalesces to the newest version and never
//     posts blindly; the runtime (package slackeffects) debounces, guards and classifies.
//   - Events: SlackThreadPosted and SlackThreadSynced in slackthread-{tenant}-{inquiry}. Earlier
//     versions wrote them to the combined slackproj-{tenant}-{inquiry} stream, shared with List rows;
//     those are still read (slackeffects.ReadStreams keeps the thread events of it), never written.
package threads
