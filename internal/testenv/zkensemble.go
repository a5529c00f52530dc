package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ZKEnsembleOptions are the settings of a private ensemble. The zero value suits tests: short
// ticks, so that a lost leader is replaced within seconds.
type ZKEnsembleOptions struct {
	// TickTime is ZooKeeper's unit of time. Defaults to 500 ms; ZooKeeper's sample uses 2 s.
	TickTime time.Duration
	// InitLimit is how many ticks a follower has to connect and sync to a leader. Defaults to 10.
	InitLimit int
	// SyncLimit is how many ticks a follower may go without hearing from its leader (and the
	// leader from it) before it gives up on it. Defaults to 5, as in ZooKeeper's sample.
	SyncLimit int
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts clients may ask for.
	// Default to 1 s (or 2 ticks, if more) and 60 s.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// FourLetterWords is the servers' 4lw.commands.whitelist. Defaults to "*"; Leader needs
	// srvr.
	FourLetterWords string
	// Logf receives the ensemble's own notes (servers started, killed, frozen). Nil logs nothing.
	Logf func(format string, args ...any)
}

// ZKEnsemble is a ZooKeeper ensemble of the caller's own: real server processes on 127.0.0.1,
// each of which can be killed, restarted with its data, frozen and thawed. Servers are
// numbered from 0, in the order of Servers. It is safe for concurrent use.
//
// In a test, NewZKEnsemble starts one and removes it when the test ends. StartZKEnsemble is the
// same without a test, for a soak run by an operator: the caller closes it.
type ZKEnsemble struct {
	opts    ZKEnsembleOptions
	dir     string
	members []*zkMember

	mu     sync.Mutex
	closed bool
}

// zkMember is one server of an ensemble.
type zkMember struct {
	settings zkSettings
	base     string // path of the .cfg and .out files, without the extension

	mu     sync.Mutex
	proc   *zkProcess // nil while stopped
	frozen bool
}

// NewZKEnsemble starts an ensemble of n servers in a directory of the test's own and waits
// until it has a leader and every server serves. The servers are killed when the test ends,
// and their logs printed if it failed.
func NewZKEnsemble(t testing.TB, n int, opts ZKEnsembleOptions) *ZKEnsemble {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	dir := t.TempDir()
	e, err := StartZKEnsemble(dir, n, opts)
	if e != nil {
		t.Cleanup(func() {
			_ = e.Close()
			if t.Failed() {
				t.Log(e.Logs())
			}
		})
	}
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return e
}

// StartZKEnsemble starts an ensemble of n servers with their files in dir and waits until it
// has a leader and every server serves (at most a minute). It picks free ports for the client,
// quorum and election ports. On an error it returns the ensemble too, if there is one, so the
// caller can read its logs; Close it either way.
func StartZKEnsemble(dir string, n int, opts ZKEnsembleOptions) (*ZKEnsemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("an ensemble of %d servers", n)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	ports, err := FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	peers := make(map[int]string, n)
	if n > 1 {
		for i := range n {
			peers[i+1] = fmt.Sprintf("127.0.0.1:%d:%d", ports[3*i+1], ports[3*i+2])
		}
	}
	e := &ZKEnsemble{opts: opts, dir: dir}
	for i := range n {
		name := "zk" + strconv.Itoa(i)
		e.members = append(e.members, &zkMember{
			base: filepath.Join(dir, name),
			settings: zkSettings{
				ClientPort: ports[3*i], DataDir: filepath.Join(dir, name+"-data"),
				TickTime: opts.TickTime, InitLimit: opts.InitLimit, SyncLimit: opts.SyncLimit,
				MinSessionTimeout: opts.MinSessionTimeout, MaxSessionTimeout: opts.MaxSessionTimeout,
				FourLetterWords: opts.FourLetterWords, Peers: peers, MyID: i + 1,
			},
		})
	}
	// All at once: a server waits for a quorum, and JVMs start faster side by side.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Start(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return e, err
	}
	if err := e.WaitServing(time.Minute); err != nil {
		return e, err
	}
	return e, nil
}

// Servers returns the client addresses, host:port, of all servers, running or not.
func (e *ZKEnsemble) Servers() []string {
	s := make([]string, len(e.members))
	for i := range e.members {
		s[i] = e.Addr(i)
	}
	return s
}

// Addr returns server i's client address.
func (e *ZKEnsemble) Addr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(e.members[i].settings.ClientPort)
}

// Dir returns the directory holding the servers' configuration files, data and logs
// (zk<i>.cfg, zk<i>-data, zk<i>.out).
func (e *ZKEnsemble) Dir() string { return e.dir }

// Start runs server i, with the data it had if it ran before, and waits until it answers ruok.
// It does not wait for the server to join a quorum (there may be none): see WaitServing. A
// running server is left as it is.
func (e *ZKEnsemble) Start(i int) error {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.isClosed() {
		return errors.New("zookeeper ensemble closed")
	}
	if m.proc != nil && !m.proc.exited() {
		return nil
	}
	p, err := startZK(m.settings, m.base)
	if err != nil {
		return fmt.Errorf("zookeeper server %d: %w", i, err)
	}
	m.proc, m.frozen = p, false
	if err := waitRuok(e.Addr(i), p, 30*time.Second); err != nil {
		return fmt.Errorf("zookeeper server %d: %w", i, err)
	}
	e.opts.Logf("testenv: zookeeper server %d (%s) started, pid %d", i, e.Addr(i), p.pid)
	return nil
}

