package deps

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tonistiigi/go-csvvalue"
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
			a, parseErr := AnalyzeContainerfile("Containerfile", src, Options{})
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

// TestAnalyzePlatforms: the platform ARGs take the values of each
// configured platform, and the dependencies are the union over them.
func TestAnalyzePlatforms(t *testing.T) {
	src := []byte(`FROM scratch AS bin-amd64
FROM registry.example.com/group/arm-tools:1 AS bin-arm64
FROM bin-$TARGETARCH AS bin
FROM registry.example.com/group/base:1-${TARGETARCH}${TARGETVARIANT:+-$TARGETVARIANT}
`)
	tests := []struct {
		platforms string
		want      []string
	}{
		{"", []string{"from registry.example.com/group/arm-tools:1", "from registry.example.com/group/base:1-amd64"}},
		{"linux/amd64", []string{"from registry.example.com/group/arm-tools:1", "from registry.example.com/group/base:1-amd64"}},
		{"linux/arm/v7", []string{"from registry.example.com/group/arm-tools:1", "from docker.io/library/bin-arm:latest", "from registry.example.com/group/base:1-arm-v7"}},
		{"linux/amd64, linux/arm64", []string{"from registry.example.com/group/arm-tools:1", "from registry.example.com/group/base:1-amd64", "from registry.example.com/group/base:1-arm64"}},
	}
	for _, tt := range tests {
		t.Run(tt.platforms, func(t *testing.T) {
			var opts Options
			if tt.platforms != "" {
				p, err := ParsePlatforms(tt.platforms)
				if err != nil {
					t.Fatal(err)
				}
				opts.Platforms = p
			}
			a, err := AnalyzeContainerfile("Containerfile", src, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range a.Dependencies {
				got = append(got, string(d.Kind)+" "+d.Image)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") || len(a.Warnings) != 0 {
				t.Errorf("got %q, warnings %v; want %q", got, a.Warnings, tt.want)
			}
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	for in, want := range map[string]string{
		"linux/amd64":                "linux/amd64",
		"linux/arm":                  "linux/arm/v7",
		"linux/x86_64,linux/arm64":   "linux/amd64 linux/arm64",
		"linux/amd64,linux/amd64":    "linux/amd64",
		"windows/amd64, linux/s390x": "windows/amd64 linux/s390x",
	} {
		p, err := ParsePlatforms(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		var got []string
		for _, x := range p {
			got = append(got, x.String())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "linux", "amd64", "linux/amd64,", "linux/bogus-arch!"} {
		if _, err := ParsePlatforms(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunMountNotCSV: a RUN --mount value BuildKit cannot read as a CSV
// record makes the file unbuildable, with an error naming the line and
// the flag, variables in from= or not (the table's err-mount-not-csv is
// the bare-quote case).
func TestRunMountNotCSV(t *testing.T) {
	tests := []struct {
		name, run, want string
	}{
		{"unterminated quote", `RUN --mount='type=bind,"from=reg/x:1,target=/x' true`, `Containerfile:3: RUN --mount=type=bind,"from=reg/x:1,target=/x: invalid mount: extraneous or missing " in quoted-field at column 12`},
		{"unterminated quote with a variable", `RUN --mount='type=bind,"from=$X,target=/x' true`, `Containerfile:3: RUN --mount=type=bind,"from=$X,target=/x: invalid mount: extraneous or missing " in quoted-field at column 12`},
		{"quote inside a field", `RUN --mount='type=bind,from=reg/"x":1' true`, `Containerfile:3: RUN --mount=type=bind,from=reg/"x":1: invalid mount: bare " in non-quoted-field at column 20`},
		{"empty", `RUN --mount= true`, `Containerfile:3: RUN --mount=: invalid mount: the value is empty`},
		{"second mount", `RUN --mount=type=cache,target=/c --mount='"from=$X' true`, `Containerfile:3: RUN --mount="from=$X: invalid mount: extraneous or missing " in quoted-field at column`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "FROM alpine:3.20\nARG X=reg/x:1\n" + tt.run + "\n"
			_, err := AnalyzeContainerfile("Containerfile", []byte(src), Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != 3 || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v; want a *ParseError on line 3 starting %q", err, tt.want)
			}
		})
	}
}

// TestCSVRecordRoundTrip: a --mount value depsd rewrites (an expanded
// from=) reads back, with BuildKit's CSV parser, as the same fields,
// whatever they hold.
func TestCSVRecordRoundTrip(t *testing.T) {
	for _, fields := range [][]string{
		{"type=bind", "from=reg/x:1", "target=/x"},
		{"type=bind", "from=reg/x:1,2", "target=/a,b"},
		{"from=" + marker(markNoDefault, "X"), `target=/"q"`, " lead", "cr\rlf\n", `\.`},
		{"from="},
	} {
		rec := csvRecord(fields)
		got, err := csvvalue.Fields(rec, nil)
		if err != nil || !reflect.DeepEqual(got, fields) {
			t.Errorf("%q written as %q reads back as %q, %v", fields, rec, got, err)
		}
	}
}
