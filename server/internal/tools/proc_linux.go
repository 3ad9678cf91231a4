//go:build linux

package tools

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// killStragglers kills, by scanning /proc, what is left of a command
// whose process group was just killed: the processes of its session or
// group (pid), those whose environment holds tag (they called setsid or
// setpgid to leave), and the descendants of either. A few rounds catch
// what forked meanwhile.
func killStragglers(pid int, tag string) {
	for range 5 {
		victims := findStragglers(pid, tag)
		if len(victims) == 0 {
			return
		}
		for _, v := range victims {
			_ = syscall.Kill(v, syscall.SIGKILL)
		}
	}
}

type procInfo struct{ ppid, pgrp, sid int }

func findStragglers(leader int, tag string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	procs := map[int]procInfo{}
	marked := map[int]bool{}
	needle := []byte(tag)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		info, alive := readProcStat(pid)
		if !alive {
			continue
		}
		procs[pid] = info
		switch {
		case info.pgrp == leader || info.sid == leader || pid == leader:
			marked[pid] = true
		case tag != "":
			if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil {
				for _, kv := range bytes.Split(env, []byte{0}) {
					if bytes.Equal(kv, needle) {
						marked[pid] = true
						break
					}
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for pid, p := range procs {
			if !marked[pid] && marked[p.ppid] {
				marked[pid] = true
				changed = true
			}
		}
	}
	out := make([]int, 0, len(marked))
	for pid := range marked {
		out = append(out, pid)
	}
	return out
}

// readProcStat reads a process's parent, group and session; a zombie or
// a process gone meanwhile is not alive.
func readProcStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	pgrp, _ := strconv.Atoi(string(f[2]))
	sid, _ := strconv.Atoi(string(f[3]))
	return procInfo{ppid, pgrp, sid}, true
}

// hideProcess makes the server's process undumpable (prctl
// PR_SET_DUMPABLE 0), so that the commands the tools run, under the same
// user, cannot read its environment (API keys, tokens) from
// /proc/PPID/environ, nor its memory, maps or descriptors: the kernel
// then gives those files to root and checks ptrace access, which a
// same-user process without CAP_SYS_PTRACE does not have. A command's own
// processes are dumpable again once they exec. It costs core dumps and
// attaching a debugger as the same user; ToolsOptions.KeepDumpable keeps
// them.
//
// /proc/PID/cmdline stays readable to every process on the machine
// (unless /proc is mounted with hidepid): keep API keys off the command
// line (LLAMA_API_KEY, --api-key-file).
func hideProcess() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}
