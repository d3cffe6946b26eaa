package bench

import (
	"context"
	"net/http/httptest"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// startRecordingOnly serves depsd's webhook handler over its own store of
// the kind benchState picks, with the engine's recorder and nothing else:
// no inbox applies what it records. BenchmarkWebhookAck drives it beside
// the daemon to split depsd's acknowledgement into what recording each
// delivery costs and what applying the events meanwhile adds.
func startRecordingOnly(b *testing.B) (url string, stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, benchState(b))
	if err != nil {
		b.Fatal(err)
	}
	empty := deps.NewGraph()
	engine, err := chain.New(chain.Config{Store: st, Graph: func(context.Context) (*deps.Graph, error) { return empty, nil }})
	if err != nil {
		b.Fatal(err)
	}
	rec := engine.NewRecorder()
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	h, err := webhook.NewHandler(webhook.Options{Secret: hookSecret, Recorder: chainRecorder{rec}, DependencyFiles: []string{"Containerfile"}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	return srv.URL, func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		st.Close()
	}
}

// chainRecorder is the daemon's adapter of the engine's recorder to the
// webhook handler's.
type chainRecorder struct{ r *chain.Recorder }

func (c chainRecorder) Record(ctx context.Context, ev webhook.Event) (bool, error) {
	return c.r.Record(ctx, ev.Key, chain.Event{Pipeline: ev.Pipeline, Push: ev.Push})
}
