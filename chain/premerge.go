package chain

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Validations (docs/validation.md): before an upstream's merge request is
// merged, its candidate image (what its merge request pipeline pushed) is
// built on by its dependents. A validation is a chain of kind
// KindValidation: its root is the upstream's node, a member that succeeded
// with the merge request pipeline (its Images the candidate's digest); its
// other members are the node's dependents (depth 1: the direct ones; all:
// everything downstream, each once, in dependency order), each built by a
// pipeline on its own ref with depsd_validate and depsd_build_contexts
// (an outbox action of kind ActionValidate, sent and adopted as any other,
// claimed after every release action due). It publishes nothing, counts
// nothing toward freshness, starts and unblocks no release chain, and is
// never merged with another chain. Its answer goes on the merge request: a
// commit status (ValidationStatusName) on the merge request pipeline and
// one note kept up to date (validationnote.go). What a merge request's
// validations are is kept per merge request (MRValidation).

// ChainKind says what a chain is for.
type ChainKind string

const (
	// KindRelease: a rebuild after a change that was released (every
	// chain before validations existed).
	KindRelease ChainKind = "release"
	// KindValidation: the dependents of an upstream's merge request built
	// on its candidate image, publishing nothing.
	KindValidation ChainKind = "validation"
)

// ChainKinds are the kinds, as the API and the CLI name them.
func ChainKinds() []ChainKind { return []ChainKind{KindRelease, KindValidation} }

// ValidationStatusName is the name of the commit status depsd keeps on a
// merge request pipeline whose candidate its dependents are built on.
const ValidationStatusName = "depsd/dependents"

// ReasonMergeRequest: a merge request pipeline of the root pushed a
// candidate image (a validation chain's one reason).
const ReasonMergeRequest ReasonKind = "merge-request"

// ActionValidate is the kind of an action that creates a validation
// pipeline: a build on candidate images that publishes nothing.
const ActionValidate ActionKind = "validate"

// The pipeline inputs and variables of a validation build, as the build
// component (templates/image-build.yml) reads them.
const (
	InputValidate      = "depsd_validate"
	InputBuildContexts = "depsd_build_contexts"
	InputValidateTag   = "depsd_validate_tag"
	VarValidate        = "DEPSD_VALIDATE"
	VarBuildContexts   = "DEPSD_BUILD_CONTEXTS"
	VarValidateTag     = "DEPSD_VALIDATE_TAG"
)

// ValidateRequest is what a validation build is asked to build on and
// push (Action.Validate).
type ValidateRequest struct {
	// BuildContexts are NAME=docker-image://REPO@DIGEST separated by
	// spaces: NAME is an upstream's image as the member's Containerfile
	// writes it, or the ARG a FROM names (docs/build-component.md).
	BuildContexts string `json:"build_contexts"`
	// Tag, when set, is the tag the build pushes its image to, for the
	// next level to build on (depth all).
	Tag string `json:"tag,omitempty"`
}

// ValidationDepth is how far below the upstream a validation builds.
type ValidationDepth string

const (
	// DepthDirect: the direct dependents only.
	DepthDirect ValidationDepth = "1"
	// DepthAll: everything downstream, each level on the level above's
	// validation images.
	DepthAll ValidationDepth = "all"
)

// ValidationDepths are the depths, as the configuration names them.
func ValidationDepths() []ValidationDepth { return []ValidationDepth{DepthDirect, DepthAll} }

// DefaultCandidate is where a merge request pipeline pushes its candidate
// image unless premerge says otherwise: the build component's default.
const DefaultCandidate = "{registry}/{path}:mr-{iid}"

// PremergeRule is one entry of `premerge:` in depsd.yaml: the projects it
// covers, and how their merge requests are validated.
type PremergeRule struct {
	// Projects are project paths or globs (* within a segment).
	Projects []string
	// Label, when set, limits validations to merge requests carrying it.
	Label string
	// Depth is DepthDirect (default) or DepthAll.
	Depth ValidationDepth
	// Candidate is the candidate's reference template: {registry},
	// {path} (as images.publish) and {iid}. Default DefaultCandidate.
	Candidate string
}

