package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Limits of the built-in tools' I/O, as llama-server's.
const (
	toolsListMaxOutput    = 8 << 20          // git ls-files output
	toolsListTimeout      = 15 * time.Second // one listing
	toolsIsolateTimeout   = 15 * time.Second // auxiliary commands in an isolate
	toolsIsolateReadLimit = 64 << 20         // read_file through an isolate
)

// junkDirs are listed but never walked: they can be enormous.
var junkDirs = map[string]bool{
	".git": true, ".svn": true, ".hg": true, "node_modules": true, "__pycache__": true,
	".venv": true, "venv": true, "dist": true, "build": true, "target": true, ".cache": true,
	".idea": true, ".vscode": true,
}

// listKind selects what a listing returns.
type listKind int

const (
	listFiles listKind = iota
	listDirs
	listAll
)

type listEntry struct {
	rel   string // '/'-separated, relative to the listed folder
	isDir bool
}

type listResult struct {
	entries   []listEntry
	err       string // set when the base is not a folder
	truncated bool   // the walk could not see everything
}

type execResult struct {
	output   string
	exitCode int
	timedOut bool
}

// toolsIO is where the built-in tools act: the host, or an isolate (a
// container, a host over ssh) driven through commands.
type toolsIO interface {
	// resolve makes path absolute against the working directory.
	resolve(path string) string
	isDir(path string) bool
	isFile(path string) bool
	fileSize(path string) (int64, bool)
	readFile(path string) ([]byte, bool)
	writeFile(path string, content []byte) bool
	// list returns the entries under base (already resolved); maxDepth 0
	// is unlimited, 1 the direct children.
	list(ctx context.Context, base string, maxDepth int, kind listKind) listResult
	// run runs a command; onChunk, when set, gets the output as it comes
	// and stops the command by returning false.
	run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult
}

// newToolsIO returns the I/O of a tool call: its "cwd" and "runtime"
// parameters (set from the x-tool-cwd and x-tool-runtime headers). An
// unknown or malformed runtime is an error, never a fallback to the host.
func newToolsIO(p toolParams) (toolsIO, error) {
	cwd := p.optStr("cwd", "")
	runtime := p.optStr("runtime", "")
	if runtime == "" {
		return &hostIO{cwd: cwd}, nil
	}
	if c, ok := parseContainerSpec(runtime); ok {
		if !c.attach {
			return nil, errToolRuntime("tool runtime must name a running container: %s", runtime)
		}
		if !validContainerID(c.arg) {
			return nil, errToolRuntime("invalid container id: %s", c.arg)
		}
		return &isolateIO{cwd: cwd, argv: containerArgv(c.bin, c.arg)}, nil
	}
	if target, ok := strings.CutPrefix(runtime, "ssh:"); ok {
		if !validSSHTarget(target) {
			return nil, errToolRuntime("invalid ssh target: %s", target)
		}
		return &isolateIO{cwd: cwd, argv: sshArgv(target)}, nil
	}
	return nil, errToolRuntime("unknown tool runtime: %s", runtime)
}

// containerSpec is "ENGINE:IMAGE" (start a container) or
// "ENGINE-container:ID" (use a running one).
type containerSpec struct {
	bin    string
	arg    string
	attach bool
}

func parseContainerSpec(spec string) (containerSpec, bool) {
	for _, bin := range []string{"docker", "podman"} {
		if id, ok := strings.CutPrefix(spec, bin+"-container:"); ok {
			return containerSpec{bin, id, true}, true
		}
		if image, ok := strings.CutPrefix(spec, bin+":"); ok {
			return containerSpec{bin, image, false}, true
		}
	}
	return containerSpec{}, false
}

