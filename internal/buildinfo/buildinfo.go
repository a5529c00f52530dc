// Package buildinfo says which build of zksched is running: its version, the commit it was
// built from, that commit's date and the Go toolchain. bin/release.sh sets the first three with
// -ldflags -X; a plain `go build` leaves them empty, and they are then read from the VCS
// settings the go command stamps into the binary, or left "unknown" where it stamped none
// (-buildvcs=false, a build outside a git checkout). The build date is the commit's, not the
// clock's, so two builds of one commit are byte-identical.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/zksched/zksched/internal/buildinfo.version=…" (and commit,
// date) by bin/release.sh.
var (
	version string
	commit  string
	date    string
)

// Info is one build's identity, as `zksched version --json` prints it.
type Info struct {
	// Version is the release's: the git tag, or 0.0.0-YYYYMMDD-COMMIT12 between tags; "dev"
	// for a build not made by bin/release.sh.
	Version string `json:"version"`
	// Commit is the full hash of the commit built, with "+dirty" when the go command saw
	// uncommitted changes; "unknown" when nothing recorded it.
	Commit string `json:"commit"`
	// Date is the commit's time in RFC 3339, UTC; "unknown" when nothing recorded it.
	Date string `json:"date"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, date, bi)
}

// get fills what the linker flags left empty from the VCS settings in bi (nil when the binary
// carries no build information).
func get(version, commit, date string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.Date == "" {
					info.Date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && commit == "" && info.Commit != "" {
			info.Commit += "+dirty"
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}
