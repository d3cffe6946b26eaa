package gitlabtest

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhook payloads in the shapes GitLab's data builders produce
// (Gitlab::DataBuilder::Pipeline and ::Push) and its documentation shows
// ("Webhook events"). webhook/testdata holds the documented examples; a
// test keeps the two key for key alike.

// zeroSHA is what GitLab reports as before_sha when there is no "before".
const zeroSHA = "0000000000000000000000000000000000000000"

// fakeUser is a user of the fake instance.
type fakeUser struct {
	id                    int64
	name, username, email string
}

var (
	// botUser owns the API token: pipelines created through the API are
	// its pipelines.
	botUser = fakeUser{1, "depsd bot", "depsd", "depsd@example.com"}
	// devUser pushes commits and runs pipelines "from outside depsd".
	devUser = fakeUser{2, "Fake Author", "author", "author@example.com"}
)

func (u fakeUser) avatar(base string) string {
	return base + "/uploads/-/system/user/avatar/" + strconv.FormatInt(u.id, 10) + "/avatar.png"
}

func (u fakeUser) rest(base string) userJSON {
	return userJSON{ID: u.id, Name: u.name, Username: u.username, State: "active",
		AvatarURL: u.avatar(base), WebURL: base + "/" + u.username}
}

func (u fakeUser) hook(base string) hookUserJSON {
	return hookUserJSON{ID: u.id, Name: u.name, Username: u.username, AvatarURL: u.avatar(base), Email: u.email}
}

func (s *Server) pipelineUser(pl *pipeline) fakeUser {
	if pl.user != nil {
		return *pl.user
	}
	if pl.source == "api" {
		return botUser
	}
	return devUser
}

// hookTime formats times the way webhook payloads do: 2016-08-12 15:23:28 UTC.
func hookTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func hookTimePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := hookTime(t)
	return &s
}

// commitTime formats commit timestamps as Ruby's xmlschema does.
func commitTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05-07:00") }

type hookUserJSON struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Username  string `json:"username"`
	AvatarURL string `json:"avatar_url"`
	Email     string `json:"email"`
}

// hookProjectJSON is Project#hook_attrs(backward: false).
type hookProjectJSON struct {
	ID                int64   `json:"id"`
	Name              string  `json:"name"`
	Description       string  `json:"description"`
	WebURL            string  `json:"web_url"`
	AvatarURL         *string `json:"avatar_url"`
	GitSSHURL         string  `json:"git_ssh_url"`
	GitHTTPURL        string  `json:"git_http_url"`
	Namespace         string  `json:"namespace"`
	VisibilityLevel   int     `json:"visibility_level"`
	PathWithNamespace string  `json:"path_with_namespace"`
	DefaultBranch     string  `json:"default_branch"`
	CIConfigPath      *string `json:"ci_config_path"`
}

// pushProjectJSON is Project#hook_attrs with the backward-compatible keys.
type pushProjectJSON struct {
	hookProjectJSON
	Homepage string `json:"homepage"`
	URL      string `json:"url"`
	SSHURL   string `json:"ssh_url"`
	HTTPURL  string `json:"http_url"`
}

type repositoryJSON struct {
	Name            string `json:"name"`
	URL             string `json:"url"`
	Description     string `json:"description"`
	Homepage        string `json:"homepage"`
	GitHTTPURL      string `json:"git_http_url"`
	GitSSHURL       string `json:"git_ssh_url"`
	VisibilityLevel int    `json:"visibility_level"`
}

func (s *Server) projectHookAttrs(p *project) hookProjectJSON {
	ns := p.namespace()
	return hookProjectJSON{
		ID:                p.id,
		Name:              p.name(),
		WebURL:            s.URL + "/" + p.path,
		GitSSHURL:         "git@" + s.host() + ":" + p.path + ".git",
		GitHTTPURL:        s.URL + "/" + p.path + ".git",
		Namespace:         ns[strings.LastIndex(ns, "/")+1:],
		VisibilityLevel:   visibilityLevel(s.visibilityOf(p)),
		PathWithNamespace: p.path,
		DefaultBranch:     p.defaultBranch,
	}
}

type commitAuthorJSON struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type hookCommitJSON struct {
	ID        string           `json:"id"`
	Message   string           `json:"message"`
	Title     string           `json:"title"`
	Timestamp string           `json:"timestamp"`
	URL       string           `json:"url"`
	Author    commitAuthorJSON `json:"author"`
}

func (s *Server) hookCommit(p *project, c *commit) hookCommitJSON {
	title, _, _ := strings.Cut(c.message, "\n")
	return hookCommitJSON{
		ID: c.sha, Message: c.message, Title: title, Timestamp: commitTime(c.createdAt),
		URL:    s.URL + "/" + p.path + "/-/commit/" + c.sha,
		Author: c.authorOf(),
	}
}

type hookVariableJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type pipelineAttrsJSON struct {
	ID             int64              `json:"id"`
	IID            int64              `json:"iid"`
	Name           *string            `json:"name"`
	Ref            string             `json:"ref"`
	Tag            bool               `json:"tag"`
	SHA            string             `json:"sha"`
	BeforeSHA      string             `json:"before_sha"`
	Source         string             `json:"source"`
	Status         string             `json:"status"`
	DetailedStatus string             `json:"detailed_status"`
	Stages         []string           `json:"stages"`
	CreatedAt      string             `json:"created_at"`
	FinishedAt     *string            `json:"finished_at"`
	Duration       *int64             `json:"duration"`
	QueuedDuration *int64             `json:"queued_duration"`
	Variables      []hookVariableJSON `json:"variables"`
	URL            string             `json:"url"`
}

type hookRunnerJSON struct {
	ID          int64    `json:"id"`
	Description string   `json:"description"`
	RunnerType  string   `json:"runner_type"`
	Active      bool     `json:"active"`
	IsShared    bool     `json:"is_shared"`
	Tags        []string `json:"tags"`
}

type artifactsFileJSON struct {
	Filename *string `json:"filename"`
	Size     *int64  `json:"size"`
}

type hookBuildJSON struct {
	ID             int64             `json:"id"`
	Stage          string            `json:"stage"`
	Name           string            `json:"name"`
	Status         string            `json:"status"`
	CreatedAt      string            `json:"created_at"`
	StartedAt      *string           `json:"started_at"`
	FinishedAt     *string           `json:"finished_at"`
	Duration       *float64          `json:"duration"`
	QueuedDuration *float64          `json:"queued_duration"`
	FailureReason  *string           `json:"failure_reason"`
	When           string            `json:"when"`
	Manual         bool              `json:"manual"`
	AllowFailure   bool              `json:"allow_failure"`
	User           hookUserJSON      `json:"user"`
	Runner         *hookRunnerJSON   `json:"runner"`
	ArtifactsFile  artifactsFileJSON `json:"artifacts_file"`
	Environment    *struct{}         `json:"environment"`
}

type pipelineEventJSON struct {
	ObjectKind       string              `json:"object_kind"`
	ObjectAttributes pipelineAttrsJSON   `json:"object_attributes"`
	MergeRequest     *hookPipelineMRJSON `json:"merge_request"`
	User             hookUserJSON        `json:"user"`
	Project          hookProjectJSON     `json:"project"`
	Commit           *hookCommitJSON     `json:"commit"`
	Builds           []hookBuildJSON     `json:"builds"`
}

// detailedStatusLabel is the label of a status in GitLab's UI, which
// object_attributes.detailed_status carries.
func detailedStatusLabel(status string) string {
	switch status {
	case "success":
		return "passed"
	case "manual":
		return "manual action"
	case "scheduled":
		return "delayed"
	case "waiting_for_resource":
		return "waiting for resource"
	}
	return status
}

// pipelineEvent renders the Pipeline Hook payload of pl as it is now.
// Callers hold s.mu.
func (s *Server) pipelineEvent(p *project, pl *pipeline) pipelineEventJSON {
	user := s.pipelineUser(pl).hook(s.URL)
	attrs := pipelineAttrsJSON{
		ID: pl.id, IID: pl.iid, Ref: s.sourceRef(p, pl), Tag: pl.tag, SHA: pl.sha, BeforeSHA: pl.beforeSHA,
		Source: pl.source, Status: pl.status, DetailedStatus: detailedStatusLabel(pl.status),
		Stages: []string{"build"}, CreatedAt: hookTime(pl.createdAt), FinishedAt: hookTimePtr(pl.finishedAt),
		Variables: []hookVariableJSON{},
		URL:       s.URL + "/" + p.path + "/-/pipelines/" + strconv.FormatInt(pl.id, 10),
	}
	for _, v := range pl.vars {
		attrs.Variables = append(attrs.Variables, hookVariableJSON{Key: v.Key, Value: v.Value})
	}
	// One job, "build", mirrors the pipeline.
	build := hookBuildJSON{
		ID: pl.id*10 + 1, Stage: "build", Name: "build", Status: pl.status,
		CreatedAt: hookTime(pl.createdAt), StartedAt: hookTimePtr(pl.startedAt),
		FinishedAt: hookTimePtr(pl.finishedAt), When: "on_success", User: user,
	}
	if !pl.startedAt.IsZero() {
		q := int64(pl.startedAt.Sub(pl.createdAt).Seconds())
		attrs.QueuedDuration = &q
		qf := pl.startedAt.Sub(pl.createdAt).Seconds()
		build.QueuedDuration = &qf
		build.Runner = &hookRunnerJSON{ID: 1, Description: "gitlabtest runner", RunnerType: "instance_type",
			Active: true, IsShared: true, Tags: []string{}}
		if !pl.finishedAt.IsZero() {
			d := int64(pl.finishedAt.Sub(pl.startedAt).Seconds())
			attrs.Duration = &d
			df := pl.finishedAt.Sub(pl.startedAt).Seconds()
			build.Duration = &df
		}
	}
	if pl.status == "failed" {
		reason := "script_failure"
		build.FailureReason = &reason
	}
	builds := []hookBuildJSON{build}
	if len(pl.jobs) > 0 {
		builds, attrs.Stages = s.hookBuilds(pl, user)
	}
	s.externalHook(pl, &attrs, &builds) // statuses.go
	out := pipelineEventJSON{
		ObjectKind:       "pipeline",
		ObjectAttributes: attrs,
		User:             user,
		Project:          s.projectHookAttrs(p),
		Builds:           builds,
	}
	if c, ok := p.commits[pl.sha]; ok {
		hc := s.hookCommit(p, c)
		out.Commit = &hc
	}
	out.MergeRequest = s.pipelineMR(p, pl)
	return out
}

