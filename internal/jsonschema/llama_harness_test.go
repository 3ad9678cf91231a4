package jsonschema

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLlamaHarness runs testdata/cases.json through llama.cpp's own grammar
// engine when LLAMA_HARNESS names a binary built from testdata/llama_harness.cpp:
//
//	S=<llama.cpp source>; L=<dir with libllama/libggml .so files>
//	g++ -std=c++17 -I$S/src -I$S/include -I$S/ggml/include testdata/llama_harness.cpp \
//	    -o harness $L/libllama*.so $L/libggml*.so -Wl,-rpath,$L
//
// The harness reads a grammar file and hex-encoded inputs (one per line) and
// prints 1 (accepted), 0 (rejected) or PARSEFAIL per input.
func TestLlamaHarness(t *testing.T) {
	h := os.Getenv("LLAMA_HARNESS")
	if h == "" {
		t.Skip()
	}
	dir := t.TempDir()
	for _, tc := range loadCases(t) {
		g, err := ToGBNF(tc.Schema)
		if err != nil {
			t.Fatal(err)
		}
		gp := filepath.Join(dir, "g.gbnf")
		os.WriteFile(gp, []byte(g), 0o644)
		var lines []string
		for _, v := range append(append([]string{}, tc.Valid...), tc.Invalid...) {
			lines = append(lines, hex.EncodeToString([]byte(v)))
		}
		ip := filepath.Join(dir, "in.txt")
		os.WriteFile(ip, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		out, err := exec.Command(h, gp, ip).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v %s", tc.Name, err, out)
		}
		res := strings.Fields(string(out))
		var got []string
		for _, r := range res {
			if r == "0" || r == "1" || r == "PARSEFAIL" {
				got = append(got, r)
			}
		}
		if len(got) > 0 && got[0] == "PARSEFAIL" {
			t.Errorf("%s: llama.cpp failed to parse grammar:\n%s\n%s", tc.Name, out, g)
			continue
		}
		for i, v := range tc.Valid {
			if got[i] != "1" {
				t.Errorf("%s: llama rejects valid %s", tc.Name, v)
			}
		}
		for i, v := range tc.Invalid {
			if got[len(tc.Valid)+i] != "0" {
				t.Errorf("%s: llama accepts invalid %s", tc.Name, v)
			}
		}
	}
}
