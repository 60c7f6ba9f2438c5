package console

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

type dashboardView struct {
	S        queries.Stats
	Intake   template.HTML
	Status   template.HTML
	Priority template.HTML
	Breaches template.HTML
	Times    template.HTML
	From, To string
}

func (c *Console) dashboard(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	q := r.URL.Query()
	from, to, err := queries.StatsRange(q.Get("from"), q.Get("to"), c.Now())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	st, err := c.Reader.Stats(r.Context(), s.P.TenantID, from, to)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := dashboardView{S: st, From: st.From, To: st.To}
	v.Intake = intakeChart(st.Days)
	var sb, pb []bar
	for _, x := range domain.Statuses {
		sb = append(sb, bar{string(x), st.ByStatus[x], "s-" + string(x)})
	}
	for _, x := range domain.Priorities {
		pb = append(pb, bar{string(x), st.OpenByPriority[x], "p-" + string(x)})
	}
	v.Status = barChart("Inquiries per status, now", sb)
	v.Priority = barChart("Open inquiries per priority, now", pb)
	v.Breaches = barChart("SLA breaches of inquiries received in the range", []bar{
		{"first response", st.SLA.BreachedFirstResponse, "p-high"}, {"resolution", st.SLA.BreachedResolution, "p-urgent"}})
	v.Times = timesChart(st.SLA)
	c.render(w, r, http.StatusOK, "dashboard", s, v)
}

type bar struct {
	Label string
	N     int
	Class string
}

// barChart draws horizontal bars as SVG. Every value is also written as text, so the chart reads
// without colour and with a screen reader (role="img" with a title and a description).
func barChart(title string, bars []bar) template.HTML {
	const w, row, label = 520, 28, 110
	maxN := 1
	for _, b := range bars {
		maxN = max(maxN, b.N)
	}
	var sb strings.Builder
	h := row*len(bars) + 8
	var desc []string
	for _, b := range bars {
		desc = append(desc, fmt.Sprintf("%s %d", b.Label, b.N))
	}
	fmt.Fprintf(&sb, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%[3]s-t %[3]s-d"><title id="%[3]s-t">%[4]s</title><desc id="%[3]s-d">%[5]s</desc>`,
		w, h, chartID(title), template.HTMLEscapeString(title), template.HTMLEscapeString(strings.Join(desc, ", ")))
	for i, b := range bars {
		y := 4 + i*row
		bw := int(math.Round(float64(w-label-50) * float64(b.N) / float64(maxN)))
		fmt.Fprintf(&sb, `<text x="0" y="%d" class="lbl">%s</text><rect x="%d" y="%d" width="%d" height="%d" class="bar %s"/><text x="%d" y="%d" class="val">%d</text>`,
			y+18, template.HTMLEscapeString(b.Label), label, y+4, max(bw, 1), row-10, b.Class, label+bw+6, y+18, b.N)
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // built from escaped labels and numbers only
}

// intakeChart draws received (bars) and closed (line) per day as SVG.
func intakeChart(days []queries.Day) template.HTML {
	const w, h, left, bottom, top = 720, 240, 36, 40, 12
	maxN := 1
	for _, d := range days {
		maxN = max(maxN, d.Received, d.Closed)
	}
	plotW, plotH := float64(w-left-8), float64(h-bottom-top)
	step := plotW / float64(max(len(days), 1))
	var sb strings.Builder
	total := 0
	for _, d := range days {
		total += d.Received
	}
	fmt.Fprintf(&sb, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="intake-t intake-d"><title id="intake-t">Intake per day</title><desc id="intake-d">%d received from %s to %s; bars are inquiries received, the line inquiries closed, per UTC day.</desc>`,
		w, h, total, days[0].Day, days[len(days)-1].Day)
	for _, g := range []int{0, maxN / 2, maxN} {
		y := float64(top) + plotH - plotH*float64(g)/float64(maxN)
		fmt.Fprintf(&sb, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="0" y="%.1f" class="axis">%d</text>`, left, w-8, y, y, y+4, g)
	}
	var line []string
	for i, d := range days {
		x := float64(left) + step*float64(i)
		bh := plotH * float64(d.Received) / float64(maxN)
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="bar intake"><title>%s: %d received, %d closed</title></rect>`,
			x+step*0.15, float64(top)+plotH-bh, step*0.7, bh, d.Day, d.Received, d.Closed)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x+step/2, float64(top)+plotH-plotH*float64(d.Closed)/float64(maxN)))
		if len(days) <= 14 || i%max(len(days)/8, 1) == 0 {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="axis">%s</text>`, x, h-bottom+16, d.Day[5:])
		}
	}
	fmt.Fprintf(&sb, `<polyline points="%s" class="closed"/>`, strings.Join(line, " "))
	fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="12" height="12" class="bar intake"/><text x="%d" y="%d" class="axis">received</text><line x1="%d" x2="%d" y1="%d" y2="%d" class="closed"/><text x="%d" y="%d" class="axis">closed</text>`,
		left, h-14, left+16, h-4, left+90, left+104, h-8, h-8, left+110, h-4)
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // built from dates and numbers only
}

func chartID(title string) string {
	return "c" + strconv.Itoa(len(title)) + strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, title))
}

// timesChart draws the median and 90th percentile business time to first response and to
// resolution as bars in hours, each labelled with its value and the number of inquiries measured.
func timesChart(sla queries.SLAStats) template.HTML {
	type row struct {
		label string
		d     queries.Durations
	}
	rows := []row{{"first response", sla.FirstResponse}, {"resolution", sla.Resolution}}
	maxS := 1.0
	for _, r := range rows {
		for _, v := range []*float64{r.d.MedianSeconds, r.d.P90Seconds} {
			if v != nil {
				maxS = max(maxS, *v)
			}
		}
	}
	const w, label = 520, 150
	var sb strings.Builder
	var desc []string
	for _, r := range rows {
		desc = append(desc, fmt.Sprintf("%s: median %s, p90 %s over %d inquiries", r.label, hours(r.d.MedianSeconds), hours(r.d.P90Seconds), r.d.Count))
	}
	fmt.Fprintf(&sb, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="times-t times-d"><title id="times-t">Business time to first response and to resolution</title><desc id="times-d">%s</desc>`,
		w, 4+len(rows)*56, template.HTMLEscapeString(strings.Join(desc, "; ")))
	for i, r := range rows {
		y := 4 + i*56
		fmt.Fprintf(&sb, `<text x="0" y="%d" class="lbl">%s (%d)</text>`, y+18, template.HTMLEscapeString(r.label), r.d.Count)
		for j, v := range []struct {
			name string
			s    *float64
			cls  string
		}{{"median", r.d.MedianSeconds, "p-normal"}, {"p90", r.d.P90Seconds, "p-high"}} {
			by := y + j*24
			bw := 0
			if v.s != nil {
				bw = int(math.Round(float64(w-label-110) * *v.s / maxS))
			}
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="16" class="bar %s"/><text x="%d" y="%d" class="val">%s %s</text>`,
				label, by+4, max(bw, 1), v.cls, label+bw+6, by+17, v.name, hours(v.s))
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // built from escaped labels and numbers only
}

// hours writes a duration in seconds as hours (or "—" without one).
func hours(s *float64) string {
	if s == nil {
		return "—"
	}
	h := *s / 3600
	if h < 10 {
		return strconv.FormatFloat(h, 'f', 1, 64) + " h"
	}
	return strconv.FormatFloat(h, 'f', 0, 64) + " h"
}
