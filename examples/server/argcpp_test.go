package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// cppOption is one add_opt(common_arg(...)) of llama.cpp's common/arg.cpp,
// as far as the flag surface goes.
type cppOption struct {
	line     int
	args     []string // positive spellings
	neg      []string // negative spellings (--no-x)
	values   int      // 0 (switch), 1 or 2 values
	env      string
	examples []string // LLAMA_EXAMPLE_* names; {COMMON} when not set
	excludes []string
	sampling bool
	spec     bool
	removed  string // the replacement llama.cpp names when it refuses a removed option ("": not removed)
}

// forServer reports whether llama-server registers the option: its example
// set names SERVER or COMMON, and SERVER is not excluded.
func (o cppOption) forServer() bool {
	in := false
	for _, e := range o.examples {
		if e == "LLAMA_EXAMPLE_SERVER" || e == "LLAMA_EXAMPLE_COMMON" {
			in = true
		}
	}
	for _, e := range o.excludes {
		if e == "LLAMA_EXAMPLE_SERVER" {
			return false
		}
	}
	return in
}

// cppScanner walks C++ source text, skipping string and character literals
// and comments, so that brackets can be matched.
type cppScanner struct {
	src string
}

// skipLiteral returns the index just past the literal or comment starting
// at i, or i when none starts there.
func (s cppScanner) skipLiteral(i int) int {
	src := s.src
	switch {
	case strings.HasPrefix(src[i:], "//"):
		if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
			return i + j + 1
		}
		return len(src)
	case strings.HasPrefix(src[i:], "/*"):
		if j := strings.Index(src[i+2:], "*/"); j >= 0 {
			return i + 2 + j + 2
		}
		return len(src)
	case strings.HasPrefix(src[i:], `R"`):
		// raw string R"delim( ... )delim"
		open := strings.IndexByte(src[i:], '(')
		if open < 0 {
			return i
		}
		delim := src[i+2 : i+open]
		end := strings.Index(src[i+open:], ")"+delim+`"`)
		if end < 0 {
			return len(src)
		}
		return i + open + end + len(delim) + 2
	case src[i] == '"' || src[i] == '\'':
		q := src[i]
		for j := i + 1; j < len(src); j++ {
			switch src[j] {
			case '\\':
				j++
			case q:
				return j + 1
			}
		}
		return len(src)
	}
	return i
}

// close returns the index of the bracket closing the one at open.
func (s cppScanner) close(open int) (int, error) {
	depth := 0
	for i := open; i < len(s.src); {
		if j := s.skipLiteral(i); j != i {
			i = j
			continue
		}
		switch s.src[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
		i++
	}
	return 0, fmt.Errorf("unbalanced bracket at offset %d", open)
}

// splitTop splits s at the commas outside brackets and literals.
func (s cppScanner) splitTop(from, to int) []string {
	var parts []string
	depth, start := 0, from
	for i := from; i < to; {
		if j := s.skipLiteral(i); j != i {
			i = j
			continue
		}
		switch s.src[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, stripComments(s.src[start:i]))
				start = i + 1
			}
		}
		i++
	}
	return append(parts, stripComments(s.src[start:to]))
}

// stripComments removes the comments of a C++ fragment, and trims it.
func stripComments(frag string) string {
	s := cppScanner{frag}
	var b strings.Builder
	for i := 0; i < len(frag); {
		if j := s.skipLiteral(i); j != i {
			if frag[i] == '/' {
				b.WriteByte(' ')
			} else {
				b.WriteString(frag[i:j])
			}
			i = j
			continue
		}
		b.WriteByte(frag[i])
		i++
	}
	return strings.TrimSpace(b.String())
}

