package httpapi_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/casebook/casebook/domain"
)

// TestInquiryLimits: the 61st note and the 21st follow-up scheduling within an hour answer 429
// rate_limited with a Retry-After within the hour; a follow-up due in less than a minute is 422
// naming the bound; a replayed idempotent note is not counted against the limit.
func TestInquiryLimits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "limits")
	base := "/v1/inquiries/" + id
	for i := range domain.MaxNotesPerHour {
		if r := tb.do(t, "POST", base+"/notes", tb.op, map[string]string{"Idempotency-Key": fmt.Sprint("n", i)}, fmt.Sprintf(`{"body":"note %d"}`, i)); r.status >= 300 {
			t.Fatalf("note %d: %d %s", i, r.status, r.raw)
		}
	}
	limited := func(r resp, what string) {
		t.Helper()
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != 429 || r.code() != "rate_limited" || err != nil || ra < 1 || ra > 3600 || !strings.Contains(r.raw, what) {
			t.Fatalf("%s: %d %s, Retry-After %q", what, r.status, r.raw, r.header.Get("Retry-After"))
		}
	}
	limited(tb.do(t, "POST", base+"/notes", tb.op, nil, `{"body":"one more"}`), "60 notes per inquiry")
	if r := tb.do(t, "POST", base+"/notes", tb.op, map[string]string{"Idempotency-Key": "n0"}, `{"body":"note 0"}`); r.status >= 300 {
		t.Fatalf("replayed note: %d %s", r.status, r.raw)
	}

	if r := tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"30s"}`); r.status != 422 || !strings.Contains(r.raw, "at least a minute from now") {
		t.Fatalf("follow-up in 30s: %d %s", r.status, r.raw)
	}
	for i := range domain.MaxFollowUpsPerHour {
		if r := tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"2h"}`); r.status != 201 {
			t.Fatalf("follow-up %d: %d %s", i, r.status, r.raw)
		}
	}
	limited(tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"2h"}`), "20 follow-ups per inquiry")
}

// TestTimelinePaging: the timeline route pages by version with limit and after, answers next
// while more follow, and refuses limits out of range, a malformed after and unknown parameters.
func TestTimelinePaging(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "paging")
	base := "/v1/inquiries/" + id + "/timeline"
	for i := range 5 {
		if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, nil, fmt.Sprintf(`{"body":"note %d"}`, i)); r.status >= 300 {
			t.Fatalf("note: %d %s", r.status, r.raw)
		}
	}
	first := tb.do(t, "GET", base+"?consistent=true&limit=4", tb.op, nil, "")
	if items, _ := first.body["items"].([]any); first.status != 200 || len(items) != 4 || first.body["next"] != float64(4) {
		t.Fatalf("first page: %d %s", first.status, first.raw)
	}
	last := tb.do(t, "GET", base+"?limit=4&after=4", tb.op, nil, "")
	items, _ := last.body["items"].([]any)
	if _, more := last.body["next"]; last.status != 200 || len(items) != 2 || more || items[0].(map[string]any)["version"] != float64(5) {
		t.Fatalf("last page: %d %s", last.status, last.raw)
	}
	if r := tb.do(t, "GET", base, tb.op, nil, ""); r.status != 200 || len(r.body["items"].([]any)) != 6 {
		t.Fatalf("default page: %d %s", r.status, r.raw)
	}
	for q, want := range map[string]int{"limit=0": 422, "limit=501": 422, "limit=x": 422, "after=-1": 422, "after=v4": 422, "page=2": 400} {
		if r := tb.do(t, "GET", base+"?"+q, tb.op, nil, ""); r.status != want {
			t.Errorf("%s: %d %s, want %d", q, r.status, r.raw, want)
		}
	}
}
