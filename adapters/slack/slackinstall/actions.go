package slackinstall

// Action ids of the root message's elements: rendered by package threads, handled by package
// callbacks (the app's interactive surface, configured with the app). A button's value is the
// receipt, an opaque reference the callback never uses to find the inquiry (it uses the stored
// thread mapping); the status select's option values are status names.
const (
	ActionClaim    = "casebook_claim"
	ActionResolve  = "casebook_resolve"
	ActionAssignMe = "casebook_assign_me"
	ActionStatus   = "casebook_status" // select: the selected option's value is the next status
	ActionAssign   = "casebook_assign" // opens the assign modal
	ActionNote     = "casebook_note"   // opens the note modal
	ActionCancel   = "casebook_cancel" // opens the cancel modal
	ActionRemind   = "casebook_remind" // opens the "Remind me" modal (a follow-up)
)

// ShortcutCreateInquiry is the callback id of the message shortcut "Create inquiry": handled by
// package callbacks, declared in the app's manifest.
const ShortcutCreateInquiry = "casebook_create_inquiry"
