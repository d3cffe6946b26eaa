package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// One secret for every hook would let whoever learns one hook's
// X-Gitlab-Token forge events of every project: the token travels in the
// header of every delivery, and a project's maintainers can point its hook
// at an address of theirs. So each project's hook gets a secret of its own
// and each group hook one of its group, both derived from the configured
// secret (hooks.secret, the master), which no hook carries:
//
//	project hook:  hex(HMAC-SHA256(master, "project:" + project id))
//	group hook:    hex(HMAC-SHA256(master, "group:" + lower-case group path))
//
// The handler reads the project id a delivery names before it trusts the
// rest, and accepts the project's secret, or the secret of a hooked group
// the project (as depsd scanned it) is in. The master itself is accepted
// only while hooks may still carry it (Options.SharedSecretAccepted: the
// hooks a depsd before per-project secrets installed, until hooks sync has
// given each its own), or with hooks.secret_mode: shared.

// Secret modes: what each hook carries as X-Gitlab-Token.
const (
	// SecretPerProject (the default): each project hook its own secret,
	// each group hook its group's (ProjectSecret, GroupSecret).
	SecretPerProject = "per-project"
	// SecretShared: every hook the configured secret, which then
	// authenticates events of every project (how depsd worked before).
	SecretShared = "shared"
)

// SecretModes are the accepted values of Options.SecretMode.
func SecretModes() []string { return []string{SecretPerProject, SecretShared} }

// ProjectSecret is the X-Gitlab-Token of project id's hook under master:
// 64 hex digits, a token GitLab takes as it is.
func ProjectSecret(master string, projectID int64) string {
	return derive(master, "project:"+strconv.FormatInt(projectID, 10))
}

// GroupSecret is the X-Gitlab-Token of the hook of group (a full path;
// GitLab's paths are case-insensitive) under master.
func GroupSecret(master, group string) string {
	return derive(master, "group:"+strings.ToLower(group))
}

// SecretsInstalled names what hooks sync installed on every hook, for the
// record that says the hooks no longer carry anything else: it changes
// with the master and the mode, and tells neither.
func SecretsInstalled(master, mode string) string {
	return derive(master, "installed:"+mode)[:32]
}

func derive(master, what string) string {
	m := hmac.New(sha256.New, []byte(master))
	m.Write([]byte(what))
	return hex.EncodeToString(m.Sum(nil))
}

// deliveredProject reads the project id a delivery names, and nothing
// else: "project": {"id": N} (pipeline and push events) or "project_id"
// (push events). It is 0 when there is none; two that differ are an
// error. The body is untrusted: this is all that is read of it before its
// secret is checked.
func deliveredProject(body []byte) (int64, bool) {
	var p struct {
		ProjectID *int64 `json:"project_id"`
		Project   *struct {
			ID *int64 `json:"id"`
		} `json:"project"`
	}
	if json.Unmarshal(body, &p) != nil {
		return 0, false
	}
	var id int64
	if p.Project != nil && p.Project.ID != nil {
		id = *p.Project.ID
	}
	if p.ProjectID != nil {
		if id != 0 && *p.ProjectID != id {
			return 0, false
		}
		id = *p.ProjectID
	}
	return id, id > 0
}

// underGroup reports whether path is group or below it (case-insensitive,
// as GitLab's paths).
func underGroup(path, group string) bool {
	return len(path) > len(group) && path[len(group)] == '/' && strings.EqualFold(path[:len(group)], group)
}
