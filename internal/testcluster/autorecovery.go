package testcluster

import (
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// AutoRecovery is a `folio autorecovery` process on a Cluster.
type AutoRecovery struct {
	t    testing.TB
	cmd  *exec.Cmd
	wait chan error
	log  string
	once sync.Once
}

// StartAutoRecovery starts `folio autorecovery --id id` on c with timings
// short enough for tests (session TTL 2 s, worker poll 100 ms, open-ledger
// grace period 1 s) followed by extra flags, which may override them (the
// last occurrence of a flag wins). It is SIGKILLed when the test ends.
func (c *Cluster) StartAutoRecovery(id string, extra ...string) *AutoRecovery {
	c.t.Helper()
	d := &AutoRecovery{t: c.t, log: filepath.Join(c.t.TempDir(), "autorecovery.log")}
	args := append([]string{"autorecovery", "--metadata-service-uri", c.URI, "--id", id,
		"--session-ttl", "2s", "--poll-interval", "100ms", "--open-ledger-rereplication-grace-period", "1s"}, c.MetadataFlags...)
	args = append(args, extra...)
	d.cmd, d.wait = startProcessCmd(c.t, exec.Command(Binary(c.t), args...), d.log)
	c.t.Cleanup(d.Kill)
	return d
}

// Exited reports, without waiting, whether the process has exited, and how.
func (d *AutoRecovery) Exited() (bool, error) {
	select {
	case err := <-d.wait:
		d.wait <- err
		return true, err
	default:
		return false, nil
	}
}

// LogPath is the file holding the process's output.
func (d *AutoRecovery) LogPath() string { return d.log }

// Kill SIGKILLs the process and waits for it to exit; later calls do
// nothing.
func (d *AutoRecovery) Kill() {
	d.once.Do(func() {
		_ = d.cmd.Process.Kill()
		select {
		case err := <-d.wait:
			d.wait <- err
		case <-time.After(10 * time.Second):
			d.t.Errorf("testcluster: autorecovery process did not exit after SIGKILL")
		}
	})
}

// Pause stops the process (SIGSTOP), as a hung machine or a long GC pause
// would: its metadata sessions expire if it stays paused past their TTL.
// Resume continues it.
func (d *AutoRecovery) Pause()  { _ = d.cmd.Process.Signal(syscall.SIGSTOP) }
func (d *AutoRecovery) Resume() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }
