package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/bindings/images"
	"github.com/containers/podman/v4/pkg/bindings/system"
	"github.com/containers/podman/v4/pkg/errorhandling"
)

// Podman talks to one podman API service (rootful or rootless) over its
// REST API. It is safe for sequential use by one stage; exec sessions open
// their own connections, so a stage may run a second exec (to stop the
// first) while one is attached.
type Podman struct {
	local bool // the service listens on a unix socket of this host
	// conn is the bindings' connection. The bindings look it up in a
	// context value, so it is kept here and merged into each caller's
	// context by ctx: callers keep control of cancellation.
	conn context.Context
}

// Dial connects to the podman service at uri (unix:///run/podman/podman.sock,
// tcp://host:port, ssh://...) and checks that it answers.
func Dial(ctx context.Context, uri string) (*Podman, error) {
	conn, err := bindings.NewConnection(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("connect to podman at %s: %w", uri, err)
	}
	return &Podman{conn: context.WithoutCancel(conn), local: strings.HasPrefix(uri, "unix:")}, nil
}

// Local reports whether the service is reached through a unix socket of
// this host, and so shares its filesystem.
func (p *Podman) Local() bool { return p.local }

// Rootless reports whether the podman service runs rootless (its user
// namespace is a user's, which holds only that user's subordinate IDs).
func (p *Podman) Rootless(ctx context.Context) (bool, error) {
	info, err := system.Info(p.ctx(ctx), nil)
	if err != nil {
		return false, fmt.Errorf("podman info: %w", err)
	}
	return info.Host.Security.Rootless, nil
}

// ctx returns a context with the caller's deadline and cancellation and
// the bindings' connection value.
func (p *Podman) ctx(ctx context.Context) context.Context {
	return valueCtx{Context: ctx, values: p.conn}
}

type valueCtx struct {
	context.Context
	values context.Context
}

func (v valueCtx) Value(key any) any {
	if val := v.Context.Value(key); val != nil {
		return val
	}
	return v.values.Value(key)
}

// notFound maps podman's 404 answers to ErrNotFound.
func notFound(err error) error {
	var em *errorhandling.ErrorModel
	if errors.As(err, &em) && em.ResponseCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s", ErrNotFound, em.Message)
	}
	var ev errorhandling.ErrorModel
	if errors.As(err, &ev) && ev.ResponseCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s", ErrNotFound, ev.Message)
	}
	return err
}

// ImageExists reports whether ref is in the service's local image store.
func (p *Podman) ImageExists(ctx context.Context, ref string) (bool, error) {
	ok, err := images.Exists(p.ctx(ctx), ref, nil)
	if err != nil {
		return false, fmt.Errorf("look up image %s: %w", ref, err)
	}
	return ok, nil
}

// Pull pulls ref with the given options, writing podman's progress lines
// to progress.
func (p *Podman) Pull(ctx context.Context, ref string, o PullOptions, progress io.Writer) error {
	opts := new(images.PullOptions).WithPolicy(string(o.Policy)).WithProgressWriter(progress)
	if o.Auth.AuthFile != "" {
		opts = opts.WithAuthfile(o.Auth.AuthFile)
	}
	if o.Auth.Username != "" {
		opts = opts.WithUsername(o.Auth.Username).WithPassword(o.Auth.Password)
	}
	if o.Auth.IdentityToken != "" {
		// The bindings send a token only from an auth file.
		dir, err := os.MkdirTemp("", "podman-executor-token-")
		if err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "auth.json")
		b, _ := json.Marshal(map[string]any{"auths": map[string]any{o.Auth.Registry: map[string]string{"identitytoken": o.Auth.IdentityToken}}})
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		opts = opts.WithAuthfile(file)
	}
	if o.SkipTLSVerify {
		opts = opts.WithSkipTLSVerify(true)
	}
	if o.Platform != "" {
		os, arch, variant := splitPlatform(o.Platform)
		opts = opts.WithOS(os).WithArch(arch)
		if variant != "" {
			opts = opts.WithVariant(variant)
		}
	}
	if _, err := images.Pull(p.ctx(ctx), ref, opts); err != nil {
		return fmt.Errorf("pull %s: %w", ref, notFound(err))
	}
	return nil
}

// splitPlatform reads "os/arch[/variant]".
func splitPlatform(p string) (os, arch, variant string) {
	os, rest, _ := strings.Cut(p, "/")
	arch, variant, _ = strings.Cut(rest, "/")
	return os, arch, variant
}

// Start starts a created container.
func (p *Podman) Start(ctx context.Context, name string) error {
	if err := containers.Start(p.ctx(ctx), name, nil); err != nil {
		return fmt.Errorf("start container %s: %w", name, notFound(err))
	}
	return nil
}

// Remove removes a container at once (stop timeout 0, with its anonymous
// volumes). A container that does not exist is not an error.
func (p *Podman) Remove(ctx context.Context, name string) error {
	opts := new(containers.RemoveOptions).WithForce(true).WithTimeout(0).WithVolumes(true).WithIgnore(true)
	reports, err := containers.Remove(p.ctx(ctx), name, opts)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("remove container %s: %w", name, busy(err))
	}
	for _, r := range reports {
		if r.Err != nil && !errors.Is(notFound(r.Err), ErrNotFound) {
			return fmt.Errorf("remove container %s: %w", name, busy(r.Err))
		}
	}
	return nil
}

// busy marks an error of podman's that says a mount was busy (EBUSY,
// "device or resource busy": it crosses the API as text) as ErrBusy.
func busy(err error) error {
	if strings.Contains(err.Error(), "device or resource busy") {
		return fmt.Errorf("%w (%w)", err, ErrBusy)
	}
	return err
}

// Kill sends signal (e.g. "KILL") to a container's main process.
func (p *Podman) Kill(ctx context.Context, name, signal string) error {
	opts := new(containers.KillOptions).WithSignal(signal)
	if err := containers.Kill(p.ctx(ctx), name, opts); err != nil {
		return fmt.Errorf("kill container %s: %w", name, notFound(err))
	}
	return nil
}

// pollInterval is how often exec state is polled after its stream ends.
const pollInterval = 20 * time.Millisecond
