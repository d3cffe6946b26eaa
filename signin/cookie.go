package signin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// signer signs the values of depsd's cookies with the key kept in the
// store (Store.SessionKey), so that every replica accepts the cookies
// another made. Each use has its own label, so a value signed for one
// cookie is not valid for another.
type signer struct{ key []byte }

func (s signer) mac(label, value string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(label))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return h.Sum(nil)
}

// sign returns value.signature, both base64url.
func (s signer) sign(label, value string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(value)) + "." + base64.RawURLEncoding.EncodeToString(s.mac(label, value))
}

// open checks a signed value and returns it; a forged or damaged one is
// an error.
func (s signer) open(label, signed string) (string, error) {
	v, sig, ok := strings.Cut(signed, ".")
	if !ok {
		return "", errForged
	}
	value, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", errForged
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(label, string(value))) {
		return "", errForged
	}
	return string(value), nil
}

// csrf is the CSRF token of a session: derived, so nothing more is kept.
func (s signer) csrf(sessionID string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", sessionID))
}

var errForged = errors.New("signature does not match")

// randomID is n random bytes, base64url.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// storedID is what the store knows of a session id: its SHA-256.
func storedID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// sealer encrypts the people's OAuth tokens before they are stored, with
// AES-256-GCM under a key derived from the OAuth application's secret
// (ui.oauth.client_secret_file): the state alone (a backup, a copy of the
// database) does not give a person's GitLab token; the state and the
// secret together do, as they give depsd itself. A new secret makes the
// stored tokens unreadable: people sign in again.
type sealer struct{ aead cipher.AEAD }

func newSealer(clientSecret string) (sealer, error) {
	key, err := hkdf.Key(sha256.New, []byte(clientSecret), nil, "depsd ui session tokens", 32)
	if err != nil {
		return sealer{}, fmt.Errorf("derive the session token key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealer{}, err
	}
	return sealer{aead: aead}, nil
}

// seal encrypts plain for the session id (the additional data: a sealed
// token moved to another session's row does not open).
func (s sealer) seal(id string, plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(id))
}

func (s sealer) open(id string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed token too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return nil, errors.New("the stored token does not open with this client secret")
	}
	return plain, nil
}
