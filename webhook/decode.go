package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"gitlab.com/depsd/depsd/chain"
)

// Event is an accepted webhook event: exactly one of Pipeline and Push is
// set. Key identifies the delivery (GitLab's Idempotency-Key, the same on
// a resend).
type Event struct {
	Key      string
	Pipeline *chain.PipelineEvent
	Push     *chain.PushEvent
}

// Ignored says why an event needs no action. It is not an error: GitLab
// gets a 2xx for it, or it would disable the hook.
type Ignored struct{ Reason string }

func (i *Ignored) Error() string { return "ignored: " + i.Reason }

// ErrMalformed marks a body that is not the event its header announces.
var ErrMalformed = errors.New("malformed event")

// hookTimeLayouts are the formats GitLab uses for times in hook payloads:
// "2016-08-12 15:23:28 UTC" in pipeline hooks, RFC 3339 in push commits.
var hookTimeLayouts = [...]string{"2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -0700", time.RFC3339}

// Decode turns a webhook body into an Event. eventType is the
// X-Gitlab-Event header; depFiles are the file names whose change on the
// default branch calls for a rescan. It returns an *Ignored error for events
// depsd does not act on and ErrMalformed for bodies it cannot read. It does
// no I/O, so it is table-tested and fuzzed on its own.
//
// A merge request pipeline (source merge_request_event, or a merge_request
// object) of a project premerge covers is accepted whatever its ref, with
// its merge request: its image is a candidate to validate, never a
// release; so is the success of a pipeline of a branch no node follows
// there (it may be a merge request's source). Elsewhere both are ignored.
func Decode(eventType string, body []byte, depFiles []string, follows Follows, premerge Covers, received time.Time) (Event, error) {
	switch gl.EventType(eventType) {
	case gl.EventTypePipeline:
		return decodePipeline(body, follows, premerge, received)
	case gl.EventTypePush:
		return decodePush(body, depFiles, follows, received)
	case "":
		return Event{}, &Ignored{Reason: "no X-Gitlab-Event header"}
	default:
		return Event{}, &Ignored{Reason: fmt.Sprintf("event %q is not used by depsd", clip(eventType))}
	}
}

// Follows says whether depsd follows project's ref besides its default
// branch: a branch, or a release tag when tag is set (`refs:` in
// depsd.yaml). Nil follows none.
type Follows func(project, ref string, tag bool) bool

func (f Follows) follows(project, ref string, tag bool) bool { return f != nil && f(project, ref, tag) }

// Covers says whether premerge covers a project: its merge requests'
// candidates are validated (`premerge:` in depsd.yaml). Nil covers none.
type Covers func(project string) bool

func (c Covers) covers(project string) bool { return c != nil && c(project) }