// validContainerID refuses ids that the engine would read as options
// (--privileged) or that hold anything but [A-Za-z0-9._-].
func validContainerID(id string) bool {
	if id == "" || !isASCIIAlnum(rune(id[0])) {
		return false
	}
	for _, c := range id {
		if !isASCIIAlnum(c) && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// validSSHTarget refuses targets that ssh would read as options
// (-oProxyCommand=...) or that hold anything but [A-Za-z0-9._@-].
func validSSHTarget(t string) bool {
	if t == "" || t[0] == '-' {
		return false
	}
	for _, c := range t {
		if !isASCIIAlnum(c) && c != '.' && c != '-' && c != '_' && c != '@' {
			return false
		}
	}
	return true
}

func isASCIIAlnum(c rune) bool {
	return c < unicode.MaxASCII && (c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
}

// runCommand runs args and collects its output (stdout, and stderr when
// combine is set) up to maxOutput bytes, killing it (and its process
// group) after timeout, when ctx is done, or when onChunk returns false.
func runCommand(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool, combine bool, cwd string, stdin []byte) execResult {
	res := execResult{exitCode: -1}
	if len(args) == 0 {
		res.output = "failed to spawn process"
		return res
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = cwd
	setProcessGroup(cmd)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out := &cappedOutput{max: maxOutput, onChunk: onChunk, stop: cancel}
	cmd.Stdout = out
	if combine {
		cmd.Stderr = out
	}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		res.output = "failed to spawn process"
		return res
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-tctx.Done():
			killProcessGroup(cmd)
		case <-done:
		}
	}()
	_ = cmd.Wait()
	close(done)
	res.exitCode = cmd.ProcessState.ExitCode()
	res.timedOut = errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	res.output = out.buf.String()
	if out.truncated {
		res.output += "\n[output truncated]"
	}
	return res
}

// cappedOutput keeps the first max bytes written and passes them to
// onChunk as they come.
type cappedOutput struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
	onChunk   func(string) bool
	stop      func()
}

func (c *cappedOutput) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.truncated {
		return len(p), nil
	}
	keep := p
	if room := c.max - c.buf.Len(); len(keep) > room {
		keep = keep[:max(room, 0)]
		c.truncated = true
	}
	c.buf.Write(keep)
	if c.onChunk != nil && len(keep) > 0 {
		if !c.onChunk(string(keep)) {
			c.stop()
		}
	}
	return len(p), nil
}

// hostIO runs the tools on the server's host.
type hostIO struct {
	cwd string // resolves relative paths and is the commands' folder ("": the server's)
}

func (h *hostIO) resolve(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			p = home + p[1:]
		}
	}
	if !filepath.IsAbs(p) {
		base := h.cwd
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return p
			}
			base = wd
		}
		p = filepath.Join(base, p)
	}
	return filepath.ToSlash(filepath.Clean(p))
}

func (h *hostIO) isDir(p string) bool {
	st, err := os.Stat(h.resolve(p))
	return err == nil && st.IsDir()
}

func (h *hostIO) isFile(p string) bool {
	st, err := os.Stat(h.resolve(p))
	return err == nil && st.Mode().IsRegular()
}

func (h *hostIO) fileSize(p string) (int64, bool) {
	st, err := os.Stat(h.resolve(p))
	if err != nil || st.IsDir() {
		return 0, false
	}
	return st.Size(), true
}

func (h *hostIO) readFile(p string) ([]byte, bool) {
	b, err := os.ReadFile(h.resolve(p))
	return b, err == nil
}

func (h *hostIO) writeFile(p string, content []byte) bool {
	full := h.resolve(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return false
	}
	return os.WriteFile(full, content, 0o644) == nil
}

func (h *hostIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult {
	return runCommand(ctx, args, maxOutput, timeout, onChunk, true, h.cwd, nil)
}

func (h *hostIO) list(ctx context.Context, base string, maxDepth int, kind listKind) listResult {
	var out listResult
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		out.err = "path does not exist or is not a directory"
		return out
	}
	deadline := time.Now().Add(toolsListTimeout)
	// git knows what is ignored, but lists only files.
	if kind == listFiles {
		res := h.run(ctx, []string{"git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard"}, toolsListMaxOutput, toolsListTimeout, nil)
		if res.exitCode == 0 && !res.timedOut {
			for _, line := range splitOutputLines(res.output, false) {
				if maxDepth > 0 && entryDepth(line) > maxDepth {
					continue
				}
				if h.isFile(path.Join(base, line)) {
					out.entries = append(out.entries, listEntry{rel: line})
				}
			}
			return out
		}
	}
	type dir struct {
		abs, rel string
		depth    int
	}
	stack := []dir{{abs: base}}
	for len(stack) > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			out.truncated = true
			return out
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := os.ReadDir(d.abs)
		if err != nil {
			if !errors.Is(err, fs.ErrPermission) {
				out.truncated = true
			}
			continue
		}
		for _, e := range ents {
			rel := e.Name()
			if d.rel != "" {
				rel = d.rel + "/" + e.Name()
			}
			full := filepath.Join(d.abs, e.Name())
			mode := e.Type()
			isLink := mode&fs.ModeSymlink != 0
			if isLink {
				st, err := os.Stat(full)
				if err != nil {
					continue
				}
				mode = st.Mode().Type()
			}
			switch {
			case mode.IsDir():
				if kind != listFiles {
					out.entries = append(out.entries, listEntry{rel: rel, isDir: true})
				}
				// A link may point back to an ancestor: never walked.
				if junkDirs[e.Name()] || isLink {
					continue
				}
				if maxDepth == 0 || d.depth+1 < maxDepth {
					stack = append(stack, dir{abs: full, rel: rel, depth: d.depth + 1})
				}
			case mode.IsRegular():
				if kind != listDirs {
					out.entries = append(out.entries, listEntry{rel: rel})
				}
			}
		}
	}
	return out
}

