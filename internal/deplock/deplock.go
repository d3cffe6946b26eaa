// Package deplock only pins the project's chosen libraries while the packages
// that use them are written. It is removed once they are imported for real.
package deplock

import (
	_ "github.com/distribution/reference"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/moby/buildkit/frontend/dockerfile/instructions"
	_ "github.com/moby/buildkit/frontend/dockerfile/parser"
	_ "github.com/moby/buildkit/frontend/dockerfile/shell"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/robfig/cron/v3"
	_ "gitlab.com/gitlab-org/api/client-go/v2"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/time/rate"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
