package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// AttachmentStore is what the attachment routes need (*commands.Attachments).
type AttachmentStore interface {
	Add(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []commands.NewFile, lim commands.AttachmentLimits) ([]commands.Attachment, error)
	List(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) ([]commands.Attachment, error)
	Get(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, id string) (commands.Attachment, []byte, error)
	// AddIntake stores an intake's files once (a replay gets the stored ones); CheckQuota checks
	// the tenant's quota without storing.
	AddIntake(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []commands.NewFile, lim commands.AttachmentLimits) ([]commands.Attachment, error)
	CheckQuota(ctx context.Context, tenant domain.TenantID, bytes int64, lim commands.AttachmentLimits) error
}

// AllowedAttachmentTypes are the content types accepted, as sniffed from the bytes
// (http.DetectContentType, the WHATWG algorithm); the client's declared type and the name's
// extension are ignored. Anything else (HTML, scripts, executables, archives) is 415.
var AllowedAttachmentTypes = map[string]bool{
	"text/plain": true, "application/pdf": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
}

// attachmentRoutes: upload for operators and the submitting integration (registered before the
// operator routes, which refuse integrations), download for readers.
func (s *Server) attachmentRoutes(r *mux.Router) {
	r.Handle("/v1/inquiries/{id}/attachments", s.authenticateFor(domain.ActSubmit, http.HandlerFunc(s.addAttachments))).Methods(http.MethodPost)
}

func (s *Server) attachmentReadRoutes(a *mux.Router) {
	a.HandleFunc("/{id}/attachments/{attachment_id}", s.downloadAttachment).Methods(http.MethodGet)
}

func (s *Server) attachmentsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.Attachments == nil || s.Load == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return false
	}
	return true
}

// addAttachments is POST /v1/inquiries/{id}/attachments (multipart/form-data, one or more file
// parts). Every file is read and checked before anything is stored: a file over the size limit
// is 413, a type outside the allow-list 415, too many files or an empty one 422; then all are
// stored in one transaction or none. Operators and admins attach to any inquiry of their tenant;
// an integration only to an inquiry it submitted (another is 404).
func (s *Server) addAttachments(w http.ResponseWriter, r *http.Request) {
	if !s.attachmentsEnabled(w, r) {
		return
	}
	p := principal(r)
	id := domain.InquiryID(mux.Vars(r)["id"])
	lim := s.AttachmentLimits.WithDefaults()
	files, err := s.readFiles(w, r, lim)
	if err == nil {
		err = s.mayAttach(r.Context(), p, id)
	}
	var out []commands.Attachment
	if err == nil {
		out, err = s.Attachments.Add(r.Context(), p.TenantID, id, p.ID, files, lim)
	}
	if errors.Is(err, commands.ErrAttachmentQuota) {
		err = &apiError{http.StatusRequestEntityTooLarge, "attachment_quota", "the tenant's attachment storage is full"}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"items": out})
}

// mayAttach: the inquiry exists in p's tenant, p works inquiries or submitted this one, and it
// takes writes (an archived one refuses them from every path, an erased one too).
func (s *Server) mayAttach(ctx context.Context, p domain.Principal, id domain.InquiryID) error {
	q, err := s.Load(ctx, p.TenantID, id)
	if err != nil {
		return err
	}
	if domain.Authorize(p, domain.ActNote) != nil && (q.SubmittedBy == "" || q.SubmittedBy != p.ID) {
		return domain.ErrNotFound
	}
	switch {
	case q.Erased:
		return domain.ErrErased
	case q.Archived:
		return domain.ErrArchived
	}
	return nil
}

// readFiles reads every file part within the limits, sniffing and naming each; at least one.
func (s *Server) readFiles(w http.ResponseWriter, r *http.Request, lim commands.AttachmentLimits) ([]commands.NewFile, error) {
	files, err := s.readParts(w, r, lim, nil, 0)
	if err == nil && len(files) == 0 {
		return nil, domain.Invalid("file", "is required")
	}
	return files, err
}

