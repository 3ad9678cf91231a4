package llama

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The arena cap is set unless the environment sets one for glibc.
func TestMallocArenas(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool // the environment caps them: no cap is set
	}{
		{"no environment", nil, false},
		{"MALLOC_ARENA_MAX", map[string]string{"MALLOC_ARENA_MAX": "8"}, true},
		{"a tunable", map[string]string{"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4"}, true},
		{"other tunables", map[string]string{"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, envCapsArenas(func(k string) string { return tc.env[k] }))
		})
	}
}
