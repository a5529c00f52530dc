package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	cmd  *exec.Cmd
}

// NewZKServer reserves a port and a directory for a server; Start runs it.
func NewZKServer(t testing.TB) *ZKServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	z := &ZKServer{t: t, Port: port, Dir: t.TempDir()}
	t.Cleanup(func() {
		z.Stop()
		if t.Failed() { // the server's own account helps more than anything else here
			outs, _ := filepath.Glob(filepath.Join(z.Dir, "*.out"))
			for _, o := range outs {
				data, _ := os.ReadFile(o)
				t.Logf("==== private zookeeper %s ====\n%s", filepath.Base(o), data)
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
	data := filepath.Join(z.Dir, dataDir)
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(z.Dir, dataDir+".cfg")
	cfg := fmt.Sprintf("tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=60000\ndataDir=%s\n"+
		"clientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n", data, z.Port)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(filepath.Join(z.Dir, dataDir+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// slf4j-simple first on the class path: of the several SLF4J bindings installed it is then
	// the one chosen, and the server logs to the .out file.
	cmd := exec.Command("java", "-Xmx128m",
		"-cp", "/usr/share/java/slf4j-simple.jar:/usr/share/java/zookeeper.jar:/usr/share/java/*",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgFile)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	z.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for !ZKReady(z.Addr()) {
		if time.Now().After(deadline) {
			t.Fatalf("private zookeeper %s did not answer ruok within 30s", z.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server, like a crash.
func (z *ZKServer) Stop() {
	if z.cmd == nil {
		return
	}
	_ = z.cmd.Process.Kill()
	_ = z.cmd.Wait()
	z.cmd = nil
}

// ZKReady reports whether a ZooKeeper server answers ruok at addr.
func ZKReady(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("ruok")); err != nil {
		return false
	}
	buf := make([]byte, 4)
	n, _ := conn.Read(buf)
	return string(buf[:n]) == "imok"
}
