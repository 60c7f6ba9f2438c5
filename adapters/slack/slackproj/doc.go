// Package slackproj projects inquiries into Slack: one thread per inquiry in an operations
// channel, its root message kept current and a reply per change. Slack is a projection, never the
// source of truth.
//
// Pieces:
//   - Installations and destinations (install.go): per tenant, keyed by enterprise id (when
//     present), team id and app id; the bot token and signing secret are sealed with AES-256-GCM
//     under a key derived from the instance secret with HKDF-SHA256 (Sealer).
//   - Redaction (render.go): one policy, domain.FieldClasses × destination clearance, renders every
//     message.
//   - The slackintents projection (intents.go) inserts River jobs in its checkpoint's transaction
//     and folds slackproj-{tenant}-{inquiry} events into the thread mapping table slack_threads.
//   - The worker (worker.go) re-reads canonical state, coalesces to the newest version, never posts
//     blindly, and classifies failures (cooldown, circuit, quarantine, dead letter).
package slackproj
