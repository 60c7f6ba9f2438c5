package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
)

// attachmentFlags adds serve's attachment limits, each with a CASEBOOK_* default; the returned
// function sets them on the configuration after parsing.
func attachmentFlags(fs *flag.FlagSet) func(*app.Config) error {
	d := commands.AttachmentLimits{}.WithDefaults()
	perFile := fs.String("attachment-max-bytes", envOr("CASEBOOK_ATTACHMENT_MAX_BYTES", strconv.FormatInt(d.MaxFileBytes, 10)),
		"largest attachment in bytes; larger is 413 (CASEBOOK_ATTACHMENT_MAX_BYTES)")
	files := fs.String("attachment-max-files", envOr("CASEBOOK_ATTACHMENT_MAX_FILES", strconv.Itoa(d.MaxFiles)),
		"attachments per inquiry; more is 422 (CASEBOOK_ATTACHMENT_MAX_FILES)")
	tenant := fs.String("attachment-tenant-bytes", envOr("CASEBOOK_ATTACHMENT_TENANT_BYTES", strconv.FormatInt(d.MaxTenantBytes, 10)),
		"bytes of attachments per tenant; more is 413 (CASEBOOK_ATTACHMENT_TENANT_BYTES)")
	return func(cfg *app.Config) error {
		var l commands.AttachmentLimits
		var err error
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
