package chain

// States are the states a chain can be in, in the order of its life; the
// CLI and the HTTP API accept exactly these as filters.
func States() []State { return []State{Running, Blocked, Finished, Expired, ChainCanceled, Merged} }
