// Package reminders is the Slack side of due jobs: two effect kinds on the slackeffects runtime.
//
//   - The reminder reply (kind slack_due_reminder): a FollowUpDue, SLAWarning or SLABreached event
//     becomes one reply in the inquiry's thread that mentions the recipients' linked Slack users
//     (a follow-up's recipients as authorized when it fired; the owner and watchers for the SLA
//     events). Recipients without a linked Slack user are named only where the destination is
//     cleared for personal data, else counted; where owner and watchers are not cleared (a public
//     channel) nobody is mentioned. A principal disabled by the time the reply is posted is left
//     out (neither mentioned nor counted); the reply still says what is due.
//   - The escalation post (kind slack_escalation_post): an InquiryEscalated event becomes one
//     top-level message in the tenant's escalation destination (slackinstall's setting), rendered
//     for that destination's clearance by the one redaction policy (domain.FieldClasses); a
//     disabled owner is left out (no owner line).
//   - The escalation deletion (kind slack_escalation_erase): an InquiryErased event deletes the
//     inquiry's escalation posts where they were posted, each recorded as SlackEscalationDeleted
//     (the reminder replies are in the thread, which the thread effect deletes).
//
// Both re-read canonical state and do nothing when the reason has gone: the inquiry is closed, or
// (a warning) its target was met meanwhile. Effect keys are deterministic per event (tenant +
// inquiry + the event's version): one reply or post per job firing. A post is claimed in the
// attempt ledger before it is sent; a job finding an earlier attempt looks the message up by its
// metadata first (conversations.replies for a reply, conversations.history for a post) and adopts
// it. The result is recorded as SlackReminderPosted or SlackEscalationPosted in
// slackdue-{tenant}-{inquiry} before anything else, and a job finding its version recorded does
// nothing.
//
// The slackdueintents subscriber queues the jobs in its checkpoint's transaction, once per
// effect key; a rebuild queues nothing. The package is a peer of threads (whose thread root it
// reads through the Roots function the wiring gives it) and never imports it.
package reminders
