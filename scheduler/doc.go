// Package scheduler starts work on time: cron schedules that rebuild base
// projects, generic maintenance jobs (the periodic rescan), and a watcher
// that notices when an external base image's tag points at a new digest.
//
// Every fire is claimed in the store before it runs, keyed by a stable
// schedule identity and the scheduled time, so a schedule fires once per
// scheduled time however many depsd processes share the store and however
// often they restart. Fire times come from robfig/cron's parser
// (Schedule.Next), driven by this package's own loop on an injected Clock,
// so tests advance time instead of sleeping.
package scheduler
