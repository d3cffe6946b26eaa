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
// panics, and with the right token (the secret of the project the body
// names) it answers 4xx only for malformed or oversized bodies, or 401
// for a body that names no project (no secret is right for it); an
// accepted event is always complete, and of that project.
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
		id, named := deliveredProject(body)
		switch {
		case w.Code == http.StatusOK, w.Code == http.StatusBadRequest, w.Code == http.StatusRequestEntityTooLarge:
		case w.Code == http.StatusUnauthorized && !named:
		default:
			t.Fatalf("status %d for event %q", w.Code, event)
		}
		for _, ev := range rec.events {
			if ev.projectID() != id {
				t.Fatalf("event of project %d recorded with the secret of project %d", ev.projectID(), id)
			}
		}
		for _, ev := range rec.events {
			if (ev.Pipeline == nil) == (ev.Push == nil) || ev.Key == "" {
				t.Fatalf("incomplete event %+v", ev)
			}
			if ev.Pipeline != nil && (ev.Pipeline.ProjectID == 0 || ev.Pipeline.PipelineID == 0 || ev.Pipeline.Status == "") {
				t.Fatalf("incomplete pipeline %+v", ev.Pipeline)
			}
		}
		_, derr := Decode(event, body, nil, nil, nil, time.Now())
		if w.Code == http.StatusBadRequest && !errors.Is(derr, ErrMalformed) {
			t.Fatalf("400 without a malformed body: %v", derr)
		}
	})
}

// FuzzVerify: whatever the headers and body, Verify never panics; what it
// accepts is signed by the token (a verifier with another token refuses
// it); and a delivery signed by the token, within the window, verifies,
// while the same with one byte of the body changed does not.
func FuzzVerify(f *testing.F) {
	f.Add("msg_1", "1793491200", "v1,AAAA v1,=", []byte(`{"a":1}`), int64(0))
	f.Add("", "", "", []byte{}, int64(-301))
	f.Add("id", "-1", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte("x"), int64(299))
	v, err := NewVerifier(tokenA)
	if err != nil {
		f.Fatal(err)
	}
	other, err := NewVerifier(tokenC)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, skew int64) {
		if v.Verify(id, ts, sig, body, signNow) == nil && other.Verify(id, ts, sig, body, signNow) == nil {
			t.Fatalf("one signature verified under two tokens: id %q ts %q sig %q", id, ts, sig)
		}
		if id == "" {
			return
		}
		skew %= 2 * int64(MaxClockSkew/time.Second)
		at := signNow.Add(time.Duration(skew) * time.Second)
		good, tsStr, err := Sign(tokenA, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Verify(id, tsStr, sig+" "+good, body, signNow)
		inWindow := skew <= int64(MaxClockSkew/time.Second) && skew >= -int64(MaxClockSkew/time.Second)
		if inWindow != (err == nil) {
			t.Fatalf("skew %ds: %v", skew, err)
		}
		if !inWindow {
			return
		}
		changed := append([]byte{}, body...)
		if len(changed) == 0 {
			changed = []byte{0}
		} else {
			changed[len(changed)/2]++
		}
		if v.Verify(id, tsStr, good, changed, signNow) == nil {
			t.Fatalf("a changed body verifies")
		}
	})
}
