// Package gguftest writes the GGUF files tests need beside the shared test
// models (it imports testenv, which package gguf's own tests also use, so
// it cannot live in gguf).
package gguftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// StoriesLoRA writes a random LoRA adapter for stories260K's attention q
// and v weights into a temporary folder and returns its path.
func StoriesLoRA(t testing.TB) string {
	t.Helper()
	base, err := gguf.Open(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, base, nil, 4, 4, 1, 0.5))
	return path
}

// Corruption is one damaged copy of a real model: the first n bytes of it
// (truncate) or the whole file with bytes overwritten (patch).
type Corruption struct {
	Name     string
	Truncate int64 // keep this many bytes (-1: all)
	Patch    map[int64][]byte
}

// Corruptions derives damaged copies of the GGUF at path: truncations
// spread over the header, the metadata, the tensor descriptors and the
// tensor data, and byte changes in the header and the metadata that make
// the file invalid (wrong magic or version, impossible counts and lengths,
// unknown value types, a renamed architecture key).
func Corruptions(t testing.TB, path string) []Corruption {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	size := st.Size()
	head := make([]byte, f.DataOffset)
	fh, err := os.Open(path)
	require.NoError(t, err)
	_, err = io.ReadFull(fh, head)
	fh.Close()
	require.NoError(t, err)

	// Where each section starts: the metadata right after the 24-byte
	// header, the tensor descriptors at the first tensor's name.
	const kvStart = 24
	first := f.Tensors[0].Name
	var prefix bytes.Buffer
	_ = binary.Write(&prefix, binary.LittleEndian, uint64(len(first)))
	prefix.WriteString(first)
	tiStart := int64(bytes.Index(head, prefix.Bytes()))
	require.Greater(t, tiStart, int64(kvStart))
	// keyAt is where a metadata key's length prefix starts.
	keyAt := func(key string) int64 {
		var b bytes.Buffer
		_ = binary.Write(&b, binary.LittleEndian, uint64(len(key)))
		b.WriteString(key)
		i := bytes.Index(head[:tiStart], b.Bytes())
		require.GreaterOrEqual(t, i, 0, key)
		return int64(i)
	}
	arch := keyAt("general.architecture")
	tokens := keyAt("tokenizer.ggml.tokens")
	tokTypeAt := tokens + 8 + int64(len("tokenizer.ggml.tokens")) // the value's type
	blocks := keyAt("gemma3.block_count")
	blocksType := blocks + 8 + int64(len("gemma3.block_count"))

	var cases []Corruption
	trunc := func(name string, n int64) {
		cases = append(cases, Corruption{Name: fmt.Sprintf("truncated at %d (%s)", n, name), Truncate: n})
	}
	for _, n := range []int64{0, 3, 4, 7, 16, 23} {
		trunc("header", n)
	}
	kvLen := tiStart - kvStart
	for _, frac := range []int64{1, 10, 30, 50, 70, 90, 99} {
		trunc("metadata", kvStart+kvLen*frac/100)
	}
	trunc("tensor descriptors", tiStart+5)
	trunc("tensor descriptors", tiStart+(f.DataOffset-tiStart)/2)
	trunc("tensor descriptors", f.DataOffset-1)
	trunc("tensor data", f.DataOffset)
	trunc("tensor data", f.DataOffset+4096)
	trunc("tensor data", f.DataOffset+(size-f.DataOffset)/2)
	trunc("tensor data", size-1)

	patch := func(name string, at int64, b ...byte) {
		cases = append(cases, Corruption{Name: name, Truncate: -1, Patch: map[int64][]byte{at: b}})
	}
	patch("magic", 0, 'X')
	patch("version 0", 4, 0, 0, 0, 0)
	patch("version 99", 4, 99)
	patch("tensor count 2^56", 15, 1)
	patch("tensor count 0", 8, 0, 0, 0, 0, 0, 0, 0, 0)
	patch("metadata count 2^56", 23, 1)
	patch("metadata count doubled", 16, byte(len(f.KV)*2))
	patch("first key length 2^56", kvStart+7, 1)
	patch("first key length 0", kvStart, 0, 0, 0, 0, 0, 0, 0, 0)
	patch("architecture key renamed", arch+8, 'G')
	patch("architecture value type unknown", arch+8+int64(len("general.architecture")), 0xee)
	patch("architecture value length 2^56", arch+8+int64(len("general.architecture"))+4+7, 1)
	patch("architecture value says llama", arch+8+int64(len("general.architecture"))+4+8, 'g', 'p', 't', '9', '9', 'x')
	patch("block count type uint64", blocksType, 10)
	patch("block count 2^30", blocksType+4+3, 0x40)
	patch("vocabulary element type unknown", tokTypeAt+4, 0xee)
	patch("vocabulary element type uint8", tokTypeAt+4, 0)
	patch("vocabulary length 2^40", tokTypeAt+8+5, 1)
	patch("vocabulary length 3", tokTypeAt+8, 3, 0, 0, 0)
	return cases
}

// WriteCorrupt writes c's damaged copy of src into dir, as name.
func WriteCorrupt(t testing.TB, src, dir, name string, c Corruption) string {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	p := filepath.Join(dir, name)
	out, err := os.Create(p)
	require.NoError(t, err)
	var r io.Reader = in
	if c.Truncate >= 0 {
		r = io.LimitReader(in, c.Truncate)
	}
	_, err = io.Copy(out, r)
	require.NoError(t, err)
	for at, b := range c.Patch {
		_, err := out.WriteAt(b, at)
		require.NoError(t, err)
	}
	require.NoError(t, out.Close())
	return p
}
