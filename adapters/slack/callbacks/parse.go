package callbacks

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// Action ids handled: the root message's elements (threads.RenderRoot renders those that fit the
// inquiry's state). Assign, note and cancel open a modal.
const (
	ActionClaim    = slackinstall.ActionClaim
	ActionResolve  = slackinstall.ActionResolve
	ActionAssignMe = slackinstall.ActionAssignMe
	ActionStatus   = slackinstall.ActionStatus // the selected option's value is the status
	ActionAssign   = slackinstall.ActionAssign // opens ModalAssign
	ActionNote     = slackinstall.ActionNote   // opens ModalNote
	ActionCancel   = slackinstall.ActionCancel // opens ModalCancel
	ActionRemind   = slackinstall.ActionRemind // opens ModalRemind (remind.go)
)

// Modal callback ids and their input action ids. A modal's private_metadata is
// "{channel} {root ts}" of the root message it was opened from; the assign and cancel forms add
// " v{version}", the version that message was rendered at.
const (
	ModalAssign  = "casebook_assign_modal"
	ModalNote    = "casebook_note_modal"
	ModalCancel  = "casebook_cancel_modal"
	InputOwner   = "owner"  // users_select: the Slack user to assign
	InputNote    = "note"   // plain_text_input
	InputReason  = "reason" // plain_text_input
	maxFieldSize = 12000
)

// ErrMalformed is a verified request whose content Casebook cannot use.
var ErrMalformed = errors.New("malformed slack payload")

// Interaction is what Casebook reads of a block_actions or view_submission payload. Every field
// is untrusted until matched against stored state.
type Interaction struct {
	Type         string // block_actions or view_submission
	EnterpriseID string
	TeamID       string
	AppID        string
	UserID       string
	// Channel and RootTS name the root message: thread_ts of the clicked message, else its ts;
	// for a modal they come from private_metadata.
	Channel  string
	RootTS   string
	ActionID string // block_actions: the first action's id; view_submission: the callback id
	Value    string // the action's value or selected option, without its rendered version
	// Version is the inquiry version the clicked element was rendered at, or (view_submission)
	// the version of the message the form was opened from; 0 when it carries none
	// (slackinstall.ActionValue).
	Version     uint64
	ActionTS    string
	TriggerID   string
	ResponseURL string
	ViewID      string
	Inputs      map[string]string // view_submission: input action id → value or selected user
	// A message shortcut (message_action; ActionID is its callback id): the message it was used on.
	MessageTS, MessageText, MessageUser string
}

// InstallKey is the installation the payload claims to come from.
func (in Interaction) InstallKey() string {
	return slackinstall.InstallKey(in.EnterpriseID, in.TeamID, in.AppID)
}

type inputValue struct {
	Value          string `json:"value"`
	SelectedUser   string `json:"selected_user"`
	SelectedOption *struct {
		Value string `json:"value"`
	} `json:"selected_option"`
	SelectedDateTime *int64 `json:"selected_date_time"` // datetimepicker: Unix seconds
}

func (v inputValue) get() string {
	switch {
	case v.SelectedDateTime != nil:
		return strconv.FormatInt(*v.SelectedDateTime, 10)
	case v.SelectedUser != "":
		return v.SelectedUser
	case v.SelectedOption != nil:
		return v.SelectedOption.Value
	}
	return v.Value
}

