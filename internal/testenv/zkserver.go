package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ZKServer is a ZooKeeper server of the test's own, for what cannot be done to the shared one:
// stopping it, restarting it, wiping its data. It is killed when the test ends, and its log is
// printed if the test failed.
type ZKServer struct {
	t    testing.TB
	Port int
	Dir  string
	proc *zkProcess
}

// NewZKServer reserves a port and a directory for a server; Start runs it.
func NewZKServer(t testing.TB) *ZKServer {
	t.Helper()
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	z := &ZKServer{t: t, Port: ports[0], Dir: t.TempDir()}
	t.Cleanup(func() {
		z.Stop()
		if t.Failed() { // the server's own account helps more than anything else here
			outs, _ := filepath.Glob(filepath.Join(z.Dir, "*.out"))
			for _, o := range outs {
				t.Logf("==== private zookeeper %s ====\n%s", filepath.Base(o), logTail(o))
			}
		}
	})
	return z
}

// Addr is the server's client address.
func (z *ZKServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.Port) }

// Start runs the server with its data in dataDir, a name under the server's directory: the
// same name keeps the data across a restart, a new one starts empty. It waits until the server
// answers ruok.
func (z *ZKServer) Start(dataDir string) {
	t := z.t
	t.Helper()
	cfg := zkSettings{ClientPort: z.Port, DataDir: filepath.Join(z.Dir, dataDir)}
	p, err := startZK(cfg, filepath.Join(z.Dir, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	z.proc = p
	if err := waitRuok(z.Addr(), p, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// StartTLS runs the server as Start does, with a TLS port beside its plain one (the Netty
// connection factory, secureClientPort on 127.0.0.1), and returns the TLS port's address.
// keyStore is a PEM file of the server's key and certificate, trustStore one of the CAs whose
// client certificates it accepts; the server requires a client certificate.
func (z *ZKServer) StartTLS(dataDir, keyStore, trustStore string) string {
	t := z.t
	t.Helper()
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	secure := "127.0.0.1:" + strconv.Itoa(ports[0])
	cfg := zkSettings{ClientPort: z.Port, DataDir: filepath.Join(z.Dir, dataDir), Extra: fmt.Sprintf(
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"+
			"secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
			"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
			"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\nssl.clientAuth=need\n",
		ports[0], keyStore, trustStore)}
	p, err := startZK(cfg, filepath.Join(z.Dir, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	z.proc = p
	if err := waitRuok(z.Addr(), p, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return secure
}

// Stop kills the server, like a crash.
func (z *ZKServer) Stop() {
	if z.proc == nil {
		return
	}
	z.proc.kill()
	z.proc = nil
}

// ZKReady reports whether a ZooKeeper server answers ruok at addr.
func ZKReady(addr string) bool {
	out, err := FourLetterWord(addr, "ruok", time.Second)
	return err == nil && out == "imok"
}

// FourLetterWord sends a ZooKeeper four-letter command (ruok, srvr, mntr, conf…) to addr and
// returns the answer. A command the server's 4lw.commands.whitelist leaves out is answered with
// a line saying so, not an error.
func FourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	var b strings.Builder
	_, err = bufio.NewReader(conn).WriteTo(&b)
	if err != nil {
		return b.String(), fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	return b.String(), nil
}

// zkSettings is one server's configuration file.
type zkSettings struct {
	ClientPort int
	DataDir    string
	// The zero values mean tickTime 500 ms, initLimit 10, syncLimit 5, sessions of 2 ticks (1 s
	// at least) to 60 s, every four-letter word allowed.
	TickTime                             time.Duration
	InitLimit, SyncLimit                 int
	MinSessionTimeout, MaxSessionTimeout time.Duration
	FourLetterWords                      string
	// Peers are the ensemble's server.N lines, host:quorumPort:electionPort by myid; empty for a
	// standalone server.
	Peers map[int]string
	MyID  int
	// Extra holds further lines of the file, each ending in a newline.
	Extra string
}

func (s zkSettings) file() string {
	tick := cmp(s.TickTime, 500*time.Millisecond)
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=%d\nsyncLimit=%d\n", tick.Milliseconds(), cmp(s.InitLimit, 10), cmp(s.SyncLimit, 5))
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n",
		cmp(s.MinSessionTimeout, max(2*tick, time.Second)).Milliseconds(), cmp(s.MaxSessionTimeout, 60*time.Second).Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n", s.DataDir, s.ClientPort)
	fmt.Fprintf(&b, "4lw.commands.whitelist=%s\nadmin.enableServer=false\n", cmp(s.FourLetterWords, "*"))
	for id := 1; id <= len(s.Peers); id++ {
		fmt.Fprintf(&b, "server.%d=%s\n", id, s.Peers[id])
	}
	b.WriteString(s.Extra)
	return b.String()
}

// cmp returns v, or def if v is the zero value.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// zkProcess is one running ZooKeeper JVM.
type zkProcess struct {
	pid  int
	done chan struct{} // closed once the process has exited and been reaped
}

// startZK writes base+".cfg" and runs a server on it, logging to base+".out". A server's data
// directory must exist (and hold myid, for an ensemble) before it starts.
func startZK(s zkSettings, base string) (*zkProcess, error) {
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return nil, err
	}
	if s.MyID != 0 {
		if err := os.WriteFile(filepath.Join(s.DataDir, "myid"), []byte(strconv.Itoa(s.MyID)+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	cfgFile := base + ".cfg"
	if err := os.WriteFile(cfgFile, []byte(s.file()), 0o644); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(base+".out", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	// slf4j-simple first on the class path: of the several SLF4J bindings installed it is then
	// the one chosen, and the server logs to the .out file, each line with its time (a fault
	// test's failure is read against the servers' elections). The rest of /usr/share/java
	// holds what a TLS server needs beyond the jars ZooKeeper's manifest names. C1 only and
	// the serial collector: a test server needs a quick start and little CPU, not peak speed.
	cmd := exec.Command("java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", "/usr/share/java/slf4j-simple.jar:/usr/share/java/zookeeper.jar:/usr/share/java/*",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgFile)
	cmd.Stdout, cmd.Stderr = out, out
	// The server dies with the process that started it, even one killed by a test timeout or
	// kill -9: a leaked JVM would hold its ports and a share of the CPU for everyone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &zkProcess{done: make(chan struct{})}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that started the child ends, not the process: start it
	// from a thread locked for the child's life, so that the Go runtime never retires it.
	go func() {
		runtime.LockOSThread()
		defer out.Close()
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("start zookeeper: %w", err)
			runtime.UnlockOSThread()
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		close(p.done)
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill kills the server with SIGKILL, frozen or not, and waits until it is gone.
func (p *zkProcess) kill() {
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	<-p.done
}

// signal sends sig unless the process has ended.
func (p *zkProcess) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("zookeeper pid %d has exited", p.pid)
	default:
	}
	if err := syscall.Kill(p.pid, sig); err != nil {
		return fmt.Errorf("signal zookeeper pid %d: %w", p.pid, err)
	}
	return nil
}

func (p *zkProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitRuok waits until the server at addr answers ruok, failing early if it exits. Any answer
// will do: a server whose whitelist leaves ruok out says so, and that is an answer too.
func waitRuok(addr string, p *zkProcess, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if out, _ := FourLetterWord(addr, "ruok", time.Second); out != "" {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("private zookeeper %s exited while starting", addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("private zookeeper %s did not answer ruok within %v", addr, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail returns the last 64 KiB of a server's log file: enough for the last few minutes, and
// a failed test's output stays readable.
func logTail(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	const keep = 64 << 10
	if len(data) > keep {
		data = append([]byte("…\n"), data[len(data)-keep:]...)
	}
	return string(data)
}