func decodePipeline(body []byte, follows Follows, premerge Covers, received time.Time) (Event, error) {
	var p gl.PipelineEvent
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%w: pipeline hook: %v", ErrMalformed, err)
	}
	a := p.ObjectAttributes
	switch {
	case p.ObjectKind != "pipeline":
		return Event{}, fmt.Errorf("%w: pipeline hook with object_kind %q", ErrMalformed, p.ObjectKind)
	case p.Project.ID == 0 || p.Project.PathWithNamespace == "" || a.ID == 0 || a.Status == "":
		return Event{}, fmt.Errorf("%w: pipeline hook without project or pipeline id, path or status", ErrMalformed)
	case a.Source == chain.SourceMergeRequest || p.MergeRequest.IID != 0:
		if !premerge.covers(p.Project.PathWithNamespace) {
			return Event{}, &Ignored{Reason: "merge request pipeline, of a project premerge does not cover"}
		}
		if p.MergeRequest.IID == 0 {
			return Event{}, &Ignored{Reason: "merge request pipeline without its merge request"}
		}
	case a.Tag && !follows.follows(p.Project.PathWithNamespace, a.Ref, true):
		return Event{}, &Ignored{Reason: "pipeline of tag " + clip(a.Ref) + ", not a release"}
	case !a.Tag && a.Ref != p.Project.DefaultBranch && !follows.follows(p.Project.PathWithNamespace, a.Ref, false):
		if !premerge.covers(p.Project.PathWithNamespace) || a.Status != "success" || a.Source == chain.SourceChildPipeline {
			return Event{}, &Ignored{Reason: fmt.Sprintf("pipeline of %s, not of the default branch %s nor a followed one", clip(a.Ref), p.Project.DefaultBranch)}
		}
		// Premerge: the success of a branch that may be a merge
		// request's source.
	case a.Source == chain.SourceChildPipeline:
		return Event{}, &Ignored{Reason: "child pipeline: its parent's status counts"}
	}
	vars := make(map[string]string, len(a.Variables))
	for _, v := range a.Variables {
		vars[v.Key] = v.Value
	}
	at := received
	if t, ok := parseHookTime(a.FinishedAt); ok {
		at = t
	}
	ev := &chain.PipelineEvent{
		ProjectID: p.Project.ID, Project: p.Project.PathWithNamespace, PipelineID: a.ID,
		Status: a.Status, Ref: a.Ref, Tag: a.Tag, SHA: a.SHA, Source: a.Source, Variables: vars, URL: a.URL, At: at,
	}
	if mr := p.MergeRequest; mr.IID != 0 && premerge.covers(p.Project.PathWithNamespace) {
		ev.MergeRequest = &chain.MergeRequestRef{IID: mr.IID, Title: clipTitle(mr.Title), URL: mr.URL,
			SourceBranch: mr.SourceBranch, TargetBranch: mr.TargetBranch}
	}
	return Event{Pipeline: ev}, nil
}

func decodePush(body []byte, depFiles []string, follows Follows, received time.Time) (Event, error) {
	var p gl.PushEvent
	if err := json.Unmarshal(body, &p); err != nil {
		return Event{}, fmt.Errorf("%w: push hook: %v", ErrMalformed, err)
	}
	switch {
	case p.ObjectKind != "push":
		return Event{}, fmt.Errorf("%w: push hook with object_kind %q", ErrMalformed, p.ObjectKind)
	case p.ProjectID == 0 || p.Project.PathWithNamespace == "":
		return Event{}, fmt.Errorf("%w: push hook without project", ErrMalformed)
	case p.Ref != "refs/heads/"+p.Project.DefaultBranch &&
		!(strings.HasPrefix(p.Ref, "refs/heads/") && follows.follows(p.Project.PathWithNamespace, strings.TrimPrefix(p.Ref, "refs/heads/"), false)):
		return Event{}, &Ignored{Reason: fmt.Sprintf("push to %s, not to the default branch %s nor a followed one", clip(p.Ref), p.Project.DefaultBranch)}
	}
	changed := map[string]bool{}
	for _, c := range p.Commits {
		if c == nil {
			continue
		}
		for _, list := range [][]string{c.Added, c.Modified, c.Removed} {
			for _, f := range list {
				changed[f] = true
			}
		}
	}
	// GitLab lists at most 20 commits; beyond that the files are unknown
	// and a rescan is the safe answer.
	truncated := p.TotalCommitsCount > int64(len(p.Commits))
	var touched []string
	for _, f := range depFiles {
		if changed[f] {
			touched = append(touched, f)
		}
	}
	if len(touched) == 0 && !truncated {
		return Event{}, &Ignored{Reason: "push changes no dependency file"}
	}
	return Event{Push: &chain.PushEvent{
		ProjectID: p.ProjectID, Project: p.Project.PathWithNamespace, Ref: strings.TrimPrefix(p.Ref, "refs/heads/"),
		After: p.After, Changed: touched, At: received,
	}}, nil
}

// clipTitle keeps a merge request's title to 255 bytes, as GitLab does.
func clipTitle(s string) string {
	if len(s) > 255 {
		return s[:255]
	}
	return s
}

func parseHookTime(s string) (time.Time, bool) {
	for _, layout := range hookTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
