package main

import (
	"os"
	"testing"

	"github.com/zksched/zksched/internal/testcluster"
)

// TestMain removes the zksched binary the end-to-end tests built, once they are all done.
func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.Cleanup()
	os.Exit(code)
}
