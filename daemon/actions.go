package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/signin"
)

// The actions a signed-in person may take (sign-in on only): from the
// dashboard's forms (POST /rebuild, POST /chains/{id}/retry|skip|cancel,
// with the session's CSRF token; answered with a redirect to the chain)
// and from the API (the same under /api/v1/, form or JSON, with a
// personal access token as Authorization: Bearer; answered in JSON).
// Each one:
//   - needs at least Developer on the project, asked of GitLab with the
//     person's own token at that moment (signin.Person.Role): on the
//     member for retry and skip, on the project for rebuild, on every
//     root of the chain for cancel;
//   - answers 404 for what the person may not see, as for what does not
//     exist;
//   - goes through the engine as `depsd rebuild` does, which writes it to
//     the audit log in the transaction that acts; a refusal (CSRF, role,
//     state) is written to the audit log too.

// actionKinds are the actions on a chain.
var actionKinds = []chain.AuditAction{chain.AuditRetry, chain.AuditSkip, chain.AuditCancel}

// actionRoutes adds the action routes to mux (behind the sign-in).
func (a *api) actionRoutes(mux *http.ServeMux) {
	for _, kind := range actionKinds {
		mux.HandleFunc("POST /chains/{id}/"+string(kind), a.act(kind, false))
		mux.HandleFunc("POST /api/v1/chains/{id}/"+string(kind), a.act(kind, true))
	}
	mux.HandleFunc("POST /rebuild", a.act(chain.AuditRebuild, false))
	mux.HandleFunc("POST /api/v1/rebuild", a.act(chain.AuditRebuild, true))
}

// actionInput is what an action request carries.
type actionInput struct {
	Member  string `json:"member"`
	Project string `json:"project"`
	Reason  string `json:"reason"`
	CSRF    string `json:"csrf"`
}

// actionError is an answer to an action that did not happen.
type actionError struct {
	code    int
	msg     string
	outcome string // written to the audit log; "" writes nothing
}

func (e *actionError) Error() string { return e.msg }

func (a *api) act(kind chain.AuditAction, isAPI bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := signin.PersonFrom(r.Context())
		entry := chain.AuditEntry{Action: kind}
		by := chain.Actor{Address: clientAddress(r)}
		if p != nil {
			by.Name, by.ID = p.Username, p.ID
		}
		chainID, err := a.doAction(r, p, kind, by, &entry, isAPI)
		if err != nil {
			var ae *actionError
			if !errors.As(err, &ae) {
				ae = &actionError{code: http.StatusInternalServerError, msg: err.Error()}
			}
			if ae.outcome != "" && p != nil {
				if err := a.engine.AuditRefused(r.Context(), entry, by, ae.outcome); err != nil {
					a.log().Warn("refused action not written to the audit log", "err", err)
				}
			}
			if isAPI {
				writeError(w, ae.code, ae)
			} else {
				a.dashboard.Fail(w, r, ae.code, ae)
			}
			return
		}
		if isAPI {
			writeJSON(w, http.StatusOK, map[string]any{"chain_id": chainID, "action": kind, "outcome": chain.OutcomeDone})
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chains/%d", chainID), http.StatusSeeOther)
	}
}

