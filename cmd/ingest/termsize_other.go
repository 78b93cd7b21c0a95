//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

import "os"

// terminalWidth returns 0 (unknown) where the terminal's size is not read:
// the status line then assumes $COLUMNS, or 80 columns.
func terminalWidth(*os.File) int { return 0 }
