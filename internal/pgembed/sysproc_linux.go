package pgembed

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// pdeathsig is sent to initdb and postgres when the OS thread that started
// them exits, i.e. when this program dies. Tests turn it off to simulate
// systems without it.
var pdeathsig = syscall.SIGQUIT

func sysProcAttr(ra *runAs) *syscall.SysProcAttr {
	// Go sets the parent-death signal after switching credentials (a
	// credential change would clear it).
	return &syscall.SysProcAttr{Setpgid: true, Credential: ra.cred, Pdeathsig: pdeathsig}
}

// processAlive reports whether pid is a running (not zombie) process.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Format: "pid (comm) state ...", comm may contain spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// isPostmasterOf reports whether pid is a postgres server for pgdata:
// postgres makes its data folder its working folder.
func isPostmasterOf(pid int, pgdata string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(proc + "/comm")
	if name := string(bytes.TrimSpace(comm)); err != nil || (name != "postgres" && name != "postmaster") {
		return false
	}
	if cwd, err := os.Readlink(proc + "/cwd"); err == nil {
		return sameDir(cwd, pgdata)
	}
	cmdline, err := os.ReadFile(proc + "/cmdline") // -D pgdata
	return err == nil && bytes.Contains(cmdline, []byte(pgdata))
}
