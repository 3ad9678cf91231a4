package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Limits of the built-in tools, as llama-server's.
const (
	readFileMaxSize       = 16 << 10 // a text read without end_line, and any text answer
	readFileMaxSizeBase64 = 32 << 20 // a read with x-resp-type: base64
	fileSearchMaxResults  = 100
	grepMaxResults        = 100
	execMaxOutput         = 16 << 10
	execMaxTimeout        = 60 // seconds
	getInfoMaxOutput      = 4096
	getInfoTimeout        = 5 * time.Second
)

// Limits of the built-in tools that llama-server does not have.
const (
	// readFileMaxScan is the most of a file that a read_file with
	// end_line goes through (llama-server reads all of it): lines past
	// it are not reached, and the answer says so.
	readFileMaxScan = 8 << 20
	// editFileMaxSize is the largest file edit_file changes.
	editFileMaxSize = 8 << 20
	// grepMaxFileSize is the largest file grep_search searches; larger
	// ones are skipped, and the answer counts them.
	grepMaxFileSize = 8 << 20
	// grepMaxContextLines caps context_lines.
	grepMaxContextLines = 50
	// grepMaxOutput caps grep_search's answer.
	grepMaxOutput = 256 << 10
	// globMaxPattern is the longest include or exclude pattern.
	globMaxPattern = 4 << 10
)

// The inputs of the built-in tools: their JSON Schemas and decoding come
// from these types (params.go).
type (
	readFileIn struct {
		Path      string `json:"path" required:"true" desc:"Path to the file"`
		StartLine int    `json:"start_line" default:"1" desc:"First line to read, 1-based (default: 1)"`
		EndLine   int    `json:"end_line" default:"-1" desc:"Last line to read, 1-based inclusive (default: end of file)"`
		AppendLoc bool   `json:"append_loc" desc:"Prefix each line with its line number"`
	}
	fileGlobSearchIn struct {
		Path     string `json:"path" required:"true" desc:"Folder to search in"`
		Include  string `json:"include" default:"**" desc:"Glob pattern of the entries to include (e.g. \"*.cpp\" or \"src/**/*.cpp\"); default **"`
		Exclude  string `json:"exclude" desc:"Glob pattern of the entries to leave out"`
		Type     string `json:"type" default:"file" desc:"What to return: \"file\" (default), \"dir\" or \"all\""`
		MaxDepth int    `json:"max_depth" desc:"How deep to descend (default 0: no limit; 1: direct children only)"`
		// Limit's description states fileSearchMaxResults (a test checks).
		Limit int `json:"limit" default:"100" desc:"Most results to return, at most 100 (default 100)"`
	}
	grepSearchIn struct {
		Path              string `json:"path" required:"true" desc:"File or folder to search in"`
		Pattern           string `json:"pattern" required:"true" desc:"Pattern to search for (a regular expression unless literal is true)"`
		Include           string `json:"include" default:"**" desc:"Glob pattern of the files to search (default: **)"`
		Exclude           string `json:"exclude" desc:"Glob pattern of the files to skip"`
		ReturnLineNumbers bool   `json:"return_line_numbers" desc:"Include line numbers in the results"`
		Literal           bool   `json:"literal" desc:"Search for the pattern as plain text (default: false)"`
		IgnoreCase        bool   `json:"ignore_case" desc:"Ignore case (default: false)"`
		ContextLines      int    `json:"context_lines" desc:"Lines of context before and after each match (default: 0)"`
	}
	// execShellCommandIn's descriptions state execMaxTimeout and
	// execMaxOutput (a test checks).
	execShellCommandIn struct {
		Command       string `json:"command" required:"true" desc:"Shell command to run"`
		Timeout       int    `json:"timeout" default:"10" desc:"Timeout in seconds (default 10, max 60)"`
		MaxOutputSize int    `json:"max_output_size" default:"16384" desc:"Most output bytes to return (default 16384)"`
	}
	writeFileIn struct {
		Path    string `json:"path" required:"true" desc:"Path of the file to write"`
		Content string `json:"content" required:"true" desc:"Content to write"`
	}
	editFileIn struct {
		Path  string     `json:"path" required:"true" desc:"Path of the file to edit"`
		Edits []editSpec `json:"edits" required:"true" desc:"One or more exact text replacements"`
	}
	editSpec struct {
		OldText string `json:"old_text" required:"true" desc:"Exact text to find; unique in the file and not overlapping another edit"`
		NewText string `json:"new_text" required:"true" desc:"Text to put in its place"`
	}
	getInfoIn struct{}
)

