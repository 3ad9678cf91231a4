package server

// The wire form of the engine's adapters, under llama-server's JSON names
// (the answer shapes shared by the endpoints are in package wire).

// adapterJSON is engine.AdapterInfo as GET /lora-adapters lists it.
type adapterJSON struct {
	ID    int     `json:"id"`
	Path  string  `json:"path"`
	Scale float32 `json:"scale"`
}
