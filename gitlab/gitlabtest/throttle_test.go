package gitlabtest

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPipelineCreationLimit checks the throttle's answer byte for byte and
// its keys: per project and commit, and per user across projects.
func TestPipelineCreationLimit(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	srv := New(Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	defer srv.Close()
	a, _ := srv.AddProject(Project{Path: "g/a", Files: map[string]string{"x": "y"}})
	b, _ := srv.AddProject(Project{Path: "g/b", Files: map[string]string{"x": "y"}})
	create := func(id int64) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.APIURL()+"/projects/"+itoa(id)+"/pipeline", strings.NewReader(`{"ref":"main"}`))
		req.Header.Set("PRIVATE-TOKEN", srv.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	const throttled = `{"message":{"base":["Too many pipelines created in the last minute. Try again later."]}}`

	srv.SetPipelineCreationLimit(PipelineCreationLimit{PerProjectCommitUser: 1})
	if code, _ := create(a); code != http.StatusCreated {
		t.Fatalf("first create: %d", code)
	}
	if code, body := create(a); code != http.StatusBadRequest || body != throttled {
		t.Fatalf("second create of g/a: %d %s", code, body)
	}
	if code, _ := create(b); code != http.StatusCreated {
		t.Fatalf("g/b is not throttled by g/a: %d", code)
	}
	if n := len(srv.Pipelines("g/a")); n != 1 {
		t.Fatalf("throttled create made a pipeline: %d", n)
	}

	srv.SetPipelineCreationLimit(PipelineCreationLimit{PerUser: 2})
	create(a)
	create(b)
	if code, body := create(b); code != http.StatusBadRequest || body != throttled {
		t.Fatalf("third create by the user: %d %s", code, body)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if code, _ := create(a); code != http.StatusCreated {
		t.Fatalf("next minute: %d", code)
	}
}
