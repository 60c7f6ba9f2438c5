package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
)

// attachmentFlags adds serve's attachment and upload limits, each with a CASEBOOK_* default; the returned
// function sets them on the configuration after parsing.
func attachmentFlags(fs *flag.FlagSet) func(*app.Config) error {
	d := commands.AttachmentLimits{}.WithDefaults()
	perFile := fs.String("attachment-max-bytes", envOr("CASEBOOK_ATTACHMENT_MAX_BYTES", strconv.FormatInt(d.MaxFileBytes, 10)),
		"largest attachment in bytes; larger is 413 (CASEBOOK_ATTACHMENT_MAX_BYTES)")
	files := fs.String("attachment-max-files", envOr("CASEBOOK_ATTACHMENT_MAX_FILES", strconv.Itoa(d.MaxFiles)),
		"attachments per inquiry; more is 422 (CASEBOOK_ATTACHMENT_MAX_FILES)")
	tenant := fs.String("attachment-tenant-bytes", envOr("CASEBOOK_ATTACHMENT_TENANT_BYTES", strconv.FormatInt(d.MaxTenantBytes, 10)),
		"bytes of attachments per tenant; more is 413 (CASEBOOK_ATTACHMENT_TENANT_BYTES)")
	u := httpapi.UploadLimits{}.WithDefaults()
	concP := fs.String("upload-concurrent-principal", envOr("CASEBOOK_UPLOAD_CONCURRENT_PRINCIPAL", strconv.Itoa(u.ConcurrentPerPrincipal)),
		"uploads in flight per principal; more is 429 (CASEBOOK_UPLOAD_CONCURRENT_PRINCIPAL)")
	concT := fs.String("upload-concurrent-tenant", envOr("CASEBOOK_UPLOAD_CONCURRENT_TENANT", strconv.Itoa(u.ConcurrentPerTenant)),
		"uploads in flight per tenant; more is 429 (CASEBOOK_UPLOAD_CONCURRENT_TENANT)")
	bytesP := fs.String("upload-bytes-principal", envOr("CASEBOOK_UPLOAD_BYTES_PRINCIPAL", strconv.FormatInt(u.BytesPerMinutePrincipal, 10)),
		"uploaded bytes per principal per minute; more is 429 (CASEBOOK_UPLOAD_BYTES_PRINCIPAL)")
	bytesT := fs.String("upload-bytes-tenant", envOr("CASEBOOK_UPLOAD_BYTES_TENANT", strconv.FormatInt(u.BytesPerMinuteTenant, 10)),
		"uploaded bytes per tenant per minute; more is 429 (CASEBOOK_UPLOAD_BYTES_TENANT)")
	return func(cfg *app.Config) error {
		var ul httpapi.UploadLimits
		var err error
		if ul.ConcurrentPerPrincipal, err = strconv.Atoi(*concP); err != nil || ul.ConcurrentPerPrincipal < 1 {
			return fmt.Errorf("--upload-concurrent-principal %q: want a positive number", *concP)
		}
		if ul.ConcurrentPerTenant, err = strconv.Atoi(*concT); err != nil || ul.ConcurrentPerTenant < 1 {
			return fmt.Errorf("--upload-concurrent-tenant %q: want a positive number", *concT)
		}
		if ul.BytesPerMinutePrincipal, err = strconv.ParseInt(*bytesP, 10, 64); err != nil || ul.BytesPerMinutePrincipal < 1 {
			return fmt.Errorf("--upload-bytes-principal %q: want a positive number of bytes", *bytesP)
		}
		if ul.BytesPerMinuteTenant, err = strconv.ParseInt(*bytesT, 10, 64); err != nil || ul.BytesPerMinuteTenant < 1 {
			return fmt.Errorf("--upload-bytes-tenant %q: want a positive number of bytes", *bytesT)
		}
		cfg.Uploads = ul
		var l commands.AttachmentLimits
		if l.MaxFileBytes, err = strconv.ParseInt(*perFile, 10, 64); err != nil || l.MaxFileBytes < 1 {
			return fmt.Errorf("--attachment-max-bytes %q: want a positive number of bytes", *perFile)
		}
		if l.MaxFiles, err = strconv.Atoi(*files); err != nil || l.MaxFiles < 1 {
			return fmt.Errorf("--attachment-max-files %q: want a positive number", *files)
		}
		if l.MaxTenantBytes, err = strconv.ParseInt(*tenant, 10, 64); err != nil || l.MaxTenantBytes < 1 {
			return fmt.Errorf("--attachment-tenant-bytes %q: want a positive number of bytes", *tenant)
		}
		cfg.Attachments = l
		return nil
	}
}
