package console

import (
	"bufio"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// Attachments reads an inquiry's files (*commands.Attachments); every call is scoped to the
// signed-in principal's tenant.
type Attachments interface {
	List(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) ([]commands.Attachment, error)
	Open(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, id string) (commands.Attachment, io.ReadCloser, error)
}

// attachmentRow is one file on the inquiry page.
type attachmentRow struct {
	commands.Attachment
	Readable bool // false once erased: no link
	SizeText string
}

// attachmentRows lists id's files for the page; nil when there are none or they cannot be read
// (logged: the page still serves the inquiry).
func (c *Console) attachmentRows(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) []attachmentRow {
	if c.Attachments == nil {
		return nil
	}
	list, err := c.Attachments.List(ctx, tenant, id)
	if err != nil {
		c.Logger.WarnContext(ctx, "console attachments", "err", err)
		return nil
	}
	rows := make([]attachmentRow, 0, len(list))
	for _, at := range list {
		rows = append(rows, attachmentRow{Attachment: at, Readable: at.Name != domain.Erased, SizeText: sizeText(at.Size)})
	}
	return rows
}

// sizeText renders a byte count for people (binary units, one decimal).
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGT"[exp]) + "iB"
}

// attachment is GET /console/inquiries/{id}/attachments/{attachment_id}: the file as a download
// for a principal who may read the inquiry, from the session's tenant only (another tenant's, an
// unknown or an erased file is the not-found page). Served as the API serves it: attachment,
// its sniffed type, nosniff and a sandboxing CSP; streamed chunk by chunk.
func (c *Console) attachment(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	if c.Attachments == nil {
		c.renderError(w, r, s, http.StatusNotFound, "There is no such page.")
		return
	}
	v := mux.Vars(r)
	at, body, err := c.Attachments.Open(r.Context(), s.P.TenantID, domain.InquiryID(v["id"]), v["attachment_id"])
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	defer func() { _ = body.Close() }()
	br := bufio.NewReaderSize(body, 32<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		c.fail(w, r, s, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", at.ContentType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": at.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.FormatInt(at.Size, 10))
	if n, err := io.Copy(w, br); err != nil || n != at.Size { //nolint:gosec // a download of its sniffed type, nosniff and sandboxed
		panic(http.ErrAbortHandler) // short of Content-Length: the client sees a failed download
	}
}
