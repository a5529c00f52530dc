package workflow

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ResolveWorkdirs makes every relative workdir of s absolute, taken from base: the folder of
// the file s was read from, as `zksched submit` and `zksched define` give it, so that a file
// beside its scripts names them as `workdir: .` and `command: ./extract.sh`. The workers must
// see that folder at the same path (one machine, or a shared file system).
func (s *Spec) ResolveWorkdirs(base string) {
	for i := range s.Tasks {
		if w := s.Tasks[i].Workdir; w != "" && !filepath.IsAbs(w) {
			s.Tasks[i].Workdir = filepath.Join(base, w)
		}
	}
}

// CheckWorkdirs reports the tasks whose workdir is relative: with no file's folder to read it
// from (a file sent through the API), it would mean whatever directory a worker happens to
// run in.
func (s *Spec) CheckWorkdirs() error {
	var errs []error
	for i, t := range s.Tasks {
		if t.Workdir != "" && !filepath.IsAbs(t.Workdir) {
			errs = append(errs, &Error{Msg: fmt.Sprintf("%s: workdir %s is relative; zksched submit and define "+
				"take it from the file's folder, anything else needs an absolute path", taskLabel(i, t.Name), quote(t.Workdir))})
		}
	}
	return errors.Join(errs...)
}
