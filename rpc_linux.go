package llama

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// rpcDropConnections shuts down the sending side of this process's TCP
// connections to the workers at addrs. After a failure, the failed models
// keep their connections to the workers that still run (their memory
// cannot be freed); a worker serves one client at a time, so it would wait
// on that connection for good and refuse the reload. Half-closed, the
// connection ends on the worker's side once it reads the end, and the
// worker takes the next client. The receiving side stays open: a worker
// still answering the failed decode writes its answer into it, where a
// reset would kill it (rpc-server dies of the SIGPIPE).
func rpcDropConnections(addrs []string) {
	want := map[string]bool{} // remote addresses as /proc/net/tcp writes them
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		ips, _ := net.LookupIP(host)
		for _, ip := range ips {
			if v4 := ip.To4(); v4 != nil {
				want[fmt.Sprintf("%02X%02X%02X%02X:%04X", v4[3], v4[2], v4[1], v4[0], p)] = true
			}
		}
	}
	if len(want) == 0 {
		return
	}
	f, err := os.Open("/proc/self/net/tcp")
	if err != nil {
		return
	}
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) >= 10 && want[fs[2]] {
			inodes["socket:["+fs[9]+"]"] = true
		}
	}
	f.Close()
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, d := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", d.Name()))
		if err != nil || !inodes[link] {
			continue
		}
		if fd, err := strconv.Atoi(d.Name()); err == nil {
			_ = syscall.Shutdown(fd, syscall.SHUT_WR)
		}
	}
}
