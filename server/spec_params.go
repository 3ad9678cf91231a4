package server

import (
	"fmt"
	"math"
	"strings"

	"github.com/x/llama/engine"
)

// parseSpeculative reads a request's speculative.n_max and
// speculative.n_min (llama-server's names; the pinned llama-server ignores
// them, earlier ones applied them to the draft model). They bound this
// request's drafts within the server's settings.
func parseSpeculative(f reqFields, t *engine.Request) error {
	if err := f.int("speculative.n_max", &t.SpecNMax, 0, math.MaxInt32); err != nil {
		return err
	}
	return f.int("speculative.n_min", &t.SpecNMin, 0, math.MaxInt32)
}

// writeSpecPerPos writes llama-server's labeled counter of accepted draft
// tokens by draft position (nothing before the first draft).
func writeSpecPerPos(sb *strings.Builder, m engine.Metrics) {
	if len(m.DraftAcceptedPerPos) == 0 {
		return
	}
	const name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
	fmt.Fprintf(sb, "# HELP %s Accepted tokens per draft position\n# TYPE %s counter\n", name, name)
	for i, n := range m.DraftAcceptedPerPos {
		fmt.Fprintf(sb, "%s{position=\"%d\"} %d\n", name, i, n)
	}
}
