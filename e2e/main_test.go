package e2e

import (
	"os"
	"testing"

	"github.com/zksched/zksched/internal/mcptest"
	"github.com/zksched/zksched/internal/testcluster"
)

// The exit codes of the zksched binary (cmd/zksched/main.go) that the tests expect.
const (
	exitUsage  = 2
	exitFenced = 75
)

// TestMain removes the binaries the tests built, once they are all done. The test binary is
// also the MCP server of the agents' mcp tools (mcptest.Main).
func TestMain(m *testing.M) {
	mcptest.Main()
	code := m.Run()
	testcluster.Cleanup()
	os.Exit(code)
}
