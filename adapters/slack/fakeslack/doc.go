// Package fakeslack is a stateful fake of the Slack Web API methods Casebook
// uses: auth.test, bots.info, chat.postMessage, chat.update, chat.delete, chat.getPermalink,
// conversations.history, conversations.replies, conversations.info, views.open, oauth.v2.access,
// slackLists.create, slackLists.access.set and slackLists.items.create, .update, .delete, .info
// and .list. Other methods answer unknown_method.
//
// It encodes our reading of Slack's behaviour, from Slack's method reference,
// slack-go v0.35.0 and the notes in shared/seeds. Where it had to guess, the
// guess is named here and in the code:
//
//   - Answers: HTTP 200 with {"ok":false,"error":code}; 429 with Retry-After
//     (whole seconds) and error "ratelimited"; injected 5xx carry an HTML body.
//   - Auth: the token comes from "Authorization: Bearer" or, in a form or
//     query, the token argument. Missing is not_authed, unknown invalid_auth,
//     revoked token_revoked, a missing scope missing_scope with needed and
//     provided.
//   - Messages: ts strings are unique and increasing ("1700000000.000100"),
//     from the server's Clock. A reply to a reply joins the root's thread; a
//     reply whose parent does not exist is posted unthreaded (guess, after
//     what slack-go documents for deleted parents). Only the token's own
//     messages can be updated or deleted. Deleting a parent that has replies
//     leaves a "tombstone". conversations.history returns top-level messages
//     newest first, pages with a next_ts cursor, and includes metadata only
//     with include_all_metadata (our reading of the docs).
//   - Lists: no events and no upsert: items.create makes a new row every time
//     it is called. Cells are addressed by column_id with a typed value key
//     (rich_text for text columns, select, date, user, …); any other key,
//     plain "text" included, is invalid_input_type. A cell without column_id
//     (the legacy key/value form) is column_id_not_provided in items.update,
//     invalid_column_id in items.create (guess). Unknown column ids are
//     invalid_column_id; unknown select options invalid_option_id; bad dates
//     invalid_date. items.update checks every cell before applying any
//     (guess), and puts all row_id_to_create cells in one new row (guess).
//   - Row cap: a List holds at most RowCap active rows, subtasks included
//     (guess; Slack's cap is plan-dependent and 1000 is a guess). Creating
//     past it is over_row_maximum. Archived rows do not count, are kept
//     apart, are listed only with archived=true, and stay readable and
//     writable by id (guess). The API cannot archive; ArchiveRow does it by
//     hand, as a person or Slack's auto-archive would.
//   - items.list pages in creation order, 100 rows by default, at most 1000
//     (guesses), with an opaque cursor bound to the List and to archived.
//     Options.ItemsPageMax (or SetItemsPageMax) answers shorter pages than
//     limit asks, as a cursor-paginated method may; archived=true pages the
//     archived rows alone, in the same order.
//   - Lists access: the bot that creates a List (slackLists.create) owns it; a List made by hand
//     is shared with the bot for writing. slackLists.access.set grants read, write or owner;
//     without access every items call is permission_denied (SetBotAccess plays that). Ids shaped
//     like Slack's that name nothing are row_not_found / column_not_found, malformed ones
//     invalid_row_id / invalid_column_id, missing or malformed arguments invalid_args (guesses
//     where Slack documents both codes without saying when).
//   - Trigger ids open one view within 3 s of the Clock: then expired_trigger_id; a second use
//     exchanged_trigger_id.
//   - Options.NonMarketplace: conversations.history and conversations.replies answer at most 15
//     messages a call and one call a minute, as Slack does for apps outside its Marketplace.
//   - Rate limits: a fixed window per method on the server's Clock (Slack's
//     tiers allow bursts; this is a simplification). Injected faults take
//     precedence and do not spend the budget.
//
// Fault injection (FailNext, AddRule) answers the next matching calls with a
// Slack error, an HTTP status, a 429, or applies the write and then hangs
// (TimeoutAfterApply) or drops the connection (DropAfterApply), so the
// client cannot know whether it happened. Calls, FiredFaults, Messages, Rows
// and ArchivedRows show what the server saw and holds; InjectMessage,
// EditMessage, AddRow, EditRow, ArchiveRow and friends change state by hand,
// to play people, forgers and foreign rows.
package fakeslack
