//go:build !linux

package llama

// Elsewhere ggml places its own threads, and the calling thread is left
// as it is.
const (
	schedOther = 0
	schedFIFO  = 1
	schedBatch = 3
)

func getSchedule() (schedule, error) { return schedule{}, nil }

func setSchedule(schedule) error { return nil }
