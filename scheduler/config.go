package scheduler

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"gitlab.com/depsd/depsd/deps"
)

// Config is the scheduling part of depsd.yaml. The daemon's configuration
// embeds it inline (`yaml:",inline"`), so its keys sit at the top level:
//
//	schedules:
//	  - project: infra/images/base
//	    cron: "0 3 * * 1"
//	    timezone: Europe/Zurich
//	catch_up: once
//	rescan: "@every 6h"
//	watch:
//	  - debian:12
//	  - image: registry.example.com/vendor/runtime:2
//	    projects: [apps/legacy]
//	watch_external: true
//	watch_interval: 1h
//	registry_auth_file: /etc/depsd/registry-auth.json
//
// The zero value is valid: no schedules, catch-up once, rescan every 6h,
// nothing watched.
type Config struct {
	// Schedules rebuild projects (and everything downstream) on time.
	Schedules []ScheduleSpec `yaml:"schedules"`
	// CatchUp says what a schedule does at start about fires missed while
	// no depsd was running: "once" (default) fires once for the latest
	// missed time, "skip" fires at the next scheduled time only.
	CatchUp CatchUp `yaml:"catch_up"`
	// Rescan is the cron spec of the maintenance job (full incremental
	// scan, then hooks sync). Empty means DefaultRescan; "off" disables it.
	Rescan string `yaml:"rescan"`
	// Watch lists external images whose tag is watched for a new digest.
	Watch []WatchSpec `yaml:"watch"`
	// WatchExternal watches every external image that a FROM (or COPY
	// --from, RUN --mount from) line of a project in scope uses by tag.
	WatchExternal bool `yaml:"watch_external"`
	// WatchInterval is how often each watched tag is checked; 0 means
	// DefaultWatchInterval.
	WatchInterval time.Duration `yaml:"watch_interval"`
	// RegistryAuthFile is a docker config.json (or podman auth.json) with
	// credentials for registries that need them. Empty: the docker and
	// podman default locations, else anonymous access.
	RegistryAuthFile string `yaml:"registry_auth_file"`
}

// ScheduleSpec is one entry of `schedules:`.
type ScheduleSpec struct {
	Project string `yaml:"project"`
	// Ref is the node of the project rebuilt: a followed branch, or
	// "tags" for its releases; empty: its default branch.
	Ref string `yaml:"ref"`
	// Cron has 5 fields (minute hour day-of-month month day-of-week) or a
	// descriptor (@daily, @weekly, @every 6h). A CRON_TZ= or TZ= prefix
	// may name the timezone instead of Timezone.
	Cron string `yaml:"cron"`
	// Timezone is an IANA name (Europe/Zurich); empty means UTC.
	Timezone string `yaml:"timezone"`
}

// WatchSpec is one entry of `watch:`: an image reference, written either
// as a plain string or as a mapping with extra projects to rebuild.
type WatchSpec struct {
	Image string `yaml:"image"`
	// Projects are rebuilt when the digest changes, besides the projects
	// whose Containerfile uses the image.
	Projects []string `yaml:"projects"`
}

// UnmarshalYAML accepts `- debian:12` as well as `- image: debian:12`, and
// rejects unknown keys (the daemon's decoder is strict; ours must be too).
func (w *WatchSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&w.Image)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: watch entry: want an image reference or a mapping with image and projects", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i].Value; k {
		case "image":
			if err := n.Content[i+1].Decode(&w.Image); err != nil {
				return err
			}
		case "projects":
			if err := n.Content[i+1].Decode(&w.Projects); err != nil {
				return err
			}
		default:
			return fmt.Errorf("line %d: field %s not found in watch entry (want image, projects)", n.Content[i].Line, k)
		}
	}
	return nil
}

// CatchUp is the policy for fires missed while no depsd was running.
type CatchUp string

// The catch-up policies.
const (
	CatchUpOnce CatchUp = "once"
	CatchUpSkip CatchUp = "skip"
)

// Defaults used where the configuration says nothing.
const (
	DefaultRescan        = "@every 6h"
	DefaultWatchInterval = time.Hour
	// RescanOff disables the maintenance job.
	RescanOff = "off"
)

// minInterval keeps a typo ("@every 1s") from rebuilding a chain, or
// polling a registry, every second.
const minInterval = time.Minute

// RescanSpec returns the maintenance job's spec with the default applied:
// what the daemon passes to AddJob.
func (c Config) RescanSpec() string {
	if strings.TrimSpace(c.Rescan) == "" {
		return DefaultRescan
	}
	return strings.TrimSpace(c.Rescan)
}

func (c Config) watchInterval() time.Duration {
	if c.WatchInterval == 0 {
		return DefaultWatchInterval
	}
	return c.WatchInterval
}

func (c Config) catchUp() CatchUp {
	if c.CatchUp == "" {
		return CatchUpOnce
	}
	return c.CatchUp
}

// Node is the key of the node the schedule rebuilds (deps.NodeKey).
func (s ScheduleSpec) Node() string {
	switch s.Ref {
	case "":
		return s.Project
	case deps.TagsRef:
		return deps.NodeKey(s.Project, deps.NodeTags, "")
	}
	return deps.NodeKey(s.Project, deps.NodeBranch, s.Ref)
}
