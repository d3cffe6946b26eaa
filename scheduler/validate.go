package scheduler

import (
	"errors"
	"fmt"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Validate checks the configuration and returns every problem found,
// joined, each naming its entry, e.g.
//
//	schedules[1] (infra/base): bad cron expression "0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]
//
// inScope reports whether a project path is in the configured scope; nil
// accepts every path.
func (c Config) Validate(inScope func(project string) bool) error {
	_, _, err := c.compile(inScope)
	return err
}

// compile parses what Validate checks: the rebuild schedules and the
// explicitly watched images.
func (c Config) compile(inScope func(string) bool) ([]*entry, []watched, error) {
	var errs []error
	var entries []*entry
	seenSchedule := map[string]int{}
	for i, s := range c.Schedules {
		name := fmt.Sprintf("schedules[%d]", i)
		if s.Project != "" {
			name += " (" + s.Node() + ")"
		}
		switch {
		case strings.TrimSpace(s.Project) == "":
			errs = append(errs, fmt.Errorf("%s: project is empty", name))
			continue
		case inScope != nil && !inScope(s.Project):
			errs = append(errs, fmt.Errorf("%s: project is not in the scope (scope.groups, scope.projects, scope.exclude)", name))
			continue
		}
		sp, err := parseSpec(s.Cron, s.Timezone)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		e := newEntry(KindRebuild, s.Node(), sp, nil)
		if j, dup := seenSchedule[e.id]; dup {
			errs = append(errs, fmt.Errorf("%s: same schedule as schedules[%d]", name, j))
			continue
		}
		seenSchedule[e.id] = i
		entries = append(entries, e)
	}
	switch c.catchUp() {
	case CatchUpOnce, CatchUpSkip:
	default:
		errs = append(errs, fmt.Errorf("catch_up %q: want once or skip", c.CatchUp))
	}
	if spec := c.RescanSpec(); spec != RescanOff {
		if _, err := parseSpec(spec, ""); err != nil {
			errs = append(errs, fmt.Errorf("rescan: %w (or \"off\")", err))
		}
	}
	if c.WatchInterval != 0 && c.WatchInterval < minInterval {
		errs = append(errs, fmt.Errorf("watch_interval %s: want at least %s", c.WatchInterval, minInterval))
	}
	var images []watched
	seen := map[string]int{}
	for i, w := range c.Watch {
		name := fmt.Sprintf("watch[%d]", i)
		if w.Image != "" {
			name += " (" + w.Image + ")"
		}
		ref, err := deps.NormalizeImage(w.Image)
		switch {
		case w.Image == "":
			errs = append(errs, fmt.Errorf("%s: image is empty", name))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		case ref.Digest != "":
			errs = append(errs, fmt.Errorf("%s: pinned by digest, so it cannot change: nothing to watch", name))
			continue
		}
		key := ref.Repository + ":" + ref.Tag
		if j, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: same image as watch[%d]", name, j))
			continue
		}
		seen[key] = i
		for _, p := range w.Projects {
			if inScope != nil && !inScope(p) {
				errs = append(errs, fmt.Errorf("%s: project %s is not in the scope", name, p))
			}
		}
		images = append(images, watched{image: key, projects: w.Projects})
	}
	return entries, images, errors.Join(errs...)
}