// PremergeRules are the entries of `premerge:`: the first matching a
// project applies; a project none matches has no validations.
type PremergeRules []PremergeRule

// For returns the rule of project (a path, or a node whose project is
// meant).
func (r PremergeRules) For(project string) (PremergeRule, bool) {
	project = deps.NodeProject(project)
	for _, rule := range r {
		for _, g := range rule.Projects {
			if ok, _ := path.Match(g, project); ok {
				if rule.Depth == "" {
					rule.Depth = DepthDirect
				}
				if rule.Candidate == "" {
					rule.Candidate = DefaultCandidate
				}
				return rule, true
			}
		}
	}
	return PremergeRule{}, false
}

// Covers reports whether project's merge requests are validated.
func (r PremergeRules) Covers(project string) bool {
	_, ok := r.For(project)
	return ok
}

var candidatePlaceholder = regexp.MustCompile(`\{[^}]*\}`)

// ExpandCandidate fills a candidate template with a project's registry
// prefix (host/path: {registry} is its host, {path} the rest) and the
// merge request's iid, and normalises the result (host/path:tag).
func ExpandCandidate(tmpl, prefix string, iid int64) (string, error) {
	for _, m := range candidatePlaceholder.FindAllString(tmpl, -1) {
		if m != "{registry}" && m != "{path}" && m != "{iid}" {
			return "", fmt.Errorf("unknown placeholder %s: want {registry}, {path} and {iid}", m)
		}
	}
	host, p, _ := strings.Cut(strings.Trim(prefix, "/"), "/")
	if (strings.Contains(tmpl, "{registry}") || strings.Contains(tmpl, "{path}")) && (host == "" || p == "") {
		return "", fmt.Errorf("the project has no container registry (no registry prefix)")
	}
	ref := strings.NewReplacer("{registry}", host, "{path}", p, "{iid}", strconv.FormatInt(iid, 10)).Replace(tmpl)
	img, err := deps.NormalizeImage(ref)
	if err != nil {
		return "", err
	}
	if img.Tag == "" || img.Digest != "" {
		return "", fmt.Errorf("%s: a candidate is a tag", ref)
	}
	return img.Repository + ":" + img.Tag, nil
}

// CheckCandidate says whether tmpl gives a valid candidate reference, for
// an example project: for configuration checks.
func CheckCandidate(tmpl string) error {
	_, err := ExpandCandidate(tmpl, "registry.example.com/group/project", 12)
	return err
}

// repositoryOf is a reference (host/path:tag) without its tag.
func repositoryOf(ref string) string {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[:i]
	}
	return ref
}

// ValidateTag is the tag a validation member's build pushes its image to
// for the level below (depth all).
func ValidateTag(chainID int64) string { return "depsd-validate-" + formatID(chainID) }

// MergeRequestRef is the merge request a merge request pipeline belongs
// to, as its Pipeline Hook names it (the merge_request object).
type MergeRequestRef struct {
	IID          int64  `json:"iid"`
	Title        string `json:"title,omitempty"`
	URL          string `json:"url,omitempty"`
	SourceBranch string `json:"source_branch,omitempty"`
	TargetBranch string `json:"target_branch,omitempty"`
}

// SourceMergeRequest is the source GitLab gives a merge request pipeline:
// its image is a candidate, never a release.
const SourceMergeRequest = "merge_request_event"

// Validation is what a validation chain validates (Chain.Validation).
type Validation struct {
	ProjectID    int64  `json:"project_id"` // the upstream's project
	IID          int64  `json:"iid"`        // its merge request
	Title        string `json:"title,omitempty"`
	URL          string `json:"url,omitempty"` // the merge request's page
	SourceBranch string `json:"source_branch,omitempty"`
	TargetBranch string `json:"target_branch,omitempty"`
	// SHA is the merge request's head commit the candidate was built
	// from; PipelineID the merge request pipeline that built it (the
	// commit status lands there).
	SHA         string `json:"sha"`
	PipelineID  int64  `json:"pipeline_id"`
	PipelineURL string `json:"pipeline_url,omitempty"`
	// Candidate is the candidate's reference (host/path:tag) and Digest
	// what it was when the validation started.
	Candidate string          `json:"candidate"`
	Digest    string          `json:"digest"`
	Depth     ValidationDepth `json:"depth"`
	// Canceled says why the validation was called off (a new push, the
	// merge request merged or closed); empty while it is not. Its
	// pipelines still running are canceled on GitLab (RunValidations)
	// and the chain ends canceled once none is.
	Canceled string `json:"canceled,omitempty"`
}

