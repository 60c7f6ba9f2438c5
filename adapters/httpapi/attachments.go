package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
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
	// Stage streams one file into sealed storage (nothing is an attachment until Commit);
	// Discard drops staged files that were not committed.
	Stage(ctx context.Context, tenant domain.TenantID, name, contentType string, r io.Reader, maxBytes int64) (commands.StagedFile, error)
	Discard(ctx context.Context, files ...commands.StagedFile)
	Commit(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []commands.StagedFile, lim commands.AttachmentLimits) ([]commands.Attachment, error)
	// CommitIntake stores an intake's files once (a replay gets the stored ones); CheckQuota
	// checks the tenant's quota without storing.
	CommitIntake(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []commands.StagedFile, lim commands.AttachmentLimits) ([]commands.Attachment, error)
	CheckQuota(ctx context.Context, tenant domain.TenantID, bytes int64, lim commands.AttachmentLimits) error
	List(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) ([]commands.Attachment, error)
	Open(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, id string) (commands.Attachment, io.ReadCloser, error)
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
// parts). Each file streams into sealed storage as it is checked (readParts); a file over the size
// limit is 413, a type outside the allow-list or a dangerous name 415, too many files or an empty
// one 422, the upload limits 429; then all are committed in one transaction or none, and staged
// files not committed are deleted. Operators and admins attach to any inquiry of their tenant; an
// integration only to an inquiry it submitted (another is 404).
func (s *Server) addAttachments(w http.ResponseWriter, r *http.Request) {
	if !s.attachmentsEnabled(w, r) {
		return
	}
	p := principal(r)
	id := domain.InquiryID(mux.Vars(r)["id"])
	lim := s.AttachmentLimits.WithDefaults()
	err := s.mayAttach(r.Context(), p, id)
	var files []commands.StagedFile
	if err == nil {
		files, err = s.readFiles(w, r, p, lim)
	}
	var out []commands.Attachment
	if err == nil {
		out, err = s.Attachments.Commit(r.Context(), p.TenantID, id, p.ID, files, lim)
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

// readFiles stages every file part within the limits, sniffing and naming each; at least one.
func (s *Server) readFiles(w http.ResponseWriter, r *http.Request, p domain.Principal, lim commands.AttachmentLimits) ([]commands.StagedFile, error) {
	files, err := s.readParts(w, r, p, lim, nil, 0)
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

// readParts reads a multipart/form-data body as a stream, admitted by the upload limits
// (Server.Uploads: a concurrency slot for p and its tenant, their byte budgets taken as the body
// is read; 429 with Retry-After). File parts named "file" are checked as they stream in (count,
// emptiness, sniffed type and name on the first 512 bytes, size as it grows) and staged into
// sealed chunks, one chunk in memory at a time; each part whose name is a key of fields is read,
// once, into fields[name] (at most fieldLimit bytes, else 413; a part of another name, or one given
// twice, is 400). On any error every file staged so far is discarded, so the caller records
// nothing; on success the caller commits the files (a commit discards what it does not keep).
func (s *Server) readParts(w http.ResponseWriter, r *http.Request, p domain.Principal, lim commands.AttachmentLimits, fields map[string]*[]byte, fieldLimit int64) (files []commands.StagedFile, err error) {
	if !isMultipart(r) {
		return nil, &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "body must be multipart/form-data"}
	}
	release, err := s.uploads.admit(w, r, p)
	if err != nil {
		return nil, err
	}
	defer release()
	defer func() {
		if err != nil {
			s.Attachments.Discard(context.WithoutCancel(r.Context()), files...)
			files = nil
		}
	}()
	r.Body = s.uploads.meter(w, r, p, http.MaxBytesReader(w, r.Body, lim.MaxFileBytes*int64(lim.MaxFiles)+fieldLimit+1<<20))
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("malformed multipart body")
	}
	tooLarge := &apiError{http.StatusRequestEntityTooLarge, "file_too_large", "a file exceeds " + strconv.FormatInt(lim.MaxFileBytes, 10) + " bytes"}
	// bodyError turns a failed read of the body into its answer.
	bodyError := func(err error) error {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge
		case errors.Is(err, errUploadBudget):
			return budgetError()
		}
		return badRequest("malformed multipart body")
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return files, bodyError(err)
		}
		if dst, ok := fields[part.FormName()]; ok {
			if *dst != nil {
				return files, badRequest("part " + strconv.Quote(part.FormName()) + " given more than once")
			}
			b, err := io.ReadAll(io.LimitReader(part, fieldLimit+1))
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) || int64(len(b)) > fieldLimit {
				return files, &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "part " + strconv.Quote(part.FormName()) + " exceeds " + strconv.FormatInt(fieldLimit, 10) + " bytes"}
			}
			if err != nil {
				return files, bodyError(err)
			}
			*dst = append([]byte{}, b...)
			continue
		}
		if part.FormName() != "file" || part.FileName() == "" {
			if fields != nil {
				return files, badRequest("only the parts " + partNames(fields) + " and file parts named \"file\" are accepted")
			}
			return files, badRequest("only file parts named \"file\" are accepted")
		}
		if len(files) == lim.MaxFiles {
			return files, domain.Invalid("file", "at most %d files", lim.MaxFiles)
		}
		f, err := s.stagePart(r.Context(), p, part, lim)
		if err != nil {
			var rerr *partReadError
			if errors.As(err, &rerr) {
				err = bodyError(rerr.err)
			} else if errors.Is(err, commands.ErrFileTooLarge) {
				err = tooLarge
			}
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// partReadError marks a failure to read the request's body (rather than to store).
type partReadError struct{ err error }

func (e *partReadError) Error() string { return "reading the upload: " + e.err.Error() }
func (e *partReadError) Unwrap() error { return e.err }

type partReader struct{ r io.Reader }

func (p partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &partReadError{err}
	}
	return n, err
}