// builtinTools returns llama-server's built-in tools, in its order.
func builtinTools() []*tool {
	return []*tool{
		addTool(tool{name: "read_file", displayName: "Read file", kind: "server", usesCwd: true},
			"Read the contents of a file. Optionally give a 1-based line range. "+
				"With append_loc true, each line starts with its number (e.g. \"1\u2192...\").",
			toolReadFile),
		addTool(tool{name: "file_glob_search", displayName: "File search", kind: "server", usesCwd: true},
			"Recursively find the files matching a glob pattern under a folder, "+
				"skipping what .gitignore ignores (inside a git repository) and junk folders (.git, node_modules, build, dist...). "+
				"A pattern without '/' (\"*.cpp\") matches the base name at any depth; a pattern with '/' matches the whole "+
				"relative path and is anchored with \"**/\" unless it starts with \"**/\" or '/'. "+
				"type \"dir\" or \"all\" lists folders too (shown with a trailing '/'; .gitignore does not apply to them).",
			toolFileGlobSearch),
		addTool(tool{name: "grep_search", displayName: "Grep search", kind: "server", usesCwd: true},
			"Search files under a path for a pattern. Returns the matching lines with their "+
				"file paths (relative to the folder searched). Skips what .gitignore ignores and junk folders. "+
				"include/exclude: a pattern without '/' matches the base name at any depth, one with '/' the whole relative path.",
			toolGrepSearch),
		addTool(tool{name: "exec_shell_command", displayName: "Execute shell command", kind: "server", usesCwd: true, write: true, stream: true},
			"Run a shell command and return its output (stdout and stderr together).",
			toolExecShellCommand),
		addTool(tool{name: "write_file", displayName: "Write file", kind: "server", usesCwd: true, write: true},
			"Write content to a file, creating it and its parent folders if needed. "+
				"Use edit_file for changes to part of a file.",
			toolWriteFile),
		addTool(tool{name: "edit_file", displayName: "Edit file", kind: "server", usesCwd: true, write: true},
			"Edit a file by exact text replacement. Each edits[].old_text must occur once in the file "+
				"and is matched against the original content, not after the other edits. Merge nearby changes into one edit "+
				"rather than overlapping edits. Use write_file to replace the whole file.",
			toolEditFile),
		addTool(tool{name: "get_info", displayName: "Get Runtime Info", kind: "server", usesCwd: true},
			"Returns runtime information: the OS name and version and the current working directory",
			toolGetInfo),
	}
}

