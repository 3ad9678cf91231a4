package vulkanicd

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func dlopen(name string) error {
	runtime.LockOSThread() // dlerror is per thread
	defer runtime.UnlockOSThread()
	_, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	return err
}

// cc builds a shared library from C source.
func cc(t *testing.T, dir, out, src string, args ...string) string {
	t.Helper()
	c := os.Getenv("CC")
	if c == "" {
		c = "cc"
	}
	s := filepath.Join(dir, out+".c")
	require.NoError(t, os.WriteFile(s, []byte(src), 0o644))
	p := filepath.Join(dir, out)
	b, err := exec.Command(c, append([]string{"-shared", "-fPIC", "-o", p, s}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	return p
}

func writeManifest(t *testing.T, dir, name, lib string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(`{"file_format_version": "1.0.1", "ICD": {"library_path": "`+lib+`", "api_version": "1.4.312"}}`), 0o644))
	return p
}

// TestDiagnose builds what a container without libglvnd0 has: a driver
// manifest whose library needs libGLdispatch.so.0, which is missing.
func TestDiagnose(t *testing.T) {
	build := t.TempDir()
	// A dependency to link against, then removed (named so that no
	// system has it: libGLdispatch.so.0 itself may be installed here).
	dep := cc(t, build, "libgodep_missing.so.0", "int glvnd_stub(void) { return 1; }", "-Wl,-soname,libgodep_missing.so.0")
	icds := t.TempDir()
	cc(t, icds, "libnvidia_stub_icd.so", "int glvnd_stub(void); int vk_icdGetInstanceProcAddr(void) { return glvnd_stub(); }", dep)
	cc(t, icds, "libgood_icd.so", "int vk_icdGetInstanceProcAddr(void) { return 0; }")
	require.NoError(t, os.Remove(dep))

	broken := t.TempDir()
	writeManifest(t, broken, "nvidia_icd.json", filepath.Join(icds, "libnvidia_stub_icd.so"))
	good := t.TempDir()
	writeManifest(t, good, "good_icd.json", "./libgood_icd.so")
	require.NoError(t, os.Rename(filepath.Join(icds, "libgood_icd.so"), filepath.Join(good, "libgood_icd.so")))
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "x.json"), []byte("{not json"), 0o644))
	empty := t.TempDir()

	tests := []struct {
		name   string
		env    map[string]string
		loader string
		want   []string // "" for nil
	}{
		{"no loader", nil, "libvulkan-not-here.so.1", []string{"no Vulkan loader: libvulkan-not-here.so.1 cannot be loaded", "install it (Debian: libvulkan1)"}},
		{"no manifest", map[string]string{"VK_DRIVER_FILES": empty}, "", []string{"no Vulkan driver: no ICD manifest (.json) in " + empty}},
		{"the driver's dependency is missing", map[string]string{"VK_DRIVER_FILES": broken}, "",
			[]string{"cannot load " + filepath.Join(icds, "libnvidia_stub_icd.so"), "libgodep_missing.so.0: cannot open shared object file"}},
		{"the older variable, naming the file", map[string]string{"VK_ICD_FILENAMES": filepath.Join(broken, "nvidia_icd.json")}, "",
			[]string{"libgodep_missing.so.0"}},
		{"a driver that loads, by a path relative to its manifest", map[string]string{"VK_DRIVER_FILES": good}, "", nil},
		{"one good, one added that is not a manifest", map[string]string{"VK_DRIVER_FILES": good, "VK_ADD_DRIVER_FILES": bad}, "",
			[]string{"not a manifest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loader := tt.loader
			if loader == "" {
				// The real loader where libvulkan1 is installed; past
				// this check it is not used, so any library that loads
				// stands for it elsewhere.
				loader = Loader
				if dlopen(Loader) != nil {
					loader = "libc.so.6"
				}
			}
			err := Diagnose(Env{Getenv: func(k string) string { return tt.env[k] }, Dlopen: dlopen, Loader: loader})
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestManifestsStandardDirs(t *testing.T) {
	home := t.TempDir()
	d := filepath.Join(home, ".local", "share", "vulkan", "icd.d")
	require.NoError(t, os.MkdirAll(d, 0o755))
	m := writeManifest(t, d, "a.json", "liba.so")
	require.NoError(t, os.WriteFile(filepath.Join(d, "README"), nil, 0o644))
	sys := t.TempDir()
	env := map[string]string{"HOME": home, "XDG_DATA_DIRS": sys}
	files, dirs := Manifests(func(k string) string { return env[k] })
	assert.Contains(t, files, m)
	assert.Equal(t, []string{filepath.Join(home, ".config/vulkan/icd.d"), "/etc/xdg/vulkan/icd.d", "/etc/vulkan/icd.d", d,
		filepath.Join(sys, "vulkan/icd.d")}, dirs)
}

func TestHint(t *testing.T) {
	for dlerr, want := range map[string]string{
		"libGLdispatch.so.0: cannot open shared object file: No such file or directory": " (Debian: install libglvnd0)",
		"libGLX.so.0: cannot open shared object file":                                   " (Debian: install libglx0)",
		"libfoo.so.1: cannot open shared object file":                                   "",
	} {
		assert.Equal(t, want, hint(dlerr), dlerr)
	}
}
