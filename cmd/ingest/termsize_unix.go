//go:build linux || darwin || freebsd || netbsd || openbsd

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// terminalWidth returns the width in columns of the terminal f is, 0 when
// it cannot tell.
func terminalWidth(f *os.File) int {
	var ws struct{ rows, cols, x, y uint16 } // struct winsize
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0
	}
	return int(ws.cols)
}
