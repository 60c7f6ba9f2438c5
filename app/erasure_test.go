package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
)

// serveStoppable is serve with an explicit stop: it returns once Serve returned and the app is closed.
func serveStoppable(t *testing.T, cfg app.Config) (*app.App, string, func()) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	off := ratelimit.Rate{Off: true}
	cfg.Public.ClientRate, cfg.Public.TenantRate = off, off
	a, err := app.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(stop)
	return a, "http://" + ln.Addr().String(), stop
}

// erasureSecrets are the unique strings an erased inquiry carried in each personal field.
var erasureSecrets = []string{"Quillon Vantablack", "quillon.v7731@example.org", "Subject-Marzipan-4410", "Message-Obsidian-9921",
	"Note-Periwinkle-5583", "FollowUp-Tangerine-1207", "Attachment-Cardamom-6620", "Filename-Bergamot-3317", "Customer-Saffron-2291",
	// The reasons an operator or admin typed, in erasureReasons' order.
	"Waiting-Reason-Lichen-3141", "Cancel-Reason-Sorrel-2718", "Archive-Reason-Umber-1618", "Unarchive-Reason-Garnet-1414",
	"Hold-Reason-Cobalt-1732", "Release-Reason-Russet-2236"}

// erasureReasons are the free-text reasons among erasureSecrets.
var erasureReasons = erasureSecrets[9:]

// upload posts one text file to an inquiry's attachments and returns its id.
func upload(t *testing.T, base, id, token, name string, content []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(content)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/inquiries/"+id+"/attachments", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Items []struct{ ID string }
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated || len(out.Items) != 1 {
		t.Fatalf("upload = %d %+v %v", res.StatusCode, out, err)
	}
	return out.Items[0].ID
}