// stagePart sniffs a file part's first 512 bytes (http.DetectContentType, the WHATWG algorithm;
// the declared type is ignored), refuses a type outside AllowedAttachmentTypes or a name that
// AttachmentFileName refuses (415), and streams the part into sealed storage within MaxFileBytes.
func (s *Server) stagePart(ctx context.Context, p domain.Principal, part *multipart.Part, lim commands.AttachmentLimits) (commands.StagedFile, error) {
	in := partReader{part}
	head := make([]byte, 512)
	n, err := io.ReadFull(in, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return commands.StagedFile{}, err
	}
	if n == 0 {
		return commands.StagedFile{}, domain.Invalid("file", "is empty")
	}
	head = head[:n]
	ct := http.DetectContentType(head)
	base, _, _ := strings.Cut(ct, ";")
	if !AllowedAttachmentTypes[base] {
		return commands.StagedFile{}, &apiError{http.StatusUnsupportedMediaType, "attachment_type", "files of this type are not accepted (plain text, PDF, PNG, JPEG, GIF, WebP)"}
	}
	name, err := AttachmentFileName(part.FileName(), ct)
	if err != nil {
		return commands.StagedFile{}, err
	}
	return s.Attachments.Stage(ctx, p.TenantID, name, ct, io.MultiReader(bytes.NewReader(head), in), lim.MaxFileBytes)
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
	at, body, err := s.Attachments.Open(r.Context(), p.TenantID, domain.InquiryID(v["id"]), v["attachment_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = body.Close() }()
	serveAttachment(w, r, at, body, s.writeError)
}

// serveAttachment streams an attachment as a download (Content-Disposition: attachment), of its
// sniffed type, never sniffed again by the browser (nosniff) and sandboxed (CSP) should a browser
// render it anyway. The first chunk is opened before the headers, so a blob that cannot be read
// is an error answer; a later chunk that fails aborts the response short of its Content-Length.
func serveAttachment(w http.ResponseWriter, r *http.Request, at commands.Attachment, body io.Reader, fail func(http.ResponseWriter, *http.Request, error)) {
	br := bufio.NewReaderSize(body, 32<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", at.ContentType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": at.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.FormatInt(at.Size, 10))
	if n, err := io.Copy(w, br); err != nil || n != at.Size { //nolint:gosec // served as a download of its sniffed type, nosniff and sandboxed (TestAttachmentHTMLCannotRunInBrowser)
		panic(http.ErrAbortHandler)
	}
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
