package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment ago, for servers
// a test starts later (a ZooKeeper, a PostgreSQL, a node's HTTP port). They are picked at
// random below the kernel's ephemeral ports (net.ipv4.ip_local_port_range), which outgoing
// connections take their local ports from: a port picked among those (as 127.0.0.1:0 gives)
// can be taken by any connection of the suite before the server binds it, as a ZooKeeper's
// client port once was in the seconds its JVM took to start.
func FreePorts(n int) ([]int, error) {
	lo, hi := pickRange()
	ports := make([]int, 0, n)
	seen := make(map[int]bool, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("pick %d free ports in [%d, %d): none free after %d tries", n, lo, hi, tries)
		}
		p := lo + rand.IntN(hi-lo)
		if seen[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // in use
		}
		defer ln.Close() // held until all are picked, so that no two are the same
		seen[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// pickRange is where FreePorts picks: from 15000 to the first ephemeral port.
func pickRange() (lo, hi int) {
	lo, hi = 15000, 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if first, err := strconv.Atoi(f[0]); err == nil && first > lo+1000 {
				hi = first
			}
		}
	}
	return lo, hi
}