func toolReadFile(_ context.Context, c *call, in readFileIn) (any, error) {
	file, startLine, endLine, appendLoc := in.Path, in.StartLine, in.EndLine, in.AppendLoc
	asBase64 := c.respType == "base64"
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	if err := tio.check(file); err != nil {
		return toolFailure{err.Error()}, nil
	}
	size, ok := tio.fileSize(file)
	if !ok {
		return toolFailure{"cannot stat file: " + file}, nil
	}
	if asBase64 {
		if size > readFileMaxSizeBase64 {
			return toolFailure{fmt.Sprintf("file too large (%d bytes, max %d)", size, readFileMaxSizeBase64)}, nil
		}
		content, truncated, err := tio.readFile(file, readFileMaxSizeBase64)
		if err != nil {
			return toolFailure{openError(file, err)}, nil
		}
		if truncated {
			return toolFailure{fmt.Sprintf("file too large (more than %d bytes)", readFileMaxSizeBase64)}, nil
		}
		return toolBase64{Base64: base64.StdEncoding.EncodeToString(content), SizeBytes: len(content)}, nil
	}
	if size > readFileMaxSize && endLine == -1 {
		return toolFailure{fmt.Sprintf("file too large (%d bytes, max %d). Use start_line/end_line to read a portion.", size, readFileMaxSize)}, nil
	}
	limit := readFileMaxScan
	if endLine == -1 {
		limit = readFileMaxSize // the file may have grown since the stat
	}
	content, truncated, err := tio.readFile(file, limit)
	if err != nil {
		return toolFailure{openError(file, err)}, nil
	}
	text := string(content)
	if truncated {
		// The last line read may be cut short: left out.
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		} else {
			text = ""
		}
	}
	var b strings.Builder
	complete := !truncated
	for i, line := range splitLines(text) {
		n := i + 1
		if n < startLine {
			continue
		}
		if endLine != -1 && n > endLine {
			complete = true
			break
		}
		out := line + "\n"
		if appendLoc {
			out = fmt.Sprintf("%d\u2192%s", n, out)
		}
		if b.Len()+len(out) > readFileMaxSize {
			b.WriteString("[output truncated]")
			complete = true
			break
		}
		b.WriteString(out)
	}
	if !complete {
		fmt.Fprintf(&b, "[read stopped after the first %d bytes of the file]", limit)
	}
	return toolText{b.String()}, nil
}

// openError is read_file's answer to a file it cannot read.
func openError(file string, err error) string {
	var out *errOutsideRoot
	switch {
	case errors.As(err, &out):
		return err.Error()
	case errors.Is(err, errNotRegular):
		return "not a regular file: " + file
	}
	return "failed to open file: " + file
}

// splitLines splits text as std::getline does: on '\n', without an empty
// last line after a final '\n'.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func toolFileGlobSearch(ctx context.Context, c *call, in fileGlobSearchIn) (any, error) {
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	dir := in.Path
	if err := tio.check(dir); err != nil {
		return toolFailure{err.Error()}, nil
	}
	base := tio.resolve(dir)
	include, exclude := in.Include, in.Exclude
	if msg := checkGlobs(include, exclude); msg != "" {
		return toolFailure{msg}, nil
	}
	typ := in.Type
	maxDepth := max(0, in.MaxDepth)
	limit := in.Limit
	if limit < 1 {
		return toolFailure{fmt.Sprintf("invalid limit: %d (expected 1 or more)", limit)}, nil
	}
	limit = min(limit, fileSearchMaxResults)
	var kind listKind
	switch typ {
	case "file":
		kind = listFiles
	case "dir":
		kind = listDirs
	case "all":
		kind = listAll
	default:
		return toolFailure{"invalid type: " + typ + ` (expected "file", "dir" or "all")`}, nil
	}
	listing := tio.list(ctx, base, maxDepth, kind)
	if listing.err != "" {
		return toolFailure{listing.err + ": " + dir}, nil
	}
	var matches []listEntry
	for _, e := range listing.entries {
		if !pathGlobMatch(include, e.rel) || exclude != "" && pathGlobMatch(exclude, e.rel) {
			continue
		}
		matches = append(matches, e)
	}
	shown := min(len(matches), limit)
	var b strings.Builder
	entries := make([]toolGlobEntry, 0, shown)
	for _, m := range matches[:shown] {
		typ := "file"
		b.WriteString(m.rel)
		if m.isDir {
			typ = "dir"
			b.WriteByte('/')
		}
		b.WriteByte('\n')
		entries = append(entries, toolGlobEntry{Path: m.rel, Type: typ})
	}
	fmt.Fprintf(&b, "\n---\nTotal matches: %d\n", len(matches))
	if len(matches) > shown {
		fmt.Fprintf(&b, "[%d results limit reached (%d total matches). Refine the glob pattern to narrow the search.]\n", shown, len(matches))
	}
	if listing.truncated {
		b.WriteString("[results truncated: time budget, entry or depth limit, or unreadable directory]\n")
	}
	return toolGlob{Base: base, Entries: entries, PlainTextResponse: b.String()}, nil
}

