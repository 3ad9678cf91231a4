package llama

import (
	"math"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// Adapters.

// Adapter is a LoRA adapter loaded for a model. It is safe for concurrent
// use; Close frees it (idempotent), as does closing its Model. While a
// Context uses it (SetAdapters), Close refuses with an error matching
// ErrBusy: remove it from those contexts (SetAdapters, or close them) first.
type Adapter struct {
	model *Model
	mu    sync.Mutex
	ptr   capi.AdapterLora
	path  string
	users map[*Context]struct{} // contexts whose adapters include it
}

// unuse records that c no longer uses the adapter.
func (a *Adapter) unuse(c *Context) {
	a.mu.Lock()
	delete(a.users, c)
	a.mu.Unlock()
}

// LoadAdapter loads a LoRA adapter GGUF for the model.
func (m *Model) LoadAdapter(path string) (*Adapter, error) {
	done, err := m.use("load adapter")
	if err != nil {
		return nil, err
	}
	defer done()
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		if err == nil {
			err = os.ErrInvalid
		}
		return nil, &Error{Code: CodeLoad, Op: "load adapter", Err: err}
	}
	var p capi.AdapterLora
	// Loading uploads the adapter's tensors, to the workers too.
	if err := m.rpcGuard("load adapter", func() { p = capi.AdapterLoraInit(m.ptr, path) }); err != nil {
		return nil, err
	}
	if p == 0 {
		return nil, errorf(CodeLoad, "load adapter", "llama.cpp could not load %s for this model", path)
	}
	a := &Adapter{model: m, ptr: p, path: path, users: map[*Context]struct{}{}}
	if !m.addChild(a) {
		_ = m.rpcGuard("close adapter", func() { capi.AdapterLoraFree(p) })
		return nil, closedErr("load adapter", "model")
	}
	return a, nil
}

// Path returns the adapter's file ("" for nil).
func (a *Adapter) Path() string {
	if a == nil {
		return ""
	}
	return a.path
}

// Meta returns one metadata value of the adapter.
func (a *Adapter) Meta(key string) (string, bool) {
	if a == nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ptr == 0 {
		return "", false
	}
	return a.model.strCall("adapter meta", func(b unsafe.Pointer, s uintptr) int32 {
		return capi.AdapterMetaValStr(a.ptr, key, b, s)
	})
}

// closeFromParent frees the adapter as its model closes, after the
// model's contexts are closed.
func (a *Adapter) closeFromParent() { a.close(true) }

func (a *Adapter) close(force bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !force && len(a.users) > 0 {
		return &Error{Code: CodeBusy, Op: "close adapter", Msg: "a context still uses the adapter (remove it with SetAdapters first)"}
	}
	if a.ptr != 0 {
		// llama.cpp frees adapters with their model; free only while the
		// model lives. After a worker failed, its buffers are left.
		p := a.ptr
		_ = a.model.rpcGuard("close adapter", func() { capi.AdapterLoraFree(p) })
		a.ptr = 0
	}
	return nil
}

// Close frees the adapter. It fails with an error matching ErrBusy while a
// Context uses the adapter (see SetAdapters).
func (a *Adapter) Close() error {
	if a == nil {
		return errorf(CodeInvalid, "close adapter", "nil *Adapter")
	}
	if err := a.close(false); err != nil {
		return err
	}
	a.model.removeChild(a)
	return nil
}

// AdapterScale is an adapter with the scale to apply it at.
type AdapterScale struct {
	Adapter *Adapter
	Scale   float32
}

// SetAdapters makes the given adapters (and only them) active on the
// context, each at its scale; nil removes all. Swapping adapters never
// reloads the model.
func (c *Context) SetAdapters(adapters []AdapterScale) error {
	if err := c.lock("set adapters"); err != nil {
		return err
	}
	defer c.unlock()
	ptrs := make([]uintptr, 0, len(adapters))
	scales := make([]float32, 0, len(adapters))
	for _, a := range adapters {
		if a.Adapter == nil {
			return errorf(CodeInvalid, "set adapters", "nil *Adapter")
		}
		if a.Adapter.model != c.model {
			return errorf(CodeInvalid, "set adapters", "adapter %s belongs to another model", a.Adapter.path)
		}
		if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
			return errorf(CodeInvalid, "set adapters", "scale %v is not finite", a.Scale)
		}
		scales = append(scales, a.Scale)
	}
	// Mark the new adapters used (refusing closed ones) before llama.cpp
	// sees them, so that none can be freed while this context holds it.
	var used []*Adapter
	undo := func() {
		for _, a := range used {
			if !slices.Contains(c.adapters, a) {
				a.unuse(c)
			}
		}
	}
	for _, as := range adapters {
		a := as.Adapter
		a.mu.Lock()
		p := a.ptr
		if p != 0 {
			a.users[c] = struct{}{}
		}
		a.mu.Unlock()
		if p == 0 {
			undo()
			return closedErr("set adapters", "adapter")
		}
		used = append(used, a)
		ptrs = append(ptrs, uintptr(p))
	}
	var pp, sp unsafe.Pointer
	if len(ptrs) > 0 {
		pp, sp = unsafe.Pointer(&ptrs[0]), unsafe.Pointer(&scales[0])
	}
	var rc int32
	if err := c.model.rpcGuard("set adapters", func() { rc = capi.SetAdaptersLora(c.ptr, pp, uintptr(len(ptrs)), sp) }); err != nil {
		undo()
		return err
	}
	if rc != 0 {
		undo()
		return errorf(CodeInvalid, "set adapters", "llama.cpp refused the adapters (code %d)", rc)
	}
	for _, a := range c.adapters {
		if !slices.Contains(used, a) {
			a.unuse(c)
		}
	}
	c.adapters = used
	return nil
}

// SetControlVector applies a control vector: data holds one direction of
// EmbeddingSize floats per layer, starting at layer 1, and is applied to
// layers [layerStart, layerEnd]. nil (or empty) data clears it.
func (c *Context) SetControlVector(data []float32, layerStart, layerEnd int) error {
	if err := c.lock("control vector"); err != nil {
		return err
	}
	defer c.unlock()
	nEmbd := int(capi.ModelNEmbd(c.model.ptr))
	if len(data) == 0 {
		// nil or empty data: clearing and applying write to the vectors' buffers, the workers' too.
		return c.model.rpcGuard("control vector", func() { capi.SetAdapterCvec(c.ptr, nil, 0, int32(nEmbd), -1, -1) })
	}
	nLayer := int(capi.ModelNLayer(c.model.ptr))
	if len(data)%nEmbd != 0 || len(data)/nEmbd > nLayer {
		return errorf(CodeInvalid, "control vector", "data of %d floats is not up to %d layers of %d", len(data), nLayer, nEmbd)
	}
	if layerStart < 0 || layerEnd < layerStart || layerEnd > nLayer {
		return errorf(CodeInvalid, "control vector", "layers [%d, %d] out of range [0, %d]", layerStart, layerEnd, nLayer)
	}
	var rc int32
	if err := c.model.rpcGuard("control vector", func() {
		rc = capi.SetAdapterCvec(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)), int32(nEmbd), int32(layerStart), int32(layerEnd))
	}); err != nil {
		return err
	}
	if rc != 0 {
		return errorf(CodeInvalid, "control vector", "llama.cpp refused it (code %d)", rc)
	}
	return nil
}