// entryDepth is the depth of a '/'-separated relative path: "a/b/c" is 3.
func entryDepth(rel string) int { return 1 + strings.Count(rel, "/") }

// splitOutputLines splits command output into non-empty lines with '/'
// separators.
func splitOutputLines(text string, stripDotSlash bool) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		if stripDotSlash {
			line = strings.TrimPrefix(line, "./")
		}
		out = append(out, strings.ReplaceAll(line, "\\", "/"))
	}
	return out
}

// isolateIO runs every operation as a POSIX command (sh, cat, wc, mkdir,
// find, timeout) inside an isolate reached through argv: a container's
// "ENGINE exec" or ssh.
type isolateIO struct {
	cwd  string
	argv func(inner []string, stdin bool) []string
}

// containerArgv drives a running container through "ENGINE exec".
func containerArgv(bin, id string) func([]string, bool) []string {
	return func(inner []string, stdin bool) []string {
		argv := []string{bin, "exec"}
		if stdin {
			argv = append(argv, "-i")
		}
		argv = append(argv, id)
		return append(argv, inner...)
	}
}

// sshArgv drives a host over ssh, non-interactively (key-based
// authentication and a known host key only). The remote shell parses the
// command again, so it travels as one quoted word.
func sshArgv(target string) func([]string, bool) []string {
	return func(inner []string, stdin bool) []string {
		argv := []string{"ssh", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no",
			"-o", "KbdInteractiveAuthentication=no", "-o", "StrictHostKeyChecking=yes"}
		if !stdin {
			argv = append(argv, "-n")
		}
		return append(argv, target, shellQuoteJoin(inner))
	}
}

// shellQuoteJoin quotes argv into one string that a POSIX shell splits
// back into exactly argv.
func shellQuoteJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

func (i *isolateIO) resolve(p string) string {
	if i.cwd == "" || strings.HasPrefix(p, "/") {
		return p
	}
	return i.cwd + "/" + p
}

func (i *isolateIO) exec(inner []string, maxOutput int, combine bool) execResult {
	return runCommand(context.Background(), i.argv(inner, false), maxOutput, toolsIsolateTimeout, nil, combine, "", nil)
}

func (i *isolateIO) test(flag, p string) bool {
	res := i.exec([]string{"sh", "-c", "[ " + flag + ` "$1" ]`, "_", p}, 4096, true)
	return res.exitCode == 0 && !res.timedOut
}

func (i *isolateIO) isDir(p string) bool  { return i.test("-d", i.resolve(p)) }
func (i *isolateIO) isFile(p string) bool { return i.test("-f", i.resolve(p)) }

func (i *isolateIO) fileSize(p string) (int64, bool) {
	res := i.exec([]string{"sh", "-c", `wc -c < "$1"`, "_", i.resolve(p)}, 64, true)
	if res.exitCode != 0 || res.timedOut {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(res.output), 10, 64)
	return n, err == nil
}

func (i *isolateIO) readFile(p string) ([]byte, bool) {
	res := i.exec([]string{"cat", "--", i.resolve(p)}, toolsIsolateReadLimit, false)
	if res.exitCode != 0 || res.timedOut {
		return nil, false
	}
	return []byte(res.output), true
}

