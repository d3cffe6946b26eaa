package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/webhook"
)

// The realistic mix of issue 40: what 1,000 deliveries of an instance
// with depsd's hooks on every project are made of. Most are of no use to
// any chain; a few start or move one.
const (
	mixLeaves     = 200 // projects with nothing downstream
	mixRoots      = 2   // projects with dependents ...
	mixDependents = 5   // ... this many each
)

// Kinds of the mix's deliveries, and how many of each in 1,000.
const (
	kindNonFinal    = "non-final"       // pending or running, of any project
	kindLeafFinal   = "leaf-final"      // success or failed of a project with nothing downstream
	kindPushDep     = "push-dep-file"   // a push touching the Containerfile: a rescan
	kindPushOther   = "push-other"      // a push touching no dependency file: ignored when decoded
	kindRootFailed  = "root-failed"     // failed or canceled of a project with dependents
	kindChainStart  = "chain-success"   // a success of a root: starts a chain or merges into it
	kindGroupCopy   = "group-copy"      // the group hook's copy of a chain-success delivery
	kindLeafRunCopy = "group-copy-leaf" // the group hook's copy of a leaf's running delivery
)

var mixCounts = []struct {
	kind string
	n    int
}{
	{kindNonFinal, 690}, {kindLeafFinal, 200}, {kindPushDep, 5}, {kindPushOther, 55},
	{kindRootFailed, 30}, {kindChainStart, 5}, {kindGroupCopy, 5}, {kindLeafRunCopy, 10},
}

// mixInstance is the fake GitLab's projects the mix is about.
type mixInstance struct {
	leaves, roots, apps []gitlabtest.ProjectInfo
	all                 []gitlabtest.ProjectInfo // leaves thrice, roots, apps: leaves are most of an instance
}

// seedMix adds the mix's projects to srv, in group g.
func seedMix(b *testing.B, srv *gitlabtest.Server) *mixInstance {
	b.Helper()
	m := &mixInstance{}
	add := func(path, file string) gitlabtest.ProjectInfo {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": file}}); err != nil {
			b.Fatal(err)
		}
		info, _ := srv.Project(path)
		return info
	}
	for i := range mixLeaves {
		m.leaves = append(m.leaves, add(fmt.Sprintf("g/leaf%d", i), "FROM debian\n"))
	}
	for r := range mixRoots {
		m.roots = append(m.roots, add(fmt.Sprintf("g/base%d", r), "FROM debian\n"))
		for i := range mixDependents {
			m.apps = append(m.apps, add(fmt.Sprintf("g/app%d-%d", r, i), fmt.Sprintf("FROM registry.example.com/g/base%d:latest\n", r)))
		}
	}
	m.all = slices.Concat(m.leaves, m.leaves, m.leaves, m.roots, m.apps)
	return m
}

// delivery is one webhook delivery: its X-Gitlab-Event, body and
// project (whose secret it carries), and its kind in the mix.
type delivery struct {
	kind, event string
	body        []byte
	token       string
}

// mixPlan is the order of one round of 1,000 deliveries: each slot's kind
// and the project it is about, shuffled with a fixed seed.
type mixPlan struct {
	kinds    []string
	projects []int // index into the kind's projects
}

func newMixPlan() mixPlan {
	var p mixPlan
	r := rand.New(rand.NewPCG(40, 1))
	for _, c := range mixCounts {
		for range c.n {
			p.kinds = append(p.kinds, c.kind)
			p.projects = append(p.projects, r.IntN(1<<20))
		}
	}
	r.Shuffle(len(p.kinds), func(i, j int) {
		p.kinds[i], p.kinds[j] = p.kinds[j], p.kinds[i]
		p.projects[i], p.projects[j] = p.projects[j], p.projects[i]
	})
	return p
}

// pipelineBody is a real-format Pipeline Hook body.
func pipelineBody(p gitlabtest.ProjectInfo, id int64, status, source string) []byte {
	return fmt.Appendf(nil, `{"object_kind":"pipeline","object_attributes":{"id":%d,"ref":"main","tag":false,"sha":"%s","source":"%s","status":"%s","created_at":"2026-11-01 10:00:00 UTC","finished_at":"2026-11-01 10:05:00 UTC","variables":[]},"project":{"id":%d,"path_with_namespace":"%s","default_branch":"main"}}`,
		id, p.HeadCommit, source, status, p.ID, p.Path)
}

// pushBody is a real-format Push Hook body of one commit changing file.
func pushBody(p gitlabtest.ProjectInfo, n int64, file string) []byte {
	return fmt.Appendf(nil, `{"object_kind":"push","ref":"refs/heads/main","before":"%s","after":"%040x","project_id":%d,"project":{"path_with_namespace":"%s","default_branch":"main"},"commits":[{"id":"%040x","added":[],"modified":["%s"],"removed":[]}],"total_commits_count":1}`,
		p.HeadCommit, n, p.ID, p.Path, n, file)
}

