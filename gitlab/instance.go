package gitlab

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Version is GitLab's GET /version: which GitLab depsd talks to.
type Version struct {
	Version  string // e.g. 17.10.0, 18.1.0-ee
	Revision string
}

// AtLeast reports whether the version is major.minor or newer; an
// unparsable version (a development build) counts as new.
func (v Version) AtLeast(major, minor int) bool {
	parts := strings.SplitN(v.Version, ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}

// Version reads GET /version (authenticated users only).
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v *gl.Version
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		v, resp, err = c.gl.Version.GetVersion(o...)
		return resp, err
	})
	if err != nil {
		return Version{}, fmt.Errorf("get GitLab version: %w", err)
	}
	return Version{Version: v.Version, Revision: v.Revision}, nil
}

// User is the token's user (GET /user).
type User struct {
	ID       int64
	Username string
}

// CurrentUser returns the token's user, read once (GET /user) and then
// kept: the user a token belongs to does not change.
func (c *Client) CurrentUser(ctx context.Context) (User, error) {
	// The lock guards the cached user only, never the request: a caller
	// at urgent priority must not wait behind a normal one the limits
	// hold (while urgent work is due, for minutes). Callers asking at
	// once each read it; the answer is the same.
	c.userMu.Lock()
	cached := c.user
	c.userMu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	var u *gl.User
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		u, resp, err = c.gl.Users.CurrentUser(o...)
		return resp, err
	})
	if err != nil {
		return User{}, fmt.Errorf("get the token's user: %w", err)
	}
	user := User{ID: u.ID, Username: u.Username}
	c.userMu.Lock()
	c.user = &user
	c.userMu.Unlock()
	return user, nil
}

// VariablesPolicy is what a project's settings say of pipeline variables
// from the token's user.
type VariablesPolicy string

const (
	// VariablesUnknown: GitLab did not show the settings (it shows them to
	// Maintainers and Owners only), or they leave it open.
	VariablesUnknown VariablesPolicy = ""
	// VariablesAllowed: the token's user may pass variables.
	VariablesAllowed VariablesPolicy = "allowed"
	// VariablesRefused: a create with variables answers 400
	// (ErrVariablesRefused).
	VariablesRefused VariablesPolicy = "refused"
)

// roleLevels are GitLab's access levels of the minimum override roles.
var roleLevels = map[string]int{"developer": 30, "maintainer": 40, "owner": 50}

// variablesPolicy decides as GitLab's :set_pipeline_variables does, from
// restrict_user_defined_variables, ci_pipeline_variables_minimum_override_role
// and the user's access level (permissions, on GET /projects/:id only):
// without the restriction anyone who may create the pipeline may; with it,
// only users with at least the role; nobody for no_one_allowed.
func variablesPolicy(p *gl.Project) VariablesPolicy {
	role := string(p.CIPipelineVariablesMinimumOverrideRole)
	if role == "" {
		return VariablesUnknown // not shown: the token's user is below Maintainer
	}
	if !p.RestrictUserDefinedVariables {
		return VariablesAllowed
	}
	if role == "no_one_allowed" {
		return VariablesRefused
	}
	need, ok := roleLevels[role]
	if !ok {
		return VariablesUnknown
	}
	level := 0
	if p.Permissions != nil {
		if a := p.Permissions.ProjectAccess; a != nil {
			level = max(level, int(a.AccessLevel))
		}
		if a := p.Permissions.GroupAccess; a != nil {
			level = max(level, int(a.AccessLevel))
		}
	}
	if level == 0 {
		// Lists carry no permissions; showing the settings at all
		// means the user administers the project: Maintainer or more.
		if need <= roleLevels["maintainer"] {
			return VariablesAllowed
		}
		return VariablesUnknown
	}
	if level >= need {
		return VariablesAllowed
	}
	return VariablesRefused
}
