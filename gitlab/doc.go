// Package gitlab is the only code in depsd that talks to the GitLab REST API
// (through client-go v2): it lists the projects in scope, reads dependency
// files, creates and watches pipelines, keeps depsd's project hooks in
// shape, and reads and writes tags, branches, commits and merge requests
// (repository.go, mergerequests.go).
//
// # Requests, retries and limits
//
// Every HTTP request, retries included, passes one transport that bounds the
// requests in flight (Config.Concurrency), applies a client-side rate limit
// (Config.RequestsPerMinute) and counts requests (Client.Requests).
// client-go's own retry layer is switched off: it honours RateLimit-Reset
// but not Retry-After, and stacked on ours it would multiply attempts. This
// package retries 429, 5xx and network errors with exponential backoff and
// jitter, waits at least what Retry-After (or RateLimit-Reset) asks, never
// retries other 4xx, and stops when the context ends. A 429 slows the whole
// client down: calls started after it wait for the reset GitLab named, and
// GitLab's RateLimit-Limit becomes the client's limit when lower, for
// GitLab's window (a minute, or until RateLimit-Reset). The
// default limit is gitlab.com's for authenticated API traffic, 2,000
// requests a minute. POSTs are retried only
// when GitLab surely did not act (429, connection refused), so a pipeline is
// never created twice by a retry. Errors are *APIError values naming the
// method, path and status; classify them with IsRetryable, IsPermanent and
// errors.Is(err, ErrNotFound / ErrUnauthorized / ErrForbidden).
//
// # Priorities
//
// Requests waiting for the limits are let through in priority order, which
// a caller sets on the context: WithPriority(ctx, PriorityUrgent) for work
// that moves a chain forward (the outbox's pipeline creations and the
// look-up before a resend); everything else — scans, hook checks, the
// reconciler, the catch-up — is PriorityNormal without saying so. Urgent
// requests go ahead of normal ones that waited longer, and normal ones
// leave a reserve to them (half the burst of tokens, one of the slots), so
// a creation that comes while background reads use up the rate is sent at
// once. While urgent requests wait, normal ones wait too, so that a chain's
// creates have the whole rate (a rebuild of 10,000 projects is its creates
// at the rate limit, nothing else), and so they do while the caller holds
// them (HoldNormal: the outbox has creates due that are not yet waiting);
// but no normal request waits longer than 10 minutes, so a steady stream of creates holds the background jobs
// up without stopping them. All draw from one token bucket, so the
// configured rate holds whatever the mix.
//
// The token is sent only in the PRIVATE-TOKEN header (an OAuth access token,
// Config.OAuth, as Authorization: Bearer), never follows a
// redirect to another host, and is scrubbed from every error and log line
// (even when GitLab echoes it); Config prints it as [REDACTED].
//
// # Cheap scans
//
// A scan is ListProjects (one request per page of 100 projects per group;
// the list carries each project's default branch), then, per project,
// ListFiles (one listing of the repository tree at the default branch:
// which dependency files exist, and their blob ids), then ReadBlob for the
// files whose blob id the caller does not know yet. Blob ids are content
// hashes, so a file is read once however many projects hold the same
// content, and all files of a project come from one tree.
//
// Nothing in the project list says whether the default branch moved, but
// last_activity_at comes close: the caller passes what it kept from the
// last scan (HeadState: branch, a version of what it read, last_activity_at,
// when checked), and Unchanged says the project need not be asked when
// last_activity_at is equal and was already older than
// Config.ActivityWindow when the branch was checked. The window matters:
// GitLab moves last_activity_at on a push only if it is more than an hour
// old, so an equal value after a recent activity proves nothing, and such
// projects are asked again (one tree listing each, until they settle). A
// rescan of an unchanged, settled instance therefore costs one request per
// page of projects. Webhooks (push events) remain the fast path; the scan
// is the safety net.
//
// Offset pagination can miss a project that moves between pages while they
// are read (a deletion shifting the list); the next scan sees it again.
//
// What it holds: the only code that talks to GitLab:
// rate limit, retries, errors classified retryable / permanent / not found
// (refused variables or inputs are `ErrVariablesRefused` /
// `ErrInputsRefused`, a refused status transition `ErrStatusTransition`;
// `ErrConflict`, `ErrNotMergeable`), tags, branches, commits and merge
// requests (`gitlab/repository.go`, `gitlab/mergerequests.go`), keyset
// listing of `GET /projects`, GraphQL batch reads of files
// (`gitlab/graphql.go`), with followed branches and at other refs planned
// within GitLab's complexity limit (`gitlab/graphqlrefs.go`), the GitLab
// version (`GET /version`, read at start) and the token's user, hooks sync
// (signing tokens, group hooks), commit statuses, registry tags, a client
// acting with a person's token (`WithToken`: what they may see, their
// role)
package gitlab
