package workflow

import (
	"strings"
	"testing"
)

// TestWorkdirsResolveAgainstTheFilesFolder: a relative workdir is read from the file's folder
// where there is one, and refused where there is none; an absolute one is kept as it is.
func TestWorkdirsResolveAgainstTheFilesFolder(t *testing.T) {
	s, err := Parse([]byte(`
name: w
tasks:
  - {name: here, type: shell, command: ./a.sh, workdir: .}
  - {name: below, type: shell, command: ./b.sh, workdir: scripts/../bin}
  - {name: fixed, type: shell, command: ./c.sh, workdir: /srv/report}
  - {name: scratch, type: shell, command: pwd}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckWorkdirs()
	for _, want := range []string{`task "here": workdir "." is relative`, `task "below": workdir "scripts/../bin" is relative`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckWorkdirs = %v, want it to say %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "fixed") {
		t.Errorf("CheckWorkdirs refuses the absolute workdir: %v", err)
	}
	s.ResolveWorkdirs("/home/ana/flows")
	got := []string{s.Tasks[0].Workdir, s.Tasks[1].Workdir, s.Tasks[2].Workdir, s.Tasks[3].Workdir}
	want := []string{"/home/ana/flows", "/home/ana/flows/bin", "/srv/report", ""}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("resolved workdirs = %q, want %q", got, want)
	}
	if err := s.CheckWorkdirs(); err != nil {
		t.Errorf("CheckWorkdirs after ResolveWorkdirs = %v", err)
	}
}
