package router

// Router mode's downloads (POST /models) and removals (DELETE /models).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/x/llama/hub"
)

// Download starts pulling name ("org/repo[:quant]") from the Hugging Face
// hub into its cache (only the cache with Config.Offline) and lists it
// when it arrives. The events tell the outcome: a model_status
// "downloading" event now, then "download_finished" or "download_failed"
// (with the error). A name already listed or downloading is an error.
func (r *Router[I]) Download(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, exists := r.byName[name]
	if exists || r.downloading[name] {
		return fmt.Errorf("model '%s' already exists", name)
	}
	if r.downloading == nil {
		r.downloading = map[string]bool{}
	}
	r.downloading[name] = true
	r.broadcastLocked(Event{Model: name, Event: "model_status", Data: EventStatus{Status: "downloading"}})
	r.loads.Add(1)
	go r.download(name)
	return nil
}

// download pulls a model for Download and lists it when it arrives.
func (r *Router[I]) download(name string) {
	defer r.loads.Done()
	path, err := hub.Pull(r.ctx, name, hub.Options{Offline: r.cfg.Offline})
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.downloading, name)
	if err != nil {
		if r.ctx.Err() == nil {
			r.cfg.Log.Warn("model download failed", "model", name, "err", err)
		}
		r.broadcastLocked(Event{Model: name, Event: "download_failed", Data: EventError{Error: err.Error()}})
		return
	}
	if _, exists := r.byName[name]; !exists && !r.closed {
		r.addLocked(&Model[I]{name: name, path: path, created: time.Now().Unix(), downloaded: true})
	}
	r.broadcastLocked(Event{Model: name, Event: "download_finished"})
}

// Remove removes a model Download added from the list, unloading it first
// (waiting up to ctx); the files stay in the hub's cache, shared with other
// tools. Models of Config.Dir and Config.Preset are never removed.
func (r *Router[I]) Remove(ctx context.Context, name string) error {
	r.mu.Lock()
	e, exists := r.byName[name]
	r.mu.Unlock()
	if !exists {
		return fmt.Errorf("model name=%s is not found", name)
	}
	if !e.downloaded {
		return fmt.Errorf("model name=%s is not removable (not from cache)", name)
	}
	r.mu.Lock()
	loaded := e.state != Unloaded
	r.mu.Unlock()
	if err := r.Unload(ctx, e); loaded && err != nil {
		return err
	}
	r.mu.Lock()
	if r.byName[name] == e {
		delete(r.byName, name)
		r.models = slices.DeleteFunc(r.models, func(m *Model[I]) bool { return m == e })
	}
	r.mu.Unlock()
	return nil
}