// Stop kills server i with SIGKILL, like a crash (a frozen server too), and waits until it is
// gone. Its data stays for the next Start. A stopped server is left as it is.
func (e *ZKEnsemble) Stop(i int) {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return
	}
	m.proc.kill()
	m.proc, m.frozen = nil, false
	e.opts.Logf("testenv: zookeeper server %d (%s) killed", i, e.Addr(i))
}

// Freeze stops server i with SIGSTOP: it keeps its connections and answers nothing, as in a long
// garbage-collection pause or a hung host. It returns once every thread of the server has
// stopped: kill returns as soon as the signal is sent, and on a busy machine a thread woken
// meanwhile may answer a request before the stop reaches it.
func (e *ZKEnsemble) Freeze(i int) error {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return fmt.Errorf("zookeeper server %d is not running", i)
	}
	if err := m.proc.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if err := waitStopped(m.proc.pid, 10*time.Second); err != nil {
		return fmt.Errorf("zookeeper server %d: %w", i, err)
	}
	m.frozen = true
	e.opts.Logf("testenv: zookeeper server %d (%s) frozen", i, e.Addr(i))
	return nil
}

// Thaw resumes server i after Freeze with SIGCONT.
func (e *ZKEnsemble) Thaw(i int) error {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return fmt.Errorf("zookeeper server %d is not running", i)
	}
	if err := m.proc.signal(syscall.SIGCONT); err != nil {
		return err
	}
	m.frozen = false
	e.opts.Logf("testenv: zookeeper server %d (%s) thawed", i, e.Addr(i))
	return nil
}

// Running reports whether server i's process runs (frozen or not).
func (e *ZKEnsemble) Running(i int) bool {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited()
}

// Mode returns what server i says it is: "leader", "follower", "observer" or "standalone"; ""
// when it is down, frozen, not serving (no quorum) or does not answer srvr within a second.
func (e *ZKEnsemble) Mode(i int) string {
	m := e.members[i]
	m.mu.Lock()
	frozen := m.frozen
	m.mu.Unlock()
	if frozen {
		return ""
	}
	out, err := FourLetterWord(e.Addr(i), "srvr", time.Second)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(out) {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// Leader returns the index of the server that says it leads (or runs standalone), or -1 if none
// does at the moment.
func (e *ZKEnsemble) Leader() int {
	for i := range e.members {
		if mode := e.Mode(i); mode == "leader" || mode == "standalone" {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a server leads and returns its index.
func (e *ZKEnsemble) WaitLeader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if l := e.Leader(); l >= 0 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no zookeeper server leads after %v", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitServing waits until every running server that is not frozen serves clients (is leader,
// follower or standalone), with one leader among them.
func (e *ZKEnsemble) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leaders, waiting := 0, -1
		for i, m := range e.members {
			m.mu.Lock()
			live := m.proc != nil && !m.proc.exited() && !m.frozen
			m.mu.Unlock()
			if !live {
				continue
			}
			switch e.Mode(i) {
			case "leader", "standalone":
				leaders++
			case "follower", "observer":
			default:
				waiting = i
			}
		}
		if waiting < 0 && leaders == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			if waiting >= 0 {
				return fmt.Errorf("zookeeper server %d (%s) does not serve after %v", waiting, e.Addr(waiting), timeout)
			}
			return fmt.Errorf("zookeeper ensemble has %d leaders after %v", leaders, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs returns the tail of every server's log, one after the other.
func (e *ZKEnsemble) Logs() string {
	var b strings.Builder
	for i, m := range e.members {
		fmt.Fprintf(&b, "==== private zookeeper ensemble, server %d (%s) ====\n%s\n", i, e.Addr(i), logTail(m.base+".out"))
	}
	return b.String()
}

// Elections returns each server's log lines that say how long an election took it, with
// their times ("LEADER ELECTION TOOK - N MS"): a fault test reports them as a figure, and
// reads a node's lost session against them.
func (e *ZKEnsemble) Elections() []string {
	var out []string
	for i, m := range e.members {
		data, err := os.ReadFile(m.base + ".out")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, "LEADER ELECTION TOOK") {
				out = append(out, fmt.Sprintf("server %d: %s", i, strings.TrimSpace(line)))
			}
		}
	}
	return out
}

// Close kills every server. The files stay in Dir.
func (e *ZKEnsemble) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	for i := range e.members {
		e.Stop(i)
	}
	return nil
}

func (e *ZKEnsemble) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// waitStopped waits until every thread of process pid is stopped (state T or t in
// /proc/<pid>/task/<tid>/stat), or timeout passes.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d not stopped %s after SIGSTOP", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func allThreadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, tid := range tids {
		stat, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			return false, err
		}
		// The state follows the command name, which is in parentheses and may hold any byte.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) {
			return false, fmt.Errorf("%s/%s/stat: unexpected %q", dir, tid.Name(), stat)
		}
		if s := stat[i+2]; s != 'T' && s != 't' {
			return false, nil
		}
	}
	return true, nil
}
