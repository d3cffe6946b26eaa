package store

import (
	"context"

	"gitlab.com/depsd/depsd/chain"
)

// RecordEvent adds one webhook event to the inbox (RecordEvents with one
// event): the tests' shorthand; the daemon records in batches.
func (s *Store) RecordEvent(ctx context.Context, key string, ev chain.Event) (duplicate bool, err error) {
	dups, err := s.RecordEvents(ctx, []chain.NewEvent{{Key: key, Event: ev}})
	if err != nil {
		return false, err
	}
	return dups[0], nil
}
