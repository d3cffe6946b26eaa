package daemon

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// With --ui-listen, GitLab's address serves the webhook and the health
// checks only; the dashboard, API and metrics are on the UI address.
// Without it, one address serves everything.
func TestUIListenerSeparatesTheViews(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian:12\n"})
	gl := testClient(t, srv)
	start := func(ui bool) (mainURL, uiURL string) {
		cfg := testConfig(t, srv)
		addrs := make(chan string, 2)
		opts := Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, Listening: func(a string) { addrs <- "main " + a }}
		if ui {
			opts.UIListen = "127.0.0.1:0"
			opts.UIListening = func(a string) { addrs <- "ui " + a }
		}
		runDaemon(t, opts)
		want := 1
		if ui {
			want = 2
		}
		for range want {
			select {
			case a := <-addrs:
				kind, addr, _ := strings.Cut(a, " ")
				if kind == "ui" {
					uiURL = "http://" + addr
				} else {
					mainURL = "http://" + addr
				}
			case <-time.After(10 * time.Second):
				t.Fatal("daemon not listening") // the cleanup says why, if it ended
			}
		}
		return mainURL, uiURL
	}
	status := func(method, url string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	mainURL, uiURL := start(true)
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"POST", mainURL + "/hooks/gitlab", http.StatusUnauthorized}, // served: no token
		{"GET", mainURL + "/healthz", http.StatusOK},
		{"GET", mainURL + "/", http.StatusNotFound},
		{"GET", mainURL + "/graph", http.StatusNotFound},
		{"GET", mainURL + "/api/v1/chains", http.StatusNotFound},
		{"GET", mainURL + "/metrics", http.StatusNotFound},
		{"GET", uiURL + "/", http.StatusOK},
		{"GET", uiURL + "/graph", http.StatusOK},
		{"GET", uiURL + "/projects/g/app", http.StatusOK},
		{"GET", uiURL + "/health", http.StatusOK},
		{"GET", uiURL + "/api/v1/chains", http.StatusOK},
		{"GET", uiURL + "/metrics", http.StatusOK},
		{"GET", uiURL + "/readyz", http.StatusOK},
		{"POST", uiURL + "/hooks/gitlab", http.StatusNotFound},
	} {
		if got := status(tc.method, tc.url); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.url, got, tc.want)
		}
	}

	one, _ := start(false)
	for _, path := range []string{"/", "/graph", "/health", "/api/v1/chains", "/metrics"} {
		if got := status("GET", one+path); got != http.StatusOK {
			t.Errorf("without --ui-listen, GET %s: %d", path, got)
		}
	}
	if got := status("POST", one+"/hooks/gitlab"); got != http.StatusUnauthorized {
		t.Errorf("without --ui-listen, the webhook: %d", got)
	}
}
