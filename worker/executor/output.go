package executor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/zksched/zksched/workflow"
)

// maxEnvString is the kernel's limit on one "NAME=value" string of a process's environment,
// its terminating NUL included (MAX_ARG_STRLEN, 32 pages): execve fails with E2BIG past it.
const maxEnvString = 128 << 10

// LimitOutput applies t's output limit (Task.OutputLimit) to res, the result of a run of t
// that succeeded: an output over it fails the attempt with a *workflow.OutputTooLarge error,
// naming the limit and the size, unless the task's output-overflow is truncate, when the
// output keeps what fits and is marked truncated. Any other result is returned as it is.
func LimitOutput(t Task, res Result) Result {
	if res.Err != nil || res.Stopped || res.Paused != nil || t.OutputLimit <= 0 {
		return res
	}
	size := max(res.OutputSize, len(res.Output))
	if size <= t.OutputLimit {
		return res
	}
	if t.Spec.OutputOverflow == workflow.OverflowTruncate {
		res.Output, res.OutputSize, res.OutputTruncated = workflow.Truncate(res.Output, t.OutputLimit), 0, true
		return res
	}
	res.Err = &workflow.OutputTooLarge{What: "output", Size: size, Limit: t.OutputLimit}
	res.Output, res.OutputSize = "", 0
	return res
}

// upstreamFiles writes the output of each of t's dependencies to a file of its own, named
// after the dependency, in a new directory of the system's temporary one named after the
// attempt: mode 0700 and 0600, owned by user when it is not nil (the task's user). It returns
// the directory, which the caller removes once the attempt has ended, and the files by
// dependency; none for a task without dependencies.
func upstreamFiles(t Task, user *TaskUser) (dir string, files map[string]string, err error) {
	if len(t.Upstream) == 0 {
		return "", nil, nil
	}
	dir, err = os.MkdirTemp("", fmt.Sprintf("zksched-upstream-%d-%d-", t.ID, t.Attempt))
	if err != nil {
		return "", nil, fmt.Errorf("make the directory of the upstream outputs: %w", err)
	}
	files = make(map[string]string, len(t.Upstream))
	chown := func(path string) error {
		if user == nil {
			return nil
		}
		return os.Chown(path, int(user.UID), int(user.GID))
	}
	err = chown(dir)
	for name, u := range t.Upstream {
		if err != nil {
			break
		}
		// Task names are letters, digits, '_', '.' and '-', starting with a letter or digit:
		// a file name of their own, never "." or "..".
		path := filepath.Join(dir, name)
		if err = os.WriteFile(path, []byte(u.Output), 0o600); err == nil {
			err = chown(path)
		}
		files[name] = path
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("write the upstream outputs: %w", err)
	}
	return dir, files, nil
}

// upstreamEnv returns the variables that give a shell task the outputs of its
// dependencies: ZKSCHED_UPSTREAM_<name>_OUTPUT_FILE, the file that holds it (files, see
// upstreamFiles), always, and ZKSCHED_UPSTREAM_<name>_OUTPUT, the output itself, when it
// fits in one environment string.
func (t Task) upstreamEnv(files map[string]string) []string {
	var env []string
	for name, u := range t.Upstream {
		key := workflow.UpstreamEnv(name)
		if path, ok := files[name]; ok {
			env = append(env, key+"_FILE="+path)
		}
		if len(key)+1+len(u.Output)+1 <= maxEnvString {
			env = append(env, key+"="+u.Output)
		}
	}
	return env
}
