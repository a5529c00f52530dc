package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FreezeTree stops pid and all its descendants, each process group whole, as a frozen machine
// would be, and returns the process groups it stopped.
func FreezeTree(pid int) []int {
	var groups []int
	seen := map[int]bool{}
	// New children may appear while freezing (a task's beat loop forks); stopping a group
	// stops its future children too, so repeat until a pass finds no new group.
	for {
		found := false
		for _, p := range append([]int{pid}, Descendants(pid)...) {
			pgid, err := syscall.Getpgid(p)
			if err != nil || seen[pgid] {
				continue
			}
			seen[pgid], found = true, true
			_ = syscall.Kill(-pgid, syscall.SIGSTOP)
			groups = append(groups, pgid)
		}
		if !found {
			return groups
		}
	}
}

// ThawTree continues the process groups FreezeTree stopped, the worker's first.
func ThawTree(groups []int) {
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGCONT)
	}
}

// Descendants lists the processes below pid, from /proc.
func Descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name (in parentheses, possibly with spaces): state ppid …
		i := strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
