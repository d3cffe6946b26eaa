package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/containers/common/libnetwork/types"
	"github.com/containers/podman/v4/pkg/bindings/network"
)

// CreateNetwork creates a bridge network with DNS, so containers on it
// resolve each other's aliases.
func (p *Podman) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	n := &types.Network{Name: name, Driver: "bridge", DNSEnabled: true, Labels: maps.Clone(labels)}
	if _, err := network.Create(p.ctx(ctx), n); err != nil {
		return fmt.Errorf("create network %s: %w", name, err)
	}
	return nil
}

// RemoveNetwork removes a network; one that does not exist is not an error.
// It fails while containers are attached: it never disconnects them.
func (p *Podman) RemoveNetwork(ctx context.Context, name string) error {
	reports, err := network.Remove(p.ctx(ctx), name, nil)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("remove network %s: %w", name, err)
	}
	for _, r := range reports {
		if r.Err != nil && !errors.Is(notFound(r.Err), ErrNotFound) {
			return fmt.Errorf("remove network %s: %w", name, r.Err)
		}
	}
	return nil
}

// ListNetworks returns the networks carrying all the given labels.
func (p *Podman) ListNetworks(ctx context.Context, labels map[string]string) ([]Network, error) {
	opts := new(network.ListOptions).WithFilters(labelFilter(labels))
	list, err := network.List(p.ctx(ctx), opts)
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := make([]Network, 0, len(list))
	for _, n := range list {
		out = append(out, Network{Name: n.Name, Labels: n.Labels, Created: n.Created})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
