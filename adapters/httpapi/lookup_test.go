package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
)

// TestListByReceiptSubjectAndUnknownParams: ?receipt= finds exactly one inquiry of the caller's
// tenant (another tenant's receipt finds nothing), ?subject= matches case-insensitively, and an
// unknown or repeated parameter answers 400 instead of being ignored.
func TestListByReceiptSubjectAndUnknownParams(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var receipts []string
	for i := range 3 {
		r, _ := tb.submit(t, fmt.Sprint("k", i))
		receipts = append(receipts, r)
	}
	r := tb.do(t, "GET", "/v1/inquiries?receipt="+receipts[1], tb.viewer, nil, "")
	items, _ := r.body["items"].([]any)
	if r.status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["receipt"] != receipts[1] {
		t.Fatalf("by receipt: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?receipt="+receipts[1], tb.other, nil, ""); r.status != http.StatusOK || len(r.body["items"].([]any)) != 0 {
		t.Fatalf("another tenant's receipt: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?subject=INVOICE%20w", tb.viewer, nil, ""); len(r.body["items"].([]any)) != 3 {
		t.Fatalf("subject search: %s", r.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?subject=%25", tb.viewer, nil, ""); len(r.body["items"].([]any)) != 0 {
		t.Fatalf("a %% in the subject search is a wildcard: %s", r.raw)
	}
	for _, q := range []string{"stauts=new", "status=new&status=triaged", "receipt=a&foo=b"} {
		if r := tb.do(t, "GET", "/v1/inquiries?"+q, tb.viewer, nil, ""); r.status != http.StatusBadRequest || r.code() != "bad_request" {
			t.Errorf("?%s: %d %s, want 400", q, r.status, r.raw)
		}
	}
}

// TestStats: /v1/stats counts the caller's tenant's intake per UTC day and its inquiries per
// status and open ones per priority; a bad range is 422, an unknown parameter 400.
func TestStats(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tb := setupWith(t, func(c *app.Config) { c.Now = func() time.Time { return now } })
	_, id := tb.submit(t, "k0")
	tb.submit(t, "k1")
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/claim", tb.op, nil, ""); r.status != 200 {
		t.Fatal(r.raw)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.op, map[string]string{"If-Match": `"3"`}, `{"to":"resolved"}`); r.status != 200 {
		t.Fatal(r.raw)
	}
	today, yesterday := "2026-11-30", "2026-11-29"
	r := tb.do(t, "GET", "/v1/stats?consistent=true&from="+yesterday+"&to="+today, tb.viewer, nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("stats: %d %s", r.status, r.raw)
	}
	days := r.body["days"].([]any)
	last := days[1].(map[string]any)
	if len(days) != 2 || last["day"] != today || last["received"] != 2.0 || last["closed"] != 1.0 || days[0].(map[string]any)["received"] != 0.0 {
		t.Fatalf("days: %v", days)
	}
	bs := r.body["by_status"].(map[string]any)
	if bs["new"] != 1.0 || bs["resolved"] != 1.0 || bs["cancelled"] != 0.0 {
		t.Fatalf("by_status: %v", bs)
	}
	if bp := r.body["open_by_priority"].(map[string]any); bp["normal"] != 1.0 {
		t.Fatalf("open_by_priority: %v", bp)
	}
	if r := tb.do(t, "GET", "/v1/stats?consistent=true", tb.viewer, nil, ""); r.body["from"] != "2026-11-01" || r.body["received"] != 2.0 {
		t.Fatalf("default range: %s", r.raw)
	}
	if r := tb.do(t, "GET", "/v1/stats?consistent=true", tb.other, nil, ""); r.body["received"] != 0.0 {
		t.Fatalf("another tenant's stats: %s", r.raw)
	}
	for q, want := range map[string]int{"from=2026-13-01": 422, "from=" + today + "&to=" + yesterday: 422,
		"from=2020-01-01&to=2026-01-01": 422, "day=1": 400} {
		if r := tb.do(t, "GET", "/v1/stats?"+q, tb.viewer, nil, ""); r.status != want {
			t.Errorf("?%s: %d, want %d", q, r.status, want)
		}
	}
	if r := tb.do(t, "GET", "/v1/stats", "", nil, ""); r.status != http.StatusUnauthorized {
		t.Errorf("stats without a token: %d", r.status)
	}
}