// MRState is a merge request's state, in GitLab's words.
type MRState string

const (
	MROpened MRState = "opened"
	MRMerged MRState = "merged"
	MRClosed MRState = "closed"
)

// MRValidation is what depsd keeps of one merge request of an upstream
// that premerge covers: its validations and the answer on it.
type MRValidation struct {
	ProjectID int64
	IID       int64
	// Project is the upstream's node: the project at the merge
	// request's target branch.
	Project      string
	Title        string
	URL          string
	SourceBranch string
	TargetBranch string
	State        MRState
	// HeadSHA is the merge request's head commit as depsd last heard
	// of it, PipelineID the newest merge request pipeline seen and
	// PipelineStatus its status.
	HeadSHA        string
	PipelineID     int64
	PipelineURL    string
	PipelineStatus string
	// StartDue: PipelineID succeeded and its validation is still to
	// start (RunValidations reads the merge request and the candidate).
	StartDue bool
	// ChainID is the current validation (0: none yet), Validated the
	// merge request pipeline it validates the candidate of; Chains every
	// validation, oldest first.
	ChainID   int64
	Validated int64
	Chains    []int64
	// Note is the merge request note depsd keeps, and Cleanup the tags
	// to delete once the merge request is merged or closed.
	Note    NoteSend
	Cleanup []TagCleanup
	// NextCheckAt is when RunValidations next reads the merge request
	// (merged, closed, pushed to), and when a start that failed is tried
	// again.
	NextCheckAt time.Time
	Attempts    int    // failed starts in a row
	LastError   string // why the last start or check failed
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// NoteSend is the merge request note of a validation: what it should say
// and what the sender knows GitLab shows, kept exactly once as a commit
// status is (commitstatus.go): the want is written in the chains'
// transactions, a sender claims it, is in doubt until it recorded
// GitLab's answer, and reads the notes back before it creates a note
// again.
type NoteSend struct {
	ID         int64     `json:"id,omitempty"` // GitLab's note id; 0 until created
	Want       string    `json:"want,omitempty"`
	WantSeq    int64     `json:"want_seq,omitempty"`
	DoneSeq    int64     `json:"done_seq,omitempty"`
	Doubt      bool      `json:"doubt,omitempty"`
	NextSendAt time.Time `json:"next_send_at,omitzero"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	ClaimedBy  string    `json:"claimed_by,omitempty"`
	Attempts   int       `json:"attempts,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	SentAt     time.Time `json:"sent_at,omitzero"`
}

// Due reports whether the note has a want to send at now.
func (n NoteSend) Due(now time.Time) bool {
	return n.DoneSeq < n.WantSeq && !n.NextSendAt.After(now) && !n.LeaseUntil.After(now)
}

// TagCleanup is one tag a merge request's validations pushed, to delete
// through GitLab's registry API once it is merged or closed.
type TagCleanup struct {
	ProjectID int64  `json:"project_id"`
	Project   string `json:"project"`
	Image     string `json:"image"` // host/path:tag
	Done      bool   `json:"done,omitempty"`
	// Result says what came of it: "deleted", "not found", or why not.
	Result string `json:"result,omitempty"`
}

// CleanupPending reports whether v has tags still to delete.
func (v MRValidation) CleanupPending() bool {
	return v.State != MROpened && slices.ContainsFunc(v.Cleanup, func(c TagCleanup) bool { return !c.Done })
}

// MRFilter selects merge request validations (Tx.MRValidations).
type MRFilter struct {
	// Due: only those with work for RunValidations at Now: a start due,
	// a check due (an open one), a note due, a cleanup pending.
	Due bool
	Now time.Time
	// ProjectID, when set, keeps that project's.
	ProjectID int64
	Limit     int // at most this many, newest first; 0 means 100
}
