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

	if r := tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"30s"}`); r.status != 422 || !strings.Contains(r.raw, "at least 1m0s from now") {
		t.Fatalf("follow-up in 30s: %d %s", r.status, r.raw)
	}
	for i := range domain.MaxFollowUpsPerHour {
		if r := tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"2h"}`); r.status != 201 {
			t.Fatalf("follow-up %d: %d %s", i, r.status, r.raw)
		}
	}
	limited(tb.do(t, "POST", base+"/follow-ups", tb.op, nil, `{"in":"2h"}`), "20 follow-ups per inquiry")
}
