package gitlabtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// fixtureDir holds GitLab's documented example payloads, shared with the
// webhook package.
const fixtureDir = "../../webhook/testdata"

// TestFixturesParse checks that every fixture decodes with client-go into
// the event type its X-Gitlab-Event header selects.
func TestFixturesParse(t *testing.T) {
	tests := []struct {
		file  string
		event gl.EventType
		want  any
	}{
		{"pipeline_success.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_success_api.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_failed.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_running.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_tag.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_other_branch.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"pipeline_merge_request.json", gl.EventTypePipeline, &gl.PipelineEvent{}},
		{"push_default_branch.json", gl.EventTypePush, &gl.PushEvent{}},
		{"push_no_depfile.json", gl.EventTypePush, &gl.PushEvent{}},
		{"push_tag.json", gl.EventTypeTagPush, &gl.TagEvent{}},
		{"merge_request.json", gl.EventTypeMergeRequest, &gl.MergeEvent{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(fixtureDir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := gl.ParseWebhook(tt.event, b)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%T", ev), fmt.Sprintf("%T", tt.want); got != want {
				t.Fatalf("decoded %s, want %s", got, want)
			}
			if pe, ok := ev.(*gl.PipelineEvent); ok && (pe.Project.ID != 7 || pe.ObjectAttributes.ID == 0) {
				t.Errorf("pipeline fixture: project %d, pipeline %d", pe.Project.ID, pe.ObjectAttributes.ID)
			}
		})
	}
}

// TestPayloadShapesMatchFixtures renders the fake's own payloads over
// HTTP and compares their key sets, recursively, with the fixtures, so the
// fake and GitLab's documented examples cannot drift apart.
func TestPayloadShapesMatchFixtures(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "containers/base")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("containers/base", Hook{URL: rc.URL, Token: "t", Events: []string{"pipeline_events", "push_events"}}))
	id := apiCreatePipeline(t, s, "containers/base", `{"ref":"main","variables":[{"key":"DEPSD_CHAIN_ID","value":"c1"}]}`)
	failed := mustDo[int64](t)(s.RunPipeline("containers/base", "main", ""))
	for _, step := range []struct {
		id     int64
		status string
	}{{id, "pending"}, {id, "running"}, {id, "success"}, {failed, "running"}, {failed, "failed"}} {
		if err := s.SetPipelineStatus(step.id, step.status); err != nil {
			t.Fatal(err)
		}
	}
	mustDo[string](t)(s.SetFile("containers/base", "Containerfile", "FROM debian:12\n"))
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	fake := map[string][]byte{} // by status, and "push"
	for range 6 {
		r := rc.next(t)
		ev, err := gl.ParseWebhook(gl.EventType(r.header.Get("X-Gitlab-Event")), r.body)
		if err != nil {
			t.Fatalf("client-go cannot parse the fake's %s: %v", r.header.Get("X-Gitlab-Event"), err)
		}
		switch ev := ev.(type) {
		case *gl.PipelineEvent:
			fake[ev.ObjectAttributes.Status] = r.body
		case *gl.PushEvent:
			fake["push"] = r.body
		default:
			t.Fatalf("unexpected %T", ev)
		}
	}
	tests := []struct{ fixture, fake string }{
		{"pipeline_success.json", "success"},
		{"pipeline_success_api.json", "success"},
		{"pipeline_tag.json", "success"},
		{"pipeline_other_branch.json", "success"},
		{"pipeline_failed.json", "failed"},
		{"pipeline_running.json", "running"},
		{"pipeline_running.json", "pending"},
		{"push_default_branch.json", "push"},
		{"push_no_depfile.json", "push"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.fake, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(fixtureDir, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(fake[tt.fake], &got); err != nil {
				t.Fatalf("fake %s payload: %v", tt.fake, err)
			}
			for _, d := range shapeDiff("", want, got) {
				t.Error(d)
			}
		})
	}
}

// shapeDiff lists the keys present in one object and not the other, at
// every level. null on either side matches anything (GitLab sends null for
// absent objects and times); arrays are compared by their first elements.
func shapeDiff(at string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			if got == nil {
				return nil
			}
			return []string{at + ": fixture has an object, fake has " + jsonKind(got)}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok {
				out = append(out, at+"."+k+": in the fixture, missing from the fake")
				continue
			}
			out = append(out, shapeDiff(at+"."+k, w[k], g[k])...)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				out = append(out, at+"."+k+": sent by the fake, not in the fixture")
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			if got == nil {
				return nil
			}
			return []string{at + ": fixture has an array, fake has " + jsonKind(got)}
		}
		if len(w) == 0 || len(g) == 0 {
			return nil
		}
		return shapeDiff(at+"[0]", w[0], g[0])
	case nil:
		return nil
	default:
		if got != nil && jsonKind(got) != jsonKind(want) {
			return []string{at + ": fixture has " + jsonKind(want) + ", fake has " + jsonKind(got)}
		}
		return nil
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestShapeDiff(t *testing.T) {
	var want, got any
	_ = json.Unmarshal([]byte(`{"a":1,"o":{"x":1,"y":null},"l":[{"k":1}],"n":null}`), &want)
	_ = json.Unmarshal([]byte(`{"a":"1","o":{"x":2,"z":1},"l":[{"k":2,"extra":1}],"n":{"q":1}}`), &got)
	d := shapeDiff("", want, got)
	wantDiff := []string{
		".a: fixture has a number, fake has a string",
		".l[0].extra: sent by the fake, not in the fixture",
		".o.y: in the fixture, missing from the fake",
		".o.z: sent by the fake, not in the fixture",
	}
	if !slices.Equal(d, wantDiff) {
		t.Fatalf("shapeDiff = %q", d)
	}
}
