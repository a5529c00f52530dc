// Package release tests bin/release.sh, which builds zksched's releases: that two builds of
// one commit are byte-identical, and (deb_test.go) that the Debian package installs, runs a
// master and a worker as its systemd units would, and purges without a trace.
package release