func (i *isolateIO) writeFile(p string, content []byte) bool {
	if content == nil {
		content = []byte{}
	}
	res := runCommand(context.Background(),
		i.argv([]string{"sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "_", i.resolve(p)}, true),
		4096, toolsIsolateTimeout, nil, true, "", content)
	return res.exitCode == 0 && !res.timedOut
}

// run bounds the command with the isolate's own timeout too: killing the
// local client does not kill what runs inside.
func (i *isolateIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult {
	secs := int(timeout / time.Second)
	inner := append([]string{"timeout", strconv.Itoa(secs) + "s"}, args...)
	if i.cwd != "" {
		inner = append([]string{"sh", "-c", `cd "$1" || exit 127; shift; exec "$@"`, "_", i.cwd}, inner...)
	}
	return runCommand(ctx, i.argv(inner, true), maxOutput, timeout+5*time.Second, onChunk, true, "", []byte{})
}

func (i *isolateIO) list(ctx context.Context, base string, maxDepth int, kind listKind) listResult {
	var out listResult
	abs := i.resolve(base)
	if !i.isDir(base) {
		out.err = "path does not exist or is not a directory"
		return out
	}
	if kind == listFiles {
		res := i.exec([]string{"sh", "-c", `cd "$1" && git ls-files --cached --others --exclude-standard`, "_", abs}, toolsListMaxOutput, true)
		if res.exitCode == 0 && !res.timedOut {
			for _, rel := range splitOutputLines(res.output, false) {
				if maxDepth > 0 && entryDepth(rel) > maxDepth {
					continue
				}
				out.entries = append(out.entries, listEntry{rel: rel})
			}
			return out
		}
	}
	find := func(dirs bool) []string {
		prune := make([]string, 0, len(junkDirs))
		for _, n := range sortedKeys(junkDirs) {
			prune = append(prune, "-name "+n)
		}
		cmd := `cd "$1" && find . -mindepth 1`
		if maxDepth > 0 {
			cmd += " -maxdepth " + strconv.Itoa(maxDepth)
		}
		cmd += ` \( ` + strings.Join(prune, " -o ") + ` \) -prune`
		if dirs {
			cmd += " -print -o -type d -print"
		} else {
			cmd += " -o -type f -print"
		}
		res := i.exec([]string{"sh", "-c", cmd, "_", abs}, toolsListMaxOutput, true)
		out.truncated = out.truncated || res.timedOut
		return splitOutputLines(res.output, true)
	}
	if kind != listFiles {
		for _, rel := range find(true) {
			out.entries = append(out.entries, listEntry{rel: rel, isDir: true})
		}
	}
	if kind != listDirs {
		for _, rel := range find(false) {
			out.entries = append(out.entries, listEntry{rel: rel})
		}
	}
	return out
}

// toolsRuntime is the isolate of --tools-runtime: spec returns the
// runtime every call runs in.
type toolsRuntime interface {
	spec() (string, error)
	close()
}

// newToolsRuntime checks spec: "ENGINE:IMAGE" starts a container owned by
// the server, anything else names an existing target.
func newToolsRuntime(spec string, log interface {
	Warn(string, ...any)
}) (toolsRuntime, error) {
	if c, ok := parseContainerSpec(spec); ok && !c.attach {
		if c.arg == "" {
			return nil, fmt.Errorf("%s:<image> needs an image name", c.bin)
		}
		rt := &containerRuntime{bin: c.bin, image: c.arg, log: log}
		if err := rt.start(); err != nil {
			return nil, err
		}
		return rt, nil
	}
	if _, err := newToolsIO(toolParams{"runtime": spec}); err != nil {
		return nil, err
	}
	return staticRuntime(spec), nil
}

// staticRuntime is a target that exists without the server.
type staticRuntime string

func (s staticRuntime) spec() (string, error) { return string(s), nil }
func (s staticRuntime) close()                {}

// containerRuntime owns a container started as "ENGINE run --rm -i IMAGE
// sh": the shell waits on its stdin, so the container lives until the
// server closes it (then --rm removes it).
type containerRuntime struct {
	bin, image string
	log        interface{ Warn(string, ...any) }

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	id    string
	exit  chan struct{}
}

func (c *containerRuntime) start() error {
	dir, err := os.MkdirTemp("", "llama-tools-runtime-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cidfile := filepath.Join(dir, "cid")
	cmd := exec.Command(c.bin, "run", "--rm", "-i", "--cidfile", cidfile, c.image, "sh")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s container (image %s): %w", c.bin, c.image, err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	var id string
	for range 100 {
		if b, err := os.ReadFile(cidfile); err == nil {
			if id = strings.TrimSpace(string(b)); id != "" {
				break
			}
		}
		select {
		case <-exit:
			return fmt.Errorf("%s container (image %s) exited at start", c.bin, c.image)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if id == "" {
		_ = cmd.Process.Kill()
		return fmt.Errorf("timed out waiting for the %s container to start (image %s)", c.bin, c.image)
	}
	c.cmd, c.stdin, c.id, c.exit = cmd, in, id, exit
	return nil
}

// spec names the running container, starting a new one if it died.
func (c *containerRuntime) spec() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.exit:
		c.log.Warn("tools runtime container died, starting another", "engine", c.bin, "id", c.id)
		if err := c.start(); err != nil {
			return "", err
		}
	default:
	}
	return c.bin + "-container:" + c.id, nil
}

func (c *containerRuntime) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	_ = c.stdin.Close() // the shell exits, --rm removes the container
	select {
	case <-c.exit:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
	}
	c.cmd = nil
}
