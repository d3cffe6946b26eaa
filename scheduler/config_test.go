package scheduler

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// daemonConfig is how the daemon embeds Config: inline, strict decoding.
type daemonConfig struct {
	State     string `yaml:"state"`
	Scheduler Config `yaml:",inline"`
}

func decodeStrict(t *testing.T, text string) (daemonConfig, error) {
	t.Helper()
	var c daemonConfig
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	dec.KnownFields(true)
	err := dec.Decode(&c)
	return c, err
}

func TestConfigYAML(t *testing.T) {
	c, err := decodeStrict(t, `
state: depsd.db
schedules:
  - project: infra/images/base
    cron: "0 3 * * 1"
    timezone: Europe/Zurich
catch_up: skip
rescan: "@every 12h"
watch:
  - debian:12
  - image: registry.example.com/vendor/runtime:2
    projects: [apps/legacy]
watch_external: true
watch_interval: 30m
registry_auth_file: /etc/depsd/auth.json
`)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Scheduler
	want := Config{
		Schedules:        []ScheduleSpec{{Project: "infra/images/base", Cron: "0 3 * * 1", Timezone: "Europe/Zurich"}},
		CatchUp:          CatchUpSkip,
		Rescan:           "@every 12h",
		Watch:            []WatchSpec{{Image: "debian:12"}, {Image: "registry.example.com/vendor/runtime:2", Projects: []string{"apps/legacy"}}},
		WatchExternal:    true,
		WatchInterval:    30 * time.Minute,
		RegistryAuthFile: "/etc/depsd/auth.json",
	}
	if g, w := yamlOf(t, got), yamlOf(t, want); g != w {
		t.Errorf("decoded\n%s\nwant\n%s", g, w)
	}
	if err := got.Validate(nil); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if _, err := decodeStrict(t, "watch:\n  - image: debian:12\n    project: [a/b]\n"); err == nil || !strings.Contains(err.Error(), "field project not found") {
		t.Errorf("typo in a watch entry: %v", err)
	}
	if _, err := decodeStrict(t, "schedules:\n  - project: a/b\n    crom: '@daily'\n"); err == nil || !strings.Contains(err.Error(), "crom") {
		t.Errorf("typo in a schedule: %v", err)
	}
}

func yamlOf(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
