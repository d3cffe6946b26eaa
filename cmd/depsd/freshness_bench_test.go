package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify/verifytest"
)

// BenchmarkFreshnessCommand2000 runs `depsd freshness --json` over the
// stored verifications of 2,000 projects' images (a third stale): opening
// the state file, reading, deciding what fixes each stale image, printing.
func BenchmarkFreshnessCommand2000(b *testing.B) {
	dir := b.TempDir()
	state := filepath.Join(dir, "depsd.db")
	b.Setenv("DEPSD_STATE", state)
	b.Setenv("DEPSD_CONFIG", "")
	b.Chdir(dir)
	st, err := store.Open(context.Background(), state)
	if err != nil {
		b.Fatal(err)
	}
	paths := make([]string, 2000)
	for i := range paths {
		paths[i] = fmt.Sprintf("apps/team-%d/app-%d", i%20, i)
	}
	if _, err := verifytest.Seed(context.Background(), st, "registry.example.com", paths, time.Now()); err != nil {
		b.Fatal(err)
	}
	st.Close()
	var out countingWriter
	for b.Loop() {
		var errOut bytes.Buffer
		out.n = 0
		if code := run([]string{"freshness", "--json", "--max-age", "1000h"}, &out, &errOut); code != exitOK {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
	b.ReportMetric(float64(out.n)/1000, "kB/output")
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
