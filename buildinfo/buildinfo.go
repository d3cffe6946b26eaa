// Package buildinfo says which build of depsd is running, for `depsd
// version`, the User-Agent sent to GitLab and the depsd_build_info metric.
// The version is set at link time by `make build` and `make release`
// (-ldflags "-X gitlab.com/depsd/depsd/buildinfo.version=v1.2.3"); a plain
// `go build` or `go run` falls back to what Go recorded in the binary: the
// module version, or "devel" with the VCS revision.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version and revision are written by the linker only (see the package
// doc; revision: -X gitlab.com/depsd/depsd/buildinfo.revision=<commit>, for
// builds where Go cannot stamp it, such as a container build without
// .git); nothing assigns them at run time.
var version, revision string

// Info describes the running binary.
type Info struct {
	Version   string // v1.2.3, or devel+<revision>[-dirty]
	Revision  string // VCS commit, "" when unknown
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string
}

// Get reads the build information.
func Get() Info {
	info := Info{Version: version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if revision != "" {
		info.Revision = revision
		info.Modified = strings.HasSuffix(version, "-dirty") // git describe --dirty
	}
	if info.Version != "" {
		return info
	}
	if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
		return info
	}
	info.Version = "devel"
	if info.Revision != "" {
		info.Version += "+" + short(info.Revision)
		if info.Modified {
			info.Version += "-dirty"
		}
	}
	return info
}

// Version is Get().Version.
func Version() string { return Get().Version }

// UserAgent is what depsd sends to GitLab: depsd/<version>.
func UserAgent() string { return "depsd/" + Version() }

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
