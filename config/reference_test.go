package config

import (
	"os"
	"strings"
	"testing"
)

// TestReferenceDocumentsEveryKey: docs/configuration.md has a row for every
// key of the configuration, and no row for a key that does not exist, so
// the reference neither lags behind nor outlives a setting.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		// A key's row: | `gitlab.url` | default | ...
		rest, ok := strings.CutPrefix(line, "| `")
		if !ok {
			continue
		}
		if key, _, ok := strings.Cut(rest, "` |"); ok {
			rows[key] = true
		}
	}
	keys := Keys()
	if len(keys) < 20 {
		t.Fatalf("Keys() = %v: too few, the walk is broken", keys)
	}
	known := map[string]bool{}
	for _, key := range keys {
		known[key] = true
		if !rows[key] {
			t.Errorf("docs/configuration.md has no row for %s", key)
		}
	}
	for key := range rows {
		// The environment table's rows name variables, not keys.
		if !known[key] && strings.ToUpper(key) != key {
			t.Errorf("docs/configuration.md documents %s, which is not a key of depsd.yaml", key)
		}
	}
}
