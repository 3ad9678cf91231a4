package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPostSamplingProbsOfInfiniteLogits sends post_sampling_probs with a
// logit_bias at the float32 maximum on a few tokens (their logits overflow
// to +inf) or with every token banned (all -inf): the chain's softmax
// gives NaN probabilities, and encoding/json refuses NaN. The whole answer was a 500 ("encode response: json:
// unsupported value: NaN") and the stream a 200 with no event at all
// (llama-server answers both, with "prob": null). Each must now be a 200
// whose probabilities are finite numbers, and the server must go on.
func TestPostSamplingProbsOfInfiniteLogits(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	bias := `[[1,3.4028234e38],[2,3.4028234e38],[300,3.4028234e38]]`
	var banned strings.Builder // every token of the vocabulary banned
	banned.WriteString("[")
	for i := range 512 {
		if i > 0 {
			banned.WriteString(",")
		}
		banned.WriteString("[" + strconv.Itoa(i) + ",false]")
	}
	banned.WriteString("]")
	for _, c := range []struct {
		name, path, body string
		stream           bool
	}{
		{"completion", "/completion", `{"prompt":"Once","n_predict":3,"n_probs":3,"post_sampling_probs":true,"logit_bias":` + bias + `}`, false},
		{"completion stream", "/completion", `{"prompt":"Once","n_predict":3,"n_probs":3,"post_sampling_probs":true,"stream":true,"logit_bias":` + bias + `}`, true},
		{"completion two prompts", "/completion", `{"prompt":["Once","Lily"],"n_predict":2,"n_probs":2,"post_sampling_probs":true,"logit_bias":` + bias + `}`, false},
		{"completion greedy", "/completion", `{"prompt":"Once","n_predict":2,"n_probs":3,"post_sampling_probs":true,"temperature":0,"logit_bias":` + bias + `}`, false},
		{"every token banned", "/completion", `{"prompt":"Once","n_predict":2,"n_probs":3,"post_sampling_probs":true,"logit_bias":` + banned.String() + `}`, false},
		{"every token banned stream", "/completion", `{"prompt":"Once","n_predict":2,"n_probs":3,"post_sampling_probs":true,"stream":true,"logit_bias":` + banned.String() + `}`, true},
		{"completion log probs", "/completion", `{"prompt":"Once","n_predict":2,"n_probs":3,"logit_bias":` + bias + `}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+c.path, "application/json", strings.NewReader(c.body))
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
			var bodies [][]byte
			if c.stream {
				for line := range bytes.Lines(data) {
					if p, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
						bodies = append(bodies, p)
					}
				}
				require.NotEmpty(t, bodies, "the stream sent no event")
			} else {
				bodies = [][]byte{data}
			}
			probs := 0
			for _, b := range bodies {
				var v any
				require.NoError(t, json.Unmarshal(b, &v), "%s", b)
				assert.NotContains(t, string(b), `"error"`)
				probs += strings.Count(string(b), `"prob":`) + strings.Count(string(b), `"logprob":`)
			}
			assert.Positive(t, probs, "no probability in %s", data)
		})
	}
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Once","n_predict":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