// isMultipart reports whether r's body is multipart/form-data.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// readParts reads a multipart/form-data body: file parts named "file" within the limits (sniffed
// and named; none is fine), and each part whose name is a key of fields, once, into fields[name]
// (at most fieldLimit bytes, else 413; a part of another name, or one given twice, is 400). Every
// file is checked as it is read, so any refusal comes before the caller stores anything.
func (s *Server) readParts(w http.ResponseWriter, r *http.Request, lim commands.AttachmentLimits, fields map[string]*[]byte, fieldLimit int64) ([]commands.NewFile, error) {
	if !isMultipart(r) {
		return nil, &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "body must be multipart/form-data"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, lim.MaxFileBytes*int64(lim.MaxFiles)+fieldLimit+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("malformed multipart body")
	}
	tooLarge := &apiError{http.StatusRequestEntityTooLarge, "file_too_large", "a file exceeds " + strconv.FormatInt(lim.MaxFileBytes, 10) + " bytes"}
	var files []commands.NewFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		if err != nil {
			return nil, badRequest("malformed multipart body")
		}
		if dst, ok := fields[part.FormName()]; ok {
			if *dst != nil {
				return nil, badRequest("part " + strconv.Quote(part.FormName()) + " given more than once")
			}
			b, err := io.ReadAll(io.LimitReader(part, fieldLimit+1))
			if errors.As(err, &mbe) || int64(len(b)) > fieldLimit {
				return nil, &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "part " + strconv.Quote(part.FormName()) + " exceeds " + strconv.FormatInt(fieldLimit, 10) + " bytes"}
			}
			if err != nil {
				return nil, badRequest("malformed multipart body")
			}
			*dst = append([]byte{}, b...)
			continue
		}
		if part.FormName() != "file" || part.FileName() == "" {
			if fields != nil {
				return nil, badRequest("only the parts " + partNames(fields) + " and file parts named \"file\" are accepted")
			}
			return nil, badRequest("only file parts named \"file\" are accepted")
		}
		if len(files) == lim.MaxFiles {
			return nil, domain.Invalid("file", "at most %d files", lim.MaxFiles)
		}
		data, err := io.ReadAll(io.LimitReader(part, lim.MaxFileBytes+1))
		if errors.As(err, &mbe) || int64(len(data)) > lim.MaxFileBytes {
			return nil, tooLarge
		}
		if err != nil {
			return nil, badRequest("malformed multipart body")
		}
		if len(data) == 0 {
			return nil, domain.Invalid("file", "is empty")
		}
		ct := http.DetectContentType(data)
		base, _, _ := strings.Cut(ct, ";")
		if !AllowedAttachmentTypes[base] {
			return nil, &apiError{http.StatusUnsupportedMediaType, "attachment_type", "files of this type are not accepted (plain text, PDF, PNG, JPEG, GIF, WebP)"}
		}
		files = append(files, commands.NewFile{Name: commands.AttachmentName(part.FileName()), ContentType: ct, Data: data})
	}
	return files, nil
}

func partNames(fields map[string]*[]byte) string {
	var names []string
	for n := range fields {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// downloadAttachment is GET /v1/inquiries/{id}/attachments/{attachment_id}: the bytes as a
// download (Content-Disposition: attachment), of the sniffed type, never sniffed again by the
// browser (nosniff) and sandboxed (CSP) should a browser render it anyway.
func (s *Server) downloadAttachment(w http.ResponseWriter, r *http.Request) {
	if !s.attachmentsEnabled(w, r) {
		return
	}
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	v := mux.Vars(r)
	at, data, err := s.Attachments.Get(r.Context(), p.TenantID, domain.InquiryID(v["id"]), v["attachment_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", at.ContentType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": at.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data) //nolint:gosec // served as a download of its sniffed type, nosniff and sandboxed (TestAttachmentHTMLCannotRunInBrowser)
}

// withAttachments adds "attachments" to an inquiry detail.
// has says whether the inquiry has any (queries.Detail); the list is read only when it has.
func (s *Server) withAttachments(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, has bool, detail any) any {
	if s.Attachments == nil {
		return detail
	}
	if !has {
		return addField(detail, "attachments", []commands.Attachment{})
	}
	list, err := s.Attachments.List(ctx, tenant, id)
	if err != nil {
		s.logger().WarnContext(ctx, "attachments unavailable", "err", err)
		return detail
	}
	return addField(detail, "attachments", list)
}

// addField appends "name": value to a JSON object detail.
func addField(detail any, name string, value any) any {
	d, err := json.Marshal(detail)
	if err != nil || len(d) < 2 || d[len(d)-1] != '}' {
		return detail
	}
	vb, err := json.Marshal(value)
	if err != nil {
		return detail
	}
	sep := ","
	if len(d) == 2 {
		sep = ""
	}
	return json.RawMessage(string(d[:len(d)-1]) + sep + strconv.Quote(name) + ":" + string(vb) + "}")
}