// pipelineHooks posts pl's current state to the project's pipeline hooks.
// Callers hold s.mu.
func (s *Server) pipelineHooks(pl *pipeline) {
	p, ok := s.inst.projects[pl.projectID]
	if !ok || len(p.hooks) == 0 {
		return
	}
	body, err := json.Marshal(s.pipelineEvent(p, pl))
	if err != nil {
		panic("gitlabtest: render pipeline event: " + err.Error())
	}
	s.fire(p, PipelineHook, "pipeline_events", nil, body, Delivery{
		PipelineID: pl.id, PipelineStatus: pl.status, Ref: pl.ref,
	})
}

type pushCommitJSON struct {
	hookCommitJSON
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

type pushEventJSON struct {
	ObjectKind        string           `json:"object_kind"`
	EventName         string           `json:"event_name"`
	Before            string           `json:"before"`
	After             string           `json:"after"`
	Ref               string           `json:"ref"`
	RefProtected      bool             `json:"ref_protected"`
	CheckoutSHA       *string          `json:"checkout_sha"`
	UserID            int64            `json:"user_id"`
	UserName          string           `json:"user_name"`
	UserUsername      string           `json:"user_username"`
	UserEmail         string           `json:"user_email"`
	UserAvatar        string           `json:"user_avatar"`
	ProjectID         int64            `json:"project_id"`
	Project           pushProjectJSON  `json:"project"`
	Repository        repositoryJSON   `json:"repository"`
	Commits           []pushCommitJSON `json:"commits"`
	TotalCommitsCount int              `json:"total_commits_count"`
}

// fileChanges are the files a commit added, modified and removed.
type fileChanges struct{ added, modified, removed []string }

func diffFiles(before, after map[string]string) fileChanges {
	ch := fileChanges{added: []string{}, modified: []string{}, removed: []string{}}
	for f, v := range after {
		old, ok := before[f]
		switch {
		case !ok:
			ch.added = append(ch.added, f)
		case old != v:
			ch.modified = append(ch.modified, f)
		}
	}
	for f := range before {
		if _, ok := after[f]; !ok {
			ch.removed = append(ch.removed, f)
		}
	}
	slices.Sort(ch.added)
	slices.Sort(ch.modified)
	slices.Sort(ch.removed)
	return ch
}

// pushEvent renders the Push Hook payload of a push of commit c to branch.
// Callers hold s.mu.
func (s *Server) pushEvent(p *project, branch string, c *commit, ch fileChanges) pushEventJSON {
	commits := []pushCommitJSON{{
		hookCommitJSON: s.hookCommit(p, c),
		Added:          ch.added, Modified: ch.modified, Removed: ch.removed,
	}}
	return s.refPushEvent(p, "refs/heads/"+branch, cmp.Or(c.parent, zeroSHA), c.sha, commits, 1, c.pusherOf())
}

// refPushEvent renders a Push Hook payload of ref moving from before to
// after (zeroSHA when created or deleted) by user, with the pushed
// commits, oldest first, of total. Callers hold s.mu.
func (s *Server) refPushEvent(p *project, ref, before, after string, commits []pushCommitJSON, total int, user fakeUser) pushEventJSON {
	hp := s.projectHookAttrs(p)
	checkout := &after
	if after == zeroSHA {
		checkout = nil // a deleted ref
	}
	branch := strings.TrimPrefix(ref, "refs/heads/")
	return pushEventJSON{
		ObjectKind: "push", EventName: "push",
		Before: before, After: after, Ref: ref,
		RefProtected: p.isProtected(branch), CheckoutSHA: checkout,
		UserID: user.id, UserName: user.name, UserUsername: user.username,
		UserEmail: user.email, UserAvatar: user.avatar(s.URL),
		ProjectID: p.id,
		Project: pushProjectJSON{
			hookProjectJSON: hp,
			Homepage:        hp.WebURL, URL: hp.GitSSHURL, SSHURL: hp.GitSSHURL, HTTPURL: hp.GitHTTPURL,
		},
		Repository: repositoryJSON{
			Name: hp.Name, URL: hp.GitSSHURL, Description: hp.Description, Homepage: hp.WebURL,
			GitHTTPURL: hp.GitHTTPURL, GitSSHURL: hp.GitSSHURL, VisibilityLevel: hp.VisibilityLevel,
		},
		Commits:           commits,
		TotalCommitsCount: total,
	}
}
