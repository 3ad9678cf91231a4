package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoMaxProcs(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		ncpu, threads, batch int
		want                 int
	}{
		{"defaults take every core", 2, 0, 0, 1},
		{"threads on every core", 2, 2, 2, 1},
		{"one core left", 2, 1, 1, 1},
		{"batch threads count", 8, 2, 6, 2},
		{"half the cores", 16, 8, 0, 8},
		{"more threads than cores", 4, 8, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, goMaxProcs(tc.ncpu, tc.threads, tc.batch))
		})
	}
}
