package goclient_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	ht "github.com/ogen-go/ogen/http"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/ops/goclient/casebookapi"
)

// token is a SecuritySource with one bearer token.
type token string

func (t token) Bearer(context.Context, casebookapi.OperationName) (casebookapi.Bearer, error) {
	return casebookapi.Bearer{Token: string(t)}, nil
}

// serve starts Casebook on the embedded SQLite default, in this process, on a loopback port.
func serve(t *testing.T) (*app.App, string) {
	t.Helper()
	off := ratelimit.Rate{Off: true}
	cfg := app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Logger: slog.New(slog.DiscardHandler)}
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return a, "http://" + ln.Addr().String()
}

func client(t *testing.T, base, tok string) *casebookapi.Client {
	t.Helper()
	c, err := casebookapi.NewClient(base, token(tok))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// want asserts that res is of type T and returns it.
func want[T any](t *testing.T, step string, res any, err error) T {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	v, ok := res.(T)
	if !ok {
		t.Fatalf("%s: answered %T %+v", step, res, res)
	}
	return v
}

// TestGeneratedClientWalkthrough runs the README walk-through through the client that ogen
// generated from openapi.json (casebookapi), against a real server: a tenant and its principals (as
// the CLI makes them), a public intake, the list, triage, claim, a note and resolve with If-Match
// versions, the timeline, then a portal's intake and its requester-facing reads, a portal's intake
// with an attachment (multipart) downloaded by the operator, and the portal's token refused on an
// operator route. Every answer is decoded by the generated code, so a schema that
// does not match what the server sends fails here.
func TestGeneratedClientWalkthrough(t *testing.T) {
	t.Parallel()
	a, base := serve(t)
	ctx := t.Context()

	// 1. A tenant, an operator and a portal's integration principal.
	if _, _, _, err := a.Tenancy.CreateTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, opTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	_, portalTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Customer portal", domain.RoleIntegration, "")
	if err != nil {
		t.Fatal(err)
	}
	anon, op, portal := client(t, base, ""), client(t, base, opTok), client(t, base, portalTok)

	// 2. A public intake answers an opaque receipt.
	res, err := anon.PostPublicByTenantSlugInquiries(ctx, &casebookapi.PublicInquiry{
		Name: casebookapi.NewOptString("Ada Lovelace"), Email: "ada@example.com", Subject: "Invoice is wrong",
		Message: "Invoice 42 charges me twice.", Category: casebookapi.NewOptString("billing"),
	}, casebookapi.PostPublicByTenantSlugInquiriesParams{TenantSlug: "acme", IdempotencyKey: casebookapi.NewOptString("form-0001")})
	acc := want[*casebookapi.PostPublicByTenantSlugInquiriesAccepted](t, "public intake", res, err)
	if acc.Receipt.Value == "" || acc.Status.Value != "received" {
		t.Fatalf("public intake = %+v", acc)
	}

	// 3. The list, consistent with every write so far.
	lres, err := op.GetInquiries(ctx, casebookapi.GetInquiriesParams{Status: casebookapi.NewOptGetInquiriesStatus(casebookapi.GetInquiriesStatusNew),
		Consistent: casebookapi.NewOptBool(true)})
	list := want[*casebookapi.GetInquiriesOK](t, "list", lres, err)
	if len(list.Items) != 1 || list.Items[0].Receipt.Value != acc.Receipt.Value {
		t.Fatalf("list = %+v", list)
	}
	id := list.Items[0].ID.Value
	dres, err := op.GetInquiriesById(ctx, casebookapi.GetInquiriesByIdParams{ID: id})
	detail := want[*casebookapi.InquiryHeaders](t, "detail", dres, err)
	if detail.ETag.Value != `"1"` || detail.Response.Subject.Value != "Invoice is wrong" || detail.Response.Requester.Value.Email.Value != "ada@example.com" {
		t.Fatalf("detail = %+v", detail)
	}

	// 4. Triage, claim, a note, resolve: each write names the version it applies to.
	tres, err := op.PostInquiriesByIdTransitions(ctx, &casebookapi.PostInquiriesByIdTransitionsReq{To: "triaged", Priority: casebookapi.NewOptString("high")},
		casebookapi.PostInquiriesByIdTransitionsParams{ID: id, IfMatch: `"1"`})
	if w := want[*casebookapi.WriteResultHeaders](t, "triage", tres, err); w.Response.Version.Value != 2 {
		t.Fatalf("triage = %+v", w)
	}
	stale, err := op.PostInquiriesByIdClaim(ctx, casebookapi.PostInquiriesByIdClaimParams{ID: id, IfMatch: casebookapi.NewOptString(`"1"`)})
	want[*casebookapi.PostInquiriesByIdClaimPreconditionFailed](t, "stale claim", stale, err)
	cres, err := op.PostInquiriesByIdClaim(ctx, casebookapi.PostInquiriesByIdClaimParams{ID: id, IfMatch: casebookapi.NewOptString(`"2"`)})
	claimed := want[*casebookapi.WriteResultHeaders](t, "claim", cres, err)
	nres, err := op.PostInquiriesByIdNotes(ctx, &casebookapi.PostInquiriesByIdNotesReq{Body: "Refund issued."},
		casebookapi.PostInquiriesByIdNotesParams{ID: id, IfMatch: claimed.ETag})
	noted := want[*casebookapi.WriteResultHeaders](t, "note", nres, err)
	rres, err := op.PostInquiriesByIdTransitions(ctx, &casebookapi.PostInquiriesByIdTransitionsReq{To: "resolved"},
		casebookapi.PostInquiriesByIdTransitionsParams{ID: id, IfMatch: noted.ETag.Value})
	resolved := want[*casebookapi.WriteResultHeaders](t, "resolve", rres, err)

	// 5. Read your writes, and the timeline.
	dres, err = op.GetInquiriesById(ctx, casebookapi.GetInquiriesByIdParams{ID: id, MinPosition: resolved.Response.Position})
	detail = want[*casebookapi.InquiryHeaders](t, "detail after resolve", dres, err)
	if detail.Response.Status.Value != "resolved" || detail.Response.Owner.Value == "" || detail.Response.Priority.Value != "high" {
		t.Fatalf("detail after resolve = %+v", detail.Response)
	}
	tlres, err := op.GetInquiriesByIdTimeline(ctx, casebookapi.GetInquiriesByIdTimelineParams{ID: id})
	tl := want[*casebookapi.GetInquiriesByIdTimelineOK](t, "timeline", tlres, err)
	var types []string
	for _, e := range tl.Items {
		types = append(types, e.Type)
	}
	if len(types) < 5 || types[0] != "InquiryReceived" || tl.Items[len(tl.Items)-1].Version != resolved.Response.Version.Value {
		t.Fatalf("timeline = %v", types)
	}

	// 7. A portal submits for its signed-in customer and reads back what the customer may see.
	pin := &casebookapi.PortalInquiry{Name: casebookapi.NewOptString("Grace Hopper"), Email: "grace@example.com",
		ExternalID: casebookapi.NewOptString("cust-7"), Subject: "Cannot log in", Message: "The reset mail never arrives.",
		Category: casebookapi.NewOptString("account")}
	pres, err := portal.PostInquiries(ctx, pin, casebookapi.PostInquiriesParams{IdempotencyKey: "portal-0001"})
	intake := want[*casebookapi.IntakeResult](t, "portal intake", pres, err)
	again, err := portal.PostInquiries(ctx, pin, casebookapi.PostInquiriesParams{IdempotencyKey: "portal-0001"})
	if replay := want[*casebookapi.IntakeResult](t, "portal intake replay", again, err); replay.ID != intake.ID || replay.Receipt != intake.Receipt {
		t.Fatalf("replay = %+v, first = %+v", replay, intake)
	}
	vres, err := portal.GetPortalInquiriesByReceipt(ctx, casebookapi.GetPortalInquiriesByReceiptParams{Receipt: intake.Receipt})
	view := want[*casebookapi.RequesterView](t, "portal read", vres, err)
	if view.Status != casebookapi.RequesterViewStatusOpen || view.Subject.Value != "Cannot log in" || len(view.Messages) != 1 {
		t.Fatalf("portal view = %+v", view)
	}
	plres, err := portal.GetPortalInquiries(ctx, casebookapi.GetPortalInquiriesParams{ExternalID: "cust-7"})
	if pl := want[*casebookapi.GetPortalInquiriesOK](t, "portal list", plres, err); len(pl.Items) != 1 || pl.Items[0].Receipt != intake.Receipt {
		t.Fatalf("portal list = %+v", pl)
	}
	// 8. A portal intake with an attachment (multipart), downloaded by the operator.
	note := "Screenshot of the reset page: nothing arrives."
	mres, err := portal.PostInquiries(ctx, &casebookapi.PostInquiriesReqMultipartFormData{
		Inquiry: casebookapi.PortalInquiry{Name: casebookapi.NewOptString("Grace Hopper"), Email: "grace@example.com",
			ExternalID: casebookapi.NewOptString("cust-7"), Subject: "Still cannot log in", Message: "See the attached notes.",
			Category: casebookapi.NewOptString("account")},
		File: []ht.MultipartFile{{Name: "notes.txt", File: strings.NewReader(note), Size: int64(len(note))}},
	}, casebookapi.PostInquiriesParams{IdempotencyKey: "portal-0002"})
	withFile := want[*casebookapi.IntakeResult](t, "portal intake with an attachment", mres, err)
	if len(withFile.Attachments) != 1 || withFile.Attachments[0].Name != "notes.txt" || withFile.Attachments[0].Size != len(note) {
		t.Fatalf("portal intake with an attachment = %+v", withFile)
	}
	ares, err := op.GetInquiriesByIdAttachmentsByAttachmentId(ctx, casebookapi.GetInquiriesByIdAttachmentsByAttachmentIdParams{
		ID: withFile.ID, AttachmentID: withFile.Attachments[0].ID})
	file := want[*casebookapi.GetInquiriesByIdAttachmentsByAttachmentIdOKTextPlain](t, "download", ares, err)
	if b, err := io.ReadAll(file.Data); err != nil || string(b) != note {
		t.Fatalf("download = %q %v", b, err)
	}

	sres, err := portal.GetPortalInquiriesByReceipt(ctx, casebookapi.GetPortalInquiriesByReceiptParams{Receipt: withFile.Receipt})
	if sent := want[*casebookapi.RequesterView](t, "portal read with an attachment", sres, err); len(sent.Attachments) != 1 || sent.Attachments[0].Name != "notes.txt" {
		t.Fatalf("portal view = %+v", sent)
	}

	other, err := portal.GetPortalInquiriesByReceipt(ctx, casebookapi.GetPortalInquiriesByReceiptParams{Receipt: acc.Receipt.Value})
	want[*casebookapi.GetPortalInquiriesByReceiptNotFound](t, "portal reading the public form's inquiry", other, err)
	forbidden, err := portal.GetInquiries(ctx, casebookapi.GetInquiriesParams{})
	want[*casebookapi.GetInquiriesForbidden](t, "portal token on an operator route", forbidden, err)
}
