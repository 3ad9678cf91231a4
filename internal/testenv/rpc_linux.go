package testenv

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// workerAttr ends a worker with the test binary, even when a timeout's
// panic skips the cleanups.
func workerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// listensOn reports whether process pid holds the socket listening on
// TCP port of 127.0.0.1. A connection that succeeds says only that some
// process listens there: test packages run at once, each picking free
// ports, and another package's worker can hold the port this one was
// given. known is false when /proc cannot say.
func listensOn(pid, port int) (ok, known bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port)
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st ... uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == local && fs[3] == "0A" { // 0A: LISTEN
			inode = fs[9]
			break
		}
	}
	if inode == "" {
		return false, true
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return false, false
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && l == want {
			return true, true
		}
	}
	return false, true
}
