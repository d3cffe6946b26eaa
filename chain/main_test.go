package chain_test

import (
	"testing"

	"gitlab.com/depsd/depsd/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
