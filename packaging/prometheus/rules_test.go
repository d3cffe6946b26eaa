// Package prometheus_test checks the alerting rules shipped in this
// directory: promtool accepts them, their unit tests pass, and every alert
// has a unit test that sees it fire. The end-to-end test with a real
// Prometheus scraping `depsd serve` is e2e/prometheus_test.go.
package prometheus_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"gitlab.com/depsd/depsd/internal/realtest"
)

// promtool returns the path of Debian's promtool, or skips (fails where
// Prometheus is expected: see internal/realtest).
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	realtest.Require(t, realtest.Prometheus, err == nil, "promtool not installed (Debian package prometheus): "+errString(err))
	return bin
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPromtoolChecksTheRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "depsd-alerts.yml", "depsd-thresholds.example.yml"},
		{"test", "rules", "depsd-alerts_test.yml", "depsd-thresholds_test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// ruleFile is the part of a Prometheus rules file this test reads.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// unitTests is the part of a promtool test file this test reads.
type unitTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert of depsd-alerts.yml is seen firing and seen quiet by
// depsd-alerts_test.yml: a rule nobody tests is a rule nobody knows works.
// (Pure Go: runs without promtool.)
func TestEveryAlertHasUnitTests(t *testing.T) {
	var rules ruleFile
	readYAML(t, "depsd-alerts.yml", &rules)
	var tests unitTests
	readYAML(t, "depsd-alerts_test.yml", &tests)
	if !slices.Contains(tests.RuleFiles, "depsd-alerts.yml") {
		t.Fatalf("depsd-alerts_test.yml does not load depsd-alerts.yml: %v", tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("depsd-alerts.yml records %s: thresholds are the operator's recording rules, not ours", r.Record)
				continue
			}
			alerts++
			if !fires[r.Alert] {
				t.Errorf("no unit test sees %s fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("no unit test sees %s quiet", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alert read from depsd-alerts.yml")
	}
}
