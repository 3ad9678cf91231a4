package mtmdcapi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// layouts pairs each Go mirror with its C struct and the C names of its
// fields, in order.
var layouts = []struct {
	c      string
	goType any
	fields []string
}{
	{"struct mtmd_context_params", ContextParams{}, []string{"use_gpu", "device", "print_timings", "n_threads",
		"image_marker", "media_marker", "flash_attn_type", "warmup", "image_min_tokens", "image_max_tokens",
		"cb_eval", "cb_eval_user_data", "batch_max_tokens", "progress_callback", "progress_callback_user_data"}},
	{"struct mtmd_input_text", InputText{}, []string{"text", "text_len", "add_special", "parse_special"}},
	{"struct mtmd_helper_video_init_params", VideoInitParams{}, []string{"fps_target", "ffmpeg_bin_dir",
		"timestamp_interval_ms"}},
	{"struct mtmd_helper_init_opt", HelperInitOpt{}, []string{"video_params"}},
	{"struct mtmd_helper_bitmap_wrapper", BitmapWrapper{}, []string{"bitmap", "video_ctx"}},
}

// TestStructLayout compiles a probe against the pinned mtmd.h and
// mtmd-helper.h and holds the size, alignment and every field offset and
// size of each Go mirror against what the C compiler says.
func TestStructLayout(t *testing.T) {
	cc := testenv.CC(t)
	src := testenv.LlamaSrc(t)
	var prog bytes.Buffer
	prog.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"mtmd.h\"\n#include \"mtmd-helper.h\"\nint main(void){\n")
	for _, s := range layouts {
		fmt.Fprintf(&prog, "printf(\"%s|sizeof|%%zu\\n\", sizeof(%s));\n", s.c, s.c)
		fmt.Fprintf(&prog, "printf(\"%s|alignof|%%zu\\n\", _Alignof(%s));\n", s.c, s.c)
		for _, f := range s.fields {
			fmt.Fprintf(&prog, "printf(\"%s|%s|%%zu\\n\", offsetof(%s, %s));\n", s.c, f, s.c, f)
			fmt.Fprintf(&prog, "printf(\"%s|%s.size|%%zu\\n\", sizeof(((%s*)0)->%s));\n", s.c, f, s.c, f)
		}
	}
	prog.WriteString("return 0;}\n")
	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	require.NoError(t, os.WriteFile(cfile, prog.Bytes(), 0o644))
	exe := filepath.Join(dir, "layout")
	out, err := exec.Command(cc, "-std=c11", "-I", filepath.Join(src, "tools", "mtmd"), "-I", filepath.Join(src, "include"),
		"-I", filepath.Join(src, "ggml", "include"), "-o", exe, cfile).CombinedOutput()
	require.NoError(t, err, "compiling the layout probe: %s", out)
	out, err = exec.Command(exe).Output()
	require.NoError(t, err)
	want := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		require.Len(t, parts, 3)
		n, err := strconv.ParseUint(parts[2], 10, 64)
		require.NoError(t, err)
		want[parts[0]+"|"+parts[1]] = n
	}
	for _, s := range layouts {
		t.Run(s.c, func(t *testing.T) {
			typ := reflect.TypeOf(s.goType)
			require.Equal(t, want[s.c+"|sizeof"], uint64(typ.Size()), "sizeof")
			require.Equal(t, want[s.c+"|alignof"], uint64(typ.Align()), "alignof")
			var goFields []reflect.StructField
			for i := range typ.NumField() {
				if f := typ.Field(i); f.Name != "_" {
					goFields = append(goFields, f)
				}
			}
			require.Len(t, goFields, len(s.fields), "field count")
			for i, f := range goFields {
				c := s.fields[i]
				require.Equal(t, want[s.c+"|"+c], uint64(f.Offset), "offset of %s (Go %s)", c, f.Name)
				require.Equal(t, want[s.c+"|"+c+".size"], uint64(f.Type.Size()), "size of %s (Go %s)", c, f.Name)
			}
		})
	}
}
