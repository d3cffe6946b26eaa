package gitlab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"gitlab.com/depsd/depsd/buildinfo"
)

// TestUserAgentNamesTheBuild: GitLab admins can tell depsd's traffic, and
// its version, apart in their logs.
func TestUserAgentNamesTheBuild(t *testing.T) {
	var (
		mu     sync.Mutex
		agents []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.Header.Get("User-Agent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	}))
	defer srv.Close()
	for _, tt := range []struct{ configured, want string }{
		{"", "depsd/" + buildinfo.Version()},
		{"depsd-test/1", "depsd-test/1"},
	} {
		mu.Lock()
		agents = nil
		mu.Unlock()
		c, err := New(Config{BaseURL: srv.URL, Token: "t", RequestsPerMinute: -1, MaxRetries: -1, UserAgent: tt.configured})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListHooks(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(agents) != 1 || agents[0] != tt.want {
			t.Errorf("User-Agent %q, want %q", agents, tt.want)
		}
		mu.Unlock()
	}
}
