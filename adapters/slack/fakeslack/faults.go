package fakeslack

import (
	"fmt"
	"time"
)

// Slack error codes the fake answers with. Pass any of them (or any other
// string) to SlackError to inject it.
const (
	CodeNotAuthed           = "not_authed"
	CodeInvalidAuth         = "invalid_auth"
	CodeTokenRevoked        = "token_revoked"
	CodeMissingScope        = "missing_scope"
	CodeRateLimited         = "ratelimited"
	CodeUnknownMethod       = "unknown_method"
	CodeInvalidArguments    = "invalid_arguments"
	CodeInvalidCursor       = "invalid_cursor"
	CodeChannelNotFound     = "channel_not_found"
	CodeMessageNotFound     = "message_not_found"
	CodeCantUpdateMessage   = "cant_update_message"
	CodeCantDeleteMessage   = "cant_delete_message"
	CodeNoText              = "no_text"
	CodeInvalidBlocks       = "invalid_blocks"
	CodeInvalidMetadata     = "invalid_metadata_format"
	CodeListNotFound        = "list_not_found"
	CodeRecordNotFound      = "record_not_found"
	CodeDuplicatedNotFound  = "duplicated_item_not_found"
	CodeInvalidRowID        = "invalid_row_id"
	CodeColumnIDNotProvided = "column_id_not_provided"
	CodeInvalidColumnID     = "invalid_column_id"
	CodeInvalidInputType    = "invalid_input_type"
	CodeInvalidOptionID     = "invalid_option_id"
	CodeInvalidDate         = "invalid_date"
	CodeOverCellFields      = "over_cell_fields_limit"
	CodeUneditableColumn    = "uneditable_column"
	CodeOverRowMaximum      = "over_row_maximum"
	CodeRowNotFound         = "row_not_found"
	CodeColumnNotFound      = "column_not_found"
	CodePermissionDenied    = "permission_denied"
	CodeInvalidArgs         = "invalid_args"
	CodeRestrictedAction    = "restricted_action"
	CodeInvalidParameters   = "invalid_parameters"
	CodeUserNotFound        = "user_not_found"
)

// FaultKind says how an injected fault answers.
type FaultKind int

const (
	// FaultSlackError answers HTTP 200 with {"ok":false,"error":Code}; nothing is applied.
	FaultSlackError FaultKind = iota + 1
	// FaultHTTPStatus answers Status with an HTML body, as Slack's edge does on 5xx; nothing is applied.
	FaultHTTPStatus
	// FaultRateLimited answers 429 with Retry-After; nothing is applied.
	FaultRateLimited
	// FaultTimeoutAfterApply applies the call, then answers nothing until the
	// client cancels its request, Delay passes on the server's clock (then 504),
	// or the server closes. The caller cannot know whether the write happened.
	FaultTimeoutAfterApply
	// FaultDropAfterApply applies the call, then closes the connection without
	// an answer: the client sees a transport error with an unknown result.
	FaultDropAfterApply
)

// Fault is one injected failure. Build it with SlackError, HTTPStatus,
// RateLimited, TimeoutAfterApply or DropAfterApply.
type Fault struct {
	Kind       FaultKind
	Code       string        // FaultSlackError
	Status     int           // FaultHTTPStatus
	RetryAfter time.Duration // FaultRateLimited; rounded up to whole seconds, at least 1
	Delay      time.Duration // FaultTimeoutAfterApply; 0 waits for the client or Close only
}

// SlackError answers {"ok":false,"error":code} with HTTP 200. For
// missing_scope the body also names the needed and provided scopes.
func SlackError(code string) Fault { return Fault{Kind: FaultSlackError, Code: code} }

// HTTPStatus answers status (normally 5xx) without a JSON body.
func HTTPStatus(status int) Fault { return Fault{Kind: FaultHTTPStatus, Status: status} }

// RateLimited answers 429 with Retry-After and {"ok":false,"error":"ratelimited"}.
func RateLimited(retryAfter time.Duration) Fault {
	return Fault{Kind: FaultRateLimited, Code: CodeRateLimited, RetryAfter: retryAfter}
}

// TimeoutAfterApply applies the call and then hangs; see FaultTimeoutAfterApply.
func TimeoutAfterApply(delay time.Duration) Fault {
	return Fault{Kind: FaultTimeoutAfterApply, Delay: delay}
}

// DropAfterApply applies the call and then drops the connection.
func DropAfterApply() Fault { return Fault{Kind: FaultDropAfterApply} }

func (f Fault) applies() bool {
	return f.Kind == FaultTimeoutAfterApply || f.Kind == FaultDropAfterApply
}

func (f Fault) String() string {
	switch f.Kind {
	case FaultSlackError:
		return "slack_error:" + f.Code
	case FaultHTTPStatus:
		return fmt.Sprintf("http_%d", f.Status)
	case FaultRateLimited:
		return fmt.Sprintf("ratelimited(%s)", f.RetryAfter)
	case FaultTimeoutAfterApply:
		return fmt.Sprintf("timeout_after_apply(%s)", f.Delay)
	case FaultDropAfterApply:
		return "drop_after_apply"
	}
	return fmt.Sprintf("fault(%d)", int(f.Kind))
}

// Rule injects Fault into calls that match it. Empty fields match anything;
// Channel matches the channel argument, ListID the list_id argument.
type Rule struct {
	Method  string
	Channel string
	ListID  string
	Fault   Fault
	// Times is how many matching calls fail: 0 means once, a negative
	// number means every matching call until ClearFaults.
	Times int
	// After is how many matching calls pass untouched before the rule fires.
	After int
}

func (r Rule) matches(method, channel, listID string) bool {
	return (r.Method == "" || r.Method == method) &&
		(r.Channel == "" || r.Channel == channel) &&
		(r.ListID == "" || r.ListID == listID)
}

// FiredFault records a fault that an incoming call received.
type FiredFault struct {
	Seq     int // the call's Seq
	Method  string
	Channel string
	ListID  string
	Fault   Fault
}

type ruleState struct {
	Rule
	left int // <0: forever
}

// FailNext makes the next call of method answer with fault.
func (s *Server) FailNext(method string, fault Fault) {
	s.AddRule(Rule{Method: method, Fault: fault})
}

// AddRule queues a rule. Rules are tried in the order they were added; the
// first one that matches a call fires and uses up one of its Times.
func (s *Server) AddRule(r Rule) {
	left := r.Times
	if left == 0 {
		left = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &ruleState{Rule: r, left: left})
}

// ClearFaults drops every queued rule.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
}

// PendingRules returns the rules that have not been used up, with Times set
// to what is left of each.
func (s *Server) PendingRules() []Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rule, 0, len(s.rules))
	for _, r := range s.rules {
		rule := r.Rule
		rule.Times = r.left
		out = append(out, rule)
	}
	return out
}

// FiredFaults returns every fault that fired, in call order.
func (s *Server) FiredFaults() []FiredFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]FiredFault(nil), s.fired...)
}

// takeFaultLocked returns the fault for this call, if a rule matches.
func (s *Server) takeFaultLocked(seq int, method, channel, listID string) (Fault, bool) {
	for i, r := range s.rules {
		if !r.matches(method, channel, listID) {
			continue
		}
		if r.After > 0 {
			r.After--
			continue
		}
		if r.left > 0 {
			r.left--
			if r.left == 0 {
				s.rules = append(s.rules[:i:i], s.rules[i+1:]...)
			}
		}
		s.fired = append(s.fired, FiredFault{Seq: seq, Method: method, Channel: channel, ListID: listID, Fault: r.Fault})
		return r.Fault, true
	}
	return Fault{}, false
}
