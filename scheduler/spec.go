package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// spec is a parsed cron expression with its timezone.
type spec struct {
	text  string // as configured, trimmed
	tz    string // IANA name; "UTC" unless configured
	sched cron.Schedule
}

// parser accepts the standard 5 fields and the descriptors (@daily,
// @every 6h). Seconds are not offered: nothing depsd starts needs them.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec parses expr in timezone tz (empty: UTC). A CRON_TZ= or TZ=
// prefix is read here rather than by cron, so that an unknown timezone is
// reported as such and a prefix that contradicts tz is caught.
func parseSpec(expr, tz string) (spec, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return spec{}, fmt.Errorf("cron is empty: want 5 fields such as \"0 3 * * 1\" or a descriptor such as @daily")
	}
	body := expr
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if !strings.HasPrefix(expr, prefix) {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimPrefix(expr, prefix), " ")
		if tz != "" && tz != name {
			return spec{}, fmt.Errorf("timezone %q contradicts the %s%s prefix of cron %q", tz, prefix, name, expr)
		}
		tz, body = name, strings.TrimSpace(rest)
		break
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return spec{}, fmt.Errorf("unknown timezone %q: want an IANA name such as Europe/Zurich", tz)
	}
	s, err := parser.Parse(body)
	if err != nil {
		return spec{}, fmt.Errorf("bad cron expression %q: %v", expr, err)
	}
	switch s := s.(type) {
	case *cron.SpecSchedule:
		s.Location = loc
		return spec{text: expr, tz: tz, sched: dstSchedule{s}}, nil
	case cron.ConstantDelaySchedule:
		if s.Delay < minInterval {
			return spec{}, fmt.Errorf("bad cron expression %q: interval under %s", expr, minInterval)
		}
	}
	return spec{text: expr, tz: tz, sched: s}, nil
}

// detail is the spec as the chain reason records it: a valid cron spec
// that carries its timezone when one was configured.
func (s spec) detail() string {
	if s.tz == "UTC" || strings.HasPrefix(s.text, "CRON_TZ=") || strings.HasPrefix(s.text, "TZ=") {
		return s.text
	}
	return "CRON_TZ=" + s.tz + " " + s.text
}
