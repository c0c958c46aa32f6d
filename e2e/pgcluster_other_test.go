//go:build !linux

package e2e

import (
	"os/exec"
	"testing"
)

// pgCluster is pgcluster_linux_test.go's throwaway PostgreSQL server: it
// runs the Debian layout's binaries as the "postgres" user and is killed
// with its parent (Pdeathsig), so elsewhere the tests that need one skip.
type pgCluster struct {
	cmd *exec.Cmd
}

func startPGCluster(tb testing.TB) *pgCluster {
	tb.Skip("a throwaway PostgreSQL server runs on Linux only")
	return nil
}

func (c *pgCluster) DSN() string         { return "" }
func (c *pgCluster) Start(tb testing.TB) {}
func (c *pgCluster) Stop(tb testing.TB)  {}
