package webhook

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzHandler: whatever the body and event header, the handler never
// panics, and with the right token it answers 4xx only for malformed or
// oversized bodies; an accepted event is always complete.
func FuzzHandler(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add("Pipeline Hook", b)
		f.Add("Push Hook", b)
	}
	f.Add("Pipeline Hook", []byte(`{"object_kind":"pipeline","project":{"id":7,"path_with_namespace":"a/b","default_branch":"main"},"object_attributes":{"id":1,"ref":"main","status":"success","finished_at":"x"}}`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		rec := &memRecorder{}
		h, err := NewHandler(Options{Secret: secret, Recorder: rec, MaxBody: 1 << 20, DependencyFiles: []string{"Containerfile"}})
		if err != nil {
			t.Fatal(err)
		}
		w := post(h, event, secret, "k", body)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for event %q", w.Code, event)
		}
		for _, ev := range rec.events {
			if (ev.Pipeline == nil) == (ev.Push == nil) || ev.Key == "" {
				t.Fatalf("incomplete event %+v", ev)
			}
			if ev.Pipeline != nil && (ev.Pipeline.ProjectID == 0 || ev.Pipeline.PipelineID == 0 || ev.Pipeline.Status == "") {
				t.Fatalf("incomplete pipeline %+v", ev.Pipeline)
			}
		}
		_, derr := Decode(event, body, nil, time.Now())
		if w.Code == http.StatusBadRequest && !errors.Is(derr, ErrMalformed) {
			t.Fatalf("400 without a malformed body: %v", derr)
		}
	})
}
