package blob

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// processNamespace identifies this process's PID namespace on this boot: the kernel's boot id and
// the PID namespace's inode. Two processes with the same value see the same PIDs, so one can ask
// whether the other is alive. It returns "" when either is unavailable.
func processNamespace() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}

// processAlive reports whether process pid exists (a zombie counts as alive). It errs towards
// alive: a wrong "alive" costs a wait of one lease, a wrong "dead" two writers.
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
