package gitlabtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/webhook"
)

var testSigningToken = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

// apiJSON calls the fake's API with a JSON body and decodes the answer.
func apiJSON(t *testing.T, s *Server, method, path string, body any) (int, any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.APIURL()+path, rd)
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, out
}

func pathID(p string) string { return url.PathEscape(p) }

// The hooks API takes signing_token on create and update, never returns
// it, answers token_present and signing_token_present (GitLab 19.0+), and
// refuses a token that is not whsec_ + base64 of 32 bytes.
func TestHookSigningTokenAPI(t *testing.T) {
	tests := []struct {
		name        string
		signing     WebhookSigning
		token       string
		wantStatus  int
		wantPresent any // signing_token_present; nil when absent
		wantStored  string
	}{
		{"19.0", SigningSupported, testSigningToken, 201, true, testSigningToken},
		{"19.0 without a signing token", SigningSupported, "", 201, false, ""},
		{"19.0, bad token", SigningSupported, "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 24)), 400, nil, ""},
		{"19.0 with the flag off: ignored", SigningFlagOff, testSigningToken, 201, false, ""},
		{"before 19.0: ignored, no fields", SigningUnsupported, testSigningToken, 201, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			seed(t, s, "g/a")
			s.SetWebhookSigning(tt.signing)
			body := map[string]any{"url": "https://depsd.example.com/hooks/gitlab", "token": "t", "pipeline_events": true}
			if tt.token != "" {
				body["signing_token"] = tt.token
			}
			code, out := apiJSON(t, s, "POST", "/projects/"+pathID("g/a")+"/hooks", body)
			if code != tt.wantStatus {
				t.Fatalf("status %d %v", code, out)
			}
			if code != 201 {
				if !strings.Contains(toJSON(out), "signing_token") || strings.Contains(toJSON(out), tt.token[6:]) {
					t.Fatalf("refusal %v", out)
				}
				return
			}
			for _, o := range []any{out, getJSON(t, s, "/projects/"+pathID("g/a")+"/hooks")} {
				h, ok := o.(map[string]any)
				if !ok {
					h = o.([]any)[0].(map[string]any)
				}
				if _, ok := h["signing_token"]; ok || strings.Contains(toJSON(h), "whsec_") {
					t.Fatalf("the signing token is returned: %v", h)
				}
				if h["signing_token_present"] != tt.wantPresent {
					t.Fatalf("signing_token_present %v, want %v", h["signing_token_present"], tt.wantPresent)
				}
				if _, ok := h["token_present"]; ok == (tt.signing == SigningUnsupported) {
					t.Fatalf("token_present %v", h)
				}
			}
			if got := s.Hooks("g/a")[0].SigningToken; got != tt.wantStored {
				t.Fatalf("stored signing token %q", got)
			}
			if tt.signing != SigningSupported {
				return
			}
			// Update: sets and clears.
			id := itoa(s.Hooks("g/a")[0].ID)
			if code, out := apiJSON(t, s, "PUT", "/projects/"+pathID("g/a")+"/hooks/"+id, map[string]any{"signing_token": ""}); code != 200 || out.(map[string]any)["signing_token_present"] != false {
				t.Fatalf("clear: %d %v", code, out)
			}
			if code, out := apiJSON(t, s, "PUT", "/projects/"+pathID("g/a")+"/hooks/"+id, map[string]any{"signing_token": testSigningToken}); code != 200 || out.(map[string]any)["signing_token_present"] != true {
				t.Fatalf("set: %d %v", code, out)
			}
		})
	}
}

func getJSON(t *testing.T, s *Server, path string) any {
	t.Helper()
	code, out := apiJSON(t, s, "GET", path, nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %v", path, code, out)
	}
	return out
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// A hook with a signing token gets Standard Webhooks headers that verify
// under the token (webhook-id equal to Idempotency-Key, the timestamp of
// the attempt); a resend keeps the id. Without a token, or with signing
// off, no signature.
func TestSignedDeliveries(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := New(Options{Now: func() time.Time { return now }})
	defer s.Close()
	seed(t, s, "g/a")
	signed, plain := newReceiver(t), newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: signed.URL, Token: "t", SigningToken: testSigningToken, Events: []string{"push_events"}}))
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: plain.URL, Token: "t", Events: []string{"push_events"}}))
	v, err := webhook.NewVerifier(testSigningToken)
	if err != nil {
		t.Fatal(err)
	}
	mustDo[string](t)(s.SetFile("g/a", "Containerfile", "FROM debian:12\n"))
	r := signed.next(t)
	h := r.header
	if h.Get("webhook-id") == "" || h.Get("webhook-id") != h.Get("Idempotency-Key") || h.Get("webhook-timestamp") != "1793534400" {
		t.Fatalf("headers %v", h)
	}
	if err := v.Verify(h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), r.body, now); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if p := plain.next(t); p.header.Get("webhook-signature") != "" || p.header.Get("webhook-id") != "" {
		t.Fatalf("unsigned hook got %v", p.header)
	}
	ds := mustDo[[]Delivery](t)(s.WaitDeliveries(testCtx(t), 2))
	now = now.Add(time.Minute)
	mustDo[int64](t)(s.Resend(ds[0].ID))
	re := signed.next(t)
	if re.header.Get("webhook-id") != h.Get("webhook-id") || re.header.Get("webhook-timestamp") != "1793534460" {
		t.Fatalf("resend headers %v", re.header)
	}
	if err := v.Verify(re.header.Get("webhook-id"), re.header.Get("webhook-timestamp"), re.header.Get("webhook-signature"), re.body, now); err != nil {
		t.Fatalf("resend signature: %v", err)
	}
	s.SetWebhookSigning(SigningFlagOff)
	mustDo[string](t)(s.SetFile("g/a", "Containerfile", "FROM debian:13\n"))
	if off := signed.next(t); off.header.Get("webhook-signature") != "" {
		t.Fatalf("signed with the flag off: %v", off.header)
	}
}
