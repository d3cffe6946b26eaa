package bench

import (
	"context"
	"net/http/httptest"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/webhook"
)

// startRecordingOnly serves depsd's webhook handler over its own store of
// the kind benchState picks, with the engine's recorder and nothing else:
// no inbox applies what it records. BenchmarkWebhookAck drives it beside
// the daemon to split depsd's acknowledgement into what recording each
// delivery costs and what applying the events meanwhile adds.
func startRecordingOnly(b *testing.B) (url string, stop func()) {
	b.Helper()
	h, stopHandler, err := recordingOnlyHandler(context.Background(), benchState(b))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	return srv.URL, func() {
		srv.Close()
		if err := stopHandler(); err != nil {
			b.Error(err)
		}
	}
}

// chainRecorder is the daemon's adapter of the engine's recorder to the
// webhook handler's.
type chainRecorder struct{ r *chain.Recorder }

func (c chainRecorder) Record(ctx context.Context, ev webhook.Event) (bool, error) {
	return c.r.Record(ctx, ev.Key, chain.Event{Pipeline: ev.Pipeline, Push: ev.Push})
}