// download fetches an attachment: its status and bytes.
func download(t *testing.T, base, id, token, attachment string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/inquiries/"+id+"/attachments/"+attachment, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// TestErasureLeavesNoPersonalBytes is the erasure contract end to end, over HTTP: a portal's
// inquiry whose requester name and email, subject, message, customer id (external_id), a note and
// a follow-up note carry unique strings is erased by an admin (afterwards the portal no longer
// finds it by that customer id); so is an attachment whose name and bytes carry them. Refused first: an operator's erasure (403), an erasure without If-Match (428),
// one under legal hold (409 legal_hold); each refusal is audited. After the erasure the API shows
// "[erased]", the attachment's download is 404 and the detail lists none, the timeline still lists every version with its actor and time, a replay of the query
// model reproduces the anonymized state, and no personal byte is left. The inquiry also went
// through every edge that takes a free-text reason (waiting, cancel, archive, unarchive, legal hold
// placed and released), each reason a secret too. While the server still runs, once the storage
// clean-up after the erasure is reported (instead of "10 s after the erasure answers": see the
// comment at the wait), no file of the SQLite data directory (database, -wal, -shm, lock) holds any
// secret, and on Postgres every table that held them was vacuumed; after the stop, again no file
// holds one, and on Postgres no text, json or bytea column of any table does.
func TestErasureLeavesNoPersonalBytes(t *testing.T) {
	t.Parallel()
	for _, be := range apptest.Backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			cfg := be.Config(t)
			a, base, stop := serveStoppable(t, cfg)
			ctx := t.Context()
			ten, _, adminTok, err := a.Tenancy.CreateTenant(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			_, opTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
			if err != nil {
				t.Fatal(err)
			}
			portal, portalTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Portal", domain.RoleIntegration, "")
			if err != nil {
				t.Fatal(err)
			}
			// A portal's submission: its customer id is the portal's name for the person.
			res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten.ID, Source: domain.SourcePortal, IdempotencyKey: "k1",
				Submitter: &portal, ExternalID: erasureSecrets[8],
				Requester: domain.Requester{Name: erasureSecrets[0], Email: erasureSecrets[1]}, Subject: erasureSecrets[2],
				// A long message spills into overflow pages, which an update frees rather than rewrites.
				Message: strings.Repeat("lorem ipsum ", 500) + erasureSecrets[3], Category: "billing"})
			if err != nil {
				t.Fatal(err)
			}
			id := string(res.InquiryID)
			path := base + "/v1/inquiries/" + id
			byCustomer := base + "/v1/portal/inquiries?external_id=" + erasureSecrets[8]
			if items, _ := call(t, "GET", byCustomer, portalTok, nil, "", 200)["items"].([]any); len(items) != 1 {
				t.Fatalf("the portal finds %d inquiries by its customer id before erasure, want 1", len(items))
			}
			call(t, "POST", path+"/notes", opTok, nil, `{"body":"`+erasureSecrets[4]+`"}`, 200)
			call(t, "POST", path+"/follow-ups", opTok, nil, fmt.Sprintf(`{"at":%q,"note":%q}`,
				time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339), erasureSecrets[5]), 201)
			fileBody := []byte(strings.Repeat("attachment text ", 200) + erasureSecrets[6])
			att := upload(t, base, id, opTok, erasureSecrets[7]+".txt", fileBody)
			if code, b := download(t, base, id, opTok, att); code != 200 || !bytes.Equal(b, fileBody) {
				t.Fatalf("download before erasure = %d %q", code, b)
			}
			// Every lifecycle edge that takes a reason, each with its own.
			current := func(tok string) map[string]string {
				cur := call(t, "GET", path+"?consistent=true", tok, nil, "", 200)
				return map[string]string{"If-Match": `"` + fmt.Sprint(cur["version"]) + `"`}
			}
			call(t, "POST", path+"/transitions", opTok, current(opTok), `{"to":"triaged","priority":"normal"}`, 200)
			call(t, "POST", path+"/transitions", opTok, current(opTok), `{"to":"in_progress"}`, 200)
			call(t, "POST", path+"/transitions", opTok, current(opTok), `{"to":"waiting","reason":"`+erasureReasons[0]+`"}`, 200)
			call(t, "POST", path+"/transitions", opTok, current(opTok), `{"to":"cancelled","reason":"`+erasureReasons[1]+`"}`, 200)
			call(t, "POST", path+"/archive", opTok, current(opTok), `{"reason":"`+erasureReasons[2]+`"}`, 200)
			call(t, "POST", path+"/unarchive", opTok, current(opTok), `{"reason":"`+erasureReasons[3]+`"}`, 200)
			if tl, _ := json.Marshal(call(t, "GET", path+"/timeline?consistent=true", opTok, nil, "", 200)); !bytes.Contains(tl, []byte(erasureReasons[0])) ||
				!bytes.Contains(tl, []byte(erasureReasons[3])) {
				t.Fatalf("the timeline before erasure shows no reason: %s", tl)
			}

			got := call(t, "GET", path+"?consistent=true", opTok, nil, "", 200)
			if got["subject"] != erasureSecrets[2] {
				t.Fatalf("before erasure subject = %v", got["subject"])
			}
			version := fmt.Sprint(got["version"])
			ifMatch := map[string]string{"If-Match": `"` + version + `"`}

			// Bypass attempts.
			call(t, "POST", path+"/erase", opTok, ifMatch, "", 403)
			call(t, "POST", path+"/erase", adminTok, nil, "", 428)
			call(t, "POST", path+"/hold", opTok, nil, `{"reason":"litigation"}`, 403)
			call(t, "POST", path+"/hold", adminTok, nil, `{"reason":"`+erasureReasons[4]+`"}`, 200)
			held := call(t, "GET", path+"?consistent=true", adminTok, nil, "", 200)
			if held["legal_hold"] != true {
				t.Fatalf("legal_hold = %v", held["legal_hold"])
			}
			heldMatch := map[string]string{"If-Match": `"` + fmt.Sprint(held["version"]) + `"`}
			if e := call(t, "POST", path+"/erase", adminTok, heldMatch, "", 409); fmt.Sprint(e["error"]) != fmt.Sprint(map[string]any{"code": "legal_hold", "message": "the inquiry is under legal hold", "request_id": e["error"].(map[string]any)["request_id"]}) {
				t.Fatalf("erase under hold = %v", e)
			}
			call(t, "DELETE", path+"/hold", adminTok, nil, `{"reason":"`+erasureReasons[5]+`"}`, 200)
			cur := call(t, "GET", path+"?consistent=true", adminTok, nil, "", 200)
			call(t, "POST", path+"/erase", adminTok, map[string]string{"If-Match": `"` + fmt.Sprint(cur["version"]) + `"`}, "", 200)

			// While the server runs. The requirement reads "no personal byte in any file 10 s after
			// the erasure answers"; instead of sleeping, the test waits for the event that makes it
			// true, the storage clean-up after the erasure (app.ErasureScrubs: every subscriber holding
			// personal data applied it, then SQLite's log was truncated or the Postgres tables
			// vacuumed), and fails if that takes more than a minute. Each file is read then.
			erasedAt, err := a.Store.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := a.WaitErasuresScrubbed(wctx, erasedAt); err != nil {
				t.Fatalf("no storage clean-up after the erasure: %v (%+v)", err, a.ErasureScrubs())
			}
			cancel()
			if be.Name == "postgres" {
				assertVacuumed(t, a, "qm_inquiries", "qm_timeline", "inquiry_keys", "inquiry_attachments", "portal_inquiries", "privacy_requesters")
			} else {
				assertNoFileHolds(t, cfg.DataDir, erasureSecrets)
			}
			call(t, "POST", path+"/notes", opTok, nil, `{"body":"after"}`, 409)

			after := call(t, "GET", path+"?consistent=true", adminTok, nil, "", 200)
			req, _ := after["requester"].(map[string]any)
			if after["erased"] != true || after["subject"] != domain.Erased || after["message"] != domain.Erased ||
				req["name"] != domain.Erased || req["email"] != domain.Erased {
				t.Fatalf("after erasure = %v", after)
			}
			if code, b := download(t, base, id, opTok, att); code != http.StatusNotFound || bytes.Contains(b, []byte(erasureSecrets[6])) {
				t.Fatalf("download after erasure = %d %q", code, b)
			}
			if atts, _ := after["attachments"].([]any); len(atts) != 0 {
				t.Fatalf("attachments after erasure = %v", atts)
			}
			if items, _ := call(t, "GET", byCustomer, portalTok, nil, "", 200)["items"].([]any); len(items) != 0 {
				t.Fatalf("the portal still finds the erased inquiry by its customer id: %v", items)
			}
			tl := call(t, "GET", path+"/timeline", adminTok, nil, "", 200)
			items, _ := tl["items"].([]any)
			wantTypes := []string{"InquiryReceived", "NoteAdded", "FollowUpScheduled", "InquiryTriaged", "InquiryStatusChanged", "InquiryStatusChanged",
				"InquiryStatusChanged", "InquiryArchived", "InquiryUnarchived", "LegalHoldPlaced", "LegalHoldReleased", "InquiryErased"}
			if len(items) != len(wantTypes) {
				t.Fatalf("timeline = %v", tl)
			}
			for i, it := range items {
				e := it.(map[string]any)
				if e["type"] != wantTypes[i] || fmt.Sprint(e["version"]) != fmt.Sprint(i+1) || e["actor"] == "" || e["occurred_at"] == "" {
					t.Fatalf("timeline entry %d = %v", i, e)
				}
			}
			if b, _ := json.Marshal(tl); !bytes.Contains(b, []byte(domain.Erased)) {
				t.Fatalf("the timeline after erasure erases nothing: %s", b)
			} else {
				for _, s := range erasureSecrets {
					if bytes.Contains(b, []byte(s)) {
						t.Errorf("the timeline after erasure shows %q", s)
					}
				}
			}
			audit := auditOutcomes(t, a, ten.ID, "erase")
			if !strings.Contains(audit, "refused:forbidden") || !strings.Contains(audit, "refused:legal_hold") || !strings.Contains(audit, "accepted:") {
				t.Fatalf("erase audit = %s", audit)
			}

			// A replay reproduces the anonymized state.
			if _, err := projections.Rebuild(ctx, a.Store, a.DB, querymodel.New(), projections.RebuildOptions{Now: time.Now}); err != nil {
				t.Fatal(err)
			}
			replayed, err := a.Reader.Get(ctx, ten.ID, domain.InquiryID(id))
			if err != nil {
				t.Fatal(err)
			}
			if replayed.Subject != domain.Erased || replayed.Requester.Email != domain.Erased || !replayed.Erased {
				t.Fatalf("replayed = %+v", replayed)
			}

			if be.Name == "postgres" {
				assertNoColumnHolds(t, a.DB, erasureSecrets, "")
				return
			}
			stop()
			assertNoFileHolds(t, cfg.DataDir, erasureSecrets)
		})
	}
}

