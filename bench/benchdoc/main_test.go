package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The table in docs/benchmarks.md is the one docs/benchmarks.json makes:
// a figure changed in one and not the other fails here (`make bench-docs`
// regenerates the table).
func TestTableMatchesResults(t *testing.T) {
	f, err := readFile("../../" + resultsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) < 10 {
		t.Fatalf("%d rows in %s", len(f.Rows), resultsFile)
	}
	for i, r := range f.Rows {
		if (r.From == nil) == (r.Measured == nil) || (r.From == nil && r.Figure == "") {
			t.Errorf("row %d (%.40s): want a figure with where and how it was measured, or a figure from the runs", i, r.What)
		}
		if r.Measured != nil && (r.Measured.Machine == "" || r.Measured.Date == "" || r.Measured.Settings == "") {
			t.Errorf("row %d (%.40s): the machine, date and settings must each be said", i, r.What)
		}
	}
	doc, err := os.ReadFile("../../" + docFile)
	if err != nil {
		t.Fatal(err)
	}
	table, err := tableIn(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := render(f); table != want {
		t.Errorf("the table in %s is not the one %s makes: run `make bench-docs`\n got:\n%s\nwant:\n%s", docFile, resultsFile, table, want)
	}
}

const benchOutput = `goos: linux
goarch: amd64
pkg: gitlab.com/depsd/depsd/bench
cpu: AMD EPYC 7B13
BenchmarkScan2000-2   	       1	69512345678 ns/op	        69.51 scan-s	      2316 scan-requests	         1.158 scan-requests/project
BenchmarkWebhookAck/sqlite-2 	       1	10012345678 ns/op	         3.30 p99-ms
--- BENCH: BenchmarkWebhookAck
    bench_test.go:1: a log line
PASS
ok  	gitlab.com/depsd/depsd/bench	80.1s
`

func TestParseBenchmarkOutput(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	runs := parse(strings.NewReader(benchOutput), now, Machine{Host: "h", CPUs: 2}, map[string]string{"DEPSD_BENCH_STORE": "postgres"})
	if len(runs) != 2 {
		t.Fatalf("%d runs: %+v", len(runs), runs)
	}
	r := runs[0]
	if r.Benchmark != "BenchmarkScan2000" || r.Package != "gitlab.com/depsd/depsd/bench" || r.Date != "2026-11-27T22:00:00Z" ||
		r.Machine.CPU != "AMD EPYC 7B13" || r.Machine.GOOS != "linux" || r.Machine.GOARCH != "amd64" || r.Settings["DEPSD_BENCH_STORE"] != "postgres" {
		t.Errorf("run %+v", r)
	}
	if r.Metrics["scan-s"] != 69.51 || r.Metrics["scan-requests"] != 2316 || r.Metrics["ns/op"] != 69512345678 {
		t.Errorf("metrics %v", r.Metrics)
	}
	if runs[1].Benchmark != "BenchmarkWebhookAck/sqlite" || runs[1].Metrics["p99-ms"] != 3.3 {
		t.Errorf("sub-benchmark %+v", runs[1])
	}
}

func TestSettingsOfKeepsWhatChangesTheFigures(t *testing.T) {
	got := settingsOf([]string{"HOME=/root", "DEPSD_BENCH_STORE=postgres", "DEPSD_TEST_STORE=postgres", "GITLAB_TOKEN=secret", "PATH=/bin"})
	if len(got) != 2 || got["DEPSD_BENCH_STORE"] != "postgres" || got["DEPSD_TEST_STORE"] != "postgres" {
		t.Errorf("settings %v", got)
	}
	if settingsOf([]string{"HOME=/root"}) != nil {
		t.Error("no setting should be nil: default settings")
	}
}

// A row computed from runs takes the last runs of its benchmark at its
// settings, and says their range, machine, dates and settings.
func TestFigureFromRuns(t *testing.T) {
	m := Machine{Host: "ci", CPU: "EPYC", CPUs: 2, GOOS: "linux", GOARCH: "amd64"}
	run := func(date string, settings map[string]string, scan float64) Run {
		return Run{Date: date, Machine: m, Settings: settings, Benchmark: "BenchmarkScan2000", Metrics: map[string]float64{"scan-s": scan, "scan-requests/project": 1.16}}
	}
	pg := map[string]string{"DEPSD_BENCH_STORE": "postgres"}
	runs := []Run{
		run("2026-11-20T10:00:00Z", nil, 99), // older than the last 3
		run("2026-11-27T10:00:00Z", nil, 70.4),
		run("2026-11-27T11:00:00Z", pg, 10), // other settings
		run("2026-11-28T10:00:00Z", nil, 69.5),
		run("2026-11-28T11:00:00Z", nil, 69.9),
	}
	from := From{Benchmark: "BenchmarkScan2000", Metrics: []Metric{{"scan-s", "%.1f s"}, {"scan-requests/project", "%.2f requests/project"}}}
	for _, tc := range []struct {
		name                   string
		from                   From
		runs                   []Run
		wantFigure, wantSource string
	}{
		{"last three at default settings", from, runs,
			"69.5–70.4 s, 1.16 requests/project (3 runs)", "ci (2 CPUs, EPYC, linux/amd64); 2026-11-27, 2026-11-28; default settings"},
		{"other settings", From{Benchmark: "BenchmarkScan2000", Settings: pg, Metrics: from.Metrics[:1]}, runs,
			"10.0 s (1 run)", "ci (2 CPUs, EPYC, linux/amd64); 2026-11-27; DEPSD_BENCH_STORE=postgres"},
		{"none yet", from, nil, "not measured yet: `make bench` (or `make bench-scale`) records it", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			figure, source := fromRuns(tc.from, tc.runs)
			if figure != tc.wantFigure || source != tc.wantSource {
				t.Errorf("got %q; %q\nwant %q; %q", figure, source, tc.wantFigure, tc.wantSource)
			}
		})
	}
}