// stringList reads a braced list of string literals: {"-a", "--bb"}.
func stringList(expr string) ([]string, bool) {
	expr = strings.TrimSpace(expr)
	if !strings.HasPrefix(expr, "{") || !strings.HasSuffix(expr, "}") {
		return nil, false
	}
	var out []string
	for _, p := range strings.Split(expr[1:len(expr)-1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(p) < 2 || p[0] != '"' || p[len(p)-1] != '"' {
			return nil, false
		}
		out = append(out, p[1:len(p)-1])
	}
	return out, true
}

// identList reads a braced list of identifiers: {LLAMA_EXAMPLE_SERVER, ...}.
func identList(expr string) []string {
	expr = strings.Trim(strings.TrimSpace(expr), "{}")
	var out []string
	for _, p := range strings.Split(expr, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// exampleSet reads the argument of set_examples or set_excludes: a braced
// list, or the name of a list variable defined in the file.
func exampleSet(src, arg string) ([]string, error) {
	if strings.HasPrefix(arg, "{") {
		return identList(arg), nil
	}
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(arg) + `\s*=\s*(\{[^}]*\})`)
	m := re.FindStringSubmatch(src)
	if m == nil {
		return nil, fmt.Errorf("example list %q is not defined in the file", arg)
	}
	return identList(stripComments(m[1])), nil
}

// parseArgCpp reads every add_opt(common_arg(...)) of arg.cpp.
// removedRE finds a handler that refuses its option as removed.
var removedRE = regexp.MustCompile(`arg_removed\("([^"]*)"\)`)

func parseArgCpp(src string) ([]cppOption, error) {
	s := cppScanner{src}
	var opts []cppOption
	const marker = "add_opt(common_arg("
	for i := 0; i < len(src); {
		if j := s.skipLiteral(i); j != i {
			i = j
			continue
		}
		if !strings.HasPrefix(src[i:], marker) {
			i++
			continue
		}
		line := strings.Count(src[:i], "\n") + 1
		addOpen := i + len("add_opt")
		addClose, err := s.close(addOpen)
		if err != nil {
			return nil, fmt.Errorf("arg.cpp:%d: %w", line, err)
		}
		argOpen := i + len(marker) - 1
		argClose, err := s.close(argOpen)
		if err != nil {
			return nil, fmt.Errorf("arg.cpp:%d: %w", line, err)
		}
		params := s.splitTop(argOpen+1, argClose)
		o := cppOption{line: line, examples: []string{"LLAMA_EXAMPLE_COMMON"}}
		var ok bool
		if o.args, ok = stringList(params[0]); !ok || len(o.args) == 0 {
			return nil, fmt.Errorf("arg.cpp:%d: first argument of common_arg is not a list of names: %s", line, params[0])
		}
		if m := removedRE.FindStringSubmatch(params[len(params)-1]); m != nil {
			o.removed = m[1]
		}
		switch len(params) {
		case 3: // names, help, handler
		case 4: // names, value hint, help, handler | names, negative names, help, handler
			if neg, isList := stringList(params[1]); isList {
				o.neg = neg
			} else {
				o.values = 1
			}
		case 5: // names, hint, hint 2, help, handler
			o.values = 2
		default:
			return nil, fmt.Errorf("arg.cpp:%d: common_arg with %d arguments", line, len(params))
		}
		// The chained setters between common_arg(...) and add_opt's ')'.
		for k := argClose + 1; k < addClose; {
			if j := s.skipLiteral(k); j != k {
				k = j
				continue
			}
			if src[k] != '.' {
				k++
				continue
			}
			nameEnd := strings.IndexByte(src[k:], '(')
			if nameEnd < 0 {
				break
			}
			name := strings.TrimSpace(src[k+1 : k+nameEnd])
			open := k + nameEnd
			end, err := s.close(open)
			if err != nil {
				return nil, fmt.Errorf("arg.cpp:%d: %w", line, err)
			}
			arg := strings.TrimSpace(src[open+1 : end])
			switch name {
			case "set_examples":
				if o.examples, err = exampleSet(src, arg); err != nil {
					return nil, fmt.Errorf("arg.cpp:%d: %w", line, err)
				}
			case "set_excludes":
				if o.excludes, err = exampleSet(src, arg); err != nil {
					return nil, fmt.Errorf("arg.cpp:%d: %w", line, err)
				}
			case "set_env":
				if len(arg) < 2 || arg[0] != '"' {
					return nil, fmt.Errorf("arg.cpp:%d: set_env(%s) is not a literal", line, arg)
				}
				o.env = strings.Trim(arg, `"`)
			case "set_sampling":
				o.sampling = true
			case "set_spec":
				o.spec = true
			case "set_preset_only":
				// not a command-line option
				o.args = nil
			default:
				return nil, fmt.Errorf("arg.cpp:%d: unknown setter .%s", line, name)
			}
			k = end + 1
		}
		if o.args != nil {
			opts = append(opts, o)
		}
		i = addClose + 1
	}
	return opts, nil
}

func serverCppOptions(t *testing.T) []cppOption {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.LlamaSrc(t), "common", "arg.cpp"))
	require.NoError(t, err)
	all, err := parseArgCpp(string(b))
	require.NoError(t, err)
	require.Greater(t, len(all), 300, "arg.cpp's options were not all found")
	var out []cppOption
	for _, o := range all {
		if o.forServer() {
			out = append(out, o)
		}
	}
	return out
}