// delivery returns delivery i of an endless run of the mix: round i/1000,
// slot i%1000 of the plan. Pipeline ids are new in every round, so a
// round's chain successes start or move chains as the first round's did;
// a group copy repeats the delivery of its kind's original of the same
// round (the same pipeline and status, another Idempotency-Key).
func (m *mixInstance) delivery(plan mixPlan, i int) delivery {
	round, slot := i/len(plan.kinds), i%len(plan.kinds)
	kind, pick := plan.kinds[slot], plan.projects[slot]
	id := int64(round)*10_000 + int64(slot) + 1_000_000
	statuses := []string{"pending", "running"}
	var p gitlabtest.ProjectInfo
	var body []byte
	event := "Pipeline Hook"
	switch kind {
	case kindNonFinal:
		p = m.all[pick%len(m.all)]
		body = pipelineBody(p, id, statuses[pick%2], "push")
	case kindLeafFinal:
		p = m.leaves[pick%len(m.leaves)]
		body = pipelineBody(p, id, []string{"success", "failed"}[pick%2], "push")
	case kindPushDep, kindPushOther:
		p = m.leaves[pick%len(m.leaves)]
		file := "README.md"
		if kind == kindPushDep {
			file = "Containerfile"
		}
		event, body = "Push Hook", pushBody(p, id, file)
	case kindRootFailed:
		p = m.roots[pick%len(m.roots)]
		body = pipelineBody(p, id, []string{"failed", "canceled"}[pick%2], "push")
	case kindChainStart, kindGroupCopy:
		// The n-th copy is of the n-th chain success of the round.
		n := 0
		for s := range slot {
			if plan.kinds[s] == kind {
				n++
			}
		}
		p = m.roots[n%len(m.roots)]
		body = pipelineBody(p, int64(round)*10_000+int64(n)+5_000_000, "success", "push")
	case kindLeafRunCopy:
		p = m.leaves[pick%len(m.leaves)]
		body = pipelineBody(p, int64(round)*10_000+int64(pick%100)+7_000_000, "running", "push")
	}
	return delivery{kind: kind, event: event, body: body, token: webhook.ProjectSecret(hookSecret, p.ID)}
}

// deliveries is a source of deliveries for a load run: the i-th of the
// run, with keyPrefix making the Idempotency-Keys the run's own.
type deliveries func(i int) delivery

// mixLoop is openLoop for deliveries of any kind: rate a second for
// seconds, each due at a fixed time whatever the answers before it
// (open loop), timed from when it was due. It returns the latencies in
// the order sent, and the failures.
func mixLoop(url string, next deliveries, keyPrefix string, rate int, seconds float64) ([]time.Duration, int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 64}}
	defer client.CloseIdleConnections()
	total := int(float64(rate) * seconds)
	lat := make([]time.Duration, total)
	var failures atomic.Int64
	var wg sync.WaitGroup
	const inFlight = 64
	sem := make(chan struct{}, inFlight)
	start := time.Now()
	for i := range total {
		d := next(i)
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		time.Sleep(time.Until(due))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.body))
			req.Header.Set("X-Gitlab-Event", d.event)
			req.Header.Set("X-Gitlab-Token", d.token)
			req.Header.Set("Idempotency-Key", keyPrefix+"-"+strconv.Itoa(i))
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			lat[i] = time.Since(due)
			if err != nil || resp.StatusCode != http.StatusOK {
				failures.Add(1)
			}
		}()
	}
	wg.Wait()
	return lat, int(failures.Load())
}

// interleavedMix is interleaved for a source of deliveries: each target
// gets the same deliveries (the i-th delivery of each turn is the same
// for every target), in turns.
func interleavedMix(targets []string, next deliveries, rate, seconds int) []loadResult {
	for i, url := range targets {
		mixLoop(url, next, fmt.Sprintf("warm-%d", i), rate, ackWarmUp.Seconds())
	}
	out := make([]loadResult, len(targets))
	lats := make([][]time.Duration, len(targets))
	elapsed := make([]time.Duration, len(targets))
	turn := float64(seconds) / ackSegments
	offset := 0
	for seg := range ackSegments {
		n := int(float64(rate) * turn)
		from := offset
		for i, url := range targets {
			start := time.Now()
			l, f := mixLoop(url, func(j int) delivery { return next(from + j) }, fmt.Sprintf("t%d-s%d", i, seg), rate, turn)
			elapsed[i] += time.Since(start)
			lats[i] = append(lats[i], l...)
			out[i].failures += f
			slices.Sort(l)
			out[i].rounds = append(out[i].rounds, percentile(l, 0.99))
		}
		offset += n
	}
	for i := range targets {
		slices.Sort(lats[i])
		out[i].p50, out[i].p99 = percentile(lats[i], 0.50), percentile(lats[i], 0.99)
		out[i].rate = float64(len(lats[i])) / elapsed[i].Seconds()
	}
	return out
}

// onlyKind is the deliveries of one kind of the mix, in the mix's order.
func (m *mixInstance) onlyKind(plan mixPlan, kind string) deliveries {
	var slots []int
	for i, k := range plan.kinds {
		if k == kind {
			slots = append(slots, i)
		}
	}
	return func(i int) delivery {
		return m.delivery(plan, (i/len(slots))*len(plan.kinds)+slots[i%len(slots)])
	}
}

// inboxBacklog reads how many recorded events wait to be applied.
type inboxBacklog func(ctx context.Context) (int, error)

// waitDrained waits until the backlog is empty, up to timeout, and
// reports whether it is.
func waitDrained(ctx context.Context, backlog inboxBacklog, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		n, err := backlog(ctx)
		if err == nil && n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
