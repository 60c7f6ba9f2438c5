// Package buildinfo says which build of Casebook is running: the version (set at link time, else
// the module's), the VCS commit the Go toolchain stamped, and the Go version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version and Commit are set at link time (make build does):
//
//	go build -ldflags "-X github.com/casebook/casebook/internal/buildinfo.Version=v1.2.3 -X …/buildinfo.Commit=<sha>"
//
// Empty: the module version ("(devel)" for a source build) and the commit the Go toolchain stamped.
var Version, Commit string

// Info describes the running build.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

// Read returns the running build's Info. Unknown parts are "unknown".
func Read() Info {
	in := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = "unknown"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}