// The short table shows the rows with a Glance, in brief: a written
// figure's own brief, a figure from runs with the metrics it names, and
// when each was measured; every row is in the lab notes below it.
func TestRenderShortTableFirst(t *testing.T) {
	m := Machine{Host: "ci", CPU: "EPYC", CPUs: 2, GOOS: "linux", GOARCH: "amd64"}
	f := File{
		Rows: []Row{
			{What: "a long description of a written figure", Figure: "3.2 s and many details", Goal: "≤ 5 s, and why",
				Measured: &Measured{Machine: "vm", Date: "2026-11-23", Settings: "default"}, Glance: &Glance{What: "written", Figure: "3.2 s", Goal: "≤ 5 s"}},
			{What: "not at a glance", Figure: "1", Goal: "", Measured: &Measured{Machine: "vm", Date: "2026-11-20", Settings: "default"}},
			{What: "from runs", Goal: "≤ 2 ms", From: &From{Benchmark: "BenchmarkX", Metrics: []Metric{{"p99-ms", "p99 %.1f ms"}, {"ratio", "%.2f×"}}},
				Glance: &Glance{What: "ack", Metrics: 1}},
		},
		Runs: []Run{{Date: "2026-11-28T10:00:00Z", Machine: m, Benchmark: "BenchmarkX", Metrics: map[string]float64{"p99-ms": 1.5, "ratio": 1.1}}},
	}
	got := render(f)
	short, notes, ok := strings.Cut(got, "**Lab notes**")
	if !ok {
		t.Fatalf("no lab notes:\n%s", got)
	}
	for _, want := range []string{"| written | 3.2 s | ≤ 5 s | 2026-11-23 |", "| ack | p99 1.5 ms (1 run) | ≤ 2 ms | 2026-11-28 |"} {
		if !strings.Contains(short, want) {
			t.Errorf("short table lacks %q:\n%s", want, short)
		}
	}
	if strings.Contains(short, "not at a glance") || strings.Contains(short, "many details") {
		t.Errorf("short table shows what only the lab notes should:\n%s", short)
	}
	for _, want := range []string{"a long description of a written figure", "not at a glance", "p99 1.5 ms, 1.10× (1 run)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("lab notes lack %q:\n%s", want, notes)
		}
	}
}

// A range says the words around its number once, before or after it.
func TestRangeOf(t *testing.T) {
	for _, tc := range []struct{ lo, hi, want string }{
		{"1.2 s", "3.4 s", "1.2–3.4 s"},
		{"p99 2.7 ms", "p99 3.2 ms", "p99 2.7–3.2 ms"},
		{"1.00× the floor", "1.01× the floor", "1.00–1.01× the floor"},
		{"(its p99 1.8 ms)", "(its p99 79.7 ms)", "(its p99 1.8–79.7 ms)"},
		{"1,001 pipelines", "10,001 pipelines", "1,001–10,001 pipelines"},
		{"0.9 ms", "1.2 s", "0.9 ms–1.2 s"},
	} {
		if got := rangeOf(tc.lo, tc.hi); got != tc.want {
			t.Errorf("rangeOf(%q, %q) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}
