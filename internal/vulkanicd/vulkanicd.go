// Package vulkanicd says why the Vulkan loader finds no device: no loader
// (libvulkan.so.1), no driver manifest (ICD .json) where the loader
// looks, or a driver whose library cannot load, naming the dynamic
// loader's reason (such as NVIDIA's libGLX_nvidia.so.0 needing
// libGLdispatch.so.0, from libglvnd0). The loader skips such a driver
// without a word, and ggml then lists no Vulkan device.
package vulkanicd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Loader is the Vulkan loader's file name.
const Loader = "libvulkan.so.1"

// Bounds on what is read.
const (
	maxManifests    = 64
	maxManifestSize = 1 << 20
)

// Env are the inputs of Diagnose: the environment and the dynamic
// loader.
type Env struct {
	Getenv func(string) string
	// Dlopen loads a library and says why it cannot; it need not unload
	// it.
	Dlopen func(name string) error
	Loader string // "": Loader
}

// Diagnose says why the Vulkan loader found no device; nil when the
// loader and every driver load (the drivers then saw no GPU they
// support).
func Diagnose(env Env) error {
	loader := env.Loader
	if loader == "" {
		loader = Loader
	}
	if err := env.Dlopen(loader); err != nil {
		return fmt.Errorf("no Vulkan loader: %s cannot be loaded (%v); install it (Debian: libvulkan1)", loader, err)
	}
	files, dirs := Manifests(env.Getenv)
	if len(files) == 0 {
		return fmt.Errorf("no Vulkan driver: no ICD manifest (.json) in %s; install the GPU's Vulkan driver (NVIDIA: the driver's Vulkan ICD, nvidia_icd.json)", strings.Join(dirs, ", "))
	}
	var errs []error
	for _, f := range files {
		lib, err := manifestLibrary(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("the Vulkan driver manifest %s: %w", f, err))
			continue
		}
		if err := env.Dlopen(lib); err != nil {
			errs = append(errs, fmt.Errorf("the Vulkan driver %s cannot load %s: %v%s", f, lib, err, hint(err.Error())))
		}
	}
	return errors.Join(errs...)
}

// hint names the Debian package of a dependency NVIDIA's driver often
// misses in containers.
func hint(dlerr string) string {
	for _, h := range []struct{ lib, pkg string }{
		{"libGLdispatch.so", "libglvnd0"}, {"libGLX.so", "libglx0"}, {"libEGL.so", "libegl1"}, {"libGL.so", "libgl1"},
		{"libX11", "libx11-6"}, {"libxcb", "libxcb1"},
	} {
		if strings.Contains(dlerr, h.lib) {
			return " (Debian: install " + h.pkg + ")"
		}
	}
	return ""
}

// Manifests lists the driver manifests the loader reads, as it finds
// them: the files and folders of VK_DRIVER_FILES (or the older
// VK_ICD_FILENAMES) when set, else the standard folders; then
// VK_ADD_DRIVER_FILES. dirs are the places looked in.
func Manifests(getenv func(string) string) (files, dirs []string) {
	var places []string
	if v := getenv("VK_DRIVER_FILES"); v != "" {
		places = filepath.SplitList(v)
	} else if v := getenv("VK_ICD_FILENAMES"); v != "" {
		places = filepath.SplitList(v)
	} else {
		places = standardDirs(getenv)
	}
	if v := getenv("VK_ADD_DRIVER_FILES"); v != "" {
		places = append(places, filepath.SplitList(v)...)
	}
	for _, p := range places {
		if p == "" || slices.Contains(dirs, p) {
			continue
		}
		dirs = append(dirs, p)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") && len(files) < maxManifests {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	return files[:min(len(files), maxManifests)], dirs
}

// standardDirs are the loader's folders on Linux: vulkan/icd.d under
// XDG_CONFIG_HOME, XDG_CONFIG_DIRS, /etc, XDG_DATA_HOME and
// XDG_DATA_DIRS.
func standardDirs(getenv func(string) string) []string {
	home := getenv("HOME")
	configHome, dataHome := getenv("XDG_CONFIG_HOME"), getenv("XDG_DATA_HOME")
	if configHome == "" && home != "" {
		configHome = filepath.Join(home, ".config")
	}
	if dataHome == "" && home != "" {
		dataHome = filepath.Join(home, ".local", "share")
	}
	configDirs, dataDirs := getenv("XDG_CONFIG_DIRS"), getenv("XDG_DATA_DIRS")
	if configDirs == "" {
		configDirs = "/etc/xdg"
	}
	if dataDirs == "" {
		dataDirs = "/usr/local/share:/usr/share"
	}
	var roots []string
	if configHome != "" {
		roots = append(roots, configHome)
	}
	roots = append(roots, filepath.SplitList(configDirs)...)
	roots = append(roots, "/etc")
	if dataHome != "" {
		roots = append(roots, dataHome)
	}
	roots = append(roots, filepath.SplitList(dataDirs)...)
	var out []string
	for _, r := range roots {
		if r != "" {
			out = append(out, filepath.Join(r, "vulkan", "icd.d"))
		}
	}
	return out
}

// manifestLibrary reads a manifest's library_path: a bare file name is
// found by the dynamic loader, a relative path is relative to the
// manifest.
func manifestLibrary(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxManifestSize {
		return "", fmt.Errorf("manifest over %d bytes", maxManifestSize)
	}
	var m struct {
		ICD struct {
			LibraryPath string `json:"library_path"`
		} `json:"ICD"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("not a manifest: %v", err)
	}
	lib := m.ICD.LibraryPath
	switch {
	case lib == "" || strings.IndexByte(lib, 0) >= 0:
		return "", fmt.Errorf("no ICD.library_path")
	case strings.Contains(lib, "/") && !filepath.IsAbs(lib):
		lib = filepath.Join(filepath.Dir(path), lib)
	}
	return lib, nil
}
