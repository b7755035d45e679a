package proc

import "syscall"

// dieWithParent has the kernel kill the process when its parent dies.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
