package router

// Router mode's catalogue: the models of Config.Dir (GGUF files and
// folders) and Config.Preset (an INI file of per-model options), read by
// New and again by Reload (GET /models?reload=1).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/chat"
	"github.com/x/llama/hub"
)

// Settings are a model's own options, from its preset section: each that
// is set overrides the server's option of that name (nil: the server's).
type Settings struct {
	ChatTemplate     *string // chat-template
	ChatTemplateFile *string // chat-template-file
	ContextSize      *int    // c, ctx-size
	Parallel         *int    // np, parallel
	NPredict         *int    // n, n-predict
	Threads          *int    // t, threads
	GPULayers        *int    // ngl, n-gpu-layers, gpu-layers
	SleepIdleSeconds *int    // sleep-idle-seconds
	Embedding        *bool   // embedding, embeddings
}

// scan reads Config.Dir and Config.Preset into new models, in list
// order (a preset section overrides the folder's model of that name).
func (r *Router[I]) scan(now int64) ([]*Model[I], error) {
	o := r.cfg
	var out []*Model[I]
	byName := map[string]*Model[I]{}
	add := func(e *Model[I]) {
		out = append(out, e)
		byName[e.name] = e
	}
	if o.Dir != "" {
		found, err := scanModelsDir(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("server: models dir: %w", err)
		}
		for _, f := range found {
			add(&Model[I]{name: f[0], path: f[1], created: now})
		}
	}
	if o.Preset != "" {
		secs, err := readPreset(o.Preset)
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
				e = &Model[I]{name: name, path: path, created: now}
				if path == "" { // pulled from Hugging Face at its first load
					e.hfRepo = hf
					e.hf = &hub.Options{File: firstOf(kv, "hf-file", "hff"), Token: firstOf(kv, "hf-token", "hft")}
				}
				add(e)
			}
			if err := applyPreset(e, kv, o.Jinja); err != nil {
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

// Reload reads Config.Dir and Config.Preset again (GET
// /models?reload=1): new models are added, models no longer listed are
// dropped unless loaded or loading (they go once unloaded, on a later
// reload), and unloaded models take their new settings.
func (r *Router[I]) Reload() error {
	entries, err := r.scan(time.Now().Unix())
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fresh := map[string]*Model[I]{}
	for _, e := range entries {
		fresh[e.name] = e
	}
	kept := r.models[:0]
	for _, e := range r.models {
		n, listed := fresh[e.name]
		idle := e.cur == nil && e.state == Unloaded
		switch {
		case !listed && idle:
			delete(r.byName, e.name)
			continue
		case listed && idle:
			e.path, e.hfRepo, e.hf, e.settings, e.loadOnStartup = n.path, n.hfRepo, n.hf, n.settings, n.loadOnStartup
		}
		kept = append(kept, e)
	}
	r.models = kept
	for _, e := range entries {
		if _, ok := r.byName[e.name]; !ok {
			r.addLocked(e)
			r.notifyLocked(e, nil)
		}
	}
	return nil
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

// applyPreset applies a preset section's keys to a model's settings; jinja
// is how a chat-template is checked.
func applyPreset[I Instance](e *Model[I], kv map[string]string, jinja bool) error {
	atoi := func(k, v string) (*int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer", k, v)
		}
		return &n, nil
	}
	st := &e.settings
	for k, v := range kv {
		var err error
		switch strings.ReplaceAll(k, "_", "-") {
		case "model", "m", "version", "hf-repo", "hf", "hfr", "hf-file", "hff", "hf-token", "hft":
		case "chat-template":
			if err = chat.NewResolver(jinja).Check(v); err == nil {
				st.ChatTemplate = new(v)
			}
		case "chat-template-file":
			st.ChatTemplateFile = new(v)
		case "c", "ctx-size":
			st.ContextSize, err = atoi(k, v)
		case "np", "parallel":
			st.Parallel, err = atoi(k, v)
		case "n", "n-predict":
			st.NPredict, err = atoi(k, v)
		case "t", "threads":
			st.Threads, err = atoi(k, v)
		case "ngl", "n-gpu-layers", "gpu-layers":
			st.GPULayers, err = atoi(k, v)
		case "sleep-idle-seconds":
			st.SleepIdleSeconds, err = atoi(k, v)
		case "embedding", "embeddings":
			st.Embedding = new(v == "true" || v == "1")
		case "load-on-startup":
			e.loadOnStartup = v == "true" || v == "1"
		}
		if err != nil {
			return err
		}
	}
	return nil
}
