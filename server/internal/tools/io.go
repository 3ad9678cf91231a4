package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
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
	// toolsListMaxEntries is the most entries one listing visits on the
	// host; past it the listing is marked truncated.
	toolsListMaxEntries = 100_000
	// toolsListMaxDepth is the deepest folder one listing walks on the
	// host, whatever max_depth asks.
	toolsListMaxDepth = 64
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
	output    string
	exitCode  int
	timedOut  bool
	truncated bool // output ends with truncatedNote
}

// truncatedNote ends a command's output that went past its cap.
const truncatedNote = "\n[output truncated]"

// toolsIO is where the built-in tools act: the host, or an isolate (a
// container, a host over ssh) driven through commands.
type toolsIO interface {
	// check reports why path cannot be used (on the host: it is outside
	// the tools root), or nil.
	check(path string) error
	// resolve makes path absolute against the working directory.
	resolve(path string) string
	isDir(path string) bool
	isFile(path string) bool
	fileSize(path string) (int64, bool)
	// readFile reads at most limit bytes of a regular file; truncated
	// reports that it holds more.
	readFile(path string, limit int) (data []byte, truncated bool, err error)
	writeFile(path string, content []byte) error
	// list returns the entries under base (already resolved); maxDepth 0
	// is unlimited, 1 the direct children.
	list(ctx context.Context, base string, maxDepth int, kind listKind) listResult
	// run runs a command; onChunk, when set, gets the output as it comes
	// and stops the command by returning false.
	run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult
}