// checkGlobs refuses include and exclude patterns over globMaxPattern.
func checkGlobs(include, exclude string) string {
	for _, g := range []struct{ name, v string }{{"include", include}, {"exclude", exclude}} {
		if len(g.v) > globMaxPattern {
			return fmt.Sprintf("%s pattern too long (%d bytes, max %d)", g.name, len(g.v), globMaxPattern)
		}
	}
	return ""
}

func toolGrepSearch(ctx context.Context, c *call, in grepSearchIn) (any, error) {
	target, pattern := in.Path, in.Pattern
	include, exclude := in.Include, in.Exclude
	if msg := checkGlobs(include, exclude); msg != "" {
		return toolFailure{msg}, nil
	}
	showLineNo := in.ReturnLineNumbers
	ctxLines := min(max(0, in.ContextLines), grepMaxContextLines)
	src := pattern
	if in.Literal {
		src = regexp.QuoteMeta(pattern)
	}
	if in.IgnoreCase {
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return toolFailure{"invalid regex: " + err.Error()}, nil
	}
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	if err := tio.check(target); err != nil {
		return toolFailure{err.Error()}, nil
	}
	type file struct{ abs, shown string }
	var files []file
	abs := tio.resolve(target)
	switch {
	case tio.isFile(abs):
		files = append(files, file{abs, target})
	case tio.isDir(abs):
		listing := tio.list(ctx, abs, 0, listFiles)
		if listing.err != "" {
			return toolFailure{listing.err + ": " + target}, nil
		}
		for _, e := range listing.entries {
			if !pathGlobMatch(include, e.rel) || exclude != "" && pathGlobMatch(exclude, e.rel) {
				continue
			}
			files = append(files, file{path.Join(abs, e.rel), e.rel})
		}
	default:
		return toolFailure{"path does not exist: " + target}, nil
	}
	var b strings.Builder
	total, skipped := 0, 0
	limitReached, outputFull := false, false
	showNum := showLineNo || ctxLines > 0
	for _, f := range files {
		if limitReached || outputFull || ctx.Err() != nil {
			break
		}
		content, truncated, err := tio.readFile(f.abs, grepMaxFileSize)
		if err != nil {
			continue
		}
		if truncated {
			skipped++
			continue
		}
		lines := splitLines(string(content))
		for i, line := range lines {
			if total >= grepMaxResults {
				limitReached = true
				break
			}
			if b.Len() >= grepMaxOutput {
				outputFull = true
				break
			}
			if !re.MatchString(line) {
				continue
			}
			lo, hi := max(0, i-ctxLines), min(len(lines)-1, i+ctxLines)
			for j := lo; j <= hi; j++ {
				sep := byte('-')
				if j == i {
					sep = ':'
				}
				b.WriteString(f.shown)
				b.WriteByte(sep)
				if showNum {
					fmt.Fprintf(&b, "%d%c", j+1, sep)
				}
				b.WriteString(lines[j])
				b.WriteByte('\n')
			}
			if ctxLines > 0 {
				b.WriteString("--\n")
			}
			total++
		}
	}
	text := b.String()
	if len(text) > grepMaxOutput {
		text = text[:grepMaxOutput] + "\n"
		outputFull = true
	}
	b.Reset()
	b.WriteString(text)
	fmt.Fprintf(&b, "\n---\nTotal matches: %d\n", total)
	if limitReached {
		fmt.Fprintf(&b, "[%d matches limit reached. Narrow the path/pattern/include to see more.]\n", grepMaxResults)
	}
	if outputFull {
		fmt.Fprintf(&b, "[output limit of %d bytes reached. Narrow the path/pattern/include or use fewer context_lines.]\n", grepMaxOutput)
	}
	if skipped > 0 {
		fmt.Fprintf(&b, "[%d files larger than %d bytes not searched]\n", skipped, grepMaxFileSize)
	}
	return toolText{b.String()}, nil
}

