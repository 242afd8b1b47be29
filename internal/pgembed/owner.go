package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// runAs is the OS user initdb and postgres run as.
type runAs struct {
	cred *syscall.Credential // nil: the current user
	uid  int
	gids []int // primary group first; only set with cred
}

func currentRunAs() (*runAs, error) {
	if os.Geteuid() != 0 {
		return &runAs{uid: os.Geteuid()}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgembed: running as root, PostgreSQL must run as the OS user \"postgres\" (initdb refuses root): %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgembed: user postgres: %w", err)
	}
	ra := &runAs{uid: uid, gids: []int{gid}}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != gid {
				ra.gids = append(ra.gids, g)
				cred.Groups = append(cred.Groups, uint32(g))
			}
		}
	}
	ra.cred = cred
	return ra, nil
}

// chown gives path to the user postgres runs as, when that is another user.
func (ra *runAs) chown(path string) error {
	if ra.cred == nil {
		return nil
	}
	if err := os.Lchown(path, ra.uid, ra.gids[0]); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	return nil
}

// prepareDirs creates dir and pgdata, hands what it creates (and dir itself)
// to the postgres user, and checks that the existing parents of dir let that
// user through.
func prepareDirs(dir, pgdata string, ra *runAs) error {
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pgembed: %w", err)
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	if ra.cred != nil {
		if !slices.Contains(created, dir) {
			created = append(created, dir)
		}
		for _, d := range created {
			if err := ra.chown(d); err != nil {
				return err
			}
		}
		for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
			if slices.Contains(created, d) {
				continue
			}
			if err := ra.canEnter(d); err != nil {
				return err
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	switch err := os.Mkdir(pgdata, 0o700); {
	case err == nil:
		return ra.chown(pgdata)
	case errors.Is(err, os.ErrExist):
		return nil
	default:
		return fmt.Errorf("pgembed: %w", err)
	}
}

// canEnter reports an error unless the postgres user may traverse folder d.
func (ra *runAs) canEnter(d string) error {
	fi, err := os.Stat(d)
	if err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	perm := fi.Mode().Perm()
	var enter bool
	switch {
	case int(st.Uid) == ra.uid:
		enter = perm&0o100 != 0
	case slices.Contains(ra.gids, int(st.Gid)):
		enter = perm&0o010 != 0
	default:
		enter = perm&0o001 != 0
	}
	if !enter {
		return fmt.Errorf("pgembed: PostgreSQL runs as the OS user \"postgres\", which cannot enter %s (mode %v): choose a folder it can reach, e.g. under %s", d, fi.Mode(), os.TempDir())
	}
	return nil
}
