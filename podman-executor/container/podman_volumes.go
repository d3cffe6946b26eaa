package container

import (
	"context"
	"errors"
	"fmt"

	"github.com/containers/podman/v4/pkg/bindings/volumes"
	"github.com/containers/podman/v4/pkg/domain/entities"
)

// ErrInUse reports a volume a container still uses.
var ErrInUse = errors.New("in use")

// CreateVolume creates a named volume with labels; an existing one with
// that name is kept as it is.
func (p *Podman) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	ok, err := volumes.Exists(p.ctx(ctx), name, nil)
	if err != nil {
		return fmt.Errorf("look up volume %s: %w", name, err)
	}
	if ok {
		return nil
	}
	_, err = volumes.Create(p.ctx(ctx), entities.VolumeCreateOptions{Name: name, Labels: labels, IgnoreIfExists: true}, nil)
	if err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes returns the volumes carrying all labels.
func (p *Podman) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	list, err := volumes.List(p.ctx(ctx), new(volumes.ListOptions).WithFilters(labelFilter(labels)))
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	// podman 4.3 ORs several label filters on volumes: check them all here.
	out := make([]Volume, 0, len(list))
	for _, v := range list {
		if hasLabels(v.Labels, labels) {
			out = append(out, Volume{Name: v.Name, Labels: v.Labels, Created: v.CreatedAt})
		}
	}
	return out, nil
}

// RemoveVolume removes a volume that no container uses (ErrInUse
// otherwise); one already gone is not an error.
func (p *Podman) RemoveVolume(ctx context.Context, name string) error {
	err := volumes.Remove(p.ctx(ctx), name, nil)
	if err == nil || errors.Is(notFound(err), ErrNotFound) {
		return nil
	}
	var em interface{ Code() int }
	if errors.As(err, &em) && em.Code() == 409 {
		return fmt.Errorf("remove volume %s: %w", name, ErrInUse)
	}
	return fmt.Errorf("remove volume %s: %w", name, err)
}