func toolExecShellCommand(ctx context.Context, c *call, in execShellCommandIn) (any, error) {
	command, st := in.Command, c.stream
	timeout := min(in.Timeout, execMaxTimeout)
	maxOutput := in.MaxOutputSize
	if maxOutput < 0 || maxOutput > execMaxOutput {
		maxOutput = execMaxOutput
	}
	args := []string{"sh", "-c", command}
	if runtime.GOOS == "windows" && c.runtime == "" {
		args = []string{"cmd", "/c", command}
	}
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	tail := func(res execResult) string {
		s := fmt.Sprintf("\n[exit code: %d]", res.exitCode)
		if res.timedOut {
			s += " [exit due to timed out]"
		}
		return s
	}
	if st != nil {
		alive := true
		res := tio.run(ctx, args, maxOutput, time.Duration(timeout)*time.Second, func(chunk string) bool {
			alive = st(chunk)
			return alive
		})
		if alive && ctx.Err() == nil {
			st(tail(res))
		}
		return nil, nil
	}
	res := tio.run(ctx, args, maxOutput, time.Duration(timeout)*time.Second, nil)
	return toolText{res.output + tail(res)}, nil
}

func toolWriteFile(_ context.Context, c *call, in writeFileIn) (any, error) {
	file, content := in.Path, in.Content
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	if err := tio.check(file); err != nil {
		return toolFailure{err.Error()}, nil
	}
	if err := tio.writeFile(file, []byte(content)); err != nil {
		return toolFailure{writeError(file, err)}, nil
	}
	return toolWritten{Bytes: len(content), Path: file, Result: "file written successfully"}, nil
}

// writeError is the answer to a file that cannot be written.
func writeError(file string, err error) string {
	if errors.Is(err, errGitDir) {
		return err.Error() + ": " + file
	}
	if errors.Is(err, errNotRegular) {
		return "not a regular file: " + file
	}
	return "failed to write file: " + file
}

func toolGetInfo(ctx context.Context, c *call, _ getInfoIn) (any, error) {
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	isolated := c.runtime != ""
	args := []string{"uname", "-a"}
	if runtime.GOOS == "windows" && !isolated {
		args = []string{"cmd", "/c", "ver"}
	}
	osInfo := "unknown"
	if res := tio.run(ctx, args, getInfoMaxOutput, getInfoTimeout, nil); res.exitCode == 0 && !res.timedOut {
		osInfo = strings.TrimSpace(res.output)
	}
	cwd := c.cwd
	if !isolated {
		cwd = tio.resolve(".")
	} else if cwd == "" {
		if res := tio.run(ctx, []string{"pwd"}, getInfoMaxOutput, getInfoTimeout, nil); res.exitCode == 0 && !res.timedOut {
			cwd = strings.TrimSpace(res.output)
		} else {
			cwd = "unknown"
		}
	}
	return toolInfo{Cwd: cwd, OS: osInfo}, nil
}

