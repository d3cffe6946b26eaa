package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const secret = "s3cret-hook-token"

// memRecorder records events in memory, deduplicating by key, like the store.
type memRecorder struct {
	mu     sync.Mutex
	events []Event
	keys   map[string]bool
	err    error
}

func (m *memRecorder) Record(_ context.Context, ev Event) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false, m.err
	}
	if m.keys == nil {
		m.keys = map[string]bool{}
	}
	if m.keys[ev.Key] {
		return true, nil
	}
	m.keys[ev.Key] = true
	m.events = append(m.events, ev)
	return false, nil
}

type scopeSet map[int64]bool

func (s scopeSet) InScope(id int64) bool { return s[id] }

func newTestHandler(t *testing.T, rec Recorder, logs *bytes.Buffer) (*Handler, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var observed []string
	h, err := NewHandler(Options{
		Secret: secret, MaxBody: 64 << 10, DependencyFiles: []string{"Containerfile", "Dockerfile", ".gitlab-deps"},
		Recorder: rec, Scope: scopeSet{7: true},
		Observe: func(kind, outcome string) { mu.Lock(); observed = append(observed, kind+"/"+outcome); mu.Unlock() },
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
		Now:     func() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, &observed
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hookToken is the X-Gitlab-Token GitLab sends with a delivery of body
// when token is secret: the secret of the hook of the project body names
// (ProjectSecret); any other token as it is.
func hookToken(token string, body []byte) string {
	if id, ok := deliveredProject(body); ok && token == secret {
		return ProjectSecret(secret, id)
	}
	return token
}

// post sends a delivery with token as X-Gitlab-Token (secret standing for
// the right one: hookToken).
func post(h http.Handler, event, token, key string, body []byte) *httptest.ResponseRecorder {
	return send(h, event, hookToken(token, body), key, body)
}

// send sends a delivery with token as X-Gitlab-Token, whatever it is.
func send(h http.Handler, event, token, key string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
	if event != "" {
		r.Header.Set("X-Gitlab-Event", event)
	}
	if token != "" {
		r.Header.Set("X-Gitlab-Token", token)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerFixtures(t *testing.T) {
	tests := []struct {
		file, event string
		code        int
		outcome     string
		check       func(t *testing.T, ev Event)
	}{
		{"pipeline_success.json", "Pipeline Hook", 200, OutcomeAccepted, func(t *testing.T, ev Event) {
			p := ev.Pipeline
			if p == nil || p.ProjectID != 7 || p.Project != "containers/base" || p.Status != "success" || p.Ref != "main" || p.Source != "push" || p.PipelineID == 0 {
				t.Errorf("pipeline event %+v", p)
			}
			if p.At != time.Date(2016, 8, 12, 15, 26, 29, 0, time.UTC) {
				t.Errorf("finished_at not parsed: %v", p.At)
			}
		}},
		{"pipeline_success_api.json", "Pipeline Hook", 200, OutcomeAccepted, func(t *testing.T, ev Event) {
			if ev.Pipeline.Variables["DEPSD_ACTION_ID"] == "" || ev.Pipeline.Source != "api" {
				t.Errorf("depsd variables lost: %+v", ev.Pipeline)
			}
		}},
		{"pipeline_failed.json", "Pipeline Hook", 200, OutcomeAccepted, func(t *testing.T, ev Event) {
			if ev.Pipeline.Status != "failed" {
				t.Errorf("status %q", ev.Pipeline.Status)
			}
		}},
		{"pipeline_running.json", "Pipeline Hook", 200, OutcomeAccepted, func(t *testing.T, ev Event) {
			if ev.Pipeline.Status != "running" || !ev.Pipeline.At.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("running: %+v", ev.Pipeline)
			}
		}},
		{"pipeline_tag.json", "Pipeline Hook", 200, OutcomeIgnored, nil},
		{"pipeline_other_branch.json", "Pipeline Hook", 200, OutcomeIgnored, nil},
		{"push_default_branch.json", "Push Hook", 200, OutcomeAccepted, func(t *testing.T, ev Event) {
			p := ev.Push
			if p == nil || p.ProjectID != 7 || p.Ref != "main" || strings.Join(p.Changed, ",") != "Containerfile" || p.After == "" {
				t.Errorf("push event %+v", p)
			}
		}},
		{"push_no_depfile.json", "Push Hook", 200, OutcomeIgnored, nil},
		{"push_tag.json", "Tag Push Hook", 200, OutcomeIgnored, nil},
		{"merge_request.json", "Merge Request Hook", 200, OutcomeIgnored, nil},
		{"pipeline_success.json", "", 200, OutcomeIgnored, nil},
		{"push_default_branch.json", "Pipeline Hook", 400, OutcomeMalformed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.event, func(t *testing.T) {
			rec := &memRecorder{}
			h, observed := newTestHandler(t, rec, &bytes.Buffer{})
			w := post(h, tt.event, secret, "key-1", fixture(t, tt.file))
			if w.Code != tt.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			if got := (*observed)[0]; !strings.HasSuffix(got, "/"+tt.outcome) {
				t.Errorf("observed %q, want outcome %s", got, tt.outcome)
			}
			if tt.outcome != OutcomeAccepted {
				if len(rec.events) != 0 {
					t.Errorf("recorded %+v for an event that needs no action", rec.events)
				}
				return
			}
			if len(rec.events) != 1 || rec.events[0].Key != "key-1" {
				t.Fatalf("recorded %+v", rec.events)
			}
			tt.check(t, rec.events[0])
		})
	}
}

func TestHandlerRejectsForgedToken(t *testing.T) {
	for _, token := range []string{"", "forged-token-123", secret + "x", strings.ToUpper(secret)} {
		rec := &memRecorder{}
		var logs bytes.Buffer
		h, observed := newTestHandler(t, rec, &logs)
		w := post(h, "Pipeline Hook", token, "k", fixture(t, "pipeline_success.json"))
		if w.Code != http.StatusUnauthorized || len(rec.events) != 0 || (*observed)[0] != "pipeline/unauthorized" {
			t.Errorf("token %q: status %d, recorded %d", token, w.Code, len(rec.events))
		}
		if token != "" && (strings.Contains(logs.String(), token) || strings.Contains(w.Body.String(), token)) {
			t.Errorf("token %q echoed: log %q body %q", token, logs.String(), w.Body.String())
		}
		if strings.Contains(logs.String(), secret) || strings.Contains(w.Body.String(), secret) {
			t.Error("secret leaked")
		}
	}
}

func TestHandlerDedupesDeliveries(t *testing.T) {
	rec := &memRecorder{}
	h, observed := newTestHandler(t, rec, &bytes.Buffer{})
	body := fixture(t, "pipeline_success.json")
	post(h, "Pipeline Hook", secret, "delivery-1", body)
	w := post(h, "Pipeline Hook", secret, "delivery-1", body) // a resend
	if w.Code != 200 || len(rec.events) != 1 || (*observed)[1] != "pipeline/duplicate" {
		t.Errorf("resend: %d, %d recorded, %v", w.Code, len(rec.events), *observed)
	}
	// Without Idempotency-Key (older GitLab) the body identifies it.
	post(h, "Pipeline Hook", secret, "", body)
	post(h, "Pipeline Hook", secret, "", body)
	if len(rec.events) != 2 || !strings.HasPrefix(rec.events[1].Key, "sha256:") {
		t.Errorf("keyless deliveries: %+v", rec.events)
	}
}

func TestHandlerEdgeCases(t *testing.T) {
	rec := &memRecorder{}
	h, _ := newTestHandler(t, rec, &bytes.Buffer{})

	// Out of scope.
	other := bytes.Replace(fixture(t, "pipeline_success.json"), []byte(`"id": 7,`), []byte(`"id": 8,`), 1)
	if w := post(h, "Pipeline Hook", secret, "k2", other); w.Code != 200 || !strings.Contains(w.Body.String(), "outside") || len(rec.events) != 0 {
		t.Errorf("out of scope: %d %s", w.Code, w.Body)
	}
	// A child pipeline reports beside its parent: ignored.
	child := bytes.Replace(fixture(t, "pipeline_success.json"), []byte(`"source": "push"`), []byte(`"source": "parent_pipeline"`), 1)
	if w := post(h, "Pipeline Hook", secret, "k7", child); w.Code != 200 || !strings.Contains(w.Body.String(), "child pipeline") || len(rec.events) != 0 {
		t.Errorf("child pipeline: %d %s", w.Code, w.Body)
	}
	// Too large.
	big := append([]byte(`{"object_kind":"pipeline","x":"`), bytes.Repeat([]byte("a"), 70<<10)...)
	if w := post(h, "Pipeline Hook", secret, "k3", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("big body: %d", w.Code)
	}
	// Garbage: it names no project whose secret could be checked.
	if w := post(h, "Pipeline Hook", secret, "k4", []byte("{not json")); w.Code != http.StatusUnauthorized {
		t.Errorf("garbage: %d", w.Code)
	}
	// A body of the project whose secret it carries, but not the event
	// its header says.
	if w := post(h, "Pipeline Hook", secret, "k8", []byte(`{"object_kind":"push","project":{"id":7}}`)); w.Code != http.StatusBadRequest {
		t.Errorf("malformed: %d", w.Code)
	}
	// Wrong method.
	r := httptest.NewRequest(http.MethodGet, "/hooks/gitlab", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", w.Code)
	}
	// The store is down: 503, so the failure shows in GitLab's hook log.
	rec.err = errors.New("disk full")
	if w := post(h, "Pipeline Hook", secret, "k5", fixture(t, "pipeline_success.json")); w.Code != http.StatusServiceUnavailable {
		t.Errorf("recorder error: %d", w.Code)
	}
	var resp map[string]string
	if w := post(h, "Merge Request Hook", secret, "k6", fixture(t, "merge_request.json")); json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp["status"] != "ignored" {
		t.Errorf("ignored answer: %s", w.Body)
	}
}

func TestNewHandlerRequiresSecret(t *testing.T) {
	if _, err := NewHandler(Options{Recorder: &memRecorder{}}); err == nil {
		t.Error("no secret accepted")
	}
}

// TestHandlerBoundsHeadersItLogs: an unauthenticated sender chooses the
// X-Gitlab-Event header; a 1 MB one must not be written to the log (or
// echoed back) whole.
func TestHandlerBoundsHeadersItLogs(t *testing.T) {
	huge := strings.Repeat("A", 1<<20)
	for _, token := range []string{"forged", secret} {
		var logs bytes.Buffer
		h, _ := newTestHandler(t, &memRecorder{}, &logs)
		w := post(h, huge, token, "k", fixture(t, "pipeline_success.json"))
		if logs.Len() > 4<<10 || w.Body.Len() > 4<<10 {
			t.Errorf("token %q: %d bytes logged, %d answered for a 1 MB header", token, logs.Len(), w.Body.Len())
		}
	}
}
