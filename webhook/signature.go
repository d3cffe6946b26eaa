package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signed webhooks follow the Standard Webhooks scheme GitLab 19.0 sends
// when a hook has a signing token: the headers webhook-id (equal to
// Idempotency-Key), webhook-timestamp (Unix seconds) and webhook-signature,
// a space-separated list of "v1,<base64 HMAC-SHA256>" over
// "{webhook-id}.{webhook-timestamp}.{raw body}". The HMAC key is the
// base64-decoded part of the token after "whsec_".
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"

	// SigningTokenPrefix starts every signing token.
	SigningTokenPrefix = "whsec_"
	// MaxClockSkew is how far a delivery's timestamp may be from the
	// receiver's clock, either way: the replay window.
	MaxClockSkew = 5 * time.Minute
	// minSigningKey is the shortest key accepted; GitLab generates 32
	// bytes and the Standard Webhooks libraries require at least 24.
	minSigningKey = 24
	// maxSignatures bounds the work one request can ask for.
	maxSignatures = 8
)

// Errors of Verifier.Verify. None of them, nor their messages, contains a
// token, a key or a signature.
var (
	// ErrUnsigned: the request has no webhook-signature header.
	ErrUnsigned = errors.New("delivery is not signed")
	// ErrSignatureHeaders: webhook-id or webhook-timestamp is missing or
	// malformed, or webhook-signature holds no v1 signature.
	ErrSignatureHeaders = errors.New("malformed signature headers")
	// ErrTimestamp: the timestamp is more than MaxClockSkew off.
	ErrTimestamp = errors.New("signature timestamp too far from the receiver's clock")
	// ErrSignature: no signature matches any signing token.
	ErrSignature = errors.New("signature does not match any signing token")
)

// ParseSigningToken checks a signing token ("whsec_" + base64 of at least
// 24 random bytes) and returns its HMAC key. The error says what is wrong
// in the user's terms and never repeats the token.
func ParseSigningToken(token string) ([]byte, error) {
	rest, ok := strings.CutPrefix(token, SigningTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("a signing token starts with %q followed by base64 (generate one with: echo \"whsec_$(head -c 32 /dev/urandom | base64)\")", SigningTokenPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("the part after %q is not standard base64", SigningTokenPrefix)
	}
	if len(key) < minSigningKey {
		return nil, fmt.Errorf("the key after %q is %d bytes; want at least %d (GitLab generates 32)", SigningTokenPrefix, len(key), minSigningKey)
	}
	return key, nil
}

// GitLabKeySize is the only key size GitLab accepts for a hook's
// signing_token ("whsec_<base64> format encoding a 32-byte key").
const GitLabKeySize = 32

// CheckGitLabSigningToken checks a token depsd will install on GitLab
// hooks: ParseSigningToken's rules, and a key of exactly GitLabKeySize
// bytes, since GitLab refuses any other.
func CheckGitLabSigningToken(token string) error {
	key, err := ParseSigningToken(token)
	if err != nil {
		return err
	}
	if len(key) != GitLabKeySize {
		return fmt.Errorf("the key after %q is %d bytes; GitLab accepts only %d (generate one with: echo \"whsec_$(head -c 32 /dev/urandom | base64)\")", SigningTokenPrefix, len(key), GitLabKeySize)
	}
	return nil
}

// Verifier checks the signature of deliveries against one or more signing
// tokens: during a rotation both the new and the previous token verify. It
// does no I/O and keeps no state; it is safe for concurrent use.
type Verifier struct {
	keys [][]byte
}

// NewVerifier parses the signing tokens (at least one).
func NewVerifier(tokens ...string) (*Verifier, error) {
	if len(tokens) == 0 {
		return nil, errors.New("webhook: no signing token")
	}
	v := &Verifier{}
	for i, t := range tokens {
		k, err := ParseSigningToken(t)
		if err != nil {
			return nil, fmt.Errorf("webhook: signing token %d: %w", i+1, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// Verify checks one delivery: id, timestamp and signature are the values of
// the webhook-id, webhook-timestamp and webhook-signature headers, body the
// raw body. It returns nil when one of the signatures is the HMAC of the
// delivery under one of the tokens and the timestamp is within
// MaxClockSkew of now; else one of the Err* errors above. The comparison
// is constant-time for each candidate.
func (v *Verifier) Verify(id, timestamp, signature string, body []byte, now time.Time) error {
	if strings.TrimSpace(signature) == "" {
		return ErrUnsigned
	}
	if id == "" || timestamp == "" {
		return ErrSignatureHeaders
	}
	secs, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrSignatureHeaders
	}
	// Compared in seconds: a timestamp far outside time.Time's range must
	// not wrap around.
	if d := now.Unix() - secs; d > int64(MaxClockSkew/time.Second) || d < -int64(MaxClockSkew/time.Second) {
		return ErrTimestamp
	}
	var sigs [][]byte
	for _, f := range strings.Fields(signature) {
		if len(sigs) == maxSignatures {
			break
		}
		b64, ok := strings.CutPrefix(f, "v1,")
		if !ok {
			continue // another scheme (v1a is asymmetric): not ours to check
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != sha256.Size {
			continue
		}
		sigs = append(sigs, raw)
	}
	if len(sigs) == 0 {
		return ErrSignatureHeaders
	}
	for _, k := range v.keys {
		want := sum(k, id, timestamp, body)
		for _, s := range sigs {
			if hmac.Equal(want, s) {
				return nil
			}
		}
	}
	return ErrSignature
}

func sum(key []byte, id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// NewSigningToken makes a signing token as GitLab's documentation does:
// "whsec_" + base64 of 32 random bytes.
func NewSigningToken() (string, error) {
	key := make([]byte, GitLabKeySize)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SigningTokenPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// Sign returns the webhook-signature value GitLab sends for a delivery
// under token ("v1,<base64>"), and the webhook-timestamp value for at. It
// is what a sender does; the fake GitLab and tests use it.
func Sign(token, id string, at time.Time, body []byte) (signature, timestamp string, err error) {
	key, err := ParseSigningToken(token)
	if err != nil {
		return "", "", err
	}
	timestamp = strconv.FormatInt(at.Unix(), 10)
	return "v1," + base64.StdEncoding.EncodeToString(sum(key, id, timestamp, body)), timestamp, nil
}
