package benchlimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(5), 0.99, 5 * time.Millisecond},
		{ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 0.99, 4 * time.Millisecond},
	} {
		assert.Equal(t, tc.want, Quantile(tc.ds, tc.q))
	}
}