// assertNoFileHolds fails when a file under dir (the database, its -wal and -shm, the lock,
// anything else Casebook keeps there) holds one of secrets, or when dir holds no file.
func assertNoFileHolds(t *testing.T, dir string, secrets []string) {
	t.Helper()
	checked := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no file in the data directory")
	}
}

// assertVacuumed fails unless every table named by bases (or a generation of one, base_g<N>) in
// a's Postgres schema was vacuumed (pg_stat_user_tables.vacuum_count).
func assertVacuumed(t *testing.T, a *app.App, bases ...string) {
	t.Helper()
	rows, err := a.DB.QueryContext(t.Context(), `SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	vacuumed := map[string]bool{}
	for rows.Next() {
		var n string
		var c int64
		if err := rows.Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		for _, b := range bases {
			if n == b || strings.HasPrefix(n, b+"_g") {
				vacuumed[b] = vacuumed[b] || c > 0
				if c == 0 {
					t.Errorf("table %s was not vacuumed after the erasure", n)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bases {
		if !vacuumed[b] {
			t.Errorf("no table %s vacuumed after the erasure (stats %+v)", b, a.ErasureScrubs())
		}
	}
}

func auditOutcomes(t *testing.T, a *app.App, tenant domain.TenantID, command string) string {
	t.Helper()
	rows, err := a.DB.QueryContext(t.Context(), a.DB.Rebind(`SELECT outcome, code FROM command_audit WHERE tenant_id = ? AND command = ?`), tenant, command)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o, c string
		if err := rows.Scan(&o, &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, o+":"+c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ",")
}

// TestInterruptedErasureListsNoAttachments: an erasure that crashes after destroying the data key
// and before deleting the attachment rows (the failure injected into its last shredder) leaves
// the rows, yet from then on, before any retry, the inquiry's detail lists no attachment (no
// name, size or digest) and the download is 404; a retry of the erasure deletes the rows. SQLite
// and Postgres.
func TestInterruptedErasureListsNoAttachments(t *testing.T) {
	t.Parallel()
	for _, be := range apptest.Backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			a, base, _ := serveStoppable(t, be.Config(t))
			ctx := t.Context()
			ten, admin, adminTok, err := a.Tenancy.CreateTenant(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			_, opTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
			if err != nil {
				t.Fatal(err)
			}
			id := apptest.Intake(t, a, ten.ID, "k1")
			path := base + "/v1/inquiries/" + string(id)
			fileBody := []byte("Interrupted-Attachment-Quince-5150")
			att := upload(t, base, string(id), opTok, "Interrupted-Name-Medlar-4242.txt", fileBody)
			before := call(t, "GET", path+"?consistent=true", adminTok, nil, "", 200)
			if atts, _ := before["attachments"].([]any); len(atts) != 1 {
				t.Fatalf("attachments before erasure = %v", before["attachments"])
			}

			crash := errors.New("injected crash after the key's destruction")
			interrupted := *a.Commands
			interrupted.Keys = commands.Shredders{a.Keys, commands.ShredFunc(func(context.Context, domain.TenantID, domain.InquiryID) error { return crash })}
			target := commands.Target{Tenant: ten.ID, InquiryID: id, Actor: admin}
			if _, err := interrupted.Erase(ctx, commands.Erase{Target: target}); !errors.Is(err, crash) {
				t.Fatalf("interrupted erasure: %v", err)
			}
			if n, err := a.Attachments.Stored(ctx, ten.ID, id); err != nil || n != 1 {
				t.Fatalf("rows after the interrupted erasure = %d %v, want 1 (not yet deleted)", n, err)
			}
			after := call(t, "GET", path+"?consistent=true", adminTok, nil, "", 200)
			if atts, ok := after["attachments"].([]any); !ok || len(atts) != 0 {
				t.Fatalf("attachments after the interrupted erasure = %v, want none", after["attachments"])
			}
			for _, s := range []string{"Medlar", att, `"size"`, `"sha256"`} {
				if b, _ := json.Marshal(after); bytes.Contains(b, []byte(s)) {
					t.Errorf("the detail after the interrupted erasure shows %q: %s", s, b)
				}
			}
			if code, b := download(t, base, string(id), opTok, att); code != http.StatusNotFound || bytes.Contains(b, fileBody) {
				t.Fatalf("download after the interrupted erasure = %d %q", code, b)
			}

			if _, err := a.Commands.Erase(ctx, commands.Erase{Target: target}); err != nil {
				t.Fatalf("retried erasure: %v", err)
			}
			if n, err := a.Attachments.Stored(ctx, ten.ID, id); err != nil || n != 0 {
				t.Fatalf("rows after the retried erasure = %d %v, want 0", n, err)
			}
		})
	}
}
