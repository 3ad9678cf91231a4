package server

import (
	"fmt"
	"math"
	"strings"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"
)

// parseSpeculative reads a request's speculative.n_max, speculative.n_min
// and speculative.p_min (llama-server's names and ranges; the pinned
// llama-server ignores them, earlier ones applied them to the draft model).
// n_max and n_min bound this request's drafts within the server's
// settings; p_min replaces the draft model's --spec-draft-p-min.
func parseSpeculative(g *wire.Gen, t *engine.Request) error {
	if err := g.SpecNMax.Int(&t.SpecNMax, 0, math.MaxInt32); err != nil {
		return err
	}
	if err := g.SpecNMin.Int(&t.SpecNMin, 0, math.MaxInt32); err != nil {
		return err
	}
	if !g.SpecPMin.Set {
		return nil
	}
	var p float32
	if err := g.SpecPMin.Float(&p); err != nil {
		return err
	}
	if !(p >= 0 && p <= 1) {
		return badRequest("%q must be between 0 and 1, got %g", "speculative.p_min", p)
	}
	t.SpecPMin = &p
	return nil
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
