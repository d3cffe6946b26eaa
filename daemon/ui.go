package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/dashboard"
	"gitlab.com/depsd/depsd/signin"
	"gitlab.com/depsd/depsd/visible"
)

// newSignin builds the sign-in with GitLab when ui.auth is gitlab; nil
// when it is none (anyone who reaches the listener sees everything).
func (d *Daemon) newSignin(ctx context.Context) (*signin.Service, error) {
	cfg := d.opts.Config
	if cfg.UIAuth() != config.UIAuthGitLab {
		return nil, nil
	}
	svc, err := signin.New(ctx, signin.Config{
		GitLab: d.gitlab, ClientID: cfg.UI.OAuth.ClientID, ClientSecret: cfg.UI.OAuth.ClientSecret,
		ExternalURL: cfg.UI.URL, SessionLifetime: cfg.UI.SessionLifetime, VisibilityTTL: cfg.UI.VisibilityTTL,
		Store: d.store, Now: d.opts.Now, Logger: d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("sign-in with GitLab: %w", err)
	}
	return svc, nil
}

// warnOpenUI says, at start, that a dashboard without sign-in listens
// beyond this host.
func (d *Daemon) warnOpenUI(addr string) {
	if d.signin != nil {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return
	}
	d.log.Warn("the dashboard and the API have no sign-in (ui.auth: none) and listen beyond this host: anyone who reaches them sees every project in scope; set ui.oauth (docs/dashboard.md) or serve them on a loopback address", "addr", addr)
}

// scopeOf is what the person asking may see: everything when sign-in is
// off.
func (d *Daemon) scopeOf(r *http.Request) *visible.Scope {
	p := signin.PersonFrom(r.Context())
	if p == nil {
		return visible.All()
	}
	known := func(string) bool { return false }
	if c := d.state.cur.Load(); c != nil {
		known = c.graph.Has
	}
	return visible.For(p.Visible().Sees, known)
}

// viewer is who asks a dashboard page, and what they may see.
func (d *Daemon) viewer(r *http.Request) dashboard.Viewer {
	p := signin.PersonFrom(r.Context())
	if p == nil {
		return dashboard.Viewer{}
	}
	v := p.Visible()
	at := time.Time{}
	if v != nil {
		at = v.At
	}
	return dashboard.Viewer{Name: p.Username, CSRF: p.CSRF(), Scope: d.scopeOf(r), SeenAt: at,
		Key: fmt.Sprintf("%d@%d", p.ID, at.UnixNano())}
}

// public are the requests served without sign-in: the dashboard's static
// assets (the sign-in page uses its stylesheet).
func public(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/static/")
}