// toolEditFile applies exact replacements, each of a text found once in
// the file. When a text is not found as is, the match ignores trailing
// spaces and typographic quotes, dashes and spaces (the lines it does not
// touch stay as they were).
func toolEditFile(_ context.Context, c *call, in editFileIn) (any, error) {
	file := in.Path
	if len(in.Edits) == 0 {
		return toolFailure{`"edits" must be a non-empty array`}, nil
	}
	type edit struct{ oldText, newText string }
	edits := make([]edit, 0, len(in.Edits))
	for i, e := range in.Edits {
		if e.OldText == "" {
			return toolFailure{fmt.Sprintf("edits[%d].old_text must not be empty", i)}, nil
		}
		edits = append(edits, edit{e.OldText, e.NewText})
	}
	tio, err := newToolsIO(c)
	if err != nil {
		return nil, err
	}
	if err := tio.check(file); err != nil {
		return toolFailure{err.Error()}, nil
	}
	b, truncated, err := tio.readFile(file, editFileMaxSize)
	if err != nil {
		return toolFailure{openError(file, err)}, nil
	}
	if truncated {
		return toolFailure{fmt.Sprintf("file too large to edit (more than %d bytes): %s", editFileMaxSize, file)}, nil
	}
	original := string(b)
	normOriginal := fuzzyNormalize(original)
	fuzzy := false
	for i, e := range edits {
		if strings.Contains(original, e.oldText) {
			continue
		}
		if !strings.Contains(normOriginal, fuzzyNormalize(e.oldText)) {
			return toolFailure{fmt.Sprintf("could not find edits[%d].old_text in %s, it must match the file's current content exactly", i, file)}, nil
		}
		fuzzy = true
	}
	base := original
	if fuzzy {
		base = normOriginal
	}
	matched := make([]textEdit, 0, len(edits))
	for i, e := range edits {
		needle := e.oldText
		if fuzzy {
			needle = fuzzyNormalize(e.oldText)
		}
		// Uniqueness is always judged on normalized text: a duplicate
		// differing only in whitespace still counts.
		if n := countNonOverlapping(normOriginal, fuzzyNormalize(e.oldText)); n > 1 {
			return toolFailure{fmt.Sprintf("found %d occurrences of edits[%d].old_text in %s, it must be unique", n, i, file)}, nil
		}
		at := strings.Index(base, needle)
		if at < 0 {
			return toolFailure{fmt.Sprintf("could not find edits[%d].old_text in %s, it must match the file's current content exactly", i, file)}, nil
		}
		matched = append(matched, textEdit{index: i, at: at, length: len(needle), newText: e.newText})
	}
	sort.SliceStable(matched, func(a, b int) bool { return matched[a].at < matched[b].at })
	for i := 1; i < len(matched); i++ {
		if matched[i-1].at+matched[i-1].length > matched[i].at {
			return toolFailure{fmt.Sprintf("edits[%d] and edits[%d] overlap in %s; merge them into one edit or target disjoint regions", matched[i-1].index, matched[i].index, file)}, nil
		}
	}
	var updated string
	if fuzzy {
		updated = applyEditsKeepingLines(original, base, matched)
	} else {
		updated = applyEdits(base, matched, 0)
	}
	if updated == original {
		return toolFailure{"no changes made: the replacement(s) produced identical content"}, nil
	}
	if err := tio.writeFile(file, []byte(updated)); err != nil {
		return toolFailure{writeError(file, err)}, nil
	}
	return toolEdited{EditsApplied: len(matched), Path: file, Result: "file edited successfully"}, nil
}

// textEdit is one replacement found in a text.
type textEdit struct {
	index   int // in the request's edits
	at      int // byte offset of the match
	length  int
	newText string
}

// applyEdits replaces the sorted, disjoint matches of edits in text,
// whose first byte is at offset in the text the matches index.
func applyEdits(text string, edits []textEdit, offset int) string {
	var b strings.Builder
	pos := 0
	for _, e := range edits {
		at := e.at - offset
		b.WriteString(text[pos:at])
		b.WriteString(e.newText)
		pos = at + e.length
	}
	b.WriteString(text[pos:])
	return b.String()
}

// applyEditsKeepingLines applies edits matched in the normalized text
// but takes every line they do not touch from the original.
func applyEditsKeepingLines(original, normalized string, edits []textEdit) string {
	origLines := linesWithEndings(original)
	spans := lineSpans(normalized)
	lineOf := func(off int) int {
		for i, s := range spans {
			if off >= s[0] && off < s[1] {
				return i
			}
		}
		return len(spans) - 1
	}
	type group struct {
		first, end int // lines [first, end)
		edits      []textEdit
	}
	var groups []group
	for _, e := range edits {
		first := lineOf(e.at)
		last := first
		for last < len(spans)-1 && spans[last][1] < e.at+e.length {
			last++
		}
		if n := len(groups); n > 0 && first < groups[n-1].end {
			groups[n-1].end = max(groups[n-1].end, last+1)
			groups[n-1].edits = append(groups[n-1].edits, e)
			continue
		}
		groups = append(groups, group{first, last + 1, []textEdit{e}})
	}
	var b strings.Builder
	next := 0
	for _, g := range groups {
		for i := next; i < g.first && i < len(origLines); i++ {
			b.WriteString(origLines[i])
		}
		lo, hi := spans[g.first][0], spans[g.end-1][1]
		b.WriteString(applyEdits(normalized[lo:hi], g.edits, lo))
		next = g.end
	}
	for i := next; i < len(origLines); i++ {
		b.WriteString(origLines[i])
	}
	return b.String()
}

