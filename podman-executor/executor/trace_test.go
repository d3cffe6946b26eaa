package executor

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// TestTracerTimesEachCall: a traced engine answers as the engine does and
// writes one line per call with its stage, call, argument and duration;
// a failed call is marked.
func TestTracerTimesEachCall(t *testing.T) {
	fake := container.NewFake(testImage)
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock }
	var out bytes.Buffer
	tr := NewTracer(&out, "prepare", now)
	eng := tr.Engine(fake)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		line string
	}{
		{"found", func() error {
			ok, err := eng.ImageExists(ctx, testImage)
			if !ok {
				return errors.New("image not found through the tracer")
			}
			return err
		}, "prepare ImageExists " + testImage + " 1.5"},
		{"not found", func() error {
			_, err := eng.Inspect(ctx, "gone")
			if !errors.Is(err, container.ErrNotFound) {
				return errors.New("ErrNotFound lost through the tracer")
			}
			return nil
		}, "prepare Inspect gone 1.5 error"},
		{"no argument", func() error {
			_, err := eng.List(ctx, nil)
			return err
		}, "prepare List - 1.5"},
		{"span", func() error {
			tr.Span("ChannelReady", "a b")(nil)
			return nil
		}, "prepare ChannelReady a_b 1.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out.Reset()
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != tc.line {
				t.Errorf("trace %q, want %q", got, tc.line)
			}
		})
	}
	var nilTracer *Tracer
	nilTracer.Span("Dial", "")(nil) // tracing off: nothing to write to, no panic
}
