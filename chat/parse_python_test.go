package chat

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPyKwargsMatchesFormerParsers holds the merged keyword-argument parser
// to the two it replaces, at every position of the parse test cases, of the
// fuzz corpus and of random inputs built from the tokens that matter to
// them: the same arguments (where the former parser gave them), end and
// status.
func TestPyKwargsMatchesFormerParsers(t *testing.T) {
	var inputs []string
	for _, c := range parseCases {
		inputs = append(inputs, c.in)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if q, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					inputs = append(inputs, s)
				}
			}
		}
	}
	pieces := []string{"a", "k1", "_x", "0", "9", "=", " = ", ":", ",", ", ", ")", "(", "\"", "'", "\\", " ", "\n",
		"True", "False", "None", "true", "null", "1", "-2.5e3", "[", "]", "{", "}", "x y", "\\n", "\\x41", "\\u00e9",
		"\\U0001F600", "\\'", "\\\"", "é", "\xff", `"s"`, `'t'`, "{'a': 1}", "[1, 'b']", "(1,)", "k=1", "k='v'"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	n := 0
	for _, s := range inputs {
		for i := 0; i <= len(s); i++ {
			wantArgs, wantEnd, wantSt := refLlamaKwargs(s, i)
			args, end, st := pyKwargs(s, i, true)
			if st != scanOK {
				args = "" // the former parser gave no arguments on failure
			}
			require.Equal(t, []any{wantArgs, wantEnd, wantSt}, []any{args, end, st}, "loose %q at %d", s, i)

			var tc ToolCall
			wantEnd, wantSt = refLFM2Kwargs(&tc, s, i)
			args, end, st = pyKwargs(s, i, false)
			require.Equal(t, []any{tc.Arguments, wantEnd, wantSt}, []any{args, end, st}, "strict %q at %d", s, i)
			n++
		}
	}
	t.Logf("%d inputs, %d positions: same results", len(inputs), n)
}

// refLlamaKwargs is the former pythonKwargs (Llama 3.x built-in tools): it reads k=v, ... ) into a JSON object.
func refLlamaKwargs(s string, i int) (string, int, scanStatus) {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return "", len(s), scanEOF
		}
		if s[i] == ')' {
			b.WriteByte('}')
			return b.String(), i + 1, scanOK
		}
		if n > 0 {
			if s[i] != ',' {
				return "", i, scanInvalid
			}
			i = skipSpace(s, i+1)
		}
		k := i
		for k < len(s) && (s[k] == '_' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= '0' && s[k] <= '9') {
			k++
		}
		if k >= len(s) {
			return "", len(s), scanEOF
		}
		if k == i || s[k] != '=' && s[k] != ':' {
			return "", k, scanInvalid
		}
		key := s[i:k]
		i = skipSpace(s, k+1)
		if i >= len(s) {
			return "", len(s), scanEOF
		}
		var val string
		switch s[i] {
		case '"':
			e, st := scanJSONString(s, i)
			if st != scanOK {
				return "", e, st
			}
			val, i = s[i:e], e
		case '\'':
			var sb strings.Builder
			e := i + 1
			for ; e < len(s) && s[e] != '\''; e++ {
				if s[e] == '\\' && e+1 < len(s) {
					e++
				}
				sb.WriteByte(s[e])
			}
			if e >= len(s) {
				return "", len(s), scanEOF
			}
			val, i = jsonString(sb.String()), e+1
		default:
			e := i
			for e < len(s) && s[e] != ',' && s[e] != ')' {
				e++
			}
			if e >= len(s) {
				return "", len(s), scanEOF
			}
			raw := strings.TrimSpace(s[i:e])
			switch raw {
			case "True":
				raw = "true"
			case "False":
				raw = "false"
			case "None":
				raw = "null"
			}
			if !isJSONValue(raw) {
				raw = jsonString(raw)
			}
			val, i = raw, e
		}
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(jsonString(key) + ": " + val)
		n++
	}
}

// refLFM2Kwargs is the former pyKwargs (LFM2): it reads k=v, ... ) at s[i] into tc.Arguments as a JSON object. On
// scanEOF and scanInvalid the arguments hold the parameters read so far, as
// an open object.
func refLFM2Kwargs(tc *ToolCall, s string, i int) (int, scanStatus) {
	var args xmlArgs
	for {
		tc.Arguments = args.open()
		i = skipSpace(s, i)
		if i >= len(s) {
			return len(s), scanEOF
		}
		if s[i] == ')' {
			tc.Arguments = args.closed()
			return i + 1, scanOK
		}
		if args.n > 0 {
			if s[i] != ',' {
				return i, scanInvalid
			}
			i = skipSpace(s, i+1)
			if i < len(s) && s[i] == ')' {
				continue // trailing comma
			}
		}
		k := i
		for k < len(s) && isIdentByte(s[k], k > i) {
			k++
		}
		if k >= len(s) {
			return len(s), scanEOF
		}
		if k == i {
			return k, scanInvalid
		}
		key := s[i:k]
		k = skipSpace(s, k)
		if k >= len(s) {
			return len(s), scanEOF
		}
		if s[k] != '=' {
			return k, scanInvalid
		}
		v, e, st := pyValue(s, skipSpace(s, k+1))
		if st != scanOK {
			return e, st
		}
		args.addValue(key, v)
		i = e
	}
}
