package fakeslack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// historyMaxLimit is Slack's documented ceiling for conversations.history.
const historyMaxLimit = 999

// HistoryNonMarketplaceLimit is the most messages conversations.history returns per call to an
// app not approved for the Slack Marketplace (Options.NonMarketplace).
const HistoryNonMarketplaceLimit = 15

type channel struct {
	id        string
	msgs      []*message // every message, replies too, in ts order
	botAbsent bool       // the bot is not a member (members.go)
}

func newChannel(id string) *channel { return &channel{id: id} }

type message struct {
	ts, threadTS       string
	user, botID, app   string
	text, subtype      string
	blocks             json.RawMessage
	metadata           json.RawMessage // {"event_type":…,"event_payload":…}
	editedTS, editedBy string
}

func (m *message) isReply() bool { return m.threadTS != "" && m.threadTS != m.ts }

func (c *channel) find(ts string) (*message, int) {
	for i, m := range c.msgs {
		if m.ts == ts {
			return m, i
		}
	}
	return nil, -1
}

func (c *channel) replies(ts string) []*message {
	var out []*message
	for _, m := range c.msgs {
		if m.isReply() && m.threadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

func (c *channel) insert(m *message) {
	i, _ := slices.BinarySearchFunc(c.msgs, m.ts, func(x *message, ts string) int {
		a, _ := parseTS(x.ts)
		b, _ := parseTS(ts)
		return int(sign(a - b))
	})
	c.msgs = slices.Insert(c.msgs, i, m)
}

func sign(n int64) int64 {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func (s *Server) channelLocked(id string) (*channel, bool) {
	if c, ok := s.channels[id]; ok {
		return c, true
	}
	if s.opts.AutoCreateChannels && len(id) > 1 && (id[0] == 'C' || id[0] == 'G') {
		c := newChannel(id)
		s.channels[id] = c
		return c, true
	}
	return nil, false
}

// wireMessage is a message as Slack returns it.
type wireMessage struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype,omitempty"`
	User            string          `json:"user,omitempty"`
	BotID           string          `json:"bot_id,omitempty"`
	AppID           string          `json:"app_id,omitempty"`
	Text            string          `json:"text"`
	TS              string          `json:"ts"`
	ThreadTS        string          `json:"thread_ts,omitempty"`
	ParentUserID    string          `json:"parent_user_id,omitempty"`
	ReplyCount      int             `json:"reply_count,omitempty"`
	ReplyUsers      []string        `json:"reply_users,omitempty"`
	ReplyUsersCount int             `json:"reply_users_count,omitempty"`
	LatestReply     string          `json:"latest_reply,omitempty"`
	Blocks          json.RawMessage `json:"blocks,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	Edited          *wireEdited     `json:"edited,omitempty"`
	Team            string          `json:"team,omitempty"`
}

type wireEdited struct {
	User string `json:"user"`
	TS   string `json:"ts"`
}

func (s *Server) wireLocked(c *channel, m *message, withMetadata bool) wireMessage {
	w := wireMessage{
		Type: "message", Subtype: m.subtype, User: m.user, BotID: m.botID, AppID: m.app,
		Text: m.text, TS: m.ts, Blocks: m.blocks, Team: s.opts.TeamID,
	}
	if withMetadata {
		w.Metadata = m.metadata
	}
	if m.editedTS != "" {
		w.Edited = &wireEdited{User: m.editedBy, TS: m.editedTS}
	}
	if m.isReply() {
		w.ThreadTS = m.threadTS
		if parent, _ := c.find(m.threadTS); parent != nil {
			w.ParentUserID = parent.user
		}
		return w
	}
	if reps := c.replies(m.ts); len(reps) > 0 {
		w.ThreadTS = m.ts
		w.ReplyCount = len(reps)
		w.LatestReply = reps[len(reps)-1].ts
		for _, r := range reps {
			if r.user != "" && !slices.Contains(w.ReplyUsers, r.user) {
				w.ReplyUsers = append(w.ReplyUsers, r.user)
			}
		}
		w.ReplyUsersCount = len(w.ReplyUsers)
	}
	return w
}

// parseBlocks checks that raw is a JSON array; an empty one clears the blocks.
func parseBlocks(raw []byte) (json.RawMessage, *apiError) {
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errCode(CodeInvalidBlocks)
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	return json.RawMessage(bytes.Clone(raw)), nil
}

func parseMetadata(raw []byte) (json.RawMessage, *apiError) {
	var md struct {
		EventType    string          `json:"event_type"`
		EventPayload json.RawMessage `json:"event_payload"`
	}
	if err := json.Unmarshal(raw, &md); err != nil || md.EventType == "" {
		return nil, errCode(CodeInvalidMetadata)
	}
	if len(md.EventPayload) == 0 || string(md.EventPayload) == "null" {
		md.EventPayload = json.RawMessage("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(md.EventPayload, &obj); err != nil {
		return nil, errCode(CodeInvalidMetadata)
	}
	out, _ := json.Marshal(md)
	return out, nil
}

func (s *Server) chatPostMessage(req *request) (any, *apiError) {
	c, e := s.memberChannelLocked(req.channel)
	if e != nil {
		return nil, e
	}
	m := &message{user: s.opts.BotUserID, botID: s.opts.BotID, app: s.opts.AppID, text: req.p.str("text")}
	if raw := req.p.raw("blocks"); raw != nil {
		b, e := parseBlocks(raw)
		if e != nil {
			return nil, e
		}
		m.blocks = b
	}
	if m.text == "" && m.blocks == nil && req.p.raw("attachments") == nil {
		return nil, errCode(CodeNoText)
	}
	if e := checkMessage(m.text, m.blocks); e != nil {
		return nil, e
	}
	if raw := req.p.raw("metadata"); raw != nil {
		md, e := parseMetadata(raw)
		if e != nil {
			return nil, e
		}
		m.metadata = md
	}
	if parentTS := req.p.str("thread_ts"); parentTS != "" {
		// A reply to a reply joins the root's thread. A reply whose parent
		// does not exist is posted unthreaded: our reading of what Slack does
		// when the parent was deleted (slack-go documents it).
		if parent, _ := c.find(parentTS); parent != nil {
			m.threadTS = parent.ts
			if parent.isReply() {
				m.threadTS = parent.threadTS
			}
		}
	}
	m.ts = s.newTSLocked()
	c.insert(m)
	return map[string]any{"ok": true, "channel": c.id, "ts": m.ts, "message": s.wireLocked(c, m, true)}, nil
}

// ownMessageLocked finds the bot's own live message named by the request; another author's is
// refused with notOwn, as Slack refuses to edit or delete it.
func (s *Server) ownMessageLocked(req *request, notOwn string) (*channel, *message, *apiError) {
	c, e := s.memberChannelLocked(req.channel)
	if e != nil {
		return nil, nil, e
	}
	m, _ := c.find(req.p.str("ts"))
	if m == nil || m.subtype == "tombstone" {
		return nil, nil, errCode(CodeMessageNotFound)
	}
	if m.botID != s.opts.BotID {
		return nil, nil, errCode(notOwn)
	}
	return c, m, nil
}

func (s *Server) chatUpdate(req *request) (any, *apiError) {
	c, m, e := s.ownMessageLocked(req, CodeCantUpdateMessage)
	if e != nil {
		return nil, e
	}
	text, blocks, md := m.text, m.blocks, m.metadata
	if req.p.has("text") {
		text = req.p.str("text")
	}
	if raw := req.p.raw("blocks"); raw != nil {
		b, e := parseBlocks(raw)
		if e != nil {
			return nil, e
		}
		blocks = b
	}
	if raw := req.p.raw("metadata"); raw != nil {
		parsed, e := parseMetadata(raw)
		if e != nil {
			return nil, e
		}
		md = parsed
	}
	if text == "" && blocks == nil {
		return nil, errCode(CodeNoText)
	}
	if e := checkMessage(text, blocks); e != nil {
		return nil, e
	}
	m.text, m.blocks, m.metadata = text, blocks, md
	m.editedTS, m.editedBy = s.newTSLocked(), s.opts.BotUserID
	return map[string]any{"ok": true, "channel": c.id, "ts": m.ts, "text": m.text, "message": s.wireLocked(c, m, true)}, nil
}

func (s *Server) chatDelete(req *request) (any, *apiError) {
	c, m, e := s.ownMessageLocked(req, CodeCantDeleteMessage)
	if e != nil {
		return nil, e
	}
	c.remove(m)
	return map[string]any{"ok": true, "channel": c.id, "ts": m.ts}, nil
}

// remove deletes m. A parent that still has replies stays as a tombstone, as
// Slack shows "This message was deleted."; a tombstone goes with its last reply.
func (c *channel) remove(m *message) {
	if !m.isReply() && len(c.replies(m.ts)) > 0 {
		*m = message{ts: m.ts, threadTS: m.ts, subtype: "tombstone", text: "This message was deleted.", user: "USLACKBOT"}
		return
	}
	_, i := c.find(m.ts)
	c.msgs = slices.Delete(c.msgs, i, i+1)
	if m.isReply() {
		if parent, _ := c.find(m.threadTS); parent != nil && parent.subtype == "tombstone" && len(c.replies(parent.ts)) == 0 {
			_, j := c.find(parent.ts)
			c.msgs = slices.Delete(c.msgs, j, j+1)
		}
	}
}

const historyCursorPrefix = "next_ts:"

func (s *Server) conversationsHistory(req *request) (any, *apiError) {
	c, e := s.memberChannelLocked(req.channel)
	if e != nil {
		return nil, e
	}
	w, e := s.readWindow(req)
	if e != nil {
		return nil, e
	}
	limit, inclusive, oldest, latest := w.limit, w.inclusive, w.oldest, w.latest
	var before int64 = 1 << 62 // cursor: messages at or before this ts
	if cur := req.p.str("cursor"); cur != "" {
		raw, err := base64.StdEncoding.DecodeString(cur)
		ts, found := strings.CutPrefix(string(raw), historyCursorPrefix)
		if err != nil || !found {
			return nil, errCode(CodeInvalidCursor)
		}
		var ok bool
		if before, ok = parseTS(ts); !ok {
			return nil, errCode(CodeInvalidCursor)
		}
	}
	var picked []*message
	for i := len(c.msgs) - 1; i >= 0; i-- {
		m := c.msgs[i]
		if m.isReply() {
			continue
		}
		t, _ := parseTS(m.ts)
		if t > before || (inclusive && (t < oldest || t > latest)) || (!inclusive && (t <= oldest || t >= latest)) {
			continue
		}
		picked = append(picked, m)
	}
	hasMore := len(picked) > limit
	next := ""
	if hasMore {
		next = base64.StdEncoding.EncodeToString([]byte(historyCursorPrefix + picked[limit].ts))
		picked = picked[:limit]
	}
	withMD := req.p.boolean("include_all_metadata")
	msgs := make([]wireMessage, 0, len(picked))
	for _, m := range picked {
		msgs = append(msgs, s.wireLocked(c, m, withMD))
	}
	return map[string]any{
		"ok": true, "messages": msgs, "has_more": hasMore, "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": next},
	}, nil
}

// Metadata is message metadata as posted with chat.postMessage.
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// Message is a snapshot of a stored message.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // set on replies only
	User     string // author's user id (the bot user for the token's posts)
	BotID    string // set when a bot posted it
	Subtype  string // "tombstone" for a deleted parent that still has replies
	Text     string
	Blocks   json.RawMessage
	Metadata *Metadata
	EditedTS string
	Replies  []Message // on top-level messages, oldest first
}

// ErrNotFound is returned (wrapped) by the hand-editing methods when a
// channel, message, List or row does not exist.
var ErrNotFound = errors.New("fakeslack: not found")

func snapshotMessage(c *channel, m *message) Message {
	out := Message{
		Channel: c.id, TS: m.ts, User: m.user, BotID: m.botID, Subtype: m.subtype,
		Text: m.text, Blocks: bytes.Clone(m.blocks), EditedTS: m.editedTS,
	}
	if m.isReply() {
		out.ThreadTS = m.threadTS
	}
	if m.metadata != nil {
		var md Metadata
		if json.Unmarshal(m.metadata, &md) == nil {
			out.Metadata = &md
		}
	}
	return out
}

// AddChannel makes channel id exist (a no-op if it does).
func (s *Server) AddChannel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[id]; !ok {
		s.channels[id] = newChannel(id)
	}
}

// NewChannel creates a channel with a fresh C… id and returns the id.
func (s *Server) NewChannel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newIDLocked("C")
	s.channels[id] = newChannel(id)
	return id
}

// Messages returns the channel's top-level messages, oldest first, each with
// its replies. Metadata is included whatever include_all_metadata would say.
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[channelID]
	if !ok {
		return nil
	}
	var out []Message
	for _, m := range c.msgs {
		if m.isReply() {
			continue
		}
		snap := snapshotMessage(c, m)
		for _, r := range c.replies(m.ts) {
			snap.Replies = append(snap.Replies, snapshotMessage(c, r))
		}
		out = append(out, snap)
	}
	return out
}

// lookup finds a message (top-level or reply) for the inspection helpers; s.mu must be held.
func (s *Server) lookup(channelID, ts string) (*channel, *message, error) {
	c, ok := s.channels[channelID]
	if !ok {
		return nil, nil, fmt.Errorf("channel %s: %w", channelID, ErrNotFound)
	}
	m, _ := c.find(ts)
	if m == nil {
		return nil, nil, fmt.Errorf("message %s: %w", ts, ErrNotFound)
	}
	return c, m, nil
}

// Message returns one message (top-level or reply) by ts.
func (s *Server) Message(channelID, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, err := s.lookup(channelID, ts)
	if err != nil {
		return Message{}, false
	}
	snap := snapshotMessage(c, m)
	if !m.isReply() {
		for _, r := range c.replies(m.ts) {
			snap.Replies = append(snap.Replies, snapshotMessage(c, r))
		}
	}
	return snap, true
}

// InjectMessage stores m as if someone other than the token posted it: a
// person (set User), another bot (set BotID), or a forgery of ours (set
// BotID to BotID() and whatever metadata). Channel and Replies are ignored;
// an empty TS gets a fresh one; ThreadTS makes it a reply. It returns the ts.
func (s *Server) InjectMessage(channelID string, m Message) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[channelID]
	if !ok {
		return "", fmt.Errorf("channel %s: %w", channelID, ErrNotFound)
	}
	msg := &message{
		ts: m.TS, user: m.User, botID: m.BotID, subtype: m.Subtype,
		text: m.Text, blocks: bytes.Clone(m.Blocks), editedTS: m.EditedTS,
	}
	if msg.user == "" && msg.botID == "" {
		msg.user = "U0HUMAN0001"
	}
	if msg.ts == "" {
		msg.ts = s.newTSLocked()
	} else {
		us, ok := parseTS(msg.ts)
		if !ok {
			return "", fmt.Errorf("bad ts %q", msg.ts)
		}
		if existing, _ := c.find(formatTS(us)); existing != nil {
			return "", fmt.Errorf("message %s already exists", msg.ts)
		}
		s.lastTS = max(s.lastTS, us)
		msg.ts = formatTS(us)
	}
	if m.ThreadTS != "" && m.ThreadTS != msg.ts {
		parent, _ := c.find(m.ThreadTS)
		if parent == nil {
			return "", fmt.Errorf("thread %s: %w", m.ThreadTS, ErrNotFound)
		}
		msg.threadTS = parent.ts
	}
	if m.Metadata != nil {
		raw, err := json.Marshal(m.Metadata)
		if err != nil {
			return "", fmt.Errorf("metadata: %w", err)
		}
		msg.metadata = raw
	}
	c.insert(msg)
	return msg.ts, nil
}

// EditMessage changes a stored message by hand (as a person editing it, or a
// forger); edit receives a snapshot and may change Text, Blocks, Metadata,
// User and BotID. It does not set EditedTS unless edit does.
func (s *Server) EditMessage(channelID, ts string, edit func(*Message)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, err := s.lookup(channelID, ts)
	if err != nil {
		return err
	}
	snap := snapshotMessage(c, m)
	edit(&snap)
	m.text, m.blocks, m.user, m.botID, m.editedTS = snap.Text, bytes.Clone(snap.Blocks), snap.User, snap.BotID, snap.EditedTS
	m.metadata = nil
	if snap.Metadata != nil {
		raw, err := json.Marshal(snap.Metadata)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		m.metadata = raw
	}
	return nil
}

// RemoveMessage deletes a message by hand, as chat.delete would (a parent
// with replies stays as a tombstone).
func (s *Server) RemoveMessage(channelID, ts string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, err := s.lookup(channelID, ts)
	if err != nil {
		return err
	}
	c.remove(m)
	return nil
}

// window is the paging and time window of a conversations.history or conversations.replies call.
type window struct {
	limit          int
	inclusive      bool
	oldest, latest int64 // message ts bounds, in microseconds
}

// readWindow reads limit (default 100, at most historyMaxLimit, and 15 for an app not in the
// Marketplace), inclusive, oldest and latest; malformed values are invalid_arguments.
func (s *Server) readWindow(req *request) (window, *apiError) {
	limit, ok := req.p.integer("limit", 100)
	if !ok {
		return window{}, errCode(CodeInvalidArguments)
	}
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, historyMaxLimit)
	if s.opts.NonMarketplace {
		limit = min(limit, HistoryNonMarketplaceLimit)
	}
	w := window{limit: limit, inclusive: req.p.boolean("inclusive"), oldest: -1, latest: 1 << 62}
	if v := req.p.str("oldest"); v != "" {
		if w.oldest, ok = parseTS(v); !ok {
			return window{}, errCode(CodeInvalidArguments)
		}
	}
	if v := req.p.str("latest"); v != "" {
		if w.latest, ok = parseTS(v); !ok {
			return window{}, errCode(CodeInvalidArguments)
		}
	}
	return w, nil
}
