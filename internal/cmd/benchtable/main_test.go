package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAndWrite(t *testing.T) {
	in := `goos: linux
BenchmarkLimitThroughput/model=125M-Q8_0/clients=8-2   	1	  100.0 limit-tok/s	 0.80 ratio	 80.0 tok/s
BenchmarkLimitThroughput/model=125M-Q8_0/clients=8-2   	1	  120.0 limit-tok/s	 0.75 ratio	 90.0 tok/s
BenchmarkLimitThroughput/model=125M-Q8_0/clients=8-2   	1	  110.0 limit-tok/s	 0.90 ratio	 99.0 tok/s
BenchmarkLimitTTFT-2   	3	 12.5 shared-p50-ms	 0.5 shared-ratio
PASS
`
	rows, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, []float64{80, 90, 99}, rows[0].metrics["tok/s"])
	var out bytes.Buffer
	write(&out, rows, map[string]float64{"BenchmarkLimitThroughput/model=125M-Q8_0/clients=8": 55})
	for _, want := range []string{
		"| LimitThroughput/model=125M-Q8_0/clients=8 | tok/s 90.0, limit-tok/s 110, ratio 0.80, llama-server tok/s 55.0, llama-server ratio 0.50 | 3 |",
		"| LimitTTFT | shared-p50-ms 12.5, shared-ratio 0.50 | 1 |",
	} {
		assert.Contains(t, out.String(), want)
	}
}

func TestParseBadMetric(t *testing.T) {
	_, err := parse(strings.NewReader("BenchmarkX-2 1 abc tok/s\n"))
	require.Error(t, err)
}