// TestArgCppCoverage fails on any option llama-server registers (every
// spelling, negative forms included) or environment variable that the
// parser does not know, read from the pinned source's common/arg.cpp.
func TestArgCppCoverage(t *testing.T) {
	opts := serverCppOptions(t)
	require.Greater(t, len(opts), 200, "llama-server has more options than that")
	c := &config{}
	table := flagTable(c)
	names := map[string]*flagDef{}
	envs := map[string]*flagDef{}
	for i := range table {
		f := &table[i]
		for _, n := range append(append([]string{}, f.names...), f.neg...) {
			require.NotContains(t, names, n, "%s is listed twice", n)
			names[n] = f
		}
		if f.env != "" {
			envs[f.env] = f
		}
	}
	for _, o := range opts {
		for _, n := range o.args {
			f, ok := names[n]
			if !assert.True(t, ok, "arg.cpp:%d: option %s is unknown", o.line, n) {
				continue
			}
			assert.Equal(t, o.values > 0, f.arg != "", "arg.cpp:%d: %s takes %d values", o.line, n, o.values)
			assert.Equal(t, o.values == 2, f.arg2 != "", "arg.cpp:%d: %s takes %d values", o.line, n, o.values)
			assert.Equal(t, len(o.neg) > 0, len(f.neg) > 0, "arg.cpp:%d: %s has negative forms %v", o.line, n, o.neg)
			assert.Equal(t, o.env, f.env, "arg.cpp:%d: environment variable of %s", o.line, n)
		}
		for _, n := range o.neg {
			_, ok := names[n]
			assert.True(t, ok, "arg.cpp:%d: negative option %s is unknown", o.line, n)
		}
		if o.env != "" {
			assert.Contains(t, envs, o.env, "arg.cpp:%d: environment variable %s is unknown", o.line, o.env)
		}
	}
	// And nothing beyond llama-server's set, but this server's own
	// extensions, which say so in their help.
	known := map[string]bool{"--spec-adapt": true, "--no-spec-adapt": true, "--prefill-chunk": true, "--prefill-slowdown": true, "--sample-threads": true,
		"--allowed-hosts": true, "--cors-proxy-allow-private": true,
		"--max-connections": true, "--max-connections-per-client": true,
		"--tools-root": true, "--tools-allow-cwd": true, "--no-tools-allow-cwd": true, "--tools-allow-runtime": true, "--no-tools-allow-runtime": true,
		"--tools-env": true, "--no-backend-sampling": true}
	for _, o := range opts {
		for _, n := range append(append([]string{}, o.args...), o.neg...) {
			known[n] = true
		}
	}
	for n := range names {
		assert.True(t, known[n], "%s is not a llama-server option", n)
	}
}

// TestArgCppParser checks the reader of arg.cpp on the forms it meets.
func TestArgCppParser(t *testing.T) {
	src := `
static std::initializer_list<enum llama_example> some_examples = {
    LLAMA_EXAMPLE_SERVER, // trailing comment
    LLAMA_EXAMPLE_CLI,
};
void f() {
    add_opt(common_arg(
        {"-x", "--xx"}, "N",
        string_format("help with, a comma (default: %d)", 1),
        [](common_params & params, int value) { params.x = value; }
    ).set_env("LLAMA_ARG_XX"));
    add_opt(common_arg(
        // a comment with "quotes" and (parens
        {"--on"},
        {"--no-on"},
        "help",
        [](common_params & params, bool value) { params.on = value; }
    ).set_examples(some_examples).set_excludes({LLAMA_EXAMPLE_CLI}));
    // add_opt(common_arg({"--commented"}, "h", [](common_params &) {}));
    add_opt(common_arg(
        {"--two"}, "A", "B", R"(raw "help" with ) inside)",
        [](common_params & params, const std::string & a, const std::string & b) {}
    ).set_examples({LLAMA_EXAMPLE_CLI}).set_sampling());
    add_opt(common_arg({"--void"}, "h", [](common_params &) { char c = ')'; }).set_spec());
}
`
	opts, err := parseArgCpp(src)
	require.NoError(t, err)
	require.Len(t, opts, 4)
	assert.Equal(t, []string{"-x", "--xx"}, opts[0].args)
	assert.Equal(t, 1, opts[0].values)
	assert.Equal(t, "LLAMA_ARG_XX", opts[0].env)
	assert.True(t, opts[0].forServer(), "COMMON applies to the server")
	assert.Equal(t, []string{"--no-on"}, opts[1].neg)
	assert.Equal(t, []string{"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_CLI"}, opts[1].examples)
	assert.True(t, opts[1].forServer())
	assert.Equal(t, 2, opts[2].values)
	assert.True(t, opts[2].sampling)
	assert.False(t, opts[2].forServer())
	assert.True(t, opts[3].spec)
	assert.Equal(t, 0, opts[3].values)

	_, err = parseArgCpp(`add_opt(common_arg({"-x"}, "h", f).set_unknown());`)
	assert.Error(t, err, "an unknown setter is reported, not skipped")
	_, err = parseArgCpp(`add_opt(common_arg({"-x"}, "h", f).set_examples(undefined_list));`)
	assert.Error(t, err)
}
