package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/casebook/casebook/app"
)

// measureCommands runs triage, claim and resolve on a sample of the inquiries received.
func measureCommands(ctx context.Context, a *app.App, client *http.Client, base, token string, n, conc int) (result, error) {
	var ids []string
	cursor := ""
	for len(ids) < min(n, 300) {
		var page struct {
			Items []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		u := base + "/v1/inquiries?status=new&limit=100&consistent=true"
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		b, err := call(client, http.MethodGet, u, token, nil, "", http.StatusOK)
		for start := time.Now(); lagging(err) && time.Since(start) < time.Minute; {
			b, err = call(client, http.MethodGet, u, token, nil, "", http.StatusOK) // 503: not caught up yet
		}
		if err != nil {
			return result{}, err
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return result{}, err
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	ids = ids[:min(len(ids), 300)]
	steps := []struct{ path, body string }{
		{"/transitions", `{"to":"triaged","priority":"high"}`},
		{"/claim", ``},
		{"/transitions", `{"to":"resolved"}`},
	}
	return measureInquiries(ids, conc, func(id string) error {
		version := uint64(1)
		for _, st := range steps {
			h := map[string]string{"If-Match": fmt.Sprintf(`"%d"`, version)}
			b, err := call(client, http.MethodPost, base+"/v1/inquiries/"+id+st.path, token, h, st.body, http.StatusOK)
			if err != nil {
				return err
			}
			var res struct {
				Version uint64 `json:"version"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return err
			}
			version = res.Version
		}
		return nil
	}, len(steps)), nil
}