// linesWithEndings splits text into lines that keep their '\n'.
func linesWithEndings(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// lineSpans returns the [start, end) byte range of each line of text.
func lineSpans(text string) [][2]int {
	var out [][2]int
	off := 0
	for _, l := range linesWithEndings(text) {
		out = append(out, [2]int{off, off + len(l)})
		off += len(l)
	}
	if len(out) == 0 {
		out = append(out, [2]int{0, 0})
	}
	return out
}

func countNonOverlapping(text, needle string) int {
	if needle == "" {
		return 0
	}
	return strings.Count(text, needle)
}

// fuzzyReplacer maps typographic quotes, dashes and spaces to ASCII.
var fuzzyReplacer = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
)

// fuzzyNormalize drops each line's trailing spaces, tabs and '\r' and maps
// typographic characters to ASCII; lines keep their count and order.
func fuzzyNormalize(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = fuzzyReplacer.Replace(strings.TrimRight(l, " \t\r"))
	}
	return strings.Join(lines, "\n")
}

// pathGlobMatch matches a relative path: a pattern without '/' against
// the base name at any depth, otherwise against the whole path, anchored
// with "**/" unless it starts with "**/" or '/'.
func pathGlobMatch(pattern, rel string) bool {
	if !strings.Contains(pattern, "/") {
		return globMatch(pattern, path.Base(rel))
	}
	if pattern == "**" || strings.HasPrefix(pattern, "**/") || strings.HasPrefix(pattern, "/") {
		return globMatch(pattern, rel)
	}
	return globMatch("**/"+pattern, rel)
}

// classMatch reports whether c is in the glob class body (between the
// brackets): ranges a-z, a leading '!' negates.
func classMatch(c byte, body string) bool {
	neg := false
	if body != "" && body[0] == '!' {
		neg, body = true, body[1:]
	}
	in := false
	for i := 0; i < len(body); i++ {
		if i+2 < len(body) && body[i+1] == '-' {
			if body[i] <= c && c <= body[i+2] {
				in = true
			}
			i += 2
			continue
		}
		if body[i] == c {
			in = true
		}
	}
	return in != neg
}

// The answers of the built-in tools; their fields are in the order of
// their names, as llama-server's JSON objects are.
type (
	// toolBase64 is read_file's answer with resp_type base64.
	toolBase64 struct {
		Base64    string `json:"base64"`
		SizeBytes int    `json:"size_bytes"`
	}
	// toolGlob is file_glob_search's answer.
	toolGlob struct {
		Base              string          `json:"base"`
		Entries           []toolGlobEntry `json:"entries"`
		PlainTextResponse string          `json:"plain_text_response"`
	}
	toolGlobEntry struct {
		Path string `json:"path"`
		Type string `json:"type"` // "file" or "dir"
	}
	// toolWritten is write_file's answer.
	toolWritten struct {
		Bytes  int    `json:"bytes"`
		Path   string `json:"path"`
		Result string `json:"result"`
	}
	// toolEdited is edit_file's answer.
	toolEdited struct {
		EditsApplied int    `json:"edits_applied"`
		Path         string `json:"path"`
		Result       string `json:"result"`
	}
	// toolInfo is get_info's answer.
	toolInfo struct {
		Cwd string `json:"cwd"`
		OS  string `json:"os"`
	}
)
