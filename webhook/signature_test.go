package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tokens as GitLab's docs generate them: "whsec_" + base64 of 32 bytes.
var (
	tokenA = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa1}, 32))
	tokenB = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xb2}, 32))
	tokenC = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xc3}, 32))
)

var signNow = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// refSign computes a signature the long way, from the spec's words and
// without the package's code, so the tests do not only check Sign against
// Verify: "v1," + base64 of HMAC-SHA256, keyed with the base64-decoded
// token after "whsec_", over "{id}.{timestamp}.{body}".
func refSign(t *testing.T, token, id string, ts int64, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(token, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + string(body)))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign, what the fake GitLab and the tests send with, signs as the spec
// says.
func TestSignMatchesTheSpec(t *testing.T) {
	body := []byte(`{"object_kind":"pipeline"}`)
	sig, ts, err := Sign(tokenA, "id-1", signNow, body)
	if err != nil {
		t.Fatal(err)
	}
	if ts != strconv.FormatInt(signNow.Unix(), 10) || sig != refSign(t, tokenA, "id-1", signNow.Unix(), body) {
		t.Errorf("Sign = %q at %q, want %q at %d", sig, ts, refSign(t, tokenA, "id-1", signNow.Unix(), body), signNow.Unix())
	}
}

// A signature from the Standard Webhooks specification's own example
// (secret, id, timestamp, payload and signature as published there), so
// the scheme is checked against an independent sender.
func TestVerifyStandardWebhooksExample(t *testing.T) {
	const (
		tok = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id  = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts  = "1614265330"
		sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	body := []byte(`{"test": 2432232314}`)
	// The example's key is 24 bytes, the minimum.
	v, err := NewVerifier(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(id, ts, sig, body, time.Unix(1614265330, 0)); err != nil {
		t.Fatalf("the specification's example does not verify: %v", err)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"object_kind":"pipeline"}`)
	const id = "2f0d0a4e-6a8b-4b5e-9d1c-0c2d9e0f1a2b"
	ts := signNow.Unix()
	good := refSign(t, tokenA, id, ts, body)
	prev := refSign(t, tokenB, id, ts, body)
	tests := []struct {
		name      string
		tokens    []string
		id, ts    string
		signature string
		body      []byte
		want      error
	}{
		{"valid", []string{tokenA}, id, strconv.FormatInt(ts, 10), good, body, nil},
		{"one of several signatures", []string{tokenA}, id, strconv.FormatInt(ts, 10), refSign(t, tokenC, id, ts, body) + " " + good, body, nil},
		{"other schemes skipped", []string{tokenA}, id, strconv.FormatInt(ts, 10), "v1a,AAAA v2,xyz " + good, body, nil},
		{"rotation: previous token still verifies", []string{tokenA, tokenB}, id, strconv.FormatInt(ts, 10), prev, body, nil},
		{"rotation: new token verifies", []string{tokenB, tokenA}, id, strconv.FormatInt(ts, 10), good, body, nil},
		{"wrong key", []string{tokenC}, id, strconv.FormatInt(ts, 10), good, body, ErrSignature},
		{"body changed", []string{tokenA}, id, strconv.FormatInt(ts, 10), good, append([]byte(" "), body...), ErrSignature},
		{"id changed", []string{tokenA}, id + "x", strconv.FormatInt(ts, 10), good, body, ErrSignature},
		{"timestamp changed within the window", []string{tokenA}, id, strconv.FormatInt(ts+1, 10), good, body, ErrSignature},
		{"4m59s old", []string{tokenA}, id, strconv.FormatInt(ts-299, 10), refSign(t, tokenA, id, ts-299, body), body, nil},
		{"exactly 5m old", []string{tokenA}, id, strconv.FormatInt(ts-300, 10), refSign(t, tokenA, id, ts-300, body), body, nil},
		{"exactly 5m in the future", []string{tokenA}, id, strconv.FormatInt(ts+300, 10), refSign(t, tokenA, id, ts+300, body), body, nil},
		{"5m01s old", []string{tokenA}, id, strconv.FormatInt(ts-301, 10), refSign(t, tokenA, id, ts-301, body), body, ErrTimestamp},
		{"5m01s in the future", []string{tokenA}, id, strconv.FormatInt(ts+301, 10), refSign(t, tokenA, id, ts+301, body), body, ErrTimestamp},
		{"timestamp beyond int range", []string{tokenA}, id, "99999999999999999999", good, body, ErrSignatureHeaders},
		{"huge negative timestamp", []string{tokenA}, id, "-9223372036854775808", good, body, ErrTimestamp},
		{"timestamp in milliseconds", []string{tokenA}, id, strconv.FormatInt(ts*1000, 10), good, body, ErrTimestamp},
		{"no signature", []string{tokenA}, id, strconv.FormatInt(ts, 10), "", body, ErrUnsigned},
		{"no id", []string{tokenA}, "", strconv.FormatInt(ts, 10), good, body, ErrSignatureHeaders},
		{"no timestamp", []string{tokenA}, id, "", good, body, ErrSignatureHeaders},
		{"no v1 signature", []string{tokenA}, id, strconv.FormatInt(ts, 10), "v1a,abc", body, ErrSignatureHeaders},
		{"signature without scheme", []string{tokenA}, id, strconv.FormatInt(ts, 10), strings.TrimPrefix(good, "v1,"), body, ErrSignatureHeaders},
		{"truncated signature", []string{tokenA}, id, strconv.FormatInt(ts, 10), good[:len(good)-4], body, ErrSignatureHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVerifier(tt.tokens...)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(tt.id, tt.ts, tt.signature, tt.body, signNow)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseSigningToken(t *testing.T) {
	tests := []struct {
		token   string
		wantErr string // in the message; "" for valid
	}{
		{tokenA, ""},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 24)), ""},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23)), "23 bytes; want at least 24"},
		{strings.TrimPrefix(tokenA, "whsec_"), `starts with "whsec_"`},
		{"whsec_not base64!", "not standard base64"},
		{"whsec_" + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), "not standard base64"},
		{"", `starts with "whsec_"`},
	}
	for _, tt := range tests {
		_, err := ParseSigningToken(tt.token)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.token, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want %q", tt.token, err, tt.wantErr)
		case err != nil && len(tt.token) > len("whsec_") && strings.Contains(err.Error(), strings.TrimPrefix(tt.token, "whsec_")):
			t.Errorf("the error repeats the token: %v", err)
		}
	}
}

// signedPost sends a delivery with the Standard Webhooks headers (sig ""
// for none), Idempotency-Key equal to webhook-id as GitLab sends it, and,
// if token is set, X-Gitlab-Token.
func signedPost(h http.Handler, token, id string, ts int64, sig string, body []byte) *httptest.ResponseRecorder {
	return signedPostKey(h, token, id, id, ts, sig, body)
}

// signedPostKey is signedPost with an Idempotency-Key of its own (""
// for none): the header is not signed, so a replayer can change it.
func signedPostKey(h http.Handler, token, id, idempotencyKey string, ts int64, sig string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
	r.Header.Set("X-Gitlab-Event", "Pipeline Hook")
	if token != "" {
		r.Header.Set("X-Gitlab-Token", token)
	}
	if idempotencyKey != "" {
		r.Header.Set("Idempotency-Key", idempotencyKey)
	}
	if id != "" {
		r.Header.Set(HeaderWebhookID, id)
	}
	if sig != "" {
		r.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
		r.Header.Set(HeaderWebhookSignature, sig)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerSigningModes(t *testing.T) {
	body := fixture(t, "pipeline_success.json")
	ts := signNow.Unix()
	const id = "d1"
	sigA := refSign(t, tokenA, id, ts, body)
	sigOld := refSign(t, tokenA, id, ts-600, body)
	sigC := refSign(t, tokenC, id, ts, body)
	type delivery struct {
		token string
		sig   string
		ts    int64
	}
	tests := []struct {
		name    string
		signing string
		tokens  []string
		d       delivery
		code    int
	}{
		{"auto: signed", SigningAuto, []string{tokenA}, delivery{"", sigA, ts}, 200},
		{"auto: signed, with a wrong X-Gitlab-Token too", SigningAuto, []string{tokenA}, delivery{"wrong", sigA, ts}, 200},
		{"auto: unsigned with the secret", SigningAuto, []string{tokenA}, delivery{secret, "", ts}, 200},
		{"auto: unsigned without the secret", SigningAuto, []string{tokenA}, delivery{"", "", ts}, 401},
		{"auto: wrong signature, right secret", SigningAuto, []string{tokenA}, delivery{secret, sigC, ts}, 401},
		{"auto: old signature, right secret", SigningAuto, []string{tokenA}, delivery{secret, sigOld, ts - 600}, 401},
		{"auto: no signing token, signature ignored", SigningAuto, nil, delivery{secret, sigC, ts}, 200},
		{"auto: no signing token, secret still needed", SigningAuto, nil, delivery{"", sigA, ts}, 401},
		{"required: signed", SigningRequired, []string{tokenA}, delivery{"", sigA, ts}, 200},
		{"required: signed with the previous token", SigningRequired, []string{tokenC, tokenA}, delivery{"", sigA, ts}, 200},
		{"required: unsigned with the secret", SigningRequired, []string{tokenA}, delivery{secret, "", ts}, 401},
		{"required: wrong key", SigningRequired, []string{tokenC}, delivery{secret, sigA, ts}, 401},
		{"required: 10 minutes old", SigningRequired, []string{tokenA}, delivery{"", sigOld, ts - 600}, 401},
		{"off: signature ignored, secret checked", SigningOff, []string{tokenA}, delivery{secret, sigC, ts}, 200},
		{"off: valid signature is not enough", SigningOff, []string{tokenA}, delivery{"", sigA, ts}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &memRecorder{}
			var logs bytes.Buffer
			h, err := NewHandler(Options{Secret: secret, Signing: tt.signing, SigningTokens: tt.tokens, Recorder: rec,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return signNow }})
			if err != nil {
				t.Fatal(err)
			}
			w := signedPost(h, tt.d.token, id, tt.d.ts, tt.d.sig, body)
			if w.Code != tt.code {
				t.Fatalf("status %d (%s), want %d", w.Code, strings.TrimSpace(w.Body.String()), tt.code)
			}
			if (tt.code == 200) != (len(rec.events) == 1) {
				t.Fatalf("recorded %d events", len(rec.events))
			}
			assertNoSecret(t, logs.String()+w.Body.String(), tt.d.sig, tt.d.token)
		})
	}
}

// assertNoSecret fails when any token, key or signature shows in out.
func assertNoSecret(t *testing.T, out string, sent ...string) {
	t.Helper()
	for _, s := range append([]string{secret, tokenA, tokenB, tokenC}, sent...) {
		if s == "" {
			continue
		}
		for _, part := range []string{s, strings.TrimPrefix(s, "whsec_"), strings.TrimPrefix(s, "v1,")} {
			if len(part) >= 8 && strings.Contains(out, part) {
				t.Errorf("%q leaks into the log or answer:\n%s", part, out)
			}
		}
	}
}

// A replay of a signed delivery inside the window carries the same
// webhook-id: a duplicate, recorded once, whatever Idempotency-Key the
// replayer sets (that header is not signed). A delivery is keyed by its
// signed webhook-id, never by an Idempotency-Key that differs from it.
func TestHandlerDedupesOnWebhookID(t *testing.T) {
	rec := &memRecorder{}
	h, err := NewHandler(Options{Secret: secret, SigningTokens: []string{tokenA}, Recorder: rec, Now: func() time.Time { return signNow }})
	if err != nil {
		t.Fatal(err)
	}
	body := fixture(t, "pipeline_success.json")
	ts := signNow.Unix()
	first := signedPost(h, "", "id-1", ts, refSign(t, tokenA, "id-1", ts, body), body)
	replay := signedPostKey(h, "", "id-1", "fresh-key", ts+30, refSign(t, tokenA, "id-1", ts+30, body), body)
	if first.Code != 200 || replay.Code != 200 || !strings.Contains(replay.Body.String(), OutcomeDuplicate) {
		t.Fatalf("first %d, replay with a new Idempotency-Key %d %s", first.Code, replay.Code, replay.Body.String())
	}
	// Another delivery (its own webhook-id) carrying the first one's
	// Idempotency-Key is not its duplicate.
	other := signedPostKey(h, "", "id-2", "id-1", ts, refSign(t, tokenA, "id-2", ts, body), body)
	if other.Code != 200 || strings.Contains(other.Body.String(), OutcomeDuplicate) {
		t.Fatalf("a new webhook-id with an old Idempotency-Key: %d %s", other.Code, other.Body.String())
	}
	if len(rec.events) != 2 || rec.events[0].Key != "id-1" || rec.events[1].Key != "id-2" {
		t.Fatalf("recorded %+v", rec.events)
	}
}

func TestNewHandlerSigningOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"required without a token", Options{Secret: secret, Signing: SigningRequired}, "no signing token"},
		{"required needs no secret", Options{Signing: SigningRequired, SigningTokens: []string{tokenA}}, ""},
		{"auto needs the secret", Options{SigningTokens: []string{tokenA}}, "secret token is required"},
		{"bad token", Options{Secret: secret, SigningTokens: []string{tokenA, "whsec_short"}}, "signing token 2"},
		{"bad mode", Options{Secret: secret, Signing: "yes"}, `signing mode "yes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Recorder = &memRecorder{}
			_, err := NewHandler(tt.opts)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "short") {
				t.Fatalf("the error repeats the token: %v", err)
			}
		})
	}
}
