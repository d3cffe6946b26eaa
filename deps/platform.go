package deps

import (
	"fmt"
	"strings"

	"github.com/containerd/platforms"
)

// DefaultPlatform is the platform a Containerfile is read for when none is
// configured: what `docker build` and `podman build` assume on the usual
// CI host.
const DefaultPlatform = "linux/amd64"

// Platform is an OS/architecture[/variant] a build is for. It gives the
// automatic platform ARGs (TARGETOS, TARGETARCH, BUILDPLATFORM, ...) their
// values, so that `FROM bin-$TARGETOS` names a stage as it does in a build.
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

// String is the platform as BuildKit formats it: linux/arm/v7.
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// ParsePlatforms reads a comma-separated list of platforms
// ("linux/amd64,linux/arm64"), normalised as BuildKit does (containerd's
// platforms package: "linux/arm" is linux/arm/v7, "x86_64" is amd64).
// Each needs an OS and an architecture, so the result never depends on the
// machine depsd runs on.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	seen := map[Platform]bool{}
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		if !strings.Contains(field, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch[/variant], e.g. %s", field, DefaultPlatform)
		}
		p, err := platforms.Parse(field)
		p = platforms.Normalize(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: want os/arch[/variant], e.g. %s: %w", field, DefaultPlatform, err)
		}
		pl := Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
		if !seen[pl] {
			seen[pl] = true
			out = append(out, pl)
		}
	}
	return out, nil
}

// Options say how Containerfiles are read.
type Options struct {
	// Platforms are the platforms images are built for; the dependencies
	// are the union over them. Empty means DefaultPlatform. Each is taken
	// as a native build on a host of that platform: BUILD* and TARGET*
	// ARGs are the same.
	Platforms []Platform
}

func (o Options) platforms() []Platform {
	if len(o.Platforms) == 0 {
		return []Platform{{OS: "linux", Architecture: "amd64"}}
	}
	return o.Platforms
}

// platformArgs are the ARGs BuildKit defines before the first FROM
// (dockerfile2llb's defaultArgs), for a native build on p whose target
// stage is target.
func platformArgs(p Platform, target string) map[string]string {
	if target == "" {
		target = "default"
	}
	return map[string]string{
		"BUILDPLATFORM":   p.String(),
		"BUILDOS":         p.OS,
		"BUILDOSVERSION":  "",
		"BUILDARCH":       p.Architecture,
		"BUILDVARIANT":    p.Variant,
		"TARGETPLATFORM":  p.String(),
		"TARGETOS":        p.OS,
		"TARGETOSVERSION": "",
		"TARGETARCH":      p.Architecture,
		"TARGETVARIANT":   p.Variant,
		"TARGETSTAGE":     target,
	}
}

// isPlatformArg reports the ARGs BuildKit defines by itself.
func isPlatformArg(name string) bool {
	_, ok := platformArgs(Platform{}, "")[name]
	return ok
}
