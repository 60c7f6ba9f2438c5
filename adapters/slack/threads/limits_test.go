package threads_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
)

var clearances = []domain.Classification{domain.Public, domain.Internal, domain.Personal}

// units counts UTF-16 code units, independently of slackinstall.TextLen.
func units(s string) int { return len(utf16.Encode([]rune(s))) }

// checkLimits walks a rendered message's JSON and reports every Slack limit it breaks.
func checkLimits(t *testing.T, what string, r threads.Rendered) {
	t.Helper()
	raw, err := json.Marshal(r.Blocks)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Text string `json:"text"`
		} `json:"text"`
		Elements []struct {
			Text *struct {
				Text string `json:"text"`
			} `json:"text"`
			Value   string `json:"value"`
			Options []struct {
				Text  struct{ Text string } `json:"text"`
				Value string                `json:"value"`
			} `json:"options"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatal(err)
	}
	if units(r.Text) > slackinstall.MaxMessageText || len(blocks) > slackinstall.MaxMessageBlocks {
		t.Errorf("%s: text %d units, %d blocks", what, units(r.Text), len(blocks))
	}
	total := 0
	for _, b := range blocks {
		switch b.Type {
		case "section":
			n := units(b.Text.Text)
			total += n
			if n < 1 || n > slackinstall.MaxSectionText {
				t.Errorf("%s: section of %d units", what, n)
			}
			if i := strings.LastIndexByte(b.Text.Text, '&'); i >= 0 && !strings.Contains(b.Text.Text[i:], ";") {
				t.Errorf("%s: section ends inside an entity", what)
			}
		case "actions":
			if len(b.Elements) > slackinstall.MaxActionsElements {
				t.Errorf("%s: %d elements", what, len(b.Elements))
			}
			for _, e := range b.Elements {
				if e.Text != nil && units(e.Text.Text) > slackinstall.MaxButtonText || units(e.Value) > slackinstall.MaxActionValue {
					t.Errorf("%s: button %q value of %d units", what, e.Text.Text, units(e.Value))
				}
				for _, o := range e.Options {
					if units(o.Text.Text) > slackinstall.MaxOptionText || units(o.Value) > 150 {
						t.Errorf("%s: option %q", what, o.Text.Text)
					}
				}
			}
		default:
			t.Errorf("%s: unexpected block %q", what, b.Type)
		}
	}
	if total > slackinstall.MaxBlocksText {
		t.Errorf("%s: blocks carry %d units of text", what, total)
	}
}

// randomText draws n runes from an alphabet chosen to hurt: mrkdwn's escaped characters, emoji
// outside the BMP, combining marks, joiners and skin tones, plain letters.
func randomText(r *rand.Rand, n int) string {
	alphabet := []string{"&", "<", ">", "a", "Z", " ", "\n", "*", "😀", "👩\u200d💻", "e\u0301", "\u0301", "👍🏽", "日", "|"}
	var rs []rune
	for len(rs) < n {
		rs = append(rs, []rune(alphabet[r.IntN(len(alphabet))])...)
	}
	return string(rs[:n])
}

func post(t *testing.T, api *slack.Client, channel string, r threads.Rendered) error {
	t.Helper()
	_, _, err := api.PostMessageContext(t.Context(), channel, slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...))
	return err
}

func strictFake(t *testing.T) *slack.Client {
	t.Helper()
	srv := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0LIMITS001"}})
	return slack.New(srv.Token(), slack.OptionAPIURL(srv.URL()))
}

// TestRenderWithinLimitsRandom is the property test of Slack's limits: random field contents (up to
// and at each field's maximum length, full of &<>, emoji, combining marks) rendered as root and reply
// at every clearance and status stay inside every Block Kit limit after escaping, and the strict
// fake accepts them.
func TestRenderWithinLimitsRandom(t *testing.T) {
	t.Parallel()
	api := strictFake(t)
	r := rand.New(rand.NewPCG(14, 2026))
	length := func(max int) int {
		if r.IntN(3) == 0 {
			return max
		}
		return r.IntN(max + 1)
	}
	for i := range 24 {
		q := sampleInquiry()
		q.Status = domain.Statuses[r.IntN(len(domain.Statuses))]
		q.Requester.Name = randomText(r, length(domain.MaxNameLen))
		q.Requester.Email = randomText(r, length(domain.MaxEmailLen))
		q.Subject = randomText(r, length(domain.MaxSubjectLen))
		q.Message = randomText(r, length(domain.MaxMessageLen))
		q.Category = randomText(r, length(domain.MaxCategoryLen))
		q.Team = randomText(r, length(64))
		q.Owner = domain.PrincipalID(randomText(r, length(200)))
		for _, c := range clearances {
			for what, m := range map[string]threads.Rendered{
				"root":  threads.RenderRoot(q, c, "https://cb.example/inquiries/r/"+q.Receipt, slackinstall.Person{Name: randomText(r, length(domain.MaxNameLen))}),
				"reply": threads.RenderReply(q, c, slackinstall.Person{SlackUser: "U0OWNER001"}),
			} {
				checkLimits(t, what, m)
				if err := post(t, api, "C0LIMITS001", m); err != nil {
					t.Fatalf("case %d %s at %s refused by the strict fake: %v", i, what, c, err)
				}
			}
		}
	}
}

// TestMaxRootPostsAtPersonal: a root message at personal clearance with every field at its maximum
// length and full of & posts to the strict fake, cut with a visible ellipsis; the same at every
// other clearance.
func TestMaxRootPostsAtPersonal(t *testing.T) {
	t.Parallel()
	api := strictFake(t)
	q := sampleInquiry()
	q.Requester.Name = strings.Repeat("&", domain.MaxNameLen)
	q.Requester.Email = strings.Repeat("&", domain.MaxEmailLen)
	q.Subject = strings.Repeat("&", domain.MaxSubjectLen)
	q.Message = strings.Repeat("&", domain.MaxMessageLen)
	q.Category = strings.Repeat("&", domain.MaxCategoryLen)
	for _, c := range clearances {
		m := threads.RenderRoot(q, c, "https://cb.example/inquiries/r/"+q.Receipt, slackinstall.Person{Name: strings.Repeat("&", domain.MaxNameLen)})
		checkLimits(t, "root at "+c.String(), m)
		if err := post(t, api, "C0LIMITS001", m); err != nil {
			t.Fatalf("root at %s: %v", c, err)
		}
		if c == domain.Personal {
			var all string
			for _, b := range m.Blocks {
				if s, ok := b.(*slack.SectionBlock); ok {
					all += s.Text.Text + "\n"
				}
			}
			if !strings.Contains(all, "&amp;&amp;"+slackinstall.Ellipsis) {
				t.Fatalf("the cut message carries no visible ellipsis")
			}
		}
	}
}

// FuzzRenderRoot: any subject, message and name render inside Slack's limits at every clearance.
func FuzzRenderRoot(f *testing.F) {
	f.Add("Invoice", "Invoice 42 charges me twice.", "Ada")
	f.Add(strings.Repeat("&", 200), strings.Repeat("<&>", 3400), strings.Repeat("😀", 200))
	f.Fuzz(func(t *testing.T, subject, message, name string) {
		q := sampleInquiry()
		q.Subject, q.Message, q.Requester.Name = subject, message, name
		for _, c := range clearances {
			checkLimits(t, "root", threads.RenderRoot(q, c, "https://cb.example/r/x", slackinstall.Person{Name: name}))
			checkLimits(t, "reply", threads.RenderReply(q, c, slackinstall.Person{Name: name}))
		}
	})
}
