package server

// Router mode's catalogue: the models of Options.ModelsDir (GGUF files and
// folders) and Options.ModelsPreset (an INI file of per-model options),
// read by New and again by GET /models?reload=1.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/hub"
)

// listModels fills the router's model list from ModelsDir and ModelsPreset.
func (s *Server) listModels(now int64) error {
	entries, err := s.scanModels(now)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s.addEntry(e)
	}
	return nil
}

// scanModels reads ModelsDir and ModelsPreset into new entries, in list
// order (a preset section overrides the folder's model of that name).
func (s *Server) scanModels(now int64) ([]*modelEntry, error) {
	o := s.opts
	var out []*modelEntry
	byName := map[string]*modelEntry{}
	add := func(e *modelEntry) {
		out = append(out, e)
		byName[e.name] = e
	}
	if o.ModelsDir != "" {
		found, err := scanModelsDir(o.ModelsDir)
		if err != nil {
			return nil, fmt.Errorf("server: models dir: %w", err)
		}
		for _, f := range found {
			add(&modelEntry{name: f[0], path: f[1], opts: routerOptions(o), created: now})
		}
	}
	if o.ModelsPreset != "" {
		secs, err := readPreset(o.ModelsPreset)
		if err != nil {
			return nil, fmt.Errorf("server: models preset: %w", err)
		}
		global := secs["*"]
		names := make([]string, 0, len(secs))
		for n := range secs {
			if n != "*" && n != "" {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			kv := map[string]string{}
			for k, v := range global {
				kv[k] = v
			}
			for k, v := range secs[name] {
				kv[k] = v
			}
			e, exists := byName[name]
			if !exists {
				path := firstOf(kv, "model", "m")
				hf := firstOf(kv, "hf-repo", "hf", "hfr", "hf_repo")
				if path == "" && hf == "" {
					return nil, fmt.Errorf("server: models preset: [%s] has no model path or hf-repo", name)
				}
				e = &modelEntry{name: name, path: path, opts: routerOptions(o), created: now}
				if path == "" { // pulled from Hugging Face at its first load
					e.hfRepo = hf
					e.hf = &hub.Options{File: firstOf(kv, "hf-file", "hff"), Token: firstOf(kv, "hf-token", "hft")}
				}
				add(e)
			}
			if err := applyPreset(e, kv); err != nil {
				return nil, fmt.Errorf("server: models preset [%s]: %w", name, err)
			}
		}
	}
	return out, nil
}

// firstOf returns the value of the first of keys that kv has.
func firstOf(kv map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := kv[k]; v != "" {
			return v
		}
	}
	return ""
}

// reloadModels reads ModelsDir and ModelsPreset again (GET
// /models?reload=1): new models are added, models no longer listed are
// dropped unless loaded or loading (they go once unloaded, on a later
// reload), and unloaded models take their new settings.
func (s *Server) reloadModels() error {
	entries, err := s.scanModels(time.Now().Unix())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := map[string]*modelEntry{}
	for _, e := range entries {
		fresh[e.name] = e
	}
	kept := s.models[:0]
	for _, e := range s.models {
		n, listed := fresh[e.name]
		idle := e.inst == nil && e.state == stateUnloaded
		switch {
		case !listed && idle:
			delete(s.byName, e.name)
			continue
		case listed && idle:
			e.path, e.hfRepo, e.hf, e.opts, e.loadOnStartup = n.path, n.hfRepo, n.hf, n.opts, n.loadOnStartup
		}
		kept = append(kept, e)
	}
	s.models = kept
	for _, e := range entries {
		if _, ok := s.byName[e.name]; !ok {
			s.addEntry(e)
			s.notifyLocked(e, nil)
		}
	}
	return nil
}

// routerOptions are the per-model options inherited from the router's.
func routerOptions(o Options) Options {
	o.ModelsDir, o.ModelsPreset = "", ""
	return o
}

// scanModelsDir lists (name, path) of the models in dir.
func scanModelsDir(dir string) ([][2]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, de := range ents {
		name := de.Name()
		full := filepath.Join(dir, name)
		st, err := os.Stat(full) // follows symlinks
		if err != nil {
			continue
		}
		if st.IsDir() {
			sub, err := os.ReadDir(full)
			if err != nil {
				continue
			}
			var pick string
			for _, f := range sub {
				n := f.Name()
				if !strings.HasSuffix(strings.ToLower(n), ".gguf") || strings.HasPrefix(strings.ToLower(n), "mmproj") {
					continue
				}
				if strings.Contains(n, "-00001-of-") || pick == "" {
					pick = n
				}
			}
			if pick != "" {
				out = append(out, [2]string{name, filepath.Join(full, pick)})
			}
			continue
		}
		if strings.HasSuffix(strings.ToLower(name), ".gguf") && !strings.HasPrefix(strings.ToLower(name), "mmproj") {
			out = append(out, [2]string{name[:len(name)-len(".gguf")], full})
		}
	}
	return out, nil
}

// readPreset reads an INI file into sections of keys (lower-cased, without
// leading dashes).
func readPreset(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	secs := map[string]map[string]string{}
	cur := ""
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == ';' || t[0] == '#' {
			continue
		}
		if t[0] == '[' {
			if !strings.HasSuffix(t, "]") {
				return nil, fmt.Errorf("line %d: bad section header", line)
			}
			cur = strings.TrimSpace(t[1 : len(t)-1])
			if secs[cur] == nil {
				secs[cur] = map[string]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: expected key = value", line)
		}
		k = strings.ToLower(strings.TrimLeft(strings.TrimSpace(k), "-"))
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if secs[cur] == nil {
			secs[cur] = map[string]string{}
		}
		secs[cur][k] = v
	}
	return secs, sc.Err()
}

// applyPreset applies a preset section's keys to a model's options.
func applyPreset(e *modelEntry, kv map[string]string) error {
	atoi := func(k, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", k, v)
		}
		return n, nil
	}
	for k, v := range kv {
		var err error
		switch strings.ReplaceAll(k, "_", "-") {
		case "model", "m", "version", "hf-repo", "hf", "hfr", "hf-file", "hff", "hf-token", "hft":
		case "chat-template":
			if err = templates(e.opts.Jinja).Check(v); err == nil {
				e.opts.ChatTemplate = v
			}
		case "chat-template-file":
			e.opts.ChatTemplateFile = v
		case "c", "ctx-size":
			e.opts.Engine.Context.ContextSize, err = atoi(k, v)
		case "np", "parallel":
			e.opts.Engine.Parallel, err = atoi(k, v)
		case "n", "n-predict":
			e.opts.NPredict, err = atoi(k, v)
		case "t", "threads":
			e.opts.Engine.Context.Threads, err = atoi(k, v)
		case "ngl", "n-gpu-layers", "gpu-layers":
			e.opts.ModelOptions.GPULayers, err = atoi(k, v)
		case "sleep-idle-seconds":
			e.opts.SleepIdleSeconds, err = atoi(k, v)
		case "embedding", "embeddings":
			e.opts.Engine.Embedding = v == "true" || v == "1"
		case "load-on-startup":
			e.loadOnStartup = v == "true" || v == "1"
		}
		if err != nil {
			return err
		}
	}
	return nil
}
