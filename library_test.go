package llama_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestInitLibrary: the SDK finds the library and installs it only when
// asked. Each case runs in a child process (the library loads once per
// process) with its own cache folder and no $LLAMA_LIB_DIR.
func TestInitLibrary(t *testing.T) {
	// The child is given the model's path: testenv's models folder would
	// install the library, which the child must not find.
	const childEnv, childModel = "LLAMA_TEST_INIT_CHILD", "LLAMA_TEST_INIT_MODEL"
	cases := []struct {
		name string
		// cache fills the child's cache folder ($GO_LLAMA_LIB_CACHE).
		cache func(t *testing.T, cache string)
		// child runs in the child process.
		child func(t *testing.T)
	}{
		{"LoadModel with no library is an error naming the install command", nil, func(t *testing.T) {
			_, err := llama.LoadModel(context.Background(), os.Getenv(childModel), llama.ModelOptions{})
			require.ErrorIs(t, err, llama.ErrLibrary)
			var le *llama.Error
			require.True(t, errors.As(err, &le))
			assert.Equal(t, llama.CodeLibrary, le.Code)
			assert.Contains(t, err.Error(), "`"+lib.InstallCommand+"`")
			assert.Contains(t, err.Error(), "llama.LibraryOptions{Install: true}")
			_, ok := llama.LibraryDir()
			assert.False(t, ok)
		}},
		{"Install never installs into an explicit folder", nil, func(t *testing.T) {
			dir := t.TempDir()
			err := llama.Init(llama.LibraryOptions{Dir: dir, Install: true, Flavor: lib.Vulkan})
			require.ErrorIs(t, err, llama.ErrLibrary)
			assert.Contains(t, err.Error(), "`"+lib.InstallCommand+" -flavor vulkan -dir "+dir+"`")
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, left)
		}},
		{"Install finds an installed library without installing", func(t *testing.T, cache string) {
			// The library this process uses, linked into the child's cache
			// folder, so that the test never downloads.
			found, err := lib.Find("", lib.CPU)
			require.NoError(t, err, "install the library: %s", lib.InstallCommand)
			t.Setenv(lib.EnvCache, cache)
			t.Setenv(lib.EnvDir, "")
			dst, err := lib.DefaultDir(lib.CPU)
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(dst, 0o755))
			ents, err := os.ReadDir(found)
			require.NoError(t, err)
			for _, e := range ents {
				require.NoError(t, os.Symlink(filepath.Join(found, e.Name()), filepath.Join(dst, e.Name())))
			}
		}, func(t *testing.T) {
			require.NoError(t, llama.Init(llama.LibraryOptions{Install: true}))
			dir, ok := llama.LibraryDir()
			require.True(t, ok)
			want, err := lib.DefaultDir(lib.CPU)
			require.NoError(t, err)
			assert.Equal(t, want, dir)
			_, err = llama.LoadModel(context.Background(), os.Getenv(childModel), llama.ModelOptions{})
			assert.NoError(t, err)
		}},
	}
	if name := os.Getenv(childEnv); name != "" {
		for _, tc := range cases {
			if tc.name == name {
				tc.child(t)
				return
			}
		}
		t.Fatalf("no case %q", name)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			models := testenv.ModelsDir(t)
			if tc.cache != nil {
				tc.cache(t, cache)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestInitLibrary$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+tc.name, lib.EnvCache+"="+cache, lib.EnvDir+"=",
				childModel+"="+filepath.Join(models, "stories260K.gguf"))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			if tc.cache == nil {
				left, err := os.ReadDir(cache)
				require.NoError(t, err)
				assert.Empty(t, left, "nothing installed")
			}
		})
	}
}