// newToolsIO returns the I/O of a tool call: its "cwd" and "runtime"
// parameters (set from the x-tool-cwd and x-tool-runtime headers, where
// the server allows them, or from --tools-runtime). On the host it is
// confined to root, cwd included. An unknown or malformed runtime is an
// error, never a fallback to the host.
func newToolsIO(c *call) (toolsIO, error) {
	cwd, runtime, root := c.cwd, c.runtime, c.root
	if runtime == "" {
		if root == nil {
			return nil, errToolRuntime("no tools root")
		}
		rel, err := root.rel(".", cwd)
		if err != nil {
			return nil, &Error{Status: http.StatusForbidden, Msg: "x-tool-cwd: " + err.Error()}
		}
		return &hostIO{root: root, cwd: rel, env: c.env}, nil
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

// runCommand runs args in the environment env and collects its output
// (stdout, and stderr when combine is set) up to maxOutput bytes, killing
// it (and its process group) after timeout, when ctx is done, or when
// onChunk returns false.
func runCommand(ctx context.Context, args []string, env []string, maxOutput int, timeout time.Duration, onChunk func(string) bool, combine bool, cwd string, stdin []byte) execResult {
	res := execResult{exitCode: -1}
	if len(args) == 0 {
		res.output = "failed to spawn process"
		return res
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = cwd
	cmd.Env = env
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
	res.truncated = out.truncated
	if out.truncated {
		res.output += truncatedNote
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

// hostIO runs the tools on the server's host, their files confined to
// the tools root.
type hostIO struct {
	root *toolsRoot
	cwd  string // relative to the root: resolves relative paths and is the commands' folder
	env  *envPolicy
}

func (h *hostIO) check(p string) error {
	_, err := h.root.rel(h.cwd, p)
	return err
}

// resolve returns the absolute path of p inside the root, or p itself
// when it is outside (every operation then fails).
func (h *hostIO) resolve(p string) string {
	rel, err := h.root.rel(h.cwd, p)
	if err != nil {
		return p
	}
	return h.root.abs(rel)
}

func (h *hostIO) stat(p string) (fs.FileInfo, error) {
	rel, err := h.root.rel(h.cwd, p)
	if err != nil {
		return nil, err
	}
	return h.root.stat(rel)
}

func (h *hostIO) isDir(p string) bool {
	st, err := h.stat(p)
	return err == nil && st.IsDir()
}

func (h *hostIO) isFile(p string) bool {
	st, err := h.stat(p)
	return err == nil && st.Mode().IsRegular()
}

func (h *hostIO) fileSize(p string) (int64, bool) {
	st, err := h.stat(p)
	if err != nil || st.IsDir() {
		return 0, false
	}
	return st.Size(), true
}

func (h *hostIO) readFile(p string, limit int) ([]byte, bool, error) {
	rel, err := h.root.rel(h.cwd, p)
	if err != nil {
		return nil, false, err
	}
	return h.root.readFile(rel, limit)
}

func (h *hostIO) writeFile(p string, content []byte) error {
	rel, err := h.root.rel(h.cwd, p)
	if err != nil {
		return err
	}
	return h.root.writeFile(rel, content)
}

func (h *hostIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult {
	return runCommand(ctx, args, h.env.environ(), maxOutput, timeout, onChunk, true, h.root.abs(h.cwd), nil)
}

// list walks base inside the root, at most toolsListMaxEntries entries
// and toolsListMaxDepth folders deep.
func (h *hostIO) list(ctx context.Context, base string, maxDepth int, kind listKind) listResult {
	var out listResult
	baseRel, err := h.root.rel(h.cwd, base)
	if err != nil {
		out.err = "path is outside the tools root"
		return out
	}
	if st, err := h.root.stat(baseRel); err != nil || !st.IsDir() {
		out.err = "path does not exist or is not a directory"
		return out
	}
	if maxDepth == 0 || maxDepth > toolsListMaxDepth {
		maxDepth = toolsListMaxDepth
	}
	deadline := time.Now().Add(toolsListTimeout)
	// git knows what is ignored, but lists only files.
	if kind == listFiles {
		res := runCommand(ctx, gitArgv(h.root.abs(baseRel), "ls-files", "--cached", "--others", "--exclude-standard"),
			gitEnv(h.env.environ()), toolsListMaxOutput, toolsListTimeout, nil, false, h.root.abs(h.cwd), nil)
		if res.exitCode == 0 && !res.timedOut {
			for _, line := range splitOutputLines(res.output, false) {
				if len(out.entries) >= toolsListMaxEntries {
					out.truncated = true
					break
				}
				if entryDepth(line) > maxDepth {
					continue
				}
				if st, err := h.root.stat(filepath.Join(baseRel, filepath.FromSlash(line))); err == nil && st.Mode().IsRegular() {
					out.entries = append(out.entries, listEntry{rel: line})
				}
			}
			return out
		}
	}
	type dir struct {
		abs, rel string // abs: relative to the root
		depth    int
	}
	stack := []dir{{abs: baseRel}}
	visited := 0
	for len(stack) > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			out.truncated = true
			return out
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := h.root.readDir(d.abs)
		if err != nil {
			if !errors.Is(err, fs.ErrPermission) {
				out.truncated = true
			}
			continue
		}
		for _, e := range ents {
			if visited++; visited > toolsListMaxEntries {
				out.truncated = true
				return out
			}
			rel := e.Name()
			if d.rel != "" {
				rel = d.rel + "/" + e.Name()
			}
			full := filepath.Join(d.abs, e.Name())
			mode := e.Type()
			isLink := mode&fs.ModeSymlink != 0
			if isLink {
				st, err := h.root.stat(full) // a link out of the root fails
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
				if d.depth+1 < maxDepth {
					stack = append(stack, dir{abs: full, rel: rel, depth: d.depth + 1})
				} else if d.depth+1 == toolsListMaxDepth {
					out.truncated = true
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

// gitConfigNoCommands returns the settings that make git run a command (a
// hook, a helper, a pager, a program for diffs or transports), each set
// on the command line to a value that runs nothing: the command line
// outranks every configuration file, the repository's .git/config (which
// a tool call or a checkout may have written) included. core.fsmonitor
// is the one "git ls-files" would run; the rest guard the same way
// should git run them elsewhere.
func gitConfigNoCommands() []string {
	return []string{
		"core.fsmonitor=false", "core.hooksPath=" + os.DevNull, "core.sshCommand=false", "core.pager=cat",
		"core.editor=false", "core.askPass=false", "core.gitProxy=false", "core.untrackedCache=false",
		"credential.helper=", "diff.external=", "sequence.editor=false", "gpg.program=false",
		"protocol.allow=never", "uploadpack.packObjectsHook=", "fsmonitor.allowRemote=false",
	}
}

// gitArgv is the command line of "git -C dir args..." with
// gitConfigNoCommands and without optional locks (git writes nothing).
func gitArgv(dir string, args ...string) []string {
	argv := []string{"git", "--no-optional-locks"}
	for _, c := range gitConfigNoCommands() {
		argv = append(argv, "-c", c)
	}
	argv = append(argv, "-C", dir)
	return append(argv, args...)
}

// gitEnv is env (the tools' environment, which holds no GIT_* variable
// unless ToolsOptions.Env names one) without GIT_* variables, and with
// neither the system's nor the user's git configuration: only the
// repository's, overruled by gitConfigNoCommands.
func gitEnv(env []string) []string {
	out := make([]string, 0, len(env)+6)
	for _, kv := range env {
		if !strings.HasPrefix(strings.ToUpper(kv), "GIT_") {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat", "GIT_OPTIONAL_LOCKS=0")
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

// check accepts every path: the isolate is the confinement.
func (i *isolateIO) check(string) error { return nil }

func (i *isolateIO) resolve(p string) string {
	if i.cwd == "" || strings.HasPrefix(p, "/") {
		return p
	}
	return i.cwd + "/" + p
}

func (i *isolateIO) exec(inner []string, maxOutput int, combine bool) execResult {
	return runCommand(context.Background(), i.argv(inner, false), driverEnv(), maxOutput, toolsIsolateTimeout, nil, combine, "", nil)
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

func (i *isolateIO) readFile(p string, limit int) ([]byte, bool, error) {
	limit = min(limit, toolsIsolateReadLimit)
	res := i.exec([]string{"sh", "-c", `[ -f "$1" ] && exec cat -- "$1"`, "_", i.resolve(p)}, limit+1, false)
	out := strings.TrimSuffix(res.output, truncatedNote)
	if !res.truncated && (res.exitCode != 0 || res.timedOut) {
		return nil, false, errors.New("cannot read the file")
	}
	if len(out) > limit {
		return []byte(out[:limit]), true, nil
	}
	return []byte(out), false, nil
}

func (i *isolateIO) writeFile(p string, content []byte) error {
	if content == nil {
		content = []byte{}
	}
	res := runCommand(context.Background(),
		i.argv([]string{"sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "_", i.resolve(p)}, true), driverEnv(),
		4096, toolsIsolateTimeout, nil, true, "", content)
	if res.exitCode != 0 || res.timedOut {
		return errors.New("cannot write the file")
	}
	return nil
}

// run bounds the command with the isolate's own timeout too: killing the
// local client does not kill what runs inside.
func (i *isolateIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, onChunk func(string) bool) execResult {
	secs := int(timeout / time.Second)
	inner := append([]string{"timeout", strconv.Itoa(secs) + "s"}, args...)
	if i.cwd != "" {
		inner = append([]string{"sh", "-c", `cd "$1" || exit 127; shift; exec "$@"`, "_", i.cwd}, inner...)
	}
	return runCommand(ctx, i.argv(inner, true), driverEnv(), maxOutput, timeout+5*time.Second, onChunk, true, "", []byte{})
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
	if _, err := newToolsIO(&call{runtime: spec}); err != nil {
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
