package gitlab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const secret = "glpat-SuperSecret-1234567890"

// newStubServer answers every request with status and body, echoing the
// token wherever the body says TOKEN, like a misbehaving proxy might.
func newStubServer(t *testing.T, status int, body string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("PRIVATE-TOKEN")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "TOKEN", tok))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestTokenNeverLeaks(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"401 echoing the token", 401, `{"message":"401 Unauthorized: token TOKEN is invalid"}`},
		{"500 with a token URL", 500, `{"message":"upstream http://gitlab/api/v4/projects?private_token=TOKEN failed"}`},
		{"404 echoing the token", 404, `{"message":"404 TOKEN Not Found"}`},
		{"non-JSON 502 echoing the token", 502, `Bad gateway for PRIVATE-TOKEN: TOKEN`},
		{"429 echoing the token", 429, `slow down TOKEN`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := newStubServer(t, tt.status, tt.body)
			var logs bytes.Buffer
			c, err := New(Config{
				BaseURL: url, Token: secret, MaxRetries: 2,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Sleep:  (&recorder{}).sleep,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ReadBlob(context.Background(), 1, "0123456789abcdef0123456789abcdef01234567")
			if err == nil {
				t.Fatal("want an error")
			}
			for what, text := range map[string]string{
				"error":   err.Error(),
				"%+v":     fmt.Sprintf("%+v", err),
				"%#v":     fmt.Sprintf("%#v", err),
				"logs":    logs.String(),
				"config":  fmt.Sprint(c.cfg),
				"config#": fmt.Sprintf("%#v", c.cfg),
			} {
				if strings.Contains(text, secret) {
					t.Errorf("token leaked into %s: %s", what, text)
				}
			}
		})
	}
}

func TestTokenNotInNetworkErrors(t *testing.T) {
	// A closed port: the error comes from net/http with the full URL.
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	var logs bytes.Buffer
	c, err := New(Config{
		BaseURL: url + "/?private_token=" + secret, Token: secret, MaxRetries: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Sleep:  (&recorder{}).sleep,
	})
	if err != nil {
		// Rejecting such a URL is fine too, as long as the token is hidden.
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("token leaked: %v", err)
		}
		return
	}
	_, err = c.GetPipeline(context.Background(), 1, 1)
	if err == nil || !IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable network error", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
		t.Fatalf("token leaked: %v\n%s", err, logs.String())
	}
}

func TestConfigHidesToken(t *testing.T) {
	cfg := Config{BaseURL: "https://gitlab.example.com", Token: secret}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "cfg", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), buf.String()} {
		if strings.Contains(s, secret) {
			t.Fatalf("token visible: %s", s)
		}
	}
}

func TestNoCrossHostRedirect(t *testing.T) {
	var leaked bool
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Header.Get("PRIVATE-TOKEN") != ""
	}))
	defer evil.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusFound)
	}))
	defer redirect.Close()
	c, err := New(Config{BaseURL: redirect.URL, Token: secret, MaxRetries: -1, Sleep: (&recorder{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.GetPipeline(ctx, 1, 1); err == nil {
		t.Fatal("want an error for a cross-host redirect")
	}
	if leaked {
		t.Fatal("token sent to another host")
	}
}

// downgradeRedirect answers every https request with a redirect to the same
// URL over plain HTTP, as a misconfigured or tampered front of GitLab
// might, and records whether a plain-HTTP request carried the token.
type downgradeRedirect struct{ leaked atomic.Bool }

func (d *downgradeRedirect) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" {
		to := *r.URL
		to.Scheme = "http"
		h := http.Header{}
		h.Set("Location", to.String())
		return &http.Response{StatusCode: http.StatusFound, Header: h, Body: http.NoBody, Request: r}, nil
	}
	if r.Header.Get("PRIVATE-TOKEN") != "" {
		d.leaked.Store(true)
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"id":1,"project_id":1,"status":"success"}`)), Request: r}, nil
}

// TestNoRedirectToPlainHTTP: a redirect from https to http on the same
// host would send the token in clear (net/http keeps PRIVATE-TOKEN on a
// same-host redirect): refused.
func TestNoRedirectToPlainHTTP(t *testing.T) {
	tr := &downgradeRedirect{}
	c, err := New(Config{BaseURL: "https://gitlab.example.com", Token: secret, MaxRetries: -1, Sleep: (&recorder{}).sleep,
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.GetPipeline(ctx, 1, 1); err == nil {
		t.Error("want an error for a redirect to plain HTTP")
	}
	if tr.leaked.Load() {
		t.Fatal("token sent over plain HTTP")
	}
}
