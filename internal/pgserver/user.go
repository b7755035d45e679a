package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// unprivileged returns the credential of user name when this process is
// root (PostgreSQL refuses to run as root), nil otherwise.
func unprivileged(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgserver: running as root needs a %q user to run PostgreSQL", name), err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
