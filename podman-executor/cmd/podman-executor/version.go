package main

import (
	"runtime/debug"

	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// version is written by the linker only (make build/release:
// -ldflags "-X main.version=v1.2.3").
var version string

// buildVersion is the link-time version, else the module version Go
// recorded, else the driver's own version with the VCS revision.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return executor.Version
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	v, rev, dirty := executor.Version+"-devel", "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		v += "+" + rev[:min(12, len(rev))]
		if dirty {
			v += "-dirty"
		}
	}
	return v
}
