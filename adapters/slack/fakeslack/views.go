package fakeslack

import (
	"context"
	"encoding/json"
	"time"
)

// Error codes of views.open (https://api.slack.com/methods/views.open, "Errors"): an id Slack
// never issued (or malformed) is invalid_trigger_id; one older than TriggerTTL is
// expired_trigger_id; one that already opened a view is exchanged_trigger_id (a trigger is
// exchanged once, https://api.slack.com/interactivity/handling#modal_responses).
const (
	CodeInvalidTriggerID   = "invalid_trigger_id"
	CodeExpiredTriggerID   = "expired_trigger_id"
	CodeExchangedTriggerID = "exchanged_trigger_id"
)

// TriggerTTL is how long a trigger id can open a view: "triggers expire in three seconds"
// (https://api.slack.com/interactivity/handling#modal_responses). Measured on the fake's Clock.
const TriggerTTL = 3 * time.Second

// View is a modal opened through views.open.
type View struct {
	ID              string
	TriggerID       string
	CallbackID      string
	PrivateMetadata string
	Title           string
	Blocks          json.RawMessage
}

type trigger struct {
	at   time.Time
	used bool
}

// IssueTrigger returns a fresh trigger id, as Slack puts in an interaction payload; it opens
// one view within TriggerTTL of the fake's clock.
func (s *Server) IssueTrigger() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.triggers == nil {
		s.triggers = map[string]*trigger{}
	}
	id := s.newIDLocked("") + "." + s.newIDLocked("TRIG")
	s.triggers[id] = &trigger{at: s.clock.Now()}
	return id
}

// Views returns the views opened so far, in order.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]View(nil), s.views...)
}

// WaitViews blocks until at least n views are open, or ctx ends.
func (s *Server) WaitViews(ctx context.Context, n int) ([]View, error) {
	for {
		s.mu.Lock()
		if len(s.views) >= n {
			out := append([]View(nil), s.views...)
			s.mu.Unlock()
			return out, nil
		}
		if s.viewOpened == nil {
			s.viewOpened = make(chan struct{})
		}
		ch := s.viewOpened
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Server) viewsOpen(req *request) (any, *apiError) {
	id := req.p.str("trigger_id")
	tr, ok := s.triggers[id]
	switch {
	case id == "" || !ok:
		return nil, errCode(CodeInvalidTriggerID)
	case tr.used:
		return nil, errCode(CodeExchangedTriggerID)
	case s.clock.Now().Sub(tr.at) > TriggerTTL:
		return nil, errCode(CodeExpiredTriggerID)
	}
	var v struct {
		Type            string                `json:"type"`
		CallbackID      string                `json:"callback_id"`
		PrivateMetadata string                `json:"private_metadata"`
		Title           struct{ Text string } `json:"title"`
		Submit          *textObj              `json:"submit"`
		Close           *textObj              `json:"close"`
		Blocks          json.RawMessage       `json:"blocks"`
	}
	if err := json.Unmarshal(req.p.raw("view"), &v); err != nil || v.Type != "modal" || !checkView(v.Title.Text, v.Submit, v.Close, v.Blocks) {
		return nil, errCode(CodeInvalidArguments)
	}
	tr.used = true
	view := View{ID: s.newIDLocked("V"), TriggerID: id, CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata,
		Title: v.Title.Text, Blocks: v.Blocks}
	s.views = append(s.views, view)
	if s.viewOpened != nil {
		close(s.viewOpened)
		s.viewOpened = nil
	}
	return map[string]any{"ok": true, "view": map[string]any{
		"id": view.ID, "type": "modal", "callback_id": view.CallbackID, "private_metadata": view.PrivateMetadata,
		"team_id": s.opts.TeamID, "app_id": s.opts.AppID, "bot_id": s.opts.BotID,
	}}, nil
}
