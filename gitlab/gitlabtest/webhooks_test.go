package gitlabtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// received is one webhook request as a receiver saw it.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint that records requests and answers with
// a settable status.
type receiver struct {
	*httptest.Server
	got    chan received
	status atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 200)}
	rc.status.Store(http.StatusOK)
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.got <- received{r.Header.Clone(), b}
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook arrived")
		return received{}
	}
}

// none asserts that nothing arrived (call after Server.WaitIdle).
func (rc *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-rc.got:
		t.Fatalf("unexpected webhook %s: %.200s", r.header.Get("X-Gitlab-Event"), r.body)
	default:
	}
}

func pipelineEvent(t *testing.T, r received) *gl.PipelineEvent {
	t.Helper()
	ev, err := gl.ParseWebhook(gl.EventType(r.header.Get("X-Gitlab-Event")), r.body)
	if err != nil {
		t.Fatalf("parse %s: %v", r.body, err)
	}
	pe, ok := ev.(*gl.PipelineEvent)
	if !ok {
		t.Fatalf("got %T, want *PipelineEvent", ev)
	}
	return pe
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustDo[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// apiCreatePipeline is POST /projects/:id/pipeline with JSON body.
func apiCreatePipeline(t *testing.T, s *Server, project, body string) int64 {
	t.Helper()
	req, _ := http.NewRequest("POST", s.APIURL()+"/projects/"+strings.ReplaceAll(project, "/", "%2F")+"/pipeline", strings.NewReader(body))
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create pipeline: %d %v", resp.StatusCode, err)
	}
	return out.ID
}

func seed(t *testing.T, s *Server, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := s.AddProject(Project{Path: p, Files: map[string]string{"Containerfile": "FROM debian\n"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPipelineRunPostsHooksInOrder(t *testing.T) {
	s := New(Options{Pipelines: Behavior{Duration: 40 * time.Millisecond}})
	defer s.Close()
	seed(t, s, "g/base")
	rc := newReceiver(t)
	plain := newReceiver(t)
	must := mustDo[int64](t)
	must(s.AddHook("g/base", Hook{URL: rc.URL + "/hooks/gitlab", Token: "s3cret", Events: []string{"pipeline_events"}}))
	must(s.AddHook("g/base", Hook{URL: plain.URL, Events: []string{"pipeline_events"}}))
	pushOnly := newReceiver(t)
	must(s.AddHook("g/base", Hook{URL: pushOnly.URL, Events: []string{"push_events"}}))

	id := apiCreatePipeline(t, s, "g/base", `{"ref":"main","variables":[{"key":"DEPSD_CHAIN_ID","value":"c1"},{"key":"DEPSD_ACTION_ID","value":"a1"}]}`)
	pl, err := s.WaitPipeline(testCtx(t), id)
	if err != nil || pl.Status != "success" || pl.StartedAt.IsZero() || pl.FinishedAt.IsZero() {
		t.Fatalf("pipeline %+v, %v", pl, err)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	keys := map[string]bool{}
	var eventUUIDs []string
	for i, want := range []string{"pending", "running", "success"} {
		r := rc.next(t)
		ev := pipelineEvent(t, r)
		if ev.ObjectAttributes.ID != id || ev.ObjectAttributes.Status != want || ev.ObjectKind != "pipeline" {
			t.Fatalf("event %d: pipeline %d status %q, want %d %q", i, ev.ObjectAttributes.ID, ev.ObjectAttributes.Status, id, want)
		}
		if ev.ObjectAttributes.Source != "api" || ev.ObjectAttributes.Ref != "main" || ev.Project.PathWithNamespace != "g/base" || ev.User.Username != "depsd" {
			t.Errorf("event %d: %+v", i, ev.ObjectAttributes)
		}
		vars := ev.ObjectAttributes.Variables
		if len(vars) != 2 || vars[0].Key != "DEPSD_CHAIN_ID" || vars[0].Value != "c1" || vars[1].Value != "a1" {
			t.Errorf("variables = %+v", vars)
		}
		h := r.header
		for k, v := range map[string]string{
			"Content-Type": "application/json", "X-Gitlab-Event": "Pipeline Hook", "X-Gitlab-Token": "s3cret",
			"X-Gitlab-Instance": s.URL, "User-Agent": "GitLab/" + DefaultVersion,
		} {
			if h.Get(k) != v {
				t.Errorf("%s = %q, want %q", k, h.Get(k), v)
			}
		}
		for _, k := range []string{"X-Gitlab-Webhook-UUID", "X-Gitlab-Event-UUID", "Idempotency-Key"} {
			if len(h.Get(k)) != 36 {
				t.Errorf("%s = %q, want a UUID", k, h.Get(k))
			}
		}
		if keys[h.Get("Idempotency-Key")] {
			t.Errorf("Idempotency-Key %s repeated", h.Get("Idempotency-Key"))
		}
		keys[h.Get("Idempotency-Key")] = true
		eventUUIDs = append(eventUUIDs, h.Get("X-Gitlab-Event-UUID"))

		// The hook without a token gets the same event, without the header.
		pr := plain.next(t)
		if _, ok := pr.header["X-Gitlab-Token"]; ok {
			t.Error("X-Gitlab-Token sent for a hook without a token")
		}
		if pr.header.Get("X-Gitlab-Event-UUID") != h.Get("X-Gitlab-Event-UUID") || pr.header.Get("Idempotency-Key") == h.Get("Idempotency-Key") {
			t.Error("Event-UUID should be shared by the hooks of one event, Idempotency-Key not")
		}
	}
	slices.Sort(eventUUIDs)
	if len(slices.Compact(eventUUIDs)) != 3 {
		t.Errorf("event UUIDs %v not distinct per event", eventUUIDs)
	}
	rc.none(t)
	pushOnly.none(t)

	// The variables endpoint answers what was stored.
	resp, body := get(t, s, "/projects/g%2Fbase/pipelines/"+itoa(id)+"/variables", map[string]string{"PRIVATE-TOKEN": s.Token})
	if resp.StatusCode != 200 || !strings.Contains(body, `{"key":"DEPSD_ACTION_ID","variable_type":"env_var","value":"a1"}`) {
		t.Fatalf("variables: %d %s", resp.StatusCode, body)
	}
	ds := s.Deliveries()
	if len(ds) != 6 {
		t.Fatalf("%d deliveries, want 6", len(ds))
	}
	for _, d := range ds {
		if d.State != DeliveryDelivered || d.StatusCode != 200 || d.Event != PipelineHook || d.PipelineID != id {
			t.Errorf("delivery %+v", d)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestPipelineOutcomes(t *testing.T) {
	s := New(Options{Pipelines: Behavior{Duration: 10 * time.Millisecond}})
	defer s.Close()
	seed(t, s, "g/default", "g/flaky", "g/broken", "g/manual")
	if err := s.SetPipelineBehavior("g/flaky", Behavior{Duration: 10 * time.Millisecond, Script: []string{"failed", "canceled"}, Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("g/broken", Behavior{Duration: 10 * time.Millisecond, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("g/manual", Behavior{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("g/broken", Behavior{Outcome: "exploded"}); err == nil {
		t.Fatal("unknown outcome accepted")
	}
	run := func(project string) string {
		t.Helper()
		id := mustDo[int64](t)(s.RunPipeline(project, "", ""))
		pl, err := s.WaitPipeline(testCtx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Source != "push" {
			t.Errorf("source %q", pl.Source)
		}
		return pl.Status
	}
	tests := []struct {
		project string
		want    []string
	}{
		{"g/default", []string{"success", "success"}},
		{"g/flaky", []string{"failed", "canceled", "success", "success"}},
		{"g/broken", []string{"failed", "failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.project, func(t *testing.T) {
			var got []string
			for range tt.want {
				got = append(got, run(tt.project))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("outcomes %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("manual", func(t *testing.T) {
		id := mustDo[int64](t)(s.RunPipeline("g/manual", "main", "web"))
		if err := s.WaitIdle(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if ps := s.Pipelines("g/manual"); len(ps) != 1 || ps[0].Status != "created" || ps[0].Source != "web" {
			t.Fatalf("%+v", ps)
		}
		if err := s.SetPipelineStatus(id, "success"); err != nil {
			t.Fatal(err)
		}
		if pl, err := s.WaitPipeline(testCtx(t), id); err != nil || pl.Status != "success" {
			t.Fatalf("%+v %v", pl, err)
		}
	})
	t.Run("script restarts", func(t *testing.T) {
		if err := s.SetPipelineBehavior("g/flaky", Behavior{Duration: time.Millisecond, Script: []string{"failed"}}); err != nil {
			t.Fatal(err)
		}
		if got := []string{run("g/flaky"), run("g/flaky")}; !slices.Equal(got, []string{"failed", "success"}) {
			t.Fatalf("%v", got)
		}
		if err := s.ClearPipelineBehavior("g/flaky"); err != nil {
			t.Fatal(err)
		}
		if got := run("g/flaky"); got != "success" {
			t.Fatalf("default after clear: %s", got)
		}
	})
}

func TestSetPipelineStatusTakesOver(t *testing.T) {
	s := New(Options{Pipelines: Behavior{Duration: time.Hour}})
	defer s.Close()
	seed(t, s, "g/a")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}))
	id := apiCreatePipeline(t, s, "g/a", `{"ref":"main"}`)
	if ev := pipelineEvent(t, rc.next(t)); ev.ObjectAttributes.Status != "pending" {
		t.Fatalf("first status %q", ev.ObjectAttributes.Status)
	}
	if err := s.SetPipelineStatus(id, "failed"); err != nil {
		t.Fatal(err)
	}
	// The hour-long simulation is over: the server is idle at once.
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ev := pipelineEvent(t, rc.next(t)); ev.ObjectAttributes.Status != "failed" || ev.ObjectAttributes.DetailedStatus != "failed" || ev.Builds[0].FailureReason != "script_failure" {
		t.Fatalf("%+v", ev.ObjectAttributes)
	}
	// The same status again is no transition: no hook, as in GitLab.
	if err := s.SetPipelineStatus(id, "failed"); err != nil {
		t.Fatal(err)
	}
	// AddPipeline posts the status it is created in.
	pid := mustDo[int64](t)(s.AddPipeline("g/a", "main", "push", "success"))
	if ev := pipelineEvent(t, rc.next(t)); ev.ObjectAttributes.ID != pid || ev.ObjectAttributes.DetailedStatus != "passed" {
		t.Fatalf("%+v", ev.ObjectAttributes)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rc.none(t)
}

func TestPushHooks(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/a")
	rc := newReceiver(t)
	filtered := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: rc.URL, Token: "t", Events: []string{"push_events", "pipeline_events"}}))
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: filtered.URL, Events: []string{"push_events"}, PushEventsBranchFilter: "release/*"}))
	before := mustDo[ProjectInfo](t)(projectInfo(s, "g/a")).HeadCommit
	sha := mustDo[string](t)(s.SetFile("g/a", "Containerfile", "FROM debian:12\n"))
	sha2 := mustDo[string](t)(s.SetFile("g/a", ".gitlab-deps", "g/b\n"))
	sha3 := mustDo[string](t)(s.DeleteFile("g/a", ".gitlab-deps"))
	for _, want := range []struct {
		before, after            string
		added, modified, removed []string
	}{
		{before, sha, nil, []string{"Containerfile"}, nil},
		{sha, sha2, []string{".gitlab-deps"}, nil, nil},
		{sha2, sha3, nil, nil, []string{".gitlab-deps"}},
	} {
		r := rc.next(t)
		if r.header.Get("X-Gitlab-Event") != "Push Hook" || r.header.Get("X-Gitlab-Token") != "t" {
			t.Fatalf("headers %v", r.header)
		}
		ev, err := gl.ParseWebhook(gl.EventTypePush, r.body)
		if err != nil {
			t.Fatal(err)
		}
		pe := ev.(*gl.PushEvent)
		c := pe.Commits[0]
		if pe.ObjectKind != "push" || pe.EventName != "push" || pe.Ref != "refs/heads/main" || pe.Before != want.before ||
			pe.After != want.after || pe.CheckoutSHA != want.after || pe.TotalCommitsCount != 1 || pe.Project.PathWithNamespace != "g/a" ||
			c.ID != want.after || !slices.Equal(c.Added, orEmpty(want.added)) || !slices.Equal(c.Modified, orEmpty(want.modified)) ||
			!slices.Equal(c.Removed, orEmpty(want.removed)) || c.Timestamp == nil {
			t.Errorf("push event %s", r.body)
		}
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	filtered.none(t)
	rc.none(t) // no pipeline without OnPush

	// With OnPush a push runs a pipeline.
	if err := s.SetPipelineBehavior("g/a", Behavior{Duration: 5 * time.Millisecond, OnPush: true}); err != nil {
		t.Fatal(err)
	}
	sha4 := mustDo[string](t)(s.SetFile("g/a", "README.md", "hi"))
	rc.next(t) // push
	for _, want := range []string{"pending", "running", "success"} {
		ev := pipelineEvent(t, rc.next(t))
		if ev.ObjectAttributes.Status != want || ev.ObjectAttributes.SHA != sha4 || ev.ObjectAttributes.BeforeSHA != sha3 || ev.ObjectAttributes.Source != "push" || ev.User.Username != "author" {
			t.Fatalf("%+v", ev.ObjectAttributes)
		}
	}
}

func projectInfo(s *Server, path string) (ProjectInfo, error) {
	p, ok := s.Project(path)
	if !ok {
		return p, io.EOF
	}
	return p, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestResendAndLostDeliveries(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/a", "g/b")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}))
	mustDo[int64](t)(s.AddHook("g/b", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}))
	a := mustDo[int64](t)(s.RunPipeline("g/a", "main", ""))
	b := mustDo[int64](t)(s.RunPipeline("g/b", "main", ""))

	s.LoseWebhooks(1)
	if err := s.LoseProjectWebhooks("g/b", 1); err != nil {
		t.Fatal(err)
	}
	_ = s.SetPipelineStatus(b, "success") // lost: project fault
	_ = s.SetPipelineStatus(a, "running") // lost: global fault
	_ = s.SetPipelineStatus(a, "success") // delivered
	ds, err := s.WaitDeliveries(testCtx(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].State != DeliveryLost || ds[0].PipelineID != b || ds[1].State != DeliveryLost || ds[1].PipelineStatus != "running" || ds[2].State != DeliveryDelivered {
		t.Fatalf("deliveries %+v", ds)
	}
	first := rc.next(t)
	if pipelineEvent(t, first).ObjectAttributes.Status != "success" {
		t.Fatal("lost delivery arrived")
	}
	rc.none(t)

	// Resending the lost one delivers it; resending a delivered one
	// repeats its Idempotency-Key with a new webhook UUID.
	for _, d := range []Delivery{ds[0], ds[2]} {
		nid, err := s.Resend(d.ID)
		if err != nil {
			t.Fatal(err)
		}
		r := rc.next(t)
		if r.header.Get("Idempotency-Key") != d.IdempotencyKey || string(r.body) != string(d.Payload) {
			t.Fatalf("resend of %d: key %s, want %s", d.ID, r.header.Get("Idempotency-Key"), d.IdempotencyKey)
		}
		if d.WebhookUUID != "" && r.header.Get("X-Gitlab-Webhook-UUID") == d.WebhookUUID {
			t.Error("resend reused the webhook UUID")
		}
		if err := s.WaitIdle(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if nd := s.Deliveries()[nid-1]; nd.ResendOf != d.ID || nd.State != DeliveryDelivered {
			t.Fatalf("resend %+v", nd)
		}
	}
	if _, err := s.Resend(999); err == nil {
		t.Fatal("resend of unknown delivery")
	}
}

func TestFailingHookIsDisabled(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := New(Options{Now: clock})
	defer s.Close()
	seed(t, s, "g/a")
	rc := newReceiver(t)
	rc.status.Store(http.StatusInternalServerError)
	hid := mustDo[int64](t)(s.AddHook("g/a", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}))
	id := mustDo[int64](t)(s.RunPipeline("g/a", "main", ""))
	statuses := []string{"pending", "running", "failed", "running", "success"}
	for _, st := range statuses {
		if err := s.SetPipelineStatus(id, st); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitIdle(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	ds := s.Deliveries()
	if len(ds) != 4 {
		t.Fatalf("%d deliveries, want 4 (the hook is disabled after the 4th failure)", len(ds))
	}
	for _, d := range ds {
		if d.State != DeliveryFailed || d.StatusCode != 500 {
			t.Errorf("%+v", d)
		}
	}
	h := s.Hooks("g/a")[0]
	if h.AlertStatus != "temporarily_disabled" || !h.DisabledUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("hook %+v", h)
	}
	_, body := get(t, s, "/projects/g%2Fa/hooks/"+itoa(hid), map[string]string{"PRIVATE-TOKEN": s.Token})
	if !strings.Contains(body, `"alert_status":"temporarily_disabled"`) || !strings.Contains(body, `"disabled_until":"2025-03-01T12:01:00.000Z"`) {
		t.Fatalf("REST hook %s", body)
	}

	// After the pause the hook runs again; one more failure doubles it.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	_ = s.SetPipelineStatus(id, "running")
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if h := s.Hooks("g/a")[0]; len(s.Deliveries()) != 5 || h.AlertStatus != "temporarily_disabled" || !h.DisabledUntil.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("after the pause: %d deliveries, hook %+v", len(s.Deliveries()), h)
	}
	// A success resets it.
	mu.Lock()
	now = now.Add(3 * time.Minute)
	mu.Unlock()
	rc.status.Store(http.StatusNoContent)
	_ = s.SetPipelineStatus(id, "success")
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if h := s.Hooks("g/a")[0]; h.AlertStatus != "executable" || !h.DisabledUntil.IsZero() {
		t.Fatalf("after a success: %+v", h)
	}

	// HookFailureThreshold < 0 never disables.
	s2 := New(Options{HookFailureThreshold: -1})
	defer s2.Close()
	seed(t, s2, "g/a")
	mustDo[int64](t)(s2.AddHook("g/a", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}))
	rc.status.Store(http.StatusBadGateway)
	id2 := mustDo[int64](t)(s2.RunPipeline("g/a", "main", ""))
	for _, st := range statuses {
		_ = s2.SetPipelineStatus(id2, st)
	}
	if ds, err := s2.WaitDeliveries(testCtx(t), len(statuses)); err != nil || s2.Hooks("g/a")[0].AlertStatus != "executable" {
		t.Fatalf("%v %+v", err, ds)
	}
}

func TestWebhookTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	s := New(Options{WebhookTimeout: 50 * time.Millisecond})
	defer s.Close()
	seed(t, s, "g/a")
	mustDo[int64](t)(s.AddHook("g/a", Hook{URL: slow.URL, Events: []string{"pipeline_events"}}))
	id := mustDo[int64](t)(s.RunPipeline("g/a", "main", ""))
	_ = s.SetPipelineStatus(id, "running")
	ds, err := s.WaitDeliveries(testCtx(t), 1)
	if err != nil || ds[0].State != DeliveryFailed || ds[0].StatusCode != 0 || ds[0].Err == "" {
		t.Fatalf("%v %+v", err, ds)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	blocked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a hang-up only after the body
		<-r.Context().Done()      // never answers; ends when the fake hangs up
	}))
	s := New(Options{Pipelines: Behavior{Duration: time.Hour}})
	seed(t, s, "g/a", "g/b")
	for _, p := range []string{"g/a", "g/b"} {
		mustDo[int64](t)(s.AddHook(p, Hook{URL: blocked.URL, Events: []string{"pipeline_events", "push_events"}}))
		for range 3 {
			apiCreatePipeline(t, s, p, `{"ref":"main"}`)
		}
		mustDo[string](t)(s.SetFile(p, "f", "x"))
	}
	// Deliveries are stuck in flight and queued; pipelines are running.
	if err := s.waitFor(testCtx(t), func() bool { return s.hooksOut.busy > 2 }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	s.Close() // twice is fine
	blocked.Close()
	for _, d := range s.Deliveries() {
		if d.State != DeliveryDropped {
			t.Errorf("after Close: %+v", d)
		}
	}
	// Nothing starts after Close.
	if _, err := s.RunPipeline("g/a", "main", ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
