//go:build unix && !linux

package pgembed

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// pdeathsig is unused: only Linux has parent-death signals; the orphan
// guard at Start is the only protection elsewhere.
var pdeathsig syscall.Signal

func sysProcAttr(ra *runAs) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: ra.cred}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

func isPostmasterOf(pid int, pgdata string) bool {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.Contains(string(out), "postgres") && strings.Contains(string(out), pgdata)
}
