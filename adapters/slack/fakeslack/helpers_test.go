package fakeslack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/slack-go/slack"
)

const testChannel = "C0TESTCHAN1"

type testBundle struct {
	srv   *fakeslack.Server
	clock *fakeslack.ManualClock
	api   *slack.Client
	http  *http.Client
}

// setup starts a fake with one channel and a slack-go client on its own transport.
func setup(t *testing.T, opts fakeslack.Options) *testBundle {
	t.Helper()
	if opts.Channels == nil {
		opts.Channels = []string{testChannel}
	}
	srv := fakeslack.NewTestServer(t, opts)
	clock, ok := srv.Clock().(*fakeslack.ManualClock)
	if !ok {
		t.Fatal("NewTestServer without a Clock should use a ManualClock")
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	return &testBundle{
		srv:   srv,
		clock: clock,
		api:   slack.New(srv.Token(), slack.OptionAPIURL(srv.URL()), slack.OptionHTTPClient(hc)),
		http:  hc,
	}
}

// slackCode returns the Slack error code carried by err, or "".
func slackCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}

type rawAnswer struct {
	status int
	header http.Header
	body   map[string]any
}

func (a rawAnswer) errCode() string { s, _ := a.body["error"].(string); return s }

// postJSON calls method with a JSON body and a bearer token, as Slack's
// JSON-capable methods take it.
func (b *testBundle) postJSON(t *testing.T, method, token string, body any) rawAnswer {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL()+method, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return b.do(t, req)
}

func (b *testBundle) do(t *testing.T, req *http.Request) rawAnswer {
	t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := rawAnswer{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// postForm calls method with a form body.
func (b *testBundle) postForm(t *testing.T, method string, form url.Values) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL()+method, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(t, req)
}

func richText(text string) []slack.RichTextBlock {
	return []slack.RichTextBlock{*slack.NewRichTextBlock("", slack.NewRichTextSection(slack.NewRichTextSectionTextElement(text, nil)))}
}

// richTextJSON is the rich_text value Slack takes for plain text.
func richTextJSON(text string) []any {
	return []any{map[string]any{"type": "rich_text", "elements": []any{map[string]any{
		"type": "rich_text_section", "elements": []any{map[string]any{"type": "text", "text": text}},
	}}}}
}
