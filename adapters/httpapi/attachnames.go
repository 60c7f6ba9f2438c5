package httpapi

import (
	"net/http"
	"path"
	"strings"

	"github.com/casebook/casebook/commands"
)

// attachmentExtensions are the extensions a stored name may end in, per sniffed type; the first is
// the one given when the client's does not match.
var attachmentExtensions = map[string][]string{
	"text/plain":      {".txt", ".text", ".log", ".csv", ".md"},
	"application/pdf": {".pdf"},
	"image/png":       {".png"},
	"image/jpeg":      {".jpg", ".jpeg", ".jpe"},
	"image/gif":       {".gif"},
	"image/webp":      {".webp"},
}

// dangerousExtensions run or render actively when opened: web pages and images with script (a
// browser), scripts and programs (a desktop shell), and containers of either.
var dangerousExtensions = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`.htm .html .xhtml .shtml .mht .mhtml .svg .svgz .xml .xsl .xslt .hta
		.js .mjs .jse .vbs .vbe .wsf .wsh .wsc .sct .ps1 .psm1 .psd1 .bat .cmd .sh .bash .zsh .php .phtml
		.asp .aspx .jsp .py .pl .rb .exe .com .scr .pif .cpl .msi .msp .mst .dll .sys .jar .lnk .url .scf
		.reg .inf .application .appref-ms .gadget .msc .chm .hlp .iso .img .vhd .vhdx .dmg .pkg .app
		.apk .deb .rpm .docm .xlsm .pptm .dotm .xlam .ppam .swf .desktop .command .library-ms .settingcontent-ms`) {
		dangerousExtensions[e] = true
	}
}

// AttachmentFileName is the name a file is stored and served under: the client's name normalized
// (commands.AttachmentName: no path, no control or bidi characters, bounded length, trailing dots
// and spaces dropped) with an extension that matches the sniffed type ct:
//
//   - an extension of that type is kept (notes.txt, scan.jpeg);
//   - a dangerous extension (dangerousExtensions: .html, .svg, .hta, .js, .exe, .bat, …) on text is
//     refused, 415: text named so is a page or a script, whatever the sniffer says;
//   - any other, a dangerous one on binary content included, is replaced by the type's first
//     extension (PNG bytes named x.exe are stored as x.png; a PDF named report is report.pdf).
func AttachmentFileName(client, ct string) (string, error) {
	base, _, _ := strings.Cut(ct, ";")
	exts := attachmentExtensions[base]
	if len(exts) == 0 {
		return "", &apiError{http.StatusUnsupportedMediaType, "attachment_type", "files of this type are not accepted (plain text, PDF, PNG, JPEG, GIF, WebP)"}
	}
	name := commands.AttachmentName(strings.TrimRight(client, ". \t"))
	ext := strings.ToLower(path.Ext(name))
	for _, e := range exts {
		if ext == e {
			return name, nil
		}
	}
	if dangerousExtensions[ext] && base == "text/plain" {
		return "", &apiError{http.StatusUnsupportedMediaType, "attachment_name",
			"files named " + ext + " are not accepted: a web page, image with script or program can run when opened (send plain text as .txt)"}
	}
	stem := strings.TrimSuffix(name, path.Ext(name))
	if stem == "" || path.Ext(name) == name {
		stem = "attachment"
	}
	return commands.AttachmentName(stem + exts[0]), nil
}
