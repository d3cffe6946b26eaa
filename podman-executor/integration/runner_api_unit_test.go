package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFakeJobsAPIAnswersAsGitLab checks the fake's answers that the real
// runner's behaviour depends on, without a runner: the status codes and
// headers of lib/api/ci/runner.rb.
func TestFakeJobsAPIAnswersAsGitLab(t *testing.T) {
	api := startJobsAPI(t)
	j := api.newJob(42, "true")
	api.enqueue(j)
	do := func(method, path string, hdr map[string]string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, strings.TrimSuffix(api.url, "/")+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	request := func(token string) *http.Response {
		b, _ := json.Marshal(map[string]string{"token": token})
		return do(http.MethodPost, "/api/v4/jobs/request", nil, string(b))
	}
	trace := fmt.Sprintf("/api/v4/jobs/%d/trace", j.payload.ID)
	tok := map[string]string{"JOB-TOKEN": j.payload.Token}
	withRange := func(r string) map[string]string {
		return map[string]string{"JOB-TOKEN": j.payload.Token, "Content-Range": r}
	}
	update := func(token, state string) *http.Response {
		b, _ := json.Marshal(map[string]any{"token": token, "state": state})
		return do(http.MethodPut, fmt.Sprintf("/api/v4/jobs/%d", j.payload.ID), nil, string(b))
	}

	for _, step := range []struct {
		name      string
		call      func() *http.Response
		code      int
		header    string // "Name: value" wanted, if any
		thenCheck func() error
	}{
		{"wrong runner token", func() *http.Response { return request("glrt-wrong") }, 403, "", nil},
		{"a job", func() *http.Response { return request(api.token) }, 201, "", nil},
		{"no more jobs", func() *http.Response { return request(api.token) }, 204, "", nil},
		{"trace without Content-Range", func() *http.Response { return do(http.MethodPatch, trace, tok, "x") }, 400, "", nil},
		{"trace with a wrong job token", func() *http.Response {
			return do(http.MethodPatch, trace, map[string]string{"JOB-TOKEN": "glcbt-wrong", "Content-Range": "0-4"}, "hello")
		}, 403, "", nil},
		{"first trace patch", func() *http.Response { return do(http.MethodPatch, trace, withRange("0-4"), "hello") }, 202, "Range: 0-5", nil},
		{"patch at a wrong offset", func() *http.Response { return do(http.MethodPatch, trace, withRange("3-5"), "abc") }, 416, "Range: 0-5", nil},
		{"next patch", func() *http.Response { return do(http.MethodPatch, trace, withRange("5-10"), " world") }, 202, "Job-Status: running", func() error {
			if got := j.log(); got != "hello world" {
				return fmt.Errorf("log %q, want %q", got, "hello world")
			}
			return nil
		}},
		{"canceled: trace refused", func() *http.Response {
			j.cancel("canceled")
			return do(http.MethodPatch, trace, withRange("11-11"), "!")
		}, 403, "Job-Status: canceled", nil},
		{"canceled: update refused", func() *http.Response { return update(j.payload.Token, "failed") }, 403, "Job-Status: canceled", nil},
		{"canceling: trace accepted", func() *http.Response {
			j.cancel("canceling")
			return do(http.MethodPatch, trace, withRange("11-11"), "!")
		}, 202, "Job-Status: canceling", nil},
		{"canceling: final update accepted", func() *http.Response { return update(j.payload.Token, "failed") }, 200, "Job-Status: canceling", func() error {
			if u, _ := j.final(); u.State != "failed" {
				return fmt.Errorf("final state %q", u.State)
			}
			return nil
		}},
		{"after the end: refused", func() *http.Response { return do(http.MethodPatch, trace, withRange("12-12"), "!") }, 403, "Job-Status: canceled", nil},
	} {
		resp := step.call()
		if resp.StatusCode != step.code {
			t.Errorf("%s: status %d, want %d", step.name, resp.StatusCode, step.code)
		}
		if step.header != "" {
			k, v, _ := strings.Cut(step.header, ": ")
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", step.name, k, got, v)
			}
		}
		if step.thenCheck != nil {
			if err := step.thenCheck(); err != nil {
				t.Errorf("%s: %v", step.name, err)
			}
		}
	}
}
