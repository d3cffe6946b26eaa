package deps

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .json files in testdata/containerfiles from the current results (review the diff!)")

// golden is the expected result of one testdata Containerfile.
type golden struct {
	Dependencies []Dependency `json:"dependencies"`
	Warnings     []Warning    `json:"warnings"`
	Error        string       `json:"error,omitempty"`
}

// TestAnalyzeContainerfileTable runs every testdata/containerfiles/*.Containerfile
// against its reviewed .json golden file.
func TestAnalyzeContainerfileTable(t *testing.T) {
	files, err := filepath.Glob("testdata/containerfiles/*.Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("found %d Containerfiles in testdata, want at least 30", len(files))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".Containerfile")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			a, parseErr := AnalyzeContainerfile("Containerfile", src)
			got := golden{Dependencies: a.Dependencies, Warnings: a.Warnings}
			if parseErr != nil {
				got.Error = parseErr.Error()
			}
			goldenPath := strings.TrimSuffix(path, ".Containerfile") + ".json"
			if *update {
				b, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(goldenPath, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("no golden file (run go test ./deps -update and review it): %v", err)
			}
			var want golden
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", goldenPath, err)
			}
			if !reflect.DeepEqual(got, want) {
				gb, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("result differs from %s; got:\n%s", goldenPath, gb)
			}
			if strings.HasPrefix(name, "err-") != (parseErr != nil) {
				t.Errorf("err-* cases must fail to parse and others must not; err = %v", parseErr)
			}
		})
	}
}
