package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// statusGate is a proxy in front of the fake GitLab that can hold one
// commit status post: before it reaches GitLab, or after GitLab answered
// and before depsd gets the answer. depsd is then SIGKILLed with the post
// held: the request dies with it.
type statusGate struct {
	mu     sync.Mutex
	before string // the state whose next post is held before GitLab sees it
	after  string // the state whose next post is held once GitLab answered it
	held   chan string
}

func newStatusGate(t *testing.T, srv *gitlabtest.Server) (*statusGate, string) {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	g := &statusGate{held: make(chan string, 1)}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = g
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	return g, proxy.URL
}

// hold makes the gate hold the next post of state: before GitLab sees it
// (before is true), or once GitLab answered it.
func (g *statusGate) hold(state string, before bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if before {
		g.before = state
	} else {
		g.after = state
	}
}

func (g *statusGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/statuses/") {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var opt struct {
		State string `json:"state"`
	}
	_ = json.Unmarshal(body, &opt)
	g.mu.Lock()
	before, after := opt.State != "" && opt.State == g.before, opt.State != "" && opt.State == g.after
	if before {
		g.before = ""
	}
	if after {
		g.after = ""
	}
	g.mu.Unlock()
	if before {
		g.held <- opt.State
		<-r.Context().Done() // depsd dies with the post
		return nil, r.Context().Err()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if after && err == nil {
		resp.Body.Close()
		g.held <- opt.State
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return resp, err
}

// The chain's commit status on the root's commit, across kill -9: once
// between GitLab taking the pending status and depsd recording it, once
// between depsd deciding the chain succeeded (and claiming the post) and
// GitLab seeing it. Each restarted process goes on from what GitLab
// shows: the status ends success, GitLab never refused a transition, the
// root's own pipeline ends success again, and its second success started
// nothing.
func TestServeChainStatusSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, linear()...)
	gate, proxyURL := newStatusGate(t, srv)
	setup := newServeSetup(t, srv)
	setup.gitlabURL = proxyURL
	setup.configure(t, "gitlab:\n  requests_per_minute: 60000\n  commit_status_interval: 1s\n"+
		"images:\n  verify: \"off\"\nhooks:\n  url: http://"+setup.listen+"/hooks/gitlab\n")
	w := setup.world(t)

	gate.hold("pending", false)
	first := setup.start(t)
	w.syncHooks(newClient(t, srv))
	rootID := w.runPipeline(base)
	root := w.waitPipeline(rootID)
	w.waitUntil("depsd's pending status reached GitLab", chainTimeout, func() bool {
		select {
		case <-gate.held:
			return true
		default:
			return false
		}
	})
	if s := w.chainStatus(root); s.Status != "pending" {
		t.Fatalf("GitLab shows %+v, want the pending status depsd posted", s)
	}
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatal("depsd exited cleanly on SIGKILL?")
	}

	gate.hold("success", true)
	second := setup.start(t)
	w.waitUntil("the success post is held before GitLab", chainTimeout, func() bool {
		select {
		case <-gate.held:
			return true
		default:
			return false
		}
	})
	view := w.onlyChain("finished", inState(chain.Finished))
	if s := w.chainStatus(root); s.Status != "running" {
		t.Fatalf("GitLab shows %+v, want running (the success is held)", s)
	}
	if err := second.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatal("depsd exited cleanly on SIGKILL?")
	}

	setup.start(t)
	w.waitUntil("the status is success", chainTimeout, func() bool { return w.chainStatus(root).Status == "success" })
	s := w.chainStatus(root)
	if want := "http://" + setup.listen + "/chains/" + itoa(view.ID); s.TargetURL != want || s.Description != "2 of 2 rebuilt" {
		t.Errorf("status = %+v, want link %s", s, want)
	}
	if n := srv.RefusedStatusTransitions(); n != 0 {
		t.Errorf("GitLab refused %d status transitions\n%s", n, w.dump())
	}
	w.waitUntil("the root's pipeline succeeded again", chainTimeout, func() bool {
		for _, p := range srv.Pipelines(base) {
			if p.ID == rootID {
				return p.Status == "success"
			}
		}
		return false
	})
	w.waitUntil("GitLab is idle", stepTimeout, func() bool { return srv.WaitIdle(canceled()) == nil })
	view = w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, app} {
		w.pipelineOf(p)
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	if n := len(w.apiPipelines(base)); n != 0 {
		t.Errorf("depsd created %d pipelines of the root", n)
	}
}

// waitPipeline returns the fake's pipeline id of base.
func (w *world) waitPipeline(id int64) gitlabtest.Pipeline {
	w.t.Helper()
	var out gitlabtest.Pipeline
	w.waitUntil("the pipeline exists", stepTimeout, func() bool {
		for _, p := range w.srv.Pipelines(base) {
			if p.ID == id {
				out = p
				return true
			}
		}
		return false
	})
	return out
}

// chainStatus is depsd's status on root's commit as GitLab shows it: the
// newest of its name, on root's pipeline.
func (w *world) chainStatus(root gitlabtest.Pipeline) gitlabtest.CommitStatus {
	var out gitlabtest.CommitStatus
	for _, s := range w.srv.Statuses(base, root.SHA) {
		if s.Name == chain.StatusName && s.PipelineID == root.ID && !s.Retried {
			out = s
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// canceled is a context that has ended: WaitIdle then only says whether
// the fake is idle now.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