type wireInteraction struct {
	Type       string               `json:"type"`
	Team       struct{ ID string }  `json:"team"`
	Enterprise *struct{ ID string } `json:"enterprise"`
	APIAppID   string               `json:"api_app_id"`
	User       struct{ ID string }  `json:"user"`
	Channel    struct{ ID string }  `json:"channel"`
	Container  struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
		Text     string `json:"text"`
		User     string `json:"user"`
	} `json:"message"`
	CallbackID string `json:"callback_id"` // message_action
	MessageTS  string `json:"message_ts"`  // message_action
	ActionTS   string `json:"action_ts"`   // message_action
	Actions    []struct {
		inputValue
		ActionID string `json:"action_id"`
		ActionTS string `json:"action_ts"`
	} `json:"actions"`
	TriggerID   string `json:"trigger_id"`
	ResponseURL string `json:"response_url"`
	View        struct {
		ID              string `json:"id"`
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]inputValue `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// ParseInteraction reads an interaction request body (form-encoded, the JSON in "payload").
// Call it only on a verified body.
func ParseInteraction(body []byte) (Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Interaction{}, ErrMalformed
	}
	var w wireInteraction
	if err := json.Unmarshal([]byte(form.Get("payload")), &w); err != nil {
		return Interaction{}, ErrMalformed
	}
	in := Interaction{Type: w.Type, TeamID: w.Team.ID, AppID: w.APIAppID, UserID: w.User.ID,
		TriggerID: w.TriggerID, ResponseURL: w.ResponseURL}
	if w.Enterprise != nil {
		in.EnterpriseID = w.Enterprise.ID
	}
	switch w.Type {
	case "block_actions":
		if len(w.Actions) == 0 {
			return Interaction{}, ErrMalformed
		}
		a := w.Actions[0]
		in.ActionID, in.ActionTS = a.ActionID, a.ActionTS
		in.Value, in.Version, _ = slackinstall.ParseActionValue(a.get())
		in.Channel = first(w.Channel.ID, w.Container.ChannelID)
		in.RootTS = first(w.Message.ThreadTS, w.Container.ThreadTS, w.Message.TS, w.Container.MessageTS)
	case "view_submission":
		in.ActionID, in.ViewID = w.View.CallbackID, w.View.ID
		// "{channel} {root ts}", and " v{version}" when the form was opened from a versioned message
		meta := strings.Fields(w.View.PrivateMetadata)
		if len(meta) >= 2 {
			in.Channel, in.RootTS = meta[0], meta[1]
		}
		if len(meta) == 3 && strings.HasPrefix(meta[2], "v") {
			in.Version, _ = strconv.ParseUint(meta[2][1:], 10, 64)
		}
		in.Inputs = map[string]string{}
		for _, block := range w.View.State.Values {
			for id, v := range block {
				in.Inputs[id] = v.get()
			}
		}
	case "message_action":
		in.ActionID, in.ActionTS, in.Channel = w.CallbackID, w.ActionTS, w.Channel.ID
		in.MessageTS, in.MessageText, in.MessageUser = first(w.MessageTS, w.Message.TS), w.Message.Text, w.Message.User
		if in.Channel == "" || in.MessageTS == "" || len(in.MessageText) > maxFieldSize*4 {
			return Interaction{}, ErrMalformed
		}
	default:
		return Interaction{}, ErrMalformed
	}
	if in.TeamID == "" || in.UserID == "" || in.ActionID == "" {
		return Interaction{}, ErrMalformed
	}
	return in, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Event is what Casebook reads of an Events API request.
type Event struct {
	Type             string // url_verification or event_callback
	Challenge        string
	EnterpriseID     string
	TeamID           string
	AppID            string
	EventID          string
	EventType        string // app_uninstalled, tokens_revoked, …
	BotTokensRevoked bool
}

// InstallKey is the installation the event claims to come from.
func (e Event) InstallKey() string { return slackinstall.InstallKey(e.EnterpriseID, e.TeamID, e.AppID) }

// ParseEvent reads an Events API request body. Call it only on a verified body.
func ParseEvent(body []byte) (Event, error) {
	var w struct {
		Type         string `json:"type"`
		Challenge    string `json:"challenge"`
		EnterpriseID string `json:"enterprise_id"`
		TeamID       string `json:"team_id"`
		APIAppID     string `json:"api_app_id"`
		EventID      string `json:"event_id"`
		Event        struct {
			Type   string `json:"type"`
			Tokens struct {
				Bot []string `json:"bot"`
			} `json:"tokens"`
		} `json:"event"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return Event{}, ErrMalformed
	}
	e := Event{Type: w.Type, Challenge: w.Challenge, EnterpriseID: w.EnterpriseID, TeamID: w.TeamID, AppID: w.APIAppID,
		EventID: w.EventID, EventType: w.Event.Type, BotTokensRevoked: len(w.Event.Tokens.Bot) > 0}
	switch {
	case e.Type == "url_verification" && e.Challenge != "" && len(e.Challenge) <= 256:
	case e.Type == "event_callback" && e.TeamID != "" && e.EventID != "" && len(e.EventID) <= 128:
	default:
		return Event{}, ErrMalformed
	}
	return e, nil
}