// doAction checks and carries out one action and returns the chain it
// acted on.
func (a *api) doAction(r *http.Request, p *signin.Person, kind chain.AuditAction, by chain.Actor, entry *chain.AuditEntry, isAPI bool) (int64, error) {
	ctx := r.Context()
	if p == nil {
		return 0, &actionError{code: http.StatusUnauthorized, msg: "sign in with GitLab to act"}
	}
	in, err := readActionInput(r, isAPI)
	if err != nil {
		return 0, &actionError{code: http.StatusBadRequest, msg: err.Error()}
	}
	entry.Reason = in.Reason
	if kind != chain.AuditRebuild {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			return 0, &actionError{code: http.StatusBadRequest, msg: "chain id: want a number"}
		}
		entry.ChainID = id
	}
	switch kind {
	case chain.AuditRebuild:
		entry.Target = strings.TrimSpace(in.Project)
	case chain.AuditRetry, chain.AuditSkip:
		entry.Target = strings.TrimSpace(in.Member)
	}
	if !a.signin.CheckCSRF(r, p) {
		return 0, &actionError{code: http.StatusForbidden, msg: "the form's CSRF token is missing or wrong: reload the page and try again",
			outcome: "refused: no valid CSRF token"}
	}
	scope := a.scope(r)
	// What the role is checked on: the member, the project, or the
	// chain's roots.
	var targets []string
	if kind == chain.AuditCancel {
		c, err := a.engine.Chain(ctx, entry.ChainID)
		if errors.Is(err, chain.ErrNotFound) {
			return 0, &actionError{code: http.StatusNotFound, msg: fmt.Sprintf("there is no chain %d", entry.ChainID)}
		}
		if err != nil {
			return 0, err
		}
		if _, ok := scope.Chain(c); !ok {
			return 0, &actionError{code: http.StatusNotFound, msg: fmt.Sprintf("there is no chain %d", entry.ChainID)}
		}
		targets = c.Roots
	} else {
		if entry.Target == "" {
			return 0, &actionError{code: http.StatusBadRequest, msg: "name the project (" + map[bool]string{true: "project", false: "member"}[kind == chain.AuditRebuild] + ")"}
		}
		if !scope.Sees(entry.Target) {
			return 0, &actionError{code: http.StatusNotFound, msg: fmt.Sprintf("project %s is not in the scanned graph", entry.Target)}
		}
		targets = []string{entry.Target}
	}
	for _, t := range targets {
		if !scope.Sees(t) {
			return 0, &actionError{code: http.StatusForbidden, msg: "the chain started at a project you cannot see: only its people may cancel it",
				outcome: "refused: a root is not visible to them"}
		}
		path := deps.NodeProject(t)
		proj, err := a.store.Project(ctx, path)
		if errors.Is(err, scan.ErrNotFound) {
			return 0, &actionError{code: http.StatusNotFound, msg: fmt.Sprintf("project %s is not in the scanned graph", path)}
		}
		if err != nil {
			return 0, err
		}
		role, err := p.Role(ctx, proj.ID)
		if err != nil {
			return 0, &actionError{code: http.StatusBadGateway, msg: "GitLab did not say what your role on " + path + " is: try again"}
		}
		if role < gitlab.Developer {
			return 0, &actionError{code: http.StatusForbidden,
				msg:     fmt.Sprintf("you are %s on %s: acting on its chains needs Developer or more", roleName(role), path),
				outcome: fmt.Sprintf("refused: %s on %s", roleName(role), path)}
		}
	}
	var id int64
	switch kind {
	case chain.AuditRebuild:
		id, err = a.engine.RebuildBy(ctx, entry.Target, by)
	case chain.AuditRetry:
		id, err = entry.ChainID, a.engine.Retry(ctx, entry.ChainID, entry.Target, by)
	case chain.AuditSkip:
		id, err = entry.ChainID, a.engine.Skip(ctx, entry.ChainID, entry.Target, in.Reason, by)
	case chain.AuditCancel:
		id, err = entry.ChainID, a.engine.Cancel(ctx, entry.ChainID, in.Reason, by)
	}
	switch {
	case errors.Is(err, chain.ErrNotFound), errors.Is(err, chain.ErrUnknownProject):
		return 0, &actionError{code: http.StatusNotFound, msg: scope.Text(err.Error())}
	case errors.Is(err, chain.ErrReasonRequired):
		return 0, &actionError{code: http.StatusBadRequest, msg: "say why it is skipped (reason)"}
	case errors.Is(err, chain.ErrNotNow), errors.Is(err, chain.ErrCycle):
		msg := scope.Text(err.Error())
		return 0, &actionError{code: http.StatusConflict, msg: msg, outcome: "refused: " + msg}
	case err != nil:
		return 0, err
	}
	return id, nil
}

// readActionInput reads a form (the dashboard, or the API) or a JSON
// body (the API), at most 64 KiB.
func readActionInput(r *http.Request, isAPI bool) (actionInput, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
	var in actionInput
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if isAPI && ct == "application/json" {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return in, fmt.Errorf("read the JSON body: %w", err)
		}
		if in.CSRF != "" && r.Header.Get("X-CSRF-Token") == "" {
			r.Header.Set("X-CSRF-Token", in.CSRF)
		}
		return in, nil
	}
	if err := r.ParseForm(); err != nil {
		return in, fmt.Errorf("read the form: %w", err)
	}
	return actionInput{Member: r.PostFormValue("member"), Project: r.PostFormValue("project"),
		Reason: r.PostFormValue("reason"), CSRF: r.PostFormValue("csrf")}, nil
}

// clientAddress is the address the request came from: the peer's, as
// depsd saw it (behind a reverse proxy, the proxy's; depsd trusts no
// forwarding header).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// roleName names an access level as GitLab does.
func roleName(l gitlab.AccessLevel) string {
	switch {
	case l >= gitlab.Owner:
		return "Owner"
	case l >= gitlab.Maintainer:
		return "Maintainer"
	case l >= gitlab.Developer:
		return "Developer"
	case l >= gitlab.Reporter:
		return "Reporter"
	case l >= gitlab.Guest:
		return "Guest"
	}
	return "not a member"
}
