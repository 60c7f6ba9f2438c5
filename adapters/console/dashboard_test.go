package console

import (
	"strings"
	"testing"

	"github.com/casebook/casebook/queries"
)

// TestChartsCarryTheirNumbers: the SVG charts state every value as text (for readers without
// colour or sight) and escape their labels.
func TestChartsCarryTheirNumbers(t *testing.T) {
	t.Parallel()
	med, p90 := 5400.0, 43200.0
	svg := string(timesChart(queries.SLAStats{FirstResponse: queries.Durations{Count: 7, MedianSeconds: &med, P90Seconds: &p90}}))
	for _, want := range []string{"first response (7)", "median 1.5 h", "p90 12 h", "resolution (0)", "median —",
		"first response: median 1.5 h, p90 12 h over 7 inquiries"} {
		if !strings.Contains(svg, want) {
			t.Errorf("times chart lacks %q:\n%s", want, svg)
		}
	}
	bars := string(barChart("a <title>", []bar{{"x&y", 3, "c"}, {"z", 0, "c"}}))
	for _, want := range []string{"a &lt;title&gt;", "x&amp;y 3, z 0", `class="val">3<`} {
		if !strings.Contains(bars, want) {
			t.Errorf("bar chart lacks %q:\n%s", want, bars)
		}
	}
	intake := string(intakeChart([]queries.Day{{Day: "2026-11-01", Received: 4, Closed: 1}, {Day: "2026-11-02"}}))
	if !strings.Contains(intake, "2026-11-01: 4 received, 1 closed") || !strings.Contains(intake, "4 received from 2026-11-01 to 2026-11-02") {
		t.Errorf("intake chart:\n%s", intake)
	}
}
